"""``structfw train``: fit a structural SVM from the command line."""
from __future__ import annotations

import sys
import warnings

import click

from ._common import (
    CORPUS_FORMATS,
    DATA_HELP,
    EXIT_INTERRUPTED,
    FORMAT_CHOICES,
    FORMAT_HELP,
    MODEL_CHOICES,
    DataError,
    check_output_path,
    data_format,
    format_gap,
    load_corpus_split,
    load_training_data,
    print_table,
    require_matplotlib,
    stop_message,
    write_outputs,
)
from ..executor import EXECUTORS
from ._solver_options import build_solver, pop_solver_options, solver_options

#: estimator parameters -> their flags, to name the flag in an error from the estimator
ESTIMATOR_FLAGS = {"lam": "--lam", "max_passes": "--passes", "tol": "--tol", "check_every": "--check-every",
                   "time_budget": "--time-budget", "n_jobs": "--n-jobs", "executor": "--executor", "shards": "--shards"}


class CheckEvery(click.ParamType):
    name = "N|auto"

    def convert(self, value, param, ctx):
        if value == "auto" or isinstance(value, int):
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"expected a whole number of passes or 'auto'; got {value!r}", param, ctx)


@click.command("train")
@click.option("--data", default="ocr", show_default=True,
              help=DATA_HELP[:-1] + "; or a tagged corpus file or a graph file (see --format).")
@click.option("--format", "data_format", type=click.Choice(FORMAT_CHOICES), default="auto", show_default=True,
              help=FORMAT_HELP)
@click.option("--model", "model_name", type=click.Choice(MODEL_CHOICES), default="auto", show_default=True,
              help="Model; each data set has one ('auto'), any other is an error.")
@solver_options
@click.option("--lam", default=0.01, show_default=True, help="Regularisation lambda > 0.")
@click.option("--passes", default=50.0, show_default=True, help="Most solver passes over the data.")
@click.option("--tol", default=1e-3, show_default=True, help="Stop at a checkpoint whose duality gap is <= this.")
@click.option("--check-every", type=CheckEvery(), default="auto", show_default=True,
              help="Passes between gap checkpoints; 'auto' keeps monitoring under 10% of the work.")
@click.option("--time-budget", default=None, type=float, help="Seconds of optimisation time.")
@click.option("--seed", default=0, show_default=True, help="Random seed (sampling, and the 80/20 split of a file).")
@click.option("--n-jobs", type=int, default=None, help="Parallel workers for the oracle calls.")
@click.option("--executor", type=click.Choice(EXECUTORS), default=None,
              help="Workers for --n-jobs: processes (default), threads (oracles that release the GIL) or Ray "
                   "actors (see --ray).")
@click.option("--ray", "ray_address", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS]",
              help="Run the oracles on a Ray cluster: its address (e.g. auto, ray://head:10001), or no value for a "
                   "local one; --n-jobs then counts actors (default: one per cluster CPU).")
