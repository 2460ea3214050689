"""Turn the sectioned results of ``benchmarks/results/`` into reST.

Run by ``conf.py`` at every build (``_results.build(results, out)``). Each
benchmark script owns one ``<script>.md`` and ``<script>.json``, made of
sections (``default``, a plain run, and the variants it was run with; see
``benchmarks/_common.py``). Every section becomes
``_generated/results/<script>.inc`` (the ``default`` section) or
``<script>.<key>.inc``: a field list of its provenance from the json
(commit, date, command line, machine), then its Markdown (headings as
rubrics, tables as ``list-table``, bullets as bullet lists), which the pages
``.. include::``. ``_generated/results/all.inc`` holds one section per
script and a subsection per variant (for the benchmarks page, labelled
``results-<script>`` and ``results-<script>-<key>``), so a new results
file or section shows up without editing the docs. Only the subset of
Markdown that the benchmark scripts write is understood.
"""

import json
import re
from pathlib import Path

#: Section titles of the scripts on the benchmarks page, in order; scripts
#: not named here follow, titled by their name.
TITLES = {
    "gpstruct_table1": "GPstruct protocol: token error against sklearn-crfsuite and CRF++",
    "crfsuite_compare": "Exact RandomizedCRFTagger against sklearn-crfsuite",
    "calibration": "Calibration of the marginals: three tasks, two feature paths",
    "calibration_paired": "Calibration: the GP against the plain CRFs, paired over the folds",
    "calibration_transfer": "Calibration on UD Hungarian UPOS, a task the defaults never saw",
    "temperature_scaling": "Temperature scaling of both taggers",
    "temperature_sweep": "Validated temperature against the grid",
    "validation_seeds": "Over the validation's seeds",
    "active_learning": "Active learning",
    "partial_labels": "Partial labels against whole sentences",
    "information_gain_cost": "Cost of the expected predictive information gain, both forms",
    "ud_morph": "UD morphological tagging (444 labels)",
    "rdp_scaling": "Randomized DP: epoch time and accuracy against exact DP",
    "rdp_tables": "Randomized DP: estimates of log Z (Fu et al. tables 2-4)",
    "chain_kernels": "Chain kernels: batched forward-backward",
    "gpu": "GPU kernels",
    "coupled_additive": "Coupled against mean-field sparse GPs",
    "blas_limit": "BLAS thread limit",
    "dense_features": "Dense features: dense columns against pair matrices",
    "fingerprint": "Fingerprints of fitted models and predictions (behaviour-preserving changes)",
    "standard_tasks": "Standard tasks: CoNLL-2000 and CoNLL-2002 against sklearn-crfsuite",
    "crfsuite_parity": "Same settings, same model? Both CRFs scored by one objective",
    "crf_gradient_profile": "One gradient evaluation of the exact CRF, part by part",
    "learning_curve": "Learning curves on CoNLL-2000 and CoNLL-2002: F1 and ECE by size",
    "calibration_change": "GPStructTagger on the GPstruct tasks: a change, paired over the folds",
    "crfsuite_tutorial": "sklearn-crfsuite's tutorial with only the import changed",
    "ece_draws": "ECE of GPStructTagger's marginals against the posterior draws",
}

