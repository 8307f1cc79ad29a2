"""Sharded training (docs/design.md, "Sharded training"): time and passes to a gap against serial BCFW.

On OCR the benchmark runs the serial engine's fastest options (plain BCFW, gap sampling, pairwise
steps with gap sampling) and `ShardedBCFW` for each K, combination rule, round length and sampling
asked for, every run to the smallest target gap, with a checkpoint every ``--check-every`` passes
(monitoring is timed apart).  The arms of a seed run one after the other, so the ratios within a
seed are measured under the same load; the table reports, per arm, the median over seeds of the
optimisation time and of the effective passes (oracle calls / n) at the first checkpoint at or
under each target, and the median of the per-seed ratio of its time to the best serial arm's.

Sharded arms run on threads or on workers (``--executors``: processes, Ray actors), all in this
process's order.  Memory (Linux; None elsewhere): every run records ``fit_memory_bytes``, this
process's peak resident set during the solve above its resident set before it (the peak reset
just before); a run on workers records each worker's resident set when it started and its peak
since (``worker_memory``, read before the solve ends) and the largest peak above its baseline.  An
arm's memory is the latter on workers and the former otherwise; its ratio is to the per-seed
smallest of the serial arms' ``fit_memory_bytes``.  The arms share one process, so a serial or
threads arm may reuse memory an earlier arm freed: free memory is handed back to the system
before each solve (``malloc_trim`` where the C library has it), which narrows that error.
"""
from __future__ import annotations

import gc
import importlib.util
import os
import time
from pathlib import Path

import click
import numpy as np

from structfw._memory import reset_peak, status_bytes
from ._common import check_lam_option, environment, int_list_callback, load_ocr_data, parse_lam, pyplot, write_json

TARGETS = (0.1, 0.01)
SERIAL = {"BCFW": {}, "BCFW-gap": {"sampling": "gap"}, "BCPFW-gap": {"sampling": "gap", "step": "pairwise"}}
EXECUTORS = ("thread", "process", "ray")
#: the executors whose shards run on workers: their memory is the workers'
REMOTE = ("process", "ray")


def arms(shards, rules, lengths, samplings, executors=("thread",)):
    """(name, executor, make solver) of every arm: the serial options (executor "serial"), then each
    sharded combination on each executor."""
    from structfw.solvers import BCFW
    from structfw.solvers.sharded import ShardedBCFW

    out = [(f"serial {name}", "serial", (lambda kw=kw: BCFW(**kw))) for name, kw in SERIAL.items()]
    for executor in executors:
        for K in shards:
            for rule in rules:
                for m in lengths:
                    for sampling in samplings:
                        kw = dict(shards=K, combine=rule, round_length=m or None, sampling=sampling, executor=executor)
                        out.append((f"K={K} {executor} {rule} m={m or 'auto'} {sampling}", executor,
                                    (lambda kw=kw: ShardedBCFW(**kw))))
    return out


def check_executors(text):
    """The executors of ``--executors`` ("thread,process"), checked: ValueError naming the option."""
    names = [e.strip() for e in text.split(",") if e.strip()]
    if not names:
        raise ValueError(f"--executors: expected a comma-separated list of {', '.join(EXECUTORS)}, got {text!r}")
    for name in names:
        if name not in EXECUTORS:
            raise ValueError(f"--executors: expected names among {', '.join(EXECUTORS)}, got {name!r}")
    if "ray" in names and importlib.util.find_spec("ray") is None:
        raise ValueError("--executors ray needs Ray (pip install 'structfw[distributed]'); give thread,process")
    return list(dict.fromkeys(names))


def warm_up(make, executor, problem):
    """Compile every kernel an arm needs before it is timed: the arm's own solve, and for workers also the
    same rounds in this process (on one thread and at least two shards: the Python rounds the workers run,
    not the compiled ones), so that forked workers inherit them compiled instead of each compiling (or
    loading) them inside its measured peak."""
    from structfw.solvers import StopRule

    solver = make()
    solver.solve(problem, StopRule(max_passes=1, tol=None), rng=0)
    if executor in REMOTE:
        twin = solver.set_params(executor="thread", n_jobs=1, shards=max(2, solver.shards))
        twin.solve(problem, StopRule(max_passes=1, tol=None), rng=0)


