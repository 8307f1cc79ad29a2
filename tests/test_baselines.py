"""The two baseline solvers: 1-slack cutting plane and online exponentiated gradient.

Against the exact optimum of the dual QP on the enumerable toy (tests/toy.py), the gap
identity (the reported gap bounds the true suboptimality at every checkpoint), exact
warm-start resume, Ctrl-C, option errors, and the BCFW paper's App. F claims on OCR.
"""
import time

import numpy as np
import pytest
from interrupts import check_interrupted_fits
from sklearn.base import clone

import structfw as sf
from structfw.solvers import BCFW, CuttingPlane, OnlineEG, make_solver
from toy import EnumModel, exact_optimum, make_toy, primal

LAM = 0.1


class EnumEGModel(EnumModel):
    """The toy model with the expectation oracle by brute-force enumeration of Y_i.

    alpha(y) ∝ exp(c Delta(y_true, y) + <v, phi(x, y)>); returns (E_phi, E_loss, log Z)."""

    def joint_feature(self, x, y):
        return self.phi[int(x), int(y) % 1000].copy()  # labels are encoded as example * 1000 + label

    def expectation(self, x, y_true, v, c):
        i = int(x)
        m = self.phi.shape[1]
        losses = np.array([self.loss(y_true, i * 1000 + b) for b in range(m)])
        theta = c * losses + self.phi[i] @ v
        top = theta.max()
        p = np.exp(theta - top)
        Z = p.sum()
        p /= Z
        return p @ self.phi[i], float(p @ losses), float(top + np.log(Z))


def eg_toy(n=5, m=4, d=3, seed=1):
    model, X, Y = make_toy(n=n, m=m, d=d, seed=seed)
    return EnumEGModel(model.phi, model.loss_table), X, Y


@pytest.fixture(scope="module")
def toy():
    model, X, Y = eg_toy()
    Dstar, wstar = exact_optimum(model, X, Y, LAM)
    return model, X, Y, Dstar, wstar


def fit(model, X, Y, solver, passes, tol=1e-10, lam=LAM, seed=0, **kw):
    return sf.StructuredSVM(model, solver=solver, lam=lam, max_passes=passes, tol=tol, random_state=seed,
                            **kw).fit(X, Y)


# ============================================================ cutting plane
@pytest.mark.parametrize("qp_solver", ["daqp", "proxsuite", "cvxopt"])
def test_cutting_plane_reaches_the_exact_qp_optimum(toy, qp_solver):
    pytest.importorskip(qp_solver)
    model, X, Y, Dstar, wstar = toy
    svm = fit(model, X, Y, CuttingPlane(qp_solver=qp_solver), passes=300, tol=1e-9)
    assert svm.stopped_ == "tol"
    assert primal(model, X, Y, LAM, svm.coef_) - Dstar < 1e-8
    np.testing.assert_allclose(svm.coef_, wstar, atol=1e-4)
    # engine_passes counts iterations: one batch oracle pass each
    tr = svm.trace_
    np.testing.assert_array_equal(tr["engine_passes"], np.arange(len(tr["engine_passes"])))
    np.testing.assert_array_equal(tr["oracle_calls"], tr["engine_passes"] * len(X))


def test_cutting_plane_dual_point_is_a_point_of_the_ssvm_dual(toy):
    """beta_c spread over alpha_i(y_i*^(c)): w = A alpha, l = b^T alpha, D(alpha) <= D*."""
    model, X, Y, Dstar, _ = toy
    svm = fit(model, X, Y, CuttingPlane(inactive_after=0), passes=6, tol=None)
    st = svm.state_
    n = len(X)
    assert np.all(st.beta >= 0) and st.beta.sum() <= 1 + 1e-12
    np.testing.assert_allclose(st.w, st.beta @ st.psi / LAM, atol=1e-12)
    assert st.ell == pytest.approx(st.beta @ st.loss, abs=1e-14)
    D = -0.5 * LAM * st.w @ st.w + st.ell
    assert D <= Dstar + 1e-12
    assert st.m == 6 and n == 5  # one constraint per iteration, none removed
    # the working set's Gram matrix is kept exactly
    np.testing.assert_allclose(st.gram, st.psi @ st.psi.T, atol=1e-12)


