"""Figure 1 (a)-(c) of the BCFW paper (Lacoste-Julien et al. 2013) on OCR.

Primal suboptimality P(w) - P* against effective passes (log-log), median line and
min-max band over seeds, for FW, BCFW (line search), BCFW-wavg, BCFW with the
predefined step 2n/(k+2n), SSG and SSG-wavg; and the test error against passes.

P* is estimated by the best (largest) dual value D(alpha) found by any run,
including a reference run of BCPFW with gap sampling (``ref_passes`` passes).
Since D(alpha) <= P*, the plotted P(w) - D_best is an upper bound of the true
suboptimality; the JSON records the remaining bracket min P - max D.
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import click
import numpy as np

from ._common import bands, col, environment, load_ocr_data, on_grid, parse_lam, pyplot, run_fit, write_json

FIG1_SOLVERS = ("FW", "BCFW", "BCFW-wavg", "BCFW-fixed", "SSG", "SSG-wavg")
_STYLE = {"FW": ("tab:gray", "--"), "BCFW": ("tab:blue", "-"), "BCFW-wavg": ("tab:green", "-"),
          "BCFW-fixed": ("tab:cyan", ":"), "SSG": ("tab:red", "-"), "SSG-wavg": ("tab:orange", "-")}


def make_fig1_solver(name):
    from .. import solvers

    return {"FW": lambda: solvers.FW(step_size="linesearch"),
            "BCFW": lambda: solvers.BCFW(step_size="linesearch"),
            "BCFW-wavg": lambda: solvers.BCFW(step_size="linesearch", averaging="weighted"),
            "BCFW-fixed": lambda: solvers.BCFW(step_size="predefined"),
            "SSG": lambda: solvers.SSG(),
            "SSG-wavg": lambda: solvers.SSG(averaging="weighted")}[name]()


def run_fig1(lams=("0.01", "0.001", "1/n"), passes=30, seeds=5, out="bench_out/fig1", solvers=FIG1_SOLVERS,
             subsample=None, ref_passes=100, log=print):
    """Run the Figure 1 benchmark; writes ``fig1.json`` and ``fig1.png`` to ``out``; returns the JSON doc."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    X, Y, Xt, Yt, model = load_ocr_data(subsample)
    n = len(X)
    grid = np.arange(0, int(math.ceil(passes)) + 1, dtype=float)
    doc = dict(benchmark="fig1", dataset="ocr", n=n, n_test=len(Xt), passes=passes, seeds=int(seeds),
               subsample=subsample, ref_passes=ref_passes, environment=environment(),
               pstar_estimate=("max dual value D(alpha) over all runs and a reference run of "
                               "BCFW(step='pairwise', sampling='gap'); suboptimality = P(w) - D_best, "
                               "an upper bound of P(w) - P*"),
               grid_passes=grid.tolist(), lams={})
    t_start = time.perf_counter()
    for lam_spec in lams:
        lam = parse_lam(lam_spec, n)
        entry = dict(lam=lam, lam_spec=str(lam_spec), solvers={})
        best_dual, best_primal = -math.inf, math.inf
        if ref_passes:
            from .. import solvers as S

            run, _ = run_fit(model, S.BCFW(step="pairwise", sampling="gap"), X, Y, lam, ref_passes, 0, tol=1e-8)
            best_dual = max(best_dual, np.nanmax(col(run, "dual")))
            best_primal = min(best_primal, np.nanmin(col(run, "primal")))
            entry["reference"] = dict(solver="BCPFW-gap", passes=ref_passes, final_gap=run["columns"]["gap"][-1],
                                      final_primal=run["columns"]["primal"][-1], wall_s=run["wall_s"])
            log(f"[fig1] lam={lam_spec} ({lam:.3g}): reference gap {run['columns']['gap'][-1]:.3g}")
        raw = {}
        for name in solvers:
            runs = []
            n_seeds = 1 if name == "FW" else int(seeds)  # batch FW is deterministic
            for s in range(n_seeds):
                run, _ = run_fit(model, make_fig1_solver(name), X, Y, lam, passes, s, Xt, Yt, check_every=1)
                runs.append(run)
                d = col(run, "dual")
                if np.isfinite(d).any():
                    best_dual = max(best_dual, np.nanmax(d))
                best_primal = min(best_primal, np.nanmin(col(run, "primal")))
            raw[name] = runs
            log(f"[fig1] lam={lam_spec}: {name} x{n_seeds} done ({time.perf_counter() - t_start:.0f}s)")
        pstar = best_dual
        entry.update(pstar=pstar, best_primal=best_primal, pstar_bracket=best_primal - best_dual)
        for name, runs in raw.items():
            sub = [on_grid(col(r, "passes"), np.maximum(col(r, "primal") - pstar, 1e-12), grid) for r in runs]
            te = [on_grid(col(r, "passes"), col(r, "test_loss"), grid, log=False) for r in runs]
            tm = [on_grid(col(r, "passes"), col(r, "time_s"), grid, log=False) for r in runs]
            entry["solvers"][name] = dict(
                label=runs[0]["meta"].get("solver", name), n_runs=len(runs),
                primal_subopt=bands(sub), test_error=bands(te), time_s=bands(tm),
                runs=[dict(seed=r["seed"], wall_s=r["wall_s"], passes=r["columns"]["passes"],
                           primal=r["columns"]["primal"], dual=r["columns"]["dual"],
                           test_loss=r["columns"].get("test_loss"), time_s=r["columns"]["time_s"]) for r in runs])
        entry["table"] = summary_table(entry, grid)
        doc["lams"][str(lam_spec)] = entry
    doc["wall_s"] = time.perf_counter() - t_start
    write_json(out / "fig1.json", doc)
    plot_fig1(doc, out / "fig1.png")
    return doc


