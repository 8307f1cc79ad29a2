"""Loopy-graph inference back-ends with certified bounds: TRW-S, the local-polytope LP
relaxation and QPBO (roof duality).

Every back-end maximises the pairwise energy of a labelling y in {0..K-1}^V,

    E(y) = sum_v unary[v, y_v] + sum_e pairwise[e, y_{u_e}, y_{v_e}],        (u_e, v_e) = edges[e]

and has the signature ``backend(unary, edges, pairwise, **options) -> (labels, value, bound)``:
``labels`` (V,) int64, ``value = E(labels)`` recomputed from the labels, and ``bound`` an
upper bound on max_y E(y) (``bound == value`` when the back-end certifies optimality).
``bound - value`` is therefore a certified optimality gap of the returned labelling.

Back-ends
---------
`trws`
    Sequential tree-reweighted max-product (TRW-S; Kolmogorov, "Convergent
    tree-reweighted message passing for energy minimization", PAMI 2006), with the
    paper's monotonic chains, its monotone dual bound and its sequential decoding.
    O(E K^2) per iteration, compiled; the bound is the LP-relaxation dual value of the
    current messages and is valid at every iteration.
`lp_relaxation`
    The local-polytope LP (the relaxation TRW-S solves in the dual) solved exactly by
    HiGHS through ``scipy.optimize.linprog``; labels by rounding the node marginals
    and ICM.  The bound is recomputed from HiGHS's dual values, so it stays a valid
    upper bound whatever the solver's tolerances.
`qpbo` / `qpbo_partial`  (K = 2)
    Roof duality (Hammer, Hansen & Simeone 1984; Boros & Hammer 2002) by one max-flow
    on the doubled graph of Kolmogorov & Rother ("Minimizing nonsubmodular functions
    with graph cuts -- a review", PAMI 2007), on the project's Boykov-Kolmogorov
    max-flow (`structfw.oracles.maxflow.bk_maxflow`).  The labelled nodes are
    persistent (some optimal labelling agrees with all of them); `qpbo` completes the
    others.  Exact for submodular energies.

All three are written for maximisation: the papers minimise, and every formula below is
the paper's applied to -E (max for min, upper for lower bound).
"""
from __future__ import annotations

from typing import Any, Literal, cast, overload

import numpy as np
import numpy.typing as npt
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from .graph import energy
from .maxflow import bk_maxflow

__all__ = ["trws", "lp_relaxation", "qpbo", "qpbo_partial", "graph_energy", "icm"]


# the numba kernels (@njit) keep unannotated signatures: numba compiles them for the types of the
# arguments they are called with, so each `def` carries a type: ignore[no-untyped-def]

#: (unary (V, K) float64, edges (E, 2) int64, pairwise (E, K, K) float64)
_Problem = tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64]]
_Labelling = tuple[npt.NDArray[np.int64], float, float]  # (labels, value, bound)
_LabellingInfo = tuple[npt.NDArray[np.int64], float, float, dict[str, Any]]  # ... and return_info's dict


# ====================================================================== helpers
def _as_problem(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike) -> _Problem:
    # permissive on purpose (an empty graph is a valid problem here); GraphModel validates its graphs
    unary = np.ascontiguousarray(unary, np.float64)
    if unary.ndim != 2:
        raise ValueError(f"unary must be (V, K), got shape {unary.shape}")
    V, K = unary.shape
    edges = np.ascontiguousarray(edges, np.int64).reshape(-1, 2)
    pairwise = np.ascontiguousarray(pairwise, np.float64).reshape(edges.shape[0], K, K)
    return unary, edges, pairwise


#: E(y), the energy every back-end returns the value of (one kernel for the tree and loopy back-ends)
graph_energy = energy


@njit(cache=True, nogil=True)
def _incidence(V, edges):  # type: ignore[no-untyped-def]  # numba kernel
    """CSR incidence lists: the edges at node s are inc[first[s]:first[s+1]]."""
    E = edges.shape[0]
    first = np.zeros(V + 1, np.int64)
    for e in range(E):
        first[edges[e, 0] + 1] += 1
        first[edges[e, 1] + 1] += 1
    for v in range(V):
        first[v + 1] += first[v]
    fill = first[:V].copy()
    inc = np.empty(2 * E, np.int64)
    for e in range(E):
        for side in range(2):
            v = edges[e, side]
            inc[fill[v]] = e
            fill[v] += 1
    return first, inc


@njit(cache=True, nogil=True)
def _icm_core(unary, edges, pairwise, first, inc, y, free, max_sweeps):  # type: ignore[no-untyped-def]  # numba kernel
    """Iterated conditional modes on the nodes with free[v]: each node in turn takes its
    best label given its neighbours; only strict improvements are taken, so E(y) never
    decreases and the loop ends."""
    V, K = unary.shape
    score = np.empty(K)
    for _ in range(max_sweeps):
        changed = False
        for v in range(V):
            if not free[v]:
                continue
            for a in range(K):
                score[a] = unary[v, a]
            for k in range(first[v], first[v + 1]):
                e = inc[k]
                if edges[e, 0] == v:
                    t = y[edges[e, 1]]
                    for a in range(K):
                        score[a] += pairwise[e, a, t]
                else:
                    t = y[edges[e, 0]]
                    for a in range(K):
                        score[a] += pairwise[e, t, a]
            cur = y[v]
            best = cur
            for a in range(K):
                if score[a] > score[best] + 1e-13 * (1.0 + abs(score[best])):
                    best = a
            if best != cur:
                y[v] = best
                changed = True
        if not changed:
            break


