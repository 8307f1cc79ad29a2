"""Inference on general pairwise graphs: graph checks, exact tree max-product and
sum-product, and brute force for tiny graphs.  Kernels numba-compiled.

The shared inference interface (every back-end, here and in `structfw.oracles.loopy`)
maximises the energy of a labelling y in {0..K-1}^V,

    E(y) = sum_v unary[v, y_v] + sum_e pairwise[e, y_{u_e}, y_{v_e}],

with ``unary`` float64 (V, K), ``edges`` int64 (E, 2) rows (u_e, v_e), u_e != v_e, and
``pairwise`` float64 (E, K, K) indexed [e, label of u_e, label of v_e].  A back-end is a
function ``backend(unary, edges, pairwise, **options) -> (labels, value, bound)``:
labels int64 (V,), value = E(labels), bound an upper bound on max_y E(y) (equal to value
for the exact back-ends, +inf when a back-end has none).

On a forest max_y E(y) is solved exactly by max-product (dynamic programming from the
leaves to a root of each tree, Pearl 1988; Viterbi is the chain case) in O(E K^2), and the
Gibbs distribution p(y) ∝ exp(E(y) / T) by sum-product in the same time.  Both take a
`TreeSchedule` (a BFS order with parents), which depends only on the graph, so the
models compute it once per training graph (`forest_schedule`) and pass it to every call.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

#: (unary (V, K) float64, edges (E, 2) int64, pairwise (E, K, K) float64) in the kernels' layout
_Potentials = tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64]]

# the numba kernels (@njit) keep unannotated signatures: numba compiles them for the types of the
# arguments they are called with, so each `def` carries a type: ignore[no-untyped-def]

#: largest K^V that `exhaustive` enumerates
EXHAUSTIVE_LIMIT = 2 ** 20


class TreeSchedule(NamedTuple):
    """Message schedule of a forest (see `forest_schedule`).

    order : (V,) int64, nodes in breadth-first order, each tree after the previous one
        (a node always comes after its parent)
    parent : (V,) int64, the parent of each node, -1 for the root of its tree
    parent_edge : (V,) int64, the index of the edge to the parent, -1 for roots
    """

    order: npt.NDArray[np.int64]
    parent: npt.NDArray[np.int64]
    parent_edge: npt.NDArray[np.int64]


# ------------------------------------------------------------------ graph checks
def check_graph(V: int, edges: npt.ArrayLike, name: str = "edges") -> npt.NDArray[np.int64]:
    """Validate a graph on nodes 0..V-1 and return its edges as C-contiguous int64 (E, 2).

    Refused with a ValueError naming ``name`` and the offending row: a shape other than
    (E, 2), non-integer entries, nodes outside 0..V-1, self-loops, and an edge given twice
    (as (u, v) or as (v, u): one pairwise term per pair of nodes).
    """
    try:
        e = np.asarray(edges)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name} could not be converted to an array: {exc}") from exc
    if e.size == 0 and (e.ndim != 2 or e.shape[1] != 2):
        e = e.reshape(0, 2)  # [] and np.empty(0) are the edgeless graph
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"{name} must have shape (E, 2), got {e.shape}")
    if e.size and not (np.issubdtype(e.dtype, np.integer) or e.dtype == np.bool_):
        raise ValueError(f"{name} must hold integer node indices, got dtype {e.dtype}")
    e = np.ascontiguousarray(e, dtype=np.int64)
    if e.shape[0] == 0:
        return e
    bad = np.flatnonzero(((e < 0) | (e >= V)).any(axis=1))
    if bad.size:
        j = int(bad[0])
        node = int(e[j, 0]) if not 0 <= e[j, 0] < V else int(e[j, 1])
        raise ValueError(f"{name}[{j}] = ({e[j, 0]}, {e[j, 1]}) refers to node {node}, "
                         f"outside 0..{V - 1} (V = {V} nodes)")
    loops = np.flatnonzero(e[:, 0] == e[:, 1])
    if loops.size:
        j = int(loops[0])
        raise ValueError(f"{name}[{j}] = ({e[j, 0]}, {e[j, 1]}) is a self-loop")
    # an unordered pair as one integer: equal keys are the same pair of nodes
    key = np.minimum(e[:, 0], e[:, 1]) * V + np.maximum(e[:, 0], e[:, 1])
    order = np.argsort(key, kind="stable")
    dup = np.flatnonzero(key[order[1:]] == key[order[:-1]])
    if dup.size:
        # report the later row of the first repeated pair it holds
        pairs = [(int(order[t + 1]), int(order[t])) for t in dup]
        j, first = min(pairs)
        row = name.rsplit(": ", 1)[-1]  # "X[3]: edges" names the example once
        raise ValueError(f"{name}[{j}] = ({e[j, 0]}, {e[j, 1]}) repeats {row}[{first}] = "
                         f"({e[first, 0]}, {e[first, 1]}): each pair of nodes may have one edge")
    return e


@njit(cache=True, nogil=True)
def _find(root, a):  # type: ignore[no-untyped-def]  # numba kernel
    while root[a] != a:
        root[a] = root[root[a]]  # path halving keeps the trees shallow
        a = root[a]
    return a


@njit(cache=True, nogil=True)
def _is_forest(V, edges):  # type: ignore[no-untyped-def]  # numba kernel
    root = np.arange(V)
    for e in range(edges.shape[0]):
        a = _find(root, edges[e, 0])
        b = _find(root, edges[e, 1])
        if a == b:
            return False
        root[a] = b
    return True


def is_forest(V: int, edges: npt.ArrayLike) -> bool:
    """True when the graph on V nodes has no cycle (union-find; a repeated edge is a cycle).

    ``edges`` must be an int64 (E, 2) array of nodes in 0..V-1 (`check_graph`)."""
    edges = np.ascontiguousarray(edges, dtype=np.int64).reshape(-1, 2)
    return bool(edges.shape[0] <= max(V - 1, 0) and _is_forest(int(V), edges))


@njit(cache=True, nogil=True)
def _components(V, edges):  # type: ignore[no-untyped-def]  # numba kernel
    root = np.arange(V)
    for e in range(edges.shape[0]):
        a = _find(root, edges[e, 0])
        b = _find(root, edges[e, 1])
        if a != b:
            root[a] = b
    label = np.full(V, -1, np.int64)
    comp = np.empty(V, np.int64)
    n = 0
    for v in range(V):
        r = _find(root, v)
        if label[r] < 0:
            label[r] = n
            n += 1
        comp[v] = label[r]
    return n, comp


def connected_components(V: int, edges: npt.ArrayLike) -> tuple[int, npt.NDArray[np.int64]]:
    """(n_components, component of each node (V,) int64), components numbered in the order
    of their smallest node."""
    edges = np.ascontiguousarray(edges, dtype=np.int64).reshape(-1, 2)
    n, comp = _components(int(V), edges)
    return int(n), comp


@njit(cache=True, nogil=True)
def _bfs_schedule(V, edges):  # type: ignore[no-untyped-def]  # numba kernel
    """BFS from the smallest unvisited node of each component; ok = False on a cycle."""
    E = edges.shape[0]
    deg = np.zeros(V + 1, np.int64)
    for e in range(E):
        deg[edges[e, 0] + 1] += 1
        deg[edges[e, 1] + 1] += 1
    start = np.cumsum(deg)
    fill = start[:V].copy()
    nbr = np.empty(2 * E, np.int64)
    via = np.empty(2 * E, np.int64)
    for e in range(E):
        u, v = edges[e, 0], edges[e, 1]
        nbr[fill[u]] = v
        via[fill[u]] = e
        fill[u] += 1
        nbr[fill[v]] = u
        via[fill[v]] = e
        fill[v] += 1
    order = np.empty(V, np.int64)
    parent = np.full(V, -1, np.int64)
    parent_edge = np.full(V, -1, np.int64)
    seen = np.zeros(V, np.bool_)
    head = 0
    tail = 0
    for r in range(V):
        if seen[r]:
            continue
        seen[r] = True
        order[tail] = r
        tail += 1
        while head < tail:
            u = order[head]
            head += 1
            for t in range(start[u], start[u + 1]):
                if via[t] == parent_edge[u]:
                    continue
                v = nbr[t]
                if seen[v]:
                    return False, order, parent, parent_edge  # a second path to v: a cycle
                seen[v] = True
                parent[v] = u
                parent_edge[v] = via[t]
                order[tail] = v
                tail += 1
    return True, order, parent, parent_edge


def forest_schedule(V: int, edges: npt.ArrayLike) -> TreeSchedule | None:
    """The `TreeSchedule` of a forest, or None when the graph has a cycle.

    ``edges`` must be valid for V nodes (`check_graph`).  O(V + E)."""
    edges = np.ascontiguousarray(edges, dtype=np.int64).reshape(-1, 2)
    if edges.shape[0] > max(V - 1, 0):
        return None
    ok, order, parent, parent_edge = _bfs_schedule(int(V), edges)
    return TreeSchedule(order, parent, parent_edge) if ok else None


# ------------------------------------------------------------------ potentials
def _as_potentials(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike) -> _Potentials:
    """The three arrays in the kernels' layout, with shape checks naming the argument."""
    unary = np.ascontiguousarray(unary, dtype=np.float64)
    if unary.ndim != 2 or unary.shape[0] < 1 or unary.shape[1] < 1:
        raise ValueError(f"unary must have shape (V, K) with V, K >= 1, got {unary.shape}")
    V, K = unary.shape
    edges = check_graph(V, edges, "edges")
    pairwise = np.ascontiguousarray(pairwise, dtype=np.float64)
    if pairwise.size == 0 and edges.shape[0] == 0:
        pairwise = pairwise.reshape(0, K, K)
    if pairwise.shape != (edges.shape[0], K, K):
        raise ValueError(f"pairwise must have shape (E, K, K) = ({edges.shape[0]}, {K}, {K}), "
                         f"got {pairwise.shape}")
    return unary, edges, pairwise


