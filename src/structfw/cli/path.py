"""``structfw path``: compute an eps-approximate regularisation path (Osokin et al. 2016, Sec. 4)."""
from __future__ import annotations

import math
import sys

import click

from ..solvers.bcfw import STEPS
from ..solvers.sampling import SAMPLINGS

from ._common import DATA_HELP, check_output_path, load_training_data, require_matplotlib, write_outputs


@click.command("path")
@click.option("--data", default="ocr", show_default=True, help=DATA_HELP)
@click.option("--eps", default=0.1, show_default=True, type=float,
              help="Every w on the path has duality gap (so primal suboptimality) <= eps.")
@click.option("--kappa", default=0.5, show_default=True, type=float,
              help="Breakpoints are solved to duality gap kappa*eps, 0 < kappa < 1.")
@click.option("--min-lam", default=1e-6, show_default=True, type=float, help="Stop below this lambda.")
@click.option("--subsample", type=int, default=None, help="Use only the first N training examples.")
@click.option("--step", type=click.Choice(STEPS), default="pairwise", show_default=True,
              help="Step of the warm-started BCFW engine.")
@click.option("--sampling", type=click.Choice(SAMPLINGS), default="gap",
              show_default=True, help="Block sampling of the engine.")
@click.option("--gap-refresh", default=2, show_default=True, help="Passes between gap passes (gap sampling).")
@click.option("--max-passes", default=500.0, show_default=True, help="Engine passes allowed per breakpoint.")
@click.option("--seed", default=0, show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write the path figure (PNG).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the path as JSON.")
@click.option("--no-test", is_flag=True, help="Skip the test error of each breakpoint.")
def path_command(data, eps, kappa, min_lam, subsample, step, sampling, gap_refresh, max_passes, seed, plot, out,
                 no_test):
    """Compute an eps-approximate regularisation path: breakpoints lam_1 > lam_2 > ... and one w per piece,
    each with duality gap <= eps on its whole interval (Osokin et al. 2016, Sec. 4).

    Prints lam, the gap at the breakpoint, passes, cumulative time and test error per breakpoint.
    """
    from ..path import regularization_path
    from ..solvers import BCFW

    check_output_path(out, "--out", suffixes=(".json",))
    if plot:
        check_output_path(plot, "--plot", suffixes=(".png",))
        require_matplotlib("--plot")
    X, Y, Xt, Yt, model = load_training_data(data)
    if subsample is not None:
        if subsample < 1:
            raise click.BadParameter(f"must be >= 1; got {subsample}", param_hint="--subsample")
        X, Y = X[:subsample], Y[:subsample]
    if no_test:
        Xt = Yt = None
    try:
        solver = BCFW(step=step, sampling=sampling, gap_refresh=gap_refresh)
        path = regularization_path(model, X, Y, eps=eps, kappa=kappa, solver=solver, min_lam=min_lam,
                                   max_passes_per_lam=max_passes, random_state=seed, X_test=Xt, Y_test=Yt)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None  # the path's arguments (eps, kappa, ...) name themselves
    click.echo(f"{len(X)} training examples, eps={eps:g}, kappa={kappa:g}, engine {solver.label}; "
               f"init {path.init_passes:.1f} passes")
    click.echo(f"{'#':>4} {'lambda':>12} {'gap':>10} {'passes':>7} {'cum time s':>10} {'test err':>9}")
    cum_t = path.cumulative_times
    for j, lam in enumerate(path.breakpoints):
        te = path.test_losses[j]
        click.echo(f"{j + 1:4d} {lam:12.5g} {path.gaps[j]:10.3e} {path.passes[j]:7.1f} {cum_t[j]:10.2f} "
                   f"{'' if math.isnan(te) else format(te, '.4f'):>9}")
    end = {"ended": "rho <= 0: the last w is eps-approximate for every smaller lambda",
           "min_lam": f"reached min_lam; the last w is eps-approximate down to lambda={path.lam_end:.4g}",
           "not_converged": f"a solve did not reach gap < eps; the path is valid down to lambda={path.lam_end:.4g}",
           "max_breakpoints": f"stopped after max_breakpoints, valid down to lambda={path.lam_end:.4g}"}
    click.echo(f"{len(path)} breakpoints, {path.cumulative_passes[-1]:.1f} effective passes, "
               f"{cum_t[-1]:.2f} s; {end.get(path.status, path.status)}")
    writers = [("path", lambda: _saved(path.to_json, out))] if out else []
    if plot:
        writers.append(("plot", lambda: _saved(path.plot, plot)))
    if not write_outputs(writers):
        sys.exit(1)


def _saved(save, where):
    save(where)
    return where