def release_free_memory():
    """Collect garbage and hand the C heap's free pages back to the system (glibc's ``malloc_trim``), so
    that a solve measured next cannot hide its own memory in what an earlier arm freed."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the measurement keeps that error
        pass


def measured_solve(make, problem, stop, seed):
    """(result, this process's peak resident set above its start during the solve, in bytes or None)."""
    release_free_memory()
    reset = reset_peak()
    before = status_bytes("VmRSS")
    res = make().solve(problem, stop, rng=seed)
    peak = status_bytes("VmHWM")
    fit = max(peak - before, 0) if reset and peak is not None and before is not None else None
    return res, fit


def worker_peak(worker_memory):
    """The largest peak above its baseline over a solve's workers (bytes), or None where unread."""
    above = [w["peak"] - w["baseline"] for w in worker_memory or ()
             if w.get("peak") is not None and w.get("baseline") is not None]
    return max(max(above), 0) if above else None


def first_at(trace, column, target):
    """``column`` at the first checkpoint whose gap is <= target, or None."""
    gaps = np.asarray(trace["gap"])
    hit = np.flatnonzero(gaps <= target)
    return float(np.asarray(trace[column])[hit[0]]) if hit.size else None


#: the tasks of ``--data``: OCR (the BCFW paper's split) and the CoNLL-scale chunking chain
DATA = ("ocr", "conll-scale")


def load_task(data, subsample=None, n_features=None):
    """(X, Y, model) of a task of `DATA`; ``subsample``: the first that many training examples (OCR: that
    many at random), ``n_features``: the CoNLL-scale chain's F (None: the paper's 74,661, d = 1.64M)."""
    if data == "ocr":
        X, Y, _, _, model = load_ocr_data(subsample=subsample)
        return X, Y, model
    if data != "conll-scale":
        raise ValueError(f"data={data!r}: expected one of {', '.join(DATA)}")
    from structfw.datasets import load_conll_scale
    from structfw.datasets.conll import PAPER_N_FEATURES, PAPER_N_TRAIN

    chain = load_conll_scale(n_train=subsample or PAPER_N_TRAIN, n_test=0,
                             n_features=n_features or PAPER_N_FEATURES)
    X, Y, _, _ = chain
    return X, Y, chain.make_model()


def run_sharded(lam, seeds, shards, rules, lengths, samplings, max_passes, check_every, out, log=print,
                executors=("thread",), data="ocr", subsample=None, n_features=None):
    """Run every arm for every seed on the task ``data`` (`load_task`); the benchmark's document (also
    written to ``out``)."""
    from structfw.solvers import Problem, StopRule

    X, Y, model = load_task(data, subsample, n_features)
    lam_value = parse_lam(lam, len(X))
    problem = Problem(model, X, Y, lam_value)
    todo = arms(shards, rules, lengths, samplings, executors)
    for _, executor, make in todo:  # compile every kernel first: no arm pays for it
        warm_up(make, executor, problem)
    runs = {name: [] for name, _, _ in todo}
    stop = StopRule(max_passes=max_passes, tol=min(TARGETS), check_every=check_every)
    for seed in range(seeds):
        for name, executor, make in todo:
            load = os.getloadavg()[0]
            res, fit_memory = measured_solve(make, problem, stop, seed)
            tr = res.trace
            run = dict(seed=seed, load=load, stopped=res.stopped, executor=executor,
                       time_s={f"{t:g}": first_at(tr, "time_s", t) for t in TARGETS},
                       passes={f"{t:g}": first_at(tr, "passes", t) for t in TARGETS},
                       fit_memory_bytes=fit_memory,
                       curve=dict(time_s=list(tr["time_s"]), passes=list(tr["passes"]), gap=list(tr["gap"])))
            if executor in REMOTE:
                run["worker_memory"] = tr.meta.get("worker_memory")
                run["worker_peak_above_baseline_bytes"] = worker_peak(run["worker_memory"])
            runs[name].append(run)
            log(f"seed {seed} {name}: {run['time_s']} s, {run['passes']} passes, memory "
                f"{_mb(arm_memory(run))} MB (load {load:.1f})")
    doc = dict(data=data, n=len(X), d=int(model.size_joint_feature), lam=lam_value, lam_spec=lam, seeds=seeds, targets=list(TARGETS), check_every=check_every,
               executors=list(executors), cpus=os.cpu_count(), environment=environment(), arms=summarise(runs))
    write_json(Path(out) / "sharded.json", doc)
    plot_sharded(doc, Path(out) / "sharded.png")
    return doc


def arm_memory(run):
    """A run's memory figure: its workers' largest peak above baseline on workers, else the fit's own."""
    if run.get("executor") in REMOTE:
        return run.get("worker_peak_above_baseline_bytes")
    return run.get("fit_memory_bytes")


def summarise(runs):
    """Per arm: the runs, and the medians of time, passes, memory and the per-seed ratios to the best
    serial arm (time: the fastest serial arm's; memory: the smallest serial ``fit_memory_bytes``)."""
    target = f"{min(TARGETS):g}"
    serial = [name for name in runs if name.startswith("serial")]
    out = {}
    for name, rs in runs.items():
        ratios, memory_ratios = [], []
        for s, r in enumerate(rs):
            best = min((runs[b][s]["time_s"][target] for b in serial if runs[b][s]["time_s"][target] is not None),
                       default=None)
            if best and r["time_s"][target] is not None:
                ratios.append(r["time_s"][target] / best)
            least = min((m for b in serial if (m := runs[b][s].get("fit_memory_bytes"))), default=None)
            if least and arm_memory(r) is not None:
                memory_ratios.append(arm_memory(r) / least)
        med = {key: {t: _median([r[key][t] for r in rs]) for t in rs[0][key]} for key in ("time_s", "passes")}
        out[name] = dict(runs=rs, median_time_s=med["time_s"], median_passes=med["passes"],
                         median_ratio_to_best_serial=_median(ratios),
                         executor=rs[0].get("executor", "serial" if name in serial else "thread"),
                         median_fit_memory_bytes=_median([r.get("fit_memory_bytes") for r in rs]),
                         median_worker_peak_above_baseline_bytes=_median(
                             [r.get("worker_peak_above_baseline_bytes") for r in rs]),
                         median_memory_bytes=_median([arm_memory(r) for r in rs]),
                         median_memory_ratio_to_best_serial=_median(memory_ratios))
    return out


def _median(values):
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def _mb(nbytes):
    return "-" if nbytes is None else format(nbytes / 2 ** 20, ".0f")


def plot_sharded(doc, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, arm in doc["arms"].items():
        c = arm["runs"][0]["curve"]
        for ax, x in zip(axes, ("time_s", "passes")):
            ax.semilogy(c[x], np.maximum(c["gap"], 1e-12), label=name, lw=1.6 if name.startswith("serial") else 1.0)
    for ax, label in zip(axes, ("optimisation time (s)", "effective passes (oracle calls / n)")):
        ax.set_xlabel(label)
        ax.set_ylabel("duality gap")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=6)
    task = {"ocr": "OCR", "conll-scale": "the CoNLL-scale chain"}[doc.get("data", "ocr")]
    fig.suptitle(f"Sharded BCFW on {task} (n = {doc['n']}), lam = {doc['lam_spec']}; seed 0", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(doc):
    """The medians per arm: time and passes to the smallest target, this process's fit memory, the largest
    worker's (on workers) and the arm's memory -- the workers' there, else the fit's -- to the serial's."""
    t = f"{min(doc['targets']):g}"
    lines = [f"{'arm':>40} {'time to ' + t:>12} {'passes to ' + t:>14} {'x best serial':>14} {'fit MB':>8} "
             f"{'worker MB':>10} {'x serial mem':>13}"]
    for name, a in doc["arms"].items():
        tt, pp, rr = a["median_time_s"][t], a["median_passes"][t], a["median_ratio_to_best_serial"]
        mr = a.get("median_memory_ratio_to_best_serial")
        lines.append(f"{name:>40} {'-' if tt is None else format(tt, '.2f'):>12} "
                     f"{'-' if pp is None else format(pp, '.1f'):>14} {'-' if rr is None else format(rr, '.2f'):>14} "
                     f"{_mb(a.get('median_fit_memory_bytes')):>8} "
                     f"{_mb(a.get('median_worker_peak_above_baseline_bytes')):>10} "
                     f"{'-' if mr is None else format(mr, '.2f'):>13}")
    lines.append("fit MB: this process's peak above its start; worker MB: the largest worker's peak above its "
                 "baseline; x serial mem: worker MB (else fit MB) over the least serial fit MB")
    return "\n".join(lines)


@click.command("sharded")
@click.option("--lam", default="0.01", show_default=True, help="Regularisation lambda; '1/n' or 'c/n' allowed.")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1), help="Random seeds per arm.")
@click.option("--shards", default="2", show_default=True, callback=int_list_callback(1), help="Values of K.")
@click.option("--rules", default="linesearch", show_default=True,
              help="Combination rules, comma-separated (linesearch, average, add).")
