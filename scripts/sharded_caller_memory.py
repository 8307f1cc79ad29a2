"""Memory of a fit from shard files: the caller at n and at 4n, each worker against the serial fit (issue 52).

Writes an OCR-like chain data set (26 states, 128 binary pixel features, words of 3-14 letters,
float64 rows as `structfw.datasets.load_ocr` gives them) as K = 2 npz shard files at n words and at
4n, then fits ``StructuredSVM(ChainModel(26, 128), executor="process").fit(ShardFiles(...))`` for a
few passes in a fresh Python process each, and prints:

* the caller's peak RSS above its baseline (``ru_maxrss`` after the fit minus ``ru_maxrss`` after
  the imports, in the child: the fit's own growth, whatever the imports cost);
* the workers' peak: ``ru_maxrss`` of ``RUSAGE_CHILDREN``, the largest of the worker processes the
  caller waited for (each holds its shard and its dual state);
* the shard files' size on disk.

* each worker's peak above its baseline (``trace_.meta["worker_memory"]``: the worker's VmRSS when
  its host was made, before it loads its shard, and its VmHWM since, the peak being reset then;
  `structfw._memory`): what loading its shard and its solver state cost it;
* the serial reference: the same examples (every shard file, loaded in one process) fitted serially,
  ``StructuredSVM(ChainModel(26, 128), lam=0.01, max_passes=passes, tol=None, check_every=1,
  random_state=0)``, in a fresh process of its own; its peak above its baseline is measured as a
  worker's (VmRSS after the imports and before the data are loaded, the peak reset there, VmHWM
  after the fit), so it counts the data and the solver state;
* the ratio of the largest worker's figure to the serial one (issue 52's target: at most 0.6 at
  K = 2).

A caller that never loads the training set grows by about the same at n and at 4n, while the
workers' peak grows with n / K.  The VmRSS/VmHWM figures need Linux with a writable
/proc/self/clear_refs; elsewhere they are None and the ratio is left out.

Usage::

    python scripts/sharded_caller_memory.py            # n = 6,000 words (about OCR's size) and 24,000
    python scripts/sharded_caller_memory.py --n 1000 --passes 2 --json memory.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

N_STATES, N_FEATURES, K = 26, 128, 2


def ocr_like_words(n, seed):
    """n words as (X, Y): a letter a prototype bitmap with 10% of its pixels flipped."""
    import numpy as np

    rng = np.random.default_rng(seed)
    prototypes = np.random.default_rng(12345).random((N_STATES, N_FEATURES)) < 0.3
    X, Y = [], []
    for _ in range(n):
        y = rng.integers(0, N_STATES, int(rng.integers(3, 15)))
        flips = rng.random((y.size, N_FEATURES)) < 0.1
        X.append((prototypes[y] ^ flips).astype(np.float64))
        Y.append(y)
    return X, Y


def write_shards(folder, n):
    """K npz shard files of n words in all (each shard generated on its own: this process stays small too)."""
    from structfw.datasets.shard_source import write_shard_npz

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(K):
        X, Y = ocr_like_words(n // K, seed=k)
        paths.append(write_shard_npz(folder / f"part-{k}.npz", X, Y))
    return paths


def child(folder, passes):
    """Fit from the shard files in ``folder``; print the memory figures as JSON (runs in a fresh process)."""
    import resource

    import structfw as sf
    from structfw.datasets.shard_source import ShardFiles

    def peak_mib(who=resource.RUSAGE_SELF):
        return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux

    source = ShardFiles(str(Path(folder) / "part-*.npz"))
    svm = sf.StructuredSVM(sf.models.ChainModel(N_STATES, N_FEATURES), lam=0.01, max_passes=passes, tol=None,
                           check_every=1, random_state=0, executor="process")
    baseline = peak_mib()  # after the imports and the source: what any fit of this process starts from
    svm.fit(source)
    workers = svm.trace_.meta.get("worker_memory") or []
    print(json.dumps(dict(n=int(svm.trace_.meta["n"]), caller_baseline_mib=baseline,
                          caller_above_baseline_mib=peak_mib() - baseline,
                          workers_peak_mib=peak_mib(resource.RUSAGE_CHILDREN), gap=float(svm.gap_),
                          worker_baseline_mib=[_mib(w.get("baseline")) for w in workers],
                          worker_above_baseline_mib=[_above_mib(w.get("peak"), w.get("baseline"))
                                                     for w in workers])))


def _mib(nbytes):
    return None if nbytes is None else nbytes / 2 ** 20


def _above_mib(peak, baseline):
    return None if peak is None or baseline is None else (peak - baseline) / 2 ** 20


def serial_child(folder, passes):
    """Load every shard file into this process and fit serially; print the memory figures as JSON.

    The baseline is this process's VmRSS after the imports and before the data are loaded (the peak
    reset there), so the figure counts the data and the solver state, as a worker's does."""
    import structfw as sf
    from structfw._memory import reset_peak, status_bytes
    from structfw.datasets.shard_source import ShardFiles

    source = ShardFiles(str(Path(folder) / "part-*.npz"))  # paths only: the data are not read yet
    reset = reset_peak()
    baseline = status_bytes("VmRSS")
    X, Y = [], []
    for k in range(len(source)):
        X_k, Y_k = source.load(k)
        X.extend(X_k)
        Y.extend(Y_k)
    svm = sf.StructuredSVM(sf.models.ChainModel(N_STATES, N_FEATURES), lam=0.01, max_passes=passes,
                           tol=None, check_every=1, random_state=0)
    svm.fit(X, Y)
    peak = status_bytes("VmHWM") if reset else None
    print(json.dumps(dict(n=len(X), serial_baseline_mib=_mib(baseline),
                          serial_above_baseline_mib=_above_mib(peak, baseline), gap=float(svm.gap_))))


