"""Record final iterates of fixed-seed fits, to check that engine refactors keep them.

Two data sets, two guarantees (tests/test_engine_reference.py):

- OCR (``ocr/``): binary pixel features make near-ties between labellings common, and a
  near-tie that rounds the other way sends a trajectory elsewhere (SSG diverged on an
  AVX-512 CPU).  These iterates are recorded, and compared, with numba compiling for the
  generic x86-64 target and one BLAS thread (``REFERENCE_ENV``), which the test enforces by
  running the fits in a subprocess.
- continuous Gaussian features (``synth/``): near-ties have probability zero, so the
  iterates agree to rounding under any CPU's code; compared in the test process.

Run once with the engine version whose iterates are the reference (the script sets the
environment itself):
    python scripts/make_engine_reference.py tests/data/engine_reference.npz
"""
import os
import subprocess
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
    # pairwise steps pinned to the storage they were recorded on (dense rows): "auto" now stores them
    # factored, where a tie that each pairwise line search leaves may break the other way
    # (tests/test_factored.py checks that storage against the rows' optimum instead)
    "bcpfw": lambda: solvers.BCFW(step="pairwise", block_storage="dense"),
    "bcafw": lambda: solvers.BCFW(step="away"),
    "bcpfw-gap-cache": lambda: solvers.BCFW(step="pairwise", sampling="gap", cache=True, gap_refresh=2,
                                            block_storage="dense"),
    "bcafw-cache-wavg": lambda: solvers.BCFW(step="away", cache=True, averaging="weighted"),
    "bcpfw-sparse": lambda: solvers.BCFW(step="pairwise", block_storage="sparse"),
    "bcfw-sparse-gap-cache": lambda: solvers.BCFW(sampling="gap", cache=True, block_storage="sparse",
                                                  gap_refresh=2),
    "fw": lambda: solvers.FW(),
    "fw-fixed": lambda: solvers.FW(step_size="predefined"),
    "ssg": lambda: solvers.SSG(),
    "ssg-wavg": lambda: solvers.SSG(averaging="weighted"),
}


#: the CPU-independent setting the OCR iterates are recorded and compared under
REFERENCE_ENV = {"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": "", "OPENBLAS_NUM_THREADS": "1",
                 "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def data():
    X, Y = sf.datasets.load_ocr("train")
    return X[:120], Y[:120]


def synthetic_data(n=60, n_states=4, n_features=6, seed=7):
    """Chains with Gaussian features around a per-state mean: no two labellings score alike."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(n_states, n_features))
    X, Y = [], []
    for _ in range(n):
        length = int(rng.integers(3, 8))
        y = rng.integers(0, n_states, length)
        X.append(means[y] + rng.normal(scale=1.5, size=(length, n_features)))
        Y.append(y)
    return X, Y


#: the chain's states on each data set
N_STATES = {"ocr": 26, "synth": 4}


def run(name, X, Y, n_states=26):
    model = sf.models.ChainModel(n_states, X[0].shape[1])
    est = sf.StructuredSVM(model, solver=CONFIGS[name](), lam=0.01, max_passes=4, tol=None,
                           check_every=1, random_state=3)
    est.fit(X, Y)
    return est


def fits(dataset):
    """{"<name>/coef": w, "<name>/primal": trace} of every config on ``dataset`` ("ocr" or "synth")."""
    X, Y = data() if dataset == "ocr" else synthetic_data()
    arrays = {}
    for name in CONFIGS:
        est = run(name, X, Y, N_STATES[dataset])
        arrays[name + "/coef"] = est.coef_
        arrays[name + "/primal"] = np.asarray(est.trace_["primal"], float)
    return arrays


def child_prelude():
    """The child process's first statement: this script's folder, and the folder of the structfw this
    process runs (a checkout's src/ under the tests' conftest), first on sys.path -- not whichever copy
    is installed, which may be older: the reference would then check that one."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(sf.__file__)))
    return f"import sys; sys.path[:0] = [{os.path.dirname(os.path.abspath(__file__))!r}, {package_root!r}]; "


def fits_in_reference_env(out):
    """Run the OCR fits in a child process under REFERENCE_ENV; they are written to ``out`` (npz)."""
    env = dict(os.environ, **REFERENCE_ENV)
    code = child_prelude() + "import numpy as np, make_engine_reference as r; np.savez(sys.argv[1], **r.fits('ocr'))"
    subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True)
    with np.load(out) as f:
        return dict(f)


def main(out):
    import tempfile

    arrays = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, value in fits_in_reference_env(os.path.join(tmp, "ocr.npz")).items():
            arrays["ocr/" + key] = value
    for key, value in fits("synth").items():
        arrays["synth/" + key] = value
    np.savez_compressed(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1])
