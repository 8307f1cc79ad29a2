"""``structfw svm train|predict``: the kernel SVM (`structfw.svm.FrankWolfeSVC`) on svmlight files.

Every flag of ``svm train`` but ``--data`` and ``--save`` is one parameter of FrankWolfeSVC
(``cache_size`` -> ``--cache-size``), generated from its ``_parameter_constraints`` with the
first sentence of the parameter's entry in its docstring as help, so that flags, bounds and
help cannot drift from the estimator.  A flag not given leaves the estimator's default.
"""
from __future__ import annotations

import inspect
import json
import re
import sys
import warnings

import click
import numpy as np

from .._params import NONE, InstanceOf, Interval, Options
from ..svm import FrankWolfeSVC
from ._common import (EXIT_INTERRUPTED, DataError, check_output_path, read_svmlight, stop_message,
                      write_outputs)

OUT_SUFFIXES = (".json", ".npz")
#: kernels the command line offers: an svmlight file holds features, not a Gram matrix
CLI_KERNELS = tuple(k for k in FrankWolfeSVC._parameter_constraints["kernel"][0].values if k != "precomputed")
#: why a fit ended, as ``svm train`` prints it
_STOP_DETAIL = {"converged": "every machine's duality gap reached --tol",
                "max_iter": "--max-iter reached before the duality gap fell below --tol"}


def flag(name):
    """The flag of a FrankWolfeSVC parameter: ``cache_size`` -> ``--cache-size``, ``C`` -> ``--C``."""
    return "--" + name.replace("_", "-")


# --------------------------------------------------------------------------- flags from the constraints
class Constrained(click.ParamType):
    """A flag's value read as its parameter's constraints accept it: a number within an `Interval`
    (an integer where it asks for one), one of the `Options` ("none" for None); the message names
    everything accepted."""

    def __init__(self, constraints):
        self.constraints = [c for c in constraints if not isinstance(c, InstanceOf)]  # objects: not on a command line
        words = []
        for c in self.constraints:
            if isinstance(c, Interval):
                words.append("INTEGER" if c.integer else "FLOAT")
            else:
                words.extend("none" if v is None else str(v) for v in c.values)
        self.name = "|".join(words)

    def get_metavar(self, param, *args, **kwargs):  # the words as they are typed: scale|auto|FLOAT
        return self.name

    def describe(self):
        return " or ".join("none" if c is NONE else c.describe() for c in self.constraints)

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value  # a default, or a value already converted
        text = value.strip()
        for c in self.constraints:
            if isinstance(c, Options):
                for v in c.values:
                    if (v is None and text.lower() == "none") or (isinstance(v, str) and text == v):
                        return v
            else:
                try:
                    number = int(text) if c.integer else float(text)
                except ValueError:
                    continue
                if c.accepts(number):
                    return number
        self.fail(f"{value!r} is not {self.describe()}", param, ctx)


def _parameter_help():
    """FrankWolfeSVC's parameter -> the first sentence of its docstring entry (plain text)."""
    doc = inspect.getdoc(FrankWolfeSVC) or ""
    section = doc.split("Parameters\n----------\n", 1)[-1]
    section = re.split(r"\n\S[^\n]*\n-{3,}\n", section, maxsplit=1)[0]  # up to the next section
    paragraphs: dict[str, list[str]] = {}
    name = None
    for line in section.splitlines():
        entry = re.match(r"^(\w+) : ", line)
        if entry:
            name = entry.group(1)
            paragraphs[name] = []
        elif not line.strip():
            name = None  # the first paragraph of an entry is enough
        elif name is not None:
            paragraphs[name].append(line.strip())
    helps = {}
    for name, lines in paragraphs.items():
        text = " ".join(lines).replace("``", "")
        helps[name] = re.split(r'(?<=[.)])\s+(?=[A-Z"])', text, maxsplit=1)[0]
    return helps


