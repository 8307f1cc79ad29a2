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
@click.option("--format", "data_format", type=click.Choice(FORMAT_CHOICES + ["npz"]), default="auto",
              show_default=True, help=FORMAT_HELP + " Shard files (a glob or a comma-separated list of --data files): "
              "'svmlight' or 'npz' (structfw.datasets.shard_source.write_shard_npz), 'auto' by the suffix.")
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
                   "in rounds (for cheap oracles on several cores): threads (default) or --executor process. With "
                   "shard files (--data a glob or a comma-separated list, one file a shard) K is the number of files "
                   "and may be left out; each worker (--executor process, the default, or Ray) loads its own file.")
@click.option("--n-features", type=int, default=None, metavar="D",
              help="Shard files: the number of features (every shard the same width).")
@click.option("--labels", "shard_labels", default=None, metavar="L1,L2,...",
              help="svmlight shard files: the files' labels in the order of the model's states (-1,1: label -1 "
                   "is state 0).")
@click.option("--n-states", type=int, default=None, metavar="S",
              help="Shard files whose labels are the states 0..S-1 themselves (npz; svmlight without --labels).")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write a convergence PNG.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Write the trace (.json or .csv).")
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Save the fitted model (.npz added if missing); written first, whatever else fails.")
@click.option("--save-state", is_flag=True,
              help="Also save the solver state, so the model file can continue the run (warm_start=True); large.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="A sharded fit on workers (--shards with --executor process, or shard files): each worker "
                   "writes its shard's state to DIR at every checkpoint, so that --save-state keeps the run and "
                   "--resume continues it (shard files keep their states nowhere else).")
@click.option("--resume", type=click.Path(dir_okay=False), default=None, metavar="MODEL",
              help="Continue the run saved in MODEL (with --save-state) on the same --data: the model, solver, "
                   "lam, shards and seed are the file's; --passes, --tol, --check-every and --time-budget are this "
                   "run's; --lam moves the run to a new lam.")
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
    files = shard_file_list(kw["data"])
    _check_resume_options(kw, given)
    kw["resumed"] = _load_resumed(kw["resume"]) if kw["resume"] else None
    if kw["resumed"] is not None:
        kw["shards"] = kw["resumed"].shards if files is None else None  # the file's K: how the run executes
    _check_shard_file_options(kw, files)
    kw["executor"] = _check_execution_options(kw["n_jobs"], kw["executor"], kw.pop("ray_address"), kw["shards"],
                                              files=files is not None)
    check_output_path(kw["trace_path"], "--trace", suffixes=(".json", ".csv"))
    check_output_path(kw["save"], "--save")
    if kw["save_state"] and not kw["save"]:
        raise click.UsageError("--save-state applies to a saved model: give --save FILE too")
    if kw["plot"]:
        check_output_path(kw["plot"], "--plot", suffixes=(".png",))
        require_matplotlib("--plot")
    solver = build_solver(solver_name, given)

    given_format = kw.pop("data_format")
    if files is not None:
        source, model = _shard_source(kw, files, given_format)
        fitted = _fit_source(kw, model, solver, source)
        return _report(kw, solver, solver_name, fitted, fitted, None, None)
    if given_format == "npz":
        raise click.UsageError(f"--format npz reads shard files: give --data a glob (part-*.npz) or a "
                               f"comma-separated list of files, one a shard; got {kw['data']!r}")
    fmt = data_format(kw["data"], given_format)
    if fmt == "svmlight" and given_format == "auto" and kw["model_name"] == "graph" and _format_was_a_guess(kw["data"]):
        fmt = "graph"  # --model graph says what a file of unknown content holds
    if fmt in CORPUS_FORMATS:
        if kw["resume"]:
            raise click.UsageError(f"--resume with a {fmt} corpus: a tagger's run is trained again, not continued; "
                                   "omit --resume")
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
    _report(kw, solver, solver_name, fitted, svm, Xt, Yt)