@njit(cache=True, nogil=True)
def energy(unary, edges, pairwise, y):  # type: ignore[no-untyped-def]  # numba kernel
    """E(y) = sum_v unary[v, y_v] + sum_e pairwise[e, y_{u_e}, y_{v_e}]."""
    s = 0.0
    for v in range(unary.shape[0]):
        s += unary[v, y[v]]
    for e in range(edges.shape[0]):
        s += pairwise[e, y[edges[e, 0]], y[edges[e, 1]]]
    return s


@njit(cache=True, nogil=True)
def _pair(pairwise, e, child_is_tail, k_parent, l_child):  # type: ignore[no-untyped-def]  # numba kernel
    """theta_e at (parent label, child label) whatever the edge's orientation."""
    if child_is_tail:
        return pairwise[e, l_child, k_parent]
    return pairwise[e, k_parent, l_child]


# ------------------------------------------------------------------ max-product
@njit(cache=True, nogil=True)
def _tree_max_product(unary, edges, pairwise, order, parent, parent_edge):  # type: ignore[no-untyped-def]  # numba kernel
    """argmax_y E(y) on a forest: max-marginals leaf to root, back-pointers root to leaf.

    M[v, l] = unary[v, l] + sum over children c of max_m (M[c, m] + theta_(v,c)(l, m)) is the
    best score of v's subtree with y_v = l; bp[c, l] is the maximising m.  Ties go to the
    smallest label."""
    V, K = unary.shape
    M = unary.copy()
    bp = np.zeros((V, K), np.int64)
    for t in range(V - 1, -1, -1):
        c = order[t]
        p = parent[c]
        if p < 0:
            continue
        e = parent_edge[c]
        c_tail = edges[e, 0] == c
        for k in range(K):
            best = M[c, 0] + _pair(pairwise, e, c_tail, k, 0)
            arg = 0
            for m in range(1, K):
                s = M[c, m] + _pair(pairwise, e, c_tail, k, m)
                if s > best:
                    best = s
                    arg = m
            M[p, k] += best
            bp[c, k] = arg
    y = np.empty(V, np.int64)
    for t in range(V):
        v = order[t]
        p = parent[v]
        if p >= 0:
            y[v] = bp[v, y[p]]
            continue
        arg = 0
        for k in range(1, K):
            if M[v, k] > M[v, arg]:
                arg = k
        y[v] = arg
    return y


