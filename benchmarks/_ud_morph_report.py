"""The report of ``ud_morph.py``: its rows and tasks, the markdown table
with the fit-time ratios, the notes, the plot, and the results section
(``default`` of ``results/ud_morph.{md,json}``, ``quick`` for ``--quick``)
that runs (and ``--merge``) add rows to.
"""

import json
from pathlib import Path

from _common import markdown_table, plot_path, provenance, read_results, write_section

#: The md's machine bullet of the section: the machines are per row.
MACHINE = "per row: the 'Machine of' lines at the end of this section"


RDP_PERCENTS = (5, 10, 20)
ALL_ROWS = (
    ("crfsuite", "exact")
    + tuple(f"rdp{p}_full" for p in RDP_PERCENTS)
    + tuple(f"rdp{p}_lowrank" for p in RDP_PERCENTS)
    + ("logreg",)
)
TASKS = {"upos_feats": "UPOS + FEATS", "upos": "UPOS"}


def _fmt_c2(row, c2):
    return f"C={c2:g}" if row == "logreg" else f"{c2:g}"


def table_rows(task_entry):
    """Rows of one task's markdown table, with the fit ratios."""
    rows = task_entry.get("rows", {})
    order = [r for r in ALL_ROWS if r in rows] + sorted(set(rows) - set(ALL_ROWS))

    def fit_s(r):
        return rows[r]["best"].get("fit s") if r in rows and "best" in rows[r] else None

    out = []
    for r in order:
        entry = rows[r]
        best = entry.get("best")
        if best is None:
            out.append({"row": r, "labels": "failed"})
            continue
        ratio = {}
        for peer in ("crfsuite", "exact"):
            p = fit_s(peer)
            ratio[peer] = p / best["fit s"] if p and best["fit s"] > 0 else float("nan")
        out.append({
            "row": r,
            "labels": best["labels"],
            "K (K1+K2)": best["K"],
            "transitions": best["transitions"],
            "optimizer": best["optimizer"],
            "c2 chosen": _fmt_c2(r, best["c2"]),
            "dev acc %": 100.0 * best["dev acc"],
            "test acc %": 100.0 * best["test acc"],
            "fit s": best["fit s"],
            "predict s": best["predict s"],
            "peak MiB": best["peak MiB"],
            "fit ratio vs crfsuite": ratio["crfsuite"],
            "fit ratio vs exact": ratio["exact"],
        })
    return out


COLUMNS = ["row", "labels", "K (K1+K2)", "transitions", "optimizer", "c2 chosen",
           "dev acc %", "test acc %", "fit s", "predict s", "peak MiB",
           "fit ratio vs crfsuite", "fit ratio vs exact"]


def render(payload, quick):
    """Markdown of the whole json (every task run so far)."""
    title = "UD Hungarian-Szeged morphological tagging" + (" (quick)" if quick else "")
    parts = [f"# {title}\n"]
    for task, label in TASKS.items():
        entry = payload["tasks"].get(task)
        if not entry:
            continue
        d = entry["data"]
        parts.append(f"## {label} (tag=\"{task}\")\n")
        parts.append(markdown_table(table_rows(entry), COLUMNS) + "\n")
        parts.append(
            f"- Data: {d['n_train_sentences']} / {d['n_dev_sentences']} / "
            f"{d['n_test_sentences']} sentences ({d['n_train_tokens']} / "
            f"{d['n_dev_tokens']} / {d['n_test_tokens']} tokens) in train / dev / "
            f"test; {d['n_train_labels']} labels in train. "
            f"{d['unseen_test_tokens']} test tokens "
            f"({100.0 * d['unseen_test_share']:.2f} %, {d['unseen_test_labels']} "
            f"distinct tags) and {d['unseen_dev_tokens']} dev tokens "
            f"({100.0 * d['unseen_dev_share']:.2f} %) carry a tag never seen in "
            "training: they count as errors for every model.\n"
        )
        grid = []
        listed = [r for r in ALL_ROWS if r in entry["rows"]]
        for r in listed + sorted(set(entry["rows"]) - set(listed)):
            per = entry["rows"][r].get("per_c2", [])
            cells = ", ".join(
                f"{_fmt_c2(r, p['c2'])}: "
                + (f"{100.0 * p['dev acc']:.2f}" if "dev acc" in p else p.get("error", "?"))
                for p in per)
            grid.append(f"{r} [{cells}]")
        parts.append("- Dev accuracy % per c2 (C for logreg): " + "; ".join(grid) + "\n")
    parts.append("\n".join(f"- {n}" for n in payload["notes"]) + "\n")
    by_machine = {}
    for key, m in sorted(payload.get("machines", {}).items()):
        by_machine.setdefault(json.dumps(m, sort_keys=True), []).append(key)
    for m, keys in by_machine.items():
        info = json.loads(m)
        parts.append(f"\nMachine of {', '.join(keys)}: "
                     + ", ".join(f"{k} {v}" for k, v in info.items()) + "\n")
    by_run = {}
    for key, stamp in sorted(payload.get("row_provenance", {}).items()):
        run = (stamp.get("commit") or "unknown", str(stamp.get("date", "")),
               " (uncommitted changes)" if stamp.get("dirty") else "")
        by_run.setdefault(run, []).append(key)
    if len(by_run) > 1:
        for (commit, date, dirty), keys in by_run.items():
            parts.append(f"\nRun of {', '.join(keys)}: commit `{commit}`{dirty}, {date}\n")
    return "\n".join(parts)


