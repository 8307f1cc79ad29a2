"""Helpers shared by the benchmarks: data, lam parsing, runs, aggregation over seeds, JSON."""
from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np


def load_ocr_data(subsample=None, seed=0):
    """OCR train/test words and the chain model; ``subsample`` keeps that many random
    training words (and a tenth as many test words, at least 10)."""
    from structfw import datasets, models

    X, Y = datasets.load_ocr("train")
    Xt, Yt = datasets.load_ocr("test")
    if subsample:
        rng = np.random.default_rng(seed)
        k = min(int(subsample), len(X))
        idx = np.sort(rng.choice(len(X), k, replace=False))
        X, Y = [X[i] for i in idx], [Y[i] for i in idx]
        kt = min(len(Xt), max(10, k // 10))
        Xt, Yt = Xt[:kt], Yt[:kt]
    return X, Y, Xt, Yt, models.ChainModel(n_states=26, n_features=128)


def parse_lam(value, n):
    """A float, or "1/n", "0.01/n", "c/n" (n = number of training examples)."""
    if isinstance(value, (int, float)):
        return float(value)
    s = str(value).strip().replace(" ", "")
    if s.endswith("/n"):
        c = s[:-2]
        return (1.0 if c in ("", "1") else float(c)) / n
    return float(s)


def check_lam_option(lam):
    """A click usage error naming --lam unless ``lam`` is a positive number, '1/n' or 'c/n'
    (checked before any data are loaded: n = 1 stands in for the training set's size)."""
    import click

    try:
        ok = parse_lam(lam, 1) > 0
    except ValueError:
        ok = False
    if not ok:
        raise click.BadParameter(f"expected a positive number, '1/n' or 'c/n', got {lam!r}", param_hint="'--lam'")


def lam_name(value):
    return str(value)


def plan_fits(fits):
    """Tell the command's progress bar (`structfw._progress`) how many more fits are coming, so
    that it can estimate the time left; nothing when no bar is listening."""
    from structfw._progress import listener

    bar = listener()
    if bar is not None:
        bar.plan(int(fits))


def run_fit(model, solver, X, Y, lam, passes, seed, Xt=None, Yt=None, check_every=1, tol=None,
            time_budget=None):
    """Fit one StructuredSVM and return its trace as a dict of lists plus meta."""
    from structfw import StructuredSVM

    svm = StructuredSVM(model, solver=solver, lam=lam, max_passes=passes, tol=tol, check_every=check_every,
                        time_budget=time_budget, random_state=seed)
    t0 = time.perf_counter()
    svm.fit(X, Y, X_test=Xt, Y_test=Yt)
    wall = time.perf_counter() - t0
    tr = svm.trace_
    cols = {c: [_jf(v) for v in tr[c]] for c in tr.columns}
    return dict(seed=seed, wall_s=wall, stopped=svm.stopped_, columns=cols, meta=_jsonable(tr.meta)), svm


def col(run, name):
    c = run["columns"].get(name)
    return np.array([math.nan if v is None else v for v in c], float) if c is not None else None


def on_grid(x, y, grid, log=True):
    """Interpolate y(x) at grid points (log-linear in y); NaN outside [x0, x_last]."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    out = np.full(len(grid), np.nan)
    if len(x) == 0:
        return out
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    inside = (grid >= x[0] - 1e-9) & (grid <= x[-1] + 1e-9)
    if log:
        yy = np.log(np.maximum(y, 1e-300))
        out[inside] = np.exp(np.interp(grid[inside], x, yy))
    else:
        out[inside] = np.interp(grid[inside], x, y)
    return out


def bands(rows):
    """median, min, max over runs (rows), NaN-aware; lists for JSON."""
    a = np.asarray(rows, float)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            med, lo, hi = np.nanmedian(a, 0), np.nanmin(a, 0), np.nanmax(a, 0)
    return dict(median=[_jf(v) for v in med], min=[_jf(v) for v in lo], max=[_jf(v) for v in hi])


def first_reach(x, y, target):
    """Smallest x at which y <= target (NaN if never)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    hit = np.nonzero(np.isfinite(y) & (y <= target))[0]
    return float(x[hit[0]]) if len(hit) else math.nan


def crossing(x, gap, target):
    """x where the gap first reaches the target, interpolated log-linearly between the two
    checkpoints around it (checkpoints come once a pass: reading x at the first checkpoint
    below the target would round every run up to whole passes); NaN if never."""
    x, lg = np.asarray(x, float), np.log(np.maximum(np.asarray(gap, float), 1e-300))
    hit = np.flatnonzero(lg <= math.log(target))
    if len(hit) == 0:
        return math.nan
    j = hit[0]
    if j == 0 or lg[j - 1] == lg[j]:
        return float(x[j])
    f = (lg[j - 1] - math.log(target)) / (lg[j - 1] - lg[j])
    return float(x[j - 1] + f * (x[j] - x[j - 1]))


def environment():
    import numba

    return dict(python=platform.python_version(), machine=platform.machine(), processor=platform.processor(),
                numpy=np.__version__, numba=numba.__version__, time=time.strftime("%Y-%m-%d %H:%M:%S"))


def child_env(env=None):
    """Environment for a child Python process that imports the same structfw and structfw_bench
    as this process.

    Either package may come from a source tree on ``sys.path`` (the tests put the checkout's
    ``src`` and ``bench/src`` there) rather than from an installed copy, which a fresh interpreter
    would not find by itself: both roots go first on ``PYTHONPATH``, structfw's before
    structfw_bench's, so that an installed structfw_bench beside a source-tree structfw does not
    bring the installed structfw with it.

    Parameters
    ----------
    env : dict or None
        The environment to extend (a copy is returned); None: this process's ``os.environ``.

    Returns
    -------
    dict
        The environment with ``PYTHONPATH`` set.
    """
    import structfw

    env = dict(os.environ if env is None else env)
    roots = [str(Path(structfw.__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1])]
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(roots + rest))
    return env


def write_json(path, doc):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(_jsonable(doc), indent=1, allow_nan=False))


def pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _jf(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return _jf(v)
    if v is None or isinstance(v, str):
        return v
    return repr(v)


def parse_number_list(text, kind=int, minimum=None, param_hint=None):
    """"3,16,64" as a tuple of ``kind`` (int or float): finite, >= ``minimum`` for integers and
    > 0 for floats; empty items are skipped.  A click.BadParameter (naming ``param_hint``) otherwise."""
    import click

    what = "integers" if kind is int else "numbers"
    try:
        vals = tuple(kind(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated {what}, got {text!r}", param_hint=param_hint) from None
    if kind is int:
        bad = minimum is not None and any(v < minimum for v in vals)
        need = f"integers >= {minimum}"
    else:
        bad = any(not (math.isfinite(v) and v > 0) for v in vals)
        need = "positive numbers"
    if not vals or bad:
        raise click.BadParameter(f"expected comma-separated {need}, got {text!r}", param_hint=param_hint)
    return vals


def int_list_callback(minimum):
    """A click callback that parses "3,16,64" into a tuple of integers >= ``minimum``."""

    def parse(ctx, param, value):
        return parse_number_list(value, int, minimum)

    return parse


def float_list_callback(ctx, param, value):
    """A click callback that parses "0.1,1,10" into a tuple of positive finite floats."""
    return parse_number_list(value, float)
