"""``structfw bench scaling``: how the cost of a pass and the memory grow with the work.

Seconds per pass and peak memory of three solver configurations -- plain BCFW,
BCPFW-gap-cache (``BCFW(step="pairwise", sampling="gap", cache=True)``) and MP-BCFW
(``MPBCFW()``) -- on the synthetic sparse chain of `structfw_bench.synthetic.make_chain_problem`
(10 states, binary CSR node features, fixed sequence length), along three axes, each varied
from one base point with the other two kept:

- ``n``: the number of training sequences;
- ``d``: the joint dimension d = S F + S^2 of the ChainModel (S = 10 states, F node features per
  position; a position has about 13 active features whatever F is, so the data grow with n and
  the length, not with d);
- ``length``: the length of every sequence.

Each point (axis, size, solver) runs in a child process of its own, so that its peak resident
memory (the child's own ``ru_maxrss``) holds nothing of the points before it.  The child warms
the compiled kernels up on a 30-sequence problem with the same row storage (dense or sparse
w_i rows, as the engine's "auto" rule picks for the point), reads its resident-memory peak (the
*baseline*: interpreter, numba, compiled kernels), generates the point's data, fits for
``passes`` passes with a checkpoint after each, and reports the median seconds per pass over
passes 2..P (the trace's ``time_s``: optimisation time, the first pass and the monitoring
excluded, as in ``structfw bench speed``).  For MP-BCFW a pass is an outer iteration: one exact
pass and the approximate passes the slope rule chose (recorded per point).  A child whose warm-up
had to compile a kernel (numba's disk cache was stale) is run again once: compiling raises the
memory peak the baseline is read from.

A slope of log(cost) against log(size) is fitted by least squares per curve: about 1 where the
work of a pass is linear in the size (n, length), about 0 where it does not depend on it, and
the same for the memory above the baseline.  Along d the engine's storage of the w_i rows
changes (dense while n d 8 bytes <= 2 GiB, then sparse), and with it the cost, so the slopes
are also given over the points of each storage alone.  A point whose run is
projected (from the points of the same curve already measured) to take more than
``max_seconds`` is not run and is recorded as skipped, with the projection; a child that runs
past twice that (at least a minute more) is stopped and recorded as skipped too.

Writes ``scaling.json`` and ``scaling.png`` under ``out_dir``.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import numpy as np

from structfw._memory import status_bytes
from ._common import (check_lam_option, child_env, environment, int_list_callback, parse_lam, pyplot,
                      write_json)

#: the axes along which the work grows
AXES = ("n", "d", "length")
#: the solver configurations, by their labels
SOLVERS = ("BCFW", "BCPFW-gap-cache", "MP-BCFW")
#: states of the synthetic chain and features each state owns (make_chain_problem's n_active)
N_STATES = 10
N_ACTIVE = 6
#: the smallest d the sparse generator allows: F >= N_ACTIVE * N_STATES
MIN_D = N_STATES * N_ACTIVE * N_STATES + N_STATES ** 2
#: the base point: every axis varies its own coordinate and keeps these for the others
BASE = {"n": 2000, "d": 2100, "length": 8}
#: sizes of the default run (about 10 minutes on a loaded 2-core machine)
DEFAULT_SIZES = {"n": (1000, 4000, 16000), "d": (1000, 10000, 100000, 1000000), "length": (4, 16, 64)}
#: the full range, given as --sizes (docs/results/scaling.md gives its command and run time)
FULL_SIZES = {"n": (1000, 3000, 10000, 30000, 100000), "d": (1000, 10000, 100000, 1000000, 10000000),
              "length": (4, 16, 64, 256)}
_MINIMUM = {"n": 1, "d": MIN_D, "length": 1}


def make_solver(name, **options):
    """The solver configuration called ``name`` (one of `SOLVERS`), with extra engine ``options``."""
    from structfw import solvers

    if name == "BCFW":
        return solvers.BCFW(**options)
    if name == "BCPFW-gap-cache":
        return solvers.BCFW(step="pairwise", sampling="gap", cache=True, **options)
    if name == "MP-BCFW":
        return solvers.MPBCFW(**options)
    raise ValueError(f"solver must be one of {SOLVERS}; got {name!r}")


def point_problem(axis, size, base=None):
    """The problem sizes of the point ``size`` on ``axis``: a dict with n, length, d and F.

    Parameters
    ----------
    axis : {"n", "d", "length"}
        The coordinate that takes ``size``; the others keep their ``base`` values.
    size : int
        n, d or the sequence length.  A d is rounded to the nearest S F + S^2.
    base : dict, optional
        Base values of n, d and length (default `BASE`).

    Returns
    -------
    dict
        ``n``, ``length``, ``F`` (node features per position) and ``d`` = S F + S^2.
    """
    if axis not in AXES:
        raise ValueError(f"axis must be one of {AXES}; got {axis!r}")
    p = dict(BASE if base is None else base)
    p[axis] = int(size)
    if p["d"] < MIN_D:
        raise ValueError(f"d must be >= {MIN_D} (the generator gives each of the {N_STATES} states "
                         f"{N_ACTIVE} features of its own); got {p['d']}")
    F = max(N_ACTIVE * N_STATES, int(round((p["d"] - N_STATES ** 2) / N_STATES)))
    return dict(n=int(p["n"]), length=int(p["length"]), F=F, d=N_STATES * F + N_STATES ** 2)


def loglog_slope(x, y):
    """Least-squares slope of log(y) against log(x) over the finite positive pairs (None if fewer than 2)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2 or np.ptp(np.log(x[ok])) == 0:
        return None
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def _maxrss_mb():
    """This process's peak resident memory in MB.

    On Linux the high-water mark of its own address space (``VmHWM`` in /proc/self/status):
    ``ru_maxrss`` also keeps the resident size of the address space the process had before its
    ``exec``, and a child started by `subprocess` from a large parent (vfork or fork, then exec)
    reported the parent's size as its own peak: 1.8 GB for the 0.6 GB tagging task run from
    `structfw bench speed`.  Elsewhere ``ru_maxrss`` (KB on Linux, bytes on macOS)."""
    import resource

    peak = status_bytes("VmHWM")
    if peak is not None:
        return peak / 2 ** 20
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2 ** 20 if sys.platform == "darwin" else r / 2 ** 10


