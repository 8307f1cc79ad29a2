"""Solvers against the exact optimum of the dual QP, gap identities, engine invariants."""
import numpy as np
import pytest

import structfw as sf
from structfw.solvers import BCFW, FW, SSG, Monitor, Problem, StopRule
from toy import exact_dual_from_alpha
from structfw.solvers.parts import GapCache, PairwiseStep
from structfw.solvers.sampling import BlockSampler
from toy import exact_optimum, make_toy, primal

LAM = 0.1


@pytest.fixture(scope="module")
def toy():
    model, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    Dstar, wstar = exact_optimum(model, X, Y, LAM)
    return model, X, Y, Dstar, wstar


def fit(model, X, Y, solver, passes, tol=1e-10, check_every=1, lam=LAM, seed=0):
    svm = sf.StructuredSVM(model, solver=solver, lam=lam, max_passes=passes, tol=tol,
                           check_every=check_every, random_state=seed)
    return svm.fit(X, Y)


LINESEARCH_VARIANTS = [
    BCFW(),
    BCFW(sampling="perm"),
    BCFW(averaging="suffix"),
    BCFW(step="pairwise"),
    BCFW(step="away"),
    BCFW(step="pairwise", sampling="gap", gap_refresh=2),
    BCFW(step="away", sampling="max_gap", gap_refresh=2),
    BCFW(step="fw", cache=True, sampling="gap", gap_refresh=3),
    BCFW(step="pairwise", cache=True, cache_size=2),
    BCFW(step="away", cache=True),
    BCFW(block_storage="sparse"),
    BCFW(block_storage="sparse", step="pairwise", cache=True),
]


@pytest.mark.parametrize("solver", LINESEARCH_VARIANTS, ids=lambda s: s.label + "-" + s.block_storage)
def test_linesearch_variants_reach_exact_qp_optimum(toy, solver):
    model, X, Y, Dstar, wstar = toy
    svm = fit(model, X, Y, solver, passes=3000, tol=1e-9)
    assert svm.stopped_ == "tol"
    P = primal(model, X, Y, LAM, svm.coef_)
    assert P - Dstar < 1e-7
    assert svm.gap_ >= -1e-12
    np.testing.assert_allclose(svm.coef_, wstar, atol=1e-4)


@pytest.mark.parametrize("solver", [BCFW(step_size="predefined"), BCFW(averaging="weighted"),
                                    BCFW(step_size="predefined", averaging="weighted"),
                                    BCFW(step_size="predefined", averaging="suffix"),
                                    FW(), FW(step_size="predefined")],
                         ids=lambda s: s.label)
def test_sublinear_variants_approach_exact_optimum(toy, solver):
    """O(1/k) methods: close to P* after many passes, and much closer than at the start."""
    model, X, Y, Dstar, wstar = toy
    svm = fit(model, X, Y, solver, passes=2000, tol=None, check_every=100)
    P = primal(model, X, Y, LAM, svm.coef_)
    P0 = primal(model, X, Y, LAM, np.zeros(model.size_joint_feature))
    assert P - Dstar < 5e-3
    assert P - Dstar < 1e-2 * (P0 - Dstar)
    if solver.has_dual:
        # the reported gap bounds the true suboptimality
        assert svm.gap_ >= P - Dstar - 1e-9


@pytest.mark.parametrize("averaging", ["weighted", "suffix", "uniform"])
def test_ssg_averaged_approaches_exact_optimum(averaging):
    """SSG's rate is O(1/(lam k)): use a stronger lam so that a test can see convergence."""
    lam = 1.0
    model, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    Dstar, _ = exact_optimum(model, X, Y, lam)
    svm = fit(model, X, Y, SSG(averaging=averaging), passes=2000, tol=None, check_every=500, lam=lam)
    P = primal(model, X, Y, lam, svm.coef_)
    P0 = primal(model, X, Y, lam, np.zeros(model.size_joint_feature))
    assert 0 <= P - Dstar + 1e-12
    assert P - Dstar < 1e-2 * (P0 - Dstar)
    assert np.isnan(svm.trace_["dual"]).all()


