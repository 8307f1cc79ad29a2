"""Interrupts per fit, a second Ctrl-C that aborts, the oracle timeout, and executors that end their workers.

Every wait below has a generous upper bound and asserts only that something ended, never how fast.
"""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import multiprocessing

import numpy as np
import pytest

import structfw as sf
from structfw._interrupt import current_flag, deferred_sigint, interrupt_requested
from structfw.executor import OracleTimeout, get_executor
from toy import EnumModel, make_toy

if threading.current_thread() is not threading.main_thread():  # pragma: no cover
    pytest.skip("signals are delivered to the main thread only", allow_module_level=True)

LONG = 10 ** 6  # passes: a fit that only an interrupt ends


# each test starts with Python's default SIGINT handler, whatever the suite inherited (a suite
# started in the background inherits SIGINT ignored): tests/conftest.py, _python_default_sigint


def _svm(model, passes, **kw):
    return sf.StructuredSVM(model, lam=0.05, max_passes=passes, tol=None, check_every=1, random_state=0, **kw)


class _CtrlCOnCall(EnumModel):
    """Raises SIGINT in the main thread (as Ctrl-C would) at its ``at``-th oracle call, then sets ``done``."""

    def __init__(self, phi, loss, at, done=None):
        super().__init__(phi, loss)
        self.at, self.calls, self.done = at, 0, done

    def loss_augmented_decode(self, x, y_true, w):
        self.calls += 1
        if self.calls == self.at:
            signal.raise_signal(signal.SIGINT)
            if self.done is not None:
                self.done.set()
        return super().loss_augmented_decode(x, y_true, w)


class _WaitsFor(EnumModel):
    """Holds its first oracle call until ``event`` is set (so the fit spans the main thread's Ctrl-C)."""

    def __init__(self, phi, loss, event):
        super().__init__(phi, loss)
        self.event, self.started = event, threading.Event()

    def loss_augmented_decode(self, x, y_true, w):
        if not self.started.is_set():
            self.started.set()
            self.event.wait(30)
        return super().loss_augmented_decode(x, y_true, w)


def _toy(cls, *args, n=6, seed=0):
    model, X, Y = make_toy(n=n, m=4, d=3, seed=seed)
    return cls(model.phi, model.loss_table, *args), X, Y


def _fit_in_thread(svm, X, Y, out):
    def run():
        try:
            out.append(svm.fit(X, Y))
        except BaseException as exc:  # reported by the test
            out.append(exc)
    t = threading.Thread(target=run)
    t.start()
    return t


# ------------------------------------------------------------------ tokens
def test_nested_contexts_share_the_outermost_token_and_each_fit_gets_a_fresh_one():
    with deferred_sigint() as outer:
        with deferred_sigint() as inner:
            assert inner is outer and current_flag() is outer
        outer.set()
        assert interrupt_requested()
    assert current_flag() is None and not interrupt_requested()
    with deferred_sigint() as again:
        assert again is not outer and not again.requested
    seen = []

    def other():
        with deferred_sigint() as f:
            seen.append((f, f.requested))
    with deferred_sigint() as mine:
        mine.set()
        t = threading.Thread(target=other)
        t.start()
        t.join(30)
    assert seen[0][0] is not mine and seen[0][1] is False
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_stops_only_the_main_threads_fit():
    release = threading.Event()
    fits = []
    threads = []
    for seed in (1, 2):
        model, X, Y = _toy(_WaitsFor, release, seed=seed)
        threads.append((_fit_in_thread(_svm(model, 30), X, Y, fits), model))
    for _, model in threads:
        assert model.started.wait(30)
    model, X, Y = _toy(_CtrlCOnCall, 3 * 6 + 2, release)  # in the main fit's third pass
    main = _svm(model, LONG).fit(X, Y)
    for t, _ in threads:
        t.join(60)
        assert not t.is_alive()
    assert main.stopped_ == "interrupted"
    assert len(fits) == 2 and all(isinstance(f, sf.StructuredSVM) for f in fits), fits
    assert [f.stopped_ for f in fits] == ["max_passes", "max_passes"]
    assert all(f.n_iter_ == 30 for f in fits)