def measure(n, passes, root):
    folder = root / f"n{n}"
    # the shards are written by a process of their own, and the fit runs in another: on Linux a child
    # starts with its parent's peak RSS (ru_maxrss survives fork and exec), so this process stays small
    subprocess.run([sys.executable, __file__, "--write", str(folder), "--n", str(n)], check=True)
    paths = sorted(folder.glob("part-*.npz"))
    row = run_child("--child", folder, passes)
    row["files_mib"] = sum(p.stat().st_size for p in paths) / 2 ** 20
    serial = run_child("--serial", folder, passes)  # the same examples, fitted serially, on its own
    row["serial_baseline_mib"] = serial["serial_baseline_mib"]
    row["serial_above_baseline_mib"] = serial["serial_above_baseline_mib"]
    row["serial_gap"] = serial["gap"]
    above = [a for a in row["worker_above_baseline_mib"] if a is not None]
    ref = row["serial_above_baseline_mib"]
    row["ratio_max_worker_to_serial"] = max(above) / ref if above and ref else None
    return row


def run_child(flag, folder, passes):
    """The JSON line a fresh Python process prints for ``flag`` (--child or --serial)."""
    out = subprocess.run([sys.executable, __file__, flag, str(folder), "--passes", str(passes)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fmt(v, width):
    return f"{'-':>{width}}" if v is None else f"{v:>{width}.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6000, help="words at the smaller size (the larger: 4n)")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write the rows (one a size) to this JSON file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--serial", help=argparse.SUPPRESS)
    parser.add_argument("--write", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.passes)
    if args.serial:
        return serial_child(args.serial, args.passes)
    if args.write:
        return write_shards(Path(args.write), args.n)
    print(f"{'n':>7} {'files MiB':>9} {'caller baseline':>15} {'caller above it':>15} {'worker peak':>11}  "
          f"{'each worker above its baseline':>30} {'serial above baseline':>21} {'ratio':>5}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (args.n, 4 * args.n):
            r = measure(n, args.passes, Path(tmp))
            rows.append(r)
            workers = ", ".join(_fmt(a, 0).strip() for a in r["worker_above_baseline_mib"]) or "-"
            ratio = r["ratio_max_worker_to_serial"]
            print(f"{r['n']:>7} {r['files_mib']:>9.1f} {r['caller_baseline_mib']:>11.1f} MiB "
                  f"{r['caller_above_baseline_mib']:>11.1f} MiB {r['workers_peak_mib']:>7.1f} MiB  "
                  f"{workers + ' MiB':>30} {_fmt(r['serial_above_baseline_mib'], 17)} MiB "
                  f"{'-' if ratio is None else f'{ratio:.2f}':>5}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
