"""Exact minimisation of binary submodular pairwise energies by s-t minimum cut.

The graph-cut models (`structfw.models.graphcut`, `structfw.models.potts`)
minimise energies of binary labellings y in {0, 1}^V of the form

    E(y) = sum_v  c_v(y_v)  +  sum_{e=(u,v)}  ( a_e [y_u = 0, y_v = 1] + b_e [y_u = 1, y_v = 0] )

with a_e, b_e >= 0 (submodular; a Potts edge has a_e = b_e = w_e).  Every submodular
binary pairwise energy reduces to this form (Kolmogorov & Zabih 2004) and is minimised
exactly by one s-t minimum cut: node v on the source side means y_v = 0, on the sink
side y_v = 1; the terminal arc s -> v carries c_v(1) - c_v(0) when positive (cut when
y_v = 1), v -> t carries c_v(0) - c_v(1) when positive (cut when y_v = 0); a pairwise
arc u -> v of capacity a_e is cut exactly when y_u = 0 and y_v = 1 (Boykov & Kolmogorov,
"An experimental comparison of min-cut/max-flow algorithms for energy minimization in
vision", PAMI 2004 -- the [5] of the MP-BCFW paper's appendix A and the HorseSeg oracle
of the "Minding the gaps" paper).

Backends (``backend=`` of `min_cut` / `min_cut_directed`)
--------------------------------------------------------------------
``"numba"`` (default, and what ``"auto"`` picks)
    `bk_maxflow`, the Boykov-Kolmogorov augmenting-path algorithm (two search
    trees grown from the terminals, augmentation, adoption of orphans, with the
    paper's distance/timestamp heuristic for choosing new parents), written here from
    the paper's description.  Float64 capacities, so the cut is an exact minimiser up
    to floating-point rounding of the sums; ``nogil=True`` so threads run it in
    parallel; no extra dependency.
``"pymaxflow"`` (optional; ``pip install structfw[maxflow]``)
    PyMaxflow's wrapper of the authors' BK code, float64 capacities.  PyMaxflow is
    GPL-licensed, so it is only an optional extra and never the default.
``"ortools"`` (optional)
    OR-tools' ``SimpleMaxFlow`` (push-relabel, Apache-2.0), int64 capacities: the
    capacities are scaled so that their total is 2^52 and rounded, so the cut is a
    minimiser of the rounded energy, within (#arcs / 2) / scale of the exact minimum.
``"scipy"``
    `scipy.sparse.csgraph.maximum_flow` (BSD, already a dependency), int32
    capacities: scaled so that the total capacity stays below 2^31, hence a coarser
    rounding (about 1e-9 relative to the total); the cut is read from the residual graph.

Measurements (2 cores shared with other jobs, numba 0.68.1, scipy 1.17.1, PyMaxflow 1.3.2,
OR-tools 9.15; ``structfw bench maxflow``; median of 5 calls after a warm-up,
ms per min cut including the Python wrapper; two runs, the second on a busier machine)::

    graph                                  numba-BK      pymaxflow     ortools       scipy
    grid 100x100 (V=10000, E=19800)        2.15 / 2.24   2.03 / 0.87   5.64 / 3.33   7.77 / 5.93
    grid 150x150 (V=22500, E=44700)        6.61 / 4.95   5.28 / 1.97   13.4 / 7.79   14.1 / 11.1
    SLIC 400 superpixels (V=396, E=1082)        0.17          0.06          0.23          0.82
    SLIC 1500 superpixels (V=1599, E=3743)      0.55          0.18          0.62          1.23

Every backend reached the same energy on every instance (relative difference 0).  The
grids are 4-connected with the unaries of a noisy disc image and contrast-sensitive
Potts weights (`structfw_bench.maxflow.grid_instance`); the SLIC graphs are region adjacency graphs of
`structfw.datasets.make_stanford_like` images.  GIL, measured as the time of
2 threads x 5 calls over 10 serial calls on the 150x150 grid (0.5 = parallel,
1.0 = serialised): first run numba 0.59, PyMaxflow 0.41 (both release it), OR-tools 0.88,
scipy 0.86 (both hold it); on the busier machine all four measured 1.0-1.1 (no idle
core).  Exhaustive checks against all 2^V labellings (V <= 9, 400 random energies,
directed and Potts) found every backend at the minimum energy once OR-tools is given
both terminals (an arc s -> t of capacity 0).

Choice: "auto" is the numba kernel: exact on float64 capacities (OR-tools' int64 and
scipy's int32 capacities need the scaling and rounding described above), faster than
both permissive libraries, thread-parallel (nogil) and callable from other numba
kernels (the alpha-expansion runs entirely compiled), with no new dependency.
PyMaxflow is 1-2.5x faster still but GPL-licensed, so it is only the optional extra
``structfw[maxflow]`` (``backend="pymaxflow"``), never chosen automatically.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

BACKENDS = ("numba", "pymaxflow", "ortools", "scipy")

_FREE, _SOURCE, _SINK = 0, 1, 2
_TERMINAL, _ORPHAN, _NONE = -2, -3, -1


# --------------------------------------------------------------------- graph layout
@njit(cache=True, nogil=True)
def _adjacency(n, tails, heads):
    """Arc layout of an undirected edge list: edge e gives arc 2e (tail -> head) and its
    sister 2e+1 (head -> tail), so the sister of arc a is a ^ 1.  Returns
    (first, adj, arc_head): the arcs leaving node v are adj[first[v]:first[v+1]]."""
    m = tails.shape[0]
    deg = np.zeros(n + 1, np.int64)
    for e in range(m):
        deg[tails[e] + 1] += 1
        deg[heads[e] + 1] += 1
    for v in range(n):
        deg[v + 1] += deg[v]
    first = deg.copy()
    fill = deg[:n].copy()
    adj = np.empty(2 * m, np.int64)
    arc_head = np.empty(2 * m, np.int64)
    for e in range(m):
        u, v = tails[e], heads[e]
        adj[fill[u]] = 2 * e
        fill[u] += 1
        adj[fill[v]] = 2 * e + 1
        fill[v] += 1
        arc_head[2 * e] = v
        arc_head[2 * e + 1] = u
    return first, adj, arc_head


@njit(cache=True, nogil=True)
def _push_active(queue, in_queue, qstate, v):
    """Append v to the circular FIFO of active nodes unless it is already there."""
    if in_queue[v]:
        return
    n = queue.shape[0]
    queue[(qstate[0] + qstate[1]) % n] = v
    qstate[1] += 1
    in_queue[v] = True


@njit(cache=True, nogil=True)
def _push_orphan(orphans, ostate, v):
    n = orphans.shape[0]
    orphans[(ostate[0] + ostate[1]) % n] = v
    ostate[1] += 1


# ------------------------------------------------------------ Boykov-Kolmogorov
@njit(cache=True, nogil=True)
def _grow(first, adj, arc_head, r, tree, parent, dist, ts, queue, in_queue, qstate):
    """Growth stage: expand the active nodes' trees until they touch.

    Returns the arc joining the trees, oriented from the source tree to the sink tree,
    or -1 when no active node is left (the flow is maximum).  The active node being
    expanded stays at the queue's front, so the next growth stage resumes it."""
    n = queue.shape[0]
    while qstate[1] > 0:
        v = queue[qstate[0]]
        tv = tree[v]
        if tv != _FREE:
            for k in range(first[v], first[v + 1]):
                a = adj[k]
                # residual capacity away from v's terminal: v -> u in the source tree,
                # u -> v in the sink tree
                cap = r[a] if tv == _SOURCE else r[a ^ 1]
                if cap <= 0.0:
                    continue
                u = arc_head[a]
                tu = tree[u]
                if tu == _FREE:
                    tree[u] = tv
                    parent[u] = a ^ 1
                    dist[u] = dist[v] + 1
                    ts[u] = ts[v]
                    _push_active(queue, in_queue, qstate, u)
                elif tu != tv:
                    return a if tv == _SOURCE else a ^ 1
                elif ts[u] <= ts[v] and dist[u] > dist[v]:
                    # BK's heuristic: keep trees shallow by re-hanging u under v
                    parent[u] = a ^ 1
                    ts[u] = ts[v]
                    dist[u] = dist[v] + 1
        qstate[0] = (qstate[0] + 1) % n
        qstate[1] -= 1
        in_queue[v] = False
    return -1