#: Titles of the sections of a script with more than one, by
#: ``(script, key)``; a section not named here is titled by its key.
SECTION_TITLES = {
    ("calibration", "default"): "Calibration: the defaults",
    ("calibration", "basenp_inducing"): "Calibration: base NP, inducing-point form",
    ("calibration", "basenp_coupled"): "Calibration: base NP, coupled posterior",
    ("calibration", "basenp_large_gpstruct_coupled"):
        "Calibration: base NP large, papers' features, coupled posterior",
    ("calibration", "basenp_large_crfpp_coupled"):
        "Calibration: base NP large, CRF++ template, coupled posterior",
    ("calibration_transfer", "default"): "Calibration transfer: 300 training sentences",
    ("calibration_transfer", "n100"): "Calibration transfer: 100 training sentences",
    ("calibration_transfer", "n30"): "Calibration transfer: 30 training sentences",
    ("temperature_scaling", "default"): "Temperature scaling: the GP on the papers' features",
    ("temperature_scaling", "crfpp_gp"):
        "Temperature scaling: GPStructTagger on the CRF++ template",
    ("temperature_sweep", "chunking_gpstruct"):
        "Validated temperature against the grid: chunking, papers' features",
    ("temperature_sweep", "basenp_large_gpstruct"):
        "Validated temperature against the grid: base NP large, papers' features",
    ("validation_seeds", "chunking_gpstruct_r1"):
        "Over the validation's seeds: chunking, papers' features",
    ("validation_seeds", "chunking_gpstruct_r3"):
        "Over the validation's seeds, three splits: chunking, papers' features",
    ("validation_seeds", "basenp_large_gpstruct_r1"):
        "Over the validation's seeds: base NP large, papers' features",
    ("validation_seeds", "basenp_large_gpstruct_r3"):
        "Over the validation's seeds, three splits: base NP large, papers' features",
    ("active_learning", "default"):
        "Active learning on CoNLL-2000: random, CRF MNLP, GP BALD, token-level partial",
    ("rdp_tables", "default"): "Randomized DP: estimates of log Z, the authors' learning rate",
    ("rdp_tables", "lr0.001"): "Randomized DP: estimates of log Z, sharper emissions",
}

DEFAULT = "default"
#: The md line that opens a section (as ``benchmarks/_common.py`` writes it).
_SECTION_MARK = re.compile(r"^<!-- section: (\S+) -->$", re.MULTILINE)
#: md lines the field list replaces: the provenance bullets and machine lines.
_GENERATED = re.compile(r"^(- (Commit|Date|Command|Machine): |Machine: |Machine of )")

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


def split_sections(text):
    """``{key: (title, body)}`` of a sectioned results md, in file order:
    ``title`` is the section's heading without its key, ``body`` the
    Markdown after it without the lines the field list replaces."""
    marks = list(_SECTION_MARK.finditer(text))
    out = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        lines = text[mark.end():end].strip("\n").split("\n")
        title = None
        if lines and lines[0].startswith("## "):
            title = lines.pop(0)[3:].strip()
            prefix = f"`{mark.group(1)}`: "
            if title.startswith(prefix):
                title = title[len(prefix):]
        body = "\n".join(line for line in lines if not _GENERATED.match(line))
        out[mark.group(1)] = (title, body)
    return out


def _machine_text(payload):
    if payload.get("machine"):
        return ", ".join(f"{k} {v}" for k, v in payload["machine"].items())
    groups = {}  # ud_morph: one machine per row
    for row, info in (payload.get("machines") or {}).items():
        groups.setdefault(json.dumps(info, sort_keys=True), []).append(row)
    return "; ".join(
        f"rows {', '.join(sorted(rows))}: "
        + ", ".join(f"{k} {v}" for k, v in json.loads(info).items())
        for info, rows in groups.items()) or "not recorded"


def provenance_rst(payload):
    """The field list of one section: commit, date, command, machine."""
    stamp = payload.get("provenance") or {}
    commit = stamp.get("commit")
    if commit:
        text = f"``{commit[:12]}``"
        if stamp.get("dirty"):
            text += " with uncommitted changes (" + ", ".join(
                f"``{p}``" for p in stamp.get("dirty_paths", [])) + ")"
    else:
        text = "unknown"
    if stamp.get("stamp"):
        text += " (" + inline(stamp["stamp"]) + ")"
    command = stamp.get("command")
    command = f"``{command}``" if command else "not recorded"
    if stamp.get("command_source"):
        command += " (" + inline(stamp["command_source"]) + ")"
    fields = [("Commit", text), ("Date", inline(str(stamp.get("date") or "not recorded"))),
              ("Command", command), ("Machine", inline(_machine_text(payload)))]
    return "\n".join(f":{name}: {value}" for name, value in fields) + "\n\n"


def section_rst(title, body, payload):
    """reST of one section: its title as a rubric, the field list, the
    Markdown."""
    head = f".. rubric:: {inline(title)}\n\n" if title else ""
    return head + provenance_rst(payload) + md_to_rst(body)


def _label(*parts):
    return "results-" + "-".join(p.replace(".", "-").replace("_", "-") for p in parts)


def _inc_name(script, key):
    return f"{script}.inc" if key == DEFAULT else f"{script}.{key}.inc"


