"""Certified duality gaps with approximate oracles that bound their maximum (loopy graphs).

With TRW-S or the LP relaxation the oracle's labelling may not be a maximiser, so the
gap computed from it is only a lower bound of the true gap.  The relaxation's dual value
bounds the maximum from above; the engine's certified gap built from it must bound the
true primal suboptimality P(w) - P* (checked against the exact QP optimum by enumeration).
"""
import itertools

import numpy as np
import pytest

import structfw as sf
from structfw._linalg import as_dense
from structfw.models import GraphModel
from structfw.solvers import BCFW

pytest.importorskip("cvxopt")
from toy import corners_primal, primal_qp_optimum  # noqa: E402


def frustrated_cycles(rng, n, V, K, F):
    """Cycles with random features and labels: the loopy back-ends' relaxations are not tight."""
    edges = np.array([(v, (v + 1) % V) for v in range(V)], np.int64)
    X = [(rng.normal(size=(V, F)), edges) for _ in range(n)]
    Y = [rng.integers(0, K, V) for _ in range(n)]
    return X, Y


def exact_corners(model, X, Y, K):
    Xv, Yv = model.check_data(X, Y)
    corners = []
    for i, (x, y) in enumerate(zip(Xv, Yv)):
        for yy in itertools.product(range(K), repeat=len(y)):
            yy = np.array(yy)
            corners.append((i, as_dense(model.psi(x, y, yy)), model.loss(y, yy)))
    return corners


@pytest.mark.parametrize("inference", ["trws", "lp"])
def test_certified_gap_bounds_the_true_suboptimality(inference):
    rng = np.random.default_rng(5)
    K, F, lam = 3, 2, 0.05
    model = GraphModel(K, F, inference=inference)
    X, Y = frustrated_cycles(rng, 4, 5, K, F)
    corners = exact_corners(model, X, Y, K)
    w_star = primal_qp_optimum(corners, len(X), model.size_joint_feature, lam)
    P_star = corners_primal(corners, len(X), lam, w_star)
    for passes in (1, 4, 20):
        svm = sf.StructuredSVM(model, solver=BCFW(step="pairwise"), lam=lam, max_passes=passes, tol=None,
                               check_every=1, random_state=0).fit(X, Y)
        assert model.approximate_oracle
        tr = svm.trace_
        cert, gap, dual = (np.asarray(tr[k], float) for k in ("certified_gap", "gap", "dual"))
        assert np.all(np.isfinite(cert))
        # the certificate is never below the oracle's own (lower-bound) gap ...
        assert np.all(cert >= gap - 1e-9)
        # ... and bounds the true suboptimality of the last iterate
        P = corners_primal(corners, len(X), lam, svm.coef_)
        assert P - P_star <= cert[-1] + 1e-8
        # the bound on the primal is a bound
        assert tr["primal_bound"][-1] >= P - 1e-9
        assert dual[-1] <= P_star + 1e-9


def test_tol_stops_on_the_certified_gap():
    rng = np.random.default_rng(6)
    model = GraphModel(3, 2, inference="trws")
    X, Y = frustrated_cycles(rng, 6, 4, 3, 2)
    svm = sf.StructuredSVM(model, solver=BCFW(step="pairwise"), lam=0.05, max_passes=200, tol=1e-3,
                           check_every=1, random_state=0).fit(X, Y)
    if svm.stopped_ == "tol":
        assert svm.trace_["certified_gap"][-1] <= 1e-3
    # an earlier checkpoint whose oracle gap was already under tol did not stop the fit
    cert = np.asarray(svm.trace_["certified_gap"])
    assert not np.any(cert[:-1] <= 1e-3)


def test_exact_models_record_no_certificate():
    rng = np.random.default_rng(7)
    model = GraphModel(3, 2)  # cycles-free: paths are trees, the oracle is exact
    edges = np.array([(0, 1), (1, 2)], np.int64)
    X = [(rng.normal(size=(3, 2)), edges) for _ in range(5)]
    Y = [rng.integers(0, 3, 3) for _ in range(5)]
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=3, check_every=1, random_state=0).fit(X, Y)
    assert not model.approximate_oracle
    assert "certified_gap" not in svm.trace_ and "primal_bound" not in svm.trace_