def test_cutting_plane_dual_increases_and_gap_bounds_suboptimality(toy):
    model, X, Y, Dstar, _ = toy
    svm = fit(model, X, Y, CuttingPlane(inactive_after=0), passes=40, tol=1e-10)
    tr = svm.trace_
    assert np.all(np.diff(tr["dual"]) >= -1e-10)  # the working set only grows: the master optimum rises
    assert np.all(tr["gap"] >= tr["primal"] - Dstar - 1e-10)
    assert np.all(tr["dual"] <= Dstar + 1e-10)


def test_cutting_plane_removes_inactive_constraints_and_keeps_its_cap(toy):
    model, X, Y, Dstar, _ = toy
    svm = fit(model, X, Y, CuttingPlane(inactive_after=2), passes=300, tol=1e-9)
    assert svm.stopped_ == "tol"
    tr = svm.trace_
    assert tr["n_constraints"].max() < tr["engine_passes"].max()  # some were removed
    assert primal(model, X, Y, LAM, svm.coef_) - Dstar < 1e-8
    # a cap below the d + 1 = 4 constraints the optimum needs: merging keeps the dual rising
    capped = fit(model, X, Y, CuttingPlane(max_constraints=3, inactive_after=0), passes=200, tol=1e-9)
    tr = capped.trace_
    assert tr["n_constraints"].max() <= 3
    assert np.all(np.diff(tr["dual"]) >= -1e-12)
    assert Dstar - tr["dual"][-1] < 1e-4 and tr["gap"][-1] < 1e-2 * tr["gap"][0]
    roomy = fit(model, X, Y, CuttingPlane(max_constraints=4, inactive_after=0), passes=200, tol=1e-6)
    assert roomy.stopped_ == "tol" and roomy.trace_["n_constraints"].max() <= 4


def test_cutting_plane_with_positivity_reaches_the_constrained_optimum():
    from test_positivity import constrained_optimum

    model, X, Y = make_toy(n=5, m=4, d=4, seed=3)
    _, w_free = exact_optimum(model, X, Y, LAM)
    S = np.flatnonzero(w_free < -1e-3)[:2]
    assert len(S) >= 1
    model.nonnegative_indices = S
    P_star, w_star = constrained_optimum(model, X, Y, LAM, S)
    for qp_solver in ("daqp", "cvxopt"):
        svm = fit(model, X, Y, CuttingPlane(qp_solver=qp_solver), passes=300, tol=1e-9)
        assert svm.stopped_ == "tol"
        assert np.all(svm.coef_[S] >= 0.0)
        sub = primal(model, X, Y, LAM, svm.coef_) - P_star
        assert -1e-9 < sub < 1e-7
        np.testing.assert_allclose(svm.coef_, w_star, atol=1e-4)
        assert np.all(svm.trace_["gap"] >= svm.trace_["primal"] - P_star - 1e-10)


def test_cutting_plane_by_name_and_lam_change_keeps_beta(toy):
    model, X, Y, _, _ = toy
    assert isinstance(make_solver("cutting-plane"), CuttingPlane)
    svm = fit(model, X, Y, "cutting-plane", passes=5, tol=None, warm_start=True)
    beta = svm.state_.beta.copy()
    psi = svm.state_.psi.copy()
    svm.set_params(lam=2 * LAM, max_passes=1)
    svm.fit(X, Y)
    D2, _ = exact_optimum(model, X, Y, 2 * LAM)
    assert svm.trace_["dual"][0] <= D2 + 1e-12
    # the first checkpoint after the change is at the same alpha: w = Psi^T beta / lam_new
    w = beta @ psi / (2 * LAM)
    L = svm.trace_["dual"][0] + 0.5 * 2 * LAM * w @ w
    assert L == pytest.approx(float(beta @ fit(model, X, Y, "cutting-plane", passes=5, tol=None).state_.loss),
                              abs=1e-12)


# ============================================================ online EG
def test_online_eg_approaches_the_exact_qp_optimum(toy):
    """EG's iterates stay interior (alpha > 0): the optimum, on the boundary, is reached only in the
    limit, slowly where a block saturated early on a wrong labelling (BCFW paper, App. F, footnote 9)."""
    model, X, Y, Dstar, wstar = toy
    P0 = primal(model, X, Y, LAM, np.zeros(3))
    svm = fit(model, X, Y, OnlineEG(eta=0.3), passes=3000, tol=None, check_every=100)
    P = primal(model, X, Y, LAM, svm.coef_)
    assert 0 <= P - Dstar < 2e-4
    assert P - Dstar < 1e-3 * (P0 - Dstar)
    assert svm.gap_ >= P - Dstar - 1e-12
    np.testing.assert_allclose(svm.coef_, wstar, atol=1e-2)
    tr = svm.trace_
    assert tr["gap"][-1] < 1e-4 * tr["gap"][0]