def _report(kw, solver, solver_name, fitted, svm, Xt, Yt):
    """Save, table, trace and plot the fit ``fitted`` (its estimator ``svm``); ``Xt`` None: no test set."""
    label = getattr(solver, "label", solver_name)
    saved = []
    ok = write_outputs([("model", lambda: _saved_model(fitted, kw, saved))] if kw["save"] else [])
    print_table(svm.trace_)
    tested = "no test set" if Xt is None else f"test error {1 - fitted.score(Xt, Yt):.4f}"
    click.echo(f"{label}: {tested}; gap {format_gap(svm.gap_, spec='.3e')}")
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


def _check_execution_options(n_jobs, executor, ray_address, shards=None, files=False):
    """The estimator's executor string, after checking --n-jobs, --executor, --ray and --shards agree.

    ``files``: the data are shard files, which workers of their own load: processes (default) or Ray."""
    if files:
        return _shard_files_executor(executor, ray_address)
    if shards is not None:
        if ray_address is not None or (executor is not None and executor.startswith("ray")):
            raise click.UsageError("--shards runs its shards on threads or processes: give --executor thread or "
                                   "process, not Ray")
        return executor or "thread"
    if n_jobs is not None and (n_jobs == 0 or n_jobs < -1):
        raise click.BadParameter(f"must be a positive number of workers or -1 (all cores); got {n_jobs}",
                                 param_hint="--n-jobs")
    executor = _ray_executor(executor, ray_address, "the oracles")
    if executor is not None and executor.startswith("ray"):
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


#: the options a resumed run takes from its model file (given with --resume they would make another run)
RESUMED_FROM_FILE = (("model_name", "--model"), ("solver", "--solver"), ("shards", "--shards"), ("seed", "--seed"))


def _given(name):
    """Was option ``name`` given on the command line (or by its environment variable), not defaulted?"""
    from click.core import ParameterSource

    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def _check_resume_options(kw, given):
    """Usage errors: --resume with an option its file decides; --state-dir where no worker writes."""
    if kw["resume"] is not None:
        clash = [flag for name, flag in RESUMED_FROM_FILE if _given(name)]
        clash += [f"--{n.replace('_', '-')}" for n in given]
        if clash:
            raise click.UsageError(f"{', '.join(clash)} with --resume {kw['resume']}: the run's model, solver, shards "
                                   "and seed are the saved model's; omit them (--passes, --tol, --check-every, "
                                   "--time-budget and --lam apply to the continued run)")
        return
    if kw["state_dir"] is not None and kw["shards"] is None and shard_file_list(kw["data"]) is None:
        raise click.UsageError("--state-dir applies to sharded fits on workers: give --shards K --executor process, "
                               "or shard files as --data")


def _with_state_dir(kw, solver, shards):
    """``solver`` on ``shards`` shards whose workers write their states to --state-dir (if given)."""
    if kw["state_dir"] is None:
        return solver
    from ..solvers.sharded import ShardedBCFW

    try:
        return ShardedBCFW.from_engine(solver, shards, executor=kw["executor"] or "process",
                                       state_dir=kw["state_dir"])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--state-dir") from None


def _load_resumed(path):
    """The estimator of the --resume file, checked: a structural SVM's, with its solver state."""
    from ..estimator import StructuredSVM
    from ..loading import load

    try:
        svm = load(path)
    except (OSError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="--resume") from None
    if not isinstance(svm, StructuredSVM):
        raise click.UsageError(f"--resume {path}: a {type(svm).__name__} file; --resume continues a structural SVM's "
                               "run saved with --save-state (a tagger is trained again)")
    if getattr(svm, "state_", None) is None:
        raise click.UsageError(f"--resume {path}: the file holds no solver state; save the run with --save-state to "
                               "continue it")
    return svm


