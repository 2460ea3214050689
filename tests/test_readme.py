"""The README's Python examples run, and its test command is CI's."""

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


def _cells(line):
    return [c.strip().replace("*", "") for c in line.strip().strip("|").split("|")]


def _matches(printed, value):
    """``printed`` is ``value`` rounded to the digits it shows."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(printed) - value) <= 0.5 * 10.0 ** -decimals + 1e-12


def test_calibration_table_matches_its_results_file():
    """The README's calibration table quotes benchmarks/results/calibration.json
    (mean over folds; the CRFs at sklearn-crfsuite's best-error c2) to the
    digits it prints: error % / log loss / ECE % / error % at 80 % coverage."""
    import json

    results = README.parent / "benchmarks" / "results" / "calibration.json"
    data = json.loads(results.read_text())
    rows = {(r["task"], r["features"], r["model"]): r for r in data["rows"]}
    tasks = {"base NP": "basenp", "chunking": "chunking", "base NP large": "basenp_large"}
    paths = {"papers'": "gpstruct", "CRF++ template": "crfpp"}
    lines = README.read_text().splitlines()
    start = lines.index("| task / features | GPStructTagger | exact CRF | sklearn-crfsuite |")
    checked = 0
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        name, *models = _cells(line)
        task, path = name.rsplit(", ", 1)
        key = (tasks[task], paths[path])
        c2 = data["best_crfsuite_c2"]["/".join(key)]
        for model, cell in zip(["GPStructTagger", f"RandomizedCRFTagger exact c2={c2}",
                                f"sklearn-crfsuite c2={c2}"], models):
            row = rows[key + (model,)]
            printed = [p.strip() for p in cell.split("/")]
            wanted = [row["error %"], row["log loss"], row["ECE %"],
                      row["error % at 80 % coverage"]]
            for p, v in zip(printed, wanted):
                assert _matches(p, v), (name, model, p, v)
                checked += 1
    assert checked == 6 * 3 * 4


def test_transfer_table_matches_its_results_files():
    """The README's UD Hungarian table quotes benchmarks/results/
    calibration_transfer{,_n100,_n30}.json to the digits it prints."""
    import json

    results = README.parent / "benchmarks" / "results"
    files = {"300": "calibration_transfer", "100": "calibration_transfer_n100",
             "30": "calibration_transfer_n30"}
    lines = README.read_text().splitlines()
    start = lines.index("| training sentences | GPStructTagger | exact CRF | sklearn-crfsuite |")
    checked = 0
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        n_train, *models = _cells(line)
        data = json.loads((results / f"{files[n_train]}.json").read_text())
        rows = {r["model"]: r for r in data["rows"]}
        for model, cell in zip(["GPStructTagger", "RandomizedCRFTagger exact",
                                "sklearn-crfsuite"], models):
            row = rows[model]
            wanted = [row["error %"], row["log loss"], row["ECE %"],
                      row["error % at 80 % coverage"]]
            for p, v in zip([p.strip() for p in cell.split("/")], wanted):
                assert _matches(p, v), (n_train, model, p, v)
                checked += 1
    assert checked == 3 * 3 * 4
