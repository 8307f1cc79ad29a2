"""Vectors of R^d as the solvers see them: dense arrays or compact sparse vectors.

A corner psi_i(y) of a structured problem touches few coordinates of w when the
labelling y differs from y_i in few places, or when the features are sparse.
Models therefore may return a `SparseVector`; the solvers never densify
one per call (docs/design.md, "Speed").  The numba kernels here are the only
arithmetic the hot loop needs: inner products with the dense w, sparse-sparse
inner products, and scaled merges of two sparse vectors.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)


class SparseVector:
    """A vector of R^dim with sorted, unique ``indices`` and float64 ``values``.

    Parameters
    ----------
    indices : ndarray of int64, shape (nnz,)
        Strictly increasing coordinates.
    values : ndarray of float64, shape (nnz,)
    dim : int
        Length of the dense vector this represents.
    """

    __slots__ = ("indices", "values", "dim")

    def __init__(self, indices, values, dim):
        self.indices = indices
        self.values = values
        self.dim = int(dim)

    @classmethod
    def from_dense(cls, v):
        v = np.asarray(v, dtype=np.float64)
        idx = np.flatnonzero(v).astype(np.int64)
        return cls(idx, v[idx].copy(), v.shape[0])

    @classmethod
    def from_pairs(cls, indices, values, dim):
        """Build from possibly unsorted, repeated (index, value) pairs (summed)."""
        idx, val = coalesce(np.asarray(indices, np.int64), np.asarray(values, np.float64))
        return cls(idx, val, dim)

    @classmethod
    def zeros(cls, dim):
        return cls(np.empty(0, np.int64), np.empty(0, np.float64), dim)

    @property
    def nnz(self):
        return self.indices.shape[0]

    def toarray(self):
        out = np.zeros(self.dim)
        out[self.indices] = self.values
        return out

    def __mul__(self, c):
        return SparseVector(self.indices, self.values * c, self.dim)

    __rmul__ = __mul__

    def __repr__(self):
        return f"SparseVector(dim={self.dim}, nnz={self.nnz})"


def as_dense(v, dim=None):
    """Dense float64 copy-or-view of a dense array or SparseVector."""
    if isinstance(v, SparseVector):
        return v.toarray()
    return np.asarray(v, dtype=np.float64)


@njit(cache=True)
def coalesce(indices, values):
    """Sort (index, value) pairs and sum repeated indices; drop exact zeros."""
    order = np.argsort(indices, kind="mergesort")
    n = indices.shape[0]
    out_i = np.empty(n, np.int64)
    out_v = np.empty(n, np.float64)
    m = -1
    last = -1
    for t in range(n):
        j = indices[order[t]]
        if m >= 0 and j == last:
            out_v[m] += values[order[t]]
        else:
            m += 1
            out_i[m] = j
            out_v[m] = values[order[t]]
            last = j
    m += 1
    keep = 0
    for t in range(m):
        if out_v[t] != 0.0:
            out_i[keep] = out_i[t]
            out_v[keep] = out_v[t]
            keep += 1
    return out_i[:keep].copy(), out_v[:keep].copy()


@njit(cache=True)
def sparse_dot_dense(idx, val, w):
    s = 0.0
    for t in range(idx.shape[0]):
        s += val[t] * w[idx[t]]
    return s


@njit(cache=True)
def sparse_dot_sparse(ia, va, ib, vb):
    """⟨a, b⟩ for two sorted sparse vectors (merge)."""
    s = 0.0
    p = 0
    q = 0
    na = ia.shape[0]
    nb = ib.shape[0]
    while p < na and q < nb:
        if ia[p] == ib[q]:
            s += va[p] * vb[q]
            p += 1
            q += 1
        elif ia[p] < ib[q]:
            p += 1
        else:
            q += 1
    return s


@njit(cache=True, nogil=True)
def sparse_dot_sparse_scattered(ia, va, ib, vb, scratch):
    """`sparse_dot_sparse` through a dense ``scratch`` (zeros of the full length, zero
    again on return; empty: the merge is used): a scattered into it, b gathered against it.
    The same products added in the same (index) order, so the same value to the bit; the
    merge's unpredictable three-way branch cost 1.8 us for two corners of ~200 entries,
    the scatter 0.45 us.  ``a`` needs unique indices."""
    if scratch.shape[0] == 0:
        return sparse_dot_sparse(ia, va, ib, vb)
    for p in range(ia.shape[0]):
        scratch[ia[p]] = va[p]
    s = 0.0
    for q in range(ib.shape[0]):
        s += vb[q] * scratch[ib[q]]
    for p in range(ia.shape[0]):
        scratch[ia[p]] = 0.0
    return s


@njit(cache=True)
def sparse_axpy_dense(c, idx, val, w):
    """w += c * v in place, v sparse."""
    for t in range(idx.shape[0]):
        w[idx[t]] += c * val[t]


@njit(cache=True)
def sparse_combine(a, ia, va, b, ib, vb):
    """Sorted sparse representation of a * u + b * v (exact zeros kept out)."""
    na = ia.shape[0]
    nb = ib.shape[0]
    out_i = np.empty(na + nb, np.int64)
    out_v = np.empty(na + nb, np.float64)
    p = 0
    q = 0
    m = 0
    while p < na or q < nb:
        if q >= nb or (p < na and ia[p] < ib[q]):
            j = ia[p]
            x = a * va[p]
            p += 1
        elif p >= na or ib[q] < ia[p]:
            j = ib[q]
            x = b * vb[q]
            q += 1
        else:
            j = ia[p]
            x = a * va[p] + b * vb[q]
            p += 1
            q += 1
        if x != 0.0:
            out_i[m] = j
            out_v[m] = x
            m += 1
    return out_i[:m].copy(), out_v[:m].copy()


def dot(v, w):
    """⟨v, w⟩ for v dense or sparse and w dense."""
    if isinstance(v, SparseVector):
        return sparse_dot_dense(v.indices, v.values, w)
    return float(np.dot(v, w))


def sqnorm(v):
    if isinstance(v, SparseVector):
        return float(np.dot(v.values, v.values))
    return float(np.dot(v, v))


def axpy(c, v, w):
    """w += c * v in place (w dense)."""
    if isinstance(v, SparseVector):
        sparse_axpy_dense(c, v.indices, v.values, w)
    else:
        w += c * v


def combine(a, u, b, v):
    """a * u + b * v; sparse when both are sparse, dense otherwise."""
    if isinstance(u, SparseVector) and isinstance(v, SparseVector):
        i, x = sparse_combine(a, u.indices, u.values, b, v.indices, v.values)
        return SparseVector(i, x, u.dim)
    out = a * as_dense(u)
    axpy(b, v, out)
    return out


# ------------------------------------------------------------ sequences as CSR
def is_chain_csr(x):
    """True when x is already the form the chain kernels read: a csr_matrix with float64 data,
    int64 indptr and indices, sorted indices and no duplicates.  Then `ChainModel.check_X` keeps
    it instead of copying it: scipy builds a new matrix in ~0.4 ms, 4 s of a CoNLL-sized fit."""
    import scipy.sparse as sp

    return (type(x) is sp.csr_matrix and x.data.dtype == np.float64 and x.indices.dtype == np.int64
            and x.indptr.dtype == np.int64 and bool(x.has_canonical_format))


def as_chain_csr(data, indices, indptr, shape):
    """One sequence's (L, F) csr_matrix in the form `ChainModel.check_X` keeps without a copy
    (float64 data, int64 index arrays, canonical): for loaders and vectorizers."""
    import scipy.sparse as sp

    x = sp.csr_matrix((np.asarray(data, np.float64), np.asarray(indices), np.asarray(indptr)), shape=shape)
    x.sum_duplicates()  # also sorts the indices
    x.indptr = x.indptr.astype(np.int64)
    x.indices = x.indices.astype(np.int64)
    return x