@njit(cache=True, nogil=True)
def _augment(mid, arc_head, r, tr, parent, orphans, ostate):
    """Push the bottleneck flow along source -> ... -> mid -> ... -> sink; nodes whose
    parent arc (or terminal arc) saturates become orphans.  Returns the flow pushed."""
    s_node = arc_head[mid ^ 1]
    t_node = arc_head[mid]
    delta = r[mid]
    x = s_node
    while parent[x] != _TERMINAL:
        pa = parent[x]
        if r[pa ^ 1] < delta:
            delta = r[pa ^ 1]
        x = arc_head[pa]
    if tr[x] < delta:
        delta = tr[x]
    x = t_node
    while parent[x] != _TERMINAL:
        pa = parent[x]
        if r[pa] < delta:
            delta = r[pa]
        x = arc_head[pa]
    if -tr[x] < delta:
        delta = -tr[x]
    r[mid] -= delta
    r[mid ^ 1] += delta
    # the bottleneck arcs end at exactly 0.0 (x - x == 0 in floating point), the others
    # stay >= 0 because rounding is monotone
    x = s_node
    while parent[x] != _TERMINAL:
        pa = parent[x]
        r[pa ^ 1] -= delta
        r[pa] += delta
        nxt = arc_head[pa]
        if r[pa ^ 1] <= 0.0:
            parent[x] = _ORPHAN
            _push_orphan(orphans, ostate, x)
        x = nxt
    tr[x] -= delta
    if tr[x] <= 0.0:
        parent[x] = _ORPHAN
        _push_orphan(orphans, ostate, x)
    x = t_node
    while parent[x] != _TERMINAL:
        pa = parent[x]
        r[pa] -= delta
        r[pa ^ 1] += delta
        nxt = arc_head[pa]
        if r[pa] <= 0.0:
            parent[x] = _ORPHAN
            _push_orphan(orphans, ostate, x)
        x = nxt
    tr[x] += delta
    if tr[x] >= 0.0:
        parent[x] = _ORPHAN
        _push_orphan(orphans, ostate, x)
    return delta


