"""Minibatch BCFW (Wang et al. 2016): tau oracles at once on the executor's workers, then tau steps."""
import numpy as np
import pytest

import structfw as sf
from structfw.executor import ThreadExecutor, get_executor
from structfw.solvers import BCFW, MPBCFW
from toy import exact_optimum, make_toy, primal

LAM = 0.05


@pytest.fixture(scope="module")
def toy():
    model, X, Y = make_toy(n=7, m=4, d=3, seed=5)
    return model, X, Y, exact_optimum(model, X, Y, LAM)[0]


@pytest.mark.parametrize("kw", [dict(step="pairwise"), dict(step="away", sampling="gap", gap_refresh=2),
                                dict(step="pairwise", cache=True, sampling="gap"),
                                dict(step="pairwise", multi_plane=True, approx_rule="work")])
@pytest.mark.parametrize("tau", [2, 5])
def test_reaches_the_exact_qp_optimum(toy, kw, tau):
    model, X, Y, D_star = toy
    svm = sf.StructuredSVM(model, solver=BCFW(minibatch=tau, **kw), lam=LAM, max_passes=800, tol=1e-9,
                           random_state=0).fit(X, Y)
    assert primal(model, X, Y, LAM, svm.coef_) - D_star < 1e-7
    assert svm.gap_ >= -1e-12


@pytest.fixture(scope="module")
def ocr60():
    X, Y = sf.datasets.load_ocr("train")
    return X[:60], Y[:60]


@pytest.mark.parametrize("n_jobs, executor", [(2, "thread"), (2, "process")])
def test_workers_give_the_serial_iterates(ocr60, n_jobs, executor):
    X, Y = ocr60
    runs = [sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=BCFW(minibatch=8, step="pairwise", cache=True),
                             lam=0.01, max_passes=3, tol=None, random_state=1, n_jobs=j, executor=executor).fit(X, Y)
            for j in (None, n_jobs)]
    np.testing.assert_array_equal(runs[0].coef_, runs[1].coef_)
    np.testing.assert_array_equal(runs[0].trace_["oracle_calls"], runs[1].trace_["oracle_calls"])


def test_minibatch_runs_the_python_parts_and_counts_every_call(ocr60):
    X, Y = ocr60
    one = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=BCFW(), lam=0.01, max_passes=3, tol=None,
                           random_state=2).fit(X, Y)
    tau = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=BCFW(minibatch=6), lam=0.01, max_passes=3,
                           tol=None, random_state=2).fit(X, Y)
    assert tau.trace_["oracle_calls"][-1] == one.trace_["oracle_calls"][-1] == 3 * 60
    # stale corners cost some progress per oracle call, not much at tau = 6 of n = 60
    assert tau.primal_ < 1.5 * one.primal_


def test_warm_start_resumes_exactly_with_minibatches(ocr60):
    X, Y = ocr60
    mk = lambda passes, **kw: sf.StructuredSVM(sf.models.ChainModel(26, 128),  # noqa: E731
                                               solver=MPBCFW(minibatch=4, approx_rule="work"), lam=0.01,
                                               max_passes=passes, tol=None, random_state=3, **kw)
    once = mk(4).fit(X, Y)
    split = mk(2, warm_start=True).fit(X, Y)
    split.fit(X, Y)
    np.testing.assert_allclose(split.coef_, once.coef_, rtol=1e-10, atol=1e-12)


def test_executors_and_options():
    assert isinstance(get_executor(2, "thread"), ThreadExecutor)
    with pytest.raises(ValueError, match="executor must be one of"):
        get_executor(2, "dask")
    with pytest.raises(ValueError, match="minibatch must be an integer >= 1"):
        BCFW(minibatch=0)
