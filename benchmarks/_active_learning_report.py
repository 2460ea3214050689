"""The report of ``active_learning.py``: F1 curves over seeds, tokens to 99 %
of the full-pool F1, the paired t statistics of the acceptance, the figure.

Everything here is computed from a section's stored payload (``settings``,
``full_pool``, ``runs``: ``{seed: {strategy: curve}}``), so that seeds run as
separate invocations merge into one report (``active_learning.py --report``).
"""

import math

import numpy as np

from _common import format_machine, markdown_table, write_section

GP, CRF = "GPStructTagger", "RandomizedCRFTagger"
STRATEGIES = ("random", "crf_mnlp", "gp_bald", "gp_bald_norm", "gp_partial")
OPTIONAL = ("gp_epig", "crf_entropy")
#: the tagger(s) each strategy trains (and is scored by)
TAGGERS = {"random": (GP, CRF), "crf_mnlp": (CRF,), "crf_entropy": (CRF,),
           "gp_bald": (GP,), "gp_bald_norm": (GP,), "gp_partial": (GP,), "gp_epig": (GP,)}
GP_STRATEGIES = ("gp_bald", "gp_bald_norm", "gp_partial", "gp_epig")
#: a strategy's target: this share of its tagger's full-pool F1
TARGET = 0.99
MIN_SEEDS = 5
TITLE = "Active learning on CoNLL-2000 chunking (cost: annotated tokens)"


def reach(fractions, f1, target):
    """The first annotated fraction where ``f1`` reaches ``target``, linear
    between the budgets around the crossing; None if it never does."""
    for r, (x, v) in enumerate(zip(fractions, f1)):
        if v >= target:
            if r == 0:
                return float(x)
            x0, v0 = fractions[r - 1], f1[r - 1]
            return float(x0 + (target - v0) / (v - v0) * (x - x0))
    return None


def curves(payload):
    """``{(strategy, tagger): {seed: (annotated fractions, F1)}}``."""
    n = payload["settings"]["pool_tokens"]
    out = {}
    for seed, strategies in payload.get("runs", {}).items():
        for s, c in strategies.items():
            for t in TAGGERS[s]:
                out.setdefault((s, t), {})[seed] = (np.asarray(c["tokens"]) / n,
                                                    np.asarray(c[t]["F1"], dtype=float))
    order = [(s, t) for s in STRATEGIES + OPTIONAL for t in TAGGERS[s]]
    return {k: out[k] for k in order if k in out}


def tokens_to_target(found, full):
    """``{(strategy, tagger): {seed: (fraction, reached)}}``: a censored seed
    (never reached) counts as its final annotated fraction."""
    out = {}
    for key, per_seed in found.items():
        target = TARGET * full[key[1]]["F1"]
        out[key] = {}
        for seed, (x, f) in per_seed.items():
            r = reach(x, f, target)
            out[key][seed] = (float(x[-1]) if r is None else r, r is not None)
    return out


def _mean_se(values):
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return float(values.mean()), float(se)


def paired(tokens, a, b):
    """Paired difference (``a`` minus ``b``) of the tokens to target over the
    seeds both have, in % of the pool: mean, SE, t, and ``a``'s censored seeds."""
    seeds = sorted(set(tokens[a]) & set(tokens[b]), key=int)
    d = [tokens[a][s][0] - tokens[b][s][0] for s in seeds]
    if not d:
        return {"seeds": 0, "mean": float("nan"), "se": float("nan"), "t": float("nan"),
                "censored": 0}
    mean, se = _mean_se(d)
    if se > 0:
        t = mean / se
    else:
        t = float("nan") if mean == 0 or se != se else math.copysign(math.inf, mean)
    return {"seeds": len(seeds), "mean": 100 * mean, "se": 100 * se, "t": t,
            "censored": sum(not tokens[a][s][1] for s in seeds)}


