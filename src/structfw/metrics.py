"""Metrics over lists of labellings, and scikit-learn scorers made from them.

``StructuredSVM.score`` is the mean per-example accuracy (`hamming_accuracy` for the
models with class labels).  scikit-learn's own metrics take one flat label vector, so
``cross_val_score(svm, X, Y, scoring="accuracy")`` fails on lists of sequences (its
``accuracy_score`` refuses them); pass one of the scorers here instead::

    from sklearn.model_selection import cross_val_score
    import structfw as sf

    cross_val_score(svm, X, Y, scoring=sf.metrics.token_accuracy_scorer, cv=5)

Each metric takes ``Y_true`` and ``Y_pred``, two lists of the same length holding one
labelling per example (an array for a sequence, grid or graph; a scalar for multiclass),
in any label kind (integers, strings, ...).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.metrics import make_scorer

__all__ = ["token_accuracy", "hamming_accuracy", "span_f1", "tag_spans", "expected_calibration_error",
           "token_accuracy_scorer", "hamming_accuracy_scorer", "span_f1_scorer", "SCHEMES"]

#: The tagging schemes of `span_f1`, each with the tag prefixes it allows.
SCHEMES: dict[str, str] = {"IOB2": "BIO", "BIO": "BIO", "IOB1": "BIO", "BIOES": "BIOES", "IOBES": "BIOES"}


def _pairs(Y_true: Sequence[Any], Y_pred: Sequence[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The examples as pairs of arrays of equal shape (ValueErrors name the example)."""
    for name, Y in (("Y_true", Y_true), ("Y_pred", Y_pred)):
        if isinstance(Y, (str, bytes)) or not hasattr(Y, "__len__"):
            raise ValueError(f"{name} must be a list of labellings (one per example), got {type(Y).__name__}")
    if len(Y_true) != len(Y_pred):
        raise ValueError(f"Y_true and Y_pred must have the same length; got {len(Y_true)} and {len(Y_pred)}")
    if len(Y_true) == 0:
        raise ValueError("Y_true and Y_pred hold no examples")
    out = []
    for i, (a, b) in enumerate(zip(Y_true, Y_pred)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            raise ValueError(f"Y_true[{i}] has shape {a.shape} but Y_pred[{i}] has shape {b.shape}")
        out.append((a, b))
    return out


def token_accuracy(Y_true: Sequence[Any], Y_pred: Sequence[Any]) -> float:
    """Fraction of all positions (tokens, nodes, cells) of all examples labelled correctly.

    Every position counts once, so long examples weigh more than short ones; this is the
    per-token accuracy that sequence-labelling papers report.  `hamming_accuracy` (what
    ``StructuredSVM.score`` returns) averages per example instead.

    Parameters
    ----------
    Y_true, Y_pred : list
        One labelling per example (arrays of equal shapes, or scalars).

    Returns
    -------
    float
        correct positions / all positions.
    """
    pairs = _pairs(Y_true, Y_pred)
    total = sum(a.size for a, _ in pairs)
    if total == 0:
        raise ValueError("Y_true holds no positions to compare")
    return float(sum(np.count_nonzero(a == b) for a, b in pairs)) / total


def hamming_accuracy(Y_true: Sequence[Any], Y_pred: Sequence[Any]) -> float:
    """Mean over examples of the fraction of each example's positions labelled correctly.

    1 - the mean normalised Hamming loss: what ``StructuredSVM.score`` returns for the
    models with class labels.  Every example weighs the same, whatever its length (an
    example without positions counts as fully correct, as its Hamming loss is 0).

    Parameters
    ----------
    Y_true, Y_pred : list
        One labelling per example (arrays of equal shapes, or scalars).

    Returns
    -------
    float
    """
    pairs = _pairs(Y_true, Y_pred)
    return float(np.mean([np.count_nonzero(a == b) / a.size if a.size else 1.0 for a, b in pairs]))


def _parse_tag(tag: object, prefixes: str, scheme: str) -> tuple[str, str]:
    """(prefix, type) of a tag such as "B-NP"; ("O", "") for the outside tag."""
    if not isinstance(tag, str):
        raise ValueError(f"span_f1 needs string tags such as 'B-NP' or 'O', got {tag!r}")
    if tag == "O":
        return "O", ""
    prefix, _, typ = tag.partition("-")
    if prefix not in prefixes or prefix == "O":
        raise ValueError(f"tag {tag!r} is not a {scheme} tag: expected 'O' or one of "
                         f"{sorted(set(prefixes) - {'O'})} followed by '-' and the chunk type")
    return prefix, typ


def tag_spans(tags: npt.ArrayLike, scheme: str = "BIO") -> list[tuple[str, int, int]]:
    """The chunks of one tag sequence, as ``(type, start, end)`` with ``end`` exclusive.

    A chunk begins at a ``B-`` (or ``S-``) tag, or at an ``I-`` (or ``E-``) tag that does not
    continue a chunk of its type (a malformed start, such as ``I-NP`` after ``O``, is read as
    the start of a chunk, as the CoNLL evaluation reads it).  It goes on over the following
    ``I-`` (and ``E-``) tags of its type and ends before any other tag, or after an ``E-`` or
    ``S-`` tag.  IOB1 and IOB2 read the same way under this rule; the scheme names the
    prefixes allowed (B, I, O; BIOES also E and S).

    Parameters
    ----------
    tags : sequence of str
        Tags such as "B-NP", "I-NP", "O" (a tag of an empty type, "B", is allowed).
    scheme : {"BIO", "IOB2", "IOB1", "BIOES", "IOBES"}

    Returns
    -------
    list of (str, int, int)
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(SCHEMES)}, got {scheme!r}")
    prefixes = SCHEMES[scheme]
    inside, ends = "IE", "ES"
    seq = np.asarray(tags).ravel().tolist()
    spans = []
    open_type, start = None, 0
    for t, tag in enumerate(seq):
        prefix, typ = _parse_tag(tag, prefixes, scheme)
        if open_type is not None and not (prefix in inside and typ == open_type):
            spans.append((open_type, start, t))
            open_type = None
        if prefix != "O" and open_type is None:
            open_type, start = typ, t
        if open_type is not None and prefix in ends:
            spans.append((open_type, start, t + 1))
            open_type = None
    if open_type is not None:
        spans.append((open_type, start, len(seq)))
    return spans


def span_f1(Y_true: Sequence[Any], Y_pred: Sequence[Any], scheme: str = "BIO", zero_division: float = 0.0) -> float:
    """Chunk F1 of tag sequences (CoNLL chunking and NER): exact span matches.

    A predicted chunk is correct when a true chunk of the same example has the same type,
    start and end (`tag_spans` reads the chunks); F1 = 2 correct / (true chunks + predicted
    chunks), the harmonic mean of precision and recall over all chunks of all examples.

    Parameters
    ----------
    Y_true, Y_pred : list of sequences of str
        One tag sequence per example, tags such as "B-NP", "I-NP", "O".
    scheme : {"BIO", "IOB2", "IOB1", "BIOES", "IOBES"}, default "BIO"
    zero_division : float, default 0.0
        Returned when neither holds any chunk.

    Returns
    -------
    float
    """
    pairs = _pairs(Y_true, Y_pred)
    n_true = n_pred = correct = 0
    for a, b in pairs:
        if a.ndim != 1:
            raise ValueError(f"span_f1 needs one tag sequence per example (1-D), got shape {a.shape}")
        true, pred = set(tag_spans(a, scheme)), set(tag_spans(b, scheme))
        n_true += len(true)
        n_pred += len(pred)
        correct += len(true & pred)
    if n_true + n_pred == 0:
        return float(zero_division)
    return 2.0 * correct / (n_true + n_pred)


def expected_calibration_error(Y_true: Sequence[Any], marginals: Sequence[Any], n_bins: int = 10,
                               classes: npt.ArrayLike | None = None) -> float:
    """Expected calibration error of per-token confidences (Guo et al. 2017, equal-width bins).

    Every position of every example is one prediction: its label is the argmax of its row of
    marginals and its confidence the row's maximum.  The positions are put in ``n_bins`` bins
    of equal width by confidence, bin b holding the confidences in (b / n_bins, (b + 1) / n_bins]
    (a confidence of 0 in the first); then

        ECE = sum_b (|B_b| / N) |accuracy(B_b) - mean confidence(B_b)|,

    over the N positions of all examples, so long examples weigh more, as in `token_accuracy`.
    0 is perfectly calibrated; a model whose tokens are right 80 % of the time at confidence
    0.99 has an ECE near 0.19.

    Parameters
    ----------
    Y_true : list
        One labelling per example (an array for a sequence or graph, a scalar for multiclass).
    marginals : list of ndarray
        Per example its node marginals, shape Y_true[i].shape + (K,): what
        ``StructuredSVM.predict_marginals`` returns.
    n_bins : int >= 1, default 10
    classes : array-like (K,) or None
        The label of each column (``StructuredSVM.classes_``).  None: the labels of Y_true are
        the column indices 0..K-1 themselves.

    Returns
    -------
    float
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    for name, Y in (("Y_true", Y_true), ("marginals", marginals)):
        if isinstance(Y, (str, bytes)) or not hasattr(Y, "__len__"):
            raise ValueError(f"{name} must be a list (one entry per example), got {type(Y).__name__}")
    if len(Y_true) != len(marginals):
        raise ValueError(f"Y_true and marginals must have the same length; got {len(Y_true)} and {len(marginals)}")
    if len(Y_true) == 0:
        raise ValueError("Y_true and marginals hold no examples")
    labels = None if classes is None else np.asarray(classes)
    conf, correct = [], []
    for i, (y, m) in enumerate(zip(Y_true, marginals)):
        y, m = np.asarray(y), np.asarray(m, dtype=np.float64)
        if m.ndim < 1 or m.shape[:-1] != y.shape:
            raise ValueError(f"marginals[{i}] has shape {m.shape}; expected Y_true[{i}]'s shape {y.shape} plus "
                             "one axis of classes")
        if labels is not None and m.shape[-1] > labels.size:
            raise ValueError(f"marginals[{i}] has {m.shape[-1]} columns but classes names {labels.size}")
        if m.size and not (np.all(np.isfinite(m)) and m.min() >= 0.0 and m.max() <= 1.0 + 1e-9):
            raise ValueError(f"marginals[{i}] must hold probabilities in [0, 1]")
        pred = np.argmax(m, axis=-1)
        conf.append(np.max(m, axis=-1).ravel() if m.shape[-1] else np.zeros(0))
        correct.append(((pred if labels is None else labels[pred]) == y).ravel())
    c = np.concatenate(conf)
    ok = np.concatenate(correct).astype(np.float64)
    if c.size == 0:
        raise ValueError("Y_true holds no positions to compare")
    b = np.clip(np.ceil(c * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    count = np.bincount(b, minlength=n_bins)
    gap = np.abs(np.bincount(b, ok, minlength=n_bins) - np.bincount(b, c, minlength=n_bins))
    # |sum(ok) - sum(c)| per bin is |B_b| |acc - conf|: dividing by N gives the weighted mean
    return float(gap[count > 0].sum() / c.size)


#: ``scoring=`` for scikit-learn's model selection: `token_accuracy` of ``predict(X)``.
token_accuracy_scorer = make_scorer(token_accuracy)
#: ``scoring=``: `hamming_accuracy` (``StructuredSVM.score`` for the models with class labels).
hamming_accuracy_scorer = make_scorer(hamming_accuracy)
#: ``scoring=``: `span_f1` with the BIO scheme (``make_scorer(span_f1, scheme="BIOES")`` for another).
span_f1_scorer = make_scorer(span_f1)