def tree_max_product(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike,
                     schedule: TreeSchedule | None = None) -> tuple[npt.NDArray[np.int64], float, float]:
    """Exact argmax_y E(y) on a forest by max-product, O(E K^2).

    Parameters
    ----------
    unary, edges, pairwise
        The potentials of the shared inference interface (module docstring).
    schedule : TreeSchedule, optional
        The graph's `forest_schedule`, when the caller keeps it (then the graph is not
        checked again); computed here otherwise.

    Returns
    -------
    labels : (V,) int64
    value : float, E(labels) = max_y E(y)
    bound : float, equal to value (the back-end is exact)

    Raises
    ------
    ValueError
        When the graph has a cycle (use a loopy back-end) or the arrays are malformed.
    """
    if schedule is None:
        unary, edges, pairwise = _as_potentials(unary, edges, pairwise)
        schedule = forest_schedule(unary.shape[0], edges)
        if schedule is None:
            raise ValueError("tree_max_product needs a forest, but the graph has a cycle; "
                             "use a loopy back-end (structfw.oracles.loopy: trws, lp_relaxation, qpbo)")
    y = _tree_max_product(unary, edges, pairwise, schedule.order, schedule.parent, schedule.parent_edge)
    value = float(energy(unary, edges, pairwise, y))
    return y, value, value


