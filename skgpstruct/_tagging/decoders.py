"""Decoders shared by the taggers: from a fitted model to label paths.

A decoder is a function ``decoder(tagger, data, backend) -> paths`` with
``data`` the validated :class:`~skgpstruct._input.sequences.SequenceData` of the
sequences to label, ``backend`` a :func:`skgpstruct.chain.backend.get_backend`
object and ``paths`` one int64 array of label indices per sequence. It asks
the tagger for what it needs through two hooks:

- ``tagger._decode_potentials(data) -> (U, transitions)``: point potentials,
  ``U`` of shape (n_tokens, n_classes) (sequences stacked) and
  ``transitions`` a (n_classes, n_classes) matrix or low-rank
  ``(left, right)`` embeddings with ``B = left @ right.T``;
- ``tagger._token_marginals(data)``: a list of (T_n, n_classes) marginals.

:data:`DECODERS` maps the names the estimators accept to the functions:

- ``"marginal"``: the per-token argmax of the marginals (minimum expected
  Hamming loss);
- ``"viterbi"``: the best path under the point potentials (exact Viterbi,
  on the backend's device);
- ``"beam"``: Viterbi restricted to the ``tagger.beam_size`` best unary
  states per position (:func:`skgpstruct.chain.beam.beam_viterbi`, CPU).

A new decoder is one function here and one entry in :data:`DECODERS`.
"""

from ..chain.beam import beam_viterbi

__all__ = ["DECODERS", "decode"]


def _dense(transitions):
    if isinstance(transitions, tuple):
        left, right = transitions
        return left @ right.T
    return transitions


def _marginal(tagger, data, backend):
    return [m.argmax(axis=1) for m in tagger._token_marginals(data)]


def _viterbi(tagger, data, backend):
    U, transitions = tagger._decode_potentials(data)
    paths, _ = backend.viterbi_ragged(U, data.lengths, _dense(transitions))
    return data.split(paths)


def _beam(tagger, data, backend):
    U, transitions = tagger._decode_potentials(data)
    return [beam_viterbi(u, transitions, tagger.beam_size)[0] for u in data.split(U)]


DECODERS = {"marginal": _marginal, "viterbi": _viterbi, "beam": _beam}


def decode(name, tagger, data, backend):
    """Label paths of ``data`` by the decoder ``name``.

    Parameters
    ----------
    name : {"marginal", "viterbi", "beam"}
        Key of :data:`DECODERS`.
    tagger : estimator
        A fitted tagger with the hooks the decoder uses (module docstring).
    data : SequenceData
        The sequences to label.
    backend : CPUBackend or CUDABackend
        Where exact Viterbi runs.

    Returns
    -------
    paths : list of ndarray of int64 of shape (T_n,)
        Label indices (positions in ``tagger.classes_``).
    """
    try:
        decoder = DECODERS[name]
    except KeyError:
        raise ValueError(
            f"Unknown decoder {name!r}; expected one of {sorted(DECODERS)}."
        ) from None
    return decoder(tagger, data, backend)
