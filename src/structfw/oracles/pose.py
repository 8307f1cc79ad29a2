"""Max-product on a tree of parts with quadratic springs, messages by distance transforms.

The pictorial-structure energy of a pose y = (y_1..y_P), y_p = (row, col) on an H x W grid,
is

    E(y) = sum_p S[p, y_p] - sum_{p != root} C_p(y_p - y_{parent(p)}),
    C_p(dy, dx) = a_p dx^2 + b_p dx + c_p dy^2 + d_p dy,

with ``coef[p] = (a_p, b_p, c_p, d_p)`` (row 0 of the root is unused).  Max-product from the
leaves to the root needs, for every child p and every parent position u, the message

    m_p(u) = max_q  M_p(q) - C_p(q - u),

M_p being p's unary plus its children's messages.  Done naively this costs O(P^2) per edge
(P = H W positions, `brute_message`).  Because C_p is separable, the maximisation splits
into a pass along every row (over q_x) followed by a pass along every column (over q_y),
and each 1-D pass

    D(u) = max_q f(q) - a (q - u)^2 - b (q - u),    q, u in 0..n-1,

is, for a > 0, the lower envelope of the parabolas a (z - q)^2 - f(q) evaluated at
z = u - b / (2a) (complete the square: a t^2 + b t = a (t + b/(2a))^2 - b^2/(4a) with
t = q - u), the generalized distance transform of Felzenszwalb & Huttenlocher (2005,
"Distance transforms of sampled functions", Sec. 3, Algorithm DT(f)) written for a
maximisation and a real-valued shift: O(n) per line, O(P) per edge.  When a = 0 the cost
is linear, f(q) - b q does not depend on u, so one argmax serves every u (O(n)); when
a < 0 the envelope is not defined (an "anti-spring"), and the line is maximised by brute
force, O(n^2) per line, still exact.  Models keep a, c >= 0 by positivity constraints
(Osokin et al. 2016, App. H), so the fast path is the one taken in training.

Every message returns back-pointers (the argmax q of each u, as a flat index), the tree
is decoded from the root down by following them (`pose_max_product`), and values are
recomputed from the argmax (not read off the envelope), so they are exact up to the
rounding of the sum itself.  Ties go to the smallest index.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

# the numba kernels (@njit) keep unannotated signatures: numba compiles them for the types of the
# arguments they are called with, so each `def` carries a type: ignore[no-untyped-def]


# ------------------------------------------------------------------ 1-D transforms
@njit(cache=True, nogil=True)
def _dt1d_envelope(f, a, b, out, arg, v, z):  # type: ignore[no-untyped-def]  # numba kernel
    """D(u) = max_q f(q) - a (q-u)^2 - b (q-u) for a > 0 by the lower envelope (FH 2005, Alg. DT).

    Minimising h(q) + a (z - q)^2 with h = -f: v[0..k] are the parabolas of the envelope,
    z[j]..z[j+1] the interval where v[j] is lowest.  The query points z_u = u - b/(2a)
    increase with u, so one sweep reads them off; the sweep compares the scores
    themselves rather than z_u with z[j], because z_u loses u to rounding when b/(2a) is
    huge (a nearly linear cost), while along the envelope the scores at a fixed u are
    unimodal.  ``v`` (n int64) and ``z`` (n+1 float64) are scratch."""
    n = f.shape[0]
    k = 0
    v[0] = 0
    z[0] = -np.inf
    z[1] = np.inf
    for q in range(1, n):
        while True:
            r = v[k]
            # where the parabolas rooted at q and at v[k] cross (FH 2005, Sec. 3)
            s = ((a * q * q - f[q]) - (a * r * r - f[r])) / (2.0 * a * (q - r))
            if s <= z[k]:
                k -= 1  # v[k] is nowhere lowest any more (z[0] = -inf stops this at k = 0)
                continue
            break
        k += 1
        v[k] = q
        z[k] = s
        z[k + 1] = np.inf
    top = k
    k = 0
    for u in range(n):
        t = v[k] - u
        best = f[v[k]] - a * t * t - b * t
        while k < top:
            t = v[k + 1] - u
            s = f[v[k + 1]] - a * t * t - b * t
            if s > best:  # strict: ties keep the smaller q
                best = s
                k += 1
            else:
                break
        out[u] = best
        arg[u] = v[k]


@njit(cache=True, nogil=True)
def _dt1d_linear(f, b, out, arg):  # type: ignore[no-untyped-def]  # numba kernel
    """a = 0: D(u) = max_q (f(q) - b q) + b u, one argmax for every u."""
    n = f.shape[0]
    best = f[0]
    qb = 0
    for q in range(1, n):
        s = f[q] - b * q
        if s > best:
            best = s
            qb = q
    for u in range(n):
        t = qb - u
        out[u] = f[qb] - b * t
        arg[u] = qb


@njit(cache=True, nogil=True)
def _dt1d_brute(f, a, b, out, arg):  # type: ignore[no-untyped-def]  # numba kernel
    """Any a: O(n^2), the fallback when the envelope is not defined (a < 0)."""
    n = f.shape[0]
    for u in range(n):
        qb = 0
        t = -u
        best = f[0] - a * t * t - b * t
        for q in range(1, n):
            t = q - u
            s = f[q] - a * t * t - b * t
            if s > best:
                best = s
                qb = q
        out[u] = best
        arg[u] = qb


@njit(cache=True, nogil=True)
def _dt1d(f, a, b, out, arg, v, z):  # type: ignore[no-untyped-def]  # numba kernel
    if a > 0.0:
        _dt1d_envelope(f, a, b, out, arg, v, z)
    elif a == 0.0:
        _dt1d_linear(f, b, out, arg)
    else:
        _dt1d_brute(f, a, b, out, arg)


@njit(cache=True, nogil=True)
def _dt2d(M, a, b, c, d, D, bp):  # type: ignore[no-untyped-def]  # numba kernel
    """D[u] = max_q M[q] - (a dx^2 + b dx + c dy^2 + d dy), (dy, dx) = q - u, and bp[u] = flat argmax q.

    Separable: rows first (over q_x, for every q_y), then columns (over q_y)."""
    H, W = M.shape
    n = max(H, W)
    v = np.empty(n, np.int64)
    z = np.empty(n + 1, np.float64)
    T = np.empty((H, W), np.float64)
    ax = np.empty((H, W), np.int64)
    for i in range(H):
        _dt1d(M[i], a, b, T[i], ax[i], v, z)
    col = np.empty(H, np.float64)
    out = np.empty(H, np.float64)
    ay = np.empty(H, np.int64)
    for j in range(W):
        for i in range(H):
            col[i] = T[i, j]
        _dt1d(col, c, d, out, ay, v, z)
        for i in range(H):
            qi = ay[i]
            qj = ax[qi, j]
            D[i, j] = out[i]
            bp[i, j] = qi * W + qj


def distance_transform(M: npt.ArrayLike, coef: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The generalized distance transform for a maximisation, with back-pointers.

    Parameters
    ----------
    M : (H, W) array
        f(q), the score of the child at each grid position q = (row, col).
    coef : 4 floats
        (a, b, c, d) of the cost C(dy, dx) = a dx^2 + b dx + c dy^2 + d dy, where
        (dy, dx) = q - u is the child's offset from the parent position u.  A rest offset
        r is the linear part: a (dx - r)^2 = a dx^2 - 2 a r dx + const.

    Returns
    -------
    D : (H, W) float64
        D[u] = max_q M[q] - C(q - u), exact (O(H W) when a, c >= 0, see the module
        docstring for a < 0 or c < 0).
    bp : (H, W) int64
        The maximising q of each u as a flat index q_row * W + q_col.
    """
    return _message(_dt2d, M, coef)


