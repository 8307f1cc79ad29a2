"""``structfw bench mpbcfw``: Figures 4-6 of Shah, Kolmogorov, Lampert (2015).

BCFW, BCFW-avg, MP-BCFW and MP-BCFW-avg (and the 2016 paper's BCPFW-gap-cache for
comparison) at lam = 1/n on four tasks: multiclass (scikit-learn's bundled digits,
1,797 8x8 images: the USPS-like set available offline), OCR, the binary graph-cut
segmentation task (seg-binary) and the Potts task (seg-multi).  For each run:
primal suboptimality P(w) - D_best, dual suboptimality P_best - D(alpha) and the
duality gap, against oracle calls and against time (median and min-max over seeds;
D_best / P_best are the best dual / primal values any run reached), plus the mean
working-set size and the approximate passes per outer iteration (Figure 6).
Writes mpbcfw.json, mpbcfw.png and mpbcfw.md under ``--out``.

``--oracle-cost-us C`` makes every max-oracle call cost at least C µs more (a busy wait in the
call, counted as oracle time; `structfw_bench._oracle_cost`), for every variant alike: the
paper's OCR oracle took about 50 µs, 70 % of BCFW's run time (Sec. 4.1), ours about 6 µs.
Such runs take the engine's Python route (the compiled passes run the oracle inside numba,
where no wait can be added); ``--oracle-cost-us 0`` gives that route without the wait.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ._common import bands, col, crossing, environment, first_reach, on_grid, plan_fits, pyplot, run_fit, write_json

DATASETS = ("digits", "ocr", "seg-binary", "seg-multi")


def variants():
    from structfw.solvers import BCFW, MPBCFW

    return {
        "BCFW": BCFW(),
        "BCFW-avg": BCFW(averaging="weighted"),
        # the slope rule in seconds (Shah et al. Sec. 3.4), as in docs/results/mpbcfw.md's measurements; the
        # default since is approx_rule="work" (reproducible, exactly resumable)
        "MP-BCFW": MPBCFW(approx_rule="time"),
        "MP-BCFW-avg": MPBCFW(averaging="weighted", approx_rule="time"),
        "BCPFW-gap-cache": BCFW(step="pairwise", sampling="gap", cache=True),
    }


def load_task(name, subsample=None):
    """(X, Y, model) of a benchmark task (training data only: the paper uses all data for learning)."""
    from structfw import datasets, models

    if name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        Xd = d.data / 16.0
        X, Y = list(np.hstack([Xd, np.ones((len(Xd), 1))])), list(d.target)
        model = models.MulticlassModel(n_classes=10, n_features=65)
    elif name == "ocr":
        X, Y = datasets.load_ocr("train")
        model = models.ChainModel(26, 128)
    elif name in ("seg-binary", "seg-multi"):
        X, Y, make_model = datasets.load_segmentation(name, "train")
        model = make_model()
    else:
        raise ValueError(f"dataset must be one of {DATASETS}; got {name!r}")
    if subsample:
        X, Y = X[:int(subsample)], Y[:int(subsample)]
    return X, Y, model


#: the single-plane variants, whose budget ``bcfw_passes`` may exceed the multi-plane ones
SINGLE_PLANE = ("BCFW", "BCFW-avg")


def run_dataset(name, passes, seeds, subsample=None, log=print, names=None, bcfw_passes=None, oracle_cost_us=None):
    """Every variant's runs on one task; BCFW and BCFW-avg get ``bcfw_passes`` passes (default
    ``passes``): a longer single-plane run sets a tighter g_B, the gap the targets are read at.
    ``oracle_cost_us``: every max-oracle call costs that many µs more (None: the compiled route)."""
    X, Y, model = load_task(name, subsample)
    if oracle_cost_us is not None:
        from ._oracle_cost import with_oracle_cost

        model = with_oracle_cost(model, oracle_cost_us)
    n = len(X)
    lam = 1.0 / n
    runs = {}
    plan_fits(seeds * sum(1 for label in variants() if not names or label in names))
    for label, solver in variants().items():
        if names and label not in names:
            continue
        runs[label] = []
        budget = bcfw_passes if bcfw_passes and label in SINGLE_PLANE else passes
        for seed in range(seeds):
            run, svm = run_fit(model, solver, X, Y, lam, budget, seed, check_every=1)
            runs[label].append(run)
            log(f"[mpbcfw] {name} {label} seed {seed}: gap {col(run, 'gap')[-1]:.3e}, "
                f"{col(run, 'oracle_calls')[-1] / n:.0f} oracle passes, {col(run, 'time_s')[-1]:.1f} s")
    return dict(n=n, lam=lam, d=model.size_joint_feature, model=type(model).__name__, runs=runs,
                oracle_cost_us=oracle_cost_us)


#: effective passes (oracle calls / n) at which the table compares the primal (Shah et al. Sec. 4.1:
#: "within the same number of calls to the max-oracle, MP-BCFW always achieves lower primal
#: suboptimality than BCFW")
PRIMAL_AT = (4, 8, 12)


def summarise(entry):
    """Curves on common grids and the targets' figures for one dataset."""
    runs, n = entry["runs"], entry["n"]
    P_best = min(np.nanmin(col(r, "primal")) for rs in runs.values() for r in rs)
    D_best = max(np.nanmax(col(r, "dual")) for rs in runs.values() for r in rs)
    max_calls = max(col(r, "oracle_calls")[-1] for rs in runs.values() for r in rs) / n
    max_time = max(col(r, "time_s")[-1] for rs in runs.values() for r in rs)
    calls_grid = np.linspace(0, max_calls, 60)
    time_grid = np.geomspace(max(1e-3, max_time / 1e3), max_time, 60)
    out = dict(P_best=P_best, D_best=D_best, calls_grid=calls_grid.tolist(), time_grid=time_grid.tolist(),
               curves={}, reach={})
    # gap targets relative to what plain BCFW reaches at the end of its budget (g_B): the targets
    # 4 g_B, 2 g_B, g_B ask how many oracle passes / seconds each variant needs for BCFW's result
    # (the largest over seeds of BCFW's best gap, so that every BCFW run reaches g_B)
    g_B = float(np.max([np.nanmin(col(r, "gap")) for r in runs.get("BCFW", next(iter(runs.values())))]))
    gap_targets = tuple(c * g_B for c in (4.0, 2.0, 1.0, 0.5))
    out["gap_bcfw_end"] = g_B
    for label, rs in runs.items():
        curves = {}
        for key, fn in (("primal_sub", lambda r: col(r, "primal") - D_best),
                        ("dual_sub", lambda r: P_best - col(r, "dual")),
                        ("gap", lambda r: col(r, "gap"))):
            curves[key + "_calls"] = bands([on_grid(col(r, "oracle_calls") / n, fn(r), calls_grid) for r in rs])
            curves[key + "_time"] = bands([on_grid(col(r, "time_s"), fn(r), time_grid) for r in rs])
        if "planes_per_block" in rs[0]["columns"]:
            curves["planes_per_block"] = [col(r, "planes_per_block").tolist() for r in rs]
            curves["approx_passes"] = [col(r, "approx_passes").tolist() for r in rs]
        out["curves"][label] = curves
        # the primal at equal oracle calls (interpolated linearly in the calls between checkpoints),
        # median over seeds, and the share of optimisation time spent in the oracle
        out.setdefault("primal_at", {})[label] = {
            str(k): _nanmedian([_interp(col(r, "oracle_calls") / n, col(r, "primal"), k) for r in rs])
            for k in PRIMAL_AT}
        frac = [col(r, "oracle_time_frac")[-1] for r in rs if col(r, "oracle_time_frac") is not None]
        out.setdefault("oracle_time_frac", {})[label] = _nanmedian(frac) if frac else math.nan
        # oracle passes and seconds to reach each gap (median over seeds); the running minimum of
        # the gap, since the gap of an iterate fluctuates.  Interpolated log-linearly between the
        # two checkpoints around the crossing: MP-BCFW checkpoints once an outer iteration, so
        # reading the first checkpoint below the target rounds its ~10 passes up by up to one
        # (10 %), BCFW's ~30 by up to 3 %; the whole-checkpoint figures are kept beside them
        reach = {}
        for g in gap_targets:
            runs_g = [(col(r, "oracle_calls") / n, col(r, "time_s"), np.fmin.accumulate(col(r, "gap"))) for r in rs]
            reach[str(g)] = dict(passes=_nanmedian([crossing(c, gg, g) for c, _, gg in runs_g]),
                                 seconds=_nanmedian([crossing(t, gg, g) for _, t, gg in runs_g]),
                                 passes_at_checkpoint=_nanmedian([first_reach(c, gg, g) for c, _, gg in runs_g]),
                                 seconds_at_checkpoint=_nanmedian([first_reach(t, gg, g) for _, t, gg in runs_g]))
        out["reach"][label] = reach
    return out