def test_block_gaps_sum_to_primal_minus_dual_computed_separately(toy):
    model, X, Y, Dstar, wstar = toy
    svm = fit(model, X, Y, BCFW(step="pairwise"), passes=3, tol=None)
    problem = Problem(model, X, Y, LAM)
    st = svm.state_
    primal_pass, gaps, _ = BCFW().gap_pass(problem, st)
    D_alpha, w_alpha, _ = exact_dual_from_alpha(problem, st)
    P = primal(model, X, Y, LAM, st.w)
    np.testing.assert_allclose(w_alpha, st.w, atol=1e-12)
    assert gaps.sum() == pytest.approx(P - D_alpha, abs=1e-10)
    assert primal_pass == pytest.approx(P, abs=1e-12)
    assert np.all(gaps >= -1e-12)


@pytest.mark.parametrize("step", ["pairwise", "away"])
@pytest.mark.parametrize("cache", [False, True])
def test_active_set_invariants(toy, step, cache):
    model, X, Y, _, _ = toy
    svm = fit(model, X, Y, BCFW(step=step, cache=cache, cache_size=3), passes=7, tol=None)
    st = svm.state_
    n = len(X)
    for i, cs in enumerate(st.corners):
        alpha = np.array(cs.alpha)
        assert np.all(alpha >= 0)
        assert alpha.sum() == pytest.approx(1.0, abs=1e-12)
        wi = sum(a * p.toarray() for a, p in zip(cs.alpha, cs.psi)) / (LAM * n)
        np.testing.assert_allclose(st.wi[i], wi, atol=1e-12)
        assert st.li[i] == pytest.approx(sum(a * L for a, L in zip(cs.alpha, cs.loss)) / n, abs=1e-12)
        if cache:
            assert len(cs) <= max(3, len(cs.active()))
    np.testing.assert_allclose(st.w, st.wi.sum(axis=0), atol=1e-12)


def test_gap_sampling_draws_in_proportion_to_the_estimates():
    rng = np.random.default_rng(0)
    s = BlockSampler("gap", 6, rng)
    gaps = np.array([0.0, 1.0, 2.0, 3.0, 0.5, 3.5])
    s.set_all(gaps)
    s.update(0, 1.0)  # incremental update keeps the tree consistent
    expected = np.array([1.0, 1.0, 2.0, 3.0, 0.5, 3.5])
    s.start_pass()
    draws = np.bincount([s.next() for _ in range(40000)], minlength=6)
    np.testing.assert_allclose(draws / draws.sum(), expected / expected.sum(), atol=0.01)
    m = BlockSampler("max_gap", 6, rng)
    m.set_all(gaps)
    assert m.next() == 5
    s.set_all(np.zeros(6))
    assert 0 <= s.next() < 6  # all-zero estimates fall back to uniform


def test_gap_sampling_with_exact_gaps_samples_blocks_with_gap(toy):
    """With refreshes every pass the estimates are the exact block gaps of the last pass."""
    model, X, Y, _, _ = toy
    problem = Problem(model, X, Y, LAM)
    solver = BCFW(sampling="gap", gap_refresh=1)
    stop = StopRule(max_passes=3, tol=None)
    mon = Monitor(problem, stop, {})
    res = solver.solve(problem, stop, rng=0, monitor=mon)
    _, gaps, _ = solver.gap_pass(problem, res.state)
    assert res.trace["gap"][-1] == pytest.approx(gaps.sum(), abs=1e-12)


def test_cache_hits_never_increase_the_objective_and_are_counted(toy, monkeypatch):
    model, X, Y, _, _ = toy
    problem = Problem(model, X, Y, LAM)
    solver = BCFW(cache=True, step="pairwise", cache_F=0.01, cache_nu=0.001)
    seen = []  # was the corner of each iteration a cache hit?
    orig = GapCache.fw_corner

    def spy(self, ctx, i):
        out = orig(self, ctx, i)
        seen.append(out[4])
        return out

    monkeypatch.setattr(GapCache, "fw_corner", spy)
    orig_step = PairwiseStep.move
    deltas = []

    def step_spy(self, ctx, *a, **k):
        st = ctx.st
        before = 0.5 * ctx.lam * st.w @ st.w - st.ell
        out = orig_step(self, ctx, *a, **k)
        after = 0.5 * ctx.lam * st.w @ st.w - st.ell
        deltas.append((seen[-1], after - before))
        return out

    monkeypatch.setattr(PairwiseStep, "move", step_spy)
    stop = StopRule(max_passes=30, tol=None)
    res = solver.solve(problem, stop, rng=0, monitor=Monitor(problem, stop, {}))
    hits = [dlt for hit, dlt in deltas if hit]
    assert len(hits) > 0
    assert max(hits) <= 1e-12
    assert res.trace["cache_hits"][-1] == len(hits)
    # fewer oracle calls than block iterations
    assert res.trace["oracle_calls"][-1] < res.trace["iterations"][-1]