def icm(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, y: npt.ArrayLike, max_sweeps: int = 10,
        free: npt.ArrayLike | None = None) -> tuple[npt.NDArray[np.int64], float]:
    """Improve a labelling by iterated conditional modes (Besag 1986); returns (y, E(y)).

    Parameters
    ----------
    unary, edges, pairwise : the energy (module docstring).
    y : (V,) int
        Starting labelling (not modified).
    max_sweeps : int
        Sweeps over the nodes; stops earlier when a sweep changes nothing.
    free : (V,) bool, optional
        Only these nodes may change (default: all).
    """
    unary, edges, pairwise = _as_problem(unary, edges, pairwise)
    V = unary.shape[0]
    y = np.array(y, np.int64, copy=True)
    free = np.ones(V, np.bool_) if free is None else np.ascontiguousarray(free, np.bool_)
    first, inc = _incidence(V, edges)
    _icm_core(unary, edges, pairwise, first, inc, y, free, int(max_sweeps))
    return y, float(graph_energy(unary, edges, pairwise, y))


def _certify(value: float, bound: float, rtol: float = 1e-12) -> float:
    """The bound to report: never below the value (a bound below an attained value can only
    be rounding), and equal to it when the gap is within rounding of the sums."""
    if bound - value <= rtol * max(1.0, abs(value)):
        return value
    return bound


# ====================================================================== TRW-S
@njit(cache=True, nogil=True)
def _trws_pass(unary, edges, pairwise, first, inc, order, pos, n_in, n_out, msg, theta, raw, forward):  # type: ignore[no-untyped-def]  # numba kernel
    """One pass of TRW-S (Kolmogorov 2006), forward or backward, for maximisation.
    Returns the dual bound of the messages at the end of the pass.

    Node s (in order, or reversed) gets the reparametrised potential
    theta_hat_s = theta_s + sum_t M_ts, and sends to every neighbour t later in the pass

        M_st(x_t) = max_{x_s} [ gamma_s theta_hat_s(x_s) - M_ts(x_s) + theta_st(x_s, x_t) ],

    gamma_s = 1 / n_s, where n_s = max(#earlier, #later neighbours) is the number of
    monotonic chains through s (each edge is in exactly one chain; the chains pair s's
    earlier edges with its later ones).

    Bound: put theta_hat_s / n_s on each chain T through s and
    theta_hat_st = theta_st - M_st - M_ts on its edges.  The chains sum to the
    reparametrised energy, so sum_T max theta^T bounds max E (the paper's bound Phi of a
    tree decomposition, by weak duality).  After the pass the max over each chain
    telescopes: every message's normaliser delta_st (the max over x_t of the raw message)
    is the max over x_s of gamma_s theta_hat_s + theta_hat_st, and the last node of a
    chain adds max theta_hat_s / n_s.  The chains ending at s in the pass direction are
    n_s - (#neighbours later in the pass), so

        bound = sum_st delta_st + sum_s (n_s - n_later(s)) / n_s * max theta_hat_s.

    theta_hat_s is final for this pass when s is processed (the messages into s from
    nodes later in the pass change only in the opposite pass), so both terms are
    collected on the fly."""
    V, K = unary.shape
    bound = 0.0
    for step in range(V):
        s = order[step] if forward else order[V - 1 - step]
        ps = pos[s]
        for a in range(K):
            theta[a] = unary[s, a]
        for k in range(first[s], first[s + 1]):
            e = inc[k]
            into = 2 * e + 1 if edges[e, 0] == s else 2 * e
            for a in range(K):
                theta[a] += msg[into, a]
        ns = max(n_in[s], n_out[s], 1)
        later = n_out[s] if forward else n_in[s]
        gamma = 1.0 / ns
        if ns > later:
            mx = theta[0]
            for a in range(1, K):
                if theta[a] > mx:
                    mx = theta[a]
            bound += (ns - later) * gamma * mx
        for k in range(first[s], first[s + 1]):
            e = inc[k]
            s_first = edges[e, 0] == s
            t = edges[e, 1] if s_first else edges[e, 0]
            if (pos[t] > ps) != forward:
                continue
            out = 2 * e if s_first else 2 * e + 1
            back = 2 * e + 1 if s_first else 2 * e
            for a in range(K):
                raw[a] = gamma * theta[a] - msg[back, a]
            delta = -np.inf
            for b in range(K):
                best = -np.inf
                for a in range(K):
                    v = raw[a] + (pairwise[e, a, b] if s_first else pairwise[e, b, a])
                    if v > best:
                        best = v
                msg[out, b] = best
                if best > delta:
                    delta = best
            # normalising keeps the messages bounded; the shift is a constant moved
            # between theta_hat_t and theta_hat_st, so the reparametrisation is unchanged
            for b in range(K):
                msg[out, b] -= delta
            bound += delta
    return bound


