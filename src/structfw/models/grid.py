"""2-D grid labelling model (4-connected pairwise CRF), e.g. the snakes data.

phi(x, y) = [ sum_c x_c placed in block y_c ,  horizontal pair counts ,  vertical pair counts ]

with unary weight ``w[s*F + f]``, horizontal weight ``w[S*F + a*S + b]`` (left
cell a, right cell b) and, when ``directional=True`` (default), a separate
vertical matrix ``w[S*F + S^2 + a*S + b]`` (upper cell a, lower cell b); with
``directional=False`` both edge directions share one S x S matrix.  The loss is
the normalised Hamming loss over cells.  Loss-augmented decoding is NP-hard in
general, so the oracle is approximate (``approximate_oracle = True``): loopy
max-product plus block ICM (exact row/column Viterbi updates), also started from
the ground truth, and the ground truth is returned unless the result is strictly
better (so H_i(y*) >= H_i(y_i) = 0 always).
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from .._linalg import SparseVector
from ..oracles.grid import grid_energy, grid_max_product, grid_phi_diff, grid_unary
from ._validation import (
    as_float_array,
    as_label_array,
    check_finite,
    check_int_param,
    check_joint_feature_size,
    check_label_pair,
    check_sequence_of_inputs,
    one_example_error,
)
from .base import (CheckedModel, WeightedInput, check_example_weight, checked, compose_node_coefficients,
                   register_model, unweighted)

_EMPTY2 = np.empty((0, 0), np.int64)


@functools.lru_cache(maxsize=64)
def _grid_edges(h: int, wd: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """The 4-grid's edges over cells numbered row-major, (left, right) then (upper, lower),
    and which of them are horizontal; one per grid shape (the data sets share a few)."""
    cell = np.arange(h * wd, dtype=np.int64).reshape(h, wd)
    hor = np.stack([cell[:, :-1].ravel(), cell[:, 1:].ravel()], axis=1)
    ver = np.stack([cell[:-1, :].ravel(), cell[1:, :].ravel()], axis=1)
    edges = np.ascontiguousarray(np.concatenate([hor, ver]).reshape(-1, 2))
    horizontal = np.r_[np.ones(len(hor), bool), np.zeros(len(ver), bool)]
    edges.setflags(write=False)
    horizontal.setflags(write=False)
    return edges, horizontal


@register_model
class GridModel(CheckedModel):
    """Grid CRF with unary features and 4-neighbour transition scores.

    Parameters
    ----------
    n_states : int >= 2
        Labels per cell.
    n_features : int >= 1
        Features per cell.
    directional : bool, default True
        Separate horizontal and vertical transition matrices (d = S*F + 2 S^2);
        False shares one matrix (d = S*F + S^2).
    n_iter : int, default 10
        Loopy max-product iterations (0 skips message passing).
    damping : float in [0, 1), default 0.5
        Message damping.
    max_sweeps : int, default 20
        Maximum block-ICM sweeps.

    Notes
    -----
    Inputs and labellings: x is an (h, w, F) array (C-contiguous float64 after
    `check_X`), y an (h, w) int64 array with values 0..S-1.  Called by a user, every method
    checks its arguments; the engine calls them unchecked on the data it validated once
    (`structfw.models.base.checked`).  d is at most
    `structfw.models._validation.MAX_SIZE_JOINT_FEATURE`.
    """

    approximate_oracle = True
    class_labels = True

    def __init__(self, n_states: int, n_features: int, directional: bool = True, n_iter: int = 10,
                 damping: float = 0.5, max_sweeps: int = 20) -> None:
        self.n_states = check_int_param(n_states, "n_states", 2)
        self.n_features = check_int_param(n_features, "n_features", 1)
        if not isinstance(directional, (bool, np.bool_)):
            raise ValueError(f"directional must be True or False, got {directional!r}")
        self.directional = bool(directional)
        self.n_iter = check_int_param(n_iter, "n_iter", 0)
        if not (isinstance(damping, (int, float)) and 0.0 <= damping < 1.0):
            raise ValueError(f"damping must be a float in [0, 1), got {damping!r}")
        self.damping = float(damping)
        self.max_sweeps = check_int_param(max_sweeps, "max_sweeps", 1)
        S, F = self.n_states, self.n_features
        self._offH = S * F
        self._offV = S * F + (S * S if self.directional else 0)
        self.size_joint_feature = check_joint_feature_size(
            "GridModel", f"n_states * n_features + {2 if self.directional else 1} * n_states ** 2",
            S * F + (2 if self.directional else 1) * S * S)

    def get_config(self) -> dict[str, Any]:
        return {
            "n_states": self.n_states,
            "n_features": self.n_features,
            "directional": self.directional,
            "n_iter": self.n_iter,
            "damping": self.damping,
            "max_sweeps": self.max_sweeps,
        }

    # ------------------------------------------------------------ weights
    def unary_weights(self, w: npt.ArrayLike) -> np.ndarray:
        return np.asarray(w)[: self._offH].reshape(self.n_states, self.n_features)

    def horizontal_weights(self, w: npt.ArrayLike) -> np.ndarray:
        S = self.n_states
        return np.asarray(w)[self._offH:self._offH + S * S].reshape(S, S)

    def vertical_weights(self, w: npt.ArrayLike) -> np.ndarray:
        S = self.n_states
        return np.asarray(w)[self._offV:self._offV + S * S].reshape(S, S)

    # ------------------------------------------------------------------ core
    @checked
    def joint_feature(self, x: npt.NDArray[np.float64], y: npt.ArrayLike) -> SparseVector:
        """phi(x, y) as a SparseVector."""
        x = unweighted(x)
        y = np.ascontiguousarray(y, dtype=np.int64)
        none = np.full(y.shape, -1, np.int64)
        i, v = grid_phi_diff(x, y, none, self.n_states, self.n_features, self._offH, self._offV)
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def psi(self, x: npt.NDArray[np.float64], y_true: npt.NDArray[np.int64],
            y: npt.NDArray[np.int64]) -> SparseVector:
        """phi(x, y_true) - phi(x, y) as a SparseVector."""
        x = unweighted(x)
        i, v = grid_phi_diff(x, y_true, y, self.n_states, self.n_features, self._offH, self._offV)
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def loss(self, y_true: np.ndarray, y: np.ndarray) -> float:
        """Normalised Hamming loss over the cells."""
        n = y_true.size
        return float(np.count_nonzero(y_true != y)) / n if n else 0.0

    per_node_labels = True

    def _check_label_pair(self, y_true: Any, y: Any, where: str) -> tuple[Any, Any]:
        return check_label_pair(y_true, y, where, self.n_states, 2)

    @checked
    def example_loss(self, x: Any, y_true: np.ndarray, y: np.ndarray) -> float:
        """The loss the training sees: sum_c a_c [y_c != y_true_c] for an input weighted by
        `weight_example` (a: one coefficient per cell), `loss` otherwise."""
        if type(x) is WeightedInput:
            return float(np.sum(x.loss_weights[np.asarray(y_true) != np.asarray(y)]))
        return self._unchecked_loss(y_true, y)

    def weight_example(self, x: Any, y_true: Any, weight: float | npt.NDArray[np.float64],
                       name: str = "sample_weight") -> WeightedInput:
        """x with per-cell loss coefficients (a per-example weight s, or one weight per cell,
        shape (h, w) or (h*w,), row-major); see `StructuredModel.weight_example`."""
        prev = x.loss_weights.ravel() if type(x) is WeightedInput else None
        x = unweighted(x)
        h, wd = x.shape[0], x.shape[1]
        a = compose_node_coefficients(prev, check_example_weight(weight, name, h * wd), h * wd, name)
        return WeightedInput(x, np.ascontiguousarray(a.reshape(h, wd)))

    def _unary(self, x: Any, w: npt.NDArray[np.float64], y_true: npt.NDArray[np.int64],
               augment: bool) -> npt.NDArray[np.float64]:
        """Unary scores (h, w, S), plus the (weighted) loss when ``augment``."""
        if type(x) is not WeightedInput:
            return grid_unary(x, w, self.n_states, self.n_features, y_true, augment)
        U = grid_unary(x.x, w, self.n_states, self.n_features, y_true, False)
        if augment:
            a = x.loss_weights
            U += a[:, :, None]
            ii, jj = np.indices(a.shape)
            U[ii, jj, y_true] -= a
        return U

    @checked
    def energy(self, x: npt.NDArray[np.float64], y: npt.ArrayLike, w: npt.ArrayLike,
               y_true: npt.NDArray[np.int64] | None = None) -> float:
        """⟨w, phi(x, y)⟩ (+ Delta(y_true, y) when y_true is given)."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        aug = y_true is not None
        U = self._unary(x, w, np.ascontiguousarray(y_true, np.int64) if aug else _EMPTY2, aug)
        return grid_energy(U, w, self._offH, self._offV, np.ascontiguousarray(y, np.int64))

    @checked
    def loss_augmented_decode(self, x: npt.NDArray[np.float64], y_true: npt.NDArray[np.int64],
                              w: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Loopy max-product and block ICM on Delta(y_true, y) + ⟨w, phi(x, y)⟩; y_true unless
        the result is strictly better."""
        U = self._unary(x, w, y_true, True)
        y, e = grid_max_product(U, w, self._offH, self._offV, y_true, True,
                                self.n_iter, self.damping, self.max_sweeps)
        e_true = grid_energy(U, w, self._offH, self._offV, y_true)
        if not e > e_true:
            return y_true.copy()
        return y

    @checked
    def loss_augmented_decode_with_bound(self, x: npt.NDArray[np.float64], y_true: npt.NDArray[np.int64],
                                         w: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], float]:
        """(the oracle's labelling, B) with B >= max_y Delta(y_true, y) + ⟨w, phi(x, y)⟩.

        B is TRW-S's bound (the dual of the grid's local-polytope relaxation,
        `structfw.oracles.loopy.trws`); the engine turns it into a certified duality gap
        (`structfw.solvers.problem.Problem.hinge_bounds`).  The labelling is the better of
        loopy max-product's (`loss_augmented_decode`) and TRW-S's."""
        from ..oracles.loopy import trws

        w = np.ascontiguousarray(w, dtype=np.float64)
        U = self._unary(x, w, y_true, True)
        h, wd, S = U.shape
        edges, horizontal = _grid_edges(h, wd)
        pairwise = np.where(horizontal[:, None, None], self.horizontal_weights(w)[None],
                            self.vertical_weights(w)[None])
        y_t, _, bound = trws(U.reshape(h * wd, S), edges, np.ascontiguousarray(pairwise))
        y_t = y_t.reshape(h, wd)
        y = self._unchecked_loss_augmented_decode(x, y_true, w)
        if grid_energy(U, w, self._offH, self._offV, y_t) > grid_energy(U, w, self._offH, self._offV, y):
            y = y_t
        return y, float(bound)

    @checked
    def decode(self, x: npt.NDArray[np.float64], w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Loopy max-product and block ICM on ⟨w, phi(x, y)⟩."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        x = unweighted(x)
        U = grid_unary(x, w, self.n_states, self.n_features, _EMPTY2, False)
        y, _ = grid_max_product(U, w, self._offH, self._offV, _EMPTY2, False,
                                self.n_iter, self.damping, self.max_sweeps)
        return y

    # ------------------------------------------------------------ validation
    def _check_x(self, x: Any, name: str) -> Any:
        if type(x) is WeightedInput:  # a weighted training input (weight_example): its input checked again
            inner = self._check_x(x.x, name)
            a = np.ascontiguousarray(x.loss_weights, dtype=np.float64)
            if a.shape != inner.shape[:2] or not np.all(np.isfinite(a)) or np.any(a < 0):
                raise ValueError(f"{name}: the loss weights of a weighted input must be finite floats >= 0 "
                                 f"of shape {inner.shape[:2]}")
            return WeightedInput(inner, a)
        arr = as_float_array(x, name)
        F = self.n_features
        if arr.ndim != 3:
            raise ValueError(f"{name} must be 3-D (h, w, {F}), got shape {arr.shape}")
        if arr.shape[2] != F:
            raise ValueError(f"{name} has {arr.shape[2]} features, expected {F}")
        if arr.shape[0] < 1 or arr.shape[1] < 1:
            raise ValueError(f"{name} has an empty grid (shape {arr.shape})")
        check_finite(arr, name)
        return np.ascontiguousarray(arr, dtype=np.float64)

    def check_X(self, X: Iterable[npt.ArrayLike]) -> list[npt.NDArray[np.float64]]:
        if isinstance(X, np.ndarray) and X.ndim == 3:
            raise one_example_error(X, "(h, w, F) array", "grid")
        X = check_sequence_of_inputs(X, "X")
        return [self._check_x(x, f"X[{i}]") for i, x in enumerate(X)]

    def check_y(self, x: np.ndarray, y: npt.ArrayLike, name: str = "Y") -> npt.NDArray[np.int64]:
        return as_label_array(y, name, self.n_states, x.shape[:2])
