"""The block parts w_i as the compiled block step sees them: dense rows or sparse rows.

docs/design.md, "Speed".  The engine stores w_i = c_i v_i (a scale c_i per block, so that the
FW step's (1 - gamma) w_i never rewrites the row) in one of two layouts, each a tuple of arrays
whose *type* picks the kernels (numba overloads, as `structfw.oracles.compiled.corner` does):

- dense: ``(scales (n,), rows (n, d))`` -- small d (OCR: 6,251 x 4,082);
- sparse: ``(scales (n,), start (n,), nnz (n,), cap (n,), idx (P,), val (P,), meta (2,))`` --
  row i's entries are ``idx/val[start[i] : start[i] + nnz[i]]``, sorted by index, in a slot
  of ``cap[i]`` entries of one shared pool; ``meta[0]`` is the pool's top.  A text task's
  w_i holds only the features of its own sequence (a corner psi_i(y) is non-zero only where y
  differs from y_i), so n x d never exists;
- none: ``(scales (n,),)`` -- passes that never read the rows (pairwise steps with the corners'
  weights tracked: w_i = A alpha_[i] is known through them).

The block step (`structfw.solvers._kernels.block_step`) is written once over these operations:
`row_dot_sqnorm`, `row_dot_entries`, `row_axpy_into`, `row_add_entries`, `row_rescale`.
A sparse row that must grow moves to the pool's top (`row_room`); when the pool is full the
compiled pass stops before the step and Python grows it (`SparseRows.make_room`).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)
from numba.extending import overload

from .._linalg import SparseVector

#: a scale outside [_MIN_SCALE, _MAX_SCALE] is folded into its row (c_i = 1)
_MIN_SCALE, _MAX_SCALE = 1e-12, 1e12


# ====================================================================== Python side
class SparseRows:
    """n sparse rows v_i in one pool (the sparse layout above); the scales live in the state.

    Parameters
    ----------
    n, d : int
        Blocks and the length of each row.
    pool : int, optional
        Initial pool size in entries (grown on demand).
    """

    def __init__(self, n: int, d: int, pool: int | None = None) -> None:
        self.n, self.d = int(n), int(d)
        P = max(1024, 64 * self.n) if pool is None else int(pool)
        self.start = np.zeros(self.n, np.int64)
        self.nnz = np.zeros(self.n, np.int64)
        self.cap = np.zeros(self.n, np.int64)
        self.idx = np.zeros(P, np.int64)
        self.val = np.zeros(P, np.float64)
        self.meta = np.zeros(2, np.int64)  # [top of the pool, unused]

    def arrays(self, scales: np.ndarray) -> tuple:
        """The kernels' tuple (scales, start, nnz, cap, idx, val, meta)."""
        return (scales, self.start, self.nnz, self.cap, self.idx, self.val, self.meta)

    def row(self, i: int) -> SparseVector:
        """v_i as a SparseVector (a copy)."""
        a, m = int(self.start[i]), int(self.nnz[i])
        return SparseVector(self.idx[a:a + m].copy(), self.val[a:a + m].copy(), self.d)

    def set_row(self, i: int, v: SparseVector) -> None:
        """v_i = v (sorted, unique indices)."""
        m = v.indices.shape[0]
        self.make_room(i, m - int(self.nnz[i]))
        a = int(self.start[i])
        self.idx[a:a + m] = v.indices
        self.val[a:a + m] = v.values
        self.nnz[i] = m

    def make_room(self, i: int, extra: int) -> None:
        """Room for ``extra`` more entries in row i: the pool compacted and grown when full."""
        if _sparse_room(self.arrays(np.ones(0)), int(i), int(max(extra, 0))) == 0:
            return
        need = int(self.nnz[i]) + int(max(extra, 0))
        live = int(self.cap.sum())
        P = max(2 * (live + 2 * need), self.idx.shape[0])
        idx, val = np.zeros(P, np.int64), np.zeros(P, np.float64)
        self.meta[0] = _compact_rows(self.start, self.nnz, self.cap, self.idx, self.val, idx, val)
        self.idx, self.val = idx, val
        if _sparse_room(self.arrays(np.ones(0)), int(i), int(max(extra, 0))) != 0:  # pragma: no cover
            raise RuntimeError("sparse rows: the grown pool has no room")

    def add(self, i: int, idx: np.ndarray, val: np.ndarray) -> None:
        """v_i += (idx, val) (sorted unique indices)."""
        self.make_room(i, idx.shape[0])
        _sparse_add_entries(self.arrays(np.ones(0)), int(i), np.ascontiguousarray(idx, np.int64),
                            np.ascontiguousarray(val, np.float64), 1.0)

    def scale_row(self, i: int, c: float) -> None:
        """v_i *= c (folding a block's scale into its row)."""
        a, m = int(self.start[i]), int(self.nnz[i])
        self.val[a:a + m] *= c

    def nbytes(self) -> int:
        return int(self.idx.nbytes + self.val.nbytes + 3 * self.start.nbytes)