@njit(cache=True, nogil=True)
def _trws_decode(unary, edges, pairwise, first, inc, order, pos, msg, y, theta):  # type: ignore[no-untyped-def]  # numba kernel
    """The paper's sequential labelling rule: in order, x_s maximises
    theta_s + sum_{earlier u} theta_us(x_u, .) + sum_{later t} M_ts, the labels of the
    earlier neighbours being fixed already."""
    V, K = unary.shape
    for step in range(V):
        s = order[step]
        ps = pos[s]
        for a in range(K):
            theta[a] = unary[s, a]
        for k in range(first[s], first[s + 1]):
            e = inc[k]
            s_first = edges[e, 0] == s
            t = edges[e, 1] if s_first else edges[e, 0]
            if pos[t] < ps:
                yt = y[t]
                for a in range(K):
                    theta[a] += pairwise[e, a, yt] if s_first else pairwise[e, yt, a]
            else:
                into = 2 * e + 1 if s_first else 2 * e
                for a in range(K):
                    theta[a] += msg[into, a]
        best = 0
        for a in range(1, K):
            if theta[a] > theta[best]:
                best = a
        y[s] = best


@njit(cache=True, nogil=True)
def _trws_core(unary, edges, pairwise, order, max_iter, tol, icm_sweeps):  # type: ignore[no-untyped-def]  # numba kernel
    V, K = unary.shape
    E = edges.shape[0]
    first, inc = _incidence(V, edges)
    pos = np.empty(V, np.int64)
    for i in range(V):
        pos[order[i]] = i
    n_in = np.zeros(V, np.int64)
    n_out = np.zeros(V, np.int64)
    for e in range(E):
        u, v = edges[e, 0], edges[e, 1]
        if pos[u] < pos[v]:
            n_out[u] += 1
            n_in[v] += 1
        else:
            n_out[v] += 1
            n_in[u] += 1
    msg = np.zeros((2 * E, K))
    theta = np.empty(K)
    raw = np.empty(K)
    y = np.zeros(V, np.int64)
    best_y = np.zeros(V, np.int64)
    best_val = -np.inf
    bound = np.inf
    free = np.ones(V, np.bool_)
    history = np.empty(max(max_iter, 0))
    it = 0
    while it < max_iter:
        it += 1
        b_fwd = _trws_pass(unary, edges, pairwise, first, inc, order, pos, n_in, n_out, msg, theta, raw, True)
        b_bwd = _trws_pass(unary, edges, pairwise, first, inc, order, pos, n_in, n_out, msg, theta, raw, False)
        prev = bound
        # each pass's value is a valid bound by itself; the paper proves them monotone, the
        # running minimum makes the reported sequence monotone under rounding too
        bound = min(bound, b_fwd, b_bwd)
        history[it - 1] = bound
        _trws_decode(unary, edges, pairwise, first, inc, order, pos, msg, y, theta)
        if icm_sweeps > 0:
            _icm_core(unary, edges, pairwise, first, inc, y, free, icm_sweeps)
        val = graph_energy(unary, edges, pairwise, y)
        if val > best_val:
            best_val = val
            best_y[:] = y
        scale = max(abs(bound), abs(best_val), 1e-300)
        if bound - best_val <= 1e-12 * max(1.0, abs(best_val)):
            break
        if prev - bound <= tol * scale:
            break
    return best_y, best_val, bound, history[:it]


@overload
def trws(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, max_iter: int = ..., tol: float = ...,
         order: npt.ArrayLike | None = ..., icm_sweeps: int = ..., return_info: Literal[False] = ...) -> _Labelling: ...
@overload
def trws(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, max_iter: int = ..., tol: float = ...,
         order: npt.ArrayLike | None = ..., icm_sweeps: int = ..., *, return_info: Literal[True]) -> _LabellingInfo: ...
@overload
def trws(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, max_iter: int = ..., tol: float = ...,
         order: npt.ArrayLike | None = ..., icm_sweeps: int = ...,
         return_info: bool = ...) -> _Labelling | _LabellingInfo: ...
