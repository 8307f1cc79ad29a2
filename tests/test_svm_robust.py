"""FrankWolfeSVC never returns silent nonsense: degenerate inputs, non-finite solves,
failed and interrupted refits."""
import _thread
import threading
import time
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_classification
from sklearn.exceptions import ConvergenceWarning

from structfw.svm import FrankWolfeSVC, solve_simplex_qp


def _data(n=60, seed=0):
    return make_classification(n_samples=n, n_features=4, n_informative=3, n_redundant=0,
                               random_state=seed)


FITTED = ["classes_", "alpha_", "support_", "dual_coef_", "intercept_", "support_vectors_",
          "n_support_", "n_iter_", "objective_", "gap_", "converged_", "stopped_",
          "n_features_in_", "_gamma"]


def _snapshot(clf):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v)
            for k, v in clf.__dict__.items() if k in FITTED}


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k])
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("params, match", [
    ({"gamma": np.inf}, "parameter \'gamma\' must"), ({"gamma": np.nan}, "parameter \'gamma\' must"),
    ({"gamma": 0.0}, "parameter \'gamma\' must"), ({"coef0": np.inf}, "parameter \'coef0\' must"),
    ({"coef0": np.nan}, "parameter \'coef0\' must"), ({"degree": 2.5}, "parameter \'degree\' must"),
    ({"C": np.inf}, "parameter \'C\' must"), ({"C": np.nan}, "parameter \'C\' must"), ({"tol": np.inf}, "parameter \'tol\' must"),
    ({"cache_size": np.nan}, "parameter \'cache_size\' must"), ({"n_resample": -1}, "parameter \'n_resample\' must"),
    ({"random_state": "seed"}, "parameter \'random_state\' must"),
])
def test_degenerate_parameters_are_named(params, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        FrankWolfeSVC(**params).fit(X, y)


def test_parameter_constraints_declared_for_every_parameter():
    assert set(FrankWolfeSVC._parameter_constraints) == set(FrankWolfeSVC().get_params())


@pytest.mark.parametrize("kernel, scale, match", [
    ("rbf", 1e300, "squared norms overflow"), ("linear", 1e160, "squared norms overflow"),
    ("linear", 1e153, "overflow"), ("poly", 1e60, "poly kernel values overflow"),
])
def test_features_whose_kernel_overflows(kernel, scale, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        FrankWolfeSVC(kernel=kernel, gamma=1.0).fit(X * scale, y)


def test_tiny_C_and_gamma_scale_that_overflow():
    X, y = _data()
    with pytest.raises(ValueError, match="C="):
        FrankWolfeSVC(C=1e-320).fit(X, y)
    with pytest.raises(ValueError, match="gamma='scale'"):
        FrankWolfeSVC(gamma="scale").fit(X * 1e-160, y)


def test_bad_precomputed_kernels():
    X, y = _data(30)
    K = X @ X.T
    with pytest.raises(ValueError, match="square"):
        FrankWolfeSVC(kernel="precomputed").fit(K[:, :20], y)
    A = K.copy()
    A[0, 1] += 1.0
    with pytest.raises(ValueError, match="symmetric"):
        FrankWolfeSVC(kernel="precomputed").fit(A, y)
    A = K.copy()
    A[3, 3] = -1.0
    with pytest.raises(ValueError, match="negative diagonal"):
        FrankWolfeSVC(kernel="precomputed").fit(A, y)
    A = K.copy()
    A[2, 5] = A[5, 2] = np.inf
    with pytest.raises(ValueError, match="infinity|inf"):
        FrankWolfeSVC(kernel="precomputed").fit(A, y)


def test_indefinite_precomputed_kernel_is_an_error_not_a_model():
    X, y = _data(60)
    rng = np.random.default_rng(0)
    K = rng.normal(size=(60, 60))
    K = K + K.T
    np.fill_diagonal(K, 0.1)
    with pytest.raises(ValueError, match="not positive"):
        FrankWolfeSVC(kernel="precomputed").fit(K, y)


def test_nonfinite_gap_stops_the_solver():
    Q = np.eye(5)
    Q[1, 2] = Q[2, 1] = np.nan
    s = solve_simplex_qp(Q, method="partan", tol=1e-9)
    assert s.stopped == "nonfinite" and not s.converged
    assert s.n_iter < 100


def test_failed_refit_keeps_the_previous_model():
    X, y = _data()
    clf = FrankWolfeSVC(kernel="precomputed").fit(X @ X.T, y)
    before = _snapshot(clf)
    rng = np.random.default_rng(0)
    K = rng.normal(size=(40, 40))
    K = K + K.T
    np.fill_diagonal(K, 0.1)
    with pytest.raises(ValueError):
        clf.fit(K, y[:40])          # fails after validate_data has seen 40 features
    _same(before, _snapshot(clf))
    assert clf.predict(X @ X.T).shape == (60,)


def test_stopped_attribute():
    X, y = _data()
    clf = FrankWolfeSVC(tol=1e-3).fit(X, y)
    assert clf.stopped_ == "converged" and clf.converged_
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        clf = FrankWolfeSVC(tol=1e-12, max_iter=5, method="fw").fit(X, y)
    assert clf.stopped_ == "max_iter" and not clf.converged_


# --------------------------------------------------------------------- interrupts
def _check_consistent(clf, X, y, n_classes):
    classes = np.unique(y)
    np.testing.assert_array_equal(clf.classes_, classes)
    n_machines = 1 if n_classes == 2 else n_classes
    assert clf.dual_coef_.shape == (n_machines, len(clf.support_))
    assert clf.alpha_.shape == (n_machines, len(X))
    assert clf.support_vectors_.shape == (len(clf.support_), X.shape[1])
    dec = clf.decision_function(X)
    assert dec.shape == ((len(X),) if n_classes == 2 else (len(X), n_classes))
    assert np.isfinite(dec).all()
    pred = clf.predict(X)
    if n_classes == 2:
        assert set(np.unique(pred)) == set(classes), (clf.stopped_, clf.n_iter_)
        assert clf.n_iter_.min() >= 1
    else:   # one-vs-rest machines stopped after their first chunk may not win anywhere
        assert set(np.unique(pred)) <= set(classes)
    if clf.stopped_ == "interrupted":
        assert not clf.converged_
    else:
        assert clf.converged_ == (clf.stopped_ == "converged")


def _fit_interrupted_at(clf, X, y, delay):
    """Fit with a Ctrl-C (SIGINT via _thread.interrupt_main) after ``delay`` seconds.

    Returns "raised" when the KeyboardInterrupt surfaced (outside the solve), else the
    estimator's stopped_."""
    timer = threading.Timer(delay, _thread.interrupt_main)
    outcome = None
    try:
        timer.start()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                clf.fit(X, y)
            outcome = clf.stopped_
        finally:
            timer.cancel()
            timer.join()
            for _ in range(50):       # let a pending interrupt be delivered in here
                time.sleep(0.001)
    except KeyboardInterrupt:
        outcome = outcome or "raised"
    return outcome


@pytest.mark.parametrize("n_classes", [2, 3])
def test_interrupted_refits_leave_a_consistent_estimator(n_classes):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    centers = [[-4, -4], [4, 4], [4, -4]][:n_classes]
    X, y = make_blobs(n_samples=1500, centers=centers, cluster_std=1.5, random_state=0)
    Xb, yb = make_blobs(n_samples=900, centers=centers, cluster_std=2.0, random_state=1)
    clf = FrankWolfeSVC(method="fw", tol=1e-7, max_iter=30000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(Xb, yb)               # compiles / loads the kernels
        t = time.perf_counter()
        clf.fit(X, y)
        full = time.perf_counter() - t
    rng = np.random.default_rng(0)
    outcomes = []
    fitted = (X, y)  # the data of the model the estimator holds
    for k in range(8):
        Xf, yf = (Xb, yb) if k % 2 else (X, y)
        before = _snapshot(clf)
        # mostly inside the solve, sometimes before it starts or after it ends
        delay = rng.uniform(0.0, 1.1 * full) if k % 4 else rng.uniform(0.0, 0.02)
        outcome = _fit_interrupted_at(clf, Xf, yf, delay)
        outcomes.append(outcome)
        if outcome == "raised":      # Ctrl-C before/after the solve: previous model intact
            _same(before, _snapshot(clf))
        else:                        # a model of Xf, finished or interrupted
            fitted = (Xf, yf)
        _check_consistent(clf, *fitted, n_classes)
    assert "interrupted" in outcomes, outcomes
