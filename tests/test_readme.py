"""The README's Python examples run, its test command is CI's, it stays a front
door (at most 150 lines, links that lead somewhere), and the result tables of the
README and of the results page (doc/results.rst) quote the benchmarks' results
files."""

import json
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
CI = Path(__file__).resolve().parents[1] / ".ci" / "run"
RESULTS_PAGE = README.parent / "doc" / "results.rst"


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


def test_readme_is_a_front_door():
    """At most 150 lines (the rest is in doc/), and every relative link leads
    to a file of the repository."""
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "README.md is over 150 lines: move text to doc/"
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    relative = [ln for ln in links if not re.match(r"[a-z]+:", ln)]
    assert relative, "the README links to no documentation page"
    for link in relative:
        assert (README.parent / link.split("#")[0]).is_file(), link


_METRICS = ("error %", "log loss", "ECE %", "error % at 80 % coverage")
_RESULTS = README.parent / "benchmarks" / "results"


def _results(script, key="default"):
    """The results of ``benchmarks/<script>.py``'s run ``key`` (a dict with
    its ``rows``): section ``key`` of ``<script>.json`` where the results
    file is in sections, else (one file per run) ``<script>.json`` for the
    default run and ``<script>_<key>.json`` for a variant."""
    data = json.loads((_RESULTS / f"{script}.json").read_text())
    if "sections" in data:
        return data["sections"][key]
    if key != "default":
        data = json.loads((_RESULTS / f"{script}_{key}.json").read_text())
    return data


def _split_cells(line):
    return [c.strip().replace("*", "") for c in line.strip().strip("|").split("|")]


def _md_table(path, header):
    """``(first cell, [model cells])`` of each row of the Markdown table of
    ``path`` under ``header``, bold marks removed."""
    lines = path.read_text().splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        name, *cells = _split_cells(line)
        rows.append((name, cells))
    return rows


def _rst_tables(path):
    """The rows (lists of cells, bold marks removed) of each ``list-table``
    of the reST page ``path``, its header row first."""
    tables = []
    rows = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(".. list-table::"):
            rows = []
            tables.append(rows)
        elif rows is not None and line and not line.startswith(" "):
            rows = None
        elif rows is not None and line.strip().startswith("* - "):
            rows.append([line.strip()[4:]])
        elif rows is not None and line.strip().startswith("- ") and rows:
            rows[-1].append(line.strip()[2:])
        elif rows is not None and line.startswith("       ") and rows:
            rows[-1][-1] += " " + line.strip()  # a cell continued on the next line
    return [[[c.strip().replace("*", "") for c in row] for row in table] for table in tables]


def _rst_table(path, header):
    """``(first cell, [model cells])`` of each row of the one ``list-table``
    of ``path`` whose header row is ``header`` (a Markdown-style header
    line)."""
    wanted = _split_cells(header)
    found = [table for table in _rst_tables(path) if table and table[0] == wanted]
    assert len(found) == 1, (path.name, header, len(found))
    return [(row[0], row[1:]) for row in found[0][1:]]


def _check_cell(cell, row, where, metrics=_METRICS):
    """``cell`` (``"a / b / c / d"``) is ``row``'s ``metrics`` (by default
    error % / log loss / ECE % / error % at 80 % coverage), each rounded to
    the digits it shows; returns the number of values checked."""
    printed = [p.strip() for p in cell.split("/")]
    assert len(printed) == len(metrics), where
    for p, metric in zip(printed, metrics):
        decimals = len(p.split(".")[1]) if "." in p else 0
        assert abs(float(p) - row[metric]) <= 0.5 * 10.0 ** -decimals + 1e-12, \
            (where, metric, p, row[metric])
    return len(printed)


_CALIBRATION_HEADER = "| task / features | GPStructTagger | exact CRF | sklearn-crfsuite |"


def _check_calibration_table(table, metrics, gp_section="default"):
    """Each cell of ``table`` (rows of :func:`_md_table` / :func:`_rst_table`)
    quotes benchmarks/results/calibration.json's ``metrics`` for its task,
    feature path and model (GPStructTagger's from the section
    ``gp_section``); returns the number of values checked."""
    data = _results("calibration")
    rows = {(r["task"], r["features"], r["model"]): r for r in data["rows"]}
    rows.update({(r["task"], r["features"], r["model"]): r
                 for r in _results("calibration", gp_section)["rows"]
                 if r["model"] == "GPStructTagger"})
    tasks = {"base NP": "basenp", "chunking": "chunking", "base NP large": "basenp_large"}
    paths = {"papers'": "gpstruct", "CRF++ template": "crfpp"}
    checked = 0
    for name, cells in table:
        task, path = name.rsplit(", ", 1)
        key = (tasks[task], paths[path])
        c2 = data["best_crfsuite_c2"]["/".join(key)]
        assert len(cells) == 3, name
        for model, cell in zip(["GPStructTagger", f"RandomizedCRFTagger exact c2={c2}",
                                f"sklearn-crfsuite c2={c2}"], cells):
            checked += _check_cell(cell, rows[key + (model,)], (name, model), metrics)
    return checked


def test_readme_results_table_matches_its_results_file():
    """The README's headline table quotes benchmarks/results/calibration.json
    (error % / ECE %, mean over folds; GPStructTagger's from the run of the
    current defaults, the section after_issue43; the CRFs at
    sklearn-crfsuite's best-error c2) to the digits it prints."""
    table = _md_table(README, _CALIBRATION_HEADER)
    assert _check_calibration_table(table, ("error %", "ECE %"),
                                    gp_section="after_issue43") == 6 * 3 * 2


def test_calibration_table_matches_its_results_file():
    """The results page's calibration table quotes
    benchmarks/results/calibration.json (mean over folds; the CRFs at
    sklearn-crfsuite's best-error c2) to the digits it prints."""
    table = _rst_table(RESULTS_PAGE, _CALIBRATION_HEADER)
    assert _check_calibration_table(table, _METRICS) == 6 * 3 * 4


def test_transfer_table_matches_its_results_files():
    """The results page's UD Hungarian table quotes benchmarks/results/
    calibration_transfer.json's runs (300, 100 and 30 training sentences)
    to the digits it prints."""
    runs = {"300": "default", "100": "n100", "30": "n30"}
    checked = 0
    for n_train, cells in _rst_table(
            RESULTS_PAGE,
            "| training sentences | GPStructTagger | exact CRF | sklearn-crfsuite |"):
        data = _results("calibration_transfer", runs[n_train])
        rows = {r["model"]: r for r in data["rows"]}
        for model, cell in zip(["GPStructTagger", "RandomizedCRFTagger exact",
                                "sklearn-crfsuite"], cells):
            checked += _check_cell(cell, rows[model], (n_train, model))
    assert checked == 3 * 3 * 4