@njit(cache=True, nogil=True)
def _brute_message(M, a, b, c, d, D, bp):  # type: ignore[no-untyped-def]  # numba kernel
    H, W = M.shape
    for ui in range(H):
        for uj in range(W):
            best = -np.inf
            arg = 0
            for qi in range(H):
                dy = qi - ui
                cy = c * dy * dy + d * dy
                for qj in range(W):
                    dx = qj - uj
                    s = M[qi, qj] - (a * dx * dx + b * dx + cy)
                    if s > best:
                        best = s
                        arg = qi * W + qj
            D[ui, uj] = best
            bp[ui, uj] = arg


def brute_message(M: npt.ArrayLike, coef: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """`distance_transform` by brute force over all pairs of positions, O((H W)^2).

    The reference the tests and the benchmark compare the distance transform with; valid
    for any signs of the coefficients."""
    return _message(_brute_message, M, coef)


def _message(kernel: Any, M: npt.ArrayLike, coef: npt.ArrayLike
             ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Check M and (a, b, c, d), then run one message kernel (transform or brute force) on them."""
    M = np.ascontiguousarray(M, dtype=np.float64)
    if M.ndim != 2 or M.size == 0:
        raise ValueError(f"M must be a non-empty (H, W) array, got shape {M.shape}")
    a, b, c, d = (float(t) for t in np.asarray(coef, dtype=np.float64).reshape(4))
    D = np.empty(M.shape, np.float64)
    bp = np.empty(M.shape, np.int64)
    kernel(M, a, b, c, d, D, bp)
    return D, bp


# ------------------------------------------------------------------ tree max-product
def tree_order(parent: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Parts in breadth-first order from the root (a part after its parent).

    ``parent`` is a validated parent array (exactly one -1, no cycle; see
    `structfw.models.pose.PoseModel`)."""
    parent = np.asarray(parent, dtype=np.int64)
    P = parent.shape[0]
    children: list[list[int]] = [[] for _ in range(P)]
    root = -1
    for p in range(P):
        if parent[p] < 0:
            root = p
        else:
            children[int(parent[p])].append(p)
    order = [root]
    head = 0
    while head < len(order):
        order.extend(children[order[head]])
        head += 1
    return np.asarray(order, dtype=np.int64)


@njit(cache=True, nogil=True)
def _pose_max_product(S, order, parent, coef, brute):  # type: ignore[no-untyped-def]  # numba kernel
    """argmax_y E(y) (module docstring): leaves to root by messages, root to leaves by bp."""
    P, H, W = S.shape
    M = S.copy()
    bp = np.empty((P, H, W), np.int64)
    D = np.empty((H, W), np.float64)
    for t in range(P - 1, 0, -1):
        p = order[t]
        a, b, c, d = coef[p, 0], coef[p, 1], coef[p, 2], coef[p, 3]
        if brute:
            _brute_message(M[p], a, b, c, d, D, bp[p])
        else:
            _dt2d(M[p], a, b, c, d, D, bp[p])
        M[parent[p]] += D
    root = order[0]
    arg = 0
    best = M[root, 0, 0]
    for q in range(1, H * W):
        s = M[root, q // W, q % W]
        if s > best:
            best = s
            arg = q
    flat = np.empty(P, np.int64)
    flat[root] = arg
    for t in range(1, P):
        p = order[t]
        u = flat[parent[p]]
        flat[p] = bp[p, u // W, u % W]
    y = np.empty((P, 2), np.int64)
    for p in range(P):
        y[p, 0] = flat[p] // W
        y[p, 1] = flat[p] % W
    return y


@njit(cache=True, nogil=True)
def pose_energy(S, parent, coef, y):  # type: ignore[no-untyped-def]  # numba kernel
    """E(y) = sum_p S[p, y_p] - sum_{p != root} C_p(y_p - y_parent(p))."""
    s = 0.0
    for p in range(S.shape[0]):
        s += S[p, y[p, 0], y[p, 1]]
        r = parent[p]
        if r >= 0:
            dy = y[p, 0] - y[r, 0]
            dx = y[p, 1] - y[r, 1]
            s -= coef[p, 0] * dx * dx + coef[p, 1] * dx + coef[p, 2] * dy * dy + coef[p, 3] * dy
    return s


def pose_max_product(S: npt.ArrayLike, parent: npt.ArrayLike, coef: npt.ArrayLike,
                     order: npt.ArrayLike | None = None,
                     brute: bool = False) -> tuple[npt.NDArray[np.int64], float]:
    """Exact argmax_y E(y) of a tree of parts (module docstring).

    Parameters
    ----------
    S : (P, H, W) array
        Unary scores S[p, row, col] (loss-augmented ones for the max oracle).
    parent : (P,) int array
        The tree: parent[p] is p's parent, -1 for the one root.
    coef : (P, 4) array
        (a_p, b_p, c_p, d_p) of the spring of part p to its parent (the root's row is
        ignored).
    order : (P,) int array, optional
        `tree_order` of ``parent``, when the caller keeps it.
    brute : bool, default False
        Pass messages by `brute_message` (O((H W)^2) per edge) instead of distance
        transforms: the reference of the tests and benchmarks.

    Returns
    -------
    y : (P, 2) int64
        The maximising positions (row, col) of the parts.
    value : float
        E(y) = max_y E(y).  Costs O(P H W) with the distance transform.
    """
    S = np.ascontiguousarray(S, dtype=np.float64)
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    coef = np.ascontiguousarray(coef, dtype=np.float64)
    if order is None:
        order = tree_order(parent)
    order = np.ascontiguousarray(order, dtype=np.int64)
    y = _pose_max_product(S, order, parent, coef, bool(brute))
    return y, float(pose_energy(S, parent, coef, y))


__all__ = ["distance_transform", "brute_message", "tree_order", "pose_max_product", "pose_energy"]
