"""Figure 2 of Osokin et al. (2016): the regimes of the gap-based cache over F x nu.

BCFW with gap sampling and the cache (Sec. 3.3, Alg. 5): on block i the best cached corner
is used -- a cache hit, no oracle call -- when its gap ghat_i reaches the threshold
max(F g_i^(k_i), nu/n g^(k_0)), with g_i^(k_i) the block gap at the last oracle call on i and
g^(k_0) the gap of the last full gap pass.  The paper (Fig. 2a) describes four regimes: F or
nu too large, the cache is almost never hit; both too small, it is hit almost always, the
oracle is hardly called and the method does not converge; in between either the local term
F g_i or the global term nu/n g sets the threshold, and the local one converges faster.  It
then fixes F = 0.25, nu = 0.01.

For every (F, nu) of a grid the benchmark runs BCFW-gap-cache on OCR with a budget of
effective passes (oracle calls / n: the cache's hits are free, so a run may take up to
``cache_factor`` times more engine passes), and records

- the effective passes (oracle calls / n) and the optimisation time to reach a target gap;
- the cache hit rate, hits / (hits + oracle calls in block steps);
- the local share: the fraction of blocks whose threshold is set by F g_i (F g_i >= nu/n g),
  read from the engine's state at each checkpoint (`structfw_bench._gap_probe`), median
  over the run;
- a regime label: ``never hit`` (hit rate < 5%), ``stalls`` (hit rate > 80% and the
  target not reached), else ``local`` or ``global`` by the local share;

and plots heat maps of these over the grid with the gap curves of a few pairs (Fig. 2b),
next to BCFW-gap without cache.
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import click
import numpy as np

from ._common import (bands, check_lam_option, crossing, environment, float_list_callback, load_ocr_data,
                      on_grid, parse_lam, pyplot, write_json)
from ._gap_probe import probed_fit

DEFAULT_F = (0.001, 0.01, 0.05, 0.25, 1.0)
DEFAULT_NU = (0.0001, 0.001, 0.01, 0.1, 1.0, 10.0)
REGIMES = ("never hit", "global", "local", "stalls")


def _med(vals):
    a = np.asarray([math.nan if v is None else v for v in vals], float)
    return float(np.nanmedian(a)) if np.isfinite(a).any() else None


def regime(hit_rate, local_share, reached):
    """The paper's regimes (Sec. 3.3, Fig. 2a) from a run's hit rate, local share and whether
    it reached the target: 'never hit', 'stalls', 'local' or 'global'."""
    if hit_rate is None or hit_rate < 0.05:
        return "never hit"
    if hit_rate > 0.8 and not reached:
        return "stalls"
    return "local" if (local_share is not None and local_share >= 0.5) else "global"


def run_pair(data, lam, opts, passes, seeds, target, cache_factor, gap_refresh):
    X, Y, model = data
    n = len(X)
    cache = opts.get("cache", False)
    engine = int(math.ceil(passes * cache_factor)) if cache else int(passes)
    runs = []
    for s in range(int(seeds)):
        r = probed_fit(model, X, Y, lam, dict(sampling="gap", gap_refresh=gap_refresh, **opts), engine, s,
                       check_every=1)
        c = r["columns"]
        p = np.asarray(c["passes"], float)
        keep = np.flatnonzero(p <= passes + 1e-9)  # the budget of effective passes
        gap = np.asarray(c["gap"], float)[keep]
        ts = np.asarray(c["time_s"], float)[keep]
        p = p[keep]
        hits = float((c.get("cache_hits") or [0.0])[keep[-1]] or 0.0)
        calls = float(c["oracle_calls"][keep[-1]])
        step_calls = calls - n * sum(1 for q in r["records"][:len(keep)] if q["refreshed"])
        local = [q.get("local_share", math.nan) for q in r["records"][1:len(keep)]]
        runs.append(dict(seed=s, wall_s=r["wall_s"], passes=p.tolist(), gap=gap.tolist(), time_s=ts.tolist(),
                         engine_passes=[c["engine_passes"][i] for i in keep],
                         passes_to_target=crossing(p, gap, target) if target > 0 else math.nan,
                         time_to_target=crossing(ts, gap, target) if target > 0 else math.nan,
                         hit_rate=hits / (hits + step_calls) if cache and hits + step_calls > 0 else 0.0,
                         cache_hits=hits, oracle_calls=calls,
                         local_share=_med(local) if cache else None, final_gap=float(gap[-1])))
    return runs


def run_cache_regimes(lam="0.001", passes=30, seeds=1, F=DEFAULT_F, nu=DEFAULT_NU, target=None,
                      out="bench_out/cache_regimes", subsample=1000, cache_factor=3.0, gap_refresh=10, log=print):
    """Run the grid; write ``cache_regimes.json`` / ``.png`` to ``out``; return the doc.

    ``target`` None: 1.5x the final gap of BCFW-gap without cache (median over seeds), so that
    the target is within the budget of the method the cache should improve on."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    X, Y, _, _, model = load_ocr_data(subsample)
    n = len(X)
    lam_v = parse_lam(lam, n)
    data = (X, Y, model)
    base = run_pair(data, lam_v, {}, passes, seeds, 0.0, 1.0, gap_refresh)
    auto = target is None
    if auto:
        target = 1.5 * _med([r["final_gap"] for r in base])
        for r in base:
            r["passes_to_target"] = crossing(r["passes"], r["gap"], target)
            r["time_to_target"] = crossing(r["time_s"], r["gap"], target)
    log(f"[cache-regimes] BCFW-gap (no cache): final gap {_med([r['final_gap'] for r in base]):.3g}; "
        f"target {target:.3g} ({time.perf_counter() - t0:.0f}s)")
    doc = dict(benchmark="cache-regimes", figure="Osokin et al. 2016, Figure 2", dataset="ocr", n=n, subsample=subsample,
               d=int(model.size_joint_feature), lam=lam_v, lam_spec=str(lam), passes=int(passes), seeds=int(seeds),
               F=list(F), nu=list(nu), target=target, target_rule="1.5 x final gap of BCFW-gap" if auto else "given",
               cache_factor=cache_factor, gap_refresh=gap_refresh, environment=environment(),
               hit_criterion="ghat_i >= max(F g_i^(k_i), nu/n g^(k_0))",
               baseline=_summ(base, False), pairs=[])
    for f in F:
        for v in nu:
            runs = run_pair(data, lam_v, dict(cache=True, cache_F=float(f), cache_nu=float(v)), passes, seeds, target,
                            cache_factor, gap_refresh)
            s = _summ(runs, True)
            s.update(F=float(f), nu=float(v))
            doc["pairs"].append(s)
            log(f"[cache-regimes] F={f:g} nu={v:g}: {s['regime']}, hit rate {s['hit_rate']:.2f}, passes to target "
                f"{'-' if s['passes_to_target'] is None else format(s['passes_to_target'], '.1f')} "
                f"({time.perf_counter() - t0:.0f}s)")
    grid = np.linspace(0, passes, 61)
    doc["grid_passes"] = grid.tolist()
    for s in [doc["baseline"]] + doc["pairs"]:
        s["gap_vs_passes"] = bands([on_grid(r["passes"], r["gap"], grid) for r in s["runs"]])
    doc["wall_s"] = time.perf_counter() - t0
    write_json(out / "cache_regimes.json", doc)
    plot_cache_regimes(doc, out / "cache_regimes.png")
    return doc


