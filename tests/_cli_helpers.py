"""What the command-line tests share: a tiny labelled file and template, a
model trained on them (the ``files`` fixture), and ways to run ``main`` and
read crf_test's output."""

import io
import sys

import pytest

from skgpstruct.cli import main

TRAIN = """\
He PRP B
reckons VBZ O
the DT B
current JJ I
account NN I
deficit NN I

It PRP B
will MD O
narrow VB O
to TO O
only RB B
# NN I
1.8 CD I
billion CD I

The DT B
pound NN I
is VBZ O
widely RB O
expected VBN O
"""

TEMPLATE = """\
# a CRF++ template
U00:%x[0,0]
U01:%x[0,1]
U02:%x[-1,1]/%x[0,1]

B
"""


def run(argv, capsys, stdin=None, monkeypatch=None):
    """``main(argv)`` -> (status, stdout, stderr); ``stdin`` bytes if given."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def parse_blocks(text):
    """crf_test output -> list of (header fields or None, token rows)."""
    blocks = []
    for chunk in text.split("\n\n"):
        lines = [line for line in chunk.split("\n") if line]
        if not lines:
            continue
        header = None
        if lines[0].startswith("# "):
            header = lines[0][2:].split(" ")
            lines = lines[1:]
        blocks.append((header, [line.split("\t") for line in lines]))
    return blocks


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny labelled file, its template and a CRF model trained on them."""
    d = tmp_path_factory.mktemp("cli")
    (d / "train.data").write_text(TRAIN)
    (d / "template").write_text(TEMPLATE)
    status = main(["train", "--template", str(d / "template"), "--max-iter", "30",
                   "--random-state", "0", str(d / "train.data"), str(d / "m.skg")])
    assert status == 0
    return d
