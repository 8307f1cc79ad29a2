"""`GraphModel` on a real loopy task: time to a certified gap, and what the pairwise terms buy.

Used by ``structfw bench graph-task``.  The task is ``seg-graph`` (or ``seg-graph-binary``,
`structfw.datasets.load_superpixel_graphs`): SLIC superpixel region-adjacency graphs of
generated scene images, 60 training and 40 test images of about 280 superpixels.  The
graphs have cycles, so the max oracle is approximate (TRW-S with K = 6; QPBO or TRW-S
with K = 2) and the engine certifies the gap with the back-ends' bounds
(``certified_gap`` in the trace; ``tol`` applies to it).

For each solver (BCFW and MP-BCFW by default) it fits ``GraphModel(pairwise="potts")`` at
lam = 1/n with ``tol`` = the target certified gap and a checkpoint every pass, and
records the oracle's gap and the certified gap against passes and optimisation time
(monitoring excluded), the time at which the certified gap first reaches the target
(interpolated between checkpoints; NaN when it does not within the budget: the smallest
certified gap reached is then reported), and the per-node test accuracy
(`structfw.metrics.token_accuracy`).  The baseline is the same model on the same graphs
with their edges removed (`structfw.datasets.without_edges`: unary terms only, exact
inference), fitted by BCFW to the same target.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ._common import crossing, environment, parse_lam, pyplot, write_json

SOLVERS = ("bcfw", "mpbcfw")


def _solver(name):
    from structfw.solvers import BCFW, MPBCFW

    return {"bcfw": BCFW(), "bcfw-pairwise-gap": BCFW(step="pairwise", sampling="gap"), "mpbcfw": MPBCFW()}[name]


def _columns(trace, names):
    return {c: [None if not math.isfinite(float(v)) else float(v) for v in trace[c]]
            for c in names if c in trace.columns}


def _fit(model, solver, X, Y, Xt, Yt, lam, passes, target, seed, time_budget):
    from structfw import StructuredSVM
    from structfw.metrics import token_accuracy

    svm = StructuredSVM(model, solver=solver, lam=lam, max_passes=passes, tol=target, check_every=1,
                        time_budget=time_budget, random_state=seed)
    t0 = time.perf_counter()
    svm.fit(X, Y)
    wall = time.perf_counter() - t0
    tr = svm.trace_
    cols = _columns(tr, ("passes", "oracle_calls", "monitor_calls", "time_s", "primal", "dual", "gap",
                         "primal_bound", "certified_gap"))
    gap = np.asarray(tr["certified_gap"] if "certified_gap" in tr.columns else tr["gap"], float)
    t = np.asarray(tr["time_s"], float)
    p = np.asarray(tr["passes"], float)
    return dict(stopped=svm.stopped_, wall_s=wall, columns=cols,
                certified=bool("certified_gap" in tr.columns),
                time_to_target_s=crossing(t, gap, target), passes_to_target=crossing(p, gap, target),
                final_certified_gap=float(gap[-1]), smallest_certified_gap=float(np.nanmin(gap)),
                final_oracle_gap=float(tr["gap"][-1]), passes=float(p[-1]), time_s=float(t[-1]),
                test_accuracy=float(token_accuracy(Yt, svm.predict(Xt))),
                train_accuracy=float(token_accuracy(Y, svm.predict(X))))


def run_graph_task(data="seg-graph", solvers=SOLVERS, lam="1/n", passes=60, target=0.01, seed=0,
                   time_budget=None, out="bench_out/graph_task", log=print):
    """Run the benchmark; writes ``graph_task.json`` and ``graph_task.png`` to ``out``; returns the doc."""
    from structfw.datasets import load_superpixel_graphs, without_edges

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    X, Y, make_model = load_superpixel_graphs(data, "train")
    Xt, Yt, _ = load_superpixel_graphs(data, "test")
    lam_value = parse_lam(lam, len(X))
    model = make_model()
    backends = sorted({model.inference_backend(x, np.ones(model.size_joint_feature)) for x in X})
    sizes = dict(nodes=float(np.mean([x[0].shape[0] for x in X])), edges=float(np.mean([len(x[1]) for x in X])))
    log(f"[graph-task] {data}: n={len(X)} train / {len(Xt)} test graphs, {sizes['nodes']:.0f} nodes and "
        f"{sizes['edges']:.0f} edges on average, K={model.n_states}, lam={lam_value:.4g}")
    # compile the kernels outside the timings
    from structfw import StructuredSVM

    StructuredSVM(make_model(), lam=lam_value, max_passes=1, tol=None, random_state=seed).fit(X[:2], Y[:2])
    runs = {}
    for name in solvers:
        r = _fit(make_model(), _solver(name), X, Y, Xt, Yt, lam_value, passes, target, seed, time_budget)
        runs[name] = r
        log(f"[graph-task] {name:>8s}: {r['stopped']} after {r['passes']:.0f} passes / {r['time_s']:.2f} s "
            f"(wall {r['wall_s']:.1f} s); certified gap {r['final_certified_gap']:.2e} (oracle gap "
            f"{r['final_oracle_gap']:.2e}); to {target:g}: {r['time_to_target_s']:.2f} s, "
            f"{r['passes_to_target']:.1f} passes; test accuracy {r['test_accuracy']:.4f}")
    base = _fit(make_model(), _solver("bcfw"), without_edges(X), Y, without_edges(Xt), Yt, lam_value, passes,
                target, seed, time_budget)
    log(f"[graph-task] no edges: {base['stopped']} after {base['passes']:.0f} passes, gap "
        f"{base['final_oracle_gap']:.2e}; test accuracy {base['test_accuracy']:.4f}")
    doc = dict(benchmark="graph-task", data=data, n_train=len(X), n_test=len(Xt), K=model.n_states,
               model=model.get_config(), lam=lam_value, lam_spec=str(lam), passes=passes, target=target,
               seed=seed, time_budget=time_budget, mean_sizes=sizes, train_backends=backends,
               runs=runs, unary_only=base, environment=environment())
    write_json(out / "graph_task.json", doc)
    plot_graph_task(doc, out / "graph_task.png")
    return doc


def plot_graph_task(doc, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for k, (name, r) in enumerate(doc["runs"].items()):
        c = r["columns"]
        colour = f"C{k}"
        p = np.asarray(c["passes"], float)
        t = np.asarray(c["time_s"], float)
        gap = np.asarray([np.nan if v is None else v for v in c["gap"]], float)
        cert = np.asarray([np.nan if v is None else v for v in c.get("certified_gap", c["gap"])], float)
        axes[0].plot(p, np.maximum(cert, 1e-8), "-", color=colour, label=f"{name}: certified gap")
        axes[0].plot(p, np.maximum(gap, 1e-8), ":", color=colour, label=f"{name}: oracle gap")
        axes[1].plot(t, np.maximum(cert, 1e-8), "-", color=colour, label=f"{name}: certified gap")
    for ax in axes:
        ax.set_yscale("log")
        ax.axhline(doc["target"], color="grey", lw=0.8, ls="--")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylabel("duality gap")
    axes[0].set_xlabel("passes")
    axes[1].set_xlabel("optimisation time (s, monitoring excluded)")
    acc = ", ".join(f"{n} {r['test_accuracy']:.3f}" for n, r in doc["runs"].items())
    axes[0].set_title(f"{doc['data']}, lam={doc['lam']:.3g}", fontsize=9)
    axes[1].set_title(f"test accuracy: {acc}; no edges {doc['unary_only']['test_accuracy']:.3f}", fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _click_command():
    import click

    def solver_list(ctx, param, value):
        names = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in names if v not in ("bcfw", "bcfw-pairwise-gap", "mpbcfw")]
        if bad or not names:
            raise click.BadParameter(f"expected a comma-separated list of bcfw, bcfw-pairwise-gap, mpbcfw; "
                                     f"got {value!r}")
        return names

    @click.command("graph-task")
    @click.option("--data", type=click.Choice(["seg-graph", "seg-graph-binary"]), default="seg-graph",
                  show_default=True, help="The superpixel graph task (6 or 2 classes).")
    @click.option("--solvers", default=",".join(SOLVERS), show_default=True, callback=solver_list,
                  help="Solvers to run: bcfw, bcfw-pairwise-gap, mpbcfw.")
    @click.option("--lam", default="1/n", show_default=True, help="Regularisation: a float or 'c/n'.")
    @click.option("--passes", default=60, show_default=True, type=click.IntRange(1), help="Most passes per run.")
    @click.option("--target", default=0.01, show_default=True, type=click.FloatRange(0, min_open=True),
                  help="Certified duality gap to reach (the runs' tol).")
    @click.option("--time-budget", default=None, type=float, help="Seconds of optimisation per run.")
    @click.option("--seed", default=0, show_default=True, type=int)
    @click.option("--out", default="bench_out/graph_task", show_default=True, type=click.Path(file_okay=False))
    def bench_graph_task(data, solvers, lam, passes, target, time_budget, seed, out):
        """GraphModel on superpixel graphs: time to a certified gap, accuracy with and without edges."""
        run_graph_task(data, solvers, lam, passes, target, seed, time_budget, out, log=click.echo)
        click.echo(f"wrote {out}/graph_task.json, graph_task.png")

    return bench_graph_task


bench_graph_task = _click_command()
