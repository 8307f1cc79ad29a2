"""Chain-structured model for sequence labelling (OCR, CoNLL chunking, ...).

BCFW paper (Lacoste-Julien et al. 2013) section 6 and MP-BCFW paper appendix A:

    phi(x, y) = [ sum_l x_l placed in block y_l ,  sum_l e_{y_l, y_{l+1}} ]

with unary weight ``w[s*F + f]`` (state s, feature f) and transition weight
``w[S*F + a*S + b]`` (a -> b), so d = S*F + S^2.  The task loss is the
normalised Hamming loss; loss-augmented decoding is exact Viterbi.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._linalg import SparseVector
from ..oracles.chain import (
    chain_oracle_csr,
    chain_oracle_dense,
    chain_phi_diff_csr,
    chain_phi_diff_dense,
    hamming_loss,
)
from ..oracles.marginals import chain_expectation_csr, chain_expectation_dense
from ._validation import (
    as_float_array,
    as_label_array,
    check_finite,
    check_int_param,
    check_sequence_of_inputs,
)
from .base import StructuredModel, register_model

_EMPTY = np.empty(0, np.int64)


@register_model
class ChainModel(StructuredModel):
    """Linear-chain model with unary features and a transition matrix.

    Parameters
    ----------
    n_states : int >= 2
        Number of labels S (26 for OCR).
    n_features : int >= 1
        Number of features F of every position (128 for OCR).

    Inputs and labellings
    ---------------------
    x : ndarray (L, F) (converted to C-contiguous float64 by :meth:`check_X`), or a
        scipy.sparse matrix with L rows (kept sparse as CSR float64; the kernels use
        its indptr/indices/data and never densify it).
    y : ndarray (L,) int64 with values 0..S-1.

    ``psi`` and ``joint_feature`` return :class:`~structfw._linalg.SparseVector`.
    The methods used in the solvers' inner loop do no validation: call
    :meth:`check_data` once on the training set.
    """

    #: the joint kernel this model's features, loss and oracles define (solvers.KernelBCFW):
    #: per-position unary kernel plus linear transitions
    joint_kernel_kind = "chain"

    def __init__(self, n_states, n_features):
        self.n_states = check_int_param(n_states, "n_states", 2)
        self.n_features = check_int_param(n_features, "n_features", 1)
        self.size_joint_feature = self.n_states * self.n_features + self.n_states ** 2

    def get_config(self):
        return {"n_states": self.n_states, "n_features": self.n_features}

    # ------------------------------------------------------------ index helpers
    @property
    def transition_offset(self):
        """Index of the first transition weight in w (= S*F)."""
        return self.n_states * self.n_features

    def unary_weights(self, w):
        """View of the unary part of w as (n_states, n_features)."""
        return np.asarray(w)[: self.transition_offset].reshape(self.n_states, self.n_features)

    def transition_weights(self, w):
        """View of the transition part of w as (n_states, n_states), [a, b] = a -> b."""
        return np.asarray(w)[self.transition_offset:].reshape(self.n_states, self.n_states)

    # ------------------------------------------------------------------ core
    def joint_feature(self, x, y):
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

    def psi(self, x, y_true, y):
        """phi(x, y_true) - phi(x, y) as a SparseVector (only differing positions)."""
        if type(x) is np.ndarray:
            i, v = chain_phi_diff_dense(x, y_true, y, self.n_states, self.n_features)
        else:
            i, v = chain_phi_diff_csr(
                x.indptr, x.indices, x.data, y_true, y, self.n_states, self.n_features
            )
        return SparseVector(i, v, self.size_joint_feature)

    def loss(self, y_true, y):
        """Normalised Hamming loss (1/L) sum_l [y_true_l != y_l]."""
        return hamming_loss(y_true, y)

    def loss_augmented_decode(self, x, y_true, w):
        if type(x) is np.ndarray:
            return chain_oracle_dense(x, w, y_true, self.n_states, self.n_features, True)
        return chain_oracle_csr(
            x.indptr, x.indices, x.data, w, y_true, self.n_states, self.n_features, True
        )

    def decode(self, x, w):
        w = np.ascontiguousarray(w, dtype=np.float64)
        if type(x) is np.ndarray:
            return chain_oracle_dense(x, w, _EMPTY, self.n_states, self.n_features, False)
        x = self._csr(x)
        return chain_oracle_csr(
            x.indptr, x.indices, x.data, w, _EMPTY, self.n_states, self.n_features, False
        )

    def unary_scores(self, x, w):
        """(L, S) unary scores <x_l, w_s> (dense)."""
        W = self.unary_weights(w)
        if sp.issparse(x):
            return np.asarray(x @ W.T)
        return np.asarray(x, dtype=np.float64) @ W.T

    def score(self, x, y, w):
        phi = self.joint_feature(x, y)
        return float(np.dot(phi.values, np.asarray(w)[phi.indices]))

    def label_key(self, y):
        return y.tobytes() if type(y) is np.ndarray and y.dtype == np.int64 else (
            np.ascontiguousarray(y, dtype=np.int64).tobytes()
        )

    def expectation(self, x, y_true, v, c):
        """Expectation oracle by forward-backward (online-EG, Collins et al. 2008).

        p(y) ∝ exp(c Delta(y_true, y) + <v, phi(x, y)>) with Delta the normalised Hamming
        loss: it decomposes over positions, so c Delta adds c/L to the unary score of every
        state that differs from y_true there, and node and edge marginals give E_phi.

        Parameters
        ----------
        x : (L, F) ndarray or CSR matrix (as returned by :meth:`check_X`).
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
        V = np.ascontiguousarray(self.unary_weights(v))
        P = np.ascontiguousarray(self.transition_weights(v))
        xs = self._csr(x) if sp.issparse(x) else np.ascontiguousarray(x, dtype=np.float64)
        if xs.ndim != 2 or xs.shape[1] != self.n_features:
            raise ValueError(f"x must have shape (L, {self.n_features}), got {xs.shape}")
        L = xs.shape[0]
        has_loss = y_true is not None
        yt = self._expectation_labels(y_true, L) if has_loss else np.zeros(L, np.int64)
        if type(xs) is np.ndarray:
            return chain_expectation_dense(xs, yt, V, P, c, has_loss)
        idx, val, loss, logZ = chain_expectation_csr(xs.indptr, xs.indices, xs.data, yt, V, P, c, has_loss)
        return SparseVector(idx, val, self.size_joint_feature), loss, logZ

    def _expectation_labels(self, y_true, L):
        """y_true as int64 (L,) in 0..S-1 (cheap checks: the kernel indexes marginals with it)."""
        yt = np.ascontiguousarray(y_true, dtype=np.int64)
        if yt.shape != (L,):
            raise ValueError(f"y_true must have shape ({L},) like x's rows, got {yt.shape}")
        if L and (yt.min() < 0 or yt.max() >= self.n_states):
            raise ValueError(f"y_true has labels outside 0..{self.n_states - 1}")
        return yt

    def compiled_oracle(self, X, Y):
        """Loss-augmented Viterbi + psi of word i in one numba call (all words dense or all CSR)."""
        from ..oracles import compiled

        if all(type(x) is np.ndarray for x in X):
            return compiled.pack_chain_dense(X, Y, self.n_states, self.n_features)
        if all(sp.isspmatrix_csr(x) for x in X):
            return compiled.pack_chain_csr(X, Y, self.n_states, self.n_features)
        return None

    # ------------------------------------------------------------ validation
    @staticmethod
    def _csr(x):
        if type(x) is sp.csr_matrix and x.data.dtype == np.float64:
            return x
        x = sp.csr_matrix(x, dtype=np.float64)
        return x

    def _check_x(self, x, name):
        F = self.n_features
        if sp.issparse(x):
            if x.ndim != 2:
                raise ValueError(f"{name} must be 2-D (L, {F}), got ndim={x.ndim}")
            if x.shape[1] != F:
                raise ValueError(f"{name} has {x.shape[1]} features, expected {F}")
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

    def check_X(self, X):
        X = check_sequence_of_inputs(X, "X")
        return [self._check_x(x, f"X[{i}]") for i, x in enumerate(X)]

    def check_y(self, x, y, name="Y"):
        return as_label_array(y, name, self.n_states, (x.shape[0],))