def _summ(runs, cache):
    reached = [r["passes_to_target"] for r in runs]
    s = dict(runs=runs, passes_to_target=_med(reached), time_to_target=_med([r["time_to_target"] for r in runs]),
             reached=sum(1 for v in reached if v is not None and math.isfinite(v)),
             hit_rate=_med([r["hit_rate"] for r in runs]), final_gap=_med([r["final_gap"] for r in runs]),
             local_share=_med([r["local_share"] for r in runs]) if cache else None,
             engine_passes=_med([r["engine_passes"][-1] for r in runs]))
    s["regime"] = regime(s["hit_rate"], s["local_share"], s["reached"] * 2 > len(runs)) if cache else "no cache"
    return s


def _matrix(doc, key):
    M = np.full((len(doc["F"]), len(doc["nu"])), np.nan)
    for s in doc["pairs"]:
        i, j = doc["F"].index(s["F"]), doc["nu"].index(s["nu"])
        v = REGIMES.index(s["regime"]) if key == "regime" else s[key]
        M[i, j] = np.nan if v is None else v
    return M


def plot_cache_regimes(doc, path):
    from matplotlib.colors import ListedColormap

    from structfw.plotting import plot_bands

    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    Fs, nus = doc["F"], doc["nu"]
    panels = [("regime", "(a) regime", None), ("passes_to_target", f"(b) effective passes to gap {doc['target']:.3g}",
                                                 "viridis"),
              ("time_to_target", f"(c) seconds to gap {doc['target']:.3g}", "viridis"),
              ("hit_rate", "(d) cache hit rate", "magma"), ("local_share", "(e) share of blocks where F g_i "
                                                                          "dominates", "coolwarm")]
    for ax, (key, title, cmap) in zip(axes.flat, panels):
        M = _matrix(doc, key)
        if key == "regime":
            cm = ListedColormap(["#bbbbbb", "#8fbcd4", "#7fc97f", "#f0a07a"])
            ax.imshow(M, cmap=cm, vmin=-0.5, vmax=3.5, aspect="auto", origin="lower")
            for i in range(M.shape[0]):
                for j in range(M.shape[1]):
                    if np.isfinite(M[i, j]):
                        ax.text(j, i, REGIMES[int(M[i, j])], ha="center", va="center", fontsize=7)
        else:
            im = ax.imshow(M, cmap=cmap, aspect="auto", origin="lower")
            fig.colorbar(im, ax=ax, shrink=0.8)
            for i in range(M.shape[0]):
                for j in range(M.shape[1]):
                    txt = "never" if not np.isfinite(M[i, j]) else (f"{M[i, j]:.2f}" if key != "passes_to_target"
                                                                   else f"{M[i, j]:.1f}")
                    ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                            bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.7))
        ax.set_xticks(range(len(nus)), [f"{v:g}" for v in nus])
        ax.set_yticks(range(len(Fs)), [f"{v:g}" for v in Fs])
        ax.set_xlabel("nu")
        ax.set_ylabel("F")
        ax.set_title(title, fontsize=10)
    ax = axes[1, 2]
    grid = np.asarray(doc["grid_passes"])
    shown = [("BCFW-gap, no cache", doc["baseline"])]
    for reg in REGIMES:  # one pair per regime, the default (0.25, 0.01) first where it belongs
        cands = [s for s in doc["pairs"] if s["regime"] == reg]
        cands.sort(key=lambda s: (not (s["F"] == 0.25 and s["nu"] == 0.01), s["F"], s["nu"]))
        if cands:
            shown.append((f"F={cands[0]['F']:g}, nu={cands[0]['nu']:g} ({reg})", cands[0]))
    for label, s in shown:
        b = s["gap_vs_passes"]
        arr = np.array([[np.nan if v is None else v for v in b[k]] for k in ("min", "median", "max")])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            line = plot_bands(ax, grid, arr, label)
        if s is doc["baseline"]:
            line.set_linestyle("--")
    ax.axhline(doc["target"], color="k", lw=0.7, ls=":")
    ax.set_xlabel("effective passes (oracle calls / n)")
    ax.set_ylabel("duality gap")
    ax.set_title("(f) gap of one pair per regime", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle(f"Osokin et al. 2016, Fig. 2: BCFW-gap-cache on OCR (n = {doc['n']}), lam = {doc['lam_spec']} "
                 f"({doc['lam']:.3g}), {doc['passes']} effective passes, {doc['seeds']} seed(s); hit when "
                 f"ghat_i >= max(F g_i, nu/n g)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=95)
    plt.close(fig)


def format_table(doc):
    lines = [f"target gap {doc['target']:.4g}; BCFW-gap without cache: passes to target "
             f"{_fmt(doc['baseline']['passes_to_target'])}, seconds {_fmt(doc['baseline']['time_to_target'], '.2f')}",
             f"{'F':>7} {'nu':>7} {'regime':>10} {'p@target':>9} {'s@target':>9} {'hit rate':>9} {'local':>6} "
             f"{'final gap':>10}"]
    for s in doc["pairs"]:
        lines.append(f"{s['F']:7g} {s['nu']:7g} {s['regime']:>10} {_fmt(s['passes_to_target']):>9} "
                     f"{_fmt(s['time_to_target'], '.2f'):>9} {s['hit_rate']:9.3f} {_fmt(s['local_share'], '.2f'):>6} "
                     f"{s['final_gap']:10.3e}")
    return "\n".join(lines)


def _fmt(v, f=".1f"):
    return "-" if v is None or not math.isfinite(v) else format(v, f)


@click.command("cache-regimes")
@click.option("--lam", default="0.001", show_default=True, help="Regularisation lambda; '1/n' or 'c/n' allowed.")
@click.option("--passes", default=30, show_default=True, type=click.IntRange(min=2),
              help="Budget of effective passes (oracle calls / n) per run.")
@click.option("--seeds", default=1, show_default=True, type=click.IntRange(min=1), help="Random seeds per pair.")
@click.option("--F", "F", default=",".join(f"{v:g}" for v in DEFAULT_F), show_default=True, callback=float_list_callback,
              help="Values of F, the local factor of the hit rule.")
@click.option("--nu", default=",".join(f"{v:g}" for v in DEFAULT_NU), show_default=True, callback=float_list_callback,
              help="Values of nu, the global factor of the hit rule.")
@click.option("--target", default=None, type=click.FloatRange(min=0.0, min_open=True),
              help="Target duality gap (default: 1.5x the final gap of BCFW-gap without cache).")
@click.option("--subsample", default=1000, show_default=True, type=click.IntRange(min=2),
              help="Random OCR training words kept (6251: all).")
@click.option("--cache-factor", default=3.0, show_default=True, type=click.FloatRange(min=1.0),
              help="A cache run may take this many times more engine passes than its budget of effective passes.")
@click.option("--out-dir", "--out", "out", default="bench_out/cache_regimes", show_default=True,
              type=click.Path(file_okay=False), help="Writes cache_regimes.json and cache_regimes.png here.")
def bench_cache_regimes(lam, passes, seeds, F, nu, target, subsample, cache_factor, out):
    """Osokin et al. 2016 Figure 2: regimes of the gap-based cache over a grid of F x nu (OCR)."""
    check_lam_option(lam)
    doc = run_cache_regimes(lam, passes, seeds, F, nu, target, out, subsample, cache_factor, log=click.echo)
    click.echo(format_table(doc))
    click.echo(f"wrote {Path(out) / 'cache_regimes.json'} and {Path(out) / 'cache_regimes.png'}")