def trws(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, max_iter: int = 100, tol: float = 1e-6,
         order: npt.ArrayLike | None = None, icm_sweeps: int = 0,
         return_info: bool = False) -> _Labelling | _LabellingInfo:
    """Approximate argmax of E by sequential tree-reweighted max-product (TRW-S).

    Kolmogorov, "Convergent tree-reweighted message passing for energy minimization",
    PAMI 28(10), 2006: the TRW-S algorithm with monotonic chains, its lower bound
    Phi(theta) of the chain decomposition evaluated at the end of each pass (see
    `_trws_pass`), and its sequential labelling rule, all for maximisation (the paper
    applied to -E).

    Parameters
    ----------
    unary : (V, K) float64
    edges : (E, 2) int64
        Edges (u, v), u != v, no duplicates (not checked here).
    pairwise : (E, K, K) float64
        pairwise[e, a, b] for y_u = a, y_v = b.
    max_iter : int
        Iterations (one forward and one backward pass each).
    tol : float
        Stop when an iteration lowers the bound by at most ``tol`` relative to
        max(|bound|, |value|), or when the bound meets the value (certified optimum).
    order : (V,) int, optional
        The node order of the monotonic chains (default 0..V-1, row-major on a grid
        as in the paper's experiments).
    icm_sweeps : int
        ICM sweeps applied to each decoded labelling (0 = the paper's decoding only).
    return_info : bool
        Also return a dict: ``iterations`` run and ``bound_history`` (the bound after
        each iteration).

    Returns
    -------
    labels : (V,) int64
        The best decoded labelling over the iterations.
    value : float
        E(labels).
    bound : float
        Upper bound on max_y E(y): the dual value of the LP relaxation at the final
        messages (valid at every iteration, non-increasing); ``bound == value`` when
        the gap closed to rounding (then ``labels`` is a certified maximiser).

    Notes
    -----
    Cost O(E K^2) time and O(E K) memory per iteration.  Exact on trees at
    convergence (the LP relaxation is tight there).  On loopy graphs the fixed point
    satisfies weak tree agreement, whose bound can be above the LP optimum
    (`lp_relaxation`) on some instances.
    """
    unary, edges, pairwise = _as_problem(unary, edges, pairwise)
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    V = unary.shape[0]
    if V == 0:
        out = (np.zeros(0, np.int64), 0.0, 0.0)
        return (*out, dict(iterations=0, bound_history=np.zeros(0))) if return_info else out
    order = np.arange(V, dtype=np.int64) if order is None else np.ascontiguousarray(order, np.int64)
    if order.shape != (V,) or not np.array_equal(np.sort(order), np.arange(V)):
        raise ValueError("order must be a permutation of 0..V-1")
    y, val, bound, history = _trws_core(unary, edges, pairwise, order, int(max_iter), float(tol),
                                        int(icm_sweeps))
    val = float(val)
    out = (y, val, _certify(val, float(bound)))
    return (*out, dict(iterations=int(history.size), bound_history=history)) if return_info else out


# ====================================================================== LP relaxation
# Solver choice, measured with ``python -m structfw.oracles.loopy`` (`_measure_lp_solvers`):
# the same sparse model solved by scipy 1.17.1's ``linprog(method="highs")`` (HiGHS 1.12)
# and by highspy 1.16.0 called directly (HiGHS's simplex, and its interior point method),
# median of 3 solves in seconds, 2 cores shared with other jobs; three runs, the first one
# on a busier machine:
#
#     grid K=3                     scipy linprog(highs)   highspy simplex      highspy ipm
#     10 x 10 (V=100,  1,920 vars)  0.079 / 0.023 / 0.026  0.030 / 0.020 / 0.021  0.057 / 0.034 / 0.036
#     32 x 32 (V=1024, 20,928 vars) 0.765 / 0.497 / 0.449  0.527 / 0.423 / 0.616  1.149 / 1.381 / 1.115
#
# Every solver reached the same LP optimum.  Both libraries run the same dual simplex;
# highspy saves only scipy's input checks and conversions.  It was 1.1-1.5x faster on the
# 1,024-node grid in two runs and slower in the third, so it is not much faster.  The
# back-end therefore uses scipy, which is already a dependency, and highspy stays out of
# the dependencies.  The interior point method was slower than simplex at both sizes.
def _lp_model(unary: npt.NDArray[np.float64], edges: npt.NDArray[np.int64], pairwise: npt.NDArray[np.float64]
              ) -> tuple[npt.NDArray[np.float64], Any, npt.NDArray[np.float64]]:
    """The local polytope as (c, A_eq, b_eq) for linprog's minimisation of -E.

    Variables: mu_v(a) at v*K + a, then mu_e(a, b) at V*K + e*K*K + a*K + b, all >= 0.
    Rows: sum_a mu_v(a) = 1 (rows 0..V-1), then for edge e and label a the two
    marginalisation constraints sum_b mu_e(a, b) - mu_u(a) = 0 (row V + 2eK + a) and
    sum_a' mu_e(a', a) - mu_v(a) = 0 (row V + 2eK + K + a)."""
    import scipy.sparse as sp

    V, K = unary.shape
    E = edges.shape[0]
    nv = V * K
    n = nv + E * K * K
    c = -np.concatenate([unary.ravel(), pairwise.ravel()])
    rows_n = np.repeat(np.arange(V), K)
    cols_n = np.arange(nv)
    e_idx = np.repeat(np.arange(E), K * K)
    a_idx = np.tile(np.repeat(np.arange(K), K), E)
    b_idx = np.tile(np.tile(np.arange(K), K), E)
    col_pair = nv + np.arange(E * K * K)
    row_u = V + 2 * K * e_idx + a_idx
    row_v = V + 2 * K * e_idx + K + b_idx
    e_lab = np.repeat(np.arange(E), K)
    lab = np.tile(np.arange(K), E)
    row_mu_u = V + 2 * K * e_lab + lab
    row_mu_v = V + 2 * K * e_lab + K + lab
    col_mu_u = edges[e_lab, 0] * K + lab
    col_mu_v = edges[e_lab, 1] * K + lab
    rows = np.concatenate([rows_n, row_u, row_v, row_mu_u, row_mu_v])
    cols = np.concatenate([cols_n, col_pair, col_pair, col_mu_u, col_mu_v])
    data = np.concatenate([np.ones(nv + 2 * E * K * K), -np.ones(2 * E * K)])
    m = V + 2 * E * K
    A = sp.csr_matrix((data, (rows, cols)), shape=(m, n))
    b = np.zeros(m)
    b[:V] = 1.0
    return c, A, b


