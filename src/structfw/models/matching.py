"""Bipartite matching model for word alignment (Taskar, Lacoste-Julien, Klein 2005).

The BCFW paper's third task (Lacoste-Julien et al. 2013, Sec. 6: "a word alignment
problem between sentences in different languages", n = 5000, d = 82).  Every pair
(j, k) of a source word j and a target word k is a candidate edge with features
x_jk in R^F; an alignment is a one-to-one partial matching.

Conventions
-----------
x : the edge features of one sentence pair, either a dense (m_s, m_t, F) array or a
    `MatchingInput` (CSR features with one row per edge, row j*m_t + k).
y : (m_s,) int64, y[j] = the target word aligned to source word j, or -1 (null).
    Every target word is used at most once (one-to-one; null on both sides allowed).
phi(x, y) = sum_{j : y[j] >= 0} x_{j, y[j]}   (d = F; null alignments add nothing, so a
    bias feature acts as the threshold an edge's score must beat to be used).
Delta(y_true, y) = (fn_cost |E_true minus E| + |E minus E_true|) / ((1 + fn_cost) m_s), the edge
    Hamming loss with E = {(j, y[j]) : y[j] >= 0}, normalised to [0, 1]: per source word, a
    wrong link costs 1, a missed link fn_cost / (1 + fn_cost), a spurious one
    1 / (1 + fn_cost) (1/2 each for the default fn_cost = 1; Taskar et al. weight missed
    links more, fn_cost > 1, to favour recall).  It is a constant plus a sum over the
    edges of y, so loss-augmented decoding is again a matching problem.

Decoding and loss-augmented decoding are exact: one rectangular linear assignment
(`structfw.oracles.matching.max_weight_partial_matching`; the oracle is
`structfw.oracles.potentials.matching_hinge`'s on the edge scores at w).  There is no
expectation oracle: marginals of a matching distribution need the permanent (#P-hard),
which is why online-EG does not apply to this task.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, cast

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from .._linalg import SparseVector
from ..oracles.matching import (
    matching_hamming,
    matching_phi_diff_csr,
    matching_phi_diff_dense,
    matching_scores_csr,
    matching_scores_dense,
    max_weight_partial_matching,
)
from ..oracles.potentials import matching_search
from ._validation import (
    as_float_array,
    check_finite,
    check_int_param,
    check_joint_feature_size,
    check_sequence_of_inputs,
    one_example_error,
)
from .base import CheckedModel, WeightedInput, check_example_weight, checked, register_model, unweighted

_EMPTY = np.empty(0, np.int64)


class MatchingInput(NamedTuple):
    """Sparse edge features of one sentence pair (what `MatchingModel.check_X` keeps).

    features : CSR matrix (n_source * n_target, F), float64 with int64 indices, row
        j * n_target + k holding the features of edge (source j, target k)
    n_source, n_target : int, the sentence lengths m_s and m_t
    """

    features: sp.csr_matrix
    n_source: int
    n_target: int

    @property
    def shape(self) -> tuple[int, int, int]:
        """(m_s, m_t, F), as for the dense layout."""
        return (self.n_source, self.n_target, self.features.shape[1])

    def sum(self) -> float:
        """Sum of all feature values (a cheap fingerprint of the input)."""
        return float(self.features.sum())

    def toarray(self) -> npt.NDArray[np.float64]:
        """The dense (m_s, m_t, F) features."""
        return self.features.toarray().reshape(self.shape)

    @classmethod
    def from_dense(cls, x: npt.ArrayLike) -> MatchingInput:
        """Sparse copy of dense (m_s, m_t, F) edge features."""
        x = np.asarray(x, dtype=np.float64)
        ms, mt, F = x.shape
        return cls(sp.csr_matrix(x.reshape(ms * mt, F)), ms, mt)


def _sizes(x: npt.NDArray[np.float64] | MatchingInput) -> tuple[int, int]:
    """(m_s, m_t) of a validated input."""
    x = unweighted(x)
    if type(x) is np.ndarray:
        return x.shape[0], x.shape[1]
    # mypy narrows no else branch of a `type(x) is` test; isinstance would, but would also take subclasses
    x = cast(MatchingInput, x)
    return x.n_source, x.n_target


@register_model
class MatchingModel(CheckedModel):
    """Word alignment as a bipartite matching: edge features, edge Hamming loss.

    Parameters
    ----------
    n_features : int >= 1
        F, the number of features of an edge (= d, the length of w).
    fn_cost : float > 0, default 1.0
        Cost of a missed true edge relative to a spurious one in the loss (see the
        module docstring).

    Notes
    -----
    Inputs and labellings are described in the module docstring; `check_X`
    accepts dense (m_s, m_t, F) arrays, `MatchingInput` or a tuple
    ``(features, n_source, n_target)`` with ``features`` of shape (m_s*m_t, F) (sparse
    or dense).  Labellings are integer target positions (-1 = null), never encoded:
    `StructuredSVM` takes them as given (its ``classes_`` is None).  ``psi`` and ``joint_feature`` return
    `SparseVector`.  Called by a user, every method checks its arguments (inputs as `check_X`,
    alignments as `check_y`, w of length d); the engine calls them unchecked on the data it
    validated once (`structfw.models.base.checked`).
    """

    def __init__(self, n_features: int, fn_cost: float = 1.0) -> None:
        self.n_features = check_int_param(n_features, "n_features", 1)
        if isinstance(fn_cost, bool) or not isinstance(fn_cost, numbers.Real) or not (
                np.isfinite(fn_cost) and fn_cost > 0):
            raise ValueError(f"fn_cost must be a positive finite number, got {fn_cost!r}")
        self.fn_cost: float = float(fn_cost)
        self.size_joint_feature = check_joint_feature_size("MatchingModel", "n_features", self.n_features)

    def get_config(self) -> dict[str, Any]:
        return {"n_features": self.n_features, "fn_cost": self.fn_cost}

    # ------------------------------------------------------------------ core
    @checked
    def edge_scores(self, x: npt.NDArray[np.float64] | MatchingInput, w: npt.ArrayLike,
                    y_true: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.float64]:
        """(m_s, m_t) scores ⟨w, x_jk⟩, plus the loss bonuses when ``y_true`` is given
        (then argmax over alignments of the summed scores is the loss-augmented decoding)."""
        return self._edge_scores(x, w, y_true)

    def _edge_scores(self, x: npt.NDArray[np.float64] | MatchingInput, w: npt.ArrayLike,
                     y_true: npt.NDArray[np.int64] | None) -> npt.NDArray[np.float64]:
        w = np.ascontiguousarray(w, dtype=np.float64)
        augment = y_true is not None
        yt = y_true if augment else _EMPTY
        ms = _sizes(x)[0]
        norm = (1.0 + self.fn_cost) * ms
        if type(x) is WeightedInput:  # the loss s Delta: its bonuses divided by norm / s
            s = float(x.loss_weights)
            x = x.x
            if s == 0.0:
                augment, yt = False, _EMPTY
            else:
                norm = norm / s
        if type(x) is np.ndarray:
            return matching_scores_dense(x, w, yt, augment, self.fn_cost, norm)
        x = cast(MatchingInput, x)
        f = x.features
        return matching_scores_csr(f.indptr, f.indices, f.data, x.n_source, x.n_target, w, yt, augment,
                                   self.fn_cost, norm)

    @checked
    def example_loss(self, x: Any, y_true: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """The loss the training sees: s `loss` for an input of weight s (`weight_example`)."""
        if type(x) is WeightedInput:
            return float(x.loss_weights) * float(self._unchecked_loss(y_true, y))
        return self._unchecked_loss(y_true, y)

    def weight_example(self, x: Any, y_true: Any, weight: float | npt.NDArray[np.float64],
                       name: str = "sample_weight") -> WeightedInput:
        """x with a per-example loss weight s >= 0 (the loss becomes s Delta).  Per-node weights are
        refused (ValueError naming ``name``): an alignment's loss counts edges, not labelled nodes."""
        prev = float(x.loss_weights) if type(x) is WeightedInput else 1.0
        return WeightedInput(unweighted(x), prev * check_example_weight(weight, name, None))

    @checked
    def joint_feature(self, x: npt.NDArray[np.float64] | MatchingInput, y: npt.ArrayLike) -> SparseVector:
        """phi(x, y) = sum of the features of the edges of y, as a SparseVector."""
        y = np.asarray(y, dtype=np.int64)
        return self._unchecked_psi(x, y, np.full(y.shape[0], -1, np.int64))

    @checked
    def psi(self, x: npt.NDArray[np.float64] | MatchingInput, y_true: npt.NDArray[np.int64],
            y: npt.NDArray[np.int64]) -> SparseVector:
        """phi(x, y_true) - phi(x, y) as a SparseVector (only the source words whose links differ)."""
        x = unweighted(x)
        if type(x) is np.ndarray:
            i, v = matching_phi_diff_dense(x, y_true, y)
        else:
            x = cast(MatchingInput, x)
            f = x.features
            i, v = matching_phi_diff_csr(f.indptr, f.indices, f.data, x.n_target, y_true, y)
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def loss(self, y_true: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """Normalised edge Hamming loss (module docstring), in [0, 1]."""
        return matching_hamming(np.asarray(y_true, dtype=np.int64), np.asarray(y, dtype=np.int64), self.fn_cost)

    def _check_label_pair(self, y_true: Any, y: Any, where: str) -> tuple[Any, Any]:
        """Two alignments of one sentence pair, checked without it: one entry per source word each,
        targets >= -1 (their upper bound is the input's), none used twice."""
        ms = np.shape(y_true)[0] if np.ndim(y_true) == 1 else -1
        if ms < 1:
            raise ValueError(f"{where}: y_true must be a 1-d alignment (one target index per source word, -1 = "
                             f"null), got shape {np.shape(y_true)}")
        unbounded = np.iinfo(np.int64).max
        return (_check_alignment(y_true, f"{where}: y_true", ms, unbounded),
                _check_alignment(y, f"{where}: y", ms, unbounded))

    @checked
    def loss_augmented_decode(self, x: npt.NDArray[np.float64] | MatchingInput, y_true: npt.NDArray[np.int64],
                              w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """argmax_y Delta(y_true, y) + ⟨w, phi(x, y)⟩ by one linear assignment."""
        scale = float(x.loss_weights) if type(x) is WeightedInput else 1.0
        # the potential-level oracle (structfw.oracles.potentials.matching_hinge) on the edge scores at w
        y, _, _ = matching_search(self._edge_scores(x, w, None), y_true, scale, self.fn_cost)
        return y

    @checked
    def decode(self, x: npt.NDArray[np.float64] | MatchingInput, w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """argmax_y ⟨w, phi(x, y)⟩: the best partial matching (edges of score <= 0 stay null)."""
        return max_weight_partial_matching(self._edge_scores(x, w, None))

    def label_key(self, y: npt.ArrayLike) -> bytes:
        return y.tobytes() if type(y) is np.ndarray and y.dtype == np.int64 else (
            np.ascontiguousarray(y, dtype=np.int64).tobytes()
        )

    # ------------------------------------------------------------ validation
    def _check_sizes(self, ms: int, mt: int, name: str) -> None:
        if ms < 1 or mt < 1:
            raise ValueError(f"{name} must have at least one source and one target word, got "
                             f"m_s={ms}, m_t={mt}")

    def _check_dense(self, x: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
        arr = as_float_array(x, name)
        F = self.n_features
        if arr.ndim != 3:
            raise ValueError(f"{name} must be 3-D (m_s, m_t, {F}) edge features, got shape {arr.shape}")
        if arr.shape[2] != F:
            raise ValueError(f"{name} has {arr.shape[2]} features per edge, expected {F}")
        self._check_sizes(arr.shape[0], arr.shape[1], name)
        check_finite(arr, name)
        return np.ascontiguousarray(arr, dtype=np.float64)

    def _check_sparse(self, x: Any, name: str) -> MatchingInput:
        try:
            feats, ms, mt = x
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a (m_s, m_t, {self.n_features}) array or a "
                             f"(features, n_source, n_target) triple") from None
        ms = check_int_param(ms, f"{name}.n_source", 1)
        mt = check_int_param(mt, f"{name}.n_target", 1)
        if not sp.issparse(feats):
            arr = as_float_array(feats, f"{name}.features")
            if arr.ndim != 2:
                raise ValueError(f"{name}.features must be 2-D (m_s*m_t, F), got shape {arr.shape}")
            feats = sp.csr_matrix(arr)
        if feats.ndim != 2 or feats.shape != (ms * mt, self.n_features):
            raise ValueError(f"{name}.features must have shape (n_source*n_target, n_features) = "
                             f"({ms * mt}, {self.n_features}), got {feats.shape}")
        csr = sp.csr_matrix(feats, dtype=np.float64, copy=True)
        csr.sum_duplicates()
        csr.sort_indices()
        csr.indptr = csr.indptr.astype(np.int64)
        csr.indices = csr.indices.astype(np.int64)
        check_finite(csr.data, f"{name}.features")
        return MatchingInput(csr, ms, mt)

    def _check_x(self, x: Any, name: str) -> Any:
        if type(x) is WeightedInput:  # a weighted training input (weight_example): its input checked again
            return WeightedInput(self._check_x(x.x, name), check_example_weight(x.loss_weights, name, None))
        if isinstance(x, tuple):  # MatchingInput or (features, n_source, n_target)
            return self._check_sparse(x, name)
        if sp.issparse(x):
            raise ValueError(f"{name}: sparse edge features need the sentence lengths; pass "
                             "MatchingInput(features, n_source, n_target)")
        return self._check_dense(x, name)

    def check_X(self, X: Iterable[Any]) -> list[npt.NDArray[np.float64] | MatchingInput]:
        # one pair: a dense (m_s, m_t, F) array, or a (features, n_source, n_target) tuple
        if ((isinstance(X, np.ndarray) and X.ndim == 3)
                or (isinstance(X, tuple) and len(X) == 3 and isinstance(X[1], numbers.Integral))):
            raise one_example_error(X, "(m_s, m_t, F) array or MatchingInput", "sentence pair")
        X = check_sequence_of_inputs(X, "X")
        return [self._check_x(x, f"X[{i}]") for i, x in enumerate(X)]

    def check_y(self, x: npt.NDArray[np.float64] | MatchingInput, y: npt.ArrayLike,
                name: str = "Y") -> npt.NDArray[np.int64]:
        """y as int64 (m_s,) with values in -1..m_t-1 and no target used twice."""
        ms, mt = _sizes(x)
        return _check_alignment(y, name, ms, mt)


def _check_alignment(y: npt.ArrayLike, name: str, ms: int, mt: int) -> npt.NDArray[np.int64]:
    """y as int64 (ms,) with values in -1..mt-1 and no target used twice, or a ValueError naming ``name``."""
    try:
        arr = np.asarray(y)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name} could not be converted to an array: {exc}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer)
                                   or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must hold integer target indices (-1 = null), got dtype {arr.dtype}; "
                         "an alignment's entries are positions, not class labels, so they are not encoded")
    if arr.shape != (ms,):
        raise ValueError(f"{name} has shape {arr.shape}, expected ({ms},) (one entry per source word)")
    if np.issubdtype(arr.dtype, np.floating) and (
            not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ValueError(f"{name} must hold integer target indices, got non-integer values")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    bad = arr[(arr < -1) | (arr >= mt)]
    if bad.size:
        raise ValueError(f"{name} has target index {int(bad[0])} outside -1..{mt - 1} (m_t={mt}; -1 = null)")
    linked = arr[arr >= 0]
    if np.unique(linked).size != linked.size:
        vals, counts = np.unique(linked, return_counts=True)
        raise ValueError(f"{name} aligns target word {int(vals[counts > 1][0])} to more than one source "
                         "word (alignments are one-to-one)")
    return arr