# ====================================================================== sparse kernels
@njit(cache=True, nogil=True)
def _sparse_room(R, i, extra):
    """0 when row i has room for ``extra`` more entries (moving it to the pool's top if it must
    grow); 1 when the pool is full (nothing changed)."""
    start, nnz, cap, idx, val, meta = R[1], R[2], R[3], R[4], R[5], R[6]
    need = nnz[i] + extra
    if need <= cap[i]:
        return 0
    newcap = 2 * need if need > 4 else 8
    top = meta[0]
    if top + newcap > idx.shape[0]:
        return 1
    a = start[i]
    for t in range(nnz[i]):
        idx[top + t] = idx[a + t]
        val[top + t] = val[a + t]
    start[i] = top
    cap[i] = newcap
    meta[0] = top + newcap
    return 0


@njit(cache=True, nogil=True)
def _compact_rows(start, nnz, cap, idx, val, new_idx, new_val):
    """Copy every row into (new_idx, new_val) in block order, each keeping its capacity; moves
    ``start`` and returns the new pool's top.  Compiled: a Python loop over the blocks took
    0.03-0.08 s a growth on the CoNLL-scale chain (n = 8,936), three growths in its first pass."""
    top = 0
    for b in range(start.shape[0]):
        a = start[b]
        for t in range(nnz[b]):
            new_idx[top + t] = idx[a + t]
            new_val[top + t] = val[a + t]
        start[b] = top
        top += cap[b]
    return top


@njit(cache=True, nogil=True)
def sparse_row_dot(R, i, w):
    """⟨v_i, w⟩ of a sparse row (from Python: `BCFWState.block_w_dot`)."""
    return _sparse_dot_sqnorm(R, i, w)[0]


@njit(cache=True, nogil=True, fastmath=True)
def _sparse_dot_sqnorm(R, i, w):
    a, m, idx, val = R[1][i], R[2][i], R[4], R[5]
    s = 0.0
    q = 0.0
    for t in range(a, a + m):
        x = val[t]
        s += x * w[idx[t]]
        q += x * x
    return s, q


@njit(cache=True, nogil=True)
def _sparse_dot_entries(R, i, ei, ev):
    """⟨v_i, e⟩ for entries e with sorted unique indices (a merge)."""
    a, m, idx, val = R[1][i], R[2][i], R[4], R[5]
    s = 0.0
    p = a
    q = 0
    end = a + m
    ne = ei.shape[0]
    while p < end and q < ne:
        if idx[p] == ei[q]:
            s += val[p] * ev[q]
            p += 1
            q += 1
        elif idx[p] < ei[q]:
            p += 1
        else:
            q += 1
    return s


@njit(cache=True, nogil=True)
def _sparse_axpy_into(R, i, w, u, c, cu):
    """w += c v_i (and u -= cu c v_i when u is non-empty)."""
    a, m, idx, val = R[1][i], R[2][i], R[4], R[5]
    has_u = u.shape[0] > 0
    for t in range(a, a + m):
        step = c * val[t]
        w[idx[t]] += step
        if has_u:
            u[idx[t]] -= cu * step


