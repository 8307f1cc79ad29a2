"""Minibatch BCFW on the graph-cut task: time and oracle calls to a duality gap, serial against threads.

    python scripts/minibatch_speed.py [--passes 15] [--target 0.01] [--jobs 2]

Plain BCFW (tau = 1, serial) against tau = 4, 8, 16 on ``--jobs`` threads (the numba min cut
releases the GIL), lam = 1/n on load_segmentation("seg-binary"); times are optimisation
seconds from the trace, at pass granularity.
"""
import argparse

import numpy as np

import structfw as sf
from structfw.solvers import BCFW


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=15)
    ap.add_argument("--target", type=float, default=1e-2)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    X, Y, make_model = sf.datasets.load_segmentation("seg-binary", "train")
    model = make_model()
    for tau, jobs in [(1, None), (4, args.jobs), (8, args.jobs), (16, args.jobs)]:
        svm = sf.StructuredSVM(model, solver=BCFW(minibatch=tau), lam=1 / len(X), max_passes=args.passes, tol=None,
                               random_state=0, n_jobs=jobs, executor="thread").fit(X, Y)
        tr = svm.trace_
        hit = np.flatnonzero(np.fmin.accumulate(tr["gap"]) <= args.target)
        reach = (f"{tr['time_s'][hit[0]]:.2f} s, {tr['oracle_calls'][hit[0]]:.0f} calls" if len(hit)
                 else "not reached")
        print(f"tau={tau:2d} jobs={jobs}: {tr['time_s'][-1] / args.passes:.3f} s per pass, "
              f"to gap {args.target:g}: {reach}", flush=True)


if __name__ == "__main__":
    main()