def best_gp(tokens):
    """The GP strategy with the fewest mean tokens to target (None: none run)."""
    mine = [(np.mean([v for v, _ in tokens[(s, GP)].values()]), i, s)
            for i, s in enumerate(GP_STRATEGIES) if (s, GP) in tokens]
    return min(mine)[2] if mine else None


def curve_rows(found, tokens, budgets):
    """One row per strategy and tagger: F1 per budget (mean +- SE over seeds),
    tokens to target."""
    rows = []
    for (s, t), per_seed in found.items():
        f1 = np.array([f for _, f in per_seed.values()])
        x = np.array([xs for xs, _ in per_seed.values()])
        row = {"strategy": s, "tagger": t, "seeds": len(per_seed)}
        for j, b in enumerate(budgets):
            m, se = _mean_se(f1[:, j])
            row[f"{100 * b:g} %"] = f"{m:.2f} ± {se:.2f}" if se == se else f"{m:.2f}"
        values = [v for v, _ in tokens[(s, t)].values()]
        reached = sum(r for _, r in tokens[(s, t)].values())
        m, se = _mean_se(values)
        cell = f"{100 * m:.2f}" + (f" ± {100 * se:.2f}" if se == se else "")
        row["tokens to 99 % (%)"] = cell if reached == len(values) else f"≥ {cell}"
        row["reached"] = f"{reached}/{len(values)}"
        row["_tokens"] = 100 * m
        row["_fraction"] = (100 * x.mean(axis=0)).tolist()
        row["_F1"] = f1.mean(axis=0).tolist()
        rows.append(row)
    return rows


def comparisons(tokens, pool_max):
    """The acceptance's checks, as rows (see the module docstring of
    ``active_learning.py``)."""
    rows, best = [], best_gp(tokens)
    if best is None:
        return rows, best
    mine = tokens[(best, GP)]
    values = [v for v, _ in mine.values()]
    all_reached = all(r for _, r in mine.values())
    m, se = _mean_se(values)
    spread = f" ± {100 * se:.2f}" if se == se else ""
    rows.append({"check": f"{best} (GP) reaches 99 % of the GP's full-pool F1",
                 "seeds": len(values), "difference (% of pool)": f"{100 * m:.2f}{spread} "
                 "(tokens, mean ± SE)", "t": "", "bar": f"≤ {100 * pool_max:g} %, "
                 "every seed", "pass": _verdict(len(values), all_reached and m <= pool_max)})
    pairs = [((best, GP), ("random", GP), -2.0, f"{best} (GP) - random (GP)"),
             ((best, GP), ("crf_mnlp", CRF), 1.0, f"{best} (GP) - crf_mnlp (CRF)"),
             (("gp_partial", GP), ("gp_bald", GP), -2.0, "gp_partial - gp_bald (GP)")]
    for a, b, bar, label in pairs:
        if a not in tokens or b not in tokens:
            continue
        p = paired(tokens, a, b)
        ok = p["t"] < bar and p["censored"] == 0
        rows.append({"check": label, "seeds": p["seeds"],
                     "difference (% of pool)": f"{p['mean']:+.2f}"
                     + (f" ± {p['se']:.2f}" if p["se"] == p["se"] else ""),
                     "t": p["t"], "bar": f"t < {bar:g}",
                     "pass": _verdict(p["seeds"], ok, p["censored"]), "_paired": p})
    return rows, best


def _verdict(n, ok, censored=0):
    if n < MIN_SEEDS:
        return f"{'yes' if ok else 'no'} (only {n} seed(s); {MIN_SEEDS} needed)"
    if censored:
        return f"no ({censored} censored seed(s) on the side that must win)"
    return "yes" if ok else "no"