def _dual_bound(unary: npt.NDArray[np.float64], edges: npt.NDArray[np.int64], pairwise: npt.NDArray[np.float64],
                A: Any, c: npt.NDArray[np.float64], y_dual: npt.ArrayLike) -> float:
    """Upper bound on max E from any multipliers of the marginalisation rows.

    For every lambda, c~ = c - A_pair^T lambda equals c on the local polytope (the rows
    are equalities with zero right-hand side), and sum_v min_a c~_v + sum_e min c~_e
    is at most min c~ . mu over it (each mu_v and each mu_e sums to one).  So the
    negative is an upper bound on the LP optimum and on max E, whatever the accuracy of
    lambda; with the solver's optimal duals it is the LP optimum (strong duality)."""
    V, K = unary.shape
    E = edges.shape[0]
    lam = np.array(y_dual, np.float64, copy=True)
    lam[:V] = 0.0
    red = c - A.T @ lam
    node = red[: V * K].reshape(V, K).min(axis=1).sum() if V else 0.0
    pair = red[V * K:].reshape(E, K * K).min(axis=1).sum() if E else 0.0
    return -float(node + pair)


@overload
def lp_relaxation(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, icm_sweeps: int = ...,
                  integral_tol: float = ..., return_info: Literal[False] = ...) -> _Labelling: ...
@overload
def lp_relaxation(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, icm_sweeps: int = ...,
                  integral_tol: float = ..., *, return_info: Literal[True]) -> _LabellingInfo: ...
@overload
def lp_relaxation(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, icm_sweeps: int = ...,
                  integral_tol: float = ..., return_info: bool = ...) -> _Labelling | _LabellingInfo: ...
def lp_relaxation(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, icm_sweeps: int = 5,
                  integral_tol: float = 1e-6, return_info: bool = False) -> _Labelling | _LabellingInfo:
    """Solve the local-polytope LP relaxation of max E with HiGHS and round it.

    The relaxation (e.g. Wainwright, Jaakkola & Willsky 2005; Werner 2007) maximises
    sum_v ⟨theta_v, mu_v⟩ + sum_e ⟨theta_e, mu_e⟩ over node and edge marginals with
    sum_a mu_v(a) = 1 and the edge marginals summing to the node marginals
    (`_lp_model`), by ``scipy.optimize.linprog(method="highs")`` on sparse constraints.

    Parameters
    ----------
    unary, edges, pairwise : the energy (module docstring).
    icm_sweeps : int
        ICM sweeps after rounding (never lowers the value; 0 = plain rounding).
    integral_tol : float
        Node marginals within this of 0/1 count as integral.
    return_info : bool
        Also return a dict: the LP optimum ``lp_value`` as HiGHS reports it,
        ``integral``, solver ``status`` and ``message``.

    Returns
    -------
    labels : (V,) int64
        argmax of each node's marginal, then ICM.
    value : float
        E(labels).
    bound : float
        The LP optimum, an upper bound on max E, recomputed from HiGHS's dual values
        (`_dual_bound`) so that solver tolerances cannot make it invalid; ``bound ==
        value`` when the LP solution is integral (the rounding is then a maximiser).

    Notes
    -----
    V K + E K^2 variables and V + 2 E K equality rows: exact (LP optimum = max E) on
    trees and whenever the relaxation is tight, e.g. binary submodular energies; on
    loopy graphs its bound is at least as tight as TRW-S's.  Cost: an LP solve, much
    slower than `trws` on large graphs (see ``structfw bench graph-inference``).
    """
    from scipy.optimize import linprog

    unary, edges, pairwise = _as_problem(unary, edges, pairwise)
    V, K = unary.shape
    if V == 0:
        out = (np.zeros(0, np.int64), 0.0, 0.0)
        return (*out, dict(lp_value=0.0, integral=True, status=0, message="empty")) if return_info else out
    c, A, b = _lp_model(unary, edges, pairwise)
    res = linprog(c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"HiGHS failed on the LP relaxation: {res.message}")
    mu = res.x[: V * K].reshape(V, K)
    y = np.ascontiguousarray(mu.argmax(axis=1), np.int64)
    integral = bool(np.all(mu.max(axis=1) >= 1.0 - integral_tol))
    if icm_sweeps > 0:
        y, value = icm(unary, edges, pairwise, y, icm_sweeps)
    else:
        value = float(graph_energy(unary, edges, pairwise, y))
    lp_value = -float(res.fun)
    bound = _dual_bound(unary, edges, pairwise, A, c, res.eqlin.marginals)
    # an integral LP optimum is a labelling whose value is the LP optimum: certified
    # exact (the guard keeps a near-integral point of a loose LP from being called so)
    if integral and value >= lp_value - 1e-7 * max(1.0, abs(lp_value)):
        bound = value
    bound = _certify(value, max(bound, value))
    out = (y, value, bound)
    info = dict(lp_value=lp_value, integral=integral, status=int(res.status), message=str(res.message))
    return (*out, info) if return_info else out