def test_online_eg_block_parts_are_the_expectations_of_alpha(toy):
    """w_i = (phi(x_i, y_i) - E[phi]) / (lam n), l_i = E[L]/n with alpha_i ∝ exp(c_i L + <v_i, phi>)."""
    model, X, Y, Dstar, _ = toy
    svm = fit(model, X, Y, OnlineEG(eta=4.0), passes=7, tol=None)
    st = svm.state_
    n = len(X)
    for i in range(n):
        E_phi, E_loss, _ = model.expectation(X[i], Y[i], st.V[i], st.c[i])
        np.testing.assert_allclose(st.wi[i], (model.joint_feature(X[i], Y[i]) - E_phi) / (LAM * n), atol=1e-12)
        assert st.li[i] == pytest.approx(E_loss / n, abs=1e-14)
    np.testing.assert_allclose(st.w, st.wi.sum(axis=0), atol=1e-12)
    assert st.ell == pytest.approx(st.li.sum(), abs=1e-12)
    assert st.rejected > 0 and np.any(st.eta < 4.0)  # a large start step gets halved somewhere
    tr = svm.trace_
    assert np.all(np.diff(tr["dual"]) >= -1e-12)  # only improving updates are accepted
    assert np.all(tr["gap"] >= tr["primal"] - Dstar - 1e-10)
    assert np.all(tr["dual"] <= Dstar + 1e-10)


def test_online_eg_needs_the_expectation_oracle():
    model, X, Y = make_toy()
    with pytest.raises(ValueError, match="expectation oracle"):
        fit(model, X, Y, "online-eg", passes=1)
    assert isinstance(make_solver("online-eg"), OnlineEG)


def test_online_eg_with_positivity_stays_feasible_and_bounds_the_gap():
    from test_positivity import constrained_optimum

    model, X, Y = eg_toy(n=5, m=4, d=4, seed=3)
    _, w_free = exact_optimum(model, X, Y, LAM)
    S = np.flatnonzero(w_free < -1e-3)[:2]
    model.nonnegative_indices = S
    P_star, _ = constrained_optimum(model, X, Y, LAM, S)
    svm = fit(model, X, Y, OnlineEG(), passes=400, tol=None, check_every=20)
    assert np.all(svm.coef_[S] >= 0.0)
    tr = svm.trace_
    assert np.all(tr["gap"] >= tr["primal"] - P_star - 1e-10)
    assert tr["primal"][-1] - P_star < 1e-2 * (tr["primal"][0] - P_star)


# ============================================================ shared contract
TOY_SOLVERS = {
    "cutting-plane": lambda: CuttingPlane(inactive_after=2),
    "cutting-plane-capped": lambda: CuttingPlane(max_constraints=3, inactive_after=0),
    "online-eg": lambda: OnlineEG(eta=2.0),
    "online-eg-uniform": lambda: OnlineEG(sampling="uniform"),
}


@pytest.mark.parametrize("name", sorted(TOY_SOLVERS))
def test_warm_start_continues_the_run_exactly_on_the_toy(name, toy):
    model, X, Y, _, _ = toy
    once = fit(model, X, Y, TOY_SOLVERS[name](), passes=6, tol=None, seed=3)
    split = fit(model, X, Y, TOY_SOLVERS[name](), passes=3, tol=None, seed=3, warm_start=True)
    split.fit(X, Y)
    np.testing.assert_allclose(split.coef_, once.coef_, rtol=1e-12, atol=1e-14)
    assert split.primal_ == pytest.approx(once.primal_, rel=1e-12)