def summary_table(entry, grid, at=(1, 5, 10, 30)):
    """Median primal suboptimality at given passes and median final test error, per solver."""
    rows = {}
    for name, s in entry["solvers"].items():
        med = s["primal_subopt"]["median"]
        row = {f"subopt@{p}": (med[p] if p < len(med) else None) for p in at}
        te = [v for v in s["test_error"]["median"] if v is not None]
        row["test_error_final"] = te[-1] if te else None
        rows[name] = row
    return rows


def plot_fig1(doc, path):
    from ..plotting import plot_bands

    plt = pyplot()
    lam_keys = list(doc["lams"])
    fig, axes = plt.subplots(2, len(lam_keys), figsize=(5 * len(lam_keys), 8), squeeze=False)
    grid = np.asarray(doc["grid_passes"])
    sel = grid >= 1
    for j, key in enumerate(lam_keys):
        e = doc["lams"][key]
        for name, s in e["solvers"].items():
            color, ls = _STYLE.get(name, (None, "-"))
            for row, what, log in ((0, "primal_subopt", True), (1, "test_error", False)):
                b = s[what]
                runs = np.array([[np.nan if v is None else v for v in b[k]] for k in ("min", "median", "max")])
                ax = axes[row, j]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    line = plot_bands(ax, grid[sel], runs[:, sel], name, color=color, log=log)
                line.set_linestyle(ls)
        axes[0, j].set_title(f"OCR, lam = {key} ({e['lam']:.3g}), n = {doc['n']}")
        axes[0, j].set_ylabel("primal suboptimality P(w) - P*")
        axes[1, j].set_ylabel("test error")
        for ax in axes[:, j]:
            ax.set_xscale("log")
            ax.set_xlabel("effective passes")
            ax.grid(True, which="both", alpha=0.3)
        axes[0, j].legend(fontsize=8)
    fig.suptitle(f"BCFW paper Fig. 1 on OCR: median and min-max over {doc['seeds']} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@click.command("fig1")
@click.option("--lam", "lams", multiple=True, default=("0.01",), show_default=True,
              help="Regularisation lambda; repeat for several; '1/n' or 'c/n' allowed.")
@click.option("--passes", default=30, show_default=True, help="Effective passes per run.")
@click.option("--seeds", default=5, show_default=True, help="Random seeds per stochastic solver.")
@click.option("--out", default="bench_out/fig1", show_default=True, type=click.Path(file_okay=False))
@click.option("--solver", "solver_names", multiple=True, type=click.Choice(FIG1_SOLVERS),
              help="Solvers to run (default: all).")
@click.option("--subsample", default=None, type=int, help="Use this many random training words (quick runs).")
@click.option("--ref-passes", default=100, show_default=True,
              help="Passes of the BCPFW-gap reference run for P* (0: best dual of the runs only).")
def bench_fig1(lams, passes, seeds, out, solver_names, subsample, ref_passes):
    """BCFW paper Figure 1 on OCR: primal suboptimality and test error against passes."""
    doc = run_fig1(lams, passes, seeds, out, solvers=solver_names or FIG1_SOLVERS, subsample=subsample,
                   ref_passes=ref_passes, log=click.echo)
    for key, e in doc["lams"].items():
        click.echo(f"lam = {key} ({e['lam']:.4g}); P* ~ {e['pstar']:.6f} (bracket {e['pstar_bracket']:.2e})")
        cols = list(next(iter(e["table"].values())))
        click.echo(f"{'solver':>12} " + " ".join(f"{c:>16}" for c in cols))
        for name, row in e["table"].items():
            click.echo(f"{name:>12} " + " ".join(f"{'-' if v is None else f'{v:.4g}':>16}" for v in row.values()))
    click.echo(f"wrote {Path(out) / 'fig1.json'} and {Path(out) / 'fig1.png'}")