def test_a_fit_after_an_interrupted_fit_does_not_start_interrupted():
    model, X, Y = _toy(_CtrlCOnCall, 2 * 6 + 1)
    assert _svm(model, LONG).fit(X, Y).stopped_ == "interrupted"
    plain, X, Y = make_toy(n=6, m=4, d=3, seed=0)
    after = _svm(plain, 5).fit(X, Y)  # the main thread
    assert after.stopped_ == "max_passes" and np.linalg.norm(after.coef_) > 0
    out = []
    _fit_in_thread(_svm(plain, 5), X, Y, out).join(60)  # another thread
    assert out[0].stopped_ == "max_passes" and np.linalg.norm(out[0].coef_) > 0
    # a token set by hand (by a thread's own code) ends that thread's fit only
    with deferred_sigint() as flag:
        flag.set()
    assert _svm(plain, 5).fit(X, Y).stopped_ == "max_passes"


# ------------------------------------------------------------ second Ctrl-C
class _Hangs(EnumModel):
    """An oracle that does not return (for at most ``limit`` seconds, so a failing test cannot hang)."""

    limit = 60.0

    def __init__(self, phi, loss, on=None, release=None):
        super().__init__(phi, loss)
        self.on, self.release = on, release  # release: an Event that ends the hang of a thread worker

    def loss_augmented_decode(self, x, y_true, w):
        if self.on is None or int(x) == self.on:
            end = time.monotonic() + self.limit
            while time.monotonic() < end and not (self.release is not None and self.release.is_set()):
                time.sleep(0.01)
        return super().loss_augmented_decode(x, y_true, w)


def test_a_second_ctrl_c_aborts_a_hung_serial_oracle_and_keeps_the_previous_fit():
    import _thread

    plain, X, Y = make_toy(n=6, m=4, d=3, seed=0)
    svm = _svm(plain, 3).fit(X, Y)
    coef = svm.coef_.copy()
    hung, _, _ = _toy(_Hangs)
    svm.set_params(model=hung, max_passes=LONG)
    timers = [threading.Timer(t, _thread.interrupt_main) for t in (0.3, 0.8)]
    for t in timers:
        t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            svm.fit(X, Y)
    finally:
        for t in timers:
            t.cancel()
            t.join()
    np.testing.assert_array_equal(svm.coef_, coef)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ---------------------------------------------------------------- workers
def _children():
    """Live (not zombie) child processes of this process, from /proc."""
    pids = set()
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children") as fh:
                pids.update(int(p) for p in fh.read().split())
        except OSError:
            pass
    return {p for p in pids if _alive(p)}


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _gone(pids, within=30.0):
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc (Linux)")


class _FailsOn(EnumModel):
    def loss_augmented_decode(self, x, y_true, w):
        if int(x) == 2:
            raise ArithmeticError("boom")
        return super().loss_augmented_decode(x, y_true, w)


@needs_proc
@pytest.mark.parametrize("executor", ["process", "thread"])
def test_fit_and_predict_leave_no_workers(executor):
    model, X, Y = make_toy(n=6, m=4, d=3, seed=0)
    procs, threads = _children(), threading.active_count()
    svm = _svm(model, 3, n_jobs=2, executor=executor).fit(X, Y)
    svm.predict(X)
    assert _children() == procs and not multiprocessing.active_children()
    bad, _, _ = _toy(_FailsOn)
    with pytest.raises(sf.executor.ExampleError, match="example 2"):
        _svm(bad, 3, n_jobs=2, executor=executor).fit(X, Y)
    assert _children() == procs and not multiprocessing.active_children()
    end = time.monotonic() + 30
    while threading.active_count() > threads and time.monotonic() < end:  # idle threads end on close
        time.sleep(0.05)
    assert threading.active_count() == threads