@njit(cache=True, nogil=True)
def _origin_distance(u, arc_head, parent, dist, ts, time):
    """Distance from u to its tree's terminal, or -1 when u's path ends at an orphan.

    Nodes already verified at this ``time`` stop the walk early (BK's timestamps);
    the nodes walked over are stamped with their distances."""
    d = 0
    y = u
    while True:
        if ts[y] == time:
            d += dist[y]
            break
        pa = parent[y]
        d += 1
        if pa == _TERMINAL:
            ts[y] = time
            dist[y] = 1
            break
        if pa == _ORPHAN or pa == _NONE:
            return -1
        y = arc_head[pa]
    total = d
    y = u
    while ts[y] != time:
        ts[y] = time
        dist[y] = d
        d -= 1
        y = arc_head[parent[y]]
    return total


@njit(cache=True, nogil=True)
def _adopt(first, adj, arc_head, r, tree, parent, dist, ts, time, orphans, ostate,
           queue, in_queue, qstate):
    """Adoption stage: give every orphan a new parent in its own tree whose path reaches
    the terminal (the closest one), or free it, activating its neighbours and orphaning
    its children."""
    n = orphans.shape[0]
    big = 1 << 62
    while ostate[1] > 0:
        x = orphans[ostate[0]]
        ostate[0] = (ostate[0] + 1) % n
        ostate[1] -= 1
        tx = tree[x]
        best = -1
        dmin = big
        for k in range(first[x], first[x + 1]):
            a = adj[k]
            u = arc_head[a]
            if tree[u] != tx:
                continue
            cap = r[a ^ 1] if tx == _SOURCE else r[a]
            if cap <= 0.0:
                continue
            d = _origin_distance(u, arc_head, parent, dist, ts, time)
            if d >= 0 and d < dmin:
                dmin = d
                best = a
        if best >= 0:
            parent[x] = best
            ts[x] = time
            dist[x] = dmin + 1
            continue
        for k in range(first[x], first[x + 1]):
            a = adj[k]
            u = arc_head[a]
            if tree[u] != tx:
                continue
            cap = r[a ^ 1] if tx == _SOURCE else r[a]
            if cap > 0.0:
                _push_active(queue, in_queue, qstate, u)
            pu = parent[u]
            if pu >= 0 and arc_head[pu] == x:
                parent[u] = _ORPHAN
                _push_orphan(orphans, ostate, u)
        tree[x] = _FREE
        parent[x] = _NONE