def _interp(x, y, at):
    """y at x = ``at`` by linear interpolation; NaN outside the run."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) == 0 or at < x[0] or at > x[-1]:
        return math.nan
    return float(np.interp(at, x, y))


def _nanmedian(v):
    v = np.asarray(v, float)
    return float(np.median(v)) if np.all(np.isfinite(v)) else math.nan


def resummarise(path):
    """Recompute the summaries, table and figure of a saved mpbcfw.json (after a change of the summary)."""
    import json

    path = Path(path)
    doc = json.loads(path.read_text())
    for entry in doc["datasets"].values():
        entry["summary"] = summarise(entry)
    write_json(path, doc)
    (path.parent / "mpbcfw.md").write_text(format_table(doc))
    plot_mpbcfw(doc, path.parent / "mpbcfw.png")
    return doc


def run_mpbcfw(datasets=DATASETS, passes=30, seeds=5, out="bench_out/mpbcfw", subsample=None, log=print,
               names=None, bcfw_passes=None, oracle_cost_us=None):
    out = Path(out)
    doc = dict(benchmark="mpbcfw", passes=passes, bcfw_passes=bcfw_passes or passes, seeds=seeds,
               subsample=subsample, oracle_cost_us=oracle_cost_us, environment=environment(), datasets={})
    for name in datasets:
        entry = run_dataset(name, passes, seeds, subsample, log, names, bcfw_passes, oracle_cost_us)
        entry["summary"] = summarise(entry)
        doc["datasets"][name] = entry
    write_json(out / "mpbcfw.json", doc)
    (out / "mpbcfw.md").write_text(format_table(doc))
    try:
        plot_mpbcfw(doc, out / "mpbcfw.png")
    except ImportError as exc:  # matplotlib is an optional extra
        log(f"(no plot: {exc})")
    return doc


def format_table(doc):
    """Oracle passes and seconds to reach gaps 1e-1 .. 3e-3 (median over seeds), per dataset."""
    lines = []
    for name, entry in doc["datasets"].items():
        s = entry["summary"]
        targets = list(next(iter(s["reach"].values())).keys())
        budget = f"{doc.get('bcfw_passes', doc['passes'])} BCFW passes, {doc['passes']} for the others"
        lines.append(f"\n**{name}** (n = {entry['n']}, lam = 1/n; {budget}): oracle passes / seconds to reach the "
                     "gap (median over seeds, interpolated between checkpoints; in brackets the passes at the first "
                     "checkpoint below it; '-' = not reached)\n")
        lines.append("| variant | " + " | ".join(f"gap {float(t):.3g}" for t in targets) + " |")
        lines.append("|---|" + "---|" * len(targets))
        for label, reach in s["reach"].items():
            cells = []
            for t in targets:
                p, sec = reach[t]["passes"], reach[t]["seconds"]
                pc = reach[t].get("passes_at_checkpoint", p)
                cells.append("-" if math.isnan(p) else f"{p:.1f} ({pc:.0f}) / {sec:.2f} s")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        if "primal_at" in s:
            cost = entry.get("oracle_cost_us")
            route = "compiled route" if cost is None else f"Python route, oracle cost + {cost:g} µs a call"
            lines.append(f"\nPrimal at equal oracle calls (median over seeds; {route}) and the share of "
                         "optimisation time in the max oracle (measured on the Python route only)\n")
            lines.append("| variant | " + " | ".join(f"P at {k} passes" for k in PRIMAL_AT) + " | oracle time |")
            lines.append("|---|" + "---|" * (len(PRIMAL_AT) + 1))
            for label, prim in s["primal_at"].items():
                cells = ["-" if math.isnan(prim[str(k)]) else f"{prim[str(k)]:.4f}" for k in PRIMAL_AT]
                frac = s["oracle_time_frac"].get(label, math.nan)
                cells.append("-" if math.isnan(frac) or cost is None else f"{100 * frac:.0f} %")
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_mpbcfw(doc, path):
    plt = pyplot()
    names = list(doc["datasets"])
    fig, axes = plt.subplots(len(names), 5, figsize=(24, 4 * len(names)), squeeze=False)
    for r, name in enumerate(names):
        s = doc["datasets"][name]["summary"]
        cg, tg = np.array(s["calls_grid"]), np.array(s["time_grid"])
        for label, curves in s["curves"].items():
            for c, (key, grid, xlab) in enumerate((("primal_sub_calls", cg, "oracle passes"),
                                                   ("gap_calls", cg, "oracle passes"),
                                                   ("gap_time", tg, "seconds"))):
                b = curves[key]
                med = np.array([np.nan if v is None else v for v in b["median"]], float)
                lo = np.array([np.nan if v is None else v for v in b["min"]], float)
                hi = np.array([np.nan if v is None else v for v in b["max"]], float)
                line, = axes[r, c].plot(grid, med, label=label)
                axes[r, c].fill_between(grid, lo, hi, color=line.get_color(), alpha=0.15)
                axes[r, c].set_yscale("log")
                axes[r, c].set_xlabel(xlab)
                axes[r, c].set_title(f"{name}: {key.replace('_', ' ')}")
                if key == "gap_time":
                    axes[r, c].set_xscale("log")
            if "planes_per_block" in curves:
                axes[r, 3].plot(curves["planes_per_block"][0], label=label)
                axes[r, 4].plot(curves["approx_passes"][0], label=label)
        axes[r, 3].set_title(f"{name}: planes per block (seed 0)")
        axes[r, 4].set_title(f"{name}: approximate passes per iteration (seed 0)")
        for ax in axes[r]:
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _click_command():
    import click

    @click.command("mpbcfw")
    @click.option("--dataset", "datasets", multiple=True, type=click.Choice(DATASETS), default=DATASETS,
                  show_default=True, help="Tasks (repeat the option for several).")
    @click.option("--passes", default=30, show_default=True, help="Oracle passes (outer iterations) per run.")
    @click.option("--bcfw-passes", type=int, default=None,
                  help="Passes of BCFW and BCFW-avg (default: --passes). The targets are read at the best "
                       "gap of every BCFW run (g_B): a longer BCFW budget asks for a tighter gap.")
    @click.option("--seeds", default=5, show_default=True, help="Random seeds per variant.")
    @click.option("--subsample", type=int, default=None, help="Use only the first N training examples.")
    @click.option("--oracle-cost-us", type=float, default=None,
                  help="Make every max-oracle call cost at least this many microseconds more (a busy wait "
                       "inside the call, counted as oracle time, for every variant; the paper's OCR oracle: "
                       "~50 us, 70 % of BCFW's time). The compiled passes cannot wait inside numba, so these "
                       "runs take the engine's Python route (MP-BCFW's approximate passes too); "
                       "0 gives that route without the wait.")
    @click.option("--out", default="bench_out/mpbcfw", show_default=True, type=click.Path(file_okay=False))
    def bench_mpbcfw(datasets, passes, bcfw_passes, seeds, subsample, oracle_cost_us, out):
        """MP-BCFW paper Figures 4-6: BCFW, BCFW-avg, MP-BCFW, MP-BCFW-avg (and BCPFW-gap-cache)."""
        if passes < 1 or seeds < 1:
            raise click.BadParameter("must be >= 1", param_hint="--passes / --seeds")
        if bcfw_passes is not None and bcfw_passes < 1:
            raise click.BadParameter(f"must be >= 1; got {bcfw_passes}", param_hint="--bcfw-passes")
        if oracle_cost_us is not None and not oracle_cost_us >= 0:
            raise click.BadParameter(f"must be >= 0; got {oracle_cost_us}", param_hint="--oracle-cost-us")
        run_mpbcfw(datasets, passes, seeds, out, subsample, log=click.echo, bcfw_passes=bcfw_passes,
                   oracle_cost_us=oracle_cost_us)
        click.echo(f"wrote {out}/mpbcfw.json, mpbcfw.md, mpbcfw.png")

    return bench_mpbcfw


bench_mpbcfw = _click_command()