NOTES = [
    "Rows ROW@cuda: the same model with device='cuda', run on another machine (its "
    "'Machine of' line below: fit seconds are that machine's) and merged with --merge; "
    "rows ROW~jN: n_jobs=N threads, the same model as ROW (identical accuracy). Both "
    "were run at one c2 (--c2-grid): ~jN at the c2 chosen for ROW, @cuda at c2=0.01 "
    "(run before the CPU rows had chosen theirs).",
    "Features: WordFeatures() defaults, fitted on train, the same CSR features for "
    "every model (crfsuite: each token as the dict {feature name: value} of its "
    "non-zero columns).",
    "Token accuracy on all tokens; test tags never seen in training are errors "
    "(counts above).",
    "c2 chosen: the best dev accuracy over the grid (ties: the first); its fit is the "
    "one reported. logreg: LogisticRegression(solver='lbfgs'), grid over C in "
    "{0.1, 1, 10}, no transitions.",
    "crfsuite: sklearn_crfsuite.CRF(algorithm='lbfgs', c1=0, c2, max_iterations) with "
    "its default feature generation (only attribute-label pairs and transitions seen "
    "in training). exact: RandomizedCRFTagger(c2) (exact forward-backward, L-BFGS). "
    "rdpP: RandomizedCRFTagger(n_top=K1, n_sampled=K2, transitions, optimizer, "
    "learning_rate, random_state=0), K = round(P % of the training labels), at least "
    "2, K1 = ceil(K/2) top states + K2 = K - K1 sampled; low_rank uses the default "
    "rank.",
    "fit s / predict s: one run each, time.perf_counter in a fresh process; predict s "
    "is on the test set. skgpstruct rows first fit a 20-sentence subset with "
    "max_iter=1 and predict 2 sentences (untimed) so that numba compilation is not "
    "counted; crfsuite and logreg need no warm-up.",
    "peak MiB: ru_maxrss of the child process (os.wait4) that loads and featurises "
    "the data and fits (and predicts with) one model: the data's share is in it.",
    "fit ratio vs X: X's fit seconds / this row's fit seconds (> 1: this row is "
    "faster).",
]


def plot(payload, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tasks = [t for t in TASKS if payload["tasks"].get(t)]
    if not tasks:
        return
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.5), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for r in table_rows(payload["tasks"][task]):
            # rows of this machine, one thread (not @cuda / ~jN)
            if "fit s" not in r or "@" in r["row"] or "~" in r["row"]:
                continue
            ax.scatter(r["fit s"], r["test acc %"])
            ax.annotate(r["row"], (r["fit s"], r["test acc %"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("fit seconds (log)")
        ax.set_ylabel("test token accuracy %")
        ax.set_title(f"{TASKS[task]}: accuracy vs fit time")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def save(tasks, machines, quick, notes=None, row_provenance=None):
    """Merge ``tasks`` (``{task: {"data": ..., "rows": {row: ...}}}``),
    ``machines`` and ``row_provenance`` (``{task/row: stamp}``; default this
    run's for every row of ``machines``) into the results section as it is
    now (another process may have written rows meanwhile), then write its
    json, markdown and plot. A row kept from before keeps its stamp (the
    section's, for rows written before rows had their own)."""
    key = "quick" if quick else "default"
    payload = dict(read_results("ud_morph")["sections"].get(key, {}))
    before = payload.pop("provenance", None)
    stamps = payload.setdefault("row_provenance", {})
    for row in payload.get("machines", {}):
        if row not in stamps and before is not None:
            stamps[row] = before
    if row_provenance is None:
        row_provenance = {row: provenance() for row in machines}
    stamps.update(row_provenance)
    for task, entry in tasks.items():
        mine = payload.setdefault("tasks", {}).setdefault(task, {})
        if entry.get("data") is not None:
            mine["data"] = entry["data"]
        mine.setdefault("rows", {}).update(entry.get("rows", {}))
    payload.setdefault("machines", {}).update(machines)
    payload["title"] = "UD Hungarian-Szeged morphological tagging"
    if notes is not None or "notes" not in payload:
        payload["notes"] = NOTES if notes is None else notes
    text = render(payload, quick)
    print(write_section("ud_morph", key, payload, text, machine=MACHINE))
    path = plot_path("ud_morph", key)
    path.parent.mkdir(parents=True, exist_ok=True)
    plot(payload, path)


def merge(other_path, quick):
    """Copy every row (and its machine and stamp) of ``other_path`` (a
    ``ud_morph.json`` written elsewhere) into the results."""
    other = json.loads(Path(other_path).read_text())
    if "sections" in other:
        other = other["sections"]["quick" if quick else "default"]
    stamps = dict(other.get("row_provenance", {}))
    for row in other.get("machines", {}):
        if row not in stamps and other.get("provenance"):
            stamps[row] = other["provenance"]
    save(other.get("tasks", {}), other.get("machines", {}), quick, row_provenance=stamps)
    return 0