# ------------------------------------------------------------------ sum-product
@njit(cache=True, nogil=True)
def _logsumexp(a):  # type: ignore[no-untyped-def]  # numba kernel
    m = a[0]
    for i in range(1, a.shape[0]):
        if a[i] > m:
            m = a[i]
    s = 0.0
    for i in range(a.shape[0]):
        s += np.exp(a[i] - m)
    return m + np.log(s)


@njit(cache=True, nogil=True)
def _tree_sum_product(unary, edges, pairwise, order, parent, parent_edge, temperature):  # type: ignore[no-untyped-def]  # numba kernel
    """Marginals of p(y) ∝ exp(E(y) / T) on a forest, in log space.

    Upward: B[v] = unary[v]/T + sum_children up[c], up[c, k] = log sum_m exp(B[c, m] +
    theta(k, m)/T) (the message c -> parent, over the parent's label k).  Downward: the full
    belief A[c, m] = B[c, m] + log sum_k exp(A[p, k] - up[c, k] + theta(k, m)/T); A[p] - up[c]
    is p's belief without c's subtree.  log Z of a tree = logsumexp of its root's B."""
    V, K = unary.shape
    E = edges.shape[0]
    inv = 1.0 / temperature
    B = unary * inv
    up = np.zeros((V, K))
    tmp = np.empty(K)
    for t in range(V - 1, -1, -1):
        c = order[t]
        p = parent[c]
        if p < 0:
            continue
        e = parent_edge[c]
        c_tail = edges[e, 0] == c
        for k in range(K):
            for m in range(K):
                tmp[m] = B[c, m] + inv * _pair(pairwise, e, c_tail, k, m)
            up[c, k] = _logsumexp(tmp)
            B[p, k] += up[c, k]
    A = B.copy()
    logZ_tree = np.zeros(V)  # indexed by root
    root = np.empty(V, np.int64)
    log_partition = 0.0
    for t in range(V):
        v = order[t]
        p = parent[v]
        if p < 0:
            root[v] = v
            logZ_tree[v] = _logsumexp(B[v])
            log_partition += logZ_tree[v]
            continue
        root[v] = root[p]
        e = parent_edge[v]
        v_tail = edges[e, 0] == v
        for m in range(K):
            for k in range(K):
                tmp[k] = A[p, k] - up[v, k] + inv * _pair(pairwise, e, v_tail, k, m)
            A[v, m] = B[v, m] + _logsumexp(tmp)
    mu = np.empty((V, K))
    for v in range(V):
        z = logZ_tree[root[v]]
        for k in range(K):
            mu[v, k] = np.exp(A[v, k] - z)
    mu_e = np.empty((E, K, K))
    for v in range(V):
        p = parent[v]
        if p < 0:
            continue
        e = parent_edge[v]
        v_tail = edges[e, 0] == v
        z = logZ_tree[root[v]]
        for k in range(K):
            outside = A[p, k] - up[v, k] - z
            for m in range(K):
                q = np.exp(outside + inv * _pair(pairwise, e, v_tail, k, m) + B[v, m])
                if v_tail:
                    mu_e[e, m, k] = q
                else:
                    mu_e[e, k, m] = q
    return mu, mu_e, log_partition


