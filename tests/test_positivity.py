"""w_S >= 0 in every solver (the model's ``nonnegative_indices``, e.g. graph-cut edge weights).

The constrained dual is D(alpha) = -lam/2 ||Pi(A alpha)||^2 + b^T alpha with Pi the
clipping of S at 0; the solvers are checked against the exact optimum of the
constrained primal QP, after every step for feasibility, and for honest gaps.
"""
import numpy as np
import pytest

import structfw as sf
from structfw.solvers import BCFW, FW, SSG, Monitor, Problem, StopRule
from structfw.solvers import parts
from structfw.solvers._kernels import projected_line_search, projected_slope
from toy import exact_optimum, make_toy, primal, primal_qp_optimum

LAM = 0.05


def constrained_optimum(model, X, Y, lam, S):
    """min_{w, xi} lam/2 ||w||^2 + 1/n sum xi_i  s.t. xi_i >= L_i(y) - <w, psi_i(y)>, w_S >= 0 (cvxopt)."""
    n, m, d = len(X), model.phi.shape[1], model.phi.shape[2]
    corners = [(i, model.psi(X[i], Y[i], i * 1000 + yl), model.loss(Y[i], i * 1000 + yl))
               for i in range(n) for yl in range(m)]
    w = primal_qp_optimum(corners, n, d, lam, S)
    return primal(model, X, Y, lam, w), w


@pytest.fixture(scope="module")
def toy():
    model, X, Y = make_toy(n=5, m=4, d=4, seed=3)
    _, w_free = exact_optimum(model, X, Y, LAM)
    S = np.flatnonzero(w_free < -1e-3)[:2]
    assert len(S) >= 1, "the toy must have an active constraint"
    model.nonnegative_indices = S
    P_star, w_star = constrained_optimum(model, X, Y, LAM, S)
    return model, X, Y, S, P_star, w_star


# Pairwise and away steps converge fast to the constrained optimum.  Plain FW steps only
# at the O(1/k) rate here: the clipping makes D flat along v_S < 0, so the optimum is
# not isolated and FW zig-zags between faces (as it does on any face-bound optimum).
FAST = {
    "bcpfw": BCFW(step="pairwise"), "bcafw": BCFW(step="away"),
    "bcpfw-gap-cache": BCFW(step="pairwise", sampling="gap", cache=True),
    "bcafw-sparse-cache": BCFW(step="away", block_storage="sparse", cache=True),
}
SLOW = {
    "bcfw": BCFW(), "bcfw-gap": BCFW(sampling="gap", gap_refresh=2), "bcfw-cache": BCFW(cache=True),
    "bcfw-sparse": BCFW(block_storage="sparse"), "fw": FW(),
}


def _check_fit(svm, toy, tol):
    model, X, Y, S, P_star, w_star = toy
    assert np.all(svm.coef_[S] >= 0.0)
    sub = primal(model, X, Y, LAM, svm.coef_) - P_star
    assert -1e-9 < sub < tol
    assert svm.gap_ >= sub - 1e-10  # the reported gap certifies the suboptimality
    return sub


@pytest.mark.parametrize("name", sorted(FAST))
def test_reaches_the_constrained_optimum(name, toy):
    model, X, Y, S, P_star, w_star = toy
    svm = sf.StructuredSVM(model, solver=FAST[name], lam=LAM, max_passes=2000, tol=1e-9, random_state=0)
    svm.fit(X, Y)
    _check_fit(svm, toy, 1e-7)
    np.testing.assert_allclose(svm.coef_, w_star, atol=1e-3)
    # the unconstrained optimum is not feasible: the constraint was really active
    _, w_free = exact_optimum(model, X, Y, LAM)
    assert np.any(w_free[S] < 0)


@pytest.mark.parametrize("name", sorted(SLOW))
def test_fw_steps_approach_the_constrained_optimum(name, toy):
    model, X, Y, *_ = toy
    svm = sf.StructuredSVM(model, solver=SLOW[name], lam=LAM, max_passes=3000, tol=None, check_every=300,
                           random_state=0).fit(X, Y)
    _check_fit(svm, toy, 1e-2)
    assert svm.trace_["gap"][-1] < 0.2 * svm.trace_["gap"][1]


@pytest.mark.parametrize("name", ["bcfw-wavg", "ssg-wavg", "fw-fixed", "bcfw-fixed"])
def test_sublinear_variants_stay_feasible_and_approach(name, toy):
    model, X, Y, S, P_star, _ = toy
    solver = {"bcfw-wavg": BCFW(averaging="weighted"), "ssg-wavg": SSG(averaging="weighted"),
              "fw-fixed": FW(step_size="predefined"), "bcfw-fixed": BCFW(step_size="predefined")}[name]
    svm = sf.StructuredSVM(model, solver=solver, lam=LAM, max_passes=3000, tol=None, check_every=500,
                           random_state=0).fit(X, Y)
    assert np.all(svm.coef_[S] >= 0.0)
    assert primal(model, X, Y, LAM, svm.coef_) - P_star < 1e-2


