"""The engine's contract: options declared once, exact resume, Ctrl-C at safe points."""

import numpy as np
import pytest
from sklearn.base import clone

import structfw as sf
from structfw.solvers import BCFW, FW, SSG
from structfw.solvers._factored import positions
from interrupts import check_interrupted_fits

SOLVERS = {
    "bcfw": lambda: BCFW(),
    "bcfw-perm-fixed": lambda: BCFW(sampling="perm", step_size="predefined"),
    "bcfw-wavg": lambda: BCFW(averaging="weighted"),
    "bcfw-tavg": lambda: BCFW(averaging="suffix"),
    "bcfw-gap": lambda: BCFW(sampling="gap", gap_refresh=2),
    "bcfw-maxgap": lambda: BCFW(sampling="max_gap", gap_refresh=3),
    "bcfw-cache": lambda: BCFW(cache=True, gap_refresh=2),
    "bcpfw": lambda: BCFW(step="pairwise"),
    "bcafw-fixed": lambda: BCFW(step="away", step_size="predefined"),
    "bcpfw-gap-cache-wavg": lambda: BCFW(step="pairwise", sampling="gap", cache=True, gap_refresh=2,
                                         averaging="weighted"),
    "bcfw-sparse-gap-cache": lambda: BCFW(sampling="gap", cache=True, block_storage="sparse", gap_refresh=2),
    "fw": lambda: FW(),
    "fw-fixed": lambda: FW(step_size="predefined"),
    "ssg": lambda: SSG(),
    "ssg-wavg-perm": lambda: SSG(averaging="weighted", sampling="perm"),
    "ssg-tavg": lambda: SSG(averaging="suffix"),
}


@pytest.fixture(scope="module")
def ocr60():
    X, Y = sf.datasets.load_ocr("train")
    return X[:60], Y[:60]


def _svm(solver, passes, **kw):
    return sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=solver, lam=0.01, max_passes=passes, tol=None,
                            random_state=7, **kw)


# ------------------------------------------------------------ exact resume
@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_warm_start_continues_the_run_exactly(name, ocr60):
    X, Y = ocr60
    once = _svm(SOLVERS[name](), 6).fit(X, Y)
    split = _svm(SOLVERS[name](), 3, warm_start=True).fit(X, Y)
    split.fit(X, Y)
    np.testing.assert_allclose(split.coef_, once.coef_, rtol=1e-10, atol=1e-12)
    assert split.primal_ == pytest.approx(once.primal_, rel=1e-10)


def test_warm_start_in_three_pieces_with_sparse_checkpoints(ocr60):
    X, Y = ocr60
    solver = BCFW(step="pairwise", sampling="gap", cache=True, gap_refresh=3)
    once = _svm(solver, 7, check_every=7).fit(X, Y)
    split = _svm(clone(solver), 2, check_every=5, warm_start=True).fit(X, Y)
    split.set_params(max_passes=4).fit(X, Y)
    split.set_params(max_passes=1).fit(X, Y)
    np.testing.assert_allclose(split.coef_, once.coef_, rtol=1e-10, atol=1e-12)


def test_warm_start_on_other_data_starts_afresh_with_a_warning(ocr60):
    X, Y = ocr60
    svm = _svm(BCFW(), 2, warm_start=True).fit(X, Y)
    with pytest.warns(RuntimeWarning, match="other data"):
        svm.fit(X[:30], Y[:30])
    fresh = _svm(BCFW(), 2).fit(X[:30], Y[:30])
    np.testing.assert_allclose(svm.coef_, fresh.coef_)
    # same sizes, other content
    svm = _svm(BCFW(), 2, warm_start=True).fit(X[:30], Y[:30])
    with pytest.warns(RuntimeWarning, match="other data"):
        svm.fit(X[30:60], Y[30:60])


