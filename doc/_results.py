"""Turn the Markdown tables of ``benchmarks/results/*.md`` into reST.

Run by ``conf.py`` at every build: each ``<name>.md`` becomes
``_generated/results/<name>.inc`` (headings as rubrics, tables as
``list-table``, bullets as bullet lists), which the pages ``.. include::``;
``_generated/results/all.inc`` holds one section per results file (for the
benchmarks page), so a new results file shows up without editing the docs.
Only the subset of Markdown that the benchmark scripts write is understood.
"""

import re
from pathlib import Path

#: Section titles of the results files on the benchmarks page, in order;
#: files not named here follow, titled by their stem.
TITLES = {
    "gpstruct_table1": "GPstruct protocol: token error against sklearn-crfsuite and CRF++",
    "crfsuite_compare": "Exact RandomizedCRFTagger against sklearn-crfsuite",
    "calibration": "Calibration of the marginals: three tasks, two feature paths",
    "calibration_paired": "Calibration: the GP against the plain CRFs, paired over the folds",
    "calibration_basenp_inducing": "Calibration: base NP, inducing-point form",
    "calibration_basenp_coupled": "Calibration: base NP, coupled posterior",
    "temperature_scaling": "Temperature scaling of both taggers",
    "temperature_scaling_crfpp_gp": "Temperature scaling: GPStructTagger on the CRF++ template",
    "active_learning": "Active learning",
    "active_learning_variants": "Active learning: batch and density-weighted token mutual information",
    "active_learning_ud": "Active learning on UD Hungarian UPOS",
    "active_learning_repeats": "Active learning: three seeds per fold",
    "active_learning_cvrepeats3": "Active learning: three shuffled splits in the GP's validation",
    "active_learning_autopaths": "Active learning: path mutual information with more paths per draw",
    "active_learning_power": "Active learning: stochastic batches of the path mutual information",
    "active_learning_prior": "Active learning: path mutual information with unseen features at their prior",
    "active_learning_epig": "Active learning: expected predictive information gain",
    "active_learning_epig_repeats": "Active learning: expected predictive information gain, three seeds per fold",
    "active_learning_acqseed1": "Active learning: path mutual information, other draws of the scores (1)",
    "active_learning_acqseed2": "Active learning: path mutual information, other draws of the scores (2)",
    "active_learning_bootstrap": "Active learning: how often the 60-sentence bar would pass on other folds",
    "information_gain_cost": "Cost of the expected predictive information gain, both forms",
    "ud_morph": "UD morphological tagging (444 labels)",
    "rdp_scaling": "Randomized DP: epoch time and accuracy against exact DP",
    "rdp_tables": "Randomized DP: estimates of log Z (Fu et al. tables 2-4)",
    "rdp_tables_lr0.001": "Randomized DP: estimates of log Z, sharper emissions",
    "chain_kernels": "Chain kernels: batched forward-backward",
    "gpu": "GPU kernels",
    "coupled_additive": "Coupled against mean-field sparse GPs",
    "soak": "Soak test",
    "blas_limit": "BLAS thread limit",
    "dense_features": "Dense features: dense columns against pair matrices",
    "temperature_sweep_chunking_gpstruct":
        "Validated temperature against the grid: chunking, papers' features",
    "temperature_sweep_basenp_large_gpstruct":
        "Validated temperature against the grid: base NP large, papers' features",
    "validation_seeds_chunking_gpstruct_r1":
        "Over the validation's seeds: chunking, papers' features",
    "validation_seeds_chunking_gpstruct_r3":
        "Over the validation's seeds, three splits: chunking, papers' features",
    "validation_seeds_basenp_large_gpstruct_r1":
        "Over the validation's seeds: base NP large, papers' features",
    "validation_seeds_basenp_large_gpstruct_r3":
        "Over the validation's seeds, three splits: base NP large, papers' features",
}

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_SPECIAL = re.compile(r"([\\*_|`<>\[\]])")


def _escape(text):
    return _SPECIAL.sub(r"\\\1", text)


def inline(text):
    """Markdown inline code and bold to reST; everything else escaped."""
    out = []
    pos = 0
    for match in _CODE.finditer(text):
        out.append(("text", text[pos:match.start()]))
        out.append(("code", match.group(1)))
        pos = match.end()
    out.append(("text", text[pos:]))
    pieces = []
    for i, (kind, value) in enumerate(out):
        if kind == "code":
            before = out[i - 1][1] if i > 0 else ""
            after = out[i + 1][1] if i + 1 < len(out) else ""
            pre = "\\ " if before and (before[-1].isalnum() or before[-1] in "(/") else ""
            post = "\\ " if after and (after[0].isalnum() or after[0] in "(/") else ""
            pieces.append(f"{pre}``{value}``{post}")
        else:
            parts = []
            last = 0
            for bold in _BOLD.finditer(value):
                parts.append(_escape(value[last:bold.start()]))
                parts.append(f"**{_escape(bold.group(1))}**")
                last = bold.end()
            parts.append(_escape(value[last:]))
            pieces.append("".join(parts))
    return "".join(pieces)


