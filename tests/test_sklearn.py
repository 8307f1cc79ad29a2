"""StructuredSVM keeps scikit-learn's estimator contract (on the lowest declared scikit-learn and the newest)."""
import copy
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import check_is_fitted
from sklearn.exceptions import NotFittedError

import structfw as sf
from structfw.solvers import BCFW


@pytest.fixture(scope="module")
def ocr40():
    X, Y = sf.datasets.load_ocr("train")
    return X[:40], Y[:40]


def _svm(**kw):
    kw.setdefault("solver", BCFW())
    return sf.StructuredSVM(sf.models.ChainModel(26, 128), lam=0.05, max_passes=2, tol=None, random_state=0, **kw)


def test_grid_search_over_lam_and_a_solver_option(ocr40):
    X, Y = ocr40
    gs = GridSearchCV(_svm(), {"lam": [0.01, 1.0], "solver__step": ["fw", "pairwise"]}, cv=KFold(2),
                      error_score="raise")
    gs.fit(X, Y)
    scores = gs.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and len(scores) == 4
    assert gs.best_params_["lam"] in (0.01, 1.0)
    assert isinstance(gs.best_estimator_.solver, BCFW)
    assert 0.0 <= gs.score(X, Y) <= 1.0


def test_cross_val_score_and_a_pipeline(ocr40):
    X, Y = ocr40
    scores = cross_val_score(_svm(), X, Y, cv=KFold(2), error_score="raise")
    assert scores.shape == (2,) and np.all(np.isfinite(scores))
    pipe = Pipeline([("identity", FunctionTransformer(None)), ("svm", _svm())])
    gs = GridSearchCV(pipe, {"svm__lam": [0.01, 0.1]}, cv=KFold(2), error_score="raise").fit(X, Y)
    assert np.all(np.isfinite(gs.cv_results_["mean_test_score"]))


def test_check_is_fitted(ocr40):
    X, Y = ocr40
    svm = _svm()
    with pytest.raises(NotFittedError):
        check_is_fitted(svm)
    check_is_fitted(svm.fit(X, Y))


def test_clone_equality_and_independence():
    svm = _svm(solver=BCFW(step="pairwise", cache=True))
    c = clone(svm)
    assert c.get_params(deep=False).keys() == svm.get_params(deep=False).keys()
    for k, v in svm.get_params(deep=True).items():
        if k not in ("model", "solver"):
            assert c.get_params(deep=True)[k] == v, k
    assert c.solver is not svm.solver


def test_fit_is_idempotent_and_does_not_mutate_inputs(ocr40):
    X, Y = ocr40
    X0, Y0 = copy.deepcopy(X), copy.deepcopy(Y)
    svm = _svm()
    a = svm.fit(X, Y).coef_.copy()
    b = svm.fit(X, Y).coef_.copy()
    np.testing.assert_array_equal(a, b)
    assert all(np.array_equal(x, x0) for x, x0 in zip(X, X0))
    assert all(np.array_equal(y, y0) for y, y0 in zip(Y, Y0))
    params = svm.get_params()
    assert svm.get_params() == params  # fit sets no parameter


def test_n_features_in_and_pickling(ocr40):
    X, Y = ocr40
    svm = _svm().fit(X, Y)
    assert svm.n_features_in_ == 128
    back = pickle.loads(pickle.dumps(svm))
    np.testing.assert_array_equal(back.coef_, svm.coef_)
    assert [list(p) for p in back.predict(X[:5])] == [list(p) for p in svm.predict(X[:5])]
    # the pickled state continues the run like the original
    back.set_params(warm_start=True, max_passes=1).fit(X, Y)
    svm.set_params(warm_start=True, max_passes=1).fit(X, Y)
    np.testing.assert_allclose(back.coef_, svm.coef_)


def test_solver_options_of_a_solver_given_by_name():
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver="bcfw")
    svm.set_params(solver__step="pairwise")
    assert isinstance(svm.solver, BCFW) and svm.solver.step == "pairwise"
    with pytest.raises(ValueError, match="invalid option 'nope' for BCFW"):
        svm.set_params(solver__nope=1)
