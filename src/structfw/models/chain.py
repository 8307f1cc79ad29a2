"""Chain-structured model for sequence labelling (OCR, CoNLL chunking, ...).

BCFW paper (Lacoste-Julien et al. 2013) section 6 and MP-BCFW paper appendix A:

    phi(x, y) = [ sum_l x_l placed in block y_l ,  sum_l e_{y_l, y_{l+1}} ]

with unary weight ``w[s*F + f]`` (state s, feature f) and transition weight
``w[S*F + a*S + b]`` (a -> b), so d = S*F + S^2.  The task loss is the
normalised Hamming loss; loss-augmented decoding is exact Viterbi.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from .._linalg import SparseVector, is_chain_csr
from ..oracles.chain import (
    chain_oracle_csr,
    chain_oracle_csr_weighted,
    chain_oracle_dense,
    chain_oracle_dense_weighted,
    chain_phi_diff_csr,
    chain_phi_diff_dense,
    hamming_loss,
    weighted_hamming_loss,
)
from ..oracles.marginals import chain_expectation_csr, chain_expectation_dense
from ._validation import (
    as_float_array,
    as_label_array,
    check_finite,
    check_int_param,
    check_joint_feature_size,
    check_sequence_of_inputs,
    one_example_error,
)
from .base import (CheckedModel, WeightedInput, check_example_weight, checked, compose_node_coefficients,
                   register_model, unweighted)

_EMPTY = np.empty(0, np.int64)


@register_model
class ChainModel(CheckedModel):
    """Linear-chain model with unary features and a transition matrix.

    Parameters
    ----------
    n_states : int >= 2
        Number of labels S (26 for OCR).
    n_features : int >= 1
        Number of features F of every position (128 for OCR).

    Inputs and labellings
    ---------------------
    x : ndarray (L, F) (converted to C-contiguous float64 by `check_X`), or a
        scipy.sparse matrix with L rows (kept sparse as CSR float64; the kernels use
        its indptr/indices/data and never densify it).
    y : ndarray (L,) int64 with values 0..S-1.

    ``psi`` and ``joint_feature`` return `SparseVector`.  Called by a user, every method checks
    its arguments (x like `check_X`, labellings like `check_y`, w of length d); the engine calls
    them unchecked on the training set it validated once (`structfw.models.base.checked`).
    d = S*F + S^2 is at most `structfw.models._validation.MAX_SIZE_JOINT_FEATURE`.
    """

    #: the joint kernel this model's features, loss and oracles define (solvers.KernelBCFW):
    #: per-position unary kernel plus linear transitions
    joint_kernel_kind = "chain"
    class_labels = True
    per_node_labels = True

    def __init__(self, n_states: int, n_features: int) -> None:
        self.n_states = S = check_int_param(n_states, "n_states", 2)
        self.n_features = F = check_int_param(n_features, "n_features", 1)
        self.size_joint_feature = check_joint_feature_size("ChainModel", "n_states * n_features + n_states ** 2",
                                                           S * F + S * S)

    def get_config(self) -> dict[str, Any]:
        return {"n_states": self.n_states, "n_features": self.n_features}

    # ------------------------------------------------------------ index helpers
    @property
    def transition_offset(self) -> int:
        """Index of the first transition weight in w (= S*F)."""
        return self.n_states * self.n_features

    def unary_weights(self, w: npt.ArrayLike) -> np.ndarray:
        """View of the unary part of w as (n_states, n_features)."""
        return np.asarray(w)[: self.transition_offset].reshape(self.n_states, self.n_features)

    def transition_weights(self, w: npt.ArrayLike) -> np.ndarray:
        """View of the transition part of w as (n_states, n_states), [a, b] = a -> b."""
        return np.asarray(w)[self.transition_offset:].reshape(self.n_states, self.n_states)

    # ------------------------------------------------------------------ core
    @checked
    def joint_feature(self, x: npt.NDArray[np.float64] | sp.spmatrix | sp.sparray,
                      y: npt.ArrayLike) -> SparseVector:
        x = unweighted(x)
        y = np.asarray(y, dtype=np.int64)
        none = np.full(y.shape[0], -1, np.int64)
        if type(x) is np.ndarray:
            i, v = chain_phi_diff_dense(x, y, none, self.n_states, self.n_features)
        else:
            x = self._csr(x)
            i, v = chain_phi_diff_csr(
                x.indptr, x.indices, x.data, y, none, self.n_states, self.n_features
            )
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def psi(self, x: npt.NDArray[np.float64] | sp.csr_matrix, y_true: npt.NDArray[np.int64],
            y: npt.NDArray[np.int64]) -> SparseVector:
        """phi(x, y_true) - phi(x, y) as a SparseVector (only differing positions)."""
        if type(x) is np.ndarray:
            i, v = chain_phi_diff_dense(x, y_true, y, self.n_states, self.n_features)
        elif type(x) is WeightedInput:
            return self._unchecked_psi(x.x, y_true, y)
        else:
            # mypy narrows no else branch of a `type(x) is` test; isinstance would, but would also send
            # ndarray subclasses to the dense kernel
            x = cast("sp.csr_matrix", x)
            i, v = chain_phi_diff_csr(
                x.indptr, x.indices, x.data, y_true, y, self.n_states, self.n_features
            )
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def loss(self, y_true: npt.NDArray[np.int64], y: npt.NDArray[np.int64]) -> float:
        """Normalised Hamming loss (1/L) sum_l [y_true_l != y_l]."""
        return hamming_loss(y_true, y)

    @checked
    def example_loss(self, x: Any, y_true: npt.NDArray[np.int64], y: npt.NDArray[np.int64]) -> float:
        """The loss the training sees: sum_l a_l [y_l != y_true_l] for an input weighted by
        `weight_example`, `loss` otherwise."""
        if type(x) is WeightedInput:
            return float(weighted_hamming_loss(np.asarray(y_true, np.int64), np.asarray(y, np.int64),
                                               x.loss_weights))
        return self._unchecked_loss(y_true, y)

    def weight_example(self, x: Any, y_true: Any, weight: float | npt.NDArray[np.float64],
                       name: str = "sample_weight") -> WeightedInput:
        """x with the loss coefficients a_l = s / L (per-example weight s) or c_l / sum_u c_u
        (per-node weights c): see `StructuredModel.weight_example`."""
        prev = x.loss_weights if type(x) is WeightedInput else None
        x = unweighted(x)
        L = x.shape[0]
        return WeightedInput(x, compose_node_coefficients(prev, check_example_weight(weight, name, L), L, name))

    @checked
    def loss_augmented_decode(self, x: npt.NDArray[np.float64] | sp.csr_matrix, y_true: npt.NDArray[np.int64],
                              w: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """argmax_y Delta(y_true, y) + ⟨w, phi(x, y)⟩ by exact Viterbi."""
        if type(x) is np.ndarray:
            return chain_oracle_dense(x, w, y_true, self.n_states, self.n_features, True)
        if type(x) is WeightedInput:
            xi, a = x.x, x.loss_weights
            w = np.ascontiguousarray(w, dtype=np.float64)
            if type(xi) is np.ndarray:
                return chain_oracle_dense_weighted(xi, w, y_true, a, self.n_states, self.n_features)
            xi = cast("sp.csr_matrix", xi)
            return chain_oracle_csr_weighted(xi.indptr, xi.indices, xi.data, w, y_true, a, self.n_states,
                                             self.n_features)
        x = cast("sp.csr_matrix", x)
        return chain_oracle_csr(
            x.indptr, x.indices, x.data, w, y_true, self.n_states, self.n_features, True
        )

    @checked
    def decode(self, x: npt.NDArray[np.float64] | sp.spmatrix | sp.sparray,
               w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """argmax_y ⟨w, phi(x, y)⟩ by exact Viterbi."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        x = unweighted(x)
        if type(x) is np.ndarray:
            return chain_oracle_dense(x, w, _EMPTY, self.n_states, self.n_features, False)
        x = self._csr(x)
        return chain_oracle_csr(
            x.indptr, x.indices, x.data, w, _EMPTY, self.n_states, self.n_features, False
        )

    @checked
    def unary_scores(self, x: npt.ArrayLike | sp.spmatrix | sp.sparray, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """(L, S) unary scores ⟨x_l, w_s⟩ (dense)."""
        x = unweighted(x)
        W = self.unary_weights(w)
        if sp.issparse(x):
            return np.asarray(x @ W.T)
        return np.asarray(x, dtype=np.float64) @ W.T

    @checked
    def score(self, x: npt.NDArray[np.float64] | sp.spmatrix | sp.sparray, y: npt.ArrayLike,
              w: npt.ArrayLike) -> float:
        """⟨w, phi(x, y)⟩."""
        phi = self._unchecked_joint_feature(x, y)
        return float(np.dot(phi.values, np.asarray(w)[phi.indices]))

    def label_key(self, y: npt.ArrayLike) -> bytes:
        return y.tobytes() if type(y) is np.ndarray and y.dtype == np.int64 else (
            np.ascontiguousarray(y, dtype=np.int64).tobytes()
        )

    @checked
    def expectation(self, x: npt.ArrayLike | sp.spmatrix | sp.sparray, y_true: npt.ArrayLike | None,
                    v: npt.ArrayLike, c: float) -> tuple[npt.NDArray[np.float64] | SparseVector, float, float]:
        """Expectation oracle by forward-backward (online-EG, Collins et al. 2008).

        p(y) ∝ exp(c Delta(y_true, y) + ⟨v, phi(x, y)⟩) with Delta the normalised Hamming
        loss: it decomposes over positions, so c Delta adds c/L to the unary score of every
        state that differs from y_true there, and node and edge marginals give E_phi.

        Parameters
        ----------
        x : (L, F) ndarray or CSR matrix (as returned by `check_X`).
        y_true : (L,) int labelling, or None for no loss term (plain marginals).
        v : (d,) weights;  c : float loss coefficient.

        Returns
        -------
        E_phi : (d,) ndarray for dense x; a SparseVector for sparse x (non-zero only on
            x's features and the transitions, so no d-vector is built for sparse tasks).
        E_loss : float, E_p[Delta(y_true, y)] (0 without y_true).
        log_Z : float.
        """
        v, c = self._expectation_args(v, c)
        scale = 1.0
        if type(x) is WeightedInput:
            a = np.asarray(x.loss_weights)
            x = x.x
            if a.size and not np.allclose(a, a[0], rtol=1e-12, atol=0.0):
                raise NotImplementedError("ChainModel.expectation with per-node loss weights is not implemented "
                                          "(online exponentiated gradient takes per-example weights only)")
            scale = float(a[0]) * a.size if a.size else 0.0  # a_l = s / L: the loss is s times Hamming
        V = np.ascontiguousarray(self.unary_weights(v))
        P = np.ascontiguousarray(self.transition_weights(v))
        xs = self._csr(x) if sp.issparse(x) else np.ascontiguousarray(x, dtype=np.float64)
        if xs.ndim != 2 or xs.shape[1] != self.n_features:
            raise ValueError(f"x must have shape (L, {self.n_features}), got {xs.shape}")
        L = xs.shape[0]
        has_loss = y_true is not None
        yt = self._expectation_labels(y_true, L) if y_true is not None else np.zeros(L, np.int64)
        if type(xs) is np.ndarray:
            E_phi, loss, logZ = chain_expectation_dense(xs, yt, V, P, c * scale, has_loss)
            return E_phi, loss * scale, logZ
        xs = cast("sp.csr_matrix", xs)
        idx, val, loss, logZ = chain_expectation_csr(xs.indptr, xs.indices, xs.data, yt, V, P, c * scale, has_loss)
        return SparseVector(idx, val, self.size_joint_feature), loss * scale, logZ

    def _expectation_labels(self, y_true: npt.ArrayLike, L: int) -> npt.NDArray[np.int64]:
        """y_true as int64 (L,) in 0..S-1 (cheap checks: the kernel indexes marginals with it)."""
        yt = np.ascontiguousarray(y_true, dtype=np.int64)
        if yt.shape != (L,):
            raise ValueError(f"y_true must have shape ({L},) like x's rows, got {yt.shape}")
        if L and (yt.min() < 0 or yt.max() >= self.n_states):
            raise ValueError(f"y_true has labels outside 0..{self.n_states - 1}")
        return yt

    def compiled_oracle(self, X: Sequence[Any],
                        Y: Sequence[npt.NDArray[np.int64]]) -> tuple[int, tuple[Any, ...]] | None:
        """Loss-augmented Viterbi + psi of word i in one numba call (all words dense or all CSR)."""
        from ..oracles import compiled

        if any(type(x) is WeightedInput for x in X):
            A = [x.loss_weights if type(x) is WeightedInput else np.full(x.shape[0], 1.0 / x.shape[0]) for x in X]
            Xu = [unweighted(x) for x in X]
            if all(type(x) is np.ndarray for x in Xu):
                return compiled.pack_chain_dense_weighted(Xu, Y, A, self.n_states, self.n_features)
            if all(sp.isspmatrix_csr(x) for x in Xu):
                return compiled.pack_chain_csr_weighted(Xu, Y, A, self.n_states, self.n_features)
            return None
        if all(type(x) is np.ndarray for x in X):
            return compiled.pack_chain_dense(X, Y, self.n_states, self.n_features)
        if all(sp.isspmatrix_csr(x) for x in X):
            return compiled.pack_chain_csr(X, Y, self.n_states, self.n_features)
        return None

    # ------------------------------------------------------------ validation
    @staticmethod
    def _csr(x: Any) -> sp.csr_matrix:
        if type(x) is sp.csr_matrix and x.data.dtype == np.float64:
            return x
        x = sp.csr_matrix(x, dtype=np.float64)
        return x

    def _check_x(self, x: Any, name: str) -> Any:
        if type(x) is WeightedInput:  # a weighted training input (weight_example): its input checked again
            return WeightedInput(self._check_x(x.x, name), _check_node_coefficients(x.loss_weights, x.shape[0], name))
        F = self.n_features
        if sp.issparse(x):
            if x.ndim != 2:
                raise ValueError(f"{name} must be 2-D (L, {F}), got ndim={x.ndim}")
            if x.shape[1] != F:
                raise ValueError(f"{name} has {x.shape[1]} features, expected {F}")
            if not is_chain_csr(x):  # a canonical copy; input already in that form is used as it is
                x = sp.csr_matrix(x, dtype=np.float64, copy=True)
                x.sum_duplicates()
                x.sort_indices()
                x.indptr = x.indptr.astype(np.int64)
                x.indices = x.indices.astype(np.int64)
            check_finite(x.data, name)
            if x.shape[0] < 1:
                raise ValueError(f"{name} has no positions (L = 0)")
            return x
        arr = as_float_array(x, name)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D (L, {F}), got shape {arr.shape}")
        if arr.shape[1] != F:
            raise ValueError(f"{name} has {arr.shape[1]} features, expected {F}")
        if arr.shape[0] < 1:
            raise ValueError(f"{name} has no positions (L = 0)")
        check_finite(arr, name)
        return np.ascontiguousarray(arr, dtype=np.float64)

    def check_X(self, X: Iterable[npt.ArrayLike | sp.spmatrix | sp.sparray]
                ) -> list[npt.NDArray[np.float64] | sp.csr_matrix]:
        # a stack of equal-length sequences (n, L, F) is a list; one (L, F) sequence is not
        if sp.issparse(X) or (isinstance(X, np.ndarray) and X.ndim == 2):
            raise one_example_error(X, "(L_i, F) array", "sequence")
        X = check_sequence_of_inputs(X, "X")
        return [self._check_x(x, f"X[{i}]") for i, x in enumerate(X)]

    def check_y(self, x: npt.NDArray[np.float64] | sp.csr_matrix, y: npt.ArrayLike,
                name: str = "Y") -> npt.NDArray[np.int64]:
        return as_label_array(y, name, self.n_states, (x.shape[0],))


def _check_node_coefficients(a: Any, L: int, name: str) -> npt.NDArray[np.float64]:
    """The loss coefficients of a `WeightedInput` with L nodes: (L,) finite floats >= 0."""
    arr = np.ascontiguousarray(a, dtype=np.float64)
    if arr.shape != (L,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name}: the loss weights of a weighted input must be {L} finite floats >= 0")
    return arr
