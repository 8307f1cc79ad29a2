"""``structfw predict``: a saved model's labels (and marginals) on a data set, written to a file."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
import numpy as np

from ..io import write_npz
from ._common import (DATA_HELP, DataError, check_output_path, data_format, load_training_data, read_corpus,
                      read_graphs, write_outputs)

OUT_SUFFIXES = (".json", ".npz")
#: ``--format``: how a tagger reads --data (an estimator file reads what `structfw train` reads; "graph" is
#: for an estimator file: a graph file whatever its suffix)
TEXT_FORMATS = ["auto", "raw", "conll", "wordtag", "graph"]
#: the options that apply to an estimator file only
ESTIMATOR_ONLY = ("split", "seed", "marginals", "temperature")


@click.command("predict")
@click.option("--model", "model_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A model file written by `structfw train --save` (StructuredSVM.save, or Tagger.save for a "
                   "tagger trained on a corpus file).")
@click.option("--data", required=True,
              help="The data to predict, as for `structfw train`: " + DATA_HELP + " For a tagger: a text file "
                   "(see --format).")
@click.option("--format", "text_format", type=click.Choice(TEXT_FORMATS), default="auto", show_default=True,
              help="For a tagger file: how --data is read and --out written. 'raw': one sentence a line, tokens "
                   "separated by white space, written back one sentence a line as word/TAG; 'conll': one token a "
                   "line (in the first column; other columns ignored), a blank line between sentences, written as "
                   "two columns 'word<TAB>TAG'; 'wordtag': word/TAG lines, whose tags give the token accuracy; "
                   "'auto': by the suffix (.conll, .wordtag), else raw. For an estimator file: 'graph' reads --data "
                   "as a graph file (JSON lines, found by its suffix .jsonl/.ndjson or its content under 'auto'), "
                   "whose graphs are all predicted, in file order.")
@click.option("--split", type=click.Choice(["test", "train"]), default="test", show_default=True,
              help="Which part of --data to predict.")
@click.option("--seed", default=0, show_default=True,
              help="Seed of the 80/20 split of an svmlight file (the --seed given to `structfw train`).")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Output file: .json (nested lists) or .npz (flat arrays, for large outputs); for a tagger, the "
                   "tagged text (see --format).")
@click.option("--marginals", is_flag=True,
              help="Also write the node marginals (chain, multiclass, graph CRFs on forests).")
@click.option("--temperature", type=float, default=None,
              help="T of the marginals [default: the model's calibrated temperature, else 1].")
@click.pass_context
def predict(ctx, model_path, data, text_format, split, seed, out, marginals, temperature):
    """Predict with a saved model; write labels (and --marginals) to JSON or .npz.

    The labels are those the model was trained with (its classes_).  When the data
    hold true labels, the token accuracy is printed (and, with --marginals, the
    expected calibration error of the per-token confidences).  The .json file holds
    "labels" (one nested list per example) and "marginals" (one list of rows per
    example); the .npz file holds the labellings flattened into one array "labels",
    "shapes" (one row per example) to split it, "marginals" (one row per position, in
    the same order) and "classes".  JSON is easy to read; .npz is about 4x smaller
    (the OCR test set with marginals: 0.7 MB against 2.7 MB).

    A tagger file (`structfw train --data corpus.conll --save`) tags a text file
    instead: see --format.  A graph file (JSON lines, as `structfw train --data
    graphs.jsonl` reads) is predicted whole: every graph, in file order, its labels
    optional; the output also holds each graph's file line ("lines").
    """
    from .. import _prediction
    from ..features import TAGGER_KIND
    from ..io import model_kind

    kind = model_kind(model_path)
    if kind == "FrankWolfeSVC":
        raise click.UsageError(f"--model {model_path} holds a kernel SVM (FrankWolfeSVC); predict with it by "
                               "`structfw svm predict`")
    if kind == TAGGER_KIND:
        if text_format == "graph":
            raise click.UsageError(f"--format graph applies to a graph model's file; --model {model_path} holds a "
                                   "tagger, which reads text (--format raw, conll or wordtag)")
        given = [f"--{name}" for name in ESTIMATOR_ONLY
                 if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT]
        if given:
            what = "not options" if len(given) > 1 else "not an option"
            raise click.UsageError(f"{', '.join(given)}: {what} of a tagger file (--model {model_path}); "
                                   "it tags every sentence of --data")
        return _predict_tagger(model_path, data, text_format, out)
    if text_format not in ("auto", "graph"):
        raise click.UsageError(f"--format {text_format} applies to a tagger file; --model {model_path} holds an "
                               "estimator, which reads --data as `structfw train` does")
    from ..estimator import StructuredSVM
    from ..metrics import expected_calibration_error, token_accuracy

    check_output_path(out, "--out", suffixes=OUT_SUFFIXES)
    if temperature is not None and not marginals:
        raise click.UsageError("--temperature applies to the marginals: give --marginals too")
    if temperature is not None and not (np.isfinite(temperature) and temperature > 0):
        raise click.BadParameter(f"must be a positive number; got {temperature}", param_hint="--temperature")
    try:
        svm = StructuredSVM.load(model_path)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None
    if marginals:
        try:
            _prediction.check_support(svm.model, "marginals", getattr(svm, "kernel_expansion_", None))
        except NotImplementedError as exc:
            raise click.UsageError(f"--marginals: {exc}") from None

    lines = None
    if data_format(data, text_format) == "graph":
        Xt, Yt, lines = _graph_data(ctx, model_path, svm.model, data)
        split = "all"
    else:
        X, Y, Xt, Yt, data_model = load_training_data(data, "auto", seed=seed)
        if split == "train":
            Xt, Yt = X, Y
        if type(data_model) is not type(svm.model):
            raise click.UsageError(f"--model {model_path} holds a {type(svm.model).__name__}, but --data {data} is "
                                   f"for a {type(data_model).__name__}")
    try:
        labels = list(svm.predict(Xt))
        M = svm.predict_marginals(Xt, temperature) if marginals else None
    except NotImplementedError as exc:
        raise click.UsageError(f"--marginals: {exc}") from None
    except ValueError as exc:
        raise DataError(data, str(exc)) from None
    T = svm._temperature(temperature) if marginals else None

    classes = getattr(svm, "classes_", None)
    acc = ece = None
    comparable = Yt is not None and (classes is None or (np.asarray(classes).dtype.kind == "U")
                                     == (np.asarray(Yt[0]).dtype.kind == "U"))
    if comparable:
        acc = token_accuracy(Yt, labels)
        if M is not None:
            ece = expected_calibration_error(Yt, M, classes=classes)
    info = dict(model=str(model_path), data=data, split=split, n_examples=len(labels),
                classes=None if classes is None else np.asarray(classes).tolist(),
                token_accuracy=acc, temperature=T)
    if M is not None:
        info["expected_calibration_error"] = ece
    if lines is not None:
        info["lines"] = lines  # the file line of each graph (blank lines are skipped)
    ok = write_outputs([("predictions", lambda: _write(out, info, labels, M))])
    line = f"{len(labels)} examples ({split} split of {data})" if lines is None else f"{len(labels)} graphs ({data})"
    if acc is not None:
        line += f": token accuracy {acc:.4f}"
    elif Yt is not None:
        line += ": token accuracy not computed (the model's labels and the data's are of other kinds)"
    click.echo(line)
    if M is not None:
        conf = float(np.mean(np.concatenate([np.max(m, axis=-1).ravel() for m in M])))
        click.echo(f"marginals at T = {T:.4g}: mean token confidence {conf:.4f}"
                   + (f", expected calibration error {ece:.4f}" if ece is not None else ""))
    if not ok:
        sys.exit(1)


def _graph_data(ctx, model_path, model, data):
    """(X, Y or None, lines) of a graph file to predict whole, after checking that the options and the
    model's feature counts apply to it."""
    from ..models import GraphModel

    given = [f"--{name}" for name in ("split", "seed")
             if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT]
    if given:
        raise click.UsageError(f"{', '.join(given)}: not {'options' if len(given) > 1 else 'an option'} of a graph "
                               f"file (--data {data}); every graph of it is predicted, in file order")
    if not isinstance(model, GraphModel):
        raise click.UsageError(f"--model {model_path} holds a {type(model).__name__}, but --data {data} is a graph "
                               "file (for a GraphModel)")
    graphs = read_graphs(data, training=False)
    for what, have, want in (("node", graphs.n_features, model.n_features),
                             ("edge", graphs.n_edge_features, model.n_edge_features)):
        if have != want:
            raise DataError(data, f"its graphs have {have} {what} feature{'s' if have != 1 else ''}, but the model "
                                  f"(--model {model_path}) takes {want}")
    return graphs.X, graphs.Y, graphs.lines


