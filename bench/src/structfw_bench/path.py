"""Figure 4 of Osokin et al. (2016): eps-approximate path against grid search.

Three ways to get an eps-approximate w for a range of lam, all with the same
block-coordinate engine:

- the regularisation path (Sec. 4): cumulative cost up to each breakpoint;
- grid search over lam = 2^15, 2^14, ..., 2^-15, every point solved to duality
  gap <= eps from scratch (alpha on the ground truth, w = 0): "cold";
- the same grid, each point warm-started from the previous one's alpha: "warm".

Cost is cumulative wall time and cumulative effective passes (every max-oracle
call / n, gap passes included), from the largest lam down.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np

from structfw.cli._solver_options import engine_options
from structfw.path import regularization_path
from structfw.solvers.base import Monitor, StopRule
from structfw.solvers.bcfw import BCFW
from structfw.solvers.problem import Problem

GRID = tuple(2.0 ** k for k in range(15, -16, -1))
#: training images of ``--dataset pose`` without --subsample (31 grid points x 2 searches must run in minutes)
POSE_DEFAULT_N = 50


def grid_search(model, X, Y, lams, eps, solver, warm, max_passes=500, random_state=0):
    """Solve to duality gap <= eps at every lam of ``lams`` (in the given order).

    Returns a dict of lists: lam, gap, passes, time_s, cum_passes, cum_time_s, stopped."""
    problem = Problem(model, X, Y, lams[0], validated=False)
    rng = np.random.default_rng(random_state)
    stop = StopRule(max_passes=max_passes, tol=eps, check_every=1)
    state = None
    out = {k: [] for k in ("lam", "gap", "primal", "passes", "time_s", "stopped")}
    for lam in lams:
        p = problem.with_lam(lam)
        monitor = Monitor(p, stop, dict(lam=lam), verbose=0)
        t0 = time.perf_counter()
        res = solver.solve(p, stop, state=state if warm else None, rng=rng, monitor=monitor)
        dt = time.perf_counter() - t0
        state = res.state
        tr = res.trace
        calls = tr.last("oracle_calls", 0.0) + tr.last("monitor_calls", 0.0)
        out["lam"].append(lam)
        out["gap"].append(float(res.gap))
        out["primal"].append(float(res.primal))
        out["passes"].append(calls / p.n)
        out["time_s"].append(dt)
        out["stopped"].append(res.stopped)
    out["cum_passes"] = np.cumsum(out["passes"]).tolist()
    out["cum_time_s"] = np.cumsum(out["time_s"]).tolist()
    return out


def make_engine(step="fw", sampling="perm", gap_refresh=2, cache=False):
    return BCFW(step=step, sampling=sampling, gap_refresh=gap_refresh, cache=cache)


def run_path_benchmark(subsample=None, eps=0.1, kappa=0.5, out="bench_out/path", step="fw", sampling="perm",
                       gap_refresh=2, max_passes=500, seed=0, data="ocr", verbose=1):
    """Path vs grid search (cold and warm) on OCR, the graph-cut segmentation task (``data="seg-binary"``,
    or ``"seg-binary-paper"`` at the papers' n,
    whose pairwise weights the engine keeps >= 0) or the pose tree of parts (``data="pose"``, the first
    ``subsample`` of `structfw.datasets.load_pose`'s training images, 50 by default; its deformation
    weights are kept >= 0); writes path_vs_grid.json and .png in ``out``."""
    from structfw import datasets, models

    if data == "ocr":
        X, Y = datasets.load_ocr("train")
        model = models.ChainModel(26, 128)
    elif data in ("seg-binary", "seg-binary-paper"):
        X, Y, make_model = datasets.load_segmentation(data, "train")
        model = make_model()
    elif data == "pose":
        if subsample is not None and not 1 <= int(subsample) <= 1000:
            raise ValueError(f"subsample must be in 1..1000 for the pose data, got {subsample!r}")
        tr = datasets.load_pose("train", n=int(subsample or POSE_DEFAULT_N))
        X, Y, model = list(tr.X), list(tr.Y), tr.make_model()
    else:
        raise ValueError(f"data must be 'ocr', 'seg-binary', 'seg-binary-paper' or 'pose'; got {data!r}")
    if subsample:
        X, Y = X[:subsample], Y[:subsample]
    n = len(X)
    engine = make_engine(step, sampling, gap_refresh)
    log = click.echo if verbose else (lambda *a, **k: None)
    log(f"{data} n={n}, eps={eps}, kappa={kappa}, engine {engine.label}")

    # numba warm-up outside the timings
    regularization_path(model, X[:20], Y[:20], eps=eps, kappa=kappa, solver=make_engine(step, sampling, gap_refresh),
                        min_lam=1.0)

    t0 = time.perf_counter()
    path = regularization_path(model, X, Y, eps=eps, kappa=kappa, solver=engine, min_lam=GRID[-1],
                               max_passes_per_lam=max_passes, random_state=seed)
    path_wall = time.perf_counter() - t0
    log(f"path: {len(path)} breakpoints, lam {path.breakpoints[0]:.4g} -> {path.breakpoints[-1]:.4g} "
        f"(status {path.status}), {path.cumulative_passes[-1]:.1f} effective passes, {path_wall:.2f} s")

    results = {}
    for warm in (False, True):
        name = "grid_warm" if warm else "grid_cold"
        t0 = time.perf_counter()
        g = grid_search(model, X, Y, list(GRID), eps, make_engine(step, sampling, gap_refresh), warm,
                        max_passes=max_passes, random_state=seed)
        g["wall_s"] = time.perf_counter() - t0
        results[name] = g
        bad = sum(1 for s in g["stopped"] if s != "tol")
        log(f"{name}: {g['cum_passes'][-1]:.1f} effective passes, {g['cum_time_s'][-1]:.2f} s "
            f"({bad} of {len(GRID)} points not at gap <= eps)")

    doc = dict(
        data=data, n=n, eps=eps, kappa=kappa, engine=engine.label,
        engine_params={k: v for k, v in engine.get_params().items() if isinstance(v, (int, float, str, bool))},
        grid=list(GRID),
        path=dict(breakpoints=path.breakpoints.tolist(), gaps=path.gaps.tolist(), passes=path.passes.tolist(),
                  times=path.times.tolist(), cum_passes=path.cumulative_passes.tolist(),
                  cum_time_s=path.cumulative_times.tolist(), status=path.status, lam_end=path.lam_end,
                  init_passes=path.init_passes, init_time_s=path.init_time, wall_s=path_wall),
        **results,
    )
    # cost to reach the end of the grid's range, for the summary
    doc["summary"] = summarise(doc)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "path_vs_grid.json").write_text(json.dumps(doc, indent=1))
    path.to_json(outdir / "path.json")
    try:
        plot_path_vs_grid(doc, outdir / "path_vs_grid.png")
        path.plot(outdir / "path.png")
        log(f"wrote {outdir / 'path_vs_grid.json'}, {outdir / 'path_vs_grid.png'}, {outdir / 'path.png'}")
    except ImportError as exc:  # pragma: no cover
        log(f"(no plot: {exc})")
    return doc


def summarise(doc):
    """Total passes / seconds of each method over its whole range, and to reach lam = 2^k."""
    s = {}
    p = doc["path"]
    s["path"] = dict(breakpoints=len(p["breakpoints"]), passes=p["cum_passes"][-1], time_s=p["cum_time_s"][-1],
                     status=p["status"], lam_last=p["breakpoints"][-1])
    for name in ("grid_cold", "grid_warm"):
        g = doc[name]
        s[name] = dict(points=len(g["lam"]), passes=g["cum_passes"][-1], time_s=g["cum_time_s"][-1],
                       not_converged=sum(1 for x in g["stopped"] if x != "tol"))
    # cost to cover lam >= target for a few targets
    bp = np.array(p["breakpoints"])
    targets = [2.0 ** k for k in (5, 0, -5, -10, -15)]
    rows = []
    for t in targets:
        row = {"lam": t}
        if p["status"] == "ended" or (len(bp) and p["lam_end"] <= t):
            k = int(np.count_nonzero(bp >= t))
            k = max(k, 1)
            row["path_passes"] = p["cum_passes"][k - 1]
            row["path_time_s"] = p["cum_time_s"][k - 1]
        for name in ("grid_cold", "grid_warm"):
            g = doc[name]
            k = int(np.count_nonzero(np.array(g["lam"]) >= t))
            row[name + "_passes"] = g["cum_passes"][k - 1]
            row[name + "_time_s"] = g["cum_time_s"][k - 1]
        rows.append(row)
    s["to_reach"] = rows
    return s


def plot_path_vs_grid(doc, path=None):
    from structfw.plotting import _plt

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    p = doc["path"]
    for ax, key, lab in ((axes[0], "cum_time_s", "cumulative time (s)"),
                         (axes[1], "cum_passes", "cumulative effective passes")):
        ax.plot(p["breakpoints"], p[key], "-", marker=".", ms=3, label=f"eps-path ({len(p['breakpoints'])} breakpoints)")
        for name, lab2, mk in (("grid_cold", "grid search", "s"), ("grid_warm", "grid search + warm start", "o")):
            g = doc[name]
            ax.plot(g["lam"], g[key], "-", marker=mk, ms=3, label=lab2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("lambda (computed from large to small)")
        ax.set_ylabel(lab)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{doc.get('data', 'ocr')} n={doc['n']}, eps={doc['eps']}, {doc['engine']}: path vs grid search (Osokin et al. 2016, Fig. 4)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


@click.command("path")
@click.option("--subsample", type=int, default=None,
              help="Use the first N training examples (default: all 6,251 OCR words; pose: 50 images).")
@click.option("--eps", default=0.1, show_default=True, help="Target duality gap of path and grid points.")
@click.option("--kappa", default=0.5, show_default=True, help="Path breakpoints are solved to kappa*eps.")
@engine_options(step="fw", sampling="perm", gap_refresh=2)  # one engine for the path and the grid
@click.option("--max-passes", default=500, show_default=True, help="Passes allowed per lam.")
@click.option("--seed", default=0, show_default=True)
@click.option("--out", default="bench_out/path", show_default=True, type=click.Path(file_okay=False),
              help="Folder for path_vs_grid.json/.png, path.json/.png.")
@click.option("--dataset", "data", type=click.Choice(["ocr", "seg-binary", "seg-binary-paper", "pose"]), default="ocr",
              show_default=True, help="OCR (chain), the graph-cut segmentation task (60 images, or 2,376 at the "
                                      "MP-BCFW paper's HorseSeg size), or the pose tree of parts (LSP-like).")
def bench_path(subsample, eps, kappa, step, sampling, gap_refresh, max_passes, seed, out, data):
    """Regularisation path vs grid search over lam = 2^15..2^-15 with/without warm start (paper Fig. 4)."""
    try:
        doc = run_path_benchmark(subsample, eps, kappa, out, step, sampling, gap_refresh, max_passes, seed, data)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    s = doc["summary"]
    click.echo(f"{'method':<12} {'points':>7} {'passes':>9} {'time s':>8}")
    click.echo(f"{'path':<12} {s['path']['breakpoints']:>7} {s['path']['passes']:>9.1f} {s['path']['time_s']:>8.2f}")
    for name in ("grid_cold", "grid_warm"):
        click.echo(f"{name:<12} {s[name]['points']:>7} {s[name]['passes']:>9.1f} {s[name]['time_s']:>8.2f}")