def test_feasible_after_every_step_and_gaps_are_honest(toy, monkeypatch):
    model, X, Y, S, P_star, _ = toy
    seen = []
    orig = parts.projected_direction

    def spy(ctx, *a):
        gamma = orig(ctx, *a)
        seen.append(float(ctx.st.w[S].min()))
        np.testing.assert_allclose(ctx.st.w, ctx.problem.project(ctx.st.v))
        return gamma

    monkeypatch.setattr(parts, "projected_direction", spy)
    for solver in (BCFW(step="pairwise"), BCFW(step="away", cache=True)):
        svm = sf.StructuredSVM(model, solver=solver, lam=LAM, max_passes=30, tol=None, random_state=1).fit(X, Y)
        tr = svm.trace_
        for k in range(len(tr)):
            # the duality gap bounds the primal suboptimality of the iterate it was measured at
            assert tr["gap"][k] >= tr["primal"][k] - P_star - 1e-10
            assert tr["gap"][k] >= -1e-12
    assert len(seen) > 50 and min(seen) >= 0.0


def test_block_gaps_sum_to_the_gap_with_constraints(toy):
    model, X, Y, S, _, _ = toy
    problem = Problem(model, X, Y, LAM)
    solver = BCFW(step="pairwise")
    stop = StopRule(max_passes=4, tol=None)
    res = solver.solve(problem, stop, rng=0, monitor=Monitor(problem, stop, {}))
    st = res.state
    P, gaps, _ = solver.gap_pass(problem, st)
    assert gaps.sum() == pytest.approx(P - st.dual(), abs=1e-12)
    assert np.all(gaps >= -1e-12)


def test_projected_line_search_is_the_exact_maximiser():
    rng = np.random.default_rng(0)
    for _ in range(200):
        d = 6
        v = rng.normal(size=d)
        dv = rng.normal(size=d)
        mask = rng.random(d) < 0.5
        lam, dl, gmax = 0.3, rng.normal(), float(rng.uniform(0.1, 3))
        idx = np.arange(d, dtype=np.int64)
        g = projected_line_search(v, idx, dv, mask, lam, dl, gmax)

        def f(gamma):
            x = v + gamma * dv
            x = np.where(mask, np.maximum(x, 0), x)
            return -0.5 * lam * x @ x + gamma * dl

        grid = np.linspace(0, gmax, 4001)
        assert f(g) >= max(f(t) for t in grid) - 1e-9
        assert 0.0 <= g <= gmax
        if 0 < g < gmax:
            assert abs(projected_slope(v, idx, dv, mask, lam, dl, g)) < 1e-9


@pytest.mark.parametrize("S, match", [([-1], "must lie in 0.."), ([0.5], "integer indices"), ([[0, 1]], "1-D")])
def test_bad_nonnegative_indices(toy, S, match):
    model, X, Y, *_ = toy
    bad = make_toy(n=5, m=4, d=4, seed=3)[0]
    bad.nonnegative_indices = np.array(S)
    with pytest.raises(ValueError, match=match):
        Problem(bad, X, Y, LAM)


def test_warm_start_resume_is_exact_with_constraints(toy):
    model, X, Y, *_ = toy
    kw = dict(lam=LAM, tol=None, random_state=4)
    once = sf.StructuredSVM(model, solver=BCFW(step="away", sampling="gap", gap_refresh=2), max_passes=8, **kw)
    once.fit(X, Y)
    split = sf.StructuredSVM(model, solver=BCFW(step="away", sampling="gap", gap_refresh=2), max_passes=4,
                             warm_start=True, **kw).fit(X, Y)
    split.fit(X, Y)
    np.testing.assert_allclose(split.coef_, once.coef_, rtol=1e-12, atol=1e-14)


def test_regularisation_path_with_constraints_is_eps_approximate(toy):
    model, X, Y, S, _, _ = toy
    eps = 0.05
    path = sf.regularization_path(model, X, Y, eps=eps, solver=BCFW(step="pairwise"), min_lam=0.01,
                                  random_state=0)
    assert len(path) >= 2
    for lam in [path.breakpoints[0] * 3.0] + list(np.geomspace(path.breakpoints[0], max(path.lam_end, 0.011), 7)):
        w = path.coef_at(lam)
        assert np.all(w[S] >= 0.0)
        P_star, _ = constrained_optimum(model, X, Y, lam, S)
        assert primal(model, X, Y, lam, w) - P_star <= eps + 1e-7
