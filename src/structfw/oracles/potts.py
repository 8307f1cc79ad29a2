"""Kernels of the graph-labelling models: node scores, Potts energies, exact binary
graph cut, alpha-expansion and sparse joint-feature differences.

Notation (scores are maximised, as in the max oracle of docs/design.md): a graph with
nodes v = 0..V-1, node features x_v in R^F, edges e = (u_e, v_e) with non-negative edge
features f_e in R^Fe, labels y_v in 0..K-1.  The joint feature of both models is

    phi(x, y) = [ sum_v x_v placed in block y_v  ,  - sum_{e : y_u != y_v} f_e ]     (d = K F + Fe)

(the unary part is eq. (7) of the MP-BCFW paper applied per node, as for its HorseSeg
and Stanford set-ups, App. A).  With w = (w_u, w_p) the score is

    S(y) = sum_v U[v, y_v] - sum_e c_e [y_u != y_v],   U[v, k] = ⟨x_v, w_u[k]⟩,
    c_e = ⟨f_e, w_p⟩ (+ a fixed Potts constant),

so pairwise weights w_p >= 0 make every c_e >= 0: maximising S is minimising a Potts
energy with non-negative weights, submodular for K = 2 (exact min cut,
`structfw.oracles.maxflow`) and a metric for K > 2 (alpha-expansion, Boykov,
Veksler & Zabih, PAMI 2001: each move is an exact binary min cut).  Loss augmentation
adds (1/V) [k != y_true_v] to U (normalised Hamming loss, eq. (10) of App. A).
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from .chain import chain_unary_csr, chain_unary_dense
from .maxflow import min_cut_numba


# ------------------------------------------------------------------ node scores
# U[v, k] = <x_v, w_k> (+ 1/V where k != y_true[v] when loss-augmented) is a chain position's unary
# score with the same normalised Hamming augmentation: the chain's kernels serve both
node_scores_dense = chain_unary_dense
node_scores_csr = chain_unary_csr


@njit(cache=True, nogil=True)
def edge_costs(ef, w, off, constant, clip=True):
    """c_e = sum_k ef[e, k] max(w[off + k], 0) + constant (without the max if not clip).

    The clipping is the projection Pi onto w_p >= 0 that the engine applies to the
    iterate (docs/design.md, positivity constraints), so on the engine's w it changes
    nothing; it keeps the cut well defined (a min cut needs c_e >= 0) on any other w."""
    E, Fe = ef.shape
    c = np.empty(E)
    for e in range(E):
        acc = constant
        for k in range(Fe):
            wk = w[off + k]
            if wk > 0.0 or not clip:
                acc += ef[e, k] * wk
        c[e] = acc
    return c


@njit(cache=True, nogil=True)
def potts_score(U, tails, heads, c, y):
    """S(y) = sum_v U[v, y_v] - sum_e c_e [y_u != y_v]."""
    s = 0.0
    for v in range(y.shape[0]):
        s += U[v, y[v]]
    for e in range(tails.shape[0]):
        if y[tails[e]] != y[heads[e]]:
            s -= c[e]
    return s


# ------------------------------------------------------------------ decoding
@njit(cache=True, nogil=True)
def binary_graph_cut(U, tails, heads, c):
    """Exact argmax over y in {0,1}^V of S(y) (K = 2, c >= 0): one min cut of -S."""
    V = U.shape[0]
    cost0 = np.empty(V)
    cost1 = np.empty(V)
    for v in range(V):
        cost0[v] = -U[v, 0]
        cost1[v] = -U[v, 1]
    y, _ = min_cut_numba(cost0, cost1, tails, heads, c, c)
    return y


@njit(cache=True, nogil=True)
def expansion_move(U, tails, heads, c, y, alpha):
    """The best alpha-expansion of y: argmax S(y') over y' with y'_v in {y_v, alpha}.

    Binary variable z_v = 1 switches v to alpha.  In minimisation form the edge energy
    E(z_u, z_v) has A = E(0,0) = c[y_u != y_v], B = E(0,1) = c[y_u != alpha],
    C = E(1,0) = c[alpha != y_v], D = E(1,1) = 0, and decomposes as
    A + (C - A) z_u + (D - C) z_v + (B + C - A - D) [z_u = 0, z_v = 1], the last
    coefficient >= 0 by the triangle inequality of the Potts metric (Boykov et al. 2001,
    and Kolmogorov & Zabih 2004 for the construction)."""
    V = U.shape[0]
    E = tails.shape[0]
    cost0 = np.empty(V)
    cost1 = np.empty(V)
    for v in range(V):
        cost0[v] = -U[v, y[v]]
        cost1[v] = -U[v, alpha]
    fwd = np.zeros(E)
    bwd = np.zeros(E)
    for e in range(E):
        u, v = tails[e], heads[e]
        A = c[e] if y[u] != y[v] else 0.0
        B = c[e] if y[u] != alpha else 0.0
        C = c[e] if y[v] != alpha else 0.0
        cost0[u] += A
        cost1[u] += C
        cost1[v] -= C
        cap = B + C - A
        fwd[e] = cap if cap > 0.0 else 0.0
    z, _ = min_cut_numba(cost0, cost1, tails, heads, fwd, bwd)
    out = y.copy()
    for v in range(V):
        if z[v] == 1:
            out[v] = alpha
    return out


@njit(cache=True, nogil=True)
def alpha_expansion(U, tails, heads, c, y_init, max_cycles):
    """Approximate argmax of the Potts score S by alpha-expansion from ``y_init``.

    Cycles over alpha = 0..K-1, accepting a move only when it raises S by more than a
    relative 1e-12, until a whole cycle changes nothing (then y is a local optimum
    with respect to every expansion move) or ``max_cycles`` cycles ran.  S never
    decreases, so the result scores at least S(y_init).  Returns (y, S(y))."""
    K = U.shape[1]
    y = y_init.copy()
    s = potts_score(U, tails, heads, c, y)
    for _ in range(max_cycles):
        improved = False
        for alpha in range(K):
            z = expansion_move(U, tails, heads, c, y, alpha)
            sz = potts_score(U, tails, heads, c, z)
            if sz > s + 1e-12 * (1.0 + abs(s)):
                y = z
                s = sz
                improved = True
        if not improved:
            break
    return y, s


@njit(cache=True, nogil=True)
def unary_argmax(U):
    V, K = U.shape
    y = np.zeros(V, np.int64)
    for v in range(V):
        for k in range(1, K):
            if U[v, k] > U[v, y[v]]:
                y[v] = k
    return y


# ------------------------------------------------------------ joint features
@njit(cache=True, nogil=True)
def _collect(acc, touched, K, F, ef_acc, off):
    """Sorted non-zeros of the unary accumulator (only touched blocks) + the edge part."""
    n = 0
    for k in range(K):
        if touched[k]:
            n += F
    n += ef_acc.shape[0]
    out_i = np.empty(n, np.int64)
    out_v = np.empty(n)
    m = 0
    for k in range(K):
        if not touched[k]:
            continue
        base = k * F
        for f in range(F):
            val = acc[base + f]
            if val != 0.0:
                out_i[m] = base + f
                out_v[m] = val
                m += 1
    for k in range(ef_acc.shape[0]):
        if ef_acc[k] != 0.0:
            out_i[m] = off + k
            out_v[m] = ef_acc[k]
            m += 1
    return out_i[:m].copy(), out_v[:m].copy()


@njit(cache=True, nogil=True)
def _edge_diff(ef, tails, heads, ya, yb):
    """Edge part of phi(ya) - phi(yb): - sum_e ([ya cut e] - [yb cut e]) f_e; yb < 0 = absent."""
    Fe = ef.shape[1]
    out = np.zeros(Fe)
    has_b = yb.shape[0] > 0 and yb[0] >= 0
    for e in range(tails.shape[0]):
        ca = 1.0 if ya[tails[e]] != ya[heads[e]] else 0.0
        cb = 0.0
        if has_b and yb[tails[e]] != yb[heads[e]]:
            cb = 1.0
        d = cb - ca
        if d != 0.0:
            for k in range(Fe):
                out[k] += d * ef[e, k]
    return out


@njit(cache=True, nogil=True)
def graph_phi_diff_dense(x, ef, tails, heads, ya, yb, K, F):
    """phi(x, ya) - phi(x, yb) as sorted (indices, values), touching only nodes where the
    labellings differ; ``yb`` all -1 means phi(x, ya) alone."""
    V = x.shape[0]
    acc = np.zeros(K * F)
    touched = np.zeros(K, np.bool_)
    for v in range(V):
        a, b = ya[v], yb[v]
        if a == b:
            continue
        touched[a] = True
        for f in range(F):
            acc[a * F + f] += x[v, f]
        if b >= 0:
            touched[b] = True
            for f in range(F):
                acc[b * F + f] -= x[v, f]
    return _collect(acc, touched, K, F, _edge_diff(ef, tails, heads, ya, yb), K * F)


@njit(cache=True, nogil=True)
def graph_phi_diff_csr(indptr, indices, data, ef, tails, heads, ya, yb, K, F):
    """As `graph_phi_diff_dense` for CSR node features (never densified)."""
    V = indptr.shape[0] - 1
    acc = np.zeros(K * F)
    touched = np.zeros(K, np.bool_)
    for v in range(V):
        a, b = ya[v], yb[v]
        if a == b:
            continue
        touched[a] = True
        for t in range(indptr[v], indptr[v + 1]):
            acc[a * F + indices[t]] += data[t]
        if b >= 0:
            touched[b] = True
            for t in range(indptr[v], indptr[v + 1]):
                acc[b * F + indices[t]] -= data[t]
    return _collect(acc, touched, K, F, _edge_diff(ef, tails, heads, ya, yb), K * F)
