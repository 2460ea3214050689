"""Timing and reporting helpers shared by the benchmark scripts.

Benchmarks print a markdown table (median of repeats, ratios against a peer
measured in the same process) and write it with the raw numbers to the
script's one results pair, ``benchmarks/results/<script>.md`` and
``.json``.

Results layout
--------------
Each script owns one json and one md file, made of *sections*: a plain run
writes the section ``default``; a variant (``--name KEY``, or a key the
script derives from its arguments, such as ``validation_seeds.py``'s
``<task>_<features>_r<R>``) writes the section ``KEY``. Running a variant
replaces only its own section, in both files; the other sections are left
as they are. ``--name <script>_KEY`` (the older spelling, when every
variant had files of its own) means the section ``KEY``.

The json is ``{"script": ..., "sections": {KEY: payload}}``; each payload
holds what the script recorded (``title``, ``rows``, ``notes``, ``machine``
and its extras) and ``provenance``: the commit the run started from (with
``dirty`` and the changed paths when the working tree had uncommitted
changes outside ``benchmarks/results/``), the date, the command line and
how the stamp was made. The md holds, per section, a
``<!-- section: KEY -->`` marker, a heading, the provenance as a bullet
list (commit, date, command, machine) and the script's markdown.
Results written before this layout carry a stamp reconstructed from git
history (``provenance["stamp"]`` says so).
"""

import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_ROOT = RESULTS_DIR.parents[1]
DEFAULT = "default"
#: The md line that opens a section (``KEY`` in the group).
SECTION_MARK = re.compile(r"^<!-- section: (\S+) -->$", re.MULTILINE)
_KEY = re.compile(r"^[A-Za-z0-9_.+-]+$")


def time_call(fn, *, repeats=7, warmup=1, min_time=0.0):
    """Median wall time of ``fn()`` in seconds after ``warmup`` calls.

    Parameters
    ----------
    fn : callable
        Called with no arguments.
    repeats : int, default=7
        Number of timed calls.
    warmup : int, default=1
        Untimed calls first (JIT compilation, caches).
    min_time : float, default=0.0
        Keep repeating beyond ``repeats`` until this much time was spent.

    Returns
    -------
    median : float
    times : list of float
    """
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeats or (time.perf_counter() - start) < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 10 * max(repeats, 1):
            break
    return float(np.median(times)), times


