"""Parallel training: the asynchronous minibatch window, the executors' resilience, the Ray executor,
``structfw train --ray`` and ``structfw bench parallel``.

The Ray tests start a local 2-CPU cluster once for the module (a few seconds) and are
skipped where Ray is not installed (``structfw[distributed]``; the test extras have it).
"""
import json
import os
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import structfw as sf
from structfw.executor import ExampleError, ProcessExecutor, SerialExecutor, ThreadExecutor, get_executor, \
    parse_executor
from structfw.solvers import BCFW, MPBCFW
from test_positivity import constrained_optimum
from toy import exact_optimum, make_toy, primal

LAM = 0.05


@pytest.fixture(scope="module")
def toy():
    model, X, Y = make_toy(n=7, m=4, d=3, seed=5)
    return model, X, Y, exact_optimum(model, X, Y, LAM)[0]


@pytest.fixture(scope="module")
def ocr60():
    X, Y = sf.datasets.load_ocr("train")
    return X[:60], Y[:60]


def _chain_fit(X, Y, solver, n_jobs=None, executor="process", passes=3, **kw):
    return sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=solver, lam=0.01, max_passes=passes, tol=None,
                            random_state=1, n_jobs=n_jobs, executor=executor, **kw).fit(X, Y)


# ------------------------------------------------------------ the asynchronous window
@pytest.mark.parametrize("kw", [dict(step="pairwise"), dict(step="away", sampling="gap", gap_refresh=2),
                                dict(step="pairwise", cache=True, sampling="gap"),
                                dict(step="pairwise", multi_plane=True, approx_rule="work")])
@pytest.mark.parametrize("tau", [2, 5])
def test_asynchronous_window_reaches_the_exact_qp_optimum(toy, kw, tau):
    model, X, Y, D_star = toy
    svm = sf.StructuredSVM(model, solver=BCFW(minibatch=tau, asynchronous=True, **kw), lam=LAM, max_passes=800,
                           tol=1e-9, random_state=0).fit(X, Y)
    assert primal(model, X, Y, LAM, svm.coef_) - D_star < 1e-7
    assert svm.gap_ >= primal(model, X, Y, LAM, svm.coef_) - D_star - 1e-10


def test_asynchronous_window_with_positivity_reaches_the_constrained_optimum():
    model, X, Y = make_toy(n=5, m=4, d=4, seed=3)
    _, w_free = exact_optimum(model, X, Y, LAM)
    S = np.flatnonzero(w_free < -1e-3)[:2]
    model.nonnegative_indices = S
    P_star, _ = constrained_optimum(model, X, Y, LAM, S)
    svm = sf.StructuredSVM(model, solver=BCFW(step="pairwise", minibatch=3, asynchronous=True), lam=LAM,
                           max_passes=2000, tol=1e-9, random_state=0).fit(X, Y)
    assert np.all(svm.coef_[S] >= 0)
    assert -1e-9 < primal(model, X, Y, LAM, svm.coef_) - P_star < 1e-7


def test_asynchronous_window_is_stale_by_tau_minus_one_steps(ocr60, monkeypatch):
    """Each oracle runs at the w of tau - 1 steps before its own step (and no older)."""
    from structfw.solvers import parts

    X, Y = ocr60
    seen = []
    submit, collect = parts.ExactOracle.submit, parts.ExactOracle.collect

    def spy_submit(self, ctx, i):
        seen.append(("submit", ctx.st.k))
        return submit(self, ctx, i)

    def spy_collect(self, ctx, i, pending):
        seen.append(("collect", ctx.st.k))
        return collect(self, ctx, i, pending)

    monkeypatch.setattr(parts.ExactOracle, "submit", spy_submit)
    monkeypatch.setattr(parts.ExactOracle, "collect", spy_collect)
    _chain_fit(X, Y, BCFW(minibatch=4, asynchronous=True), passes=1)
    submitted = [k for what, k in seen if what == "submit"]
    collected = [k for what, k in seen if what == "collect"]
    assert len(submitted) == len(collected) == 60
    lags = np.array(collected) - np.array(submitted)
    assert lags.max() == 3 and lags.min() >= 0
    assert np.all(lags[3:-3] == 3)  # inside a pass the window is full


