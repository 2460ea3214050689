"""The linear-chain CRF under Gaussian noise on its weights: sampled
log-likelihoods of sequences of sparse features and their pathwise
gradients w.r.t. the noise's means and log variances.

This is the expected log-likelihood of a mean-field Gaussian posterior over
a CRF's unary weights (one weight per feature and label) and transitions,
estimated from ``n_samples`` draws per sequence, each draw of *weights*
(the draws of a feature's weights are shared by all tokens of a sequence
that have the feature). It costs ``O(S (nnz_n + T_n V) V)`` per sequence
and its result depends on the sequence and its seed only
(:mod:`skgpstruct.chain._weight_noise_kernels`).

- :class:`SequenceColumns`: a CSR token matrix cut into sequences, each
  with its sorted distinct features and the tokens' entries indexed into
  them, prepared once;
- :func:`weight_noise_pass`: the sampled log-likelihoods of some of the
  sequences and the gradients, summed over them, of the distinct features
  they touch (row-sparse), the transitions and the scale.
"""

import numpy as np
import scipy.sparse as sp

from . import _weight_noise_kernels as _k

__all__ = ["SequenceColumns", "weight_noise_pass"]

#: Sequences per unit of parallel work of :func:`weight_noise_pass` (fixed:
#: the sums do not depend on the number of threads).
CHUNK_SEQUENCES = 16


class SequenceColumns:
    """Sequences of a CSR token matrix, each with its own distinct features.

    Parameters
    ----------
    X : sparse matrix of shape (n_tokens, n_features)
        Tokens of all sequences, stacked.
    offsets : array-like of int of shape (n_sequences + 1,)
        Token offsets of the sequences.

    Attributes
    ----------
    tok_off, col_off : ndarray of int64 of shape (n_sequences + 1,)
        Token offsets, and offsets into ``cols``.
    cols : ndarray of int64
        Each sequence's distinct features: the ``n_shared[n]`` that two of
        its tokens or more have first, then those of one token, each part
        sorted.
    n_shared : ndarray of int64 of shape (n_sequences,)
        Number of each sequence's features shared by two tokens or more.
    indptr, loc, val : ndarray
        The CSR rows of the tokens, the column of each entry as its position
        in its sequence's ``cols``.
    counts : ndarray of int64 of shape (n_features,)
        Number of sequences that have each feature.
    """

    def __init__(self, X, offsets):
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()
        X.sort_indices()
        self.n_features = X.shape[1]
        self.tok_off = np.asarray(offsets, dtype=np.int64)
        if self.tok_off[-1] != X.shape[0]:
            raise ValueError(f"The offsets cover {self.tok_off[-1]} tokens, X has "
                             f"{X.shape[0]}.")
        n = self.tok_off.size - 1
        token_seq = np.repeat(np.arange(n), np.diff(self.tok_off))
        entry_seq = np.repeat(token_seq, np.diff(X.indptr))
        key = entry_seq * np.int64(self.n_features) + X.indices
        uniq, inverse, n_tokens = np.unique(key, return_inverse=True, return_counts=True)
        inverse = inverse.ravel()
        seq_of, col_of = uniq // self.n_features, uniq % self.n_features
        # each sequence's features shared by two of its tokens or more first
        # (drawn per feature), then those of one token (drawn per token)
        single = n_tokens < 2
        order = np.lexsort((col_of, single, seq_of))
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        self.cols = col_of[order].astype(np.int64)
        per_seq = np.bincount(seq_of, minlength=n)
        self.col_off = np.concatenate([[0], np.cumsum(per_seq)]).astype(np.int64)
        self.n_shared = np.bincount(seq_of[~single], minlength=n).astype(np.int64)
        self.loc = (rank[inverse] - self.col_off[entry_seq]).astype(np.int64)
        self.indptr = X.indptr.astype(np.int64)
        self.val = X.data
        self.counts = np.bincount(self.cols, minlength=self.n_features).astype(np.int64)

    @property
    def n_sequences(self):
        return self.tok_off.size - 1

    def n_cols(self, seqs):
        """Distinct features of each of the sequences ``seqs``."""
        return self.col_off[seqs + 1] - self.col_off[seqs]