def measure_point(spec):
    """Measure one point in this process (the child's side; `run_point` starts it).

    Parameters
    ----------
    spec : dict
        ``solver`` (a name of `SOLVERS`), ``n``, ``length``, ``F``, ``passes``, ``seed`` and
        ``lam`` (a float or "c/n").

    Returns
    -------
    dict
        ``s_per_pass`` (median of passes 2..P), ``per_pass_s``, ``first_pass_s``, the
        approximate passes per MP-BCFW iteration, the seconds of start-up (imports and
        warm-up), data generation and fit, the resident-memory peaks in MB (``baseline_rss_mb``
        after the warm-up, ``data_rss_mb`` after the data, ``peak_rss_mb`` at the end), the row
        storage the engine chose, the data's tokens and non-zeros, the final duality gap, the
        oracle calls and cache hits of the fit, and
        whether numba compiled anything in the warm-up or in the fit (``compiled_in_warmup``,
        ``compiled_in_fit``: False when every kernel came from the cache).
    """
    from types import SimpleNamespace

    from structfw.models import ChainModel
    from structfw.solvers.plan import dense_storage
    from ._common import col, run_fit
    from .synthetic import make_chain_problem

    t0 = time.perf_counter()
    name, n, L, F = spec["solver"], int(spec["n"]), int(spec["length"]), int(spec["F"])
    seed, passes = int(spec["seed"]), int(spec["passes"])
    d = N_STATES * F + N_STATES ** 2
    # the engine's own rule for the point's w_i rows, so that the warm-up compiles the kernels
    # the timed fit runs (a 30-sequence problem would otherwise always pick dense rows)
    dense = dense_storage(make_solver(name), SimpleNamespace(n=n, d=d))
    storage = "dense" if dense else "sparse"
    Fw = N_ACTIVE * N_STATES + 40
    Xw, Yw = make_chain_problem(n=30, n_states=N_STATES, n_features=Fw, sparse=True, seed=seed, min_len=L,
                                max_len=L, n_test=0)[:2]
    with _compile_recorder() as warm_compiles:
        run_fit(ChainModel(N_STATES, Fw), make_solver(name, block_storage=storage), Xw, Yw, 0.01, 2, seed)
    del Xw, Yw
    startup = time.perf_counter() - t0
    baseline = _maxrss_mb()

    t = time.perf_counter()
    X, Y = make_chain_problem(n=n, n_states=N_STATES, n_features=F, sparse=True, seed=seed, min_len=L, max_len=L,
                              n_test=0)[:2]
    generate = time.perf_counter() - t
    after_data = _maxrss_mb()
    lam = parse_lam(spec["lam"], n)
    t = time.perf_counter()
    with _compile_recorder() as fit_compiles:
        run, _ = run_fit(ChainModel(N_STATES, F), make_solver(name), X, Y, lam, passes, seed, check_every=1)
    fit = time.perf_counter() - t
    peak = _maxrss_mb()
    per = np.diff(col(run, "time_s")) / np.maximum(np.diff(col(run, "engine_passes")), 1)
    steady = per[1:] if len(per) > 1 else per
    approx = run["columns"].get("approx_passes")
    return dict(s_per_pass=float(np.median(steady)), per_pass_s=per.tolist(), first_pass_s=float(per[0]),
                approx_passes=approx[1:] if approx else None, startup_s=startup, generate_s=generate, fit_s=fit,
                baseline_rss_mb=baseline, data_rss_mb=after_data, peak_rss_mb=peak,
                peak_above_baseline_mb=peak - baseline, rows=storage, lam=lam,
                tokens=int(sum(len(y) for y in Y)), nnz=int(sum(x.nnz for x in X)),
                gap=run["columns"]["gap"][-1], stopped=run["stopped"],
                oracle_calls=run["columns"]["oracle_calls"][-1],
                cache_hits=run["columns"].get("cache_hits", [None])[-1],
                compiled_in_warmup=_compiled_cached_kernels(warm_compiles),
                compiled_in_fit=_compiled_cached_kernels(fit_compiles))