@click.option("--shards", type=int, default=None, metavar="K",
              help="Train on K shards of the examples, each stepping its own blocks on its own worker and combined "
                   "in rounds (for cheap oracles on several cores): threads (default) or --executor process.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write a convergence PNG.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Write the trace (.json or .csv).")
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Save the fitted model (.npz added if missing); written first, whatever else fails.")
@click.option("--save-state", is_flag=True,
              help="Also save the solver state, so the model file can continue the run (warm_start=True); large.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def train(**kw):
    """Train a structural SVM; report pass / gap / primal / test error / time.

    Ctrl-C stops the run cleanly: the best iterate so far is kept, still saved
    (--save), tabled and plotted, and the command exits with status 130.
    Every option is checked before training starts; an option that does not apply
    (to the solver, the data or the other options) is an error, never ignored.
    """
    given = pop_solver_options(kw)
    solver_name = kw.pop("solver")
    kw["executor"] = _check_execution_options(kw["n_jobs"], kw["executor"], kw.pop("ray_address"), kw["shards"])
    check_output_path(kw["trace_path"], "--trace", suffixes=(".json", ".csv"))
    check_output_path(kw["save"], "--save")
    if kw["save_state"] and not kw["save"]:
        raise click.UsageError("--save-state applies to a saved model: give --save FILE too")
    if kw["plot"]:
        check_output_path(kw["plot"], "--plot", suffixes=(".png",))
        require_matplotlib("--plot")
    solver = build_solver(solver_name, given)

    given_format = kw.pop("data_format")
    fmt = data_format(kw["data"], given_format)
    if fmt == "svmlight" and given_format == "auto" and kw["model_name"] == "graph" and _format_was_a_guess(kw["data"]):
        fmt = "graph"  # --model graph says what a file of unknown content holds
    if fmt in CORPUS_FORMATS:
        X, Y, Xt, Yt = _load_corpus(kw, fmt)
        model = None  # a tagger: sized from the data at fit
    else:
        try:
            X, Y, Xt, Yt, model = load_training_data(kw["data"], kw["model_name"], seed=kw["seed"], fmt=fmt)
        except DataError as exc:
            if given_format == "auto" and fmt == "svmlight" and _format_was_a_guess(kw["data"]):
                exc.message += ("; for a tagged corpus file give --format conll or --format wordtag, for a graph "
                                "file --format graph")
            raise
    fitted = _fit(kw, model, solver, X, Y, Xt, Yt)
    svm = fitted if model is not None else fitted[-1]  # the estimator holds the trace either way

    label = getattr(solver, "label", solver_name)
    saved = []
    ok = write_outputs([("model", lambda: _saved_model(fitted, kw, saved))] if kw["save"] else [])
    print_table(svm.trace_)
    click.echo(f"{label}: test error {1 - fitted.score(Xt, Yt):.4f}; gap {format_gap(svm.gap_, spec='.3e')}")
    click.echo(stop_message(svm.stopped_, saved[0] if saved else None))
    writers = []
    if kw["trace_path"]:
        writers.append(("trace", lambda: _saved(svm.trace_.save, kw["trace_path"])))
    if kw["plot"]:
        writers.append(("plot", lambda: _plot(svm, kw["plot"], f"{label}, lam={kw['lam']}")))
    ok = write_outputs(writers) and ok
    if svm.stopped_ == "interrupted":
        sys.exit(EXIT_INTERRUPTED)
    if not ok:
        sys.exit(1)


def _saved_model(svm, kw, saved):
    path = svm.save(kw["save"], state=kw["save_state"])
    saved.append(path)
    return path


def _check_execution_options(n_jobs, executor, ray_address, shards=None):
    """The estimator's executor string, after checking --n-jobs, --executor, --ray and --shards agree."""
    if shards is not None:
        if ray_address is not None or (executor is not None and executor.startswith("ray")):
            raise click.UsageError("--shards runs its shards on threads or processes: give --executor thread or "
                                   "process, not Ray")
        return executor or "thread"
    if n_jobs is not None and (n_jobs == 0 or n_jobs < -1):
        raise click.BadParameter(f"must be a positive number of workers or -1 (all cores); got {n_jobs}",
                                 param_hint="--n-jobs")
    if ray_address is not None:
        if executor not in (None, "ray"):
            raise click.UsageError(f"--ray runs the oracles on Ray actors; it cannot be combined with "
                                   f"--executor {executor}")
        executor = "ray" if ray_address == "local" else f"ray:{ray_address}"
    if executor is not None and executor.startswith("ray"):
        try:
            import ray  # noqa: F401
        except ImportError:
            raise click.UsageError("--ray / --executor ray need Ray: pip install 'structfw[distributed]'") from None
        return executor
    if executor is not None and n_jobs in (None, 1):
        raise click.UsageError("--executor applies to parallel workers only: give --n-jobs 2 or more (or -1)")
    return executor


def _format_was_a_guess(data):
    """True when --format auto read ``data`` as svmlight for want of a better guess (not by suffix or content)."""
    from pathlib import Path

    from ..datasets.corpus_files import sniff_corpus_format

    return Path(data).is_file() and sniff_corpus_format(data) is None


def _load_corpus(kw, fmt):
    """The 80/20 split of a tagged corpus file, after checking --model (a tagger's is chain)."""
    if kw["model_name"] not in ("auto", "chain"):
        raise click.UsageError(f"--model {kw['model_name']} does not apply to --data {kw['data']}: a {fmt} corpus "
                               "trains a sequence tagger, a chain model (omit --model or pass --model chain)")
    X, Y, Xt, Yt = load_corpus_split(kw["data"], fmt, seed=kw["seed"])
    n_tags = len({t for ts in Y + Yt for t in ts})
    click.echo(f"{kw['data']}: {fmt} corpus, {len(X) + len(Xt)} sentences, {sum(map(len, X + Xt))} tokens, "
               f"{n_tags} tags; a sequence tagger trained on {len(X)}, tested on {len(Xt)} (--seed {kw['seed']})")
    return X, Y, Xt, Yt


def _fit(kw, model, solver, X, Y, Xt, Yt):
    """The fitted estimator on ``model``, or with ``model`` None a fitted `structfw.features.Tagger`."""
    from ..estimator import StructuredSVM
    from ..solvers.kernel_bcfw import LargeFitWarning

    options = dict(lam=kw["lam"], max_passes=kw["passes"], tol=kw["tol"], check_every=kw["check_every"],
                   time_budget=kw["time_budget"], random_state=kw["seed"], verbose=0 if kw["quiet"] else 1,
                   n_jobs=kw["n_jobs"], executor=kw["executor"] or "process", shards=kw["shards"])
    if model is None:
        from ..features import make_tagger

        svm = make_tagger(solver=solver, **options)
    else:
        svm = StructuredSVM(model, solver=solver, **options)
    try:
        with warnings.catch_warnings():
            if model is not None and _announce_large_fit(solver, model, X):
                warnings.simplefilter("ignore", LargeFitWarning)  # said once, above
            svm.fit(X, Y, X_test=Xt, Y_test=Yt)
    except ValueError as exc:
        msg = str(exc)
        name = getattr(exc, "param", None) or next((n for n in ESTIMATOR_FLAGS if msg.startswith(n)), None)
        if name in ESTIMATOR_FLAGS:
            raise click.BadParameter(msg, param_hint=ESTIMATOR_FLAGS[name]) from None
        raise DataError(kw["data"], msg) from None
    return svm


def _announce_large_fit(solver, model, X):
    """Say before a kernelized fit starts that it is large (its memory and work per pass); True if said."""
    from ..solvers.kernel_bcfw import KernelBCFW, estimate_fit_size, fit_shape, large_fit_message
    from ..solvers.plan import keeps_rows

    if not isinstance(solver, KernelBCFW):
        return False
    try:
        N, F, K, n, chain = fit_shape(model, X)
    except ValueError:
        return False  # a model it cannot kernelize: the fit says so
    msg = large_fit_message(estimate_fit_size(N, F, K, n, solver.kernel_rank, chain, keeps_rows(solver)), N, F)
    if msg is not None:
        click.echo(f"Warning: {msg}", err=True)
    return msg is not None


def _saved(save, path):
    save(path)
    return path


def _plot(svm, path, title):
    from ..plotting import plot_convergence

    plot_convergence(svm.trace_, path, title=title)
    return path