def _continued(kw):
    """The --resume file's estimator set to continue its run: this command's stopping options and where it
    runs (--n-jobs, --executor: never from a file), its --lam if given, its --state-dir if given."""
    svm = kw["resumed"]
    options = _fit_options(kw)
    params = dict(warm_start=True, **{k: options[k] for k in ("max_passes", "tol", "check_every", "time_budget",
                                                              "verbose", "n_jobs", "executor")})
    if _given("lam"):
        params["lam"] = kw["lam"]
    if kw["state_dir"] is not None:
        solver = svm.solver
        params["solver"] = (solver.set_params(state_dir=kw["state_dir"]) if hasattr(solver, "state_dir")
                            else _with_state_dir(kw, solver, svm.shards))
    svm.set_params(**params)
    return svm


def _no_fresh_start(kw):
    """With --resume, a warm start that would start afresh (other data, no state) raises instead (inside
    `warnings.catch_warnings`)."""
    if kw["resume"]:
        warnings.filterwarnings("error", message="warm start", category=RuntimeWarning)
        warnings.filterwarnings("error", message="warm_start=True, but", category=RuntimeWarning)


def _fit(kw, model, solver, X, Y, Xt, Yt):
    """The fitted estimator on ``model``, or with ``model`` None a fitted `structfw.features.Tagger`."""
    from ..estimator import StructuredSVM
    from ..solvers.kernel_bcfw import LargeFitWarning

    options = _fit_options(kw)
    if model is None:
        from ..features import make_tagger

        svm = make_tagger(solver=solver, **options)
    elif kw["resumed"] is not None:
        svm = _continued(kw)
    else:
        svm = StructuredSVM(model, solver=_with_state_dir(kw, solver, kw["shards"]), **options)

    def fit():
        with warnings.catch_warnings():
            if model is not None and _announce_large_fit(svm.solver, model, X):
                warnings.simplefilter("ignore", LargeFitWarning)  # said once, above
            _no_fresh_start(kw)
            svm.fit(X, Y, X_test=Xt, Y_test=Yt)

    _fit_naming_errors(kw, fit)
    return svm


def _fit_options(kw):
    """The estimator's parameters from the options."""
    return dict(lam=kw["lam"], max_passes=kw["passes"], tol=kw["tol"], check_every=kw["check_every"],
                time_budget=kw["time_budget"], random_state=kw["seed"], verbose=0 if kw["quiet"] else 1,
                n_jobs=kw["n_jobs"], executor=kw["executor"] or "process", shards=kw["shards"])


def _fit_naming_errors(kw, fit):
    """Run ``fit()``; a ValueError from it names its flag (a parameter's) or --data (the data's); with
    --resume, a saved state that cannot continue on these data is a usage error naming both."""
    try:
        fit()
    except RuntimeWarning as exc:  # `_no_fresh_start`'s: the state cannot continue
        reason = str(exc).removeprefix("warm start: ").removesuffix("; starting afresh")
        raise click.UsageError(f"--resume {kw['resume']} cannot continue on --data {kw['data']}: {reason}") from None
    except ValueError as exc:
        msg = str(exc)
        name = getattr(exc, "param", None) or next((n for n in ESTIMATOR_FLAGS if msg.startswith(n)), None)
        if name in ESTIMATOR_FLAGS:
            raise click.BadParameter(msg, param_hint=ESTIMATOR_FLAGS[name]) from None
        raise DataError(kw["data"], msg) from None


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


# ====================================================================== shard files
#: the shard formats the command line reads, by suffix (a tagged corpus needs a featurize function)
SHARD_SUFFIXES = {".svm": "svmlight", ".svmlight": "svmlight", ".libsvm": "svmlight", ".npz": "npz"}
#: the options that apply to shard files only
SHARD_FILE_OPTIONS = (("n_features", "--n-features"), ("shard_labels", "--labels"), ("n_states", "--n-states"))


