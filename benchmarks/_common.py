"""Timing and reporting helpers shared by the benchmark scripts.

Benchmarks print a markdown table (median of repeats, ratios against a peer
measured in the same process) and write it with the raw numbers to
``benchmarks/results/<name>.md`` and ``.json``.
"""

import json
import platform
import time
from pathlib import Path

import numpy as np

RESULTS_DIR = Path(__file__).resolve().parent / "results"


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
    import os

    info = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
    }
    for mod in ("numpy", "numba", "scipy", "sklearn", "torch"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return info


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


def write_results(name, rows, columns, *, title, notes=(), extra=None):
    """Print the table and write ``results/<name>.md`` and ``.json``."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    table = markdown_table(rows, columns)
    text = f"# {title}\n\n" + table + "\n"
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    info = machine_info()
    text += "\nMachine: " + ", ".join(f"{k} {v}" for k, v in info.items()) + "\n"
    print(text)
    (RESULTS_DIR / f"{name}.md").write_text(text)
    payload = {"title": title, "rows": rows, "notes": list(notes), "machine": info}
    if extra:
        payload.update(extra)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(payload, indent=2))
    return text
