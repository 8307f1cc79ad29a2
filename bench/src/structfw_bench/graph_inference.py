"""Per-call cost and certified gap of the graph inference back-ends.

Used by ``structfw bench graph-inference``.  On random 4-connected grids of about 100,
1,000 and 10,000 nodes (h x w with h the largest divisor of V at most sqrt(V)), with
Gaussian unaries and Gaussian pairwise tables (frustrated, non-submodular: the hard case
for every loopy method), it times one call of each back-end of the shared inference
interface and records its value, bound and relative gap (bound - value) / |value|:

* ``trws`` and ``lp`` (`structfw.oracles.loopy.trws`, `lp_relaxation`) on K-label grids
  (K = 4 by default);
* ``qpbo`` (`structfw.oracles.loopy.qpbo`) on the same grids with K = 2 potentials;
* ``tree`` (`structfw.oracles.graph.tree_max_product`, when that module exists) and
  ``trws`` on random trees of the same sizes with K labels, where both are exact;
* ``pgmpy-mplp``: pgmpy's MPLP (Sontag et al. 2008; pure Python, MIT; without
  triplet tightening, so it solves the same local-polytope dual) on the grids up to
  ``pgmpy_max_nodes`` nodes, when pgmpy is installed (it is not a dependency).  pgmpy's
  belief propagation class is exact junction-tree inference, exponential in the
  treewidth of a grid, so it is not run.

Per-call seconds are the median over ``repeats`` calls after a warm-up call on a small
instance (numba compilation excluded); calls that take more than 10 s are timed once.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ._common import environment, pyplot, write_json

SIZES = (100, 1000, 10000)
SLOW_CALL_S = 10.0


# ---------------------------------------------------------------------------- instances
def grid_shape(V):
    h = max(d for d in range(1, int(math.isqrt(V)) + 1) if V % d == 0)
    return h, V // h


def grid_instance(V, K, seed):
    """A random h x w grid energy with h * w = V (module docstring)."""
    h, w = grid_shape(V)
    rng = np.random.default_rng(seed)
    idx = np.arange(V).reshape(h, w)
    edges = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                            np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)]).astype(np.int64)
    return rng.normal(size=(V, K)), edges, rng.normal(size=(edges.shape[0], K, K))


def tree_instance(V, K, seed):
    """A random recursive tree (node i attached to a uniform earlier node) on V nodes."""
    rng = np.random.default_rng(seed)
    parent = np.array([rng.integers(0, i) for i in range(1, V)], np.int64)
    edges = np.stack([parent, np.arange(1, V, dtype=np.int64)], 1).reshape(-1, 2)
    return rng.normal(size=(V, K)), edges, rng.normal(size=(edges.shape[0], K, K))


# ---------------------------------------------------------------------------- back-ends
def _backends():
    from structfw.oracles import loopy

    out = {"trws": loopy.trws, "lp": loopy.lp_relaxation, "qpbo": loopy.qpbo}
    try:
        from structfw.oracles.graph import tree_max_product
    except ImportError:
        tree_max_product = None
    if tree_max_product is not None:
        out["tree"] = tree_max_product
    return out


def pgmpy_mplp(unary, edges, pairwise):
    """MAP by pgmpy's MPLP on the same energy (factor values are used as log-potentials,
    i.e. added); returns (labels, value, bound) with pgmpy's dual objective as the bound."""
    import warnings

    from structfw.oracles.loopy import graph_energy

    with warnings.catch_warnings():
        # pgmpy's own deprecation notices, irrelevant here
        warnings.simplefilter("ignore")
        from pgmpy.factors.discrete import DiscreteFactor
        from pgmpy.inference import Mplp
        from pgmpy.models import DiscreteMarkovNetwork

    V, K = unary.shape
    names = [f"v{i}" for i in range(V)]
    mn = DiscreteMarkovNetwork()
    mn.add_nodes_from(names)
    mn.add_edges_from([(names[a], names[b]) for a, b in edges])
    mn.add_factors(*[DiscreteFactor([names[i]], [K], unary[i]) for i in range(V)],
                   *[DiscreteFactor([names[a], names[b]], [K, K], pairwise[e].ravel())
                     for e, (a, b) in enumerate(edges)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mplp = Mplp(mn)
        res = mplp.map_query(tighten_triplet=False)
    y = np.array([res[n] for n in names], np.int64)
    return y, float(graph_energy(unary, edges, pairwise, y)), float(mplp.dual_lp)


def _pgmpy_available():
    try:
        import pgmpy  # noqa: F401
    except ImportError:
        return False
    return True


def time_backend(fn, problem, repeats):
    """Median seconds per call over ``repeats`` calls (one when a call exceeds SLOW_CALL_S),
    and the last call's (value, bound)."""
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        out = fn(*problem)
        times.append(time.perf_counter() - t0)
        if times[-1] > SLOW_CALL_S:
            break
    _, value, bound = out[:3]
    return float(np.median(times)), times, float(value), float(bound)


def _row(backend, graph, problem, fn, repeats, log):
    unary, edges, _ = problem
    t, times, value, bound = time_backend(fn, problem, repeats)
    gap = bound - value
    row = dict(backend=backend, graph=graph, V=int(unary.shape[0]), E=int(edges.shape[0]), K=int(unary.shape[1]),
               seconds_per_call=t, times=times, value=value, bound=bound, gap=gap,
               rel_gap=gap / max(abs(value), 1e-300), exact=bool(bound == value))
    log(f"[graph-inference] {backend:>10s} {graph:>5s} V={row['V']:>6d} K={row['K']}: {1e3 * t:10.2f} ms/call, "
        f"value {value:.4f}, bound {bound:.4f}, rel. gap {row['rel_gap']:.2e}")
    return row


# ---------------------------------------------------------------------------- run
def run_graph_inference(sizes=SIZES, K=4, repeats=3, lp_max_nodes=10000, pgmpy=True, pgmpy_max_nodes=100,
                        seed=0, out="bench_out/graph_inference", log=print):
    """Run the benchmark; writes ``graph_inference.json`` and ``.png`` to ``out``; returns the doc."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    backends = _backends()
    use_pgmpy = bool(pgmpy) and _pgmpy_available()
    if pgmpy and not use_pgmpy:
        log("[graph-inference] pgmpy is not installed (pip install pgmpy): comparison skipped")
    # warm-up: compile every numba kernel outside the timings
    small = grid_instance(16, K, seed)
    small2 = grid_instance(16, 2, seed)
    backends["trws"](*small)
    backends["lp"](*small)
    backends["qpbo"](*small2)
    backends["qpbo"](*small2, exhaustive_max=0)
    if "tree" in backends:
        backends["tree"](*tree_instance(16, K, seed))
    rows = []
    for V in sizes:
        grid = grid_instance(V, K, seed)
        rows.append(_row("trws", "grid", grid, backends["trws"], repeats, log))
        if V <= lp_max_nodes:
            rows.append(_row("lp", "grid", grid, backends["lp"], repeats, log))
        rows.append(_row("qpbo", "grid", grid_instance(V, 2, seed), backends["qpbo"], repeats, log))
        if use_pgmpy and V <= pgmpy_max_nodes:
            rows.append(_row("pgmpy-mplp", "grid", grid, pgmpy_mplp, 1, log))
        tree = tree_instance(V, K, seed)
        if "tree" in backends:
            rows.append(_row("tree", "tree", tree, backends["tree"], repeats, log))
        rows.append(_row("trws", "tree", tree, backends["trws"], repeats, log))
    doc = dict(benchmark="graph-inference", sizes=list(sizes), K=K, repeats=repeats, seed=seed,
               lp_max_nodes=lp_max_nodes, pgmpy=use_pgmpy, pgmpy_max_nodes=pgmpy_max_nodes,
               grid_shapes={str(V): list(grid_shape(V)) for V in sizes},
               potentials="unary ~ N(0, 1), pairwise[e, a, b] ~ N(0, 1) i.i.d.; qpbo rows use K = 2",
               environment=environment(), rows=rows)
    write_json(out / "graph_inference.json", doc)
    plot_graph_inference(doc, out / "graph_inference.png")
    return doc


def plot_graph_inference(doc, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    series = sorted({(r["backend"], r["graph"]) for r in doc["rows"]})
    for backend, graph in series:
        sel = sorted((r for r in doc["rows"] if r["backend"] == backend and r["graph"] == graph), key=lambda r: r["V"])
        V = [r["V"] for r in sel]
        label = f"{backend} ({graph}, K={sel[0]['K']})"
        style = "-o" if graph == "grid" else "--s"
        axes[0].plot(V, [1e3 * r["seconds_per_call"] for r in sel], style, ms=4, label=label)
        # exact results (gap 0) are drawn at the floor of the log axis
        axes[1].plot(V, [max(r["rel_gap"], 1e-12) for r in sel], style, ms=4, label=label)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes V")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ms per call")
    axes[0].set_title("time per call (median)", fontsize=9)
    axes[1].set_ylabel("(bound - value) / |value|")
    axes[1].set_title("certified relative gap (1e-12 = exact)", fontsize=9)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------- command
def _click_command():
    import click

    from ._common import int_list_callback

    int_list = int_list_callback(2)

    @click.command("graph-inference")
    @click.option("--sizes", default="100,1000,10000", show_default=True, callback=int_list,
                  help="Numbers of nodes of the random grids and trees.")
    @click.option("--n-states", "K", default=4, show_default=True, type=click.IntRange(2),
                  help="Labels K of the TRW-S, LP and tree runs (QPBO always uses 2).")
    @click.option("--repeats", default=3, show_default=True, type=click.IntRange(1), help="Timed calls per case.")
    @click.option("--lp-max-nodes", default=10000, show_default=True, type=click.IntRange(0),
                  help="Largest grid given to the LP relaxation (about 50 s at 10,000 nodes, K=4).")
    @click.option("--pgmpy/--no-pgmpy", default=True, show_default=True,
                  help="Compare with pgmpy's MPLP when pgmpy is installed.")
    @click.option("--pgmpy-max-nodes", default=100, show_default=True, type=click.IntRange(0),
                  help="Largest grid given to pgmpy (pure Python: about 30 s at 100 nodes).")
    @click.option("--seed", default=0, show_default=True, type=int)
    @click.option("--out", default="bench_out/graph_inference", show_default=True, type=click.Path(file_okay=False))
    def bench_graph_inference(sizes, K, repeats, lp_max_nodes, pgmpy, pgmpy_max_nodes, seed, out):
        """Graph inference back-ends (TRW-S, LP, QPBO, tree): time per call and certified gap."""
        run_graph_inference(sizes, K, repeats, lp_max_nodes, pgmpy, pgmpy_max_nodes, seed, out, log=click.echo)
        click.echo(f"wrote {out}/graph_inference.json, graph_inference.png")

    return bench_graph_inference


bench_graph_inference = _click_command()