def tree_marginals(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, temperature: float = 1.0,
                   schedule: TreeSchedule | None = None
                   ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
    """Exact marginals of p(y) ∝ exp(E(y) / T) on a forest by sum-product in log space.

    Parameters
    ----------
    unary, edges, pairwise
        The potentials of the shared inference interface (module docstring); finite.
    temperature : float > 0, default 1.0
        T; T -> 0 concentrates p on the maximisers of E.
    schedule : TreeSchedule, optional
        As for `tree_max_product`.

    Returns
    -------
    node_marginals : (V, K), p(y_v = k)
    edge_marginals : (E, K, K), p(y_{u_e} = k, y_{v_e} = l)
    log_partition : float, log sum_y exp(E(y) / T)
    """
    try:
        temperature = float(temperature)
    except (TypeError, ValueError):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}") from None
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if schedule is None:
        unary, edges, pairwise = _as_potentials(unary, edges, pairwise)
        if not (np.all(np.isfinite(unary)) and np.all(np.isfinite(pairwise))):
            raise ValueError("tree_marginals needs finite unary and pairwise potentials")
        schedule = forest_schedule(unary.shape[0], edges)
        if schedule is None:
            raise ValueError("tree_marginals needs a forest, but the graph has a cycle: "
                             "exact marginals of a loopy graph are not implemented")
    mu, mu_e, logZ = _tree_sum_product(unary, edges, pairwise, schedule.order, schedule.parent,
                                       schedule.parent_edge, temperature)
    return mu, mu_e, float(logZ)


# ------------------------------------------------------------------ brute force
@njit(cache=True, nogil=True)
def _exhaustive(unary, edges, pairwise):  # type: ignore[no-untyped-def]  # numba kernel
    V, K = unary.shape
    y = np.zeros(V, np.int64)
    best_y = y.copy()
    best = energy(unary, edges, pairwise, y)
    while True:
        # next labelling in mixed radix (node 0 the fastest digit)
        j = 0
        while j < V:
            y[j] += 1
            if y[j] < K:
                break
            y[j] = 0
            j += 1
        if j == V:
            break
        s = energy(unary, edges, pairwise, y)
        if s > best:
            best = s
            best_y[:] = y
    return best_y, best


def exhaustive(unary: npt.ArrayLike, edges: npt.ArrayLike,
               pairwise: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], float, float]:
    """Exact argmax_y E(y) by enumerating all K^V labellings (any graph; tiny ones only).

    The reference the other back-ends are tested against.  Returns (labels, value,
    bound) with bound == value; refuses K^V > 2^20 with a ValueError."""
    unary, edges, pairwise = _as_potentials(unary, edges, pairwise)
    V, K = unary.shape
    if V * np.log2(K) > np.log2(EXHAUSTIVE_LIMIT) + 1e-9:
        raise ValueError(f"exhaustive inference enumerates K^V = {K}^{V} labellings, more than the "
                         f"limit 2^20; use tree_max_product (forests) or a loopy back-end")
    y, _ = _exhaustive(unary, edges, pairwise)
    value = float(energy(unary, edges, pairwise, y))
    return y, value, value


@njit(cache=True, nogil=True)
def add_node_loss(U, y_true, class_weight, scale):  # type: ignore[no-untyped-def]  # numba kernel
    """U[v, k] += scale c_v for k != y_true[v], in place: a (class-weighted) normalised
    Hamming loss as unary terms, c_v = cw[y_true[v]] / sum_u cw[y_true[u]] (1/V for an
    empty ``class_weight``).  One pass, no temporaries: it runs on every oracle call."""
    V, K = U.shape
    if V == 0:
        return U
    total = 0.0
    if class_weight.shape[0] == 0:
        total = V
    else:
        for v in range(V):
            total += class_weight[y_true[v]]
    for v in range(V):
        c = scale / total if class_weight.shape[0] == 0 else scale * class_weight[y_true[v]] / total
        yv = y_true[v]
        for k in range(K):
            if k != yv:
                U[v, k] += c
    return U


# ------------------------------------------------------------------ joint features
@njit(cache=True, nogil=True)
def _pairwise_diff(ef, edges, ya, yb, slot, n_slots, off):  # type: ignore[no-untyped-def]  # numba kernel
    """Pairwise part of phi(ya) - phi(yb): f_e at slot(ya_u, ya_v), minus f_e at slot(yb_u,
    yb_v) (slot -1 = no parameter); yb all -1 = absent.  Sorted (indices, values)."""
    Fe = ef.shape[1]
    acc = np.zeros(n_slots * Fe)
    has_b = yb.shape[0] > 0 and yb[0] >= 0
    for e in range(edges.shape[0]):
        u, v = edges[e, 0], edges[e, 1]
        sa = slot[ya[u], ya[v]]
        sb = slot[yb[u], yb[v]] if has_b else -1
        if sa == sb:
            continue
        if sa >= 0:
            for f in range(Fe):
                acc[sa * Fe + f] += ef[e, f]
        if sb >= 0:
            for f in range(Fe):
                acc[sb * Fe + f] -= ef[e, f]
    n = 0
    for j in range(acc.shape[0]):
        if acc[j] != 0.0:
            n += 1
    idx = np.empty(n, np.int64)
    val = np.empty(n)
    n = 0
    for j in range(acc.shape[0]):
        if acc[j] != 0.0:
            idx[n] = off + j
            val[n] = acc[j]
            n += 1
    return idx, val