def machine_info():
    """A short description of the machine for the results file."""
    info = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
    }
    for mod in ("numpy", "numba", "scipy", "sklearn", "torch"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return info


def format_machine(info):
    """``info`` as one line: ``python 3.11.7, machine x86_64, ...``."""
    return ", ".join(f"{k} {v}" for k, v in info.items())


def markdown_table(rows, columns):
    """Render a list of dicts as a markdown table with the given columns."""

    def fmt(v):
        if isinstance(v, float):
            if v != v:
                return "n/a"
            if abs(v) >= 100:
                return f"{v:.0f}"
            if abs(v) >= 1:
                return f"{v:.2f}"
            return f"{v:.3g}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# provenance


def _git(*args):
    try:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _portable(arg):
    """A command-line argument without this machine's paths: a path inside
    the repository relative to it, another absolute path by its name."""
    def fix(path):
        p = Path(path)
        if not p.is_absolute():
            return path
        try:
            return p.resolve().relative_to(REPO_ROOT).as_posix()
        except ValueError:
            return f".../{p.name}"

    if "=" in arg and arg.startswith("-"):
        head, _, tail = arg.partition("=")
        return f"{head}={fix(tail)}"
    return fix(arg)


def _start_stamp():
    """The commit, working-tree state, date and command of this run, taken
    when the script starts (``_common`` is imported at its top)."""
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "?"
    command = shlex.join(["python", f"benchmarks/{script}",
                          *(_portable(a) for a in sys.argv[1:])])
    stamp = {
        "commit": None,
        "dirty": None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "stamp": "recorded by benchmarks/_common.py when the run started",
    }
    head = _git("rev-parse", "HEAD")
    if head is None:
        stamp["stamp"] += " (no git checkout: commit unknown)"
        return stamp
    stamp["commit"] = head.strip()
    status = _git("status", "--porcelain", "--", ".", ":(exclude)benchmarks/results")
    changed = [line[3:] for line in (status or "").splitlines() if line.strip()]
    stamp["dirty"] = bool(changed)
    if changed:
        stamp["dirty_paths"] = changed[:50] + ([f"... {len(changed) - 50} more"]
                                               if len(changed) > 50 else [])
    return stamp


#: The stamp of this process's run (see :func:`_start_stamp`).
RUN = _start_stamp()


def provenance(**extra):
    """The stamp of this run for a results section: :data:`RUN` plus the
    finishing date and ``extra``."""
    stamp = dict(RUN)
    stamp["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds")
    stamp.update(extra)
    return stamp


def format_provenance(stamp, machine):
    """The provenance bullets of a section's md: commit, date, command,
    machine (``machine``: a line of text)."""
    commit = stamp.get("commit")
    if commit:
        text = f"`{commit}`"
        if stamp.get("dirty"):
            text += " with uncommitted changes (" + ", ".join(
                f"`{p}`" for p in stamp.get("dirty_paths", [])) + ")"
        elif stamp.get("dirty") is None and "git history" not in stamp.get("stamp", ""):
            text += " (working tree state unknown)"
    else:
        text = "unknown"
    note = stamp.get("stamp")
    if note:
        text += f"; {note}"
    command = f"`{stamp.get('command', '')}`"
    if stamp.get("command_source"):
        command += f" ({stamp['command_source']})"
    date = str(stamp.get("date", ""))
    return [f"- Commit: {text}", f"- Date: {date}", f"- Command: {command}",
            f"- Machine: {machine}"]


# --------------------------------------------------------------------------
# the sectioned results files


def section_key(script, name=None):
    """The section that ``--name name`` of ``script`` writes: ``default``
    for none (or the script's own name), ``KEY`` for ``KEY`` or
    ``<script>_KEY``."""
    if name is None or name in ("", script, DEFAULT):
        return DEFAULT
    if name.startswith(script + "_"):
        name = name[len(script) + 1:]
    if not _KEY.match(name):
        raise ValueError(f"section name {name!r}: letters, digits and _ . + - only")
    return name


def add_name_argument(parser, script):
    """``--name KEY``: the section of ``results/<script>.{md,json}`` a run
    writes (default: ``default``)."""
    parser.add_argument(
        "--name", default=None, metavar="SECTION",
        help=f"section of benchmarks/results/{script}.{{md,json}} to write (default: "
             f"'default'; '{script}_KEY' means 'KEY'); other sections are kept")


def plot_path(script, section=DEFAULT, suffix=""):
    """Where a section's figure goes: ``results/<script>[_KEY]<suffix>.png``."""
    stem = script if section == DEFAULT else f"{script}_{section}"
    return RESULTS_DIR / f"{stem}{suffix}.png"


def read_results(script):
    """``{"script": ..., "sections": {...}}`` of ``results/<script>.json``
    (empty sections when there is none)."""
    path = RESULTS_DIR / f"{script}.json"
    if not path.exists():
        return {"script": script, "sections": {}}
    return json.loads(path.read_text())


def read_section(script, section=DEFAULT):
    """The payload of one section of ``results/<script>.json``."""
    sections = read_results(script)["sections"]
    key = section_key(script, section)
    if key not in sections:
        raise KeyError(f"benchmarks/results/{script}.json has no section {key!r} "
                       f"(it has: {', '.join(sections) or 'none'})")
    return sections[key]


def split_md(text):
    """``(head, {key: chunk})`` of a sectioned md file; each chunk starts
    with its marker line."""
    marks = list(SECTION_MARK.finditer(text))
    head = text[:marks[0].start()] if marks else text
    chunks = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        chunks[m.group(1)] = text[m.start():end].rstrip("\n") + "\n"
    return head, chunks


def _demote(markdown):
    """A run's markdown as a section: ``(title, body)``, its first heading the
    title, the other headings a level below the section's (``###`` and
    deeper)."""
    lines = markdown.strip("\n").split("\n")
    title, first, out = None, None, []
    for line in lines:
        m = re.match(r"^(#+)\s+(.*)$", line)
        if m and title is None:
            title, first = m.group(2).strip(), len(m.group(1))
            continue
        if m:
            level = max(3, len(m.group(1)) - first + 2)
            line = "#" * level + " " + m.group(2)
        out.append(line)
    return title, "\n".join(out).strip("\n")


def section_md(script, key, markdown, stamp, machine):
    """The md chunk of one section: marker, heading, provenance, body."""
    title, body = _demote(markdown)
    heading = title or script.replace("_", " ")
    if key != DEFAULT:
        heading = f"`{key}`: {heading}"
    lines = [f"<!-- section: {key} -->", f"## {heading}", ""]
    lines += format_provenance(stamp, machine)
    return "\n".join(lines) + "\n\n" + body + "\n"


def _md_head(script):
    return (f"# Results of `benchmarks/{script}.py`\n\n"
            f"One section per run: `default` is a plain run of the script, the others "
            f"the variants it was run with (`--name KEY`, or the key it derives from its "
            f"arguments); a run replaces only its own section, here and in "
            f"`{script}.json`. Each section gives the commit the run started from, its "
            f"date, command line and machine.\n\n")


def _ordered(sections, key):
    """Section order: ``default`` first, the others as they were, a new one
    last."""
    keys = list(sections)
    if key not in keys:
        keys.append(key)
    if DEFAULT in keys:
        keys.remove(DEFAULT)
        keys.insert(0, DEFAULT)
    return keys


def _locked(path):
    """An open handle on ``path`` (created if needed) holding an exclusive
    lock where the platform has ``fcntl``: two runs writing sections of the
    same file take turns."""
    handle = open(path, "a+", encoding="utf-8")
    try:
        import fcntl

        fcntl.flock(handle, fcntl.LOCK_EX)
    except ImportError:  # pragma: no cover (Windows: no lock)
        pass
    return handle


def write_section(script, key, payload, markdown, *, stamp=None, machine=None):
    """Put one section into ``results/<script>.json`` and ``.md``, keeping the
    others.

    Parameters
    ----------
    script : str
        The script's name (``active_learning``).
    key : str
        The section (see :func:`section_key`).
    payload : dict
        What the json's section holds; ``provenance`` (``stamp``) is added.
    markdown : str
        The run's markdown: a first heading (the section's title), tables,
        notes; no machine line (the provenance has it).
    stamp : dict, default=None
        Provenance; default :func:`provenance` (this run's).
    machine : str, default=None
        The machine line of the md; default from ``payload["machine"]``.

    Returns
    -------
    chunk : str
        The section's md.
    """
    key = section_key(script, key)
    stamp = provenance() if stamp is None else stamp
    if machine is None:
        machine = format_machine(payload.get("machine", {}))
    payload = {"provenance": stamp, **{k: v for k, v in payload.items()
                                       if k != "provenance"}}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    json_path, md_path = RESULTS_DIR / f"{script}.json", RESULTS_DIR / f"{script}.md"
    with _locked(json_path) as handle:
        handle.seek(0)
        text = handle.read()
        data = json.loads(text) if text.strip() else {}
        if "sections" not in data:
            if data:
                raise ValueError(f"{json_path.name} is not a sectioned results file")
            data = {"script": script, "sections": {}}
        sections = data["sections"]
        sections[key] = payload
        order = _ordered(sections, key)
        data["sections"] = {k: sections[k] for k in order}
        head, chunks = split_md(md_path.read_text(encoding="utf-8")
                                if md_path.exists() else "")
        chunks[key] = section_md(script, key, markdown, stamp, machine)
        missing = [k for k in order if k not in chunks]
        if missing:
            raise ValueError(f"{md_path.name} lacks the sections {missing} of "
                             f"{json_path.name}")
        md_path.write_text((head if head.strip() else _md_head(script))
                           + "\n".join(chunks[k] for k in order), encoding="utf-8")
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(data, indent=2) + "\n")
    return chunks[key]


def write_results(script, rows, columns, *, title, notes=(), extra=None, section=None,
                  more_markdown=None):
    """Print the table and write it as a section of ``results/<script>.md``
    and ``.json`` (:func:`write_section`).

    ``section``: the run's ``--name`` (``None``: ``default``);
    ``more_markdown``: text after the notes (a second table).
    """
    text = f"# {title}\n\n" + markdown_table(rows, columns) + "\n"
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    if more_markdown:
        text += "\n" + more_markdown.strip("\n") + "\n"
    info = machine_info()
    payload = {"title": title, "rows": rows, "notes": list(notes), "machine": info}
    if extra:
        payload.update(extra)
    key = section_key(script, section)
    chunk = write_section(script, key, payload, text)
    print(chunk)
    return chunk