def _svc_option(name, constraints, default, help_):
    """The click option of one parameter: a choice for string options, else a `Constrained` value;
    its default None means "not given" (the estimator's own default applies)."""
    if name == "kernel":
        kind = click.Choice(CLI_KERNELS)
        help_ = help_.split(";")[0] + " ('precomputed' is not offered: an svmlight file holds features)."
    elif all(isinstance(c, Options) and all(isinstance(v, str) for v in c.values) for c in constraints):
        kind = click.Choice([v for c in constraints for v in c.values])
    else:
        kind = Constrained(constraints)
    shown = "none" if default is None else default
    return click.option(flag(name), name, type=kind, default=None, help=f"{help_} [FrankWolfeSVC {name}; default {shown}]")


def svc_options(command):
    """Decorator adding one flag per FrankWolfeSVC parameter, in the constructor's order."""
    helps = _parameter_help()
    defaults = {n: p.default for n, p in inspect.signature(FrankWolfeSVC.__init__).parameters.items() if n != "self"}
    table = FrankWolfeSVC._parameter_constraints
    for name in reversed(list(defaults)):
        command = _svc_option(name, table[name], defaults[name], helps.get(name, name.replace("_", " ")))(command)
    return command


def _given(params):
    """The FrankWolfeSVC parameters given on the command line (a flag not given keeps the default)."""
    return {name: value for name, value in params.items() if value is not None}


# --------------------------------------------------------------------------- data
def _read(data, n_features=None):
    """(X dense, y) of an svmlight file: labels that are whole numbers become integers (so that the
    labels written back read 1, not 1.0)."""
    X, y = read_svmlight(data, dense=True, n_features=n_features)
    if y.size and np.all(y == np.round(y)) and np.abs(y).max() < 2 ** 53:
        y = y.astype(np.int64)
    return X, y


# --------------------------------------------------------------------------- commands
@click.group("svm")
def svm_group():
    """Kernel SVM (FrankWolfeSVC: FW, MFW, SWAP, PARTAN) on svmlight files: svm train, svm predict."""


@svm_group.command("train")
@click.option("--data", required=True, help="An svmlight/LIBSVM file to train on (every example; 2 or more classes).")
@svc_options
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Save the fitted classifier (.npz added if missing); written first, whatever else fails.")
def svm_train(data, save, **params):
    """Train a kernel SVM (FrankWolfeSVC) on an svmlight file; print each machine's iterations and gap.

    Two classes train one machine, more train one per class (one-vs-rest). The summary
    gives the training accuracy, the support vectors and the fit time; test a saved model
    on another file with `structfw svm predict`. Ctrl-C stops the solve at a consistent
    iterate, which is still saved (--save); the command then exits with status 130.
    """
    from sklearn.exceptions import ConvergenceWarning

    check_output_path(save, "--save")
    svc = FrankWolfeSVC(**_given(params))
    _check_params(svc)
    X, y = _read(data)
    classes = np.unique(y)
    if classes.size < 2:
        raise DataError(data, f"has a single class ({classes[0].item()!r}); a classifier needs at least 2")
    click.echo(f"{data}: {X.shape[0]} examples, {X.shape[1]} features, {classes.size} classes; FrankWolfeSVC("
               + ", ".join(f"{k}={v!r}" for k, v in _given(params).items()) + ")")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # the stop line below says it
            svc.fit(X, y)
    except ValueError as exc:
        name = getattr(exc, "param", None)
        if name is not None:
            raise click.BadParameter(str(exc), param_hint=flag(name)) from None
        raise DataError(data, str(exc).splitlines()[0]) from None
    saved = []
    ok = write_outputs([("model", lambda: _saved(svc, save, saved))] if save else [])
    _print_machines(svc)
    click.echo(f"FrankWolfeSVC ({svc.method}, {svc.kernel} kernel, gamma {svc._gamma:.4g}): training accuracy "
               f"{svc.score(X, y):.4f}; {svc.support_.size} support vectors; {svc.fit_time_:.2f} s")
    detail = _STOP_DETAIL.get(svc.stopped_)
    click.echo(f"stopped: {svc.stopped_} ({detail})" if detail else
               stop_message(svc.stopped_, saved[0] if saved else None))
    if svc.stopped_ == "interrupted":
        sys.exit(EXIT_INTERRUPTED)
    if not ok:
        sys.exit(1)


