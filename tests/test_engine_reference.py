"""A fresh fit's iterates do not change when the engine is reorganised.

tests/data/engine_reference.npz holds the final w and the primal trace of
fixed-seed fits made with the engine before its redesign
(scripts/make_engine_reference.py); today's engine must give the same to rounding.
"""
from pathlib import Path
import sys

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import make_engine_reference as ref  # noqa: E402

REF = np.load(Path(__file__).parent / "data" / "engine_reference.npz")


@pytest.fixture(scope="module")
def data():
    return ref.data()


@pytest.mark.parametrize("name", sorted(ref.CONFIGS))
def test_fresh_fit_iterates_unchanged(name, data):
    est = ref.run(name, *data)
    np.testing.assert_allclose(est.coef_, REF[name + "/coef"], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(est.trace_["primal"], float), REF[name + "/primal"], rtol=1e-7)
