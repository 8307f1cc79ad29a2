"""StructuredSVM checks every constructor parameter once, at fit, from one constraints table."""
import inspect

import numpy as np
import pytest

import structfw as sf
from structfw._params import Interval, Options, validate_params

BAD = {
    "model": ["chain", None],
    "solver": ["nope", 3],
    "lam": [0.0, -1.0, float("nan"), float("inf"), "0.1", True],
    "max_passes": [0, -2, float("nan"), "5"],
    "tol": [-1e-3, "x", float("nan")],
    "check_every": [0, 1.5, "often", True],
    "time_budget": [0, -1, "abc", float("nan")],
    "random_state": ["abc", -1, 1.5, True],
    "warm_start": ["yes", 1, None],
    "verbose": [-1, "x", 0.5],
    "n_jobs": [0, -2, 1.5, "2"],
    "executor": ["dask", "ray:", 3],
    "oracle_timeout": [0, -1, "x"],
    "class_weight": ["x", [1.0, 2.0]],
    "shards": [0, -1, 1.5, "2"],
    "lam_grid": [[], [0.1, -1.0], [1e-13], "0.1", 0.1, [[0.1]], [float("nan")]],
    "validation_fraction": [0, 1, 1.5, -0.1, "0.2", True],
}
GOOD = {
    "lam": [1e-3, 1, np.float32(0.5), "auto"],
    "max_passes": [1, 2.5, float("inf")],
    "tol": [None, 0, 1e-4],
    "check_every": ["auto", 1, np.int64(3)],
    "time_budget": [None, 10, float("inf")],
    "random_state": [None, 0, np.random.default_rng(1)],
    "warm_start": [True, False],
    "verbose": [0, 2, True],
    "n_jobs": [None, -1, 2],
    "executor": ["process", "thread", "ray", "ray:auto"],
    "oracle_timeout": [None, 5.0],
    "class_weight": [None, "balanced", {0: 1.0}],
    "shards": [None, 1, 3],
    "lam_grid": [None, [1.0, 0.1], (0.5,), np.geomspace(1, 1e-3, 4)],
    "validation_fraction": [0.2, 0.5, 0.01],
}


def _est(**kw):
    kw.setdefault("model", sf.models.ChainModel(3, 2))
    return sf.StructuredSVM(**kw)


def test_every_constructor_parameter_has_constraints():
    params = set(inspect.signature(sf.StructuredSVM.__init__).parameters) - {"self"}
    assert params == set(sf.StructuredSVM._parameter_constraints)
    assert set(BAD) == params


@pytest.mark.parametrize("name, value", [(k, v) for k, vs in BAD.items() for v in vs])
def test_a_bad_parameter_is_named_at_fit(name, value):
    est = _est(**{name: value})  # the constructor stores, as scikit-learn's do
    with pytest.raises(ValueError, match=f"parameter '{name}' must be"):
        validate_params(est, est._parameter_constraints)
    with pytest.raises(ValueError, match=f"'{name}'"):
        est.fit([np.zeros((2, 2))], [np.zeros(2, int)])  # before any work: the data are not even read


@pytest.mark.parametrize("name, value", [(k, v) for k, vs in GOOD.items() for v in vs])
def test_good_parameters_pass(name, value):
    est = _est(**{name: value})
    validate_params(est, est._parameter_constraints)


def test_constraint_kinds():
    assert Interval(0, low_open=True).accepts(1e-300) and not Interval(0, low_open=True).accepts(0)
    assert not Interval(0).accepts(True) and not Interval(0, integer=True).accepts(1.0)
    assert Options(("auto",)).accepts("auto") and not Options((1,)).accepts(True)
    assert "an integer >= 1" in Interval(1, integer=True).describe()
