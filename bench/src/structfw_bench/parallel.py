"""``structfw bench parallel``: minibatch-parallel BCFW (Wang et al., ICML 2016) on the graph-cut task.

Duality gap against time and against oracle calls for tau in {1, 2, 4, 8, 16}, the
synchronous minibatch (tau oracles at once, then tau steps) and the asynchronous
window (tau calls in flight), with 1 and 2 workers on local threads, local processes
and a local Ray cluster.  The task is binary figure-ground segmentation
(`structfw.datasets.make_horseseg_like`, 64 x 64 pixel grids, one exact min cut
per oracle call: ~1-2 ms) at lam = 1/n; every run stops at the target gap (checked
after every pass; the check's own oracle pass is not timed).

Reported: the time and the oracle calls to the target gap, the speed-up over the
serial run (tau = 1, one worker), the per-call overhead of each executor (measured
with a model whose oracle returns at once), and the fitted speed-up model of the
"Scaling out" documentation page: per step the serial run spends t_o in the oracle
and t_s in the step; with p workers a synchronous minibatch step costs
t_s + t_o ceil(tau / p) / tau + c / tau and an asynchronous one max(t_s + c_s, t_o / min(p, tau))
(tau calls in flight keep min(p, tau) workers busy while the steps run),
where c is the executor's per-call round trip and c_s its cost on the step's side.  On one
machine the workers and the stepping thread share its C cores, so a step also costs at least
(t_o + t_s + 2 c_1) / C, c_1 the single-call overhead paid once on each side (pickling, the
object store).  The staleness factor r(tau) = (oracle calls to the target at tau) / (calls at
tau = 1) is measured; the predicted speed-up is (t_o + t_s) / step time / r(tau).
Writes parallel.json, parallel.png and parallel.md under ``--out``.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np

from ._common import bands, crossing, environment, pyplot, write_json

TAUS = (1, 2, 3, 4, 8, 16)  # the set, and 3 = n_jobs + 1 for the asynchronous window
EXECUTOR_KINDS = ("thread", "process", "ray")


class InstantModel:
    """A model whose oracles return at once: what an executor call costs besides the oracle."""

    def __init__(self, d):
        self.size_joint_feature = d

    def loss_augmented_decode(self, x, y, w):
        return y

    def decode(self, x, w):
        return x


def load_task(n_images=60, size=64, seed=0):
    """(X, Y, model) of the graph-cut benchmark task."""
    from structfw.datasets import make_horseseg_like
    from structfw.models import GraphCutModel

    X, Y = make_horseseg_like(n_images=n_images, size=size, seed=seed)
    return X, Y, GraphCutModel(n_features=X[0][0].shape[1], n_edge_features=X[0][2].shape[1])


def make_executor(kind, workers):
    from structfw.executor import SerialExecutor, get_executor

    if kind == "serial":
        return SerialExecutor()
    return get_executor(workers, kind)


def call_overhead(kind, workers, d, reps=200):
    """Median seconds of one single-block submit/result round trip and of one 2-block blocking call
    with an instant oracle (the executor's own cost per call)."""
    ex = make_executor(kind, workers)
    try:
        n = 64
        key = ex.bind(InstantModel(d), [np.zeros(1)] * n, [np.zeros(1)] * n)
        w = np.zeros(d)
        for _ in range(10):  # start the workers
            ex.loss_augmented_decode(key, w, [0, 1])
        single, pair = [], []
        for r in range(reps):
            t0 = time.perf_counter()
            ex.submit(key, w.copy(), [r % n]).result()
            t1 = time.perf_counter()
            ex.loss_augmented_decode(key, w, [r % n, (r + 1) % n])
            single.append(t1 - t0)
            pair.append(time.perf_counter() - t1)
        return float(np.median(single)), float(np.median(pair))
    finally:
        ex.close()


def _median_reached(values):
    """Median over the seeds that reached the target; NaN (not a warning) when none did."""
    reached = [float(v) for v in values if v is not None and np.isfinite(v)]
    return float(np.median(reached)) if reached else float("nan")


def fit_run(X, Y, model, executor, tau, asynchronous, seed, target, max_passes, cache=False):
    """One fit to the target gap; its trace columns and the time / oracle calls to the target.
    ``cache``: BCFW's gap-based cache of past corners (Osokin et al. 2016), the option the
    costly-oracle benchmark (Figure 3c) recommends."""
    from structfw.solvers import BCFW, Monitor, Problem, StopRule

    # the solver API rather than the estimator: one executor (its started workers) serves every run
    problem = Problem(model, X, Y, 1.0 / len(X), executor=executor)
    stop = StopRule(max_passes=max_passes, tol=target, check_every=1)
    solver = BCFW(minibatch=tau, asynchronous=asynchronous and tau > 1, cache=cache)
    tr = solver.solve(problem, stop, rng=seed, monitor=Monitor(problem, stop, {"solver": "bcfw"})).trace
    cols = {c: [float(v) for v in tr[c]] for c in ("passes", "oracle_calls", "time_s", "gap", "oracle_time_frac")}
    gap = np.fmin.accumulate(np.asarray(cols["gap"]))
    return dict(seed=seed, columns=cols,
                time_to_target=crossing(cols["time_s"], gap, target),
                calls_to_target=crossing(cols["oracle_calls"], gap, target),
                time_per_call=cols["time_s"][-1] / max(cols["oracle_calls"][-1], 1.0),
                oracle_frac=cols["oracle_time_frac"][-1])


def configurations(kinds, workers, taus):
    """(name, executor kind, workers, tau, asynchronous) of every run; 'serial' is one worker in-process."""
    out = [("serial", "serial", 1, 1, False)]
    for kind in kinds:
        for p in workers:
            if p == 1 and kind != "ray":
                continue  # one local thread or process is the serial executor
            for tau in taus:
                for asy in (False, True):
                    if asy and tau == 1:
                        continue
                    out.append((f"{kind}-{p}", kind, p, tau, asy))
    return out


def speedup_model(serial, overhead, staleness, workers, tau, asynchronous, cores=None):
    """Predicted speed-up over the serial run (module docstring); ``overhead`` is
    (c: the tau-block call, c_s: the step side's share, c_1: one single call); ``cores``
    the cores the workers and the stepping thread share (None: a worker each, a cluster)."""
    t_o, t_s = serial["t_o"], serial["t_s"]
    c_call, c_side, c_single = overhead
    if tau == 1:
        return 1.0 / staleness  # one block a step: the engine's serial path, the executor unused
    if asynchronous:
        step = max(t_s + c_side, t_o / min(workers, tau))
    else:
        step = t_s + t_o * math.ceil(tau / workers) / tau + c_call / tau  # the batch waits for its last call
    if cores and workers > 1:
        step = max(step, (t_o + t_s + 2.0 * c_single) / cores)
    return (t_o + t_s) / step / staleness


def run_parallel(kinds=EXECUTOR_KINDS, workers=(1, 2), taus=TAUS, seeds=3, target=0.01, n_images=240, size=64,
                 max_passes=60, out="bench_out/parallel", log=print, cache=False):
    """Run the benchmark; writes parallel.json / .png / .md to ``out``; returns the JSON document."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    X, Y, model = load_task(n_images, size)
    d = model.size_joint_feature
    doc = dict(benchmark="parallel", task=f"make_horseseg_like(n_images={n_images}, size={size})", n=len(X),
               lam="1/n", solver="BCFW with the cache" if cache else "BCFW", target_gap=target, seeds=seeds, taus=list(taus), workers=list(workers),
               executors=list(kinds), environment=environment(), cores=os.cpu_count(), overhead_ms={}, runs={})
    for kind in ("serial",) + tuple(kinds):
        for p in (workers if kind == "ray" else [1 if kind == "serial" else max(workers)]):
            single, pair = call_overhead(kind, p, d)
            doc["overhead_ms"][f"{kind}-{p}"] = dict(single_call=1e3 * single, two_block_call=1e3 * pair)
            log(f"overhead {kind}-{p}: single call {1e3 * single:.3f} ms, 2-block call {1e3 * pair:.3f} ms")
    executors, results = {}, {}
    configs = configurations(kinds, workers, taus)
    try:
        for name, kind, p, tau, asy in configs:
            if name not in executors:
                executors[name] = make_executor(kind, p)
                # first fit: workers start, kernels load (not measured)
                fit_run(X, Y, model, executors[name], 2, False, 0, 1.0, 1, cache)
        # seed-major: every configuration meets the machine's load of the moment alike
        for seed in range(seeds):
            for name, kind, p, tau, asy in configs:
                results.setdefault((name, tau, asy), []).append(
                    fit_run(X, Y, model, executors[name], tau, asy, seed, target, max_passes, cache))
    finally:
        for ex in executors.values():
            ex.close()
    for name, kind, p, tau, asy in configs:
        runs = results[(name, tau, asy)]
        label = f"{name} tau={tau}{' async' if asy else ''}"
        doc["runs"][label] = dict(executor=kind, workers=p, tau=tau, asynchronous=asy, seeds=runs,
                                  time_to_target=_median_reached([r["time_to_target"] for r in runs]),
                                  calls_to_target=_median_reached([r["calls_to_target"] for r in runs]),
                                  time_per_call=float(np.median([r["time_per_call"] for r in runs])))
        e = doc["runs"][label]
        log(f"{label:28s} to gap {target:g}: {e['time_to_target']:.3f} s, {e['calls_to_target']:.0f} calls; "
            f"{1e3 * e['time_per_call']:.3f} ms per call")
    summarise(doc)
    write_json(out / "parallel.json", doc)
    plot_parallel(doc, out / "parallel.png")
    (out / "parallel.md").write_text(markdown(doc))
    return doc


def summarise(doc):
    """Speed-ups, staleness factors and the model's predictions, into doc["summary"]."""
    runs = doc["runs"]
    ser = runs["serial tau=1"]
    frac = np.median([r["oracle_frac"] for r in ser["seeds"]])
    t_call = ser["time_per_call"]
    serial = dict(t_o=frac * t_call, t_s=(1 - frac) * t_call)
    base_calls, base_time = ser["calls_to_target"], ser["time_to_target"]
    rows = []
    for label, e in runs.items():
        staleness = e["calls_to_target"] / base_calls
        key = f"{e['executor']}-{e['workers']}"
        ov = doc["overhead_ms"].get(key) or doc["overhead_ms"].get(
            next((k for k in doc["overhead_ms"] if k.startswith(e["executor"])), "serial-1"))
        overhead = (1e-3 * ov["two_block_call"], 1e-3 * ov["single_call"] / 2, 1e-3 * ov["single_call"])
        predicted = speedup_model(serial, overhead, staleness, e["workers"], e["tau"], e["asynchronous"],
                                  doc.get("cores"))
        rows.append(dict(run=label, speedup=base_time / e["time_to_target"], staleness=staleness,
                         predicted_speedup=predicted, time_to_target=e["time_to_target"],
                         calls_to_target=e["calls_to_target"]))
    best2 = max((r for r in rows if runs[r["run"]]["workers"] == 2 and math.isfinite(r["speedup"])),
                key=lambda r: r["speedup"], default=None)
    t16 = [r["staleness"] for r in rows if runs[r["run"]]["tau"] == 16]
    doc["summary"] = dict(serial_step=serial, rows=rows, best_two_worker=best2,
                          staleness_at_tau16=dict(min=min(t16, default=math.nan), max=max(t16, default=math.nan)),
                          saturation_workers=(serial["t_o"] / serial["t_s"]),
                          saturation_by_executor={k: serial["t_o"] / (serial["t_s"] + 0.5e-3 * v["single_call"])
                                                  for k, v in doc["overhead_ms"].items() if not k.startswith("serial")})


def markdown(doc):
    s = doc["summary"]
    lines = [f"# structfw bench parallel ({doc.get('solver', 'BCFW')}, {doc['task']}, lam = 1/n, "
             f"target gap {doc['target_gap']:g}, "
             f"median of {doc['seeds']} seeds)", "",
             f"Serial step: oracle t_o = {1e3 * s['serial_step']['t_o']:.3f} ms, step t_s = "
             f"{1e3 * s['serial_step']['t_s']:.3f} ms; the asynchronous model saturates near "
             f"p = t_o / t_s = {s['saturation_workers']:.1f} workers with a free executor; with each "
             "executor's step-side cost c_s = c_1 / 2, near p = t_o / (t_s + c_s): "
             + ", ".join(f"{k.split('-')[0]} {v:.1f}" for k, v in s.get("saturation_by_executor", {}).items()
                         if k.endswith("-2")) + f" (and at the {doc.get('cores', '?')} cores of one machine).", "",
             "| executor | single call (ms) | 2-block call (ms) |", "|---|---|---|"]
    lines += [f"| {k} | {v['single_call']:.3f} | {v['two_block_call']:.3f} |" for k, v in doc["overhead_ms"].items()]
    lines += ["", "| run | time to target (s) | oracle calls | speed-up | predicted | staleness r(tau) |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['time_to_target']:.3f} | {r['calls_to_target']:.0f} | {r['speedup']:.2f} | "
              f"{r['predicted_speedup']:.2f} | {r['staleness']:.2f} |" for r in s["rows"]]
    return "\n".join(lines) + "\n"


def plot_parallel(doc, path):
    plt = pyplot()
    runs = doc["runs"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for label, e in runs.items():
        if e["tau"] not in (1, 4, 16) and label != "serial tau=1":
            continue
        style = "--" if e["asynchronous"] else "-"
        for ax, x in zip(axes[:2], ("time_s", "oracle_calls")):
            grid = np.linspace(0, max(max(r["columns"][x]) for r in e["seeds"]), 60)
            rows = [np.interp(grid, r["columns"][x], np.fmin.accumulate(r["columns"]["gap"]), right=np.nan)
                    for r in e["seeds"]]
            ax.plot(grid, bands(rows)["median"], style, label=label, lw=1.2)
    for ax, x in zip(axes[:2], ("time (s, optimisation)", "oracle calls")):
        ax.set_yscale("log")
        ax.axhline(doc["target_gap"], color="k", lw=0.6)
        ax.set_xlabel(x)
        ax.set_ylabel("duality gap")
    axes[0].legend(fontsize=6, ncol=2)
    rows = doc["summary"]["rows"]
    for kind in sorted({runs[r["run"]]["executor"] for r in rows} - {"serial"}):
        for p in sorted({runs[r["run"]]["workers"] for r in rows}):
            for asy in (False, True):
                sel = [r for r in rows if runs[r["run"]]["executor"] == kind and runs[r["run"]]["workers"] == p
                       and runs[r["run"]]["asynchronous"] == asy]
                if sel:
                    taus = [runs[r["run"]]["tau"] for r in sel]
                    axes[2].plot(taus, [r["speedup"] for r in sel], "-o" if not asy else "--s", ms=3,
                                 label=f"{kind}-{p}{' async' if asy else ''}")
    axes[2].axhline(1.0, color="k", lw=0.6)
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("tau")
    axes[2].set_ylabel("speed-up to the target gap (vs serial)")
    if axes[2].get_legend_handles_labels()[0]:  # no speed-up to show when no run reached the target
        axes[2].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _click_command():
    import click

    from structfw.cli._solver_options import engine_options
    from ._common import int_list_callback

    int_list = int_list_callback(1)

    @click.command("parallel")
    @click.option("--executor", "kinds", multiple=True, type=click.Choice(EXECUTOR_KINDS), default=EXECUTOR_KINDS,
                  show_default=True, help="Executors to measure (repeat the option for several).")
    @click.option("--workers", default="1,2", show_default=True, callback=int_list, help="Worker counts.")
    @click.option("--taus", default="1,2,3,4,8,16", show_default=True, callback=int_list, help="Minibatch sizes tau.")
    @click.option("--seeds", default=3, show_default=True, type=click.IntRange(1), help="Random seeds per run.")
    @click.option("--target", default=0.01, show_default=True, type=click.FloatRange(0, min_open=True),
                  help="Duality gap to reach.")
    @click.option("--n-images", default=240, show_default=True, type=click.IntRange(2), help="Training images.")
    @click.option("--size", default=64, show_default=True, type=click.IntRange(8), help="Image side in pixels.")
    @click.option("--max-passes", default=60, show_default=True, type=click.IntRange(1))
    @engine_options(cache=False)  # for every run
    @click.option("--out", default="bench_out/parallel", show_default=True, type=click.Path(file_okay=False))
    def bench_parallel(kinds, workers, taus, seeds, target, n_images, size, max_passes, cache, out):
        """Minibatch-parallel BCFW: time and oracle calls to a duality gap on the graph-cut task."""
        if "ray" in kinds:
            try:
                import ray  # noqa: F401
            except ImportError:
                raise click.UsageError("--executor ray needs Ray: pip install 'structfw[distributed]'") from None
        run_parallel(kinds, workers, taus, seeds, target, n_images, size, max_passes, out, log=click.echo, cache=cache)
        click.echo(f"wrote {out}/parallel.json, parallel.md, parallel.png")

    return bench_parallel


bench_parallel = _click_command()
