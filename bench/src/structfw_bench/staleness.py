"""Figure 1 of Osokin et al. (2016): the exploitation / staleness trade-off of gap sampling.

Gap sampling draws block i with probability proportional to its last gap estimate
g_i(alpha^(k_i)) (Sec. 3.1); the estimates go stale as other blocks move w, and a full gap
pass every ``gap_refresh`` passes replaces them by the true block gaps (its n oracle calls
count as an effective pass).  On OCR the benchmark runs BCFW with uniform sampling and with
gap sampling for several refresh periods and without refresh ('Gap Inf',
``gap_refresh=None``), and reports, against effective passes (oracle calls / n):

- (a) the duality gap;
- (b) the ratio of the heuristic gap estimate -- the sum of the sampler's stored block-gap
  estimates, read from the engine's state (`structfw_bench._gap_probe`) -- to the true gap of
  a full gap pass at the same iterate (uniform sampling keeps no estimates: no curve);
- (c) the improvement factor chi(g)^3 / chi(C) that Theorem 2 predicts for exact gap
  sampling over uniform sampling, from the true block gaps g_i at each checkpoint and
  C_f^(i) <= 4 R_i^2 / (lam n^2), R_i the largest ||psi_i(y)|| of the labellings the
  checkpoints' oracle calls returned for block i (Sec. 3.1; the paper takes every labelling
  of the run).

Every arm gets the same budget of effective passes: with refresh period r, E engine passes
cost 1 + E + floor(E / r) effective passes (the initial gap pass, the block steps, the
refreshes).  Monitoring checkpoints (one per engine pass) are not counted.
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import click
import numpy as np

from ._common import (bands, check_lam_option, crossing, environment, int_list_callback, load_ocr_data,
                      on_grid, parse_lam, pyplot, write_json)
from ._gap_probe import probed_fit

#: refresh periods run by default (the paper: 1, 5, 10, 100 and Inf; it calls the method "not
#: very sensitive" over 5, 10, 20, 50 -- 20 replaces 100, which equals Inf within 40 passes)
DEFAULT_REFRESH = (1, 5, 10, 20)
TARGETS = (0.3, 0.1, 0.03, 0.01, 0.003)


def arm_name(refresh):
    """'Uniform', 'Gap <r>' or 'Gap Inf' (the paper's legend)."""
    if refresh == "uniform":
        return "Uniform"
    return "Gap Inf" if refresh is None else f"Gap {refresh}"


def engine_passes_for(budget, refresh):
    """Largest E with 1 + E + floor(E / r) <= budget (uniform: E = budget, no gap passes)."""
    if refresh == "uniform":
        return int(budget)
    e = int(budget) - 1
    if refresh is not None:
        while e > 0 and 1 + e + e // refresh > budget:
            e -= 1
    return max(e, 1)


def run_arm(data, lam, refresh, passes, seeds, chi_factor=True, log=print):
    X, Y, model = data
    opts = dict(sampling="uniform") if refresh == "uniform" else dict(sampling="gap", gap_refresh=refresh)
    E = engine_passes_for(passes, refresh)
    runs = []
    for s in range(int(seeds)):
        r = probed_fit(model, X, Y, lam, opts, E, s, check_every=1, probe_norms=chi_factor)
        rec = r["records"]
        runs.append(dict(
            seed=s, wall_s=r["wall_s"], engine_passes=E,
            passes=[q["passes"] for q in rec], gap=[q["gap"] for q in rec],
            est_before=[q["est_before"] for q in rec], est_after=[q["est_after"] for q in rec],
            refreshed=[q["refreshed"] for q in rec], chi_gap=[q["chi_gap"] for q in rec],
            chi_C=[q.get("chi_C", math.nan) for q in rec], chi_factor=[q.get("chi_factor", math.nan) for q in rec],
            time_s=r["columns"]["time_s"]))
    log(f"[staleness] {arm_name(refresh)}: {seeds} seed(s), {E} engine passes "
        f"({sum(r['wall_s'] for r in runs):.0f}s)")
    return runs


def ratio_series(run):
    """(passes, est/true) at the checkpoints, the estimate being the sampler's before the
    checkpoint (what the last pass sampled from); the start (no estimates yet) is left out."""
    x, y = [], []
    for p, g, e in zip(run["passes"], run["gap"], run["est_before"]):
        if e is None or not math.isfinite(e) or e <= 0 or not g > 0:
            continue
        x.append(p)
        y.append(e / g)
    return np.asarray(x, float), np.asarray(y, float)


def summarise(doc):
    pmax = doc["passes"]
    grid = np.arange(0, int(pmax) + 1, dtype=float)
    doc["grid_passes"] = grid.tolist()
    for arm in doc["arms"].values():
        runs = arm["runs"]
        xs = [np.asarray(r["passes"], float) for r in runs]
        arm["gap_vs_passes"] = bands([on_grid(x, r["gap"], grid) for x, r in zip(xs, runs)])
        arm["chi_factor_vs_passes"] = bands([on_grid(x, np.asarray(r["chi_factor"], float), grid, log=False)
                                             for x, r in zip(xs, runs)])
        ratios = [ratio_series(r) for r in runs]
        arm["ratio_vs_passes"] = bands([on_grid(x, y, grid) if len(x) else np.full(len(grid), np.nan)
                                        for x, y in ratios])
        arm["passes_to_gap"] = {f"{t:g}": _med([crossing(x, r["gap"], t) for x, r in zip(xs, runs)])
                                for t in TARGETS}
        arm["final_gap"] = _med([r["gap"][-1] for r in runs])
        finite = [y for _, y in ratios if len(y)]
        arm["ratio_final"] = _med([y[-1] for y in finite]) if finite else None
        arm["ratio_min"] = _med([float(np.min(y)) for y in finite]) if finite else None
        after = [e / g for r in runs for e, g, f in zip(r["est_after"], r["gap"], r["refreshed"])
                 if f and g > 0 and e is not None and math.isfinite(e)]
        arm["ratio_after_refresh"] = dict(min=min(after), max=max(after)) if after else None
        cf = [np.asarray(r["chi_factor"], float)[1:] for r in runs]
        arm["chi_factor_median"] = _med([float(np.nanmedian(c)) for c in cf if np.isfinite(c).any()])


def _med(vals):
    a = np.asarray([math.nan if v is None else v for v in vals], float)
    return float(np.nanmedian(a)) if np.isfinite(a).any() else None


def run_staleness(lam="0.001", passes=40, seeds=2, refresh=DEFAULT_REFRESH, out="bench_out/staleness",
                  subsample=None, chi_factor=True, log=print):
    """Run every arm; write ``staleness.json`` and ``staleness.png`` to ``out``; return the doc."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    X, Y, _, _, model = load_ocr_data(subsample)
    n = len(X)
    lam_v = parse_lam(lam, n)
    doc = dict(benchmark="staleness", figure="Osokin et al. 2016, Figure 1", dataset="ocr", n=n,
               d=int(model.size_joint_feature), subsample=subsample, lam=lam_v, lam_spec=str(lam), passes=int(passes),
               seeds=int(seeds), refresh=[r for r in refresh], environment=environment(),
               x_axis="effective passes = oracle calls / n, the gap passes of gap sampling included",
               ratio="sum of the sampler's block-gap estimates before the checkpoint / true gap P(w) - D(alpha)",
               chi_factor="chi(g)^3 / chi(C), g_i true block gaps, C_i = 4 R_i^2 / (lam n^2), R_i = max ||psi_i(y)|| "
                          "over the checkpoints' oracle labellings", targets=list(TARGETS), arms={})
    for r in ("uniform",) + tuple(refresh) + (None,):
        runs = run_arm((X, Y, model), lam_v, r, passes, seeds, chi_factor, log)
        doc["arms"][arm_name(r)] = dict(refresh=None if r in (None, "uniform") else int(r),
                                        sampling="uniform" if r == "uniform" else "gap", runs=runs)
    summarise(doc)
    doc["wall_s"] = time.perf_counter() - t0
    write_json(out / "staleness.json", doc)
    plot_staleness(doc, out / "staleness.png")
    return doc


def plot_staleness(doc, path):
    from structfw.plotting import plot_bands

    plt = pyplot()
    # without the chi factor (--no-chi) panel (c) has nothing to show
    with_chi = any(v is not None for arm in doc["arms"].values() for v in arm["chi_factor_vs_passes"]["median"])
    fig, axes = plt.subplots(1, 3 if with_chi else 2, figsize=(15 if with_chi else 10, 4.4))
    grid = np.asarray(doc["grid_passes"])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, (name, arm) in enumerate(doc["arms"].items()):
        c = colors[j % len(colors)]
        for ax, key, log in zip(axes, ("gap_vs_passes", "ratio_vs_passes", "chi_factor_vs_passes"), (True, True, False)):
            b = arm[key]
            arr = np.array([[np.nan if v is None else v for v in b[k]] for k in ("min", "median", "max")])
            if not np.isfinite(arr).any():
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                plot_bands(ax, grid, arr, name, color=c, log=log)
    axes[0].set_ylabel("duality gap")
    axes[1].set_ylabel("estimated gap / true gap")
    axes[1].axhline(1.0, color="k", lw=0.8)
    if with_chi:
        axes[2].set_ylabel("chi(g)^3 / chi(C)  (Theorem 2)")
    for ax, t in zip(axes, ("(a) gap", "(b) staleness of the gap estimate", "(c) predicted gain of exact gap sampling")):
        ax.set_xlabel("effective passes (oracle calls / n)")
        ax.set_title(t, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Osokin et al. 2016, Fig. 1: OCR (n = {doc['n']}), lam = {doc['lam_spec']} ({doc['lam']:.3g}); "
                 f"median and min-max over {doc['seeds']} seed(s)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(doc):
    targets = doc["targets"]
    head = (f"{'arm':>9} " + " ".join(f"{'p@' + format(t, 'g'):>8}" for t in targets)
            + f" {'final gap':>10} {'est/true end':>13} {'est/true min':>13} {'chi factor':>11}")
    lines = [head]
    for name, a in doc["arms"].items():
        ps = " ".join(f"{'-' if a['passes_to_gap'][f'{t:g}'] is None else format(a['passes_to_gap'][f'{t:g}'], '.1f'):>8}"
                      for t in targets)
        rf = "-" if a["ratio_final"] is None else f"{a['ratio_final']:.3f}"
        rm = "-" if a["ratio_min"] is None else f"{a['ratio_min']:.3f}"
        cf = "-" if a["chi_factor_median"] is None else f"{a['chi_factor_median']:.2f}"
        lines.append(f"{name:>9} {ps} {a['final_gap']:10.3e} {rf:>13} {rm:>13} {cf:>11}")
    return "\n".join(lines)


@click.command("staleness")
@click.option("--lam", default="0.001", show_default=True, help="Regularisation lambda; '1/n' or 'c/n' allowed.")
@click.option("--passes", default=40, show_default=True, type=click.IntRange(min=2),
              help="Budget of effective passes (oracle calls / n, gap passes included) per run.")
@click.option("--seeds", default=2, show_default=True, type=click.IntRange(min=1), help="Random seeds per arm.")
@click.option("--refresh", default=",".join(map(str, DEFAULT_REFRESH)), show_default=True, callback=int_list_callback(1),
              help="Refresh periods (passes between full gap passes) of the gap-sampling arms; 'Gap Inf' "
                   "(never) and uniform sampling always run.")
@click.option("--subsample", default=None, type=click.IntRange(min=2),
              help="Keep this many random OCR training words (default: all 6,251).")
@click.option("--no-chi", is_flag=True,
              help="Skip panel (c) (it makes every checkpoint a Python oracle pass, for the norms of psi).")
@click.option("--out-dir", "--out", "out", default="bench_out/staleness", show_default=True,
              type=click.Path(file_okay=False), help="Writes staleness.json and staleness.png here.")
def bench_staleness(lam, passes, seeds, refresh, subsample, no_chi, out):
    """Osokin et al. 2016 Figure 1: staleness of gap estimates in gap sampling (OCR)."""
    check_lam_option(lam)
    doc = run_staleness(lam, passes, seeds, refresh, out, subsample, not no_chi, log=click.echo)
    click.echo(format_table(doc))
    click.echo(f"wrote {Path(out) / 'staleness.json'} and {Path(out) / 'staleness.png'}")