@pytest.mark.parametrize("n_jobs, executor", [(2, "thread"), (2, "process")])
def test_asynchronous_workers_give_the_serial_iterates(ocr60, n_jobs, executor):
    X, Y = ocr60
    mk = lambda: BCFW(minibatch=4, asynchronous=True, step="pairwise", cache=True)  # noqa: E731
    serial, workers = _chain_fit(X, Y, mk()), _chain_fit(X, Y, mk(), n_jobs, executor)
    np.testing.assert_array_equal(serial.coef_, workers.coef_)
    np.testing.assert_array_equal(serial.trace_["oracle_calls"], workers.trace_["oracle_calls"])


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("sampling", ["perm", "uniform"])
def test_cache_hit_or_miss_is_decided_when_the_block_is_drawn(ocr60, monkeypatch, asynchronous, sampling):
    """With the cache every minibatch step is exactly one worker call or one hit: no block
    drawn as a hit calls its oracle alone on the stepping thread at its step (with perm
    sampling, none at all), and no miss's corner is thrown away."""
    from structfw.solvers.problem import Problem

    X, Y = ocr60
    on_stepping_thread = []
    max_oracle = Problem.max_oracle

    def spy(self, i, w):
        on_stepping_thread.append(i)
        return max_oracle(self, i, w)

    monkeypatch.setattr(Problem, "max_oracle", spy)
    svm = _chain_fit(X, Y, BCFW(minibatch=6, asynchronous=asynchronous, cache=True, sampling=sampling,
                                step="pairwise"), passes=6)
    tr = svm.trace_
    steps = 6 * len(X)
    # per pass: n steps, each an oracle call or a hit; the gap passes' calls are counted apart
    gap_pass_calls = tr["oracle_calls"][-1] + tr["cache_hits"][-1] - steps
    assert gap_pass_calls % len(X) == 0 and gap_pass_calls >= 0
    assert tr["cache_hits"][-1] > 0
    # a block drawn twice in one batch (uniform sampling) is a miss at most once
    assert on_stepping_thread == []


def test_asynchronous_warm_start_resumes_exactly(ocr60):
    X, Y = ocr60
    mk = lambda passes, **kw: sf.StructuredSVM(  # noqa: E731
        sf.models.ChainModel(26, 128), solver=MPBCFW(minibatch=3, asynchronous=True, approx_rule="work"), lam=0.01,
        max_passes=passes, tol=None, random_state=3, n_jobs=2, executor="thread", **kw)
    once = mk(4).fit(X, Y)
    split = mk(2, warm_start=True).fit(X, Y)
    split.fit(X, Y)
    np.testing.assert_allclose(split.coef_, once.coef_, rtol=1e-10, atol=1e-12)


def test_asynchronous_needs_a_window():
    with pytest.raises(ValueError, match="asynchronous=True .* minibatch >= 2"):
        BCFW(asynchronous=True)
    solver = BCFW(minibatch=3, asynchronous=True)
    solver.minibatch = 1
    with pytest.raises(ValueError, match="minibatch >= 2"):
        solver.validate_params()


# ------------------------------------------------------------ executors
class DiesOnce:
    """A chain model whose oracle kills its worker process the first time it meets example ``bad``."""

    def __init__(self, marker, bad=5):
        self.inner, self.marker, self.bad = sf.models.ChainModel(26, 128), str(marker), bad

    def __getattr__(self, name):
        if "inner" not in self.__dict__:  # while unpickling
            raise AttributeError(name)
        return getattr(self.__dict__["inner"], name)

    def loss_augmented_decode(self, x, y, w):
        if np.array_equal(x, self.bad_x) and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(3)  # the worker process dies without a word
        return self.inner.loss_augmented_decode(x, y, w)


def _dying_data(X, marker):
    model = DiesOnce(marker)
    model.bad_x = X[model.bad]
    return model


def test_process_worker_that_dies_is_replaced_and_its_blocks_sent_again(ocr60, tmp_path):
    X, Y = ocr60
    ex = ProcessExecutor(2)
    try:
        key = ex.bind(_dying_data(X, tmp_path / "died"), X, Y)
        w = np.random.default_rng(0).normal(size=sf.models.ChainModel(26, 128).size_joint_feature)
        got = ex.loss_augmented_decode(key, w)
        assert (tmp_path / "died").exists()  # a worker did die
        ref = SerialExecutor()
        want = ref.loss_augmented_decode(ref.bind(sf.models.ChainModel(26, 128), X, Y), w)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        assert np.array_equal(ex.submit(key, w.copy(), [7]).result()[0], want[7])
    finally:
        ex.close()