def test_warm_start_after_a_change_of_solver_warns(ocr60):
    X, Y = ocr60
    svm = _svm(BCFW(), 2, warm_start=True).fit(X, Y)
    svm.set_params(solver=FW())
    with pytest.warns(RuntimeWarning, match="solver changed"):
        svm.fit(X, Y)
    svm.set_params(solver=BCFW(step="pairwise"), max_passes=1)
    with pytest.warns(RuntimeWarning, match="active sets|solver changed"):
        svm.fit(X, Y)


# ------------------------------------------------------------ options
def test_options_are_read_from_attributes_and_clone_keeps_them():
    s = BCFW(step="pairwise")
    s.cache = True
    s.sampling = "gap"
    assert s.get_params()["cache"] is True
    assert "cache=True" in repr(s) and "sampling='gap'" in repr(s)
    c = clone(s)
    assert c.get_params() == s.get_params() and c is not s
    s.set_params(cache_F=0.5)
    assert s.cache_F == 0.5 and clone(s).cache_F == 0.5


@pytest.mark.parametrize("cls, kw, match", [
    (BCFW, dict(step="newton"), "step must be one of"),
    (BCFW, dict(cache="yes"), "cache must be True or False"),
    (BCFW, dict(cache_size=1), "cache_size must be an integer >= 2"),
    (BCFW, dict(cache_F=float("nan")), "cache_F must be a finite number"),
    (BCFW, dict(gap_refresh=2.5), "gap_refresh must be an integer"),
    (FW, dict(step_size="armijo"), "step_size must be one of"),
    (SSG, dict(averaging="median"), "averaging must be one of"),
])
def test_bad_options_name_the_option(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls(**kw)
    with pytest.raises(ValueError, match=match):
        cls().set_params(**kw)


def test_options_of_another_solver_are_errors():
    with pytest.raises(ValueError, match="invalid option 'cache' for FW"):
        FW().set_params(cache=True)
    with pytest.raises(TypeError):
        SSG(step="pairwise")


def test_an_assigned_bad_option_is_caught_at_fit(ocr60):
    X, Y = ocr60
    s = BCFW()
    s.step = "sideways"
    with pytest.raises(ValueError, match="step must be one of"):
        _svm(s, 1).fit(X, Y)


def test_solve_leaves_no_run_data_on_the_solver(ocr60):
    X, Y = ocr60
    s = BCFW(cache=True)
    before = dict(vars(s))
    _svm(s, 1).fit(X, Y)
    assert vars(s) == before


def test_nested_solver_options_through_the_estimator(ocr60):
    svm = _svm(BCFW(), 1)
    assert svm.get_params()["solver__sampling"] == "uniform"
    svm.set_params(solver__sampling="gap", solver__step="pairwise")
    assert svm.solver.sampling == "gap" and svm.solver.step == "pairwise"
    c = clone(svm)
    assert c.solver is not svm.solver and c.solver.get_params() == svm.solver.get_params()


# ------------------------------------------------------------ Ctrl-C
INTERRUPTED = ["bcfw", "bcfw-wavg", "bcpfw-gap-cache-wavg", "bcafw-fixed", "fw", "ssg-wavg-perm"]


@pytest.mark.parametrize("name", INTERRUPTED)
def test_ctrl_c_at_random_moments_ends_interrupted_with_a_usable_estimator(name, ocr60):
    X, Y = ocr60

    def check_state(st):
        if getattr(st, "factored", None) is not None:  # label weights that sum to w (raises otherwise)
            st.factored.check_layout(positions(sf.models.ChainModel(26, 128).compiled_oracle(X, Y)), st.w)
        elif hasattr(st, "wi") and isinstance(st.wi, np.ndarray):
            np.testing.assert_allclose(st.w, st.wi.sum(axis=0), atol=1e-10)

    check_interrupted_fits(lambda passes: _svm(SOLVERS[name](), passes), X, Y,
                           np.random.default_rng(sum(map(ord, name))), 4, check_state)


def test_ctrl_c_before_the_fit_is_not_carried_into_it(ocr60):
    X, Y = ocr60
    from structfw._interrupt import deferred_sigint

    with deferred_sigint() as flag:
        flag.set()
    svm = _svm(BCFW(), 1).fit(X, Y)
    assert svm.stopped_ == "max_passes"


# ------------------------------------------------------------ executor
class _FailsOn7(sf.models.MulticlassModel):
    def loss_augmented_decode(self, x, y_true, w):
        if x[1] == 7.0:
            raise ArithmeticError("boom")
        return super().loss_augmented_decode(x, y_true, w)


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_a_failing_oracle_names_the_example(n_jobs):
    from structfw.executor import ExampleError, get_executor

    X = np.arange(20, dtype=float).reshape(10, 2)
    Y = [0, 1] * 5
    model = _FailsOn7(2, 2)
    ex = get_executor(n_jobs)
    try:
        key = ex.bind(model, list(X[:, None, :].reshape(10, 2)), Y)
        with pytest.raises(ExampleError, match="failed on example 3: ArithmeticError: boom"):
            ex.loss_augmented_decode(key, np.zeros(4))
        assert len(ex.decode(key, np.zeros(4), indices=[0, 5])) == 2
    finally:
        ex.close()


def test_bound_data_travel_once_to_the_workers(ocr60):
    from structfw.executor import ProcessExecutor

    X, Y = ocr60
    model = sf.models.ChainModel(26, 128)
    ex = ProcessExecutor(2)
    try:
        key = ex.bind(model, *model.check_data(X, Y))
        w = np.random.default_rng(0).normal(size=model.size_joint_feature)
        a = ex.loss_augmented_decode(key, w)
        b = [model.loss_augmented_decode(x, y, w) for x, y in zip(*model.check_data(X, Y))]
        assert all(np.array_equal(p, q) for p, q in zip(a, b))
        pool = ex._pool
        ex.decode(key, w, indices=[1, 2])
        assert ex._pool is pool  # no restart, no re-sending of the data
    finally:
        ex.close()


# ------------------------------------------------------------ compiled general path
class _PythonOracleChain(sf.models.ChainModel):
    """The chain model without its compiled oracle: the engine then runs its Python parts."""

    def compiled_oracle(self, X, Y):
        return None


@pytest.mark.parametrize("kw", [
    dict(step="pairwise"), dict(step="away", averaging="weighted"), dict(cache=True, cache_size=2),
    dict(step="pairwise", sampling="gap", cache=True, gap_refresh=2, cache_size=3),
    dict(step="away", sampling="max_gap", cache=True, step_size="predefined", gap_refresh=2),
    dict(step="pairwise", sampling="perm", averaging="suffix"),
])
def test_compiled_corner_sets_give_the_python_parts_iterates(kw, ocr60, monkeypatch):
    from structfw.solvers import corners

    X, Y = ocr60
    # a tiny pool and two slots per block make the compiled pass stop, grow and resume often
    orig_init = corners.CornerStore.__init__
    monkeypatch.setattr(corners.CornerStore, "__init__",
                        lambda self, n, d, capacity=8, pool=None, labels=False: orig_init(self, n, d, 2, 64, labels))
    runs = []
    for model in (sf.models.ChainModel(26, 128), _PythonOracleChain(26, 128)):
        # the compiled passes on rows (on the factored storage: tests/test_factored.py)
        svm = sf.StructuredSVM(model, solver=BCFW(block_storage="dense", **kw), lam=0.01, max_passes=4, tol=None,
                               random_state=5)
        runs.append(svm.fit(X, Y))
    np.testing.assert_allclose(runs[0].coef_, runs[1].coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(runs[0].trace_["cache_hits"], runs[1].trace_["cache_hits"])
    np.testing.assert_array_equal(runs[0].trace_["oracle_calls"], runs[1].trace_["oracle_calls"])
    # the compiled pairwise passes left their rows stale: rebuilt from alpha they are the kept ones
    assert runs[0].state_.rows_stale == (kw.get("step") == "pairwise")
    np.testing.assert_allclose(runs[0].state_.wi, runs[1].state_.wi, rtol=1e-9, atol=1e-12)
    a, b = runs[0].state_.corners, runs[1].state_.corners
    np.testing.assert_array_equal(a.size, b.size)
    for i in range(len(X)):
        np.testing.assert_allclose(np.sort(a[i].alpha), np.sort(b[i].alpha), atol=1e-12)


def test_compiled_csr_chain_gives_the_python_iterates():
    from structfw_bench.synthetic import make_chain_problem

    X, Y = make_chain_problem(n=80, n_states=5, n_features=30, sparse=True, seed=1, n_test=0)[:2]
    runs = []
    for model in (sf.models.ChainModel(5, 30), _PythonOracleChainCSR(5, 30)):
        for kw in (dict(), dict(step="pairwise", sampling="gap", cache=True, gap_refresh=2)):
            runs.append(sf.StructuredSVM(model, solver=BCFW(**kw), lam=0.01, max_passes=3, tol=None,
                                         random_state=2).fit(X, Y).coef_)
    np.testing.assert_allclose(runs[0], runs[2], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(runs[1], runs[3], rtol=1e-9, atol=1e-12)


class _PythonOracleChainCSR(sf.models.ChainModel):
    def compiled_oracle(self, X, Y):
        return None


class ZeroLossChain(sf.models.ChainModel):
    """A chain whose every labelling costs nothing: its SSVM optimum is w = 0."""

    def loss(self, y_true, y):
        return 0.0

    def loss_augmented_decode(self, x, y_true, w):
        return self.decode(x, w)


@pytest.mark.parametrize("kw", [dict(), dict(step="pairwise", cache=True)])
def test_a_subclass_with_its_own_oracle_is_not_trained_by_the_inherited_compiled_kernel(ocr60, kw):
    """ChainModel's compiled kernel maximises the Hamming-augmented score; a subclass that
    redefines the loss and the oracle (but not ``compiled_oracle``) must be trained through
    its own methods, or the fit silently learns the base model's objective."""
    from structfw.solvers.problem import overrides_compiled_methods

    X, Y = ocr60
    assert overrides_compiled_methods(ZeroLossChain(26, 128))
    assert not overrides_compiled_methods(sf.models.ChainModel(26, 128))
    svm = sf.StructuredSVM(ZeroLossChain(26, 128), solver=BCFW(**kw), lam=0.01, max_passes=3, tol=None,
                           random_state=0).fit(X, Y)
    np.testing.assert_array_equal(svm.coef_, 0.0)
    assert svm.gap_ == 0.0


@pytest.mark.parametrize("layout", ["chain-dense", "chain-csr", "multiclass"])
def test_compiled_hinge_pass_gives_the_oracle_pass_hinges(layout, ocr60):
    """A gap pass that keeps no corner computes H_i in one numba call; it must equal the
    H_i of the oracle pass through the executor and the Python corners."""
    from structfw_bench.synthetic import make_chain_problem
    from structfw.solvers.problem import Problem

    rng = np.random.default_rng(0)
    if layout == "chain-dense":
        (X, Y), model = ocr60, sf.models.ChainModel(26, 128)
    elif layout == "chain-csr":
        X, Y = make_chain_problem(n=50, n_states=5, n_features=30, sparse=True, seed=1, n_test=0)[:2]
        model = sf.models.ChainModel(5, 30)
    else:
        X = list(rng.normal(size=(40, 6)))
        Y = list(rng.integers(0, 4, size=40))
        model = sf.models.MulticlassModel(4, 6)
    problem = Problem(model, X, Y, 0.01)
    assert problem.compiled_oracle() is not None
    for scale in (0.0, 0.1, 3.0):
        w = scale * rng.normal(size=problem.d)
        H = problem.batch_hinges(w)
        H_oracle = np.array([r[3] for r in problem.batch_oracle(w)])
        np.testing.assert_allclose(H, H_oracle, rtol=1e-12, atol=1e-12)
        assert np.all(H >= 0.0)