@njit(cache=True, nogil=True)
def graph_phi_diff_dense(x, ef, edges, ya, yb, slot, n_slots, K):  # type: ignore[no-untyped-def]  # numba kernel
    """phi(x, ya) - phi(x, yb) of the general graph model (dense node features x (V, F)),
    as sorted (indices, values); only nodes whose labels differ are read.  yb all -1 means
    phi(x, ya) alone."""
    V, F = x.shape
    acc = np.zeros(K * F)
    touched = np.zeros(K, np.bool_)
    has_b = yb.shape[0] > 0 and yb[0] >= 0
    for v in range(V):
        a = ya[v]
        b = yb[v] if has_b else -1
        if a == b:
            continue
        touched[a] = True
        for f in range(F):
            acc[a * F + f] += x[v, f]
        if b >= 0:
            touched[b] = True
            for f in range(F):
                acc[b * F + f] -= x[v, f]
    n = 0
    for k in range(K):
        if touched[k]:
            for f in range(F):
                if acc[k * F + f] != 0.0:
                    n += 1
    pi, pv = _pairwise_diff(ef, edges, ya, yb, slot, n_slots, K * F)
    idx = np.empty(n + pi.shape[0], np.int64)
    val = np.empty(n + pi.shape[0])
    n = 0
    for k in range(K):
        if touched[k]:
            for f in range(F):
                a = acc[k * F + f]
                if a != 0.0:
                    idx[n] = k * F + f
                    val[n] = a
                    n += 1
    idx[n:] = pi
    val[n:] = pv
    return idx, val


@njit(cache=True, nogil=True)
def graph_phi_diff_csr(indptr, indices, data, ef, edges, ya, yb, slot, n_slots, K, F):  # type: ignore[no-untyped-def]  # numba kernel
    """As `graph_phi_diff_dense` for CSR node features: (index, value) pairs of the nodes
    whose labels differ, coalesced by sorting, so the cost follows their non-zeros and never
    K F (F may be in the millions)."""
    V = indptr.shape[0] - 1
    has_b = yb.shape[0] > 0 and yb[0] >= 0
    n = 0
    for v in range(V):
        b = yb[v] if has_b else -1
        if ya[v] != b:
            n += (indptr[v + 1] - indptr[v]) * (2 if b >= 0 else 1)
    ii = np.empty(n, np.int64)
    vv = np.empty(n)
    n = 0
    for v in range(V):
        a = ya[v]
        b = yb[v] if has_b else -1
        if a == b:
            continue
        for t in range(indptr[v], indptr[v + 1]):
            ii[n] = a * F + indices[t]
            vv[n] = data[t]
            n += 1
            if b >= 0:
                ii[n] = b * F + indices[t]
                vv[n] = -data[t]
                n += 1
    # sort, sum repeats, drop zeros (as _linalg.coalesce, inlined to keep this module's
    # kernels free of the _linalg import)
    order = np.argsort(ii, kind="mergesort")
    ui = np.empty(n, np.int64)
    uv = np.empty(n)
    m = 0
    for t in range(n):
        j = ii[order[t]]
        if m > 0 and ui[m - 1] == j:
            uv[m - 1] += vv[order[t]]
        else:
            ui[m] = j
            uv[m] = vv[order[t]]
            m += 1
    keep = 0
    for t in range(m):
        if uv[t] != 0.0:
            ui[keep] = ui[t]
            uv[keep] = uv[t]
            keep += 1
    pi, pv = _pairwise_diff(ef, edges, ya, yb, slot, n_slots, K * F)
    idx = np.empty(keep + pi.shape[0], np.int64)
    val = np.empty(keep + pi.shape[0])
    idx[:keep] = ui[:keep]
    val[:keep] = uv[:keep]
    idx[keep:] = pi
    val[keep:] = pv
    return idx, val