@pytest.mark.parametrize("kind", ["serial", "thread", "process"])
def test_a_raising_oracle_is_named_by_its_example_in_submit(ocr60, kind):
    X, Y = ocr60
    Xb = list(X)
    Xb[9] = "not a feature matrix"
    ex = SerialExecutor() if kind == "serial" else get_executor(2, kind)
    try:
        key = ex.bind(sf.models.ChainModel(26, 128), Xb, Y)
        w = np.zeros(sf.models.ChainModel(26, 128).size_joint_feature)
        with pytest.raises(ExampleError, match="example 9"):
            ex.submit(key, w, [9]).result()
    finally:
        ex.close()


def test_executor_names():
    assert parse_executor("ray") == ("ray", None)
    assert parse_executor("ray:auto") == ("ray", "auto")
    assert isinstance(get_executor(2, "thread"), ThreadExecutor)
    with pytest.raises(ValueError, match="needs an address"):
        parse_executor("ray:")
    with pytest.raises(ValueError, match="executor must be one of"):
        get_executor(2, "dask")
    with pytest.raises(ValueError, match="n_jobs must be"):
        get_executor(0, "thread")


# ------------------------------------------------------------ Ray
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    from structfw import executor_ray

    if ray.is_initialized():  # a session an earlier test left (the slow stage runs several): one of its own
        executor_ray.shutdown()
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    # the workers cannot import this test module: its classes travel by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ray
    executor_ray.shutdown()
    ray.shutdown()


@pytest.mark.slow  # 22 s of the default suite (cold cache, 2 cores): CI's slow stage runs it
def test_ray_workers_give_the_serial_iterates(ray_cluster, ocr60):
    X, Y = ocr60
    for mk in (lambda: BCFW(minibatch=4, asynchronous=True, step="pairwise", cache=True),
               lambda: BCFW(minibatch=4, step="away", sampling="gap")):
        serial, ray_fit = _chain_fit(X, Y, mk()), _chain_fit(X, Y, mk(), 2, "ray")
        np.testing.assert_array_equal(serial.coef_, ray_fit.coef_)
        np.testing.assert_array_equal(serial.trace_["oracle_calls"], ray_fit.trace_["oracle_calls"])
    svm = _chain_fit(X, Y, BCFW(), None, "ray")  # gap passes and prediction on every cluster CPU
    assert np.array_equal(svm.predict(X[:5])[0], _chain_fit(X, Y, BCFW()).predict(X[:5])[0])


def test_ray_actor_that_dies_is_recreated_and_its_blocks_sent_again(ray_cluster, ocr60, tmp_path):
    from structfw import executor_ray

    X, Y = ocr60
    ex = get_executor(2, "ray")
    try:
        key = ex.bind(_dying_data(X, tmp_path / "died"), X, Y)
        before = list(executor_ray._ACTORS)
        w = np.random.default_rng(1).normal(size=sf.models.ChainModel(26, 128).size_joint_feature)
        got = ex.loss_augmented_decode(key, w)
        assert (tmp_path / "died").exists()
        assert executor_ray._ACTORS != before  # one was replaced
        ref = SerialExecutor()
        want = ref.loss_augmented_decode(ref.bind(sf.models.ChainModel(26, 128), X, Y), w)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
    finally:
        ex.close()
    # a fit whose actor is killed between calls carries on with the same iterates
    ray_cluster.kill(executor_ray._ACTORS[0])
    serial = _chain_fit(X, Y, BCFW(minibatch=4))
    again = _chain_fit(X, Y, BCFW(minibatch=4), 2, "ray")
    np.testing.assert_array_equal(serial.coef_, again.coef_)


def test_ray_errors_name_the_example_and_the_arguments(ray_cluster, ocr60):
    X, Y = ocr60
    Xb = list(X)
    Xb[11] = "not a feature matrix"
    ex = get_executor(2, "ray")
    try:
        key = ex.bind(sf.models.ChainModel(26, 128), Xb, Y)
        w = np.zeros(sf.models.ChainModel(26, 128).size_joint_feature)
        with pytest.raises(ExampleError, match="example 11"):
            ex.loss_augmented_decode(key, w)
        with pytest.raises(ExampleError, match="example 11"):
            ex.submit(key, w, [11]).result()
    finally:
        ex.close()
    with pytest.raises(ValueError, match="n_jobs=64 Ray workers .* 2 CPUs"):
        get_executor(64, "ray")