@njit(cache=True, nogil=True)
def bk_maxflow(n, tails, heads, cap_fwd, cap_bwd, terminal):
    """Maximum s-t flow and a minimum cut by the Boykov-Kolmogorov algorithm.

    Parameters
    ----------
    n : int
        Number of non-terminal nodes.
    tails, heads : (m,) int64
        Pairwise edges (tails[e], heads[e]).
    cap_fwd, cap_bwd : (m,) float64 >= 0
        Capacities of tails[e] -> heads[e] and heads[e] -> tails[e].
    terminal : (n,) float64
        Terminal capacity of node v: s -> v when positive, v -> t (its magnitude) when
        negative (the two-terminal-arc form reduced by their common part).

    Returns
    -------
    flow : float
        The maximum flow = the capacity of the minimum cut.
    labels : (n,) int64
        0 for nodes on the source side of a minimum cut (the nodes reachable from s in
        the residual graph), 1 for the others.
    """
    first, adj, arc_head = _adjacency(n, tails, heads)
    m = tails.shape[0]
    r = np.empty(2 * m)
    for e in range(m):
        r[2 * e] = cap_fwd[e]
        r[2 * e + 1] = cap_bwd[e]
    tr = terminal.copy()
    tree = np.zeros(n, np.int8)
    parent = np.full(n, _NONE, np.int64)
    dist = np.zeros(n, np.int64)
    ts = np.zeros(n, np.int64)
    queue = np.empty(max(n, 1), np.int64)
    in_queue = np.zeros(n, np.bool_)
    orphans = np.empty(max(n, 1), np.int64)
    qstate = np.zeros(2, np.int64)  # (front, length) of the active FIFO
    ostate = np.zeros(2, np.int64)  # (front, length) of the orphan FIFO
    for v in range(n):
        if tr[v] > 0.0:
            tree[v] = _SOURCE
        elif tr[v] < 0.0:
            tree[v] = _SINK
        else:
            continue
        parent[v] = _TERMINAL
        dist[v] = 1
        _push_active(queue, in_queue, qstate, v)
    flow = 0.0
    time = 0
    while True:
        mid = _grow(first, adj, arc_head, r, tree, parent, dist, ts, queue, in_queue, qstate)
        if mid < 0:
            break
        time += 1
        flow += _augment(mid, arc_head, r, tr, parent, orphans, ostate)
        _adopt(first, adj, arc_head, r, tree, parent, dist, ts, time, orphans, ostate,
               queue, in_queue, qstate)
    labels = np.empty(n, np.int64)
    for v in range(n):
        labels[v] = 0 if tree[v] == _SOURCE else 1
    return flow, labels


# ------------------------------------------------------------ energy -> graph
@njit(cache=True, nogil=True)
def binary_energy(cost0, cost1, tails, heads, cap_fwd, cap_bwd, y):
    """E(y) = sum_v c_v(y_v) + sum_e (a_e [y_u=0, y_v=1] + b_e [y_u=1, y_v=0])."""
    e_val = 0.0
    for v in range(y.shape[0]):
        e_val += cost1[v] if y[v] == 1 else cost0[v]
    for e in range(tails.shape[0]):
        yu, yv = y[tails[e]], y[heads[e]]
        if yu == 0 and yv == 1:
            e_val += cap_fwd[e]
        elif yu == 1 and yv == 0:
            e_val += cap_bwd[e]
    return e_val


