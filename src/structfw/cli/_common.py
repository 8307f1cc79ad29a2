"""What the commands share: data loading with one-line errors, output checks, the table.

Errors a user can fix are click exceptions (exit code 2, one line, no traceback):
`DataError` for a ``--data`` that cannot be used, ``click.UsageError`` /
``click.BadParameter`` for options.
"""
from __future__ import annotations

import os
from pathlib import Path

import click
import numpy as np

#: the named data sets and the one model each is trained with
NAMED_DATA = {"ocr": "chain", "snakes": "grid", "seg-binary": "graphcut", "seg-multi": "potts",
              "seg-binary-paper": "graphcut", "seg-multi-paper": "potts", "seg-graph": "graph",
              "seg-graph-binary": "graph", "alignment": "matching", "pose": "pose"}
MODEL_CHOICES = ["auto", "chain", "multiclass", "grid", "graphcut", "potts", "graph", "matching", "pose"]
DATA_HELP = ("'ocr' (chain), 'snakes' (grid), 'seg-binary' (graph cut), 'seg-multi' (Potts), 'seg-binary-paper' / "
             "'seg-multi-paper' (the same at the MP-BCFW paper's sizes: 2,376 / 715 training images of SLIC "
             "superpixels with 649 features; minutes to generate on first use, then cached), 'seg-graph' / "
             "'seg-graph-binary' (graph CRF on superpixel adjacency graphs, 6 or 2 classes), 'alignment' "
             "(matching: 5,000 synthetic sentence pairs, the last 1,000 for testing), 'pose' (tree of parts: 1,000 / "
             "1,000 synthetic LSP-like stick figures, HOG features, generated and cached on first use), or the path of an "
             "svmlight/LIBSVM file (multiclass model, kept sparse, 80/20 split).")


class DataError(click.ClickException):
    """``--data`` names something that cannot be trained on: one line, exit code 2."""

    exit_code = 2

    def __init__(self, data, problem):
        super().__init__(f"--data {data}: {problem}")


# --------------------------------------------------------------------------- data
def load_training_data(data, model_name="auto", seed=0, fmt=None):
    """(X, Y, X_test, Y_test, model) for ``--data`` and ``--model``.

    ``fmt`` "graph" reads a graph file (`load_graph_split`); any other file is svmlight.
    A model that does not fit the data is a usage error naming both options; a
    file that cannot be read is a `DataError` naming the file.
    """
    natural = "graph" if fmt == "graph" else NAMED_DATA.get(data, "multiclass")
    if model_name not in ("auto", None) and model_name != natural:
        raise click.UsageError(f"--model {model_name} does not apply to --data {data}: its model is {natural} "
                               "(omit --model or pass --model auto)")
    if data in NAMED_DATA:
        return _load_named(data)
    if fmt == "graph":
        return load_graph_split(data, seed)
    return _load_svmlight_split(data, seed)


def _load_named(data):
    from .. import datasets, models

    if data == "ocr":
        X, Y = datasets.load_ocr("train")
        Xt, Yt = datasets.load_ocr("test")
        return X, Y, Xt, Yt, models.ChainModel(n_states=26, n_features=128)
    if data == "snakes":
        X, Y = datasets.load_snakes("train")
        Xt, Yt = datasets.load_snakes("test")
        # one-hot colour features: a linear unary term cannot use raw RGB well
        X, Xt = datasets.snakes_one_hot(X), datasets.snakes_one_hot(Xt)
        return X, Y, Xt, Yt, models.GridModel(n_states=11, n_features=X[0].shape[-1])
    if data == "alignment":
        X, Y = datasets.make_alignment(5000, random_state=0)
        return X[:4000], Y[:4000], X[4000:], Y[4000:], models.MatchingModel(datasets.alignment.N_FEATURES)
    try:
        if data == "pose":
            # rendered stick figures on photographs, HOG features (cached on disk on first use)
            tr, te = datasets.load_pose("train"), datasets.load_pose("test")
            return tr.X, tr.Y, te.X, te.Y, tr.make_model()
        if data in ("seg-graph", "seg-graph-binary"):
            # superpixel adjacency graphs for GraphModel (cached on disk on first use)
            X, Y, make_model = datasets.load_superpixel_graphs(data, "train")
            Xt, Yt, _ = datasets.load_superpixel_graphs(data, "test")
            return X, Y, Xt, Yt, make_model()
        # graph-cut / Potts segmentation built from scikit-image's photos (cached on disk on first use)
        X, Y, make_model = datasets.load_segmentation(data, "train")
        Xt, Yt, _ = datasets.load_segmentation(data, "test")
    except ImportError as exc:
        raise DataError(data, f"needs scikit-image ({exc}); pip install 'structfw[seg]'") from None
    return X, Y, Xt, Yt, make_model()


