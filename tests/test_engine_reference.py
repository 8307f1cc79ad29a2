"""A fresh fit's iterates do not change when the engine is reorganised.

tests/data/engine_reference.npz holds the final w and the primal trace of fixed-seed
fits of every engine configuration (scripts/make_engine_reference.py), on two data sets:

- ``ocr/``: the bundled OCR words.  Binary pixels make near-ties between labellings
  common; a near-tie that rounds the other way under another CPU's SIMD/FMA code sends
  the trajectory elsewhere (SSG's did on an AVX-512 machine).  These fits therefore run
  in a child process under ``REFERENCE_ENV`` (numba's generic x86-64 target, one BLAS
  thread), the setting they were recorded under, whatever CPU runs the test.
- ``synth/``: continuous Gaussian features, where near-ties have probability zero: the
  fits run in this process, under whatever code this CPU gets, and must agree to rounding.

One OCR entry was re-recorded, with the reason: ``bcpfw-sparse`` (pairwise steps on sparse
block storage) ran the Python parts until the engine's block step was written once for every
layout (solvers/rows.py); its pass is now the compiled pairwise pass, whose rows are never read,
so its iterates are those of ``bcpfw`` to the bit (tested below).  The old trajectory had left
``bcpfw``'s at a near-tie (final primal 0.1741 against 0.1687 now); its synthetic reference,
which has no ties, is unchanged.

Since the factored storage took the corner sets (labellings), the other configurations run on it
as "auto" picks it and still match the iterates recorded on rows; the two pairwise ones are pinned
to dense rows, the storage they were recorded on: a pairwise line search leaves two corners at
equal H, and the next away search meets a tie that the factored scores (from the unary scores)
and the rows' (psi . w) may break either way (tests/test_factored.py checks that storage's
pairwise steps against the rows' optimum).

One synthetic entry was re-recorded, with the reason: ``bcpfw-gap-cache``.  The block step took a
corner's ||psi||^2 from ``np.dot``, which numba hands to BLAS, and OpenBLAS sums in the order of
the kernel it picks for the CPU: its Haswell/Zen and SkylakeX kernels differ in the last bit, and
this run (pairwise steps with the gap cache) turns at a rounding-level decision in its second
pass (62 cache hits against 59), so its iterates depended on the CPU's BLAS kernel (the
reference had been recorded under a Haswell-type kernel; an AVX-512 machine failed it).  The sum
is now a loop in index order (solvers/_kernels.py, ``_sqsum``): every other entry moved by
rounding only (at most 2e-14), and this one now comes out the same under numba's generic,
haswell and native targets and under each OpenBLAS kernel.

The OCR checks are marked slow (``pytest -m slow``): their child compiles every kernel again for
the generic target, ~100 s on a cold cache of a 2-core machine, for fits that take 8 s on a warm
one; the synthetic checks run every configuration in the default suite.  CI's slow stage runs
after its generic-target stage (.ci/run), which leaves most of those kernels cached.
"""
from pathlib import Path
import platform
import sys

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import make_engine_reference as ref  # noqa: E402

REF = np.load(Path(__file__).parent / "data" / "engine_reference.npz")
CONFIGS = sorted(ref.CONFIGS)


def assert_same_fit(coef, primal, prefix):
    # rtol 1e-7 leaves room for any summation order (rounding is ~1e-16 relative) and none for
    # a different corner, which moves w by O(gamma) = O(1/k)
    np.testing.assert_allclose(coef, REF[prefix + "/coef"], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(primal, REF[prefix + "/primal"], rtol=1e-7)


@pytest.fixture(scope="module")
def ocr_fits(tmp_path_factory):
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the OCR reference was recorded for numba's generic x86-64 target")
    return ref.fits_in_reference_env(tmp_path_factory.mktemp("ref") / "ocr.npz")


@pytest.mark.slow  # the generic-target compile (module docstring)
@pytest.mark.parametrize("name", CONFIGS)
def test_fresh_fit_iterates_unchanged_on_ocr(name, ocr_fits):
    assert_same_fit(ocr_fits[name + "/coef"], ocr_fits[name + "/primal"], "ocr/" + name)


@pytest.mark.slow  # the generic-target compile (module docstring)
def test_sparse_pairwise_fit_is_the_dense_one(ocr_fits):
    np.testing.assert_array_equal(ocr_fits["bcpfw-sparse/coef"], ocr_fits["bcpfw/coef"])


@pytest.fixture(scope="module")
def synth_data():
    return ref.synthetic_data()


@pytest.mark.parametrize("name", CONFIGS)
def test_fresh_fit_iterates_unchanged_without_ties(name, synth_data):
    est = ref.run(name, *synth_data, ref.N_STATES["synth"])
    assert_same_fit(est.coef_, np.asarray(est.trace_["primal"], float), "synth/" + name)


@pytest.mark.parametrize("name", ["bcfw", "ssg"])
def test_synthetic_data_has_no_near_ties(name, synth_data):
    """The premise of the in-process check: at a reference w, each example's two best
    loss-augmented labellings (brute force) are far apart compared with rounding."""
    import itertools

    X, Y = synth_data
    model = ref.sf.models.ChainModel(4, X[0].shape[1])
    w = REF["synth/" + name + "/coef"]
    short = [(x, y) for x, y in zip(X, Y) if len(y) <= 5][:12]
    assert len(short) >= 6
    for x, y in short:
        values = sorted(model.score(x, np.array(c), w) + model.loss(y, np.array(c))
                        for c in itertools.product(range(4), repeat=len(y)))
        assert values[-1] - values[-2] > 1e-9 * max(1.0, abs(values[-1]))



def test_the_reference_fits_run_the_structfw_under_test():
    """The child process that records and checks the OCR fits imports this process's structfw (the
    checkout's src/), not an installed copy that may be older."""
    import os
    import subprocess

    out = subprocess.run([sys.executable, "-c", ref.child_prelude() + "import structfw; print(structfw.__file__)"],
                         env=dict(os.environ, **ref.REFERENCE_ENV), capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()).resolve() == Path(ref.sf.__file__).resolve()