@njit(cache=True, nogil=True)
def _terminal_caps(cost0, cost1):
    """s -> v capacity c_v(1) - c_v(0) (negative: v -> t), and the constant sum_v min c_v."""
    n = cost0.shape[0]
    t = np.empty(n)
    const = 0.0
    for v in range(n):
        t[v] = cost1[v] - cost0[v]
        const += min(cost0[v], cost1[v])
    return t, const


@njit(cache=True, nogil=True)
def min_cut_numba(cost0, cost1, tails, heads, cap_fwd, cap_bwd):
    """argmin_y E(y) of the module docstring by `bk_maxflow`; returns (y, E(y))."""
    t, _ = _terminal_caps(cost0, cost1)
    _, y = bk_maxflow(cost0.shape[0], tails, heads, cap_fwd, cap_bwd, t)
    return y, binary_energy(cost0, cost1, tails, heads, cap_fwd, cap_bwd, y)


# ------------------------------------------------------------ other backends
def available_backends():
    """The backends importable here, in order of preference."""
    out = ["numba"]
    try:
        import maxflow  # noqa: F401
        out.append("pymaxflow")
    except ImportError:
        pass
    try:
        from ortools.graph.python import max_flow  # noqa: F401
        out.append("ortools")
    except ImportError:
        pass
    out.append("scipy")
    return out


def _cut_pymaxflow(t, tails, heads, cap_fwd, cap_bwd):
    import maxflow

    n = t.shape[0]
    g = maxflow.Graph[float](n, tails.shape[0])
    nodes = g.add_nodes(n)
    if tails.shape[0]:
        g.add_edges(tails, heads, cap_fwd, cap_bwd)
    g.add_grid_tedges(nodes, np.maximum(t, 0.0), np.maximum(-t, 0.0))
    g.maxflow()
    return g.get_grid_segments(nodes).astype(np.int64)  # True = sink side = label 1


def _integer_scale(t, cap_fwd, cap_bwd, limit):
    """Scale factor mapping the capacities to integers with total below ``limit``."""
    total = float(np.abs(t).sum() + cap_fwd.sum() + cap_bwd.sum())
    return limit / total if total > 0 else 1.0


def _cut_ortools(t, tails, heads, cap_fwd, cap_bwd):
    from ortools.graph.python import max_flow

    n = t.shape[0]
    scale = _integer_scale(t, cap_fwd, cap_bwd, 2.0 ** 52)
    s, sink = n, n + 1
    src_nodes = np.flatnonzero(t > 0)
    snk_nodes = np.flatnonzero(t < 0)
    # the zero arc s -> t makes both terminals exist even when no node is attached to one
    arc_t = np.concatenate([tails, heads, np.full(src_nodes.size, s), snk_nodes, [s]])
    arc_h = np.concatenate([heads, tails, src_nodes, np.full(snk_nodes.size, sink), [sink]])
    caps = np.concatenate([cap_fwd, cap_bwd, t[src_nodes], -t[snk_nodes], [0.0]])
    caps = np.rint(caps * scale).astype(np.int64)
    smf = max_flow.SimpleMaxFlow()
    smf.add_arcs_with_capacity(arc_t.astype(np.int32), arc_h.astype(np.int32), caps)
    status = smf.solve(s, sink)
    if status != smf.OPTIMAL:
        raise RuntimeError(f"OR-tools max flow failed with status {status}")
    side = np.asarray(smf.get_source_side_min_cut(), np.int64)
    y = np.ones(n, np.int64)
    side = side[side < n]
    y[side] = 0
    return y


