import os
import signal
import sys
import threading
from pathlib import Path

import pytest

_SRC = Path(__file__).resolve().parents[1] / "src"
if str(_SRC) not in sys.path:  # run the tests without installing the package
    sys.path.insert(0, str(_SRC))
# the papers' reproduction (structfw_bench) is a distribution of its own in bench/, on no index the
# test extra could name: the tests import the checkout's, without installing it, and so do the
# Python processes they start (a bench child, a `python -c` check), which get it on
# PYTHONPATH; bench/src holds that one package only, so nothing else is shadowed
_BENCH_SRC = Path(__file__).resolve().parents[1] / "bench" / "src"
if str(_BENCH_SRC) not in sys.path:
    sys.path.insert(0, str(_BENCH_SRC))
_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if str(_BENCH_SRC) not in _path:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(_BENCH_SRC)] + _path)


def _shared_data_dir():
    env = os.environ.get("STRUCTFW_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data():
    """Path to the shared data directory; skips the test when it is absent."""
    path = _shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data directory {path} not found (set STRUCTFW_SHARED_DATA)")
    return path


@pytest.fixture(autouse=True)
def _python_default_sigint():
    """Each test starts with Python's default SIGINT handler, as an interactive run has it.

    A suite started in the background (``cmd &``, nohup, some CI runners) inherits SIGINT ignored:
    ``_thread.interrupt_main`` then does nothing, a child process inherits the ignore and outlives
    the SIGINT a test sends it, and a fit that saves and restores the handler finds SIG_IGN.  The
    handler the suite inherited is put back after the test."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can be set from the main thread only
        return
    inherited = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if inherited is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGINT, inherited)


# ---------------------------------------------------------------- compile on the idle core
_WARMUP = None


def pytest_sessionstart(session):
    """Start ``structfw warmup`` in a background process while the suite runs.

    A cold run of the suite spent about half its time compiling numba kernels (1,674 s cold
    against 829 s warm on the 2-core machine), one kernel at a time in the one pytest process,
    while the second core idled.  The warm-up compiles every kernel family into the same cache
    (numba writes each entry whole, so the suite either loads a finished entry or compiles the
    kernel itself); a test that needs a cold cache uses a cache folder of its own.  The code
    run is the same either way, so no result depends on who compiled first.
    ``STRUCTFW_TEST_WARMUP=0`` turns it off; one core: off."""
    global _WARMUP
    import subprocess

    if os.environ.get("STRUCTFW_TEST_WARMUP", "1") == "0" or (os.cpu_count() or 1) < 2:
        return
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller starts it
        return
    env = dict(os.environ, STRUCTFW_COMPILE_NOTICE="0",
               PYTHONPATH=os.pathsep.join([str(_SRC), os.environ.get("PYTHONPATH", "")]))
    _WARMUP = subprocess.Popen([sys.executable, "-m", "structfw.cli", "warmup", "--jobs", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                               start_new_session=True)


def pytest_sessionfinish(session, exitstatus):
    if _WARMUP is not None and _WARMUP.poll() is None:
        try:  # its own session: the warm-up and the workers it started
            os.killpg(_WARMUP.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _WARMUP.wait()
