"""Deterministic prediction of GPStructTagger (issue 11, point 2) and the
mixed label types error (point 3)."""

import numpy as np
import pytest
import scipy.sparse as sp

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct._input.sequences import SequenceData, sequence_seeds
from skgpstruct.datasets import make_chain_data

FAST = dict(n_samples=8, n_predict_samples=8, max_iter=20)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def data():
    return make_chain_data(n_sequences=30, n_classes=3, n_features=6,
                           length=(2, 7), random_state=1)


@pytest.fixture(scope="module", params=["features", "inducing"])
def fitted(request, data):
    X, y = data
    kw = dict(kernel_variance=3.0) if request.param == "features" else dict(
        approximation="inducing", kernel_variance=3.0, n_inducing=20,
        transition_prior_var=1.0)
    # random_state=None: the case that used to differ between calls
    return GPStructTagger(random_state=None, **FAST, **kw).fit(X[:20], y[:20])


def _same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_repeated_calls_are_identical(fitted, data):
    X, y = data
    _same(fitted.predict_marginals(X[20:]), fitted.predict_marginals(X[20:]))
    _same(fitted.predict(X[20:]), fitted.predict(X[20:]))
    assert fitted.score(X[20:], y[20:]) == fitted.score(X[20:], y[20:])
    _same(fitted.predict_uncertainty(X[20:], kind="mutual_information"),
          fitted.predict_uncertainty(X[20:], kind="mutual_information"))
    assert fitted.elbo(X[20:], y[20:]) == fitted.elbo(X[20:], y[20:])


def test_a_sequence_does_not_depend_on_its_batch(fitted, data):
    X, _ = data
    # the moments are per sequence in both forms (the inducing form's used to
    # come from batched BLAS products, 1e-15 off) and the draws are seeded
    # per sequence: bit-identical
    check = np.testing.assert_array_equal
    batch = fitted.predict_marginals(X[20:])
    labels = fitted.predict(X[20:])
    for i in (0, 4, 9):
        check(fitted.predict_marginals([X[20 + i]])[0], batch[i])
        np.testing.assert_array_equal(fitted.predict([X[20 + i]])[0], labels[i])
    # reversed order, and a duplicate in the batch
    rev = fitted.predict_marginals(X[20:][::-1] + [X[20]])
    for a, b in zip(rev[:-1][::-1], batch):
        check(a, b)
    check(rev[-1], batch[0])
    # a long neighbour, and a sparse copy of the sequence
    long_ = np.concatenate(X[:20])
    check(fitted.predict_marginals([long_, X[24]])[1], batch[4])
    # a sparse neighbour: the batch is stacked as CSR, the dense sequence
    # keeps its dense products
    check(fitted.predict_marginals([X[24], sp.csr_matrix(X[21])])[0], batch[4])
    check(fitted.predict_path_proba([X[24], sp.csr_matrix(X[21])], log=True)[:1],
          fitted.predict_path_proba([X[24]], log=True))
    for kind in ("entropy", "mutual_information", "marginal_std"):
        per = ("token",) if kind == "marginal_std" else ("token", "path")
        for p in per:
            check(fitted.predict_uncertainty([X[21], X[24]], kind=kind, per=p)[1],
                  fitted.predict_uncertainty([X[24]], kind=kind, per=p)[0])


@pytest.mark.parametrize("kw", [dict(n_top=None), dict(n_top=None, transitions="low_rank",
                                                      rank=2),
                                dict(n_top=2, n_sampled=0)])
def test_crf_sequence_does_not_depend_on_the_other_sequences_representation(kw):
    """A batch that mixes dense and sparse sequences is stacked as CSR; the
    dense sequences must still get the potentials they get in an all-dense
    batch (they used to get the CSR product's: 1e-16 off in the marginals,
    1e-14 in the log path probabilities), and the sparse ones those of an
    all-sparse batch."""
    X, y = make_chain_data(n_sequences=12, n_classes=3, n_features=4,
                           length=(1, 30), random_state=5)
    crf = RandomizedCRFTagger(max_iter=30, random_state=0, **kw).fit(X, y)
    dense, other = X[3], X[0]
    mixed = [sp.csr_matrix(other), dense, sp.csr_matrix(X[7])]
    for method in ("predict_marginals", "predict_path_proba", "predict"):
        f = getattr(crf, method)
        _same(f(mixed)[1:2], f([dense]))
        _same(f(mixed)[1:2], f([X[5], dense])[1:])
        _same(f(mixed)[0:1], f([sp.csr_matrix(other)]))
        _same(f(mixed)[2:], f([sp.csr_matrix(X[7]), sp.csr_matrix(other)])[:1])
    _same(crf.predict_uncertainty(mixed, per="path")[1:2],
          crf.predict_uncertainty([dense], per="path"))
    # the data container keeps the dense rows through a subset
    data = SequenceData.from_sequences(mixed)
    np.testing.assert_array_equal(data.subset([1]).dense_rows, np.ones(len(dense), bool))
    assert SequenceData.from_sequences([dense]).dense_rows is None
    assert data.subset([0, 2]).dense_rows is None