def shard_file_list(data):
    """The shard files ``--data`` names, in shard order, or None when it names one data set.

    A glob pattern (its matches sorted by name) or a comma-separated list of two or more files is
    shard files; anything else (a named set, one file, even one whose name holds a comma) is not.
    A pattern that matches nothing or a listed file that does not exist is a `DataError` naming it.
    """
    import glob
    from pathlib import Path

    if glob.has_magic(data) and not Path(data).exists():
        found = sorted(glob.glob(data))
        if not found:
            raise DataError(data, "the pattern matches no file")
        return [Path(p) for p in found]
    parts = [p.strip() for p in data.split(",")]
    if len(parts) < 2 or Path(data).exists():
        return None
    for p in parts:
        if not p:
            raise DataError(data, "an empty name in the comma-separated list of shard files")
        if not Path(p).is_file():
            raise DataError(data, f"no such shard file {p!r}")
    return [Path(p) for p in parts]


def _check_shard_file_options(kw, files):
    """Usage errors for options that apply to shard files only, or to any data but them."""
    if files is None:
        given = [flag for name, flag in SHARD_FILE_OPTIONS if kw[name] is not None]
        if given:
            verb = "apply" if len(given) > 1 else "applies"
            raise click.UsageError(f"{', '.join(given)} {verb} to shard files: give --data a glob (part-*.svm) or a "
                                   f"comma-separated list of files, one a shard; got --data {kw['data']}")
        return
    if kw["shards"] is not None and kw["shards"] != len(files):
        raise click.UsageError(f"--shards {kw['shards']} but --data {kw['data']} names {len(files)} shard files "
                               "(one file a shard): omit --shards or make them agree")
    if kw["save_state"] and not kw["state_dir"] and not kw["resume"]:
        raise click.UsageError("--save-state with shard files: the shards' dual states stay on their workers and end "
                               "with the fit; give --state-dir DIR, where each worker writes its shard's state")


def _shard_files_executor(executor, ray_address):
    """The executor of a fit from shard files: processes (default) or Ray, whose workers load their own file."""
    if executor == "thread":
        raise click.UsageError("--executor thread with shard files: threads share this process's memory, which would "
                               "then hold every shard; give --executor process (default) or ray (or --ray)")
    return _ray_executor(executor, ray_address, "the shards") or "process"


def _ray_executor(executor, ray_address, what):
    """``--executor`` with ``--ray [ADDRESS]`` folded in ("ray" or "ray:ADDRESS"), Ray's presence checked
    when it is asked for; ``what`` runs on the actors (for the messages)."""
    if ray_address is not None:
        if executor not in (None, "ray"):
            raise click.UsageError(f"--ray runs {what} on Ray actors; it cannot be combined with "
                                   f"--executor {executor}")
        executor = "ray" if ray_address == "local" else f"ray:{ray_address}"
    if executor is not None and executor.startswith("ray"):
        try:
            import ray  # noqa: F401
        except ImportError:
            raise click.UsageError("--ray / --executor ray need Ray: pip install 'structfw[distributed]'") from None
    return executor


def _shard_format(files, given_format):
    """'svmlight' or 'npz' for the shard files (by the first file's suffix under --format auto)."""
    fmt = given_format
    if fmt == "auto":
        fmt = SHARD_SUFFIXES.get(files[0].suffix.lower())
        if fmt is None and files[0].suffix.lower() in (".conll", ".wordtag"):
            fmt = files[0].suffix.lower()[1:]
        if fmt is None:
            raise click.UsageError(f"--format auto cannot tell the format of the shard file {str(files[0])!r} by its "
                                   "suffix (.svm, .svmlight, .libsvm, .npz): give --format svmlight or npz")
    if fmt in CORPUS_FORMATS:
        raise click.UsageError(f"--format {fmt} with shard files: every shard of a tagged corpus is featurised by a "
                               "function the command line cannot take; in Python, "
                               "ShardFiles(files, format=..., tags=..., featurize=...) (docs/guide/scaling-out.md)")
    if fmt not in ("svmlight", "npz"):
        raise click.UsageError(f"--format {fmt} with shard files: they are read as svmlight or npz")
    return fmt


