"""Speed of :func:`skgpstruct.datasets.load_conllu` against the ``conllu`` package.

Both read ``ud/hu_szeged/hu_szeged-ud-train.conllu`` (under
:func:`~skgpstruct.datasets.get_data_home`) into the same output: per
sentence the FORM 1-tuples and the UPOS + "|" + FEATS tags. The ``conllu``
package (``conllu.parse_incr``, pure Python, not a dependency of
skgpstruct: ``pip install conllu`` to compare) parses every field (FEATS
into dicts, HEAD into ints), so its tag is rebuilt from the raw FEATS
string of the token. Multiword tokens and empty nodes are skipped in both.

Prints a markdown table of the median of 5 timed reads (after one untimed
read) and the ratio; writes no results file.

Usage::

    python benchmarks/conllu_reader.py [PATH]
"""

import importlib.metadata
import sys
import time
from pathlib import Path

import numpy as np

from skgpstruct.datasets import get_data_home, load_conllu

REPEATS = 5


def _median_time(fn):
    fn()  # warm-up: file cache, imports
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _read_with_conllu(path):
    import conllu

    X, y = [], []
    with open(path, encoding="utf-8") as f:
        for sentence in conllu.parse_incr(f):
            x_seq, y_seq = [], []
            for token in sentence:
                if not isinstance(token["id"], int):  # (3, "-", 4), (5, ".", 1)
                    continue
                feats = token["feats"]
                x_seq.append((token["form"],))
                if feats:
                    feats = "|".join(f"{k}={v}" for k, v in feats.items())
                    y_seq.append(f"{token['upos']}|{feats}")
                else:
                    y_seq.append(token["upos"])
            X.append(x_seq)
            y.append(y_seq)
    return X, y


def main(argv):
    path = Path(argv[1]) if len(argv) > 1 else (
        get_data_home() / "ud" / "hu_szeged" / "hu_szeged-ud-train.conllu")
    if not path.is_file():
        print(f"{path} not found: pass a CoNLL-U file or set SKGPSTRUCT_DATA.")
        return 1
    X, y = load_conllu(path)
    size_mb = path.stat().st_size / 1e6
    n_tokens = sum(len(s) for s in X)
    print(f"{path.name}: {size_mb:.2f} MB, {len(X)} sentences, {n_tokens} "
          f"tokens; median of {REPEATS} reads\n")
    rows = [("skgpstruct load_conllu", _median_time(lambda: load_conllu(path)))]
    try:
        import conllu
    except ImportError:
        conllu = None
    if conllu is not None:
        same = _read_with_conllu(path) == (X, y)
        version = importlib.metadata.version("conllu")
        rows.append((f"conllu {version} parse_incr",
                     _median_time(lambda: _read_with_conllu(path))))
    print("| reader | seconds | tokens / s | MB / s |")
    print("|---|---|---|---|")
    for name, sec in rows:
        print(f"| {name} | {sec:.4f} | {n_tokens / sec:,.0f} | "
              f"{size_mb / sec:.1f} |")
    print()
    if conllu is None:
        print("The conllu package is not installed (pip install conllu): "
              "timed load_conllu only.")
    else:
        print(f"conllu / load_conllu time ratio: {rows[1][1] / rows[0][1]:.1f}x"
              f"; same output: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
