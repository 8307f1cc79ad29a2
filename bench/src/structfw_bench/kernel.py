"""``structfw bench kernel``: kernelized BCFW on OCR, by block storage.

`KernelBCFW` (RBF kernel) on random OCR training subsets, as docs/guide/kernel-bcfw.md measures it:
words drawn by ``numpy.random.default_rng(seed)`` (sorted indices), lam = 0.01, ``passes`` passes
with one checkpoint at the end, the 626 test words.  Each point (size, storage) runs in a child
process of its own (`structfw_bench.scaling.run_point`), so that its peak resident memory is its
own: the child warms the compiled kernels up on 20 words, then fits and reports the seconds per
pass (the trace's optimisation time over the passes: the set-up and the checkpoints excluded), the
fit's wall time (set-up included), its peak RSS, the test error, the duality gap and the rank of the
kernel map.  Storages: "factored" (the default: per-position label weights, docs/design.md "The
factored storage") and "dense" (rows of r K coordinates).  With ``letters`` > 0 the same is done for
that many random letters as a `MulticlassModel`.

Writes ``kernel.json`` and ``kernel.png`` (seconds per pass and peak RSS per point) under ``out``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np

from ._common import environment, int_list_callback, pyplot, write_json

STORAGES = ("factored", "dense")


def _maxrss_mb():
    from .scaling import _maxrss_mb as peak

    return peak()


def _subset(kind, size, seed):
    """(X, Y, X_test, Y_test, model) of a point: ``size`` words as chains, or letters as multiclass."""
    from structfw import datasets, models

    X, Y = datasets.load_ocr("train")
    Xt, Yt = datasets.load_ocr("test")
    rng = np.random.default_rng(seed)
    if kind == "chain":
        idx = np.sort(rng.choice(len(X), size, replace=False))
        return [X[i] for i in idx], [Y[i] for i in idx], Xt, Yt, models.ChainModel(26, 128)
    P, L = np.concatenate(X), np.concatenate(Y)
    idx = rng.choice(len(P), size, replace=False)
    Pt, Lt = np.concatenate(Xt), np.concatenate(Yt)
    return (list(P[idx]), [int(v) for v in L[idx]], list(Pt), [int(v) for v in Lt],
            models.MulticlassModel(26, 128))


def measure_point(spec):
    """One point in this process (the child's side): warm up, fit, measure."""
    import warnings

    from structfw import StructuredSVM
    from structfw.solvers import KernelBCFW

    warnings.simplefilter("ignore")  # the size warning is the point of some runs
    X, Y, Xt, Yt, model = _subset(spec["kind"], spec["size"], spec["seed"])

    def solver():
        return KernelBCFW(gamma=spec["gamma"], block_storage=spec["storage"])

    StructuredSVM(model, solver=solver(), lam=spec["lam"], max_passes=1, tol=None).fit(X[:20], Y[:20])
    baseline = _maxrss_mb()
    t = time.perf_counter()
    svm = StructuredSVM(model, solver=solver(), lam=spec["lam"], max_passes=spec["passes"], tol=None,
                        check_every=spec["passes"], random_state=spec["seed"]).fit(X, Y)
    fit_s = time.perf_counter() - t
    return dict(s_per_pass=float(svm.trace_["time_s"][-1]) / spec["passes"], fit_s=fit_s,
                peak_rss_mb=_maxrss_mb(), baseline_rss_mb=baseline, test_error=1.0 - svm.score(Xt, Yt),
                gap=float(svm.gap_), rank=int(svm.trace_.meta["kernel_map_rank"]), storage=svm.state_.storage)


def _child(spec_path, out_path):
    """Entry point of a point's child process: read the spec, measure, write the result."""
    spec = json.loads(Path(spec_path).read_text())
    write_json(out_path, measure_point(spec))


def run_kernel(words=(300, 1000), letters=0, passes=20, gamma=0.05, lam=0.01, storages=STORAGES, seed=0,
               timeout=1800.0, out="bench_out/kernel", log=print):
    """Measure every (size, storage) point, write ``kernel.json`` and ``kernel.png``; returns the document."""
    from .scaling import run_point

    sizes = [("chain", w) for w in words] + ([("multiclass", letters)] if letters else [])
    points = []
    for kind, size in sizes:
        for storage in storages:
            spec = dict(kind=kind, size=int(size), storage=storage, passes=int(passes), gamma=float(gamma),
                        lam=float(lam), seed=int(seed))
            res = run_point(spec, timeout, child="structfw_bench.kernel")
            points.append({**spec, **res})
            if res["status"] == "measured":
                log(f"[kernel] {kind} {size} {storage}: {res['s_per_pass']:.3f} s/pass, fit {res['fit_s']:.1f} s, "
                    f"peak {res['peak_rss_mb']:.0f} MB, test error {res['test_error']:.4f}, gap {res['gap']:.4g}, "
                    f"rank {res['rank']}")
            else:
                log(f"[kernel] {kind} {size} {storage}: skipped ({res['reason']})")
    doc = dict(benchmark="kernel", environment=environment(), words=list(words), letters=int(letters),
               passes=int(passes), gamma=float(gamma), lam=float(lam), storages=list(storages), seed=int(seed),
               points=points)
    out = Path(out)
    write_json(out / "kernel.json", doc)
    _plot(doc, out / "kernel.png")
    log(f"wrote {out / 'kernel.json'} and {out / 'kernel.png'}")
    return doc


def _plot(doc, path):
    plt = pyplot()
    labels = []
    for p in doc["points"]:
        name = f"{p['size']} {'words' if p['kind'] == 'chain' else 'letters'}"
        if name not in labels:
            labels.append(name)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    width = 0.8 / max(len(doc["storages"]), 1)
    for k, storage in enumerate(doc["storages"]):
        for ax, key, scale in ((axes[0], "s_per_pass", 1.0), (axes[1], "peak_rss_mb", 1.0 / 1024)):
            vals = []
            for name in labels:
                p = next((q for q in doc["points"] if q["storage"] == storage and q.get("status") == "measured"
                          and f"{q['size']} {'words' if q['kind'] == 'chain' else 'letters'}" == name), None)
                vals.append(p[key] * scale if p is not None else np.nan)
            ax.bar(np.arange(len(labels)) + k * width, vals, width, label=storage)
    for ax, title in ((axes[0], "seconds per pass"), (axes[1], "peak RSS (GB)")):
        ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels)
        ax.set_title(title)
        ax.legend(title="block storage")
    fig.suptitle(f"KernelBCFW (rbf, gamma={doc['gamma']:g}) on OCR, {doc['passes']} passes")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _storages(ctx, param, value):
    vals = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in vals if v not in STORAGES]
    if not vals or bad:
        raise click.BadParameter(f"expected a comma-separated list of {', '.join(STORAGES)}; got {value!r}")
    return vals


@click.command("kernel")
@click.option("--words", default="300,1000", show_default=True, callback=int_list_callback(20),
              help="Training subsets (numbers of OCR words, each >= 20).")
@click.option("--letters", default=0, show_default=True, type=click.IntRange(0),
              help="Also this many random letters as a multiclass problem (0: not).")
@click.option("--passes", default=20, show_default=True, type=click.IntRange(1))
@click.option("--gamma", default=0.05, show_default=True, type=click.FloatRange(0, min_open=True))
@click.option("--lam", default=0.01, show_default=True, type=click.FloatRange(0, min_open=True))
@click.option("--storages", default="factored,dense", show_default=True, callback=_storages,
              help="Block storages to compare: factored, dense.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0))
@click.option("--timeout", default=1800.0, show_default=True, type=click.FloatRange(1),
              help="Seconds after which a point's child is stopped (recorded as skipped).")
@click.option("--out", default="bench_out/kernel", show_default=True, type=click.Path(file_okay=False))
def bench_kernel(words, letters, passes, gamma, lam, storages, seed, timeout, out):
    """Kernel BCFW on OCR subsets: seconds per pass and peak memory by block storage."""
    run_kernel(words, letters, passes, gamma, lam, storages, seed, timeout, out, log=click.echo)