@click.option("--round-lengths", default="0,25", show_default=True, callback=int_list_callback(0),
              help="Round lengths (block steps a shard); 0: the default.")
@click.option("--samplings", default="uniform,gap", show_default=True, help="Sampling within the shards.")
@click.option("--executors", default="thread", show_default=True,
              help="Where the shards run, comma-separated: thread, process, ray (if installed).")
@click.option("--max-passes", default=150, show_default=True, type=click.IntRange(min=1), help="Most passes a run.")
@click.option("--check-every", default=3, show_default=True, type=click.IntRange(min=1),
              help="Passes between checkpoints (each is a gap pass, timed apart).")
@click.option("--data", type=click.Choice(DATA), default="ocr", show_default=True,
              help="The task: OCR, or the CoNLL-scale chunking chain (d = 1.64M; generated once, then cached).")
@click.option("--subsample", type=click.IntRange(min=2), default=None,
              help="Training examples kept (OCR: at random; CoNLL-scale: the first ones).")
@click.option("--n-features", type=click.IntRange(min=1), default=None,
              help="CoNLL-scale: F, the feature columns kept (default: the paper's 74,661).")
@click.option("--out-dir", "--out", "out", default="bench_out/sharded", show_default=True,
              type=click.Path(file_okay=False), help="Writes sharded.json and sharded.png here.")
def bench_sharded(lam, seeds, shards, rules, round_lengths, samplings, executors, max_passes, check_every, data,
                  subsample, n_features, out):
    """Sharded BCFW on OCR or the CoNLL-scale chain: time and passes to a gap on threads (processes,
    Ray) against the serial options."""
    if n_features is not None and data != "conll-scale":
        raise click.UsageError(f"--n-features applies to --data conll-scale, not --data {data}")
    check_lam_option(lam)
    try:
        executors = check_executors(executors)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--executors") from None
    rules = [r.strip() for r in rules.split(",") if r.strip()]
    samplings = [s.strip() for s in samplings.split(",") if s.strip()]
    t0 = time.perf_counter()
    doc = run_sharded(lam, seeds, shards, rules, round_lengths, samplings, max_passes, check_every, out,
                      log=click.echo, executors=executors, data=data, subsample=subsample, n_features=n_features)
    click.echo(format_table(doc))
    click.echo(f"wrote {Path(out) / 'sharded.json'} and {Path(out) / 'sharded.png'} ({time.perf_counter() - t0:.0f} s)")
