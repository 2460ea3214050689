"""Command line: ``python -m skgpstruct demo``.

The demo is the package's main job on built-in data: it draws sequences from
a random linear-chain model (:func:`skgpstruct.datasets.make_chain_data`),
trains linear-chain CRFs on them (:class:`~skgpstruct.RandomizedCRFTagger`,
exact and with randomized dynamic programming) and the Bayesian
:class:`~skgpstruct.GPStructTagger`, and prints their token error next to a
per-token logistic regression, which sees the same features but no
transitions.
"""

import argparse
import sys
import time
import warnings

import numpy as np

__all__ = ["main", "demo"]


def demo(n_sequences=400, n_classes=5, n_features=20, random_state=0, out=None):
    """Fit linear-chain CRFs on synthetic data and compare them with a per-token model.

    Parameters
    ----------
    n_sequences : int, default=400
        Number of sequences drawn (half train, half test).
    n_classes : int, default=5
        Number of labels.
    n_features : int, default=20
        Number of token features.
    random_state : int, default=0
        Seed of the data.
    out : file-like, default=None
        Where to print (``sys.stdout`` if None).

    Returns
    -------
    errors : dict
        Token error rate (percent) of each model, by name.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from skgpstruct import GPStructTagger, RandomizedCRFTagger
    from skgpstruct.datasets import make_chain_data
    from skgpstruct.metrics import token_error_rate

    out = sys.stdout if out is None else out
    X, y = make_chain_data(
        n_sequences=n_sequences,
        n_classes=n_classes,
        n_features=n_features,
        random_state=random_state,
    )
    n_train = n_sequences // 2
    X_tr, y_tr, X_te, y_te = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    n_tokens = sum(len(s) for s in y_tr)
    print(
        f"make_chain_data: {n_train} training / {n_sequences - n_train} test "
        f"sequences, {n_tokens} training tokens, {n_classes} labels, "
        f"{n_features} features",
        file=out,
    )

    # Per-token baseline: same features, no transitions.
    t0 = time.perf_counter()
    logreg = LogisticRegression(max_iter=1000).fit(
        np.concatenate(X_tr), np.concatenate(y_tr)
    )
    t_lr = time.perf_counter() - t0
    pred_lr = [logreg.predict(x) for x in X_te]

    rows = [("per-token logistic regression", pred_lr, t_lr)]
    crf = RandomizedCRFTagger(c2=0.1, random_state=random_state)
    t0 = time.perf_counter()
    crf.fit(X_tr, y_tr)
    t_crf = time.perf_counter() - t0
    rows.append(("linear-chain CRF (exact, L-BFGS, Viterbi)", crf.predict(X_te), t_crf))
    # Marginal decoding with the exact chain kernels on the fitted potentials.
    pred_marg = [
        crf.classes_[m.argmax(axis=1)] for m in crf.predict_marginals(X_te)
    ]
    rows.append(("linear-chain CRF (max marginals)", pred_marg, float("nan")))
    k = max(1, n_classes // 2)
    rdp_crf = RandomizedCRFTagger(
        n_top=k, n_sampled=1, c2=0.1, max_iter=30, random_state=random_state
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rdp_crf.fit(X_tr, y_tr)
    rows.append(
        (f"randomized-DP CRF ({k} top + 1 sampled of {n_classes}, Adam)",
         rdp_crf.predict(X_te), time.perf_counter() - t0)
    )
    gp = GPStructTagger(n_inducing=30, tol=1e-4, random_state=random_state)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(X_tr, y_tr)
    rows.append(
        ("GPStructTagger (30 inducing points, L-BFGS)", gp.predict(X_te),
         time.perf_counter() - t0)
    )
    errors = {}
    print(f"{'model':<52}{'token error %':>14}{'fit s':>8}", file=out)
    for name, pred, seconds in rows:
        errors[name] = token_error_rate(y_te, pred)
        fit_s = "" if seconds != seconds else f"{seconds:.2f}"
        print(f"{name:<52}{errors[name]:>14.2f}{fit_s:>8}", file=out)
    return errors


def main(argv=None):
    """Entry point of ``python -m skgpstruct``.

    Parameters
    ----------
    argv : list of str, default=None
        Command-line arguments (``sys.argv[1:]`` if None).

    Returns
    -------
    status : int
        Process exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m skgpstruct",
        description="skgpstruct: sequence labelling with uncertainty and at scale.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="fit on built-in synthetic data and report")
    p_demo.add_argument("--n-sequences", type=int, default=400)
    p_demo.add_argument("--n-classes", type=int, default=5)
    p_demo.add_argument("--n-features", type=int, default=20)
    p_demo.add_argument("--random-state", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo(
            n_sequences=args.n_sequences,
            n_classes=args.n_classes,
            n_features=args.n_features,
            random_state=args.random_state,
        )
    return 0
