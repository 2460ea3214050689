"""The README's Python examples run, its test command is CI's, and its result tables
quote the benchmarks' results files."""

import json
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
CI = Path(__file__).resolve().parents[1] / ".ci" / "run"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("code", _python_blocks())
def test_readme_example_runs(code, capsys):
    exec(compile(code, "README.md", "exec"), {})


def test_readme_commands_match_ci():
    text = README.read_text()
    setup = re.search(r"## Set-up.*?```bash\n(.*?)```", text, flags=re.S).group(1)
    lines = [ln.strip() for ln in setup.strip().splitlines()]
    assert len(lines) == 2, "the README's set-up is exactly two commands"
    ci = CI.read_text()
    assert 'pip install --quiet -e ".[test]"' in ci and "python -m skgpstruct demo" in ci
    assert lines[1] in ci.splitlines()


_METRICS = ("error %", "log loss", "ECE %", "error % at 80 % coverage")
_RESULTS = README.parent / "benchmarks" / "results"


def _table(header):
    """``(first cell, [model cells])`` of each row of the README table under
    ``header``, bold marks removed."""
    lines = README.read_text().splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        name, *cells = [c.strip().replace("*", "") for c in line.strip().strip("|").split("|")]
        rows.append((name, cells))
    return rows


def _check_cell(cell, row, where):
    """``cell`` (``"a / b / c / d"``) is ``row``'s error % / log loss / ECE % /
    error % at 80 % coverage, each rounded to the digits it shows; returns
    the number of values checked."""
    printed = [p.strip() for p in cell.split("/")]
    assert len(printed) == len(_METRICS), where
    for p, metric in zip(printed, _METRICS):
        decimals = len(p.split(".")[1]) if "." in p else 0
        assert abs(float(p) - row[metric]) <= 0.5 * 10.0 ** -decimals + 1e-12, \
            (where, metric, p, row[metric])
    return len(printed)


def test_calibration_table_matches_its_results_file():
    """The README's calibration table quotes benchmarks/results/calibration.json
    (mean over folds; the CRFs at sklearn-crfsuite's best-error c2) to the
    digits it prints."""
    data = json.loads((_RESULTS / "calibration.json").read_text())
    rows = {(r["task"], r["features"], r["model"]): r for r in data["rows"]}
    tasks = {"base NP": "basenp", "chunking": "chunking", "base NP large": "basenp_large"}
    paths = {"papers'": "gpstruct", "CRF++ template": "crfpp"}
    checked = 0
    for name, cells in _table("| task / features | GPStructTagger | exact CRF | sklearn-crfsuite |"):
        task, path = name.rsplit(", ", 1)
        key = (tasks[task], paths[path])
        c2 = data["best_crfsuite_c2"]["/".join(key)]
        for model, cell in zip(["GPStructTagger", f"RandomizedCRFTagger exact c2={c2}",
                                f"sklearn-crfsuite c2={c2}"], cells):
            checked += _check_cell(cell, rows[key + (model,)], (name, model))
    assert checked == 6 * 3 * 4


def test_transfer_table_matches_its_results_files():
    """The README's UD Hungarian table quotes benchmarks/results/
    calibration_transfer{,_n100,_n30}.json to the digits it prints."""
    files = {"300": "calibration_transfer", "100": "calibration_transfer_n100",
             "30": "calibration_transfer_n30"}
    checked = 0
    for n_train, cells in _table(
            "| training sentences | GPStructTagger | exact CRF | sklearn-crfsuite |"):
        data = json.loads((_RESULTS / f"{files[n_train]}.json").read_text())
        rows = {r["model"]: r for r in data["rows"]}
        for model, cell in zip(["GPStructTagger", "RandomizedCRFTagger exact",
                                "sklearn-crfsuite"], cells):
            checked += _check_cell(cell, rows[model], (n_train, model))
    assert checked == 3 * 3 * 4