def _write(path, text):
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _heading(title, char):
    return [title, char * len(title), ""]


def load(results_dir, scripts):
    """``{script: [(key, title, body, payload)]}`` of every results pair;
    raises for a results file no script owns, a variant's file of its own,
    a json without a md or one whose sections differ from its md's."""
    results_dir = Path(results_dir)
    out = {}
    stems = sorted({p.stem for p in results_dir.glob("*.md")}
                   | {p.stem for p in results_dir.glob("*.json")})
    for stem in stems:
        script = _script(stem, scripts)
        if script != stem:
            raise ValueError(f"benchmarks/results/{stem}: a variant's own file; it belongs "
                             f"in a section of {script}.md and {script}.json.")
        md, js = results_dir / f"{stem}.md", results_dir / f"{stem}.json"
        if not (md.exists() and js.exists()):
            raise ValueError(f"benchmarks/results/{stem}: needs both .md and .json.")
        sections = json.loads(js.read_text(encoding="utf-8")).get("sections")
        parsed = split_sections(md.read_text(encoding="utf-8"))
        if not sections or list(sections) != list(parsed):
            raise ValueError(f"benchmarks/results/{stem}: the sections of the md "
                             f"({list(parsed)}) and of the json "
                             f"({list(sections or {})}) differ.")
        out[stem] = [(key, *parsed[key], sections[key]) for key in sections]
    return out


def build(results_dir, out_dir):
    """Write ``out_dir/<script>[.<key>].inc`` for every section of every
    results pair in ``results_dir`` and ``out_dir/all.inc`` (whose includes
    are relative to the including page, in ``doc/``); remove the ``.inc``
    files of sections that are gone; return the scripts converted."""
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # the benchmark scripts beside the results folder (not their helpers)
    scripts = sorted(p.stem for p in results_dir.parent.glob("[!_]*.py"))
    results = load(results_dir, scripts)
    written = {"all.inc"}
    for script, sections in results.items():
        for key, title, body, payload in sections:
            name = _inc_name(script, key)
            _write(out_dir / name, section_rst(title, body, payload))
            written.add(name)
    for stale in out_dir.glob("*.inc"):
        if stale.name not in written:
            stale.unlink()
    ordered = [s for s in TITLES if s in results] + [s for s in results if s not in TITLES]
    lines = []
    for script in ordered:
        sections = results[script]
        title = TITLES.get(script, script.replace("_", " "))
        lines += [f".. _{_label(script)}:", ""] + _heading(title, "-")
        keys = [key for key, *_ in sections]
        lines += [f"``benchmarks/results/{script}.md`` and ``.json``, written by "
                  f"``benchmarks/{script}.py``"
                  + ("." if keys == [DEFAULT] else
                     f": {len(keys)} sections, " + ", ".join(f"``{k}``" for k in keys)
                     + " (``--name KEY`` runs and replaces one)."), ""]
        if keys == [DEFAULT]:
            lines += [f".. include:: _generated/results/{_inc_name(script, DEFAULT)}", ""]
            continue
        for key, *_ in sections:
            if key != DEFAULT:
                lines += [f".. _{_label(script, key)}:", ""]
            sub = SECTION_TITLES.get((script, key), f"{title}: {key.replace('_', ' ')}")
            lines += _heading(sub, "~")
            lines += [f"Section ``{key}``.", "",
                      f".. include:: _generated/results/{_inc_name(script, key)}", ""]
    _write(out_dir / "all.inc", "\n".join(lines) + "\n")
    return list(results)


def _script(name, scripts):
    """The script that owns the results named ``name``: the script of that
    name, else the longest one whose name and an underscore start it (a
    script's ``--name`` variants, which are sections of its results:
    ``active_learning_ud`` is ``active_learning``'s, ``calibration_transfer_n30``
    ``calibration_transfer``'s, not ``calibration``'s)."""
    if name in scripts:
        return name
    prefixes = [s for s in scripts if name.startswith(s + "_")]
    if not prefixes:
        raise ValueError(f"No benchmark script writes benchmarks/results/{name}.md "
                         f"(scripts: {', '.join(scripts)}).")
    return max(prefixes, key=len)
