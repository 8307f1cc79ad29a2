"""Worker faults: a process worker killed while the pool is idle, and the per-example oracle timeout.

The kills run in real subprocesses: a child python process fits with ``executor="process",
n_jobs=2`` and, at a checkpoint (when no oracle call is in flight), SIGKILLs one of its
workers and waits until the pool has noticed -- so the next call finds the pool broken
when it is *submitted*, the case that raised a raw BrokenProcessPool.  Each fit must end
normally with the iterates of the same fit without the kill.

Every wait has a generous upper bound; no assertion is about how fast something ran.
"""
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import structfw as sf
from structfw.executor import OracleTimeout, ProcessExecutor, ThreadExecutor
from toy import EnumModel, make_toy

needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc (Linux)")

# ------------------------------------------------------- a worker killed while the pool is idle
_KILL_SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time
    sys.path.insert(0, sys.argv[3])  # the tests directory: toy.py
    import structfw as sf
    from structfw.solvers import BCFW, MPBCFW, base
    from toy import EnumModel, make_toy

    PARENT = os.getpid()
    PIDS = sys.argv[2]  # each worker process leaves a file named by its pid here

    class Recorded(EnumModel):
        def loss_augmented_decode(self, x, y_true, w):
            if os.getpid() != PARENT:
                open(os.path.join(PIDS, str(os.getpid())), "a").close()
            return super().loss_augmented_decode(x, y_true, w)

    SOLVERS = dict(bcfw=lambda: BCFW(), mpbcfw=lambda: MPBCFW(),
                   minibatch=lambda: BCFW(minibatch=4),
                   asynchronous=lambda: BCFW(minibatch=4, asynchronous=True))
    KILL_AT = {2, 4}  # the checkpoints (counted from the initial one, 1) after which a worker is killed
    state = dict(kill=False, checkpoint=0, killed=[])

    def live_worker():
        for name in sorted(os.listdir(PIDS)):
            pid = int(name)
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                        return pid
            except OSError:
                pass
        raise SystemExit("no live worker to kill")

    def kill_one_idle_worker():
        pid = live_worker()
        os.kill(pid, signal.SIGKILL)
        # the pool reaps its dead workers once it has marked itself broken: from then on a
        # submit fails at once (the fault under test), not the wait for a result
        end = time.monotonic() + 20
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
            time.sleep(0.01)
        state["killed"].append(dict(pid=pid, noticed=not os.path.exists(f"/proc/{pid}")))

    record = base.Monitor.record

    def record_then_kill(self, *args, **kw):  # a checkpoint: no oracle call is in flight
        record(self, *args, **kw)
        state["checkpoint"] += 1
        if state["kill"] and state["checkpoint"] in KILL_AT:
            kill_one_idle_worker()

    base.Monitor.record = record_then_kill

    def fit(kill):
        state.update(kill=kill, checkpoint=0)
        model, X, Y = make_toy(n=12, m=4, d=3, seed=2)
        svm = sf.StructuredSVM(Recorded(model.phi, model.loss_table), solver=SOLVERS[sys.argv[1]](), lam=0.05,
                               max_passes=6, tol=None, check_every=1, random_state=0, n_jobs=2,
                               executor="process").fit(X, Y)
        return dict(coef=svm.coef_.tolist(), gap=svm.gap_, stopped=svm.stopped_, n_iter=svm.n_iter_,
                    gaps=list(svm.trace_["gap"]))

    out = dict(plain=fit(False))
    out["killed_fit"] = fit(True)
    out["killed"] = state["killed"]
    print("RESULT", json.dumps(out), flush=True)
