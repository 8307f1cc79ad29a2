"""Seconds per engine pass of the 8 Figure-3 variants (Osokin et al. 2016) on OCR or the sparse chain.

    python scripts/engine_speed.py [SRC ...] [--sparse] [--passes P]

Each SRC is a checkout's src/ directory (to compare engine versions back to back in separate
processes); without one the installed structfw is timed.  ``--sparse`` needs structfw-bench (the
checkout's bench/src beside SRC, or the installed one).  Prints one line per variant with the
first pass and the median of passes 2..P (optimisation time from the trace, monitoring excluded).
"""
import argparse
import subprocess
import sys

CODE = r"""
import os, sys, numpy as np
src = {src!r}
if src:
    sys.path.insert(0, src)
    # the checkout's reproduction package (bench/src beside src/), for the sparse chain's generator
    sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(src)), "bench", "src"))
import structfw as sf
from structfw.solvers import BCFW
if {sparse!r}:
    try:
        from structfw_bench.synthetic import make_chain_problem
    except ImportError:  # a checkout from before the reproduction became a distribution of its own
        from structfw.bench.synthetic import make_chain_problem
    X, Y = make_chain_problem(n=25000, sparse=True, seed=0, n_test=0)[:2]
    model = sf.models.ChainModel(10, 200)
else:
    X, Y = sf.datasets.load_ocr("train")
    model = sf.models.ChainModel(26, 128)
for step in ("fw", "pairwise"):
    for sampling in ("uniform", "gap"):
        for cache in (False, True):
            make = lambda: BCFW(step=step, sampling=sampling, cache=cache)
            sf.StructuredSVM(model, solver=make(), lam=0.01, max_passes=1, tol=None).fit(X[:30], Y[:30])
            svm = sf.StructuredSVM(model, solver=make(), lam=0.01, max_passes={passes}, tol=None, check_every=1,
                                   random_state=0).fit(X, Y)
            t, ep = svm.trace_["time_s"], svm.trace_["engine_passes"]
            per = np.diff(t) / np.maximum(np.diff(ep), 1)
            print(f"{{src or 'installed'}} {{make().label:16s}} first {{per[0]:.3f}} s  median {{np.median(per[1:]):.3f}} s",
                  flush=True)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="*", default=[""])
    ap.add_argument("--sparse", action="store_true", help="the 25,000-sequence sparse chain instead of OCR")
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    for src in args.src or [""]:
        subprocess.run([sys.executable, "-c", CODE.format(src=src, sparse=args.sparse, passes=args.passes)],
                       check=True)


if __name__ == "__main__":
    main()