def weight_noise_pass(columns, y, seqs, seeds, W, m_bin, log_var_bin, *, scale=1.0,
                      jitter_sd=0.0, n_samples=1, parallel=None):
    """Sampled log-likelihoods of the sequences ``seqs`` and their gradients.

    Parameters
    ----------
    columns : SequenceColumns
        The sequences' tokens.
    y : ndarray of int64 of shape (n_tokens,)
        Gold labels of all tokens.
    seqs : ndarray of int of shape (n_batch,)
        The sequences to run.
    seeds : ndarray of int of shape (n_batch,)
        One seed per sequence of ``seqs`` (its draws).
    W : ndarray of float64 of shape (n_features, 2 V)
        Per feature, the means of its ``V`` weights then their log variances.
    m_bin, log_var_bin : ndarray of shape (V, V)
        Means and log variances of the transitions.
    scale : float, default=1.0
        The unary potentials of a draw are ``scale * (x @ w + jitter_sd *
        e)``.
    jitter_sd : float, default=0.0
        Standard deviation of independent noise on each token's potentials
        (before ``scale``).
    n_samples : int, default=1
        Draws per sequence.
    parallel : joblib.Parallel or None, default=None
        Threads over chunks of :data:`CHUNK_SEQUENCES` sequences; the
        result does not depend on it.

    Returns
    -------
    values : ndarray of shape (n_batch,)
        Each sequence's mean log-likelihood over its draws.
    rows : ndarray of int64 of shape (n_rows,)
        The distinct features of the batch, sorted.
    g_rows : ndarray of shape (n_rows, 2 V)
        Gradient of ``values.sum()`` w.r.t. their rows of ``W``.
    row_counts : ndarray of int64 of shape (n_rows,)
        How many sequences of the batch have each of them.
    g_bin : ndarray of shape (2, V, V)
        Gradient w.r.t. ``m_bin`` and ``log_var_bin``.
    g_log_scale : float
        Gradient w.r.t. ``log scale^2``.
    """
    seqs = np.ascontiguousarray(seqs, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    W = np.ascontiguousarray(W, dtype=np.float64)
    V = m_bin.shape[0]
    if W.shape != (columns.n_features, 2 * V):
        raise ValueError(f"W has shape {W.shape}; expected "
                         f"{(columns.n_features, 2 * V)}.")
    if seqs.shape != seeds.shape:
        raise ValueError("seqs and seeds must have the same length.")
    if int(n_samples) < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples!r}.")
    n_cols = columns.n_cols(seqs)
    out_off = np.concatenate([[0], np.cumsum(n_cols)]).astype(np.int64)
    g_cols = np.empty((out_off[-1], 2 * V))
    nb = seqs.size
    g_bin = np.empty((nb, 2, V, V))
    values, g_log = np.empty(nb), np.empty(nb)
    m_bin = np.ascontiguousarray(m_bin, dtype=np.float64)
    sd_bin = np.exp(0.5 * np.asarray(log_var_bin, dtype=np.float64))
    y = np.ascontiguousarray(y, dtype=np.int64)

    def run(a, b):
        o = out_off[a]
        _k.batch_pass(seqs[a:b], seeds[a:b], columns.tok_off, columns.indptr, columns.loc,
                      columns.val, columns.col_off, columns.n_shared, columns.cols, y, W, m_bin, sd_bin,
                      float(scale), float(jitter_sd), int(n_samples), out_off[a:b + 1] - o,
                      g_cols[o:out_off[b]], g_bin[a:b], values[a:b], g_log[a:b])

    cuts = list(range(0, nb, CHUNK_SEQUENCES)) + [nb]
    if parallel is None or len(cuts) <= 2:
        for a, b in zip(cuts[:-1], cuts[1:]):
            run(a, b)
    else:
        from joblib import delayed

        parallel(delayed(run)(a, b) for a, b in zip(cuts[:-1], cuts[1:]))
    batch_cols = np.concatenate([columns.cols[columns.col_off[n]:columns.col_off[n + 1]]
                                 for n in seqs]) if nb else np.zeros(0, np.int64)
    rows, positions = np.unique(batch_cols, return_inverse=True)
    g_rows = np.empty((rows.size, 2 * V))
    row_counts = np.empty(rows.size, dtype=np.int64)
    _k.scatter_rows(g_cols, positions.ravel().astype(np.int64), rows.size, g_rows, row_counts)
    return values, rows, g_rows, row_counts, g_bin.sum(axis=0), float(g_log.sum())