def _shard_labels(text):
    """--labels as numbers (an svmlight file's labels are numbers)."""
    try:
        labels = [float(t) for t in text.split(",")]
    except ValueError:
        raise click.BadParameter(f"expected numbers separated by commas (the files' labels); got {text!r}",
                                 param_hint="--labels") from None
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise click.BadParameter(f"expected two or more distinct labels; got {text!r}", param_hint="--labels")
    return [int(v) if v.is_integer() else v for v in labels]


def _shard_states(kw, fmt):
    """(number of states, the svmlight labels or None) from --labels and --n-states."""
    labels = _shard_labels(kw["shard_labels"]) if kw["shard_labels"] is not None else None
    if labels is not None and fmt == "npz":
        raise click.UsageError("--labels maps svmlight files' labels to states; npz shard files hold the states "
                               "0..S-1 themselves: give --n-states S")
    S = kw["n_states"]
    if S is not None and S < 2:
        raise click.BadParameter(f"must be 2 or more; got {S}", param_hint="--n-states")
    if labels is not None and S is not None and S != len(labels):
        raise click.UsageError(f"--n-states {S} but --labels lists {len(labels)} labels: give one of them")
    if labels is None and S is None:
        hint = "--labels L1,L2,... (the files' labels in state order) or --n-states S" if fmt == "svmlight" \
            else "--n-states S"
        raise click.UsageError(f"shard files are not read by this process, so it cannot count their labels: give "
                               f"{hint}")
    return (len(labels) if labels is not None else S), labels


def _shard_model(kw, fmt, files, n_states):
    """The model for the shard files: multiclass for svmlight; for npz, chain when the first file holds
    sequences (its ``lengths``: a look at the archive's names, not its arrays), else multiclass."""
    from .. import models

    natural = "multiclass"
    if fmt == "npz":
        import numpy as np

        try:
            with np.load(files[0], allow_pickle=False) as f:
                natural = "chain" if "lengths" in f.files else "multiclass"
        except Exception as exc:  # any failure to open the archive is the file's problem: name it
            raise DataError(kw["data"], f"{files[0]}: not a readable .npz shard file ({type(exc).__name__})") from None
    if kw["model_name"] not in ("auto", natural):
        raise click.UsageError(f"--model {kw['model_name']} does not apply to --data {kw['data']}: its model is "
                               f"{natural} (omit --model or pass --model {natural})")
    if natural == "chain":
        return models.ChainModel(n_states=n_states, n_features=kw["n_features"])
    return models.MulticlassModel(n_classes=n_states, n_features=kw["n_features"])


def _shard_source(kw, files, given_format):
    """(`ShardFiles`, model) for shard files, every option checked (nothing of the data is loaded here)."""
    from ..datasets.shard_source import ShardFiles

    fmt = _shard_format(files, given_format)
    if kw["n_features"] is None or kw["n_features"] < 1:
        raise click.UsageError("shard files need --n-features D, the number of features (every shard the same width)"
                               if kw["n_features"] is None else f"--n-features must be positive; got {kw['n_features']}")
    n_states, labels = _shard_states(kw, fmt)
    model = _shard_model(kw, fmt, files, n_states)
    options = dict(n_features=kw["n_features"], labels=labels) if fmt == "svmlight" else {}
    try:
        source = ShardFiles(files, format=fmt, **options)
    except ValueError as exc:
        raise DataError(kw["data"], str(exc)) from None
    click.echo(f"{kw['data']}: {len(source)} {fmt} shard files, each loaded by its own worker ({kw['executor']}); "
               f"a {type(model).__name__} with {n_states} states and {kw['n_features']} features")
    return source, model


def _fit_source(kw, model, solver, source):
    """The estimator fitted on a shard source (no test set: this process never reads the data)."""
    from ..estimator import StructuredSVM

    if kw["resumed"] is not None:
        svm = _continued(kw)
    else:
        svm = StructuredSVM(model, solver=_with_state_dir(kw, solver, len(source)),
                            **dict(_fit_options(kw), shards=len(source)))

    def fit():
        with warnings.catch_warnings():
            _no_fresh_start(kw)
            svm.fit(source)

    _fit_naming_errors(kw, fit)
    return svm
