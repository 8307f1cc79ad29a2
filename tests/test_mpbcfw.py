"""Multi-plane BCFW (Shah, Kolmogorov, Lampert 2015) as an option of the engine."""
import numpy as np
import pytest

import structfw as sf
from structfw.solvers import BCFW, MPBCFW
from toy import exact_optimum, make_toy, primal

LAM = 0.05


@pytest.fixture(scope="module")
def toy():
    model, X, Y = make_toy(n=6, m=5, d=4, seed=11)
    D_star, w_star = exact_optimum(model, X, Y, LAM)
    return model, X, Y, D_star, w_star


@pytest.mark.parametrize("kw", [
    dict(), dict(step="pairwise"), dict(step="away"), dict(sampling="gap", gap_refresh=2),
    dict(step="pairwise", approx_rule="work", max_planes=2, plane_timeout=1),
    dict(step="away", sampling="perm", max_approx_passes=3),
    dict(block_storage="sparse", step="pairwise"),
])
def test_reaches_the_exact_qp_optimum(toy, kw):
    model, X, Y, D_star, w_star = toy
    # the deterministic rule: with approx_rule="time" the number of approximate passes depends on the
    # machine's load (test_the_time_rule_reaches_the_optimum covers it)
    svm = sf.StructuredSVM(model, solver=MPBCFW(**{"approx_rule": "work", **kw}), lam=LAM, max_passes=400,
                           tol=1e-9, random_state=0)
    svm.fit(X, Y)
    sub = primal(model, X, Y, LAM, svm.coef_) - D_star
    assert svm.gap_ >= sub - 1e-12
    assert np.all(svm.trace_["planes_per_block"] <= kw.get("max_planes", 1000) + 1)
    if kw.get("step", "fw") == "fw":
        # FW steps converge at the O(1/k) rate on this toy (plain BCFW: 1.3e-3 after 400 passes)
        plain = sf.StructuredSVM(model, solver=BCFW(**{k: v for k, v in kw.items() if k in ("sampling", "gap_refresh")}),
                                 lam=LAM, max_passes=400, tol=1e-9, random_state=0).fit(X, Y)
        assert sub < 1e-3 and sub < primal(model, X, Y, LAM, plain.coef_) - D_star
    else:
        assert sub < 1e-7 and svm.stopped_ == "tol"


@pytest.mark.parametrize("step", ["pairwise", "away"])
def test_the_time_rule_reaches_the_optimum(toy, step):
    model, X, Y, D_star, _ = toy
    svm = sf.StructuredSVM(model, solver=MPBCFW(step=step, approx_rule="time"), lam=LAM, max_passes=400, tol=1e-9,
                           random_state=0).fit(X, Y)
    assert primal(model, X, Y, LAM, svm.coef_) - D_star < 1e-7


def test_averaged_mp_bcfw_interpolates_the_two_averages(toy):
    model, X, Y, D_star, _ = toy
    svm = sf.StructuredSVM(model, solver=MPBCFW(averaging="weighted", approx_rule="work"), lam=LAM, max_passes=300,
                           tol=None,
                           check_every=50, random_state=0).fit(X, Y)
    tr = svm.trace_
    # the reported gap is P - D of the interpolated average: a true gap, and it shrinks
    assert np.all(tr["gap"] >= -1e-12)
    assert tr["gap"][-1] < 5e-3 and tr["gap"][-1] < tr["gap"][0] / 100
    assert primal(model, X, Y, LAM, svm.coef_) - D_star <= tr["gap"][-1] + 1e-12
    st = svm.state_
    w_rep, lbar = st.averaged(svm.solver and sf.solvers.Problem(model, X, Y, LAM))
    d1 = -0.5 * LAM * st.avg.wbar(st.v) @ st.avg.wbar(st.v) + st.avg.lbar
    d2 = -0.5 * LAM * st.avg2.wbar(st.v) @ st.avg2.wbar(st.v) + st.avg2.lbar
    assert -0.5 * LAM * w_rep @ w_rep + lbar >= max(d1, d2) - 1e-12