@needs_proc
@pytest.mark.parametrize("executor", ["process", "thread"])
def test_oracle_timeout_names_the_example_that_hung(executor):
    release = threading.Event() if executor == "thread" else None  # a thread cannot be killed
    hung, X, Y = _toy(_Hangs, 3, release, n=8)
    hung.limit = 20.0
    procs = _children()
    svm = _svm(hung, 3, n_jobs=2, executor=executor, oracle_timeout=2.0 if executor == "process" else 1.0)
    try:
        with pytest.raises(OracleTimeout, match="example" if executor == "thread" else "example 3 hung") as err:
            svm.fit(X, Y)
    finally:
        if release is not None:
            release.set()
    assert 3 in err.value.indices and isinstance(err.value, TimeoutError)
    assert f"oracle_timeout={svm.oracle_timeout:g} s" in str(err.value)
    if executor == "process":  # one example per call with 8 examples on 2 workers: named exactly
        assert err.value.indices == [3]
    assert _children() == procs  # the hung process was terminated


def test_oracle_timeout_is_checked():
    model, X, Y = make_toy(n=4, m=4, d=3, seed=0)
    for bad in (0, -1.0, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="oracle_timeout"):
            _svm(model, 1, oracle_timeout=bad).fit(X, Y)
    assert "oracle_timeout" in _svm(model, 1).get_params()
    # a serial oracle cannot be timed out: with a timeout the oracles go to one worker
    ex = get_executor(None, "process", oracle_timeout=1.0)
    with ex:
        assert type(ex).__name__ == "ProcessExecutor" and ex.n_jobs == 1
    assert type(get_executor(None)).__name__ == "SerialExecutor"


# ---------------------------------------------- subprocesses: Ctrl-C twice, SIGTERM
_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import structfw as sf

    class Hangs(sf.models.MulticlassModel):
        def loss_augmented_decode(self, x, y_true, w):
            os.write(1, f"WORKER {os.getpid()}\\n".encode())  # one write: the two workers share the pipe
            end = time.monotonic() + 120
            while time.monotonic() < end:
                time.sleep(0.01)
            return super().loss_augmented_decode(x, y_true, w)

    X = list(np.arange(16, dtype=float).reshape(8, 2))
    Y = [0, 1] * 4
    print("PARENT", os.getpid(), flush=True)
    sf.StructuredSVM(Hangs(2, 2), n_jobs=2, executor="process", max_passes=5).fit(X, Y)
    print("FIT RETURNED", flush=True)
""")


def _start_hung_fit():
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    workers = set()
    end = time.monotonic() + 120
    while len(workers) < 2 and time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("WORKER"):
            workers.add(int(line.split()[1]))
    if len(workers) < 2:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the script did not start its two workers: {out}\n{err}")
    return proc, workers


@needs_proc
def test_two_ctrl_c_end_a_fit_with_hung_process_workers_and_the_workers():
    proc, workers = _start_hung_fit()
    try:
        proc.send_signal(signal.SIGINT)  # taken at the next safe point, which never comes
        time.sleep(0.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
    assert "FIT RETURNED" not in out
    assert _gone(workers)


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_process_workers_die_with_their_parent(sig):
    proc, workers = _start_hung_fit()
    try:
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _gone(workers)


# ---------------------------------------------------------------- Ray
@pytest.mark.slow  # 31 s of the default suite (cold cache, 2 cores): CI's slow stage runs it
@needs_proc
def test_ray_oracle_timeout_kills_the_hung_actor():
    ray = pytest.importorskip("ray")
    from structfw import executor_ray

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.cloudpickle.register_pickle_by_value(sys.modules["toy"])
    try:
        hung, X, Y = _toy(_Hangs, 1, n=4)
        hung.limit = 60.0
        svm = _svm(hung, 2, n_jobs=2, executor="ray", oracle_timeout=3.0)  # room for the actors to start
        with pytest.raises(OracleTimeout, match="oracle_timeout=3 s") as err:
            svm.fit(X, Y)
        assert 1 in err.value.indices
        assert None in executor_ray._ACTORS  # the hung actor was killed; its place is refilled on demand
        model, X, Y = make_toy(n=4, m=4, d=3, seed=0)
        assert _svm(model, 2, n_jobs=2, executor="ray").fit(X, Y).stopped_ == "max_passes"
        assert None not in executor_ray._ACTORS
    finally:
        if started_here:
            executor_ray.shutdown()
            ray.shutdown()