def _write(out, info, labels, M):
    if out.lower().endswith(".npz"):
        arrays = {"labels": np.concatenate([np.asarray(y).ravel() for y in labels]),
                  "shapes": np.array([np.shape(y) for y in labels], dtype=np.int64).reshape(len(labels), -1),
                  "info": np.array(json.dumps({k: v for k, v in info.items() if k != "classes"}))}
        if info["classes"] is not None:
            arrays["classes"] = np.asarray(info["classes"])
        if M is not None:
            arrays["marginals"] = np.concatenate([m.reshape(-1, m.shape[-1]) for m in M])
        write_npz(out, arrays, compress=True)  # atomic, as model files are written
        return out
    doc = dict(info, labels=[np.asarray(y).tolist() for y in labels])
    if M is not None:
        doc["marginals"] = [m.tolist() for m in M]
    with open(out, "w") as f:
        json.dump(doc, f)
    return out


# --------------------------------------------------------------------------- taggers
def _predict_tagger(model_path, data, text_format, out):
    """Tag the sentences of a text file with a saved `structfw.features.Tagger`; write them to ``out``."""
    from ..features import Tagger
    from ..metrics import token_accuracy

    check_output_path(out, "--out")
    if Path(out).suffix.lower() in OUT_SUFFIXES:
        raise click.BadParameter(f"{out}: a tagger writes tagged text (word/TAG lines or CoNLL columns), not "
                                 f"{Path(out).suffix.lower()}; name a text file such as tags.txt", param_hint="--out")
    fmt = _text_format(data, text_format)
    try:
        tagger = Tagger.load(model_path)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None
    sentences, gold, _ = read_corpus(data, fmt, training=False)
    todo = [i for i, s in enumerate(sentences) if s]  # blank raw lines stay blank lines, untagged
    try:
        predicted = tagger.predict([sentences[i] for i in todo])
    except ValueError as exc:
        raise DataError(data, str(exc)) from None
    tags = [[] for _ in sentences]
    for i, y in zip(todo, predicted):
        tags[i] = [str(t) for t in y]
    ok = write_outputs([("tags", lambda: _write_tagged(out, fmt, sentences, tags))])
    n_tokens = sum(map(len, sentences))
    line = f"{len(todo)} sentences, {n_tokens} tokens tagged ({fmt} file {data})"
    if fmt == "wordtag":
        line += f": token accuracy {token_accuracy([gold[i] for i in todo], [tags[i] for i in todo]):.4f}"
    click.echo(line)
    if not ok:
        sys.exit(1)


def _text_format(data, text_format):
    """The format a tagger reads --data in: the one given, else by the suffix, else raw."""
    if text_format != "auto":
        return text_format
    from ..datasets.corpus_files import CORPUS_SUFFIXES

    fmt = CORPUS_SUFFIXES.get(Path(data).suffix.lower())
    return fmt if fmt in ("conll", "wordtag") else "raw"


def _write_tagged(out, fmt, sentences, tags):
    """Write the tagged sentences: word/TAG lines, or two CoNLL columns; atomically (a temp file renamed)."""
    if fmt == "conll":
        blocks = ["".join(f"{w}\t{t}\n" for w, t in zip(s, ts)) for s, ts in zip(sentences, tags)]
        text = "\n".join(blocks)
    else:
        text = "".join(" ".join(f"{w}/{t}" for w, t in zip(s, ts)) + "\n" for s, ts in zip(sentences, tags))
    tmp = Path(f"{out}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out