def test_with_positivity_constraints(toy):
    model, X, Y, _, w_free = toy
    import copy

    from test_positivity import constrained_optimum

    model = copy.deepcopy(model)
    S = np.flatnonzero(w_free < 0)[:1]
    model.nonnegative_indices = S
    P_star, _ = constrained_optimum(model, X, Y, LAM, S)
    svm = sf.StructuredSVM(model, solver=MPBCFW(step="away", approx_rule="work"), lam=LAM, max_passes=400, tol=1e-9,
                           random_state=0).fit(X, Y)
    assert np.all(svm.coef_[S] >= 0)
    assert primal(model, X, Y, LAM, svm.coef_) - P_star < 1e-7


@pytest.fixture(scope="module")
def ocr80():
    X, Y = sf.datasets.load_ocr("train")
    return X[:80], Y[:80]


class _PythonOracleChain(sf.models.ChainModel):
    def compiled_oracle(self, X, Y):
        return None


@pytest.mark.parametrize("kw", [dict(), dict(step="pairwise", averaging="weighted"),
                                dict(step="away", sampling="gap", gap_refresh=2, max_planes=3, plane_timeout=2)])
def test_compiled_and_python_parts_agree(ocr80, kw):
    X, Y = ocr80
    runs = [sf.StructuredSVM(model, solver=MPBCFW(approx_rule="work", **kw), lam=0.01, max_passes=4, tol=None,
                             random_state=1).fit(X, Y)
            for model in (sf.models.ChainModel(26, 128), _PythonOracleChain(26, 128))]
    np.testing.assert_allclose(runs[0].coef_, runs[1].coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(runs[0].trace_["approx_passes"], runs[1].trace_["approx_passes"])
    np.testing.assert_array_equal(runs[0].trace_["planes_per_block"], runs[1].trace_["planes_per_block"])


def test_warm_start_resumes_exactly(ocr80):
    X, Y = ocr80
    kw = dict(lam=0.01, tol=None, random_state=3)
    solver = dict(step="pairwise", averaging="weighted", approx_rule="work", sampling="gap", gap_refresh=2)
    once = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=MPBCFW(**solver), max_passes=6, **kw).fit(X, Y)
    split = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=MPBCFW(**solver), max_passes=3,
                             warm_start=True, **kw).fit(X, Y)
    split.fit(X, Y)
    np.testing.assert_allclose(split.coef_, once.coef_, rtol=1e-10, atol=1e-12)


def test_fewer_oracle_calls_than_bcfw_for_the_same_gap(ocr80):
    X, Y = ocr80
    kw = dict(lam=1 / 80, tol=None, random_state=0)
    bcfw = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=BCFW(), max_passes=30, **kw).fit(X, Y)
    mp = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=MPBCFW(approx_rule="work"), max_passes=12,
                          **kw).fit(X, Y)
    # MP-BCFW after 12 oracle passes is ahead of BCFW after 30 (the primal: FW gaps fluctuate)
    assert mp.primal_ < bcfw.primal_
    assert mp.trace_["oracle_calls"][-1] <= 0.4 * bcfw.trace_["oracle_calls"][-1]


def test_options():
    with pytest.raises(ValueError, match="two caches"):
        MPBCFW(cache=True)
    with pytest.raises(ValueError, match="max_planes must be an integer >= 1"):
        MPBCFW(max_planes=0)
    with pytest.raises(ValueError, match="approx_rule must be one of"):
        MPBCFW(approx_rule="never")
    assert MPBCFW().multi_plane and not BCFW().multi_plane
    assert MPBCFW(averaging="weighted", step="pairwise").label == "MP-BCPFW-wavg"
    assert MPBCFW.param_table()["multi_plane"].default is True
    assert sf.StructuredSVM(sf.models.ChainModel(2, 2), solver="mpbcfw").solver == "mpbcfw"