@njit(cache=True, nogil=True)
def _sparse_add_entries(R, i, ei, ev, cv):
    """v_i += cv e for sorted unique indices ei; the row has room (`row_room`) for them all.

    A forward merge adds cv e_j to the entries the row already has and counts the new indices;
    only when there are some does a merge from the back, in place, insert them (the entries
    already updated are moved as they are).  Near the optimum a corner's indices are mostly in
    the row already, so most steps make one merge instead of two."""
    start, nnz, idx, val = R[1], R[2], R[4], R[5]
    a = start[i]
    m = nnz[i]
    ne = ei.shape[0]
    new = 0
    p = a
    for q in range(ne):
        while p < a + m and idx[p] < ei[q]:
            p += 1
        if p < a + m and idx[p] == ei[q]:
            val[p] += cv * ev[q]
        else:
            new += 1
    if new == 0:
        return
    out = a + m + new - 1
    p = a + m - 1
    q = ne - 1
    while q >= 0:
        if p >= a and idx[p] >= ei[q]:  # a row entry (updated by the forward merge when equal)
            if idx[p] == ei[q]:
                q -= 1
            idx[out] = idx[p]
            val[out] = val[p]
            p -= 1
        else:
            idx[out] = ei[q]
            val[out] = cv * ev[q]
            q -= 1
        out -= 1
    nnz[i] = m + new


@njit(cache=True, nogil=True)
def _sparse_rescale(R, i, c_new):
    if c_new == 0.0:
        R[2][i] = 0
        return 1.0
    if c_new < _MIN_SCALE or c_new > _MAX_SCALE:
        a, m, val = R[1][i], R[2][i], R[5]
        for t in range(a, a + m):
            val[t] *= c_new
        return 1.0
    return c_new


# ====================================================================== dense kernels
@njit(cache=True, fastmath=True, nogil=True)
def _dense_dot_sqnorm(v, w):
    """(⟨a, b⟩, ||a||^2) in one sweep (fastmath lets the reductions vectorise)."""
    s = 0.0
    q = 0.0
    for j in range(v.shape[0]):
        s += v[j] * w[j]
        q += v[j] * v[j]
    return s, q


@njit(cache=True, fastmath=True, nogil=True)
def _dense_axpy(v, w, c):
    for j in range(v.shape[0]):
        w[j] += c * v[j]


@njit(cache=True, fastmath=True, nogil=True)
def _dense_axpy_avg(v, w, u, c, cu):
    for j in range(v.shape[0]):
        step = c * v[j]
        w[j] += step
        u[j] -= cu * step


@njit(cache=True, nogil=True)
def _dense_rescale(v, c_new):
    if c_new == 0.0:
        v[:] = 0.0
        return 1.0
    if c_new < _MIN_SCALE or c_new > _MAX_SCALE:
        for j in range(v.shape[0]):
            v[j] *= c_new
        return 1.0
    return c_new


@njit(cache=True, fastmath=True, nogil=True)
def dense_dot(a, b):
    s = 0.0
    for j in range(a.shape[0]):
        s += a[j] * b[j]
    return s


@njit(cache=True, nogil=True)
def _dense_dot_entries(v, ei, ev):
    s = 0.0
    for t in range(ei.shape[0]):
        s += ev[t] * v[ei[t]]
    return s


# ====================================================================== the operations
# Python stubs; the compiled callers resolve them by the layout's tuple length (1, 2 or 7)
def row_room(B, i, extra):  # pragma: no cover - resolved by the overload
    """0 when row i can take ``extra`` more entries (always, but for a full sparse pool: 1)."""
    raise NotImplementedError


def row_dot(B, i, w):  # pragma: no cover
    """⟨v_i, w⟩."""
    raise NotImplementedError


def row_dot_sqnorm(B, i, w):  # pragma: no cover - resolved by the overload
    """(⟨v_i, w⟩, ||v_i||^2)."""
    raise NotImplementedError


def row_dot_entries(B, i, ei, ev):  # pragma: no cover
    """⟨v_i, e⟩ for entries e (sorted unique indices for sparse rows)."""
    raise NotImplementedError


