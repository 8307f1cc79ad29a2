"""Record final iterates of fixed-seed fits, to check that engine refactors keep them.

Run once with the engine version whose iterates are the reference:
    python scripts/make_engine_reference.py tests/data/engine_reference.npz
tests/test_engine_reference.py compares today's engine against the file.
"""
import sys

import numpy as np

import structfw as sf
from structfw import solvers

CONFIGS = {
    "bcfw": lambda: solvers.BCFW(),
    "bcfw-perm-fixed": lambda: solvers.BCFW(sampling="perm", step_size="predefined"),
    "bcfw-wavg": lambda: solvers.BCFW(averaging="weighted"),
    "bcfw-tavg": lambda: solvers.BCFW(averaging="suffix"),
    "bcfw-gap": lambda: solvers.BCFW(sampling="gap", gap_refresh=2),
    "bcfw-maxgap": lambda: solvers.BCFW(sampling="max_gap", gap_refresh=2),
    "bcfw-cache": lambda: solvers.BCFW(cache=True, gap_refresh=2),
    "bcpfw": lambda: solvers.BCFW(step="pairwise"),
    "bcafw": lambda: solvers.BCFW(step="away"),
    "bcpfw-gap-cache": lambda: solvers.BCFW(step="pairwise", sampling="gap", cache=True, gap_refresh=2),
    "bcafw-cache-wavg": lambda: solvers.BCFW(step="away", cache=True, averaging="weighted"),
    "bcpfw-sparse": lambda: solvers.BCFW(step="pairwise", block_storage="sparse"),
    "bcfw-sparse-gap-cache": lambda: solvers.BCFW(sampling="gap", cache=True, block_storage="sparse",
                                                  gap_refresh=2),
    "fw": lambda: solvers.FW(),
    "fw-fixed": lambda: solvers.FW(step_size="predefined"),
    "ssg": lambda: solvers.SSG(),
    "ssg-wavg": lambda: solvers.SSG(averaging="weighted"),
}


def data():
    X, Y = sf.datasets.load_ocr("train")
    return X[:120], Y[:120]


def run(name, X, Y):
    model = sf.models.ChainModel(26, 128)
    est = sf.StructuredSVM(model, solver=CONFIGS[name](), lam=0.01, max_passes=4, tol=None,
                           check_every=1, random_state=3)
    est.fit(X, Y)
    return est


def main(out):
    X, Y = data()
    arrays = {}
    for name in CONFIGS:
        est = run(name, X, Y)
        arrays[name + "/coef"] = est.coef_
        arrays[name + "/primal"] = np.asarray(est.trace_["primal"], float)
        print(name, est.primal_, len(est.trace_))
    np.savez_compressed(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1])