def test_warm_start_with_new_lam_continues_from_rescaled_state(toy):
    model, X, Y, _, _ = toy
    svm = sf.StructuredSVM(model, solver=BCFW(step="pairwise"), lam=LAM, max_passes=500, tol=1e-8,
                           random_state=0, warm_start=True)
    svm.fit(X, Y)
    cold_passes = svm.n_iter_
    svm.set_params(lam=LAM * 0.8)
    svm.fit(X, Y)
    D2, w2 = exact_optimum(model, X, Y, LAM * 0.8)
    assert primal(model, X, Y, LAM * 0.8, svm.coef_) - D2 < 1e-7
    cold = sf.StructuredSVM(model, solver=BCFW(step="pairwise"), lam=LAM * 0.8, max_passes=500, tol=1e-8,
                            random_state=0).fit(X, Y)
    # the warm start begins much closer to the optimum than w = 0 and needs fewer passes
    assert svm.trace_["gap"][0] < 0.1 * cold.trace_["gap"][0]
    assert svm.n_iter_ - cold_passes < cold.n_iter_   # n_iter_ counts on from the first fit
    assert cold_passes > 0


def test_keep_w_change_lam_follows_proposition_1(toy):
    model, X, Y, _, _ = toy
    problem = Problem(model, X, Y, LAM)
    solver = BCFW(step="pairwise")
    stop = StopRule(max_passes=20, tol=None)
    st = solver.solve(problem, stop, rng=0, monitor=Monitor(problem, stop, {})).state
    _, g_old, _ = solver.gap_pass(problem, st)
    delta = st.delta()
    w_old = st.w.copy()
    rho = 0.7
    st.keep_w_change_lam(LAM * rho)
    p2 = problem.with_lam(LAM * rho)
    _, g_new, _ = solver.gap_pass(p2, st)
    np.testing.assert_array_equal(st.w, w_old)
    assert g_new.sum() == pytest.approx(g_old.sum() + (1 - rho) * delta, abs=1e-10)
    D_alpha, w_alpha, _ = exact_dual_from_alpha(p2, st)
    np.testing.assert_allclose(w_alpha, st.w, atol=1e-12)


# (pairwise + cache is left out: after a pairwise line search the two corners tie
# exactly in H_i, and rounding then breaks the tie differently in the two storages)
@pytest.mark.parametrize("solver_kw", [dict(), dict(step="pairwise"), dict(cache=True), dict(averaging="weighted"),
                                       dict(step="away", sampling="gap")])
def test_sparse_and_dense_block_storage_agree_on_sparse_chain(solver_kw):
    """CoNLL-style sparse features: per-block sparse w_i give the same iterates as dense rows."""
    import scipy.sparse as sp

    from structfw.models import ChainModel

    rng = np.random.default_rng(0)
    S, F = 4, 5000
    X, Y = [], []
    for _ in range(40):
        L = int(rng.integers(2, 6))
        y = rng.integers(0, S, L)
        dense = np.zeros((L, F))
        for l in range(L):
            dense[l, rng.choice(F, 4, replace=False)] = 1.0
            dense[l, y[l] * 10 + rng.integers(0, 10)] = 1.0
        X.append(sp.csr_matrix(dense))
        Y.append(y)
    model = ChainModel(S, F)
    out = {}
    for storage in ("dense", "sparse"):
        svm = fit(model, X, Y, BCFW(block_storage=storage, **solver_kw), passes=4, tol=None, lam=0.01)
        assert svm.state_.dense_blocks == (storage == "dense")
        out[storage] = svm
    np.testing.assert_allclose(out["sparse"].coef_, out["dense"].coef_, atol=1e-10)
    np.testing.assert_allclose(out["sparse"].trace_["gap"], out["dense"].trace_["gap"], atol=1e-10)
