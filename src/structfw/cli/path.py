"""``structfw path``: compute an eps-approximate regularisation path (Osokin et al. 2016, Sec. 4)."""
from __future__ import annotations

import math
import sys

import click

from ._common import DATA_HELP, EXIT_INTERRUPTED, check_output_path, load_training_data, require_matplotlib, write_outputs
from ._solver_options import engine_options


@click.command("path")
@click.option("--data", default="ocr", show_default=True, help=DATA_HELP)
@click.option("--eps", default=None, type=float,
              help="Every w on the path has duality gap (so primal suboptimality) <= eps.  [default: 0.1]")
@click.option("--kappa", default=None, type=float,
              help="Breakpoints are solved to duality gap kappa*eps, 0 < kappa < 1.  [default: 0.5]")
@click.option("--min-lam", default=None, type=float,
              help="Stop below this lambda.  [default: 10/n, about 10 minutes on full OCR at --eps 0.1]")
@click.option("--max-breakpoints", default=1000, show_default=True, type=int,
              help="Stop after this many breakpoints (their number grows like 1/eps).")
@click.option("--subsample", type=int, default=None, help="Use only the first N training examples.")
@engine_options(step="pairwise", sampling="gap", gap_refresh=2)  # the warm-started BCFW engine
@click.option("--max-passes", default=500.0, show_default=True, help="Engine passes allowed per breakpoint.")
@click.option("--seed", default=0, show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write the path figure (PNG).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the path as JSON, and the engine's final state beside it (FILE.state.npz, for --resume).")
@click.option("--resume", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Continue the path saved in this JSON file (with FILE.state.npz when present) from where it "
                   "stopped down to --min-lam; --eps/--kappa are the file's.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar over log(lambda) on stderr.  [default: when stderr is a terminal]")
@click.option("--no-test", is_flag=True, help="Skip the test error of each breakpoint.")
def path_command(data, eps, kappa, min_lam, max_breakpoints, subsample, step, sampling, gap_refresh, max_passes, seed,
                 plot, out, resume, progress, no_test):
    """Compute an eps-approximate regularisation path: breakpoints lam_1 > lam_2 > ... and one w per piece,
    each with duality gap <= eps on its whole interval (Osokin et al. 2016, Sec. 4).

    Prints lam, the gap at the breakpoint, passes, cumulative time and test error per breakpoint as it goes.
    Ctrl-C stops at the next safe point and still writes --out/--plot (continue with --resume).
    """
    from ..path import regularization_path, state_path_for
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
    if progress is None:
        progress = sys.stderr.isatty()
    solver = BCFW(step=step, sampling=sampling, gap_refresh=gap_refresh)
    from ..path import default_min_lam

    eps_text = "as in --resume" if eps is None and resume else format(0.1 if eps is None else eps, "g")
    lam_text = format(default_min_lam(len(X)) if min_lam is None else min_lam, ".4g")
    click.echo(f"{len(X)} training examples, eps={eps_text}, min_lam={lam_text}, engine {solver.label}")
    click.echo(f"{'#':>4} {'lambda':>12} {'gap':>10} {'passes':>7} {'cum time s':>10} {'test err':>9}")

    def show(j, lam, w, info):
        te = info["test_loss"]
        line = (f"{j + 1:4d} {lam:12.5g} {info['gap']:10.3e} {info['passes']:7.1f} {info['cum_time']:10.2f} "
                f"{'' if math.isnan(te) else format(te, '.4f'):>9}")
        _write_line(line)

    try:
        path = regularization_path(model, X, Y, eps=eps, kappa=kappa, solver=solver, min_lam=min_lam,
                                   max_passes_per_lam=max_passes, random_state=seed, X_test=Xt, Y_test=Yt,
                                   max_breakpoints=max_breakpoints, callback=show, progress=progress,
                                   resume=resume, keep_state=bool(out))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None  # the path's arguments (eps, kappa, ...) name themselves
    cum_t = path.cumulative_times
    end = {"ended": "rho <= 0: the last w is eps-approximate for every smaller lambda",
           "min_lam": f"reached min_lam={path.min_lam:.4g}; the last w is eps-approximate down to "
                      f"lambda={path.lam_end:.4g}",
           "not_converged": f"a solve did not reach gap < eps; the path is valid down to lambda={path.lam_end:.4g}",
           "max_breakpoints": f"stopped after --max-breakpoints, valid down to lambda={path.lam_end:.4g}",
           "interrupted": f"interrupted; the path is valid down to lambda={path.lam_end:.4g}"}
    if len(path):
        click.echo(f"{len(path)} breakpoints, {path.cumulative_passes[-1]:.1f} effective passes, "
                   f"{cum_t[-1]:.2f} s; {end.get(path.status, path.status)}")
    else:
        click.echo("interrupted before the first breakpoint: nothing to write")
    writers = []
    if out and len(path):
        writers.append(("path", lambda: _saved(path.to_json, out)))
        if path.state is not None and not path.ended:
            writers.append(("state", lambda: path.save_state(state_path_for(out))))
    if plot and len(path):
        writers.append(("plot", lambda: _saved(path.plot, plot)))
    ok = write_outputs(writers)
    if path.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if not ok:
        sys.exit(1)


def _write_line(line):
    # above a progress bar when one is shown (tqdm.write clears and redraws it)
    from tqdm import tqdm

    tqdm.write(line, file=sys.stdout)
    sys.stdout.flush()


def _saved(save, where):
    save(where)
    return where