# ====================================================================== QPBO
@njit(cache=True, nogil=True)
def _qpbo_graph(unary, edges, pairwise):  # type: ignore[no-untyped-def]  # numba kernel
    """The doubled graph of Kolmogorov & Rother (2007) for F = -E.

    Per edge, with A..D = F(0,0), F(0,1), F(1,0), F(1,1):
      submodular (A + D <= B + C): F = A + (C - A) x_u + (D - C) x_v + w [x_u = 0, x_v = 1],
        w = B + C - A - D >= 0: arcs u -> v and v~ -> u~ of capacity w / 2;
      otherwise: F = A + (C - A) x_u + (B - A) x_v + g [x_u = 1, x_v = 1],
        g = A + D - B - C > 0, written g [x_u = 1, x~_v = 0] and g [x_v = 1, x~_u = 0]:
        arcs v~ -> u and u~ -> v of capacity g / 2.
    Unary F_v(0) + d x_v (d = F_v(1) - F_v(0), edge terms included) is split as
    d/2 on x_v = 1 and d/2 on x~_v = 0 (node v~ = V + v stands for 1 - x_v); source
    side means label 0.  The cut of a consistent pair (x, 1 - x) costs F(x) - const, so
    the min cut plus ``const`` is the roof dual, a lower bound on min F (upper bound on
    max E after the sign)."""
    V = unary.shape[0]
    E = edges.shape[0]
    d = np.empty(V)
    const = 0.0
    for v in range(V):
        d[v] = unary[v, 0] - unary[v, 1]  # F_v(1) - F_v(0), F = -E
        const -= unary[v, 0]
    tails = np.empty(2 * E, np.int64)
    heads = np.empty(2 * E, np.int64)
    cap = np.empty(2 * E)
    for e in range(E):
        u, v = edges[e, 0], edges[e, 1]
        A = -pairwise[e, 0, 0]
        B = -pairwise[e, 0, 1]
        C = -pairwise[e, 1, 0]
        D = -pairwise[e, 1, 1]
        const += A
        w = B + C - A - D
        if w >= 0.0:
            d[u] += C - A
            d[v] += D - C
            tails[2 * e] = u
            heads[2 * e] = v
            tails[2 * e + 1] = V + v
            heads[2 * e + 1] = V + u
            cap[2 * e] = 0.5 * w
            cap[2 * e + 1] = 0.5 * w
        else:
            d[u] += C - A
            d[v] += B - A
            tails[2 * e] = V + v
            heads[2 * e] = u
            tails[2 * e + 1] = V + u
            heads[2 * e + 1] = v
            cap[2 * e] = -0.5 * w
            cap[2 * e + 1] = -0.5 * w
    terminal = np.empty(2 * V)
    for v in range(V):
        # d > 0: s -> v and v~ -> t (cut when x_v = 1); d < 0: the constant takes d
        # and v -> t, s -> v~ carry |d| / 2 (cut when x_v = 0)
        terminal[v] = 0.5 * d[v]
        terminal[V + v] = -0.5 * d[v]
        if d[v] < 0.0:
            const += d[v]
    return tails, heads, cap, terminal, const


@njit(cache=True, nogil=True)
def _qpbo_core(unary, edges, pairwise):  # type: ignore[no-untyped-def]  # numba kernel
    V = unary.shape[0]
    tails, heads, cap, terminal, const = _qpbo_graph(unary, edges, pairwise)
    flow, cut = bk_maxflow(2 * V, tails, heads, cap, np.zeros(cap.shape[0]), terminal)
    x = np.full(V, -1, np.int64)
    for v in range(V):
        if cut[v] != cut[V + v]:
            x[v] = cut[v]
    submodular = True
    for e in range(edges.shape[0]):
        if pairwise[e, 0, 0] + pairwise[e, 1, 1] < pairwise[e, 0, 1] + pairwise[e, 1, 0]:
            submodular = False
            break
    # any feasible flow is at most the min cut (weak duality), so the flow, not the
    # cut's recomputed capacity, keeps the bound valid under rounding
    return x, -(const + flow), cut[:V].copy(), submodular


def qpbo_partial(unary: npt.ArrayLike, edges: npt.ArrayLike,
                 pairwise: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], float]:
    """Roof-dual partial labelling of a binary energy (QPBO), with its bound.

    Kolmogorov & Rother, "Minimizing nonsubmodular functions with graph cuts -- a
    review", PAMI 29(7), 2007: one max-flow on the doubled graph
    (`_qpbo_graph`) solved by `structfw.oracles.maxflow.bk_maxflow`.

    Parameters
    ----------
    unary : (V, 2) float64
    edges : (E, 2) int64
    pairwise : (E, 2, 2) float64

    Returns
    -------
    partial : (V,) int64
        0 or 1 for the labelled nodes, -1 for the unlabelled ones.  Persistency (weak
        autarky, the persistency property of the review): for every labelling z, replacing z's
        labels by ``partial``'s on the labelled nodes does not lower E, so some
        maximiser of E agrees with all labelled nodes at once.
    bound : float
        The roof dual: an upper bound on max E (= max E when every node is labelled).
        Every node is labelled when the energy is submodular (pairwise[e,0,0] +
        pairwise[e,1,1] >= pairwise[e,0,1] + pairwise[e,1,0] for all e) and the
        maximiser is unique.
    """
    unary, edges, pairwise = _as_problem(unary, edges, pairwise)
    if unary.shape[1] != 2:
        raise ValueError(f"QPBO needs K = 2 labels, got K = {unary.shape[1]}")
    x, bound, _, _ = _qpbo_core(unary, edges, pairwise)
    return x, float(bound) + 0.0  # + 0.0: no -0.0