@pytest.mark.parametrize("kw", [dict(n_top=None), dict(n_top=None, transitions="low_rank",
                                                      rank=2)])
def test_crf_one_token_sequence_alone_or_in_a_batch(kw):
    """A batch of one one-token dense sequence is a one-row product, which
    numpy computes with a matrix-vector routine (1e-15 off the
    matrix-matrix product of a longer batch, before the fix)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(T, 200)) for T in [1, 5, 7, 3] * 5]
    y = [rng.integers(0, 3, size=len(x)) for x in X]
    crf = RandomizedCRFTagger(random_state=0, max_iter=5, **kw).fit(X, y)
    for method in ("predict_marginals", "predict_path_proba"):
        f = getattr(crf, method)
        _same(f(X[:4])[:1], f(X[:1]))
        _same(f([sp.csr_matrix(X[1]), X[0]])[1:], f(X[:1]))  # a mixed batch's dense row


def test_n_jobs_does_not_change_predictions(fitted, data):
    X, _ = data
    one = fitted.predict_marginals(X[20:])
    fitted.set_params(n_jobs=2)
    try:
        _same(fitted.predict_marginals(X[20:]), one)
    finally:
        fitted.set_params(n_jobs=None)


def test_same_random_state_same_predictions(data):
    X, y = data
    a = GPStructTagger(random_state=3, kernel_variance=3.0, **FAST).fit(X[:20], y[:20])
    b = GPStructTagger(random_state=3, kernel_variance=3.0, **FAST).fit(X[:20], y[:20])
    assert a.predict_seed_ == b.predict_seed_
    _same(a.predict_marginals(X[20:]), b.predict_marginals(X[20:]))


def test_sequence_seeds_depend_on_content_and_seed_only():
    rng = np.random.RandomState(0)
    X = [rng.randn(4, 5), rng.randn(3, 5), rng.randn(4, 5)]
    X[2][:, 1] = 0.0
    dense = sequence_seeds(SequenceData.from_sequences(X), 11)
    sparse = sequence_seeds(SequenceData.from_sequences([sp.csr_matrix(x) for x in X]), 11)
    np.testing.assert_array_equal(dense, sparse)  # format does not matter
    # an explicit zero, unsorted indices: same canonical form
    csr = sp.csr_matrix(X[2])
    messy = sp.csr_matrix((np.r_[csr.data, 0.0], np.r_[csr.indices, 1],
                           np.r_[csr.indptr[:-1], csr.indptr[-1] + 1]), shape=csr.shape)
    assert sequence_seeds(SequenceData.from_sequences([messy]), 11)[0] == dense[2]
    assert len(set(dense)) == 3
    assert not np.array_equal(sequence_seeds(SequenceData.from_sequences(X), 12), dense)
    X[0][0, 0] += 1e-12  # any change of the values changes the draws
    assert sequence_seeds(SequenceData.from_sequences(X), 11)[0] != dense[0]
    assert np.all((dense >= 0) & (dense < 2 ** 31 - 1))


@pytest.mark.parametrize("Est", [GPStructTagger, RandomizedCRFTagger])
def test_mixed_label_types_are_an_error(Est, data):
    X, y = data
    y = [list(map(str, t)) if i == 0 else list(t) for i, t in enumerate(y[:10])]
    with pytest.raises(ValueError, match="label types"):
        Est().fit(X[:10], y)


@pytest.mark.parametrize("n_sequences", [20, 300])
def test_inducing_fit_does_not_depend_on_n_jobs(n_sequences):
    # M = 30 inducing tokens is where multi-threaded BLAS starts to round
    # differently; 300 sequences are two chunks of the ELBO's sum
    X, y = make_chain_data(n_sequences=n_sequences, n_classes=3, n_features=4,
                           length=(3, 6), random_state=0)
    kw = dict(approximation="inducing", kernel_variance=1.0, n_inducing=30,
              n_samples=4, max_iter=3, random_state=0)
    a = GPStructTagger(n_jobs=1, **kw).fit(X, y)
    b = GPStructTagger(n_jobs=2, **kw).fit(X, y)
    np.testing.assert_array_equal(a.q_mu_, b.q_mu_)
    np.testing.assert_array_equal(a.q_sqrt_, b.q_sqrt_)
    assert a.elbo_history_ == b.elbo_history_