def _cut_scipy(t, tails, heads, cap_fwd, cap_bwd):
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow

    n = t.shape[0]
    # int32 capacities and flows: keep every cut below 2^31
    scale = _integer_scale(t, cap_fwd, cap_bwd, 2.0 ** 30)
    s, sink = n, n + 1
    src_nodes = np.flatnonzero(t > 0)
    snk_nodes = np.flatnonzero(t < 0)
    rows = np.concatenate([tails, heads, np.full(src_nodes.size, s), snk_nodes])
    cols = np.concatenate([heads, tails, src_nodes, np.full(snk_nodes.size, sink)])
    caps = np.concatenate([cap_fwd, cap_bwd, t[src_nodes], -t[snk_nodes]])
    caps = np.rint(caps * scale).astype(np.int32)
    G = sp.csr_matrix((caps, (rows, cols)), shape=(n + 2, n + 2))  # duplicates are summed
    G.sum_duplicates()
    res = maximum_flow(G, s, sink)
    residual = (G - res.flow).tocsr()
    residual.data = (residual.data > 0).astype(np.int8)
    residual.eliminate_zeros()
    reach = breadth_first_order(residual, s, directed=True, return_predecessors=False)
    y = np.ones(n, np.int64)
    reach = reach[reach < n]
    y[reach] = 0
    return y


def _resolve_backend(backend):
    if backend == "auto":
        return "numba"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'auto' or one of {BACKENDS}, got {backend!r}")
    return backend


def min_cut_directed(cost0, cost1, edges, cap_fwd, cap_bwd, backend="auto"):
    """Exact argmin of E(y) = sum_v c_v(y_v) + sum_e (a_e [y_u=0,y_v=1] + b_e [y_u=1,y_v=0]).

    Parameters
    ----------
    cost0, cost1 : (V,) float64
        c_v(0) and c_v(1).
    edges : (E, 2) int64
        (u, v) node pairs.
    cap_fwd, cap_bwd : (E,) float64 >= 0
        a_e and b_e (non-negative: the energy must be submodular).
    backend : {"auto", "numba", "pymaxflow", "ortools", "scipy"}
        See the module docstring; "auto" is the numba kernel.

    Returns
    -------
    y : (V,) int64 in {0, 1}
    energy : float
        E(y), evaluated in float64 (also for the integer backends).
    """
    backend = _resolve_backend(backend)
    cost0 = np.ascontiguousarray(cost0, np.float64)
    cost1 = np.ascontiguousarray(cost1, np.float64)
    edges = np.ascontiguousarray(edges, np.int64).reshape(-1, 2)
    tails = np.ascontiguousarray(edges[:, 0])
    heads = np.ascontiguousarray(edges[:, 1])
    cap_fwd = np.ascontiguousarray(cap_fwd, np.float64)
    cap_bwd = np.ascontiguousarray(cap_bwd, np.float64)
    if cap_fwd.size and (cap_fwd.min() < 0 or cap_bwd.min() < 0):
        raise ValueError("cap_fwd and cap_bwd must be non-negative (a submodular energy)")
    if backend == "numba":
        return min_cut_numba(cost0, cost1, tails, heads, cap_fwd, cap_bwd)
    t, _ = _terminal_caps(cost0, cost1)
    cut = {"pymaxflow": _cut_pymaxflow, "ortools": _cut_ortools, "scipy": _cut_scipy}[backend]
    y = cut(t, tails, heads, cap_fwd, cap_bwd)
    return y, float(binary_energy(cost0, cost1, tails, heads, cap_fwd, cap_bwd, y))


def min_cut(unary_cost0, unary_cost1, edges, edge_weights, backend="auto"):
    """Exact argmin over y in {0,1}^V of sum_v c_v(y_v) + sum_e w_e [y_u != y_v], w_e >= 0.

    The Potts special case of `min_cut_directed` (a_e = b_e = w_e); the function
    the binary graph-cut model calls.  Returns (labels (V,) int64, energy)."""
    w = np.ascontiguousarray(edge_weights, np.float64)
    return min_cut_directed(unary_cost0, unary_cost1, edges, w, w, backend=backend)