@njit(cache=True, nogil=True)
def _binary_exhaustive(unary, edges, pairwise):  # type: ignore[no-untyped-def]  # numba kernel
    """max E over {0,1}^V by a Gray-code walk: each step flips one node and updates E by
    its incident terms, so 2^V steps of O(degree)."""
    V = unary.shape[0]
    first, inc = _incidence(V, edges)
    y = np.zeros(V, np.int64)
    val = graph_energy(unary, edges, pairwise, y)
    best = val
    best_y = y.copy()
    for i in range(1, 1 << V):
        # the bit that changes between Gray codes i-1 and i is the lowest set bit of i
        v = 0
        while not (i >> v) & 1:
            v += 1
        old = y[v]
        new = 1 - old
        diff = unary[v, new] - unary[v, old]
        for k in range(first[v], first[v + 1]):
            e = inc[k]
            if edges[e, 0] == v:
                t = y[edges[e, 1]]
                diff += pairwise[e, new, t] - pairwise[e, old, t]
            else:
                t = y[edges[e, 0]]
                diff += pairwise[e, t, new] - pairwise[e, t, old]
        y[v] = new
        val += diff
        if val > best:
            best = val
            best_y[:] = y
    return best_y


def _fixed_reduction(unary: npt.NDArray[np.float64], edges: npt.NDArray[np.int64], pairwise: npt.NDArray[np.float64],
                     x: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64],
                                                        npt.NDArray[np.int64], npt.NDArray[np.float64], float]:
    """The energy of the unlabelled nodes (x == -1) with the labelled ones fixed:
    (nodes, unary_r, edges_r, pairwise_r, const) with E(z) = const + E_r(z[nodes])."""
    free = x < 0
    nodes = np.flatnonzero(free)
    local = np.full(x.shape[0], -1, np.int64)
    local[nodes] = np.arange(nodes.size)
    u, v = edges[:, 0], edges[:, 1]
    fu, fv = free[u], free[v]
    const = float(unary[~free, x[~free]].sum())
    both_fixed = ~fu & ~fv
    const += float(pairwise[both_fixed, x[u[both_fixed]], x[v[both_fixed]]].sum())
    unary_r = unary[nodes].copy()
    m = fu & ~fv  # free tail, fixed head: its row at the head's label
    np.add.at(unary_r, local[u[m]], pairwise[m, :, x[v[m]]])
    m = ~fu & fv
    np.add.at(unary_r, local[v[m]], pairwise[m, x[u[m]], :])
    both = fu & fv
    edges_r = np.stack([local[u[both]], local[v[both]]], axis=1).astype(np.int64).reshape(-1, 2)
    return nodes, unary_r, edges_r, np.ascontiguousarray(pairwise[both]), const


@overload
def qpbo(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, exhaustive_max: int = ...,
         trws_iter: int = ..., icm_sweeps: int = ..., return_info: Literal[False] = ...) -> _Labelling: ...
@overload
def qpbo(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, exhaustive_max: int = ...,
         trws_iter: int = ..., icm_sweeps: int = ..., *, return_info: Literal[True]) -> _LabellingInfo: ...
@overload
def qpbo(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, exhaustive_max: int = ...,
         trws_iter: int = ..., icm_sweeps: int = ..., return_info: bool = ...) -> _Labelling | _LabellingInfo: ...