def mnlp_note(rows, best, comp):
    """Numbers behind best GP strategy against MNLP, when it does not win."""
    row = next((r for r in comp if r["check"].endswith("crf_mnlp (CRF)")), None)
    if row is None or row["_paired"]["mean"] < 0:
        return None
    get = {(r["strategy"], r["tagger"]): r for r in rows}
    g, c = get[(best, GP)], get[("crf_mnlp", CRF)]
    return (f"{best} does not need fewer tokens than CRF MNLP: "
            f"{row['difference (% of pool)']} % of the pool (t = {row['t']:.2f}). "
            f"Mean F1 by annotated % — {best} (GP): " + ", ".join(
                f"{x:.1f} %: {f:.2f}" for x, f in zip(g["_fraction"], g["_F1"]))
            + "; crf_mnlp (CRF): " + ", ".join(
                f"{x:.1f} %: {f:.2f}" for x, f in zip(c["_fraction"], c["_F1"])) + ".")


def timing_note(payload):
    """Seconds per seed (mean over seeds) by strategy, in all, and the fits'
    seconds by round."""
    per, fits = {}, {}
    for strategies in payload.get("runs", {}).values():
        for s, c in strategies.items():
            per.setdefault(s, []).append(c["seconds"])
            fits.setdefault(s, []).append(c["fit s"])
    if not per:
        return None
    total = sum(np.mean(v) for v in per.values())
    return ("Wall time per seed (mean over seeds; fits, test predictions and "
            "acquisition): " + ", ".join(f"{s} {np.mean(v) / 60:.1f} min"
                                         for s, v in per.items())
            + f"; in all {total / 60:.1f} min. Fit seconds by round (mean over seeds; "
            "random: both taggers): " + "; ".join(
                f"{s} " + " / ".join(f"{v:.0f}" for v in np.mean(f, axis=0))
                for s, f in fits.items()) + ".")


def provenance_note(payload):
    """The commits and dates of the stored seeds' runs."""
    seen = {}
    for seed, strategies in payload.get("runs", {}).items():
        for c in strategies.values():
            p = c.get("provenance", {})
            key = (str(p.get("commit"))[:10] + (" (dirty)" if p.get("dirty") else ""))
            seen.setdefault(key, set()).add(int(seed))
    if not seen:
        return None
    return "Seeds by the commit they ran from: " + "; ".join(
        f"{k}: {sorted(v)}" for k, v in seen.items()) + "."


def protocol_notes(payload):
    """What the tables are, from the section's settings."""
    cfg, full = payload["settings"], payload["full_pool"]
    pool = (f"the first {cfg['pool_sentences']} training sentences" if cfg["max_sentences"]
            else f"all {cfg['pool_sentences']} training sentences")
    return [
        f"Pool: {pool} ({cfg['pool_tokens']} tokens); test: {cfg['test_sentences']} "
        "sentences. Start: random whole sentences up to "
        f"{100 * cfg['budgets'][0]:g} % of the pool's tokens (the same for every strategy "
        "of a seed); at each budget the strategy's tagger(s) are fitted and scored, then "
        "it acquires up to the next budget. Columns: test chunk F1 at each budget of "
        "annotated tokens (mean ± SE over seeds; the tokens actually annotated can "
        "overshoot a budget by one sentence).",
        f"Taggers: {GP} (Pipeline with SequenceVectorizer, defaults, random_state = "
        f"seed); {CRF} exact, c1 = 0, c2 = {cfg['c2']:g}, max_iter = 100. gp_partial "
        f"labels ceil({cfg['partial_fraction']:g} x unlabelled) tokens of each sentence "
        "it takes (gp_bald order), those with the largest token mutual information; "
        "the rest are None in fit.",
        "Full-pool F1 (each tagger fitted once on the whole pool, GP random_state = 0): "
        + ", ".join(f"{t} {v['F1']:.2f} (fit {v['fit s']:.0f} s)" for t, v in full.items())
        + f". Target: {100 * TARGET:g} % of it: " + ", ".join(
            f"{t} {TARGET * v['F1']:.2f}" for t, v in full.items()) + ".",
        "Tokens to 99 %: per seed, the first crossing of the target, linear in the "
        "annotated fraction between the budgets around it; a seed that never reaches "
        "it is censored and counts as its final fraction ('≥': some seed censored; "
        "'reached': seeds that reached it). Paired checks: differences of these "
        "fractions over the seeds both strategies have, t = mean / SE; a check fails "
        "when the side that must need fewer tokens has a censored seed, or with fewer "
        f"than {MIN_SEEDS} seeds.",
    ]