@pytest.mark.slow  # 11 s of the default suite (cold cache, 2 cores): CI's slow stage runs it
def test_cli_train_on_ray(ray_cluster, tmp_path):
    from structfw.cli import main

    r = CliRunner().invoke(main, ["train", "--data", "seg-binary", "--passes", "2", "--quiet", "--ray", "--n-jobs", "2",
                                  "--solver", "bcfw", "--minibatch", "4", "--asynchronous"])
    assert r.exit_code == 0, r.output
    assert "stopped: max_passes" in r.output
    r = CliRunner().invoke(main, ["train", "--data", "ocr", "--ray", "--executor", "thread"])
    assert r.exit_code == 2 and "cannot be combined with --executor thread" in r.output


def test_cli_ray_without_ray_is_a_usage_error(monkeypatch):
    from structfw.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    r = CliRunner().invoke(main, ["train", "--data", "ocr", "--ray", "auto"])
    assert r.exit_code == 2 and "pip install 'structfw[distributed]'" in r.output


# ------------------------------------------------------------ the benchmark
def test_bench_parallel_smoke(tmp_path):
    from structfw.cli import main

    kinds = ["--executor", "thread"] + (["--executor", "ray"] if _has_ray() else [])
    r = CliRunner().invoke(main, ["bench", "parallel", *kinds, "--taus", "1,3", "--seeds", "1", "--n-images", "6",
                                  "--size", "16", "--target", "0.05", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "parallel.json").read_text())
    assert {"serial tau=1", "thread-2 tau=3", "thread-2 tau=3 async"} <= set(doc["runs"])
    for row in doc["summary"]["rows"]:
        assert row["calls_to_target"] > 0 and row["predicted_speedup"] > 0
    assert doc["overhead_ms"]["thread-2"]["single_call"] > 0
    assert (tmp_path / "parallel.png").stat().st_size > 0 and "| run |" in (tmp_path / "parallel.md").read_text()
    r = CliRunner().invoke(main, ["bench", "parallel", "--taus", "0,2"])
    assert r.exit_code == 2 and "--taus" in r.output


def test_bench_parallel_with_the_cache(tmp_path):
    from structfw.cli import main

    r = CliRunner().invoke(main, ["bench", "parallel", "--executor", "thread", "--taus", "4", "--seeds", "1",
                                  "--n-images", "6", "--size", "16", "--target", "0.05", "--cache",
                                  "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "parallel.json").read_text())
    assert doc["solver"] == "BCFW with the cache" and "with the cache" in (tmp_path / "parallel.md").read_text()
    assert doc["runs"]["thread-2 tau=4 async"]["calls_to_target"] > 0


def _has_ray():
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def test_speedup_model_limits():
    """The model of docs/guide/scaling-out.md: p-fold for free communication, capped by the
    stepping thread, by the machine's cores, and 1/r for tau = 1 (the serial path)."""
    from structfw_bench.parallel import speedup_model

    serial = dict(t_o=2e-3, t_s=0.1e-3)
    free = (0.0, 0.0, 0.0)
    assert speedup_model(serial, free, 1.0, 2, 4, True) == pytest.approx(2.1 / 1.0)
    assert speedup_model(serial, free, 1.0, 100, 100, True) == pytest.approx(21.0)  # the step's t_s limits
    assert speedup_model(serial, free, 1.25, 2, 4, True) == pytest.approx(2.1 / 1.25)
    assert speedup_model(serial, free, 1.5, 2, 1, False) == pytest.approx(1 / 1.5)
    # a synchronous batch of 3 on 2 workers waits for two rounds of oracle calls
    assert speedup_model(serial, free, 1.0, 2, 3, False) == pytest.approx(2.1 / (0.1 + 2 * 2 / 3))
    ray_like = (3e-3, 0.7e-3, 1.4e-3)
    on_a_cluster = speedup_model(serial, ray_like, 1.0, 2, 4, True)
    on_two_cores = speedup_model(serial, ray_like, 1.0, 2, 4, True, cores=2)
    assert on_a_cluster == pytest.approx(2.1 / 1.0)
    assert on_two_cores == pytest.approx(2.1 / ((2.1 + 2.8) / 2)) and on_two_cores < 1.0