@pytest.mark.parametrize("inference", ["trws", "lp"])
def test_hinge_bounds_on_a_frustrated_triangle(inference):
    """A repulsive Potts triangle with two states: every labelling keeps one edge equal, the
    relaxation pretends otherwise, so the bound is strictly above the true maximum."""
    from structfw.solvers.problem import Problem

    model = GraphModel(2, 1, pairwise="potts", inference=inference)
    tri = np.array([(0, 1), (1, 2), (2, 0)], np.int64)
    X = [(np.ones((3, 1)), tri), (np.ones((3, 1)), tri[:2])]
    Y = [np.array([0, 1, 0]), np.array([1, 1, 0])]
    problem = Problem(model, *model.check_data(X, Y), lam=0.1)
    assert problem.certifies
    w = np.zeros(model.size_joint_feature)
    w[-1] = -2.0  # the Potts weight: equal neighbours cost 2
    U = problem.hinge_bounds(w)
    Xv, Yv = model.check_data(X, Y)
    for i, (x, y) in enumerate(zip(Xv, Yv)):
        exact = max(model.loss(y, np.array(c)) + model.score(x, np.array(c), w) - model.score(x, y, w)
                    for c in itertools.product(range(2), repeat=3))
        assert U[i] >= exact - 1e-9
    exact0 = max(model.loss(Yv[0], np.array(c)) + model.score(Xv[0], np.array(c), w)
                 - model.score(Xv[0], Yv[0], w) for c in itertools.product(range(2), repeat=3))
    assert U[0] > exact0 + 0.1  # the frustrated cycle: the relaxation is not tight


def _brute_max_H(model, x, y, w, K):
    fixed = model.fixed_score if model.has_fixed_score else (lambda x, c: 0.0)
    base = model.score(x, y, w) + fixed(x, y)
    return max(model.loss(y, c) + model.score(x, c, w) + fixed(x, c) - base
               for c in (np.array(t).reshape(y.shape) for t in itertools.product(range(K), repeat=y.size)))


def test_grid_and_potts_models_bound_their_oracles():
    """The shipped loopy models certify too: their bounds hold against brute force on tiny
    instances, and a fit records a certified gap that is >= the oracle's gap."""
    from structfw.solvers.problem import Problem

    rng = np.random.default_rng(9)
    grid = sf.models.GridModel(3, 2)
    Xg = [rng.normal(size=(2, 3, 2)) for _ in range(3)]
    Yg = [rng.integers(0, 3, (2, 3)) for _ in range(3)]
    potts = sf.models.PottsModel(3, 2, 1, potts_constant=0.3)
    tri = np.array([(0, 1), (1, 2), (2, 0), (2, 3)], np.int64)
    Xp = [(rng.normal(size=(4, 2)), tri, rng.uniform(0.5, 1.5, (4, 1))) for _ in range(3)]
    Yp = [rng.integers(0, 3, 4) for _ in range(3)]
    for model, X, Y in ((grid, Xg, Yg), (potts, Xp, Yp)):
        problem = Problem(model, *model.check_data(X, Y), lam=0.1)
        assert problem.certifies
        for _ in range(3):
            w = rng.normal(size=model.size_joint_feature)
            if model is potts:
                w[model.nonnegative_indices] = np.abs(w[model.nonnegative_indices])
            U = problem.hinge_bounds(w)
            for i in range(len(X)):
                assert U[i] >= _brute_max_H(model, problem.X[i], problem.Y[i], w, 3) - 1e-9
        svm = sf.StructuredSVM(model, lam=0.1, max_passes=3, check_every=1, random_state=0).fit(X, Y)
        cert = np.asarray(svm.trace_["certified_gap"])
        assert np.all(cert >= np.asarray(svm.trace_["gap"]) - 1e-9)


def test_the_estimator_reports_and_saves_the_certified_gap(tmp_path):
    rng = np.random.default_rng(8)
    model = GraphModel(3, 2, inference="trws")
    X, Y = frustrated_cycles(rng, 4, 5, 3, 2)
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=3, check_every=1, random_state=0).fit(X, Y)
    assert svm.certified_gap_ == pytest.approx(svm.trace_["certified_gap"][-1])
    assert svm.certified_gap_ >= svm.gap_ - 1e-9
    svm.save(tmp_path / "m.npz")
    back = sf.load(tmp_path / "m.npz")
    assert back.certified_gap_ == pytest.approx(svm.certified_gap_)
    exact = sf.StructuredSVM(GraphModel(3, 2), lam=0.1, max_passes=2, random_state=0).fit(
        [(x[0], x[1][:-1]) for x in X], Y)  # the cycles cut open: trees, an exact oracle
    assert exact.certified_gap_ is None