def _cells(line, maxsplit=0):
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line, maxsplit=maxsplit)]


def _cell(text):
    text = inline(text.replace("\\|", "|"))
    if text[:1] in "-+*#:" and text:
        text = "\\" + text
    return text


def _table(lines):
    header = _cells(lines[0])
    rows = [_cells(line) for line in lines[2:]]
    width = len(_cells(lines[1]))
    if len(header) > width:  # a '|' inside the last header cell ("max |diff|")
        header = _cells(lines[0], maxsplit=width - 1)
    fixed = []
    for row in rows:
        if len(row) > width:  # a '|' inside the first cell (e.g. "POS|chunk")
            extra = len(row) - width
            row = ["|".join(row[: extra + 1])] + row[extra + 1:]
        fixed.append(row + [""] * (width - len(row)))
    out = [".. list-table::", "   :header-rows: 1", "   :class: results-table", ""]
    for row in [header] + fixed:
        for j, cell in enumerate(row):
            text = _cell(cell)
            lead = "   * - " if j == 0 else "     - "
            out.append((lead + text).rstrip())
    out.append("")
    return out


def md_to_rst(text):
    """reST for the Markdown of one results file."""
    lines = text.replace("\r\n", "\n").split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if stripped.startswith("#"):
            title = stripped.lstrip("#").strip()
            out += [f".. rubric:: {inline(title)}", ""]
            i += 1
        elif stripped.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            if len(block) >= 2 and set(block[1].replace("|", "").strip()) <= set("-: "):
                out += _table(block)
            else:
                out += ["::", ""] + ["   " + b for b in block] + [""]
        elif stripped.startswith(("- ", "* ")):
            while i < len(lines) and lines[i].strip().startswith(("- ", "* ")):
                out.append("- " + inline(lines[i].strip()[2:]))
                i += 1
            out.append("")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(
                    ("#", "|", "- ", "* ")):
                para.append(inline(lines[i].strip()))
                i += 1
            text = " ".join(para)
            if text[:1] in "-+*#:":
                text = "\\" + text
            out += [text, ""]
    return "\n".join(out) + "\n"


def build(results_dir, out_dir):
    """Write ``out_dir/<name>.inc`` for every ``results_dir/*.md`` and
    ``out_dir/all.inc`` (whose includes are relative to the including page,
in ``doc/``); return the names converted."""
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = sorted(p.stem for p in results_dir.glob("*.md"))
    for name in names:
        rst = md_to_rst((results_dir / f"{name}.md").read_text(encoding="utf-8"))
        target = out_dir / f"{name}.inc"
        if not target.exists() or target.read_text(encoding="utf-8") != rst:
            target.write_text(rst, encoding="utf-8")
    ordered = [n for n in TITLES if n in names] + [n for n in names if n not in TITLES]
    # the benchmark scripts beside the results folder (not their helpers)
    scripts = sorted(p.stem for p in results_dir.parent.glob("[!_]*.py"))
    sections = []
    for name in ordered:
        title = TITLES.get(name, name.replace("_", " "))
        sections += [
            f".. _results-{name.replace('.', '-').replace('_', '-')}:", "",
            title, "-" * len(title), "",
            f"``benchmarks/results/{name}.md``, written by ``benchmarks/"
            f"{_script(name, scripts)}.py``.", "",
            f".. include:: _generated/results/{name}.inc", "",
        ]
    all_rst = "\n".join(sections) + "\n"
    target = out_dir / "all.inc"
    if not target.exists() or target.read_text(encoding="utf-8") != all_rst:
        target.write_text(all_rst, encoding="utf-8")
    return names


def _script(name, scripts):
    """The script that writes the results file ``name``: the script of that
    name, else the longest one whose name and an underscore start it (a
    script's ``--name`` variants: ``active_learning_ud`` is written by
    ``active_learning``, ``calibration_transfer_n30`` by
    ``calibration_transfer``, not ``calibration``)."""
    if name in scripts:
        return name
    prefixes = [s for s in scripts if name.startswith(s + "_")]
    if not prefixes:
        raise ValueError(f"No benchmark script writes benchmarks/results/{name}.md "
                         f"(scripts: {', '.join(scripts)}).")
    return max(prefixes, key=len)