def _compile_recorder():
    """A context recording numba's compilations (loads from its disk cache are not recorded)."""
    from numba.core import event

    return event.install_recorder("numba:compile")


def _compiled_cached_kernels(recorder):
    """Whether a recorder saw a structfw kernel with a disk cache (``cache=True``) compile: its
    cache was stale, so another run of the point would load it instead."""
    for _, ev in recorder.buffer:
        disp = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
        module = getattr(getattr(disp, "py_func", None), "__module__", "") or ""
        if module.startswith("structfw.") and type(getattr(disp, "_cache", None)).__name__ != "NullCache":
            return True
    return False


def _child(spec_path, out_path):
    """Entry point of a point's child process: read the spec, measure, write the result."""
    spec = json.loads(Path(spec_path).read_text())
    write_json(out_path, measure_point(spec))


def run_point(spec, timeout, child="structfw_bench.scaling"):
    """Measure one point in a child process of its own.

    Parameters
    ----------
    spec : dict
        As `measure_point` takes it (or the ``child`` module's own ``_child``).
    timeout : float
        Seconds after which the child is stopped.
    child : str
        The module whose ``_child(spec_path, out_path)`` measures the point (`structfw_bench.kernel`
        uses this runner too).

    Returns
    -------
    dict
        `measure_point`'s result with ``status="measured"`` and the child's ``wall_s``, or
        ``status="skipped"`` and a ``reason`` (timed out, or the child's error).
    """
    # the child imports the same structfw and structfw_bench as this process (source trees or
    # installed copies)
    env = child_env()
    with tempfile.TemporaryDirectory(prefix="structfw-scaling-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec_path.write_text(json.dumps(spec))
        code = f"from {child} import _child; _child({str(spec_path)!r}, {str(out_path)!r})"
        t = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return dict(status="skipped", reason=f"timed out: stopped after {timeout:.0f} s",
                        wall_s=time.perf_counter() - t)
        wall = time.perf_counter() - t
        if proc.returncode != 0 or not out_path.exists():
            tail = " | ".join((proc.stderr or "").strip().splitlines()[-3:])
            return dict(status="skipped", reason=f"the child failed (exit {proc.returncode}): {tail}", wall_s=wall)
        res = json.loads(out_path.read_text())
    res.update(status="measured", wall_s=wall)
    return res


def project_seconds(done, size, min_exponent=0.0):
    """Projected wall seconds of the point ``size`` from the measured points ``done`` of its curve.

    ``done`` is a list of (size, wall_s, variable_s), sizes increasing, where variable_s is the
    part of the child's wall time that grows with the size (data generation and the fit); the
    rest (interpreter, imports, warm-up) is taken as fixed.  The variable part grows as a power
    of the size whose exponent is that between the last two points, clamped to
    [``min_exponent``, 2], or max(1, ``min_exponent``) from a single point.  None without a
    measured point.
    """
    if not done:
        return None
    s1, w1, v1 = done[-1]
    v1 = max(v1, 1e-3)
    e = max(1.0, min_exponent)
    if len(done) >= 2:
        s0, _, v0 = done[-2]
        if s1 > s0:
            e = min(max(math.log(v1 / max(v0, 1e-3)) / math.log(s1 / s0), min_exponent), 2.0)
    return (w1 - v1) + v1 * (size / s1) ** e


def run_scaling(axes=AXES, sizes=None, passes=5, solvers=SOLVERS, seed=0, max_seconds=300.0, lam="0.01",
                out_dir="bench_out/scaling", base=None, log=print):
    """Measure every (axis, size, solver) point; write ``scaling.json`` and ``scaling.png``.

    Parameters
    ----------
    axes : sequence of {"n", "d", "length"}
        The axes to sweep.
    sizes : dict, optional
        Sizes per axis, overriding `DEFAULT_SIZES` for the axes it names.
    passes : int
        Passes of each fit (>= 2: the first pass is not timed).
    solvers : sequence of str
        Names from `SOLVERS`.
    seed : int
        Of the data and the solvers.
    max_seconds : float
        A point projected to run longer than this (start-up and data generation included) is
        skipped and recorded with its projection; a child running past
        ``max(2 * max_seconds, max_seconds + 60)`` seconds is stopped and recorded as skipped.
    lam : float or str
        The regularisation: a float or "c/n".
    out_dir : str or Path
        Where ``scaling.json`` and ``scaling.png`` go.
    base : dict, optional
        The base point's n, d and length (default `BASE`).
    log : callable
        Receives one line per point.

    Returns
    -------
    dict
        The JSON document: ``points`` (every requested point, measured or skipped with a
        ``reason``), ``curves`` (per axis and solver: the sizes and the measured series) and
        ``slopes`` (per axis and solver: the log-log slope of seconds per pass, of the peak
        memory and of the memory above the baseline).
    """
    axes = tuple(axes)
    bad = [a for a in axes if a not in AXES]
    if bad or not axes:
        raise ValueError(f"axes must be a non-empty subset of {AXES}; got {list(axes)}")
    bad = [s for s in solvers if s not in SOLVERS]
    if bad or not solvers:
        raise ValueError(f"solvers must be a non-empty subset of {SOLVERS}; got {list(solvers)}")
    if int(passes) < 2:
        raise ValueError(f"passes must be >= 2 (the first pass is not timed); got {passes}")
    if not max_seconds > 0:
        raise ValueError(f"max_seconds must be > 0; got {max_seconds}")
    base = dict(BASE, **(base or {}))
    for a, v in base.items():
        if a not in AXES or int(v) < _MINIMUM[a]:
            raise ValueError(f"base: {a}={v} is not an axis of {AXES} with a value >= its minimum {_MINIMUM}")
    sizes = {a: tuple(sorted(set(int(v) for v in (sizes or {}).get(a, DEFAULT_SIZES[a])))) for a in axes}
    for a, vals in sizes.items():
        if not vals or min(vals) < _MINIMUM[a]:
            raise ValueError(f"sizes: axis {a} needs sizes >= {_MINIMUM[a]}; got {list(vals)}")
    timeout = max(2.0 * max_seconds, max_seconds + 60.0)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    doc = dict(benchmark="scaling", environment=environment(), axes=list(axes), sizes={a: list(v) for a, v in
                                                                                       sizes.items()},
               base=base, passes=int(passes), solvers=list(solvers), seed=int(seed), lam=str(lam),
               max_seconds=float(max_seconds), timeout_s=timeout, n_states=N_STATES,
               load_average_start=_load_average(), points=[], curves={}, slopes={})
    for axis in axes:
        for name in solvers:
            done = []
            for size in sizes[axis]:
                prob = point_problem(axis, size, base)
                point = dict(axis=axis, size=int(size), solver=name, **prob)
                # generating the data is linear in n and in the length whatever the fit does
                proj = project_seconds(done, size, min_exponent=0.0 if axis == "d" else 1.0)
                if proj is not None and proj > max_seconds:
                    s1, w1, _ = done[-1]
                    point.update(status="skipped", projected_s=proj,
                                 reason=f"projected {proj:.0f} s > --max-seconds {max_seconds:g} (from {axis}={s1} "
                                        f"measured in {w1:.1f} s)")
                else:
                    spec = dict(solver=name, n=prob["n"], length=prob["length"], F=prob["F"], passes=int(passes),
                                seed=int(seed), lam=str(lam))
                    res = run_point(spec, timeout)
                    if res["status"] == "measured" and res["compiled_in_warmup"]:
                        # compiling raised the baseline's peak (numba's disk cache was stale):
                        # measure again, now that the kernels are cached
                        again = run_point(spec, timeout)
                        if again["status"] == "measured":
                            res = dict(again, measured_again_after_compiling=True)
                    point.update(res)
                    if proj is not None:
                        point["projected_s"] = proj
                    if point["status"] == "measured":
                        done.append((int(size), point["wall_s"], point["generate_s"] + point["fit_s"]))
                doc["points"].append(point)
                if point["status"] == "measured":
                    log(f"[scaling] {axis}={size} {name}: {point['s_per_pass']:.4f} s/pass, peak "
                        f"{point['peak_rss_mb']:.0f} MB ({point['peak_above_baseline_mb']:+.0f} MB over the "
                        f"baseline), {point['wall_s']:.1f} s")
                else:
                    log(f"[scaling] {axis}={size} {name}: skipped ({point['reason']})")
    _curves(doc)
    doc["wall_s"] = time.perf_counter() - t0
    doc["load_average_end"] = _load_average()
    write_json(out_dir / "scaling.json", doc)
    plot_scaling(doc, out_dir / "scaling.png")
    return doc


def _load_average():
    """The 1, 5 and 15 minute load averages (None where the system has none): the timings'
    context on a shared machine."""
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def _curves(doc):
    """Per axis and solver: the measured series and their log-log slopes (in place).

    ``slopes[axis][solver]`` has the slope over every measured point and, under ``by_rows``,
    over the points of each storage of the w_i rows alone (where the engine's "auto" rule
    changes the storage along a curve, the cost jumps and one slope says little)."""
    keys = (("s_per_pass", "s_per_pass"), ("peak_rss", "peak_rss_mb"),
            ("peak_above_baseline", "peak_above_baseline_mb"))
    for axis in doc["axes"]:
        doc["curves"][axis], doc["slopes"][axis] = {}, {}
        for name in doc["solvers"]:
            pts = [p for p in doc["points"] if p["axis"] == axis and p["solver"] == name and p["status"] == "measured"]
            x = [p["d"] if axis == "d" else p["size"] for p in pts]
            c = dict(x=x, rows=[p["rows"] for p in pts], s_per_pass=[p["s_per_pass"] for p in pts],
                     peak_rss_mb=[p["peak_rss_mb"] for p in pts],
                     peak_above_baseline_mb=[p["peak_above_baseline_mb"] for p in pts],
                     skipped=[p["size"] for p in doc["points"] if p["axis"] == axis and p["solver"] == name
                              and p["status"] == "skipped"])
            doc["curves"][axis][name] = c
            slopes = {k: loglog_slope(x, c[col]) for k, col in keys}
            slopes["by_rows"] = {}
            for rows in sorted(set(c["rows"])):
                sel = [j for j, r in enumerate(c["rows"]) if r == rows]
                if 2 <= len(sel) < len(x):
                    slopes["by_rows"][rows] = {k: loglog_slope([x[j] for j in sel], [c[col][j] for j in sel])
                                               for k, col in keys}
            doc["slopes"][axis][name] = slopes


_XLABEL = {"n": "n (sequences)", "d": "d (joint features; sparse node features)", "length": "sequence length"}


def _size_label(v):
    v = int(v)
    for div, suffix in ((10 ** 6, "M"), (10 ** 3, "k")):
        if v >= div and v % (div // 10) == 0:
            return f"{v / div:g}{suffix}"
    return str(v)


def plot_scaling(doc, path):
    """Seconds per pass (top) and peak memory above the baseline (bottom) against each axis, log-log,
    the fitted slope in each curve's legend entry; open markers are points with sparse w_i rows."""
    plt = pyplot()
    from matplotlib.ticker import NullFormatter

    axes = doc["axes"]
    fig, grid = plt.subplots(2, len(axes), figsize=(4.6 * len(axes), 7.4), squeeze=False)
    for j, axis in enumerate(axes):
        ticks = sorted({x for name in doc["solvers"] for x in doc["curves"][axis][name]["x"]})
        for row, (key, slope_key, ylabel) in enumerate((
                ("s_per_pass", "s_per_pass", "seconds per pass (median of passes 2..P)"),
                ("peak_above_baseline_mb", "peak_above_baseline", "peak memory above the baseline (MB)"))):
            ax = grid[row][j]
            for k, name in enumerate(doc["solvers"]):
                c = doc["curves"][axis][name]
                slope = doc["slopes"][axis][name][slope_key]
                label = f"{name} (slope {slope:.2f})" if slope is not None else name
                ok = [(x, y, r) for x, y, r in zip(c["x"], c[key], c["rows"]) if y is not None and y > 0]
                if not ok:
                    continue
                xs, ys, rows = zip(*ok)
                ax.plot(xs, ys, color=f"C{k}", label=label)
                for x, y, r in ok:
                    ax.plot([x], [y], marker="o", color=f"C{k}", mfc="white" if r == "sparse" else f"C{k}")
            ax.set_xscale("log")
            ax.set_yscale("log")
            if ticks:
                ax.set_xticks(ticks, [_size_label(t) for t in ticks])
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(_XLABEL[axis])
            ax.set_ylabel(ylabel, fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    b = doc["base"]
    fig.suptitle(f"Synthetic sparse chain (S = {doc['n_states']}), base n = {b['n']}, d = {b['d']}, length = "
                 f"{b['length']}; lam = {doc['lam']}, {doc['passes']} passes per point\n"
                 "filled markers: dense w_i rows, open: sparse rows (the engine's 'auto' rule: sparse when "
                 "n d 8 bytes > 2 GiB)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _choice_list(choices):
    """A click callback for a comma-separated subset of ``choices``."""

    def parse(ctx, param, value):
        vals = tuple(v.strip() for v in value.split(",") if v.strip())
        bad = [v for v in vals if v not in choices]
        if bad or not vals:
            raise click.BadParameter(f"expected a comma-separated subset of {', '.join(choices)}; got {value!r}")
        return tuple(dict.fromkeys(vals))

    return parse


def _axis_values(minimums):
    """A click callback for repeated ``AXIS=VALUES`` options (VALUES parsed by `int_list_callback`)."""

    def parse(ctx, param, value):
        out = {}
        for item in value:
            axis, sep, rest = item.partition("=")
            axis = axis.strip()
            if not sep or axis not in AXES:
                raise click.BadParameter(f"expected AXIS=VALUES with AXIS one of {', '.join(AXES)}; got {item!r}")
            out[axis] = int_list_callback(minimums[axis])(ctx, param, rest)
        return out

    return parse


@click.command("scaling")
@click.option("--out-dir", default="bench_out/scaling", show_default=True, type=click.Path(file_okay=False),
              help="Where scaling.json and scaling.png go.")
@click.option("--axes", default="n,d,length", show_default=True, callback=_choice_list(AXES),
              help="The axes to sweep (comma-separated subset of n, d, length).")
@click.option("--sizes", multiple=True, callback=_axis_values(_MINIMUM), metavar="AXIS=LIST",
              help="Sizes of one axis, e.g. 'n=1000,10000,100000' or 'd=1000,10000000' (repeat per axis; "
                   f"d >= {MIN_D}). Defaults: " + "; ".join(f"{a}={','.join(map(str, v))}"
                                                           for a, v in DEFAULT_SIZES.items()) + "; the full range: "
                   + " ".join(f"--sizes {a}={','.join(map(str, v))}" for a, v in FULL_SIZES.items()) + ".")
@click.option("--base", multiple=True, callback=_axis_values(_MINIMUM), metavar="AXIS=VALUE",
              help="The base point's value of an axis, kept while the others vary (defaults: "
                   + ", ".join(f"{a}={v}" for a, v in BASE.items()) + ").")
@click.option("--passes", default=5, show_default=True, type=click.IntRange(2),
              help="Passes per fit; seconds per pass is the median of passes 2..P.")
@click.option("--solvers", default=",".join(SOLVERS), show_default=True, callback=_choice_list(SOLVERS),
              help="Solver configurations (comma-separated subset).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0))
@click.option("--max-seconds", default=300.0, show_default=True, type=click.FloatRange(0, min_open=True),
              help="Skip a point projected to run longer than this (recorded as skipped, with the projection).")
@click.option("--lam", default="0.01", show_default=True, help="Regularisation: a float or 'c/n'.")
def bench_scaling(out_dir, axes, sizes, base, passes, solvers, seed, max_seconds, lam):
    """Seconds per pass and peak memory against n, d and sequence length, with fitted slopes.

    Three solver configurations (BCFW, BCPFW-gap-cache, MP-BCFW) on the synthetic sparse
    chain; each point runs in a child process of its own.  Writes scaling.json and scaling.png.
    """
    extra = sorted(set(sizes) - set(axes))
    if extra:
        raise click.BadParameter(f"sizes given for {', '.join(extra)}, which --axes does not include",
                                 param_hint="--sizes")
    for a in base:
        if len(base[a]) != 1:
            raise click.BadParameter(f"one value per axis; got {a}={','.join(map(str, base[a]))}", param_hint="--base")
    check_lam_option(lam)
    doc = run_scaling(axes, sizes, passes, solvers, seed, max_seconds, lam, out_dir,
                      base={a: v[0] for a, v in base.items()}, log=click.echo)
    for axis in doc["axes"]:
        for name, s in doc["slopes"][axis].items():
            fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
            click.echo(f"{axis:>6} {name:>16}: slope of s/pass {fmt(s['s_per_pass'])}, of peak memory above the "
                       f"baseline {fmt(s['peak_above_baseline'])}")
    skipped = sum(p["status"] == "skipped" for p in doc["points"])
    click.echo(f"{len(doc['points']) - skipped} points measured, {skipped} skipped, in {doc['wall_s']:.0f} s; "
               f"wrote {Path(out_dir) / 'scaling.json'} and {Path(out_dir) / 'scaling.png'}")