def qpbo(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, exhaustive_max: int = 16,
         trws_iter: int = 100, icm_sweeps: int = 10, return_info: bool = False) -> _Labelling | _LabellingInfo:
    """argmax of a binary energy by QPBO, completed on the unlabelled nodes.

    `qpbo_partial` labels the persistent nodes.  When the energy is submodular the
    unlabelled nodes are ties, and the cut's own labels of x are a maximiser.  Otherwise,
    with the labelled nodes fixed, the unlabelled nodes form a reduced energy whose connected components are independent and whose max plus
    the fixed part is max E (persistency).  Each component of at most
    ``exhaustive_max`` nodes is solved exactly by exhaustive search (Gray code, 2^n
    steps); a larger one by `trws` followed by ICM over it.

    Parameters
    ----------
    unary : (V, 2) float64
    edges : (E, 2) int64
    pairwise : (E, 2, 2) float64
    exhaustive_max : int
        Largest unlabelled component solved by exhaustive search.
    trws_iter, icm_sweeps : int
        Iterations of `trws` and ICM sweeps for the larger components.
    return_info : bool
        Also return a dict: ``n_unlabelled``, ``components`` (sizes), ``roof_bound``.

    Returns
    -------
    labels : (V,) int64
    value : float
        E(labels).
    bound : float
        min(roof dual, fixed part + the components' bounds) (exhaustive components
        contribute their max, the others their TRW-S bound); ``bound == value`` when
        every unlabelled component was solved exhaustively or the energy is submodular,
        in particular when QPBO labels every node.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    unary, edges, pairwise = _as_problem(unary, edges, pairwise)
    if unary.shape[1] != 2:
        raise ValueError(f"QPBO needs K = 2 labels, got K = {unary.shape[1]}")
    x, roof, cut_x, submodular = _qpbo_core(unary, edges, pairwise)
    roof = float(roof) + 0.0
    y = x.copy()
    exact = True
    sizes = []
    bound_parts = None
    if submodular and np.any(x < 0):
        # no arc joins the two copies of a submodular energy's doubled graph, so the copy
        # of x alone is a minimum cut of -E: a maximiser (the nodes left unlabelled are
        # ties between maximisers)
        y = cut_x
    elif np.any(x < 0):
        nodes, ur, er, pr, const = _fixed_reduction(unary, edges, pairwise, x)
        n = nodes.size
        g = coo_matrix((np.ones(er.shape[0]), (er[:, 0], er[:, 1])), shape=(n, n))
        ncomp, comp = connected_components(g, directed=False)
        comp_order = np.argsort(comp, kind="stable")
        starts = np.searchsorted(comp[comp_order], np.arange(ncomp + 1))
        edge_comp = comp[er[:, 0]]
        edge_order = np.argsort(edge_comp, kind="stable")
        edge_starts = np.searchsorted(edge_comp[edge_order], np.arange(ncomp + 1))
        local = np.empty(n, np.int64)
        z = np.zeros(n, np.int64)
        bound_parts = const
        for c in range(ncomp):
            members = comp_order[starts[c]:starts[c + 1]]
            local[members] = np.arange(members.size)
            ce = edge_order[edge_starts[c]:edge_starts[c + 1]]
            cu = np.ascontiguousarray(ur[members])
            cedges = np.ascontiguousarray(local[er[ce]]).reshape(-1, 2)
            cpair = np.ascontiguousarray(pr[ce])
            sizes.append(int(members.size))
            if members.size <= exhaustive_max:
                zc = _binary_exhaustive(cu, cedges, cpair)
                bound_parts += float(graph_energy(cu, cedges, cpair, zc))
            else:
                exact = False
                zc, _, cb = trws(cu, cedges, cpair, max_iter=trws_iter, icm_sweeps=icm_sweeps)
                zc, _ = icm(cu, cedges, cpair, zc, icm_sweeps)
                bound_parts += cb
            z[members] = zc
        y[nodes] = z
    value = float(graph_energy(unary, edges, pairwise, y))
    if exact:
        bound = value
    else:
        # exact is False only after the components were solved, which set bound_parts
        bound = _certify(value, max(min(roof, cast(float, bound_parts)), value))
    out = (y, value, bound)
    info = dict(n_unlabelled=int(np.sum(x < 0)), components=sizes, roof_bound=roof)
    return (*out, info) if return_info else out


# ====================================================================== measurement
def _grid_problem(h: int, w: int, K: int, seed: int) -> _Problem:
    """A random h x w 4-connected grid energy (Gaussian unaries and pairwise tables)."""
    rng = np.random.default_rng(seed)
    idx = np.arange(h * w).reshape(h, w)
    edges = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                            np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)]).astype(np.int64)
    unary = rng.normal(size=(h * w, K))
    pairwise = rng.normal(size=(edges.shape[0], K, K))
    return unary, edges, pairwise


def _measure_lp_solvers(repeats: int = 3) -> None:  # pragma: no cover - measurement helper
    """Seconds per LP solve: scipy's linprog(highs) against highspy (simplex and IPM)."""
    import time

    from scipy.optimize import linprog

    try:
        import highspy
    except ImportError:
        highspy = None  # type: ignore[assignment, unused-ignore]  # optional: a module where installed, else Any
    for h, w in ((10, 10), (32, 32)):
        unary, edges, pairwise = _grid_problem(h, w, 3, 0)
        c, A, b = _lp_model(unary, edges, pairwise)
        row = {}
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            res = linprog(c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
            ts.append(time.perf_counter() - t0)
        row["scipy"] = (np.median(ts), -res.fun)
        if highspy is not None:
            Acsc = A.tocsc()
            for solver in ("simplex", "ipm"):
                ts = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    hs = highspy.Highs()
                    hs.setOptionValue("output_flag", False)
                    hs.setOptionValue("solver", solver)
                    lp = highspy.HighsLp()
                    lp.num_col_ = A.shape[1]
                    lp.num_row_ = A.shape[0]
                    lp.col_cost_ = c
                    lp.col_lower_ = np.zeros(A.shape[1])
                    lp.col_upper_ = np.full(A.shape[1], highspy.kHighsInf)
                    lp.row_lower_ = b
                    lp.row_upper_ = b
                    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
                    lp.a_matrix_.start_ = Acsc.indptr
                    lp.a_matrix_.index_ = Acsc.indices
                    lp.a_matrix_.value_ = Acsc.data
                    hs.passModel(lp)
                    hs.run()
                    ts.append(time.perf_counter() - t0)
                row[f"highspy-{solver}"] = (np.median(ts), -hs.getInfo().objective_function_value)
        print(f"grid {h}x{w} K=3 (V={h * w}, vars={A.shape[1]}, rows={A.shape[0]}): "
              + "; ".join(f"{k} {t:.3f} s (LP {v:.6f})" for k, (t, v) in row.items()))


if __name__ == "__main__":  # pragma: no cover
    _measure_lp_solvers()