def _load_svmlight_split(data, seed):
    """An svmlight file, sparse end to end, split 80/20 at random (``seed``)."""
    import numpy as np

    from .. import models

    X, y = read_svmlight(data)
    classes, yi = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise DataError(data, f"has a single class ({classes[0]:g}); a classifier needs at least 2")
    if len(yi) < 5:
        raise DataError(data, f"has {len(yi)} examples; at least 5 are needed for an 80/20 train/test split")
    perm = np.random.default_rng(seed).permutation(len(yi))
    cut = int(0.8 * len(yi))
    tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
    model = models.MulticlassModel(n_classes=len(classes), n_features=X.shape[1])
    rows = model.check_X(X)  # sparse rows, never densified
    return [rows[i] for i in tr], list(yi[tr]), [rows[i] for i in te], list(yi[te]), model


def read_svmlight(data, dense=False, n_features=None):
    """X (CSR, or with ``dense`` an array) and y of an svmlight/LIBSVM file, or a one-line `DataError`.

    ``n_features``: the columns of the model the file is for (a feature id beyond it is an error).
    """
    path = Path(data)
    if not path.exists():
        raise DataError(data, f"no such file; expected one of {', '.join(NAMED_DATA)} or an svmlight/LIBSVM file")
    if path.is_dir():
        raise DataError(data, "is a directory; expected an svmlight/LIBSVM file")
    if not os.access(path, os.R_OK):
        raise DataError(data, "is not readable (permission denied)")
    if path.stat().st_size == 0:
        raise DataError(data, "is empty")
    from ..datasets import load_svmlight

    try:
        # sparse (a dense X only within the reader's bound), d bounded by the file's non-zeros,
        # values and ids checked line by line
        X, y = load_svmlight(path, n_features=n_features, dense=dense)
    except (ValueError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        prefix = f"{path}: "
        raise DataError(data, reason[len(prefix):] if reason.startswith(prefix) else reason) from None
    if X.shape[0] == 0:
        raise DataError(data, "has no examples")
    return X, y


# --------------------------------------------------------------------------- corpus files
#: ``--format`` of `structfw train`: how a --data file is read
FORMAT_CHOICES = ["auto", "conll", "wordtag", "svmlight", "graph"]
#: the formats read as a tagged corpus (trained as a sequence tagger)
CORPUS_FORMATS = ("conll", "wordtag")
FORMAT_HELP = ("How a --data file is read: 'conll' (one token a line, the token first and its tag in the last "
               "column, a blank line between sentences), 'wordtag' (one sentence a line, tokens word/TAG, split on "
               "the last slash), 'svmlight', 'graph' (one graph a line as a JSON object: nodes, edges, edge_features, "
               "labels; trains a GraphModel), or 'auto': by the suffix (.conll, .wordtag, .svm/.svmlight/.libsvm, "
               ".jsonl/.ndjson), else by the first lines' content, else svmlight. A conll or wordtag file trains a "
               "sequence tagger (structfw.make_tagger; --save writes the whole tagger).")


def data_format(data, fmt):
    """The format ``--data`` is read in: a named set (None), "svmlight", "conll", "wordtag" or "graph".

    ``auto`` keeps what `structfw train` always did for named sets and for files it cannot
    tell (svmlight, whose reader then names the problem); a format given for a named set is
    a usage error.
    """
    if data in NAMED_DATA:
        if fmt not in ("auto", None):
            raise click.UsageError(f"--format {fmt} applies to a file; --data {data} is a named data set")
        return None
    if fmt not in ("auto", None):
        return fmt
    from ..datasets.corpus_files import CORPUS_SUFFIXES, sniff_corpus_format
    from ..datasets.graph_files import sniff_graph_file

    if Path(data).suffix.lower() not in CORPUS_SUFFIXES and sniff_graph_file(data):
        return "graph"
    return sniff_corpus_format(data) or "svmlight"


def _check_data_file(data, what):
    """A one-line `DataError` for a --data path that is not a readable, non-empty file."""
    path = Path(data)
    if not path.exists():
        raise DataError(data, f"no such file; expected one of {', '.join(NAMED_DATA)} or a file ({what})")
    if path.is_dir():
        raise DataError(data, f"is a directory; expected a file ({what})")
    if not os.access(path, os.R_OK):
        raise DataError(data, "is not readable (permission denied)")
    if path.stat().st_size == 0:
        raise DataError(data, "is empty")


def read_corpus(data, fmt, training=True):
    """The `TaggedCorpus` of a --data file in ``fmt`` ("conll", "wordtag" or "raw"), or a `DataError`.

    The reader's ValueError names the file and the line; the message keeps that and drops
    the file's name when it leads, since the `DataError` names it already.
    """
    from ..datasets import corpus_files

    _check_data_file(data, f"{fmt} format")
    try:
        if fmt == "conll":
            return corpus_files.read_conll_file(data, min_columns=2 if training else 1)
        if fmt == "wordtag":
            return corpus_files.read_wordtag_file(data)
        return corpus_files.read_raw_file(data)
    except (ValueError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        prefix = f"{data}: "
        raise DataError(data, reason[len(prefix):] if reason.startswith(prefix) else reason) from None


def load_corpus_split(data, fmt, seed=0):
    """(X, Y, X_test, Y_test) of a tagged corpus file: token lists and tag lists, 80/20 at random.

    The split is the one svmlight files get (``--seed``), so that the printed test error is
    measured on sentences the tagger did not see.
    """
    sentences, tags, _ = read_corpus(data, fmt)
    n = len(sentences)
    if n < 5:
        raise DataError(data, f"has {n} sentence{'s' if n != 1 else ''}; at least 5 are needed for an 80/20 "
                              "train/test split")
    if len({t for ts in tags for t in ts}) < 2:
        raise DataError(data, f"has a single tag ({tags[0][0]!r}); a tagger needs at least 2")
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(0.8 * n)
    tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
    return ([sentences[i] for i in tr], [tags[i] for i in tr], [sentences[i] for i in te], [tags[i] for i in te])


# --------------------------------------------------------------------------- graph files
def read_graphs(data, training=True):
    """The `structfw.datasets.graph_files.GraphFile` of a --data file, or a one-line `DataError`.

    ``training``: the file must label every graph.  The reader's ValueError names the file and
    the line; the file's name is dropped when it leads, since the `DataError` names it already.
    """
    from ..datasets.graph_files import load_graph_file

    _check_data_file(data, "graph format: one JSON object a line")
    try:
        return load_graph_file(data, require_labels=training)
    except (ValueError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        prefix = f"{data}: "
        raise DataError(data, reason[len(prefix):] if reason.startswith(prefix) else reason) from None


def load_graph_split(data, seed=0):
    """(X, Y, X_test, Y_test, model) of a graph file: its graphs split 80/20 at random (``seed``), as
    svmlight files are, and a `GraphModel` sized from the file (n_states: its distinct labels).

    Every label must occur in the training part: a state no training graph shows could not be
    learned, and the test error could not count it.
    """
    graphs = read_graphs(data)
    n, classes = len(graphs.X), graphs.classes
    if len(classes) < 2:
        raise DataError(data, f"has a single label ({classes[0].item()!r}); a GraphModel needs at least 2")
    if n < 5:
        raise DataError(data, f"has {n} graph{'s' if n != 1 else ''}; at least 5 are needed for an 80/20 "
                              "train/test split")
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(0.8 * n)
    tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
    unseen = np.setdiff1d(classes, np.concatenate([graphs.Y[i] for i in tr]))
    if unseen.size:
        i = next(int(i) for i in te if np.isin(graphs.Y[i], unseen).any())
        raise DataError(data, f"label {unseen[0].item()!r} occurs only in the test part of the 80/20 split "
                              f"(line {graphs.lines[i]}; --seed {seed}): give more graphs with it, or another --seed")
    try:
        model = graphs.make_model()
    except ValueError as exc:  # sizes beyond the model's bounds
        raise DataError(data, str(exc)) from None
    click.echo(f"{data}: graph file, {n} graphs, {sum(x[0].shape[0] for x in graphs.X)} nodes, "
               f"{sum(x[1].shape[0] for x in graphs.X)} edges, {len(classes)} labels, {graphs.n_features} node and "
               f"{graphs.n_edge_features} edge feature{'s' if graphs.n_edge_features != 1 else ''}; a GraphModel "
               f"trained on {len(tr)}, tested on {len(te)} (--seed {seed})")
    return ([graphs.X[i] for i in tr], [graphs.Y[i] for i in tr], [graphs.X[i] for i in te],
            [graphs.Y[i] for i in te], model)


# --------------------------------------------------------------------------- outputs
def check_output_path(path, option, suffixes=None, directory=False):
    """Fail before training, not after, if ``path`` cannot be written."""
    if path is None:
        return None
    p = Path(path)
    if directory:
        if p.exists() and not p.is_dir():
            raise click.BadParameter(f"{path} exists and is not a directory", param_hint=option)
        parent = p if p.exists() else _first_existing_parent(p)
    else:
        if p.is_dir():
            raise click.BadParameter(f"{path} is a directory; expected a file name", param_hint=option)
        if suffixes and p.suffix.lower() not in suffixes:
            raise click.BadParameter(f"{path} must end in {' or '.join(suffixes)}", param_hint=option)
        if not p.parent.is_dir():
            raise click.BadParameter(f"the folder {p.parent} does not exist", param_hint=option)
        parent = p.parent
        if p.exists() and not os.access(p, os.W_OK):
            raise click.BadParameter(f"{path} is not writable", param_hint=option)
    if not os.access(parent, os.W_OK):
        raise click.BadParameter(f"cannot write in {parent}", param_hint=option)
    return p


def _first_existing_parent(p):
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise click.BadParameter(f"{parent} is not a directory", param_hint="--out")
            return parent
    return Path(".")


def require_matplotlib(option):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise click.BadParameter("needs matplotlib: pip install 'structfw[plot]'", param_hint=option) from None


def write_outputs(writers):
    """Run each (label, function) independently; report failures; True if all succeeded.

    One output that fails (a full disk, a vanished folder) must not prevent the
    others, above all not the model file, which is written first.
    """
    ok = True
    for label, write in writers:
        try:
            where = write()
            click.echo(f"{label}: {where}")
        except Exception as exc:  # report and go on: the other outputs are independent
            click.echo(f"Error: could not write the {label} ({type(exc).__name__}: {exc})", err=True)
            ok = False
    return ok


# --------------------------------------------------------------------------- table
def print_table(trace, file=None):
    """One line per checkpoint: engine pass, effective passes (oracle calls / n), gap, primal,
    test error, optimisation time."""
    has_test = "test_loss" in trace.columns
    has_engine = "engine_passes" in trace.columns
    head = (f"{'pass':>7}" + (f" {'oracle/n':>8}" if has_engine else "") + f" {'gap':>11} {'primal':>11}"
            + (f" {'test err':>9}" if has_test else "") + f" {'time s':>8}")
    click.echo(head, file=file)
    for k in range(len(trace)):
        r = trace[k]
        engine = r.get("engine_passes", r["passes"]) if has_engine else r["passes"]
        line = f"{engine:7.2f}" + (f" {r['passes']:8.2f}" if has_engine else "")
        line += f" {format_gap(r['gap'], 11)} {r['primal']:11.6f}"
        if has_test:
            line += f" {r.get('test_loss', float('nan')):9.4f}"
        line += f" {r['time_s']:8.2f}"
        click.echo(line, file=file)
    notes = []
    if has_engine:
        notes.append("pass: the solver's passes, which --passes counts; oracle/n: effective passes, all oracle "
                     "calls / n, as the papers and --plot plot")
    if len(trace) and not np.isfinite(trace["gap"]).any():
        notes.append("gap -: this solver has no dual, hence no duality gap")
    if notes:
        click.echo("(" + "; ".join(notes) + ")", file=file)


def format_gap(gap, width=0, spec=".4e"):
    """The gap as the tables print it: "-" when there is none (SSG has no dual, its gap is NaN)."""
    text = format(gap, spec) if gap is not None and np.isfinite(gap) else "-"
    return f"{text:>{width}}" if width else text


#: why a fit ended, as the commands print it ("stopped: <reason> (<detail>)")
_STOP_DETAIL = {
    "tol": "the duality gap reached --tol",
    "max_passes": "--passes done",
    "time_budget": "--time-budget used up",
}

#: exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)
EXIT_INTERRUPTED = 130


def stop_message(stopped, saved=None, save_hint="--save PATH"):
    """One line saying why a fit ended; for an interrupted fit, where (or whether) the model was saved.

    Parameters
    ----------
    stopped : str
        The estimator's ``stopped_``.
    saved : str or Path or None
        The model file written, if any.
    save_hint : str or None
        The option that saves the model, named when an interrupted fit was not saved
        (None: the command cannot save one).
    """
    if stopped == "interrupted":
        if saved is not None:
            return f"stopped: interrupted (model saved to {saved})"
        if save_hint:
            return f"stopped: interrupted (not saved: pass {save_hint})"
        return "stopped: interrupted"
    detail = _STOP_DETAIL.get(stopped)
    return f"stopped: {stopped} ({detail})" if detail else f"stopped: {stopped}"
