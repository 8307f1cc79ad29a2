"""Sharded training (docs/design.md, "Sharded training"): time and passes to a gap against serial BCFW.

On OCR the benchmark runs the serial engine's fastest options (plain BCFW, gap sampling, pairwise
steps with gap sampling) and `ShardedBCFW` for each K, combination rule, round length and sampling
asked for, every run to the smallest target gap, with a checkpoint every ``--check-every`` passes
(monitoring is timed apart).  The arms of a seed run one after the other, so the ratios within a
seed are measured under the same load; the table reports, per arm, the median over seeds of the
optimisation time and of the effective passes (oracle calls / n) at the first checkpoint at or
under each target, and the median of the per-seed ratio of its time to the best serial arm's.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import click
import numpy as np

from ._common import check_lam_option, environment, int_list_callback, load_ocr_data, parse_lam, pyplot, write_json

TARGETS = (0.1, 0.01)
SERIAL = {"BCFW": {}, "BCFW-gap": {"sampling": "gap"}, "BCPFW-gap": {"sampling": "gap", "step": "pairwise"}}


def arms(shards, rules, lengths, samplings):
    """(name, make solver) of every arm: the serial options, then each sharded combination."""
    from ..solvers import BCFW
    from ..solvers.sharded import ShardedBCFW

    out = [(f"serial {name}", (lambda kw=kw: BCFW(**kw))) for name, kw in SERIAL.items()]
    for K in shards:
        for rule in rules:
            for m in lengths:
                for sampling in samplings:
                    kw = dict(shards=K, combine=rule, round_length=m or None, sampling=sampling, executor="thread")
                    out.append((f"K={K} {rule} m={m or 'auto'} {sampling}", (lambda kw=kw: ShardedBCFW(**kw))))
    return out


def first_at(trace, column, target):
    """``column`` at the first checkpoint whose gap is <= target, or None."""
    gaps = np.asarray(trace["gap"])
    hit = np.flatnonzero(gaps <= target)
    return float(np.asarray(trace[column])[hit[0]]) if hit.size else None


def run_sharded(lam, seeds, shards, rules, lengths, samplings, max_passes, check_every, out, log=print):
    """Run every arm for every seed; the benchmark's document (also written to ``out``)."""
    from ..solvers import Problem, StopRule

    X, Y, _, _, model = load_ocr_data()
    lam_value = parse_lam(lam, len(X))
    problem = Problem(model, X, Y, lam_value)
    todo = arms(shards, rules, lengths, samplings)
    for _, make in todo:  # compile every kernel first: no arm pays for it
        make().solve(problem, StopRule(max_passes=1, tol=None), rng=0)
    runs = {name: [] for name, _ in todo}
    for seed in range(seeds):
        for name, make in todo:
            load = os.getloadavg()[0]
            res = make().solve(problem, StopRule(max_passes=max_passes, tol=min(TARGETS), check_every=check_every),
                               rng=seed)
            tr = res.trace
            runs[name].append(dict(seed=seed, load=load, stopped=res.stopped,
                                   time_s={f"{t:g}": first_at(tr, "time_s", t) for t in TARGETS},
                                   passes={f"{t:g}": first_at(tr, "passes", t) for t in TARGETS},
                                   curve=dict(time_s=list(tr["time_s"]), passes=list(tr["passes"]), gap=list(tr["gap"]))))
            log(f"seed {seed} {name}: {runs[name][-1]['time_s']} s, {runs[name][-1]['passes']} passes (load {load:.1f})")
    doc = dict(n=len(X), lam=lam_value, lam_spec=lam, seeds=seeds, targets=list(TARGETS), check_every=check_every,
               cpus=os.cpu_count(), environment=environment(), arms=summarise(runs))
    write_json(Path(out) / "sharded.json", doc)
    plot_sharded(doc, Path(out) / "sharded.png")
    return doc


def summarise(runs):
    """Per arm: the runs, and the medians of time, passes and the per-seed ratio to the best serial arm."""
    target = f"{min(TARGETS):g}"
    serial = [name for name in runs if name.startswith("serial")]
    out = {}
    for name, rs in runs.items():
        ratios = []
        for s, r in enumerate(rs):
            best = min((runs[b][s]["time_s"][target] for b in serial if runs[b][s]["time_s"][target] is not None),
                       default=None)
            if best and r["time_s"][target] is not None:
                ratios.append(r["time_s"][target] / best)
        med = {key: {t: _median([r[key][t] for r in rs]) for t in rs[0][key]} for key in ("time_s", "passes")}
        out[name] = dict(runs=rs, median_time_s=med["time_s"], median_passes=med["passes"],
                         median_ratio_to_best_serial=_median(ratios))
    return out


def _median(values):
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


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
    fig.suptitle(f"Sharded BCFW on OCR (n = {doc['n']}), lam = {doc['lam_spec']}; seed 0", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(doc):
    t = f"{min(doc['targets']):g}"
    lines = [f"{'arm':>34} {'time to ' + t:>12} {'passes to ' + t:>14} {'x best serial':>14}"]
    for name, a in doc["arms"].items():
        tt, pp, rr = a["median_time_s"][t], a["median_passes"][t], a["median_ratio_to_best_serial"]
        lines.append(f"{name:>34} {'-' if tt is None else format(tt, '.2f'):>12} "
                     f"{'-' if pp is None else format(pp, '.1f'):>14} {'-' if rr is None else format(rr, '.2f'):>14}")
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
@click.option("--max-passes", default=150, show_default=True, type=click.IntRange(min=1), help="Most passes a run.")
@click.option("--check-every", default=3, show_default=True, type=click.IntRange(min=1),
              help="Passes between checkpoints (each is a gap pass, timed apart).")
@click.option("--out-dir", "--out", "out", default="bench_out/sharded", show_default=True,
              type=click.Path(file_okay=False), help="Writes sharded.json and sharded.png here.")
def bench_sharded(lam, seeds, shards, rules, round_lengths, samplings, max_passes, check_every, out):
    """Sharded BCFW on OCR: time and passes to a gap on threads against the serial options."""
    check_lam_option(lam)
    rules = [r.strip() for r in rules.split(",") if r.strip()]
    samplings = [s.strip() for s in samplings.split(",") if s.strip()]
    t0 = time.perf_counter()
    doc = run_sharded(lam, seeds, shards, rules, round_lengths, samplings, max_passes, check_every, out,
                      log=click.echo)
    click.echo(format_table(doc))
    click.echo(f"wrote {Path(out) / 'sharded.json'} and {Path(out) / 'sharded.png'} ({time.perf_counter() - t0:.0f} s)")
