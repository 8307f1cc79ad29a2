"""Multiclass classification as a structured problem (USPS set-up of the MP-BCFW
paper, appendix A): phi(x, y) places the feature vector x in block y of a
K*F-dimensional vector, the loss is the 0-1 loss and the max oracle enumerates
the K classes.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from .._linalg import SparseVector
from ..oracles.marginals import softmax_expectation
from ..oracles.multiclass import (
    multiclass_oracle,
    multiclass_oracle_sparse,
    multiclass_oracle_weighted,
    multiclass_scores_sparse as _scores_sparse,
    weighted_augmented_argmax,
    multiclass_phi_diff,
    multiclass_phi_diff_sparse,
    multiclass_scores_sparse,
)
from ._validation import (
    as_float_array,
    check_finite,
    check_int_param,
    check_joint_feature_size,
    check_sequence_of_inputs,
    one_example_error,
)
from .base import CheckedModel, WeightedInput, check_example_weight, checked, register_model, unweighted


@register_model
class MulticlassModel(CheckedModel):
    """Multiclass model with joint feature x placed in block y (d = K*F) and 0-1 loss.

    Parameters
    ----------
    n_classes : int >= 2
        K, the number of classes (labels 0..K-1).
    n_features : int >= 1
        F, the length of an input vector; w has K * F entries.

    Notes
    -----
    Inputs and labellings: x is a (F,) float64 vector, or a
    `structfw._linalg.SparseVector` of dimension F for sparse data; y a
    Python int in 0..K-1. `check_X` also accepts a 2-D array (rows =
    examples), returned as a list of C-contiguous float64 rows, or a scipy.sparse
    matrix, returned as a list of sparse rows and never densified (a wide
    svmlight file costs memory in its nonzeros only).  Called by a user, every method checks
    its arguments; the engine calls them unchecked on the data it validated once
    (`structfw.models.base.checked`).  d = K*F is at most
    `structfw.models._validation.MAX_SIZE_JOINT_FEATURE`.
    """

    #: the joint kernel this model's features, loss and oracles define (solvers.KernelBCFW):
    #: a chain of length 1
    joint_kernel_kind = "multiclass"
    class_labels = True

    def __init__(self, n_classes: int, n_features: int) -> None:
        self.n_classes = check_int_param(n_classes, "n_classes", 2)
        self.n_features = check_int_param(n_features, "n_features", 1)
        self.size_joint_feature = check_joint_feature_size("MulticlassModel", "n_classes * n_features",
                                                           self.n_classes * self.n_features)

    @property
    def n_states(self) -> int:
        return self.n_classes

    def get_config(self) -> dict[str, Any]:
        return {"n_classes": self.n_classes, "n_features": self.n_features}

    # ------------------------------------------------------------------ core
    def _phi_diff(self, x: npt.NDArray[np.float64] | SparseVector, ya: int, yb: int) -> SparseVector:
        x = unweighted(x)
        if isinstance(x, SparseVector):
            i, v = multiclass_phi_diff_sparse(x.indices, x.values, ya, yb, self.n_features)
        else:
            i, v = multiclass_phi_diff(x, ya, yb, self.n_features)
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def joint_feature(self, x: npt.NDArray[np.float64] | SparseVector, y: int) -> SparseVector:
        """phi(x, y): x in block y."""
        return self._phi_diff(x, int(y), -1)

    @checked
    def psi(self, x: npt.NDArray[np.float64] | SparseVector, y_true: int, y: int) -> SparseVector:
        """phi(x, y_true) - phi(x, y)."""
        return self._phi_diff(x, y_true, y)

    @checked
    def loss(self, y_true: int, y: int) -> float:
        """0-1 loss."""
        return 0.0 if y_true == y else 1.0

    def _check_label_pair(self, y_true: Any, y: Any, where: str) -> tuple[int, int]:
        return self.check_y(None, y_true, f"{where}: y_true"), self.check_y(None, y, f"{where}: y")

    @checked
    def example_loss(self, x: Any, y_true: int, y: int) -> float:
        """The loss the training sees: c [y != y_true] for an input of weight c (`weight_example`)."""
        if y_true == y:
            return 0.0
        return float(x.loss_weights) if type(x) is WeightedInput else 1.0

    def weight_example(self, x: Any, y_true: Any, weight: float | npt.NDArray[np.float64],
                       name: str = "sample_weight") -> WeightedInput:
        """x with the loss weight c >= 0 (its loss becomes c [y != y_true]); see
        `StructuredModel.weight_example`.  A one-element array counts as its element."""
        if isinstance(weight, np.ndarray) and weight.size == 1:
            weight = weight.reshape(()).item()
        prev = float(x.loss_weights) if type(x) is WeightedInput else 1.0
        return WeightedInput(unweighted(x), prev * check_example_weight(weight, name, None))

    def _oracle(self, x: npt.NDArray[np.float64] | SparseVector, w: npt.NDArray[np.float64], y_true: int,
                augment: bool) -> int:
        if isinstance(x, SparseVector):
            return multiclass_oracle_sparse(x.indices, x.values, w, y_true, self.n_classes, self.n_features,
                                            augment)
        return multiclass_oracle(x, w, y_true, self.n_classes, self.n_features, augment)

    @checked
    def loss_augmented_decode(self, x: npt.NDArray[np.float64] | SparseVector, y_true: int,
                              w: npt.NDArray[np.float64]) -> int:
        """argmax_k [k != y_true] + ⟨w_k, x⟩ (times the input's weight for a weighted input)."""
        if type(x) is WeightedInput:
            c = float(x.loss_weights)
            xi = x.x
            w = np.ascontiguousarray(w, dtype=np.float64)
            if isinstance(xi, SparseVector):
                return int(weighted_augmented_argmax(
                    _scores_sparse(xi.indices, xi.values, w, self.n_classes, self.n_features), y_true, c))
            return int(multiclass_oracle_weighted(xi, w, y_true, c, self.n_classes, self.n_features))
        return self._oracle(x, w, y_true, True)

    @checked
    def decode(self, x: npt.NDArray[np.float64] | SparseVector, w: npt.ArrayLike) -> int:
        """argmax_k ⟨w_k, x⟩."""
        x = unweighted(x)
        return self._oracle(x, np.ascontiguousarray(w, dtype=np.float64), -1, False)

    @checked
    def scores(self, x: npt.ArrayLike | SparseVector, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """(K,) class scores ⟨w_k, x⟩."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        x = unweighted(x)
        if isinstance(x, SparseVector):
            return multiclass_scores_sparse(x.indices, x.values, w, self.n_classes, self.n_features)
        return w[: self.size_joint_feature].reshape(self.n_classes, self.n_features) @ np.asarray(x, np.float64)

    def label_key(self, y: int) -> int:
        return int(y)

    @checked
    def expectation(self, x: npt.ArrayLike | SparseVector, y_true: int | None, v: npt.ArrayLike,
                    c: float) -> tuple[npt.NDArray[np.float64], float, float]:
        """Expectation oracle: the softmax p(k) ∝ exp(c [k != y_true] + ⟨v_k, x⟩) (online-EG).

        Parameters
        ----------
        x : (F,) features;  y_true : int class, or None for no loss term;
        v : (d,) weights;  c : float loss coefficient.

        Returns
        -------
        E_phi : (d,) ndarray, block k = p(k) x;  E_loss : float, 1 - p(y_true) (0 without
        y_true);  log_Z : float (log-sum-exp shifted by the max, so no overflow).
        """
        v, c = self._expectation_args(v, c)
        scale = 1.0
        if type(x) is WeightedInput:
            x, scale = x.x, float(x.loss_weights)
        V = v.reshape(self.n_classes, self.n_features)
        if isinstance(x, SparseVector):
            x = x.toarray()
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.shape != (self.n_features,):
            raise ValueError(f"x must have shape ({self.n_features},), got {x.shape}")
        has_loss = y_true is not None
        yt = 0
        if y_true is not None:
            yt = int(y_true)
            if not 0 <= yt < self.n_classes:
                raise ValueError(f"y_true has label {yt} outside 0..{self.n_classes - 1}")
        if scale == 1.0:
            return softmax_expectation(x, yt, V, c, has_loss)
        # the loss is scale [k != y_true]: the Gibbs weights see c scale, E_loss is scale times 1 - p(y_true)
        E_phi, E_loss, logZ = softmax_expectation(x, yt, V, c * scale, has_loss)
        return E_phi, E_loss * scale, logZ

    def compiled_oracle(self, X: Sequence[Any], Y: Sequence[int]) -> tuple[int, tuple[Any, ...]] | None:
        """The K-way loss-augmented argmax + psi of example i in one numba call (dense rows only)."""
        if any(type(x) is WeightedInput for x in X):
            Xu = [unweighted(x) for x in X]
            if not all(type(x) is np.ndarray and x.ndim == 1 for x in Xu):
                return None
            from ..oracles.compiled import pack_multiclass_dense_weighted

            A = [float(x.loss_weights) if type(x) is WeightedInput else 1.0 for x in X]
            return pack_multiclass_dense_weighted(Xu, Y, A, self.n_classes, self.n_features)
        if not all(type(x) is np.ndarray and x.ndim == 1 for x in X):
            return None
        from ..oracles.compiled import pack_multiclass_dense

        return pack_multiclass_dense(X, Y, self.n_classes, self.n_features)

    # ------------------------------------------------------------ validation
    def _check_x(self, x: Any, name: str) -> Any:
        if type(x) is WeightedInput:  # a weighted training input (weight_example): its input checked again
            return WeightedInput(self._check_x(x.x, name), check_example_weight(x.loss_weights, name, None))
        if isinstance(x, SparseVector) or sp.issparse(x):
            return self._check_sparse_row(x, name)
        arr = as_float_array(x, name)
        if arr.ndim != 1:
            raise ValueError(f"{name} must be 1-D ({self.n_features},), got shape {arr.shape}")
        if arr.shape[0] != self.n_features:
            raise ValueError(f"{name} has {arr.shape[0]} features, expected {self.n_features}")
        check_finite(arr, name)
        return np.ascontiguousarray(arr, dtype=np.float64)

    def _check_sparse_row(self, x: Any, name: str) -> SparseVector:
        if sp.issparse(x):
            if x.ndim == 2 and x.shape[0] != 1:
                raise ValueError(f"{name} must be one row (1, {self.n_features}); got shape {x.shape}")
            return self._sparse_rows(sp.csr_matrix(x), name)[0]
        if x.dim != self.n_features:
            raise ValueError(f"{name} has {x.dim} features, expected {self.n_features}")
        idx = np.asarray(x.indices, np.int64)
        val = np.asarray(x.values, np.float64)
        if idx.shape != val.shape or idx.ndim != 1:
            raise ValueError(f"{name} must have matching 1-D indices and values")
        check_finite(val, name)
        if idx.size and (idx[0] < 0 or idx[-1] >= self.n_features or np.any(np.diff(idx) <= 0)):
            raise ValueError(f"{name} must have strictly increasing indices in 0..{self.n_features - 1}")
        keep = val != 0.0
        return SparseVector(np.ascontiguousarray(idx[keep]), np.ascontiguousarray(val[keep]), self.n_features)

    def _sparse_rows(self, X: sp.csr_matrix, name: str) -> list[Any]:
        if X.shape[1] != self.n_features:
            raise ValueError(f"{name} has {X.shape[1]} features, expected {self.n_features}")
        X = X.astype(np.float64, copy=True)
        X.sum_duplicates()
        X.eliminate_zeros()
        X.sort_indices()
        check_finite(X.data, name)
        indptr, indices, data = X.indptr, X.indices.astype(np.int64), X.data
        return [SparseVector(indices[indptr[r]:indptr[r + 1]].copy(), data[indptr[r]:indptr[r + 1]].copy(),
                             self.n_features) for r in range(X.shape[0])]

    def check_X(self, X: Iterable[Any]) -> list[npt.NDArray[np.float64] | SparseVector]:
        if sp.issparse(X):
            S = cast("sp.spmatrix", X)  # sp.issparse narrows nothing for mypy
            if S.ndim != 2:
                raise ValueError(f"X must be a 2-D sparse matrix (n_samples, {self.n_features}); got {S.shape}")
            return self._sparse_rows(sp.csr_matrix(S), "X")
        if isinstance(X, np.ndarray):
            if X.ndim == 1:
                raise ValueError(f"X must be a 2-D array (n_samples, {self.n_features}) or a list of examples "
                                 f"(one ({self.n_features},) vector each), got a single example (shape "
                                 f"{X.shape}); to predict one example pass [x] or x.reshape(1, -1)")
            if X.ndim != 2:
                raise ValueError(
                    f"X must be a 2-D array (n_samples, {self.n_features}) or a list of "
                    f"vectors, got an array of shape {X.shape}"
                )
            if X.shape[1] != self.n_features:
                raise ValueError(f"X has {X.shape[1]} features, expected {self.n_features}")
            arr = as_float_array(X, "X")
            check_finite(arr, "X")
            arr = np.ascontiguousarray(arr, dtype=np.float64)
            return [arr[i] for i in range(arr.shape[0])]
        if isinstance(X, SparseVector):
            raise one_example_error(X, f"({self.n_features},) vector or SparseVector", "example")
        X = check_sequence_of_inputs(X, "X")
        return [self._check_x(x, f"X[{i}]") for i, x in enumerate(X)]

    def check_y(self, x: npt.NDArray[np.float64] | SparseVector | None, y: Any, name: str = "Y") -> int:
        if isinstance(y, np.ndarray):
            if y.ndim != 0:
                raise ValueError(f"{name} must be a single class label, got shape {y.shape}")
            y = y.item()
        if isinstance(y, bool) or not isinstance(y, (numbers.Integral, numbers.Real)):
            raise ValueError(f"{name} must be an integer class label, got {y!r}")
        if not isinstance(y, numbers.Integral):
            # typeshed's numbers.Real supports neither int() nor numpy's ufuncs
            if not np.isfinite(y) or y != int(y):  # type: ignore[call-overload]
                raise ValueError(f"{name} must be an integer class label, got {y!r}")
        y = int(y)  # type: ignore[call-overload]
        if not 0 <= y < self.n_classes:
            raise ValueError(
                f"{name} has label {y} outside 0..{self.n_classes - 1} (n_classes={self.n_classes})"
            )
        return y