""")


def _run_kill_script(solver, tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(sf.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _KILL_SCRIPT, solver, str(pids), str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=120, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"the fit did not end normally:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


@needs_proc
@pytest.mark.parametrize("solver", ["bcfw", "mpbcfw", "minibatch", "asynchronous"])
def test_a_worker_killed_while_the_pool_is_idle_is_replaced_and_the_fit_unchanged(solver, tmp_path):
    out = _run_kill_script(solver, tmp_path)
    assert len(out["killed"]) == 2 and all(k["noticed"] for k in out["killed"]), out["killed"]
    plain, killed = out["plain"], out["killed_fit"]
    assert killed["stopped"] == plain["stopped"] == "max_passes"
    assert killed["n_iter"] == plain["n_iter"]
    np.testing.assert_allclose(killed["coef"], plain["coef"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(killed["gaps"], plain["gaps"], rtol=1e-9, atol=1e-12)
    assert np.linalg.norm(plain["coef"]) > 0


def _worker_pids(ex):
    return [p.pid for p in (getattr(ex._pool, "_processes", None) or {}).values()]


def _wait_reaped(pid, within=20.0):
    end = time.monotonic() + within
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
        time.sleep(0.01)
    return not os.path.exists(f"/proc/{pid}")


@needs_proc
@pytest.mark.parametrize("oracle_timeout", [None, 30.0])
def test_every_call_path_survives_a_worker_killed_while_idle(oracle_timeout):
    """submit, the batch call and decode each find the broken pool at submission and carry on."""
    import signal

    model, X, Y = make_toy(n=10, m=4, d=3, seed=1)
    w = np.random.default_rng(0).normal(size=model.size_joint_feature)
    want_aug = [model.loss_augmented_decode(x, y, w) for x, y in zip(X, Y)]
    want_dec = [model.decode(x, w) for x in X]
    with ProcessExecutor(2, oracle_timeout) as ex:
        key = ex.bind(model, X, Y)
        calls = [(lambda: ex.submit(key, w.copy(), [4]).result(), [want_aug[4]]),
                 (lambda: ex.loss_augmented_decode(key, w), want_aug), (lambda: ex.decode(key, w), want_dec)]
        for call, want in calls:
            assert ex.loss_augmented_decode(key, w) == want_aug  # the pool runs, then idles
            pid = _worker_pids(ex)[0]
            os.kill(pid, signal.SIGKILL)
            assert _wait_reaped(pid)  # the pool noticed: it now refuses new calls
            assert call() == want
            assert pid not in _worker_pids(ex)


class _AlwaysDies(EnumModel):
    def loss_augmented_decode(self, x, y_true, w):
        os._exit(3)


def test_a_call_whose_worker_always_dies_gives_up_naming_its_examples():
    model, X, Y = make_toy(n=3, m=4, d=3, seed=1)
    with ProcessExecutor(1) as ex:
        key = ex.bind(_AlwaysDies(model.phi, model.loss_table), X, Y)
        with pytest.raises(RuntimeError, match=r"died 4 times.*examples \[1\].*giving up"):
            ex.submit(key, np.zeros(model.size_joint_feature), [1]).result()


# ------------------------------------------------------- the oracle timeout, per example
class _HangsOn(EnumModel):
    """Hangs on example ``on`` (until ``release`` is set, 30 s at most); the others sleep ``pause`` s."""

    def __init__(self, phi, loss, on, release=None, pause=0.0):
        super().__init__(phi, loss)
        self.on, self.release, self.pause = on, release, pause

    def loss_augmented_decode(self, x, y_true, w):
        if int(x) == self.on:
            end = time.monotonic() + 30.0
            while time.monotonic() < end and not (self.release is not None and self.release.is_set()):
                time.sleep(0.01)
        elif self.pause:
            time.sleep(self.pause)
        return super().loss_augmented_decode(x, y_true, w)


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_oracle_timeout_is_per_example_and_names_only_the_one_that_hung(executor):
    """One worker, a gap pass of 20 examples in one batch, example 13 hangs: the fit ends about one
    limit after example 13 started (not 20 limits), and the error names example 13 alone."""
    limit = 0.5
    model, X, Y = make_toy(n=20, m=4, d=3, seed=0)
    release = threading.Event() if executor == "thread" else None  # a thread cannot be killed
    hung = _HangsOn(model.phi, model.loss_table, 13, release)
    svm = sf.StructuredSVM(hung, lam=0.05, max_passes=2, tol=None, random_state=0, n_jobs=1, executor=executor,
                           oracle_timeout=limit)
    t0 = time.monotonic()
    try:
        with pytest.raises(OracleTimeout) as err:
            svm.fit(X, Y)
        took = time.monotonic() - t0
    finally:
        if release is not None:
            release.set()
    assert err.value.indices == [13]
    msg = str(err.value)
    assert "example 13 hung" in msg and "oracle_timeout=0.5 s" in msg and "examples [" not in msg, msg
    assert took < 10 * limit, took  # generous: the old whole-call limit took 20 (thread) or 5 (process) limits


def test_a_call_queued_behind_a_hung_example_names_that_example():
    model, X, Y = make_toy(n=8, m=4, d=3, seed=0)
    release = threading.Event()
    with ThreadExecutor(1, oracle_timeout=0.3) as ex:
        key = ex.bind(_HangsOn(model.phi, model.loss_table, 5, release), X, Y)
        w = np.zeros(model.size_joint_feature)
        try:
            first = ex.submit(key, w, [4, 5, 6])
            queued = ex.submit(key, w, [7])
            with pytest.raises(OracleTimeout, match="example 5 hung") as err:
                queued.result()  # never started: the worker is stuck on example 5 of the first call
            assert err.value.indices == [5]
        finally:
            release.set()
        # released, both calls finish (their futures directly: no timeout races the thread's wake-up)
        assert len(first.future.result(30)) == 3 and len(queued.future.result(30)) == 1


@pytest.mark.parametrize("kind", [ThreadExecutor, ProcessExecutor])
def test_slow_examples_each_within_the_limit_do_not_time_out_their_call(kind):
    """12 examples of 0.1 s in one call (1.2 s) under a 0.5 s limit per example: no timeout."""
    model, X, Y = make_toy(n=12, m=4, d=3, seed=0)
    with kind(1, oracle_timeout=0.5) as ex:
        key = ex.bind(_HangsOn(model.phi, model.loss_table, -1, pause=0.1), X, Y)
        w = np.zeros(model.size_joint_feature)
        assert ex.submit(key, w, list(range(12))).result() == [model.loss_augmented_decode(x, y, w)
                                                               for x, y in zip(X, Y)]


def test_workers_stuck_outside_the_oracles_still_time_out():
    """No worker runs an oracle and the call does not finish: after len(indices) limits it is given up."""
    from concurrent.futures import Future

    from structfw.executor import _Board, _Inflight, _wait

    inflight = _Inflight()
    never = inflight.add(Future())
    with pytest.raises(OracleTimeout, match=r"no worker started an oracle .* examples \[2, 3\]") as err:
        _wait(never, 0.1, [2, 3], inflight, _Board(2))
    assert err.value.indices == [2, 3]


# ------------------------------------------------------- Ray: an actor killed while idle
@needs_proc
@pytest.mark.slow
@pytest.mark.parametrize("solver", ["bcfw", "asynchronous"])
def test_a_ray_actor_killed_while_idle_is_recreated_and_the_fit_unchanged(solver, monkeypatch):
    import signal

    ray = pytest.importorskip("ray")
    from structfw import executor_ray
    from structfw.solvers import BCFW, base

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    ray.cloudpickle.register_pickle_by_value(sys.modules["toy"])
    mk = dict(bcfw=lambda: BCFW(), asynchronous=lambda: BCFW(minibatch=4, asynchronous=True))[solver]
    model, X, Y = make_toy(n=12, m=4, d=3, seed=2)

    def fit(executor, n_jobs):
        return sf.StructuredSVM(model, solver=mk(), lam=0.05, max_passes=5, tol=None, check_every=1,
                                random_state=0, n_jobs=n_jobs, executor=executor).fit(X, Y)

    killed, killed_actor = [], []
    record, count = base.Monitor.record, [0]

    def record_then_kill(self, *args, **kw):  # a checkpoint: no oracle call is in flight
        record(self, *args, **kw)
        count[0] += 1
        if count[0] == 2:
            killed_actor.append(executor_ray._ACTORS[0])
            pid = ray.get(killed_actor[0].pid.remote())
            os.kill(pid, signal.SIGKILL)
            killed.append(_wait_reaped(pid))
            time.sleep(1.0)  # time for the cluster to learn of the death

    try:
        serial = fit("process", None)  # n_jobs=None: in this process
        monkeypatch.setattr(base.Monitor, "record", record_then_kill)
        on_ray = fit("ray", 2)
        assert executor_ray._ACTORS[0] is not killed_actor[0]  # the dead actor was found and replaced
    finally:
        monkeypatch.undo()
        if started_here:
            executor_ray.shutdown()
            ray.shutdown()
    assert killed == [True]
    assert on_ray.stopped_ == "max_passes"
    np.testing.assert_allclose(on_ray.coef_, serial.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(on_ray.trace_["gap"], serial.trace_["gap"], rtol=1e-9, atol=1e-12)