@pytest.mark.parametrize("cls, kw, match", [
    (CuttingPlane, dict(qp_solver="gurobi"), "qp_solver must be one of"),
    (CuttingPlane, dict(inactive_after=-1), "inactive_after must be an integer >= 0"),
    (CuttingPlane, dict(inactive_after=2.5), "inactive_after must be an integer"),
    (CuttingPlane, dict(max_constraints=1), "max_constraints must be an integer >= 2"),
    (OnlineEG, dict(eta=0.0), "eta must be a number > 0"),
    (OnlineEG, dict(eta=float("inf")), "eta must be a finite number"),
    (OnlineEG, dict(sampling="gap"), "sampling must be one of"),
])
def test_bad_options_name_the_option(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls(**kw)
    with pytest.raises(ValueError, match=match):
        cls().set_params(**kw)


def test_options_clone_and_leave_no_run_data(toy):
    model, X, Y, _, _ = toy
    for s in (CuttingPlane(qp_solver="cvxopt", inactive_after=3), OnlineEG(eta=0.5, sampling="uniform")):
        c = clone(s)
        assert c.get_params() == s.get_params() and c is not s
        before = dict(vars(s))
        fit(model, X, Y, s, passes=2, tol=None)
        assert vars(s) == before


def test_a_missing_qp_library_is_a_clear_error(toy, monkeypatch):
    import structfw.solvers.cutting_plane as cp

    model, X, Y, _, _ = toy
    monkeypatch.setitem(cp._PACKAGES, "proxsuite", "structfw_no_such_package")
    with pytest.raises(ValueError, match="qp_solver='proxsuite' needs the package"):
        fit(model, X, Y, CuttingPlane(qp_solver="proxsuite"), passes=1)


def test_time_budget_ends_the_fit(toy):
    model, X, Y, _, _ = toy
    for s in (CuttingPlane(), OnlineEG()):
        svm = fit(model, X, Y, s, passes=10 ** 7, tol=0.0, time_budget=0.3)
        assert svm.stopped_ == "time_budget"
        assert svm.trace_.last("time_s") < 5.0


# ============================================================ OCR (the BCFW paper's App. F)
class ChainEGModel(sf.models.ChainModel):
    """ChainModel with the expectation oracle by forward-backward in the log domain.

    Used when ChainModel itself has no ``expectation`` (it is being added separately):
    theta(y) = c/L sum_t [y_t != y_true_t] + sum_t <v_unary[y_t], x_t> + sum_t v_trans[y_t, y_t+1]."""

    def expectation(self, x, y_true, v, c):
        S, F = self.n_states, self.n_features
        x = np.asarray(x.toarray() if hasattr(x, "toarray") else x, dtype=np.float64)
        L = x.shape[0]
        T = np.asarray(v[S * F:]).reshape(S, S)
        U = x @ np.asarray(v[:S * F]).reshape(S, F).T + c / L
        U[np.arange(L), y_true] -= c / L  # the loss term is 0 at the true label
        fwd = np.empty((L, S))
        bwd = np.zeros((L, S))
        fwd[0] = U[0]
        for t in range(1, L):
            fwd[t] = U[t] + _logsumexp(fwd[t - 1][:, None] + T, 0)
        for t in range(L - 2, -1, -1):
            bwd[t] = _logsumexp(T + (U[t + 1] + bwd[t + 1])[None, :], 1)
        logZ = float(_logsumexp(fwd[-1], 0))
        mu = np.exp(fwd + bwd - logZ)
        # pairwise marginals of all L-1 edges at once
        pair = np.exp(fwd[:-1, :, None] + T[None] + (U[1:] + bwd[1:])[:, None, :] - logZ).sum(axis=0)
        E_phi = np.concatenate([(mu.T @ x).ravel(), pair.ravel()])
        E_loss = float(np.mean(1.0 - mu[np.arange(L), y_true]))
        return E_phi, E_loss, logZ


def _logsumexp(a, axis):
    top = a.max(axis=axis)
    return top + np.log(np.exp(a - np.expand_dims(top, axis)).sum(axis=axis))


def ocr_eg_model():
    from structfw.solvers.online_eg import has_expectation

    model = sf.models.ChainModel(26, 128)
    return model if has_expectation(model) else ChainEGModel(26, 128)


def test_chain_expectation_against_enumeration():
    """The forward-backward of the OCR test against brute force on a chain of length 3 with 3 states."""
    import itertools

    rng = np.random.default_rng(0)
    model = ChainEGModel(3, 2)
    x = rng.normal(size=(3, 2))
    y_true = np.array([0, 2, 1])
    v = rng.normal(size=model.size_joint_feature)
    c = 0.7
    ys = [np.array(y) for y in itertools.product(range(3), repeat=3)]
    phis = np.array([model.joint_feature(x, y).toarray() for y in ys])
    losses = np.array([model.loss(y_true, y) for y in ys])
    theta = c * losses + phis @ v
    p = np.exp(theta - theta.max())
    p /= p.sum()
    E_phi, E_loss, logZ = model.expectation(x, y_true, v, c)
    np.testing.assert_allclose(E_phi, p @ phis, atol=1e-12)
    assert E_loss == pytest.approx(p @ losses, abs=1e-12)
    assert logZ == pytest.approx(theta.max() + np.log(np.exp(theta - theta.max()).sum()), abs=1e-12)


@pytest.fixture(scope="module")
def ocr60():
    X, Y = sf.datasets.load_ocr("train")
    return X[:60], Y[:60]


OCR_SOLVERS = {
    "cutting-plane": lambda: CuttingPlane(inactive_after=3),
    "online-eg": lambda: OnlineEG(eta=0.1, init_c=-50.0),
}


def _ocr_svm(solver, passes, **kw):
    return sf.StructuredSVM(ocr_eg_model(), solver=solver, lam=0.01, max_passes=passes, tol=None, random_state=7,
                            **kw)


@pytest.mark.parametrize("name", sorted(OCR_SOLVERS))
def test_warm_start_continues_the_run_exactly_on_ocr(name, ocr60):
    X, Y = ocr60
    once = _ocr_svm(OCR_SOLVERS[name](), 6).fit(X, Y)
    split = _ocr_svm(OCR_SOLVERS[name](), 3, warm_start=True).fit(X, Y)
    split.fit(X, Y)
    np.testing.assert_allclose(split.coef_, once.coef_, rtol=1e-10, atol=1e-12)
    assert split.primal_ == pytest.approx(once.primal_, rel=1e-10)
    assert split.n_iter_ == 6 and once.n_iter_ == 6  # a continued run counts on


@pytest.mark.parametrize("name", sorted(OCR_SOLVERS))
def test_ctrl_c_at_random_moments_ends_interrupted_with_a_usable_estimator(name, ocr60):
    X, Y = ocr60

    def check_state(st):
        if hasattr(st, "wi"):
            np.testing.assert_allclose(st.w, st.wi.sum(axis=0), atol=1e-10)
        else:
            np.testing.assert_allclose(st.w, st.beta @ st.psi / 0.01, atol=1e-10)

    check_interrupted_fits(lambda passes: _ocr_svm(OCR_SOLVERS[name](), passes), X, Y,
                           np.random.default_rng(sum(map(ord, name))), 3, check_state)


@pytest.mark.slow
def test_ocr_online_eg_is_substantially_worse_and_cutting_plane_behind_bcfw():
    """BCFW paper, Fig. 1(a) and App. F, at lam = 0.01 on (a subset of) OCR: after the same number
    of passes online-EG has a much higher primal than BCFW, and the batch cutting-plane method
    trails BCFW in the first passes (one oracle pass gives it one constraint; BCFW takes n steps)."""
    X, Y = sf.datasets.load_ocr("train")
    X, Y = X[:1000], Y[:1000]
    passes = 8
    t0 = time.perf_counter()
    runs = {}
    for name, solver in [("bcfw", BCFW()), ("cutting-plane", CuttingPlane()),
                         ("online-eg", OnlineEG(init_c=-50.0))]:
        svm = sf.StructuredSVM(ocr_eg_model(), solver=solver, lam=0.01, max_passes=passes, tol=None,
                               random_state=0).fit(X, Y)
        runs[name] = svm.trace_
    bcfw, cp, eg = (runs[k]["primal"] for k in ("bcfw", "cutting-plane", "online-eg"))
    assert np.all(eg[1:] > 2.0 * bcfw[1:])  # online-EG: several times BCFW's primal at every pass
    assert np.all(cp[1:] > bcfw[1:])        # cutting plane behind BCFW at every early pass
    # every dual bound is honest: BCFW's final primal is above each solver's dual
    for tr in runs.values():
        assert np.all(tr["dual"] <= bcfw[-1] + 1e-9)
    assert time.perf_counter() - t0 < 60
