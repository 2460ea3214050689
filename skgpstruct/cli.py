"""Command line: ``python -m skgpstruct demo``.

The demo is the package's main job on built-in data: it draws sequences from
a random linear-chain model (:func:`skgpstruct.datasets.make_chain_data`),
trains a linear-chain CRF on them with the exact chain kernels
(:mod:`skgpstruct.chain`, L-BFGS on the log-likelihood and its gradient) and
prints its token error next to a per-token logistic regression, which sees
the same features but no transitions.
"""

import argparse
import sys
import time

import numpy as np
from scipy.optimize import minimize

__all__ = ["main", "demo"]


def _crf_objective(params, X, y, n_features, n_classes, c2):
    """Negative CRF log-likelihood + L2 and its gradient (flat parameters)."""
    from skgpstruct import chain

    D, V = n_features, n_classes
    W = params[: D * V].reshape(D, V)
    b = params[D * V : D * V + V]
    B = params[D * V + V :].reshape(V, V)
    loss = 0.5 * c2 * np.sum(W * W)
    gW = c2 * W
    gb = np.zeros(V)
    gB = np.zeros((V, V))
    for Xn, yn in zip(X, y):
        U = Xn @ W + b
        value, dU, dB = chain.log_likelihood_grad(U, B, yn)
        loss -= value
        gW -= Xn.T @ dU
        gb -= dU.sum(axis=0)
        gB -= dB
    return loss, np.concatenate([gW.ravel(), gb, gB.ravel()])


def demo(n_sequences=400, n_classes=5, n_features=20, random_state=0, out=None):
    """Fit a linear-chain CRF on synthetic data and compare it with a per-token model.

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
    results : dict
        Token error rates (percent) of the CRF and the per-token model, and
        the CRF's fit time in seconds.
    """
    from sklearn.linear_model import LogisticRegression

    from skgpstruct import chain
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

    # Linear-chain CRF trained with the exact chain kernels.
    D, V = n_features, n_classes
    x0 = np.zeros(D * V + V + V * V)
    t0 = time.perf_counter()
    res = minimize(
        _crf_objective,
        x0,
        args=(X_tr, y_tr, D, V, 1.0),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 300},
    )
    t_crf = time.perf_counter() - t0
    W = res.x[: D * V].reshape(D, V)
    b = res.x[D * V : D * V + V]
    B = res.x[D * V + V :].reshape(V, V)
    pred_crf = [chain.viterbi(x @ W + b, B)[0] for x in X_te]
    pred_marg = [chain.marginals(x @ W + b, B)[0].argmax(axis=1) for x in X_te]

    err_lr = token_error_rate(y_te, pred_lr)
    err_crf = token_error_rate(y_te, pred_crf)
    err_marg = token_error_rate(y_te, pred_marg)
    print(f"{'model':<42}{'token error %':>14}{'fit s':>8}", file=out)
    print(f"{'per-token logistic regression':<42}{err_lr:>14.2f}{t_lr:>8.2f}", file=out)
    print(f"{'linear-chain CRF (L-BFGS, Viterbi)':<42}{err_crf:>14.2f}{t_crf:>8.2f}", file=out)
    print(f"{'linear-chain CRF (max marginals)':<42}{err_marg:>14.2f}{'':>8}", file=out)
    return {"logreg_error": err_lr, "crf_error": err_crf,
            "crf_marginal_error": err_marg, "crf_fit_seconds": t_crf}


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
