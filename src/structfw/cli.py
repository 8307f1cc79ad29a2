"""The ``structfw`` command: demo, train, path, bench."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import click
import numpy as np

#: every registered solver (structfw.solvers.SOLVER_NAMES; kept literal so --help imports no solver code)
SOLVER_CHOICES = ["bcfw", "mpbcfw", "fw", "ssg", "cutting-plane", "online-eg"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="structfw")
def main():
    """Structural SVMs trained with Frank-Wolfe solvers (BCFW and its variants, FW, SSG),
    and kernel SVMs with FW/MFW/SWAP/PARTAN."""


# --------------------------------------------------------------------------- data
def load_training_data(data, fold=0):
    """(X, Y, X_test, Y_test, default model) for --data ocr|snakes|seg-binary|seg-multi|PATH."""
    from . import datasets, models

    if data == "ocr":
        X, Y = datasets.load_ocr("train", fold=fold)
        Xt, Yt = datasets.load_ocr("test", fold=fold)
        return X, Y, Xt, Yt, models.ChainModel(n_states=26, n_features=128)
    if data in ("seg-binary", "seg-multi"):
        # graph-cut / Potts segmentation built from scikit-image's photos (cached on disk on first use)
        X, Y, make_model = datasets.load_segmentation(data, "train")
        Xt, Yt, _ = datasets.load_segmentation(data, "test")
        return X, Y, Xt, Yt, make_model()
    if data == "snakes":
        X, Y = datasets.load_snakes("train")
        Xt, Yt = datasets.load_snakes("test")
        # one-hot colour features: a linear unary term cannot use raw RGB well
        X, Xt = datasets.snakes_one_hot(X), datasets.snakes_one_hot(Xt)
        return X, Y, Xt, Yt, _snakes_model(X, Y)
    path = Path(data)
    if not path.exists():
        raise click.BadParameter(f"{data!r} is neither 'ocr', 'snakes', 'seg-binary', 'seg-multi' nor an existing file",
                                 param_hint="--data")
    Xs, ys = datasets.load_svmlight(str(path))
    Xs = np.asarray(Xs.toarray() if hasattr(Xs, "toarray") else Xs, float)
    classes, yi = np.unique(ys, return_inverse=True)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(yi))
    cut = int(0.8 * len(yi))
    tr, te = perm[:cut], perm[cut:]
    model = models.MulticlassModel(n_classes=len(classes), n_features=Xs.shape[1])
    return list(Xs[tr]), list(yi[tr]), list(Xs[te]), list(yi[te]), model


def _snakes_model(X, Y):
    from . import models

    if not hasattr(models, "GridModel"):
        raise click.ClickException("the grid model for --data snakes is not available in this build")
    n_features = np.asarray(X[0]).shape[-1]
    return models.GridModel(n_states=11, n_features=n_features)


def make_model(name, default, data_X):
    from . import models

    if name is None or name == "auto":
        return default
    if name == "chain":
        x0 = data_X[0]
        return models.ChainModel(n_states=26 if default is None else getattr(default, "n_states", 26),
                                 n_features=x0.shape[1])
    if name == "multiclass":
        if isinstance(default, models.MulticlassModel):
            return default
        raise click.BadParameter("the multiclass model needs --data PATH (an svmlight file)", param_hint="--model")
    if name == "grid":
        return default
    raise click.BadParameter(f"unknown model {name!r}", param_hint="--model")


def make_solver_from_options(solver, sampling, step, step_size, cache, averaging, gap_refresh):
    from . import solvers

    if solver == "bcfw":
        return solvers.BCFW(step_size=step_size, sampling=sampling, step=step, cache=cache,
                            averaging=None if averaging == "none" else averaging, gap_refresh=gap_refresh)
    if solver == "fw":
        return solvers.FW(step_size=step_size)
    if solver == "ssg":
        return solvers.SSG(averaging=None if averaging == "none" else averaging)
    if solver == "mpbcfw":
        return solvers.MPBCFW(step_size=step_size, sampling=sampling, step=step,
                              averaging=None if averaging == "none" else averaging, gap_refresh=gap_refresh)
    if solver in solvers.SOLVER_NAMES:
        return solvers.SOLVER_NAMES[solver]()
    raise click.BadParameter(f"unknown solver {solver!r}", param_hint="--solver")


def print_table(trace, file=None):
    """Pass / gap / primal / test error / time, one line per checkpoint."""
    has_test = "test_loss" in trace
    head = f"{'pass':>7} {'gap':>11} {'primal':>11}" + (f" {'test err':>9}" if has_test else "") + f" {'time s':>8}"
    click.echo(head, file=file)
    for k in range(len(trace)):
        r = trace[k]
        line = f"{r['passes']:7.2f} {r['gap']:11.4e} {r['primal']:11.6f}"
        if has_test:
            line += f" {r.get('test_loss', float('nan')):9.4f}"
        line += f" {r['time_s']:8.2f}"
        click.echo(line, file=file)


# --------------------------------------------------------------------------- demo
@main.command()
@click.option("--lam", default=0.01, show_default=True, help="Regularisation lambda.")
@click.option("--passes", default=10, show_default=True, help="Passes over the training data.")
@click.option("--seed", default=0, show_default=True, help="Random seed.")
@click.option("--out", default="structfw_demo", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the convergence plot and trace.")
def demo(lam, passes, seed, out):
    """BCFW-wavg on the bundled OCR letters: progress bar, table and convergence plot."""
    from . import StructuredSVM, datasets, models, solvers

    X, Y = datasets.load_ocr("train")
    Xt, Yt = datasets.load_ocr("test")
    click.echo(f"OCR letters: {len(X)} training words, {len(Xt)} test words; BCFW-wavg, lam={lam}")
    model = models.ChainModel(n_states=26, n_features=128)
    svm = StructuredSVM(model, solver=solvers.BCFW(averaging="weighted"), lam=lam, max_passes=passes,
                        tol=None, random_state=seed, verbose=1)
    svm.fit(X, Y, X_test=Xt, Y_test=Yt)
    print_table(svm.trace_)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    svm.trace_.save(outdir / "demo_trace.json")
    try:
        from .plotting import plot_convergence

        plot_convergence(svm.trace_, outdir / "demo_convergence.png", title=f"BCFW-wavg on OCR, lam={lam}")
        click.echo(f"plot: {outdir / 'demo_convergence.png'}")
    except ImportError as exc:
        click.echo(f"(no plot: {exc})")
    click.echo(f"test error {1 - svm.score(Xt, Yt):.4f}   duality gap {svm.gap_:.3e}   stopped: {svm.stopped_}")


# --------------------------------------------------------------------------- train
@main.command()
@click.option("--data", default="ocr", show_default=True,
              help="'ocr', 'snakes', 'seg-binary' (graph cut), 'seg-multi' (Potts), or a path to an svmlight/LIBSVM "
                   "file (multiclass model, 80/20 split).")
@click.option("--model", "model_name", type=click.Choice(["auto", "chain", "multiclass", "grid"]), default="auto",
              show_default=True, help="Model; 'auto' picks the data set's natural model.")
@click.option("--solver", type=click.Choice(SOLVER_CHOICES), default="bcfw", show_default=True)
@click.option("--sampling", type=click.Choice(["uniform", "perm", "gap", "max_gap"]), default="uniform",
              show_default=True, help="BCFW block sampling.")
@click.option("--step", type=click.Choice(["fw", "pairwise", "away"]), default="fw", show_default=True,
              help="BCFW step type.")
@click.option("--step-size", type=click.Choice(["linesearch", "predefined"]), default="linesearch",
              show_default=True, help="Line search or 2n/(k+2n) (BCFW) / 2/(k+2) (FW).")
@click.option("--cache/--no-cache", default=False, show_default=True, help="BCFW gap-based oracle cache.")
@click.option("--averaging", type=click.Choice(["none", "weighted", "suffix", "uniform"]), default="none",
              show_default=True, help="Averaging of the iterates (uniform: SSG only).")
@click.option("--gap-refresh", default=10, show_default=True, help="Passes between gap passes of gap sampling.")
@click.option("--lam", default=0.01, show_default=True, help="Regularisation lambda > 0.")
@click.option("--passes", default=50.0, show_default=True, help="Maximum passes over the data.")
@click.option("--tol", default=1e-3, show_default=True, help="Stop when the duality gap is below this.")
@click.option("--check-every", default=1, show_default=True, help="Passes between gap checkpoints.")
@click.option("--time-budget", default=None, type=float, help="Seconds of optimisation time.")
@click.option("--seed", default=0, show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write a convergence PNG.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Write the trace (.json or .csv).")
@click.option("--save", type=click.Path(dir_okay=False), default=None, help="Save the fitted model (.npz).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def train(data, model_name, solver, sampling, step, step_size, cache, averaging, gap_refresh, lam, passes, tol,
          check_every, time_budget, seed, plot, trace_path, save, quiet):
    """Train a structural SVM and report pass / gap / primal / test error / time.

    Ctrl-C stops the run cleanly; the best iterate so far is kept and still saved.
    """
    from . import StructuredSVM

    X, Y, Xt, Yt, default_model = load_training_data(data)
    model = make_model(model_name, default_model, X)
    try:
        slv = make_solver_from_options(solver, sampling, step, step_size, cache, averaging, gap_refresh)
        svm = StructuredSVM(model, solver=slv, lam=lam, max_passes=passes, tol=tol, check_every=check_every,
                            time_budget=time_budget, random_state=seed, verbose=0 if quiet else 1)
        svm.fit(X, Y, X_test=Xt, Y_test=Yt)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    print_table(svm.trace_)
    click.echo(f"{getattr(slv, 'label', solver)}: stopped by {svm.stopped_}; test error "
               f"{1 - svm.score(Xt, Yt):.4f}; gap {svm.gap_:.3e}")
    if trace_path:
        svm.trace_.save(trace_path)
        click.echo(f"trace: {trace_path}")
    if plot:
        from .plotting import plot_convergence

        plot_convergence(svm.trace_, plot, title=f"{getattr(slv, 'label', solver)}, lam={lam}")
        click.echo(f"plot: {plot}")
    if save:
        svm.save(save)
        click.echo(f"model: {save}")


# --------------------------------------------------------------------------- bench
@main.group()
def bench():
    """Benchmarks that reproduce the papers' figures and tables (JSON + PNG)."""


def _register(group, module, attr):
    """Add a command defined in another module of the package.

    The modules are imported when the CLI starts; an optional dependency they
    lack (e.g. scikit-learn for ``bench svm``) only removes that command.
    """
    try:
        cmd = getattr(importlib.import_module(module, __package__), attr)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("sklearn", "matplotlib"):
            return
        if exc.name == importlib.util.resolve_name(module, __package__):
            return  # that part of the package is absent (tests check every command exists)
        raise
    group.add_command(cmd)


_register(bench, ".bench.fig1", "bench_fig1")
_register(bench, ".bench.gaps", "bench_gaps")
_register(bench, ".bench.speed", "bench_speed")
_register(bench, ".bench.path", "bench_path")
_register(bench, ".bench.mpbcfw", "bench_mpbcfw")
_register(bench, ".svm.cli", "bench_svm")
_register(main, ".path_cli", "path_command")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
