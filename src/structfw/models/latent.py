"""Latent structure: the latent sub-class model and the latent completions of partial labellings.

Yu & Joachims (2009), "Learning structural SVMs with latent variables", write the joint
feature of an input x, an output y and a hidden part h as phi(x, y, h) and predict

    f_w(x) = argmax_{(y, h)} ⟨w, phi(x, y, h)⟩                                   (their Sec. 3)

Training by CCCP (`structfw.LatentStructuredSVM`) needs, besides the usual max oracle of
the completed problem, the *latent completion*

    h_i* = argmax_h ⟨w, phi(x_i, y_i, h)⟩                                        (Algorithm 1)

which this module provides for

* `LatentSubclassModel`: multiclass with a hidden sub-class per class (the label y is a
  class, the hidden h one of its sub-classes, phi(x, y, h) puts x in block (y, h));
* chains and graphs whose labellings are partial: -1 marks an unlabelled (hidden) node,
  and the completion is max-product with the observed nodes clamped (`complete_chain`,
  `complete_graph`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from .._linalg import SparseVector
from ..oracles.chain import viterbi
from ..oracles.multiclass import (
    multiclass_phi_diff,
    multiclass_phi_diff_sparse,
    multiclass_scores,
    multiclass_scores_sparse,
)
from ._validation import check_int_param, check_joint_feature_size
from .base import CheckedModel, checked, register_model
from .chain import ChainModel
from .graph import GraphExample, GraphModel
from .multiclass import MulticlassModel


@register_model
class LatentSubclassModel(CheckedModel):
    """Multiclass classification with a latent sub-class per class (Yu & Joachims 2009, Sec. 4).

    Every class c is a union of ``n_subclasses`` sub-classes; the joint feature places x in
    block (c, h) of a K*H*F vector,

        phi(x, c, h) = e_{c H + h} ⊗ x,

    so each class has H linear templates and the score of class c is max_h <w_{c,h}, x>
    (a piecewise-linear, non-convex decision rule that one template per class cannot
    represent).  The task loss depends on the class only, Delta((c, h), (c', h')) = [c != c'].

    As a `StructuredModel` (the convex step of CCCP, or a fit with known sub-classes) a
    labelling is the *state* s = c H + h in 0..K*H-1.  `LatentStructuredSVM` takes class
    labels and imputes the sub-classes with `complete`.

    Parameters
    ----------
    n_classes : int >= 2
        K.
    n_subclasses : int >= 1
        H, sub-classes per class (1: a plain multiclass SVM).
    n_features : int >= 1
        F; inputs are (F,) vectors, a 2-D array or a scipy.sparse matrix, as for
        `MulticlassModel`.

    Called by a user, every method checks its arguments (inputs as `MulticlassModel` does,
    states in 0..K*H-1); the engine calls them unchecked (`structfw.models.base.checked`).
    d = K*H*F is at most `structfw.models._validation.MAX_SIZE_JOINT_FEATURE`.
    """

    _unchecked_scores: Callable[..., npt.NDArray[np.float64]]

    def __init__(self, n_classes: int, n_subclasses: int, n_features: int) -> None:
        self.n_classes = check_int_param(n_classes, "n_classes", 2)
        self.n_subclasses = check_int_param(n_subclasses, "n_subclasses", 1)
        self.n_features = check_int_param(n_features, "n_features", 1)
        self.size_joint_feature = check_joint_feature_size(
            "LatentSubclassModel", "n_classes * n_subclasses * n_features",
            self.n_classes * self.n_subclasses * self.n_features)
        # the input validation of a multiclass model with one state per (class, sub-class)
        self._inputs = MulticlassModel(self.n_classes * self.n_subclasses, self.n_features)

    @property
    def n_states(self) -> int:
        """K * H, the number of (class, sub-class) states."""
        return self.n_classes * self.n_subclasses

    def get_config(self) -> dict[str, Any]:
        return {"n_classes": self.n_classes, "n_subclasses": self.n_subclasses, "n_features": self.n_features}

    # ------------------------------------------------------------------ states
    def state(self, c: int, h: int) -> int:
        """The state c H + h of class c, sub-class h."""
        return int(c) * self.n_subclasses + int(h)

    def class_of(self, s: int | npt.ArrayLike) -> Any:
        """The class of a state (or of an array of states): s // H."""
        if isinstance(s, (int, np.integer)):
            return int(s) // self.n_subclasses
        return np.asarray(s, dtype=np.int64) // self.n_subclasses

    @checked
    def scores(self, x: npt.NDArray[np.float64] | SparseVector, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """(K*H,) scores ⟨w_s, x⟩ of every state."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        if isinstance(x, SparseVector):
            return multiclass_scores_sparse(x.indices, x.values, w, self.n_states, self.n_features)
        return multiclass_scores(np.ascontiguousarray(x, dtype=np.float64), w, self.n_states, self.n_features)

    # ------------------------------------------------------------------ core
    def _phi_diff(self, x: npt.NDArray[np.float64] | SparseVector, sa: int, sb: int) -> SparseVector:
        if isinstance(x, SparseVector):
            i, v = multiclass_phi_diff_sparse(x.indices, x.values, sa, sb, self.n_features)
        else:
            i, v = multiclass_phi_diff(x, sa, sb, self.n_features)
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def joint_feature(self, x: npt.NDArray[np.float64] | SparseVector, y: int) -> SparseVector:
        """phi(x, c, h): x in block s = c H + h."""
        return self._phi_diff(x, int(y), -1)

    @checked
    def psi(self, x: npt.NDArray[np.float64] | SparseVector, y_true: int, y: int) -> SparseVector:
        """phi(x, y_true) - phi(x, y)."""
        return self._phi_diff(x, int(y_true), int(y))

    @checked
    def loss(self, y_true: int, y: int) -> float:
        """[class(y_true) != class(y)]: the sub-class carries no loss."""
        return 0.0 if int(y_true) // self.n_subclasses == int(y) // self.n_subclasses else 1.0

    @checked
    def loss_augmented_decode(self, x: npt.NDArray[np.float64] | SparseVector, y_true: int,
                              w: npt.NDArray[np.float64]) -> int:
        """argmax_s [class(s) != class(y_true)] + ⟨w_s, x⟩ (ties: the smallest state)."""
        s = self._unchecked_scores(x, w)
        s += self.class_of(np.arange(self.n_states)) != int(y_true) // self.n_subclasses
        return int(np.argmax(s))

    @checked
    def decode(self, x: npt.NDArray[np.float64] | SparseVector, w: npt.ArrayLike) -> int:
        """argmax_{(c, h)} ⟨w, phi(x, c, h)⟩ as a state (its class is `class_of`)."""
        return int(np.argmax(self._unchecked_scores(x, w)))

    def complete(self, x: npt.NDArray[np.float64] | SparseVector, c: int, w: npt.ArrayLike) -> int:
        """The latent completion h* = argmax_h ⟨w, phi(x, c, h)⟩ (Yu & Joachims 2009, Algorithm 1),
        as the state c H + h*."""
        H = self.n_subclasses
        s = self._unchecked_scores(x, w)[int(c) * H:(int(c) + 1) * H]
        return int(c) * H + int(np.argmax(s))

    def label_key(self, y: int) -> int:
        return int(y)

    @checked
    def expectation(self, x: npt.NDArray[np.float64] | SparseVector, y_true: int | None, v: npt.ArrayLike,
                    c: float) -> tuple[npt.NDArray[np.float64], float, float]:
        """Expectation oracle: the softmax p(s) ∝ exp(c [class(s) != class(y_true)] + ⟨v_s, x⟩)."""
        v, c = self._expectation_args(v, c)
        xd = x.toarray() if isinstance(x, SparseVector) else np.asarray(x, dtype=np.float64)
        z = self._unchecked_scores(xd, v)
        same = np.zeros(self.n_states, bool)
        if y_true is not None:
            same = self.class_of(np.arange(self.n_states)) == int(y_true) // self.n_subclasses
            z = z + c * (~same)
        m = float(z.max())
        p = np.exp(z - m)
        Z = float(p.sum())
        p /= Z
        E_phi = (p[:, None] * xd[None, :]).ravel()
        E_loss = float(1.0 - p[same].sum()) if y_true is not None else 0.0
        return E_phi, E_loss, m + float(np.log(Z))

    # ------------------------------------------------------------ validation
    def check_X(self, X: Iterable[Any]) -> list[Any]:
        return self._inputs.check_X(X)

    def _check_x(self, x: Any, name: str) -> Any:
        return self._inputs._check_x(x, name)

    def check_y(self, x: Any, y: Any, name: str = "Y") -> int:
        return self._inputs.check_y(x, y, name=name)

    def _check_label_pair(self, y_true: Any, y: Any, where: str) -> tuple[int, int]:
        return self.check_y(None, y_true, f"{where}: y_true"), self.check_y(None, y, f"{where}: y")

    def check_class(self, y: Any, name: str = "Y") -> int:
        """A class label in 0..K-1 (the label `LatentStructuredSVM` takes), or a ValueError naming ``name``."""
        if isinstance(y, np.ndarray) and y.ndim == 0:
            y = y.item()
        if isinstance(y, (bool, np.bool_)) or not isinstance(y, (int, np.integer)):
            if not (isinstance(y, (float, np.floating)) and np.isfinite(y) and float(y).is_integer()):
                raise ValueError(f"{name} must be an integer class label in 0..{self.n_classes - 1}, got {y!r}")
        y = int(y)
        if not 0 <= y < self.n_classes:
            raise ValueError(f"{name} has class {y} outside 0..{self.n_classes - 1} (n_classes={self.n_classes})")
        return y


# ---------------------------------------------------------------- chains and graphs
def _clamp(U: npt.NDArray[np.float64], y: npt.NDArray[np.int64], bound: float) -> npt.NDArray[np.float64]:
    """U with ``bound`` subtracted from every state but y_v at the observed nodes (y_v >= 0).

    ``bound`` exceeds the range of the energy, so every labelling that agrees with the
    observed nodes scores above every one that does not: the clamped maximisation is
    the maximisation over the completions."""
    U = np.array(U, dtype=np.float64, copy=True)
    obs = np.flatnonzero(y >= 0)
    if obs.size:
        keep = U[obs, y[obs]].copy()
        U[obs, :] -= bound
        U[obs, y[obs]] = keep
    return U


def _energy_range(U: npt.NDArray[np.float64], P: npt.NDArray[np.float64], n_edges: int) -> float:
    """An upper bound of max_y E(y) - min_y E(y), plus one."""
    pmax = float(np.abs(P).max()) if P.size else 0.0
    return 1.0 + 2.0 * (float(np.abs(U).max(axis=1).sum()) + n_edges * pmax)


def complete_chain(model: ChainModel, x: Any, y: npt.NDArray[np.int64],
                   w: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """argmax over the completions y' of y (y'_l = y_l wherever y_l >= 0) of ⟨w, phi(x, y')⟩.

    The latent completion of a chain with unlabelled positions (y_l = -1): exact Viterbi on
    the unary scores with the observed positions clamped (Yu & Joachims 2009, Algorithm 1).
    """
    w = np.ascontiguousarray(w, dtype=np.float64)
    U = model.unary_scores(x, w)
    P = np.ascontiguousarray(model.transition_weights(w))
    Uc = _clamp(U, y, _energy_range(U, P, max(0, U.shape[0] - 1)))
    out, _ = viterbi(np.ascontiguousarray(Uc), P)
    obs = y >= 0
    out[obs] = y[obs]  # already so (the clamp), kept exact against rounding
    return out


def complete_graph(model: GraphModel, x: GraphExample, y: npt.NDArray[np.int64],
                   w: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], bool]:
    """(completion, exact): max-product with the observed nodes clamped, by the model's back-end.

    Exact on forests (tree max-product) and with the exhaustive back-end; on graphs with
    cycles the model's loopy back-end returns an approximate maximiser (``exact`` False)."""
    w = np.ascontiguousarray(w, dtype=np.float64)
    U, P = model.potentials(x, w)
    Uc = _clamp(U, y, _energy_range(U, P, x.edges.shape[0]))
    out, _, _, exact = model._maximise(x, np.ascontiguousarray(Uc), P)
    out = np.array(out, dtype=np.int64, copy=True)
    obs = y >= 0
    out[obs] = y[obs]
    return out, bool(exact)


def chain_as_graph(model: ChainModel) -> GraphModel:
    """The `GraphModel` on path graphs with the same w layout as ``model``.

    ChainModel's w is [unary (S F), transitions a -> b at S F + a S + b]; GraphModel's with
    ``pairwise="full"`` and one edge feature is [unary (K F), pair (k, l) at K F + k K + l]
    with k the label of edges[e, 0]: with edges (l, l+1) the two are the same vector, so a
    partially labelled chain can be trained with GraphModel's per-node loss weights."""
    return GraphModel(model.n_states, model.n_features, 1, "full", inference="tree")


def path_edges(L: int) -> npt.NDArray[np.int64]:
    """The edges (l, l+1) of a path with L nodes, as an (L-1, 2) int64 array."""
    a = np.arange(max(0, L - 1), dtype=np.int64)
    return np.ascontiguousarray(np.stack([a, a + 1], axis=1).reshape(-1, 2))


def check_partial_labelling(y: Any, n_states: int, L: int, name: str) -> npt.NDArray[np.int64]:
    """A partial labelling: (L,) integers in 0..n_states-1, or -1 for an unlabelled node."""
    try:
        arr = np.asarray(y)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name} could not be converted to an array: {exc}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must hold integer labels (states 0..{n_states - 1}, or -1 for unlabelled), "
                         f"got dtype {arr.dtype}")
    if arr.shape != (L,):
        raise ValueError(f"{name} has shape {arr.shape}, expected ({L},)")
    if np.issubdtype(arr.dtype, np.floating) and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ValueError(f"{name} must hold integer labels, got non-integer values")
    if arr.size and (arr.min() < -1 or arr.max() >= n_states):
        bad = arr[(arr < -1) | (arr >= n_states)].ravel()[0].item()
        raise ValueError(f"{name} has label {bad!r} outside 0..{n_states - 1} and not -1 (unlabelled); "
                         f"n_states={n_states}")
    return np.ascontiguousarray(arr, dtype=np.int64)


__all__ = ["LatentSubclassModel", "complete_chain", "complete_graph", "chain_as_graph", "path_edges",
           "check_partial_labelling"]