def row_axpy_into(B, i, w, u, c, cu):  # pragma: no cover
    """w += c v_i (and u -= cu c v_i when u is non-empty)."""
    raise NotImplementedError


def row_add_entries(B, i, ei, ev, cv):  # pragma: no cover
    """v_i += cv e (nothing for the 'none' layout)."""
    raise NotImplementedError


def row_rescale(B, i, c_new):  # pragma: no cover
    """The scale after a step set it to c_new: 1 with the row folded in when c_new is 0 or far
    from 1."""
    raise NotImplementedError


def _layout(B):
    if not isinstance(B, types.BaseTuple):
        return None
    return {1: "none", 2: "dense", 7: "sparse"}.get(len(B.types))


@overload(row_room, inline="always", jit_options={"nogil": True})
def _ov_room(B, i, extra):
    kind = _layout(B)
    if kind == "sparse":
        return lambda B, i, extra: _sparse_room(B, i, extra)
    if kind in ("dense", "none"):
        return lambda B, i, extra: 0
    return None


@overload(row_dot, inline="always", jit_options={"nogil": True})
def _ov_dot(B, i, w):
    kind = _layout(B)
    if kind == "dense":
        return lambda B, i, w: dense_dot(B[1][i], w)
    if kind == "sparse":
        return lambda B, i, w: _sparse_dot_sqnorm(B, i, w)[0]
    if kind == "none":
        return lambda B, i, w: 0.0
    return None


@overload(row_dot_sqnorm, inline="always", jit_options={"nogil": True})
def _ov_dot_sqnorm(B, i, w):
    kind = _layout(B)
    if kind == "dense":
        return lambda B, i, w: _dense_dot_sqnorm(B[1][i], w)
    if kind == "sparse":
        return lambda B, i, w: _sparse_dot_sqnorm(B, i, w)
    if kind == "none":
        return lambda B, i, w: (0.0, 0.0)
    return None


@overload(row_dot_entries, inline="always", jit_options={"nogil": True})
def _ov_dot_entries(B, i, ei, ev):
    kind = _layout(B)
    if kind == "dense":
        return lambda B, i, ei, ev: _dense_dot_entries(B[1][i], ei, ev)
    if kind == "sparse":
        return lambda B, i, ei, ev: _sparse_dot_entries(B, i, ei, ev)
    if kind == "none":
        return lambda B, i, ei, ev: 0.0
    return None


@overload(row_axpy_into, inline="always", jit_options={"nogil": True})
def _ov_axpy_into(B, i, w, u, c, cu):
    kind = _layout(B)
    if kind == "dense":
        def dense(B, i, w, u, c, cu):
            if u.shape[0] > 0:
                _dense_axpy_avg(B[1][i], w, u, c, cu)
            else:
                _dense_axpy(B[1][i], w, c)
        return dense
    if kind == "sparse":
        return lambda B, i, w, u, c, cu: _sparse_axpy_into(B, i, w, u, c, cu)
    if kind == "none":
        return lambda B, i, w, u, c, cu: None
    return None


@overload(row_add_entries, inline="always", jit_options={"nogil": True})
def _ov_add_entries(B, i, ei, ev, cv):
    kind = _layout(B)
    if kind == "dense":
        def dense(B, i, ei, ev, cv):
            v = B[1][i]
            for t in range(ei.shape[0]):
                v[ei[t]] += cv * ev[t]
        return dense
    if kind == "sparse":
        return lambda B, i, ei, ev, cv: _sparse_add_entries(B, i, ei, ev, cv)
    if kind == "none":
        return lambda B, i, ei, ev, cv: None
    return None


@overload(row_rescale, inline="always", jit_options={"nogil": True})
def _ov_rescale(B, i, c_new):
    kind = _layout(B)
    if kind == "dense":
        return lambda B, i, c_new: _dense_rescale(B[1][i], c_new)
    if kind == "sparse":
        return lambda B, i, c_new: _sparse_rescale(B, i, c_new)
    if kind == "none":
        return lambda B, i, c_new: c_new
    return None