def plot(rows, full, path):
    """F1 against annotated tokens, one panel per tagger, mean +- SE bands
    (nothing without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (the 'plot' extra): no figure written.")
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, tagger in zip(axes, (GP, CRF)):
        for r in (r for r in rows if r["tagger"] == tagger):
            x, m = np.array(r["_fraction"]), np.array(r["_F1"])
            se = np.array(r["_se"])
            ax.plot(x, m, marker="o", label=r["strategy"])
            if np.all(np.isfinite(se)):
                ax.fill_between(x, m - se, m + se, alpha=0.2)
        if tagger in full:
            ax.axhline(TARGET * full[tagger]["F1"], color="k", ls="--", lw=0.8,
                       label="99 % of full pool")
        ax.set_title(f"test chunk F1 of {tagger}")
        ax.set_xlabel("annotated tokens (% of pool)")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("F1 (mean ± SE over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"figure: {path}")


def report(script, section, payload, figure):
    """Compute the report of a section's payload, write the section (json
    and md) and the figure."""
    cfg = payload["settings"]
    found = curves(payload)
    tokens = tokens_to_target(found, payload["full_pool"])
    rows = curve_rows(found, tokens, cfg["budgets"])
    for r in rows:
        f1 = np.array([f for _, f in found[(r["strategy"], r["tagger"])].values()])
        r["_se"] = [_mean_se(f1[:, j])[1] for j in range(f1.shape[1])]
    comp, best = comparisons(tokens, cfg["budgets"][-1]) if rows else ([], None)
    notes = protocol_notes(payload)
    notes += [n for n in (mnlp_note(rows, best, comp) if best else None,
                          timing_note(payload), provenance_note(payload)) if n]
    seeds = sorted(payload.get("runs", {}), key=int)
    columns = (["strategy", "tagger", "seeds"] + [f"{100 * b:g} %" for b in cfg["budgets"]]
               + ["tokens to 99 % (%)", "reached"])
    text = f"# {TITLE}\n\n"
    text += (markdown_table(rows, columns) + "\n\n" if rows
             else "No seed run yet: the full-pool F1 only.\n\n")
    if comp:
        text += ("## Acceptance: tokens to 99 % of the full-pool F1, paired over seeds"
                 f" (best GP strategy: {best})\n\n"
                 + markdown_table(comp, ["check", "seeds", "difference (% of pool)", "t",
                                         "bar", "pass"]) + "\n\n")
    text += "\n".join(f"- {n}" for n in notes) + "\n"
    public = {k: v for k, v in payload.items()}
    public.update({"title": TITLE, "seeds": seeds, "notes": notes, "best_gp": best,
                   "rows": [{k: v for k, v in r.items() if not k.startswith("_")}
                            for r in rows],
                   "curves": {f"{s}/{t}": {"annotated %": r["_fraction"], "F1": r["_F1"],
                                           "F1 se": r["_se"]}
                              for r in rows for s, t in [(r["strategy"], r["tagger"])]},
                   "tokens_to_target": {f"{s}/{t}": v for (s, t), v in tokens.items()},
                   "checks": [{k: v for k, v in c.items() if k != "_paired"} | c.get(
                       "_paired", {}) for c in comp]})
    chunk = write_section(script, section, public, text,
                          machine=format_machine(payload.get("machine", {})))
    print(chunk)
    if rows:
        plot(rows, payload["full_pool"], figure)