@svm_group.command("predict")
@click.option("--model", "model_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A classifier file written by `structfw svm train --save` (FrankWolfeSVC.save).")
@click.option("--data", required=True,
              help="An svmlight/LIBSVM file to predict, with at most the model's features (its ids are read as "
                   "training read them: zero-based when an id 0 occurs).")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Output file: .json (the labels as a list, the classes and the accuracy) or .npz (labels as an "
                   "array; the rest as the JSON text 'info').")
def svm_predict(model_path, data, out):
    """Predict with a saved kernel SVM (FrankWolfeSVC); write the labels, print the accuracy.

    The accuracy is computed when every label of the file is one of the model's classes
    (a file of placeholder labels, such as all 0, is predicted without it).
    """
    from ..io import model_kind

    check_output_path(out, "--out", suffixes=OUT_SUFFIXES)
    kind = model_kind(model_path)
    if kind not in (None, "FrankWolfeSVC"):
        raise click.UsageError(f"--model {model_path} holds a {kind}, not a FrankWolfeSVC; `structfw predict` "
                               "predicts with it")
    try:
        svc = FrankWolfeSVC.load(model_path)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None
    X, y = _read(data, n_features=int(svc.n_features_in_))
    try:
        labels = svc.predict(X)
    except ValueError as exc:
        raise DataError(data, str(exc).splitlines()[0]) from None
    known = bool(np.isin(y, svc.classes_).all())
    accuracy = float(np.mean(labels == y)) if known else None
    info = dict(model=str(model_path), data=data, n_examples=int(labels.size), classes=svc.classes_.tolist(),
                accuracy=accuracy)
    ok = write_outputs([("predictions", lambda: _write(out, info, labels))])
    line = f"{labels.size} examples ({data})"
    if known:
        line += f": accuracy {accuracy:.4f}"
    else:
        unseen = np.setdiff1d(y, svc.classes_)
        line += (f": accuracy not computed (the file's label {unseen[0].item()!r} is not one of the model's classes "
                 f"{svc.classes_.tolist()[:8]})")
    click.echo(line)
    if not ok:
        sys.exit(1)


# --------------------------------------------------------------------------- helpers
def _check_params(svc):
    """The parameters against FrankWolfeSVC's constraints before the data is read; an error names the flag."""
    try:
        svc._check_params()
    except ValueError as exc:
        name = getattr(exc, "param", None)
        raise click.BadParameter(str(exc), param_hint=flag(name) if name else None) from None


def _print_machines(svc):
    """One line per binary machine: its classes, iterations, exact duality gap and objective."""
    classes = svc.classes_.tolist()
    names = ([f"{classes[1]!r} vs {classes[0]!r}"] if len(classes) == 2
             else [f"{c!r} vs rest" for c in classes])
    width = max(7, max(map(len, names)))
    click.echo(f"{'machine':<{width}} {'iterations':>10} {'gap':>11} {'objective':>12}")
    for k, name in enumerate(names):
        click.echo(f"{name:<{width}} {int(svc.n_iter_[k]):>10d} {float(svc.gap_[k]):11.4e} "
                   f"{float(svc.objective_[k]):12.6f}")


def _saved(svc, path, saved):
    written = svc.save(path)
    saved.append(written)
    return written


def _write(out, info, labels):
    from ..io import write_npz

    if out.lower().endswith(".npz"):
        write_npz(out, {"labels": np.asarray(labels), "info": np.array(json.dumps(info))}, compress=True)
        return out
    with open(out, "w") as f:
        json.dump(dict(info, labels=labels.tolist()), f)
    return out
