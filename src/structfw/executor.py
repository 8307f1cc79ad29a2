"""One executor for every "oracle over many examples at once" (docs/design.md, "Layers").

Gap passes, batch FW steps, minibatches, cutting-plane rounds, test-loss checkpoints
and prediction go through it, so they run serially, on local threads or processes, or
on a Ray cluster (`structfw.executor_ray`) without the solvers changing.  A data
set is *bound* once (`SerialExecutor.bind`): the model and the examples go to the
workers once, and every later call sends only block indices and w.  An example whose
oracle raises is named in the error (`ExampleError`), wherever it ran.  A worker
process that dies is replaced and its calls are sent again (`ProcessExecutor`); with
``oracle_timeout`` each example's oracle is timed from its own start (`OracleTimeout`).

Besides the blocking calls, `SerialExecutor.submit` starts one oracle call and
returns a future: the asynchronous minibatch engine keeps a window of them in flight.

Every executor is a context manager, and `SerialExecutor.close` ends its workers
on every exit path: after a normal end it lets idle workers finish, and when calls are
still running (an exception, a second Ctrl-C, an oracle timeout) it terminates the
worker processes at once.  Worker processes also die with their parent (Linux: a
parent-death signal), so a SIGTERM or SIGKILL of the parent leaves no orphans.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, SupportsInt, TypeVar

import numpy as np
import numpy.typing as npt

from ._compile import silence_in_worker
from .executor_core import (BoundData, ExampleError, OracleTimeout, PendingCall, SerialExecutor, check_oracle_timeout,
                            new_key, run_examples, timeout_error)

if TYPE_CHECKING:
    from .models.base import StructuredModel

__all__ = ["BoundData", "ExampleError", "OracleTimeout", "PendingCall", "SerialExecutor", "ThreadExecutor",
           "ProcessExecutor", "EXECUTORS", "check_oracle_timeout", "get_executor", "new_key", "run_examples",
           "timeout_error", "die_with_parent"]

_T = TypeVar("_T")

#: a worker process's bound data sets, filled by its initializer
_WORKER_DATA: dict[int, BoundData] = {}
#: a worker process's row of its pool's `_Board` (None without an oracle timeout)
_WORKER_PROGRESS: _Progress | None = None


def _wait(future: Future[list[Any]], oracle_timeout: float | None, indices: Collection[Any],
          inflight: _Inflight, board: _Board | None) -> list[Any]:
    """future.result(), raising OracleTimeout once an example's oracle overstays (oracle_timeout None: wait for ever).

    Parameters
    ----------
    future : Future
        The call waited for.
    oracle_timeout : float or None
        Seconds one example's oracle may run.
    indices : collection of int
        The call's examples (named only if the workers are stuck outside the oracles).
    inflight : _Inflight
        The executor's calls in flight: when this one was submitted, when the last one finished.
    board : _Board or None
        What each worker of the call's pool is running (None without a timeout).

    Returns
    -------
    list
        The call's labellings.

    Raises
    ------
    OracleTimeout
        When a worker's current example has run longer than oracle_timeout -- in this
        call or another one: a hung worker holds up the calls queued behind it, so the
        example that hung is named, whichever call it belongs to.  Also when no worker
        runs any oracle while this call waits, for len(indices) * oracle_timeout
        seconds since the later of its submission, the last finished call and the
        board's last change: workers stuck outside the oracles.
    """
    if oracle_timeout is None or board is None:
        return future.result()
    stuck_after = oracle_timeout * max(len(indices), 1)
    look_every = max(oracle_timeout / 4, 1e-3)  # an overstay is seen at most a quarter limit late
    while True:
        try:
            return future.result(timeout=look_every)
        except FuturesTimeout:
            if future.done():  # the oracle itself raised a TimeoutError (not wrapped): not ours to rename
                raise
        now = time.monotonic()
        running = board.running()
        hung = sorted({i for i, started in running if now - started > oracle_timeout})
        if hung:
            raise _hung_error(oracle_timeout, hung) from None
        if not running and now >= max(inflight.deadline(future, stuck_after), board.last_change() + stuck_after):
            raise _stuck_error(oracle_timeout, stuck_after, indices) from None


def _examples(blocks: Sequence[int]) -> str:
    return (f"example {blocks[0]}" if len(blocks) == 1 else
            f"examples {blocks[:10]}{'...' if len(blocks) > 10 else ''}")


def _hung_error(oracle_timeout: float, hung: Sequence[int]) -> OracleTimeout:
    """The OracleTimeout of examples whose own oracle ran past the limit."""
    which = _examples(hung)
    return OracleTimeout(f"the oracle did not return within oracle_timeout={oracle_timeout:g} s (per example, timed "
                         f"from the start of that example's oracle): {which} hung; the workers are ended when the "
                         f"executor closes", hung)


def _stuck_error(oracle_timeout: float, limit: float, indices: Collection[SupportsInt]) -> OracleTimeout:
    """The OracleTimeout of a call that waited ``limit`` s while no worker ran any oracle."""
    blocks = [int(i) for i in indices]
    return OracleTimeout(f"no worker started an oracle for {limit:g} s while the call on {_examples(blocks)} waited "
                         f"(oracle_timeout={oracle_timeout:g} s per example, {len(blocks)} in the call): the workers "
                         f"are stuck outside the oracles (starting, or receiving the data); they are ended when the "
                         f"executor closes", blocks)


class _Board:
    """Which example each worker's oracle is running, and since when: the per-example timeout's clock.

    One row per worker (thread, or process: then in shared memory) of three numbers:
    busy (1.0 while the worker runs a call, else 0.0), the example it is on, and the
    ``time.monotonic()`` of the row's last change -- the start of that example's oracle,
    or when the worker went idle.  CLOCK_MONOTONIC is system-wide, so the times a
    worker process writes compare with the parent's.

    There is no lock: a worker killed while it held one would block every waiter.
    A worker writes the time first and the busy flag last (`_Progress`), the waiter
    reads them the other way round (`running`), so a row read while it changes pairs
    an old example with a new time at worst: a fresh time, which no timeout acts on.

    Parameters
    ----------
    slots : int
        Rows (workers).
    shared : bool
        Put the rows in shared memory, for worker processes (which claim a row each with `claim`).
    """

    def __init__(self, slots: int, shared: bool = False) -> None:
        self.buffer: Any = multiprocessing.RawArray("d", 3 * slots) if shared else bytearray(24 * slots)
        #: the next row a worker process may claim (a process pool gives its workers no number)
        self.claimed: Any = multiprocessing.Value("i", 0) if shared else None
        self._rows = np.frombuffer(self.buffer, np.float64).reshape(slots, 3)

    @classmethod
    def attach(cls, buffer: Any, claimed: Any) -> _Board:
        """The board of a worker process: the parent's shared rows."""
        board = cls.__new__(cls)
        board.buffer, board.claimed = buffer, claimed
        board._rows = np.frombuffer(buffer, np.float64).reshape(-1, 3)
        return board

    def claim(self) -> int | None:
        """A worker process's own row (None when all are taken: it then reports nothing)."""
        with self.claimed.get_lock():
            slot = int(self.claimed.value)
            self.claimed.value = slot + 1
        return slot if slot < len(self._rows) else None

    def progress(self, slot: int | None) -> _Progress | None:
        """The handle through which the worker of row ``slot`` reports its examples."""
        return None if slot is None else _Progress(self._rows[slot])

    def running(self) -> list[tuple[int, float]]:
        """(example, start time of its oracle) of every busy worker."""
        out = []
        for row in self._rows:
            if row[0]:  # busy first, the time last: see the class docstring
                i = int(row[1])
                out.append((i, float(row[2])))
        return out

    def last_change(self) -> float:
        """When a worker last started an example or went idle (0.0 if none ever did)."""
        return float(self._rows[:, 2].max()) if len(self._rows) else 0.0


class _Progress:
    """A worker's writes to its row of a `_Board`: the example it starts, and when it is idle again."""

    __slots__ = ("row",)

    def __init__(self, row: npt.NDArray[np.float64]) -> None:
        self.row = row

    def start(self, i: int) -> None:
        row = self.row
        row[2] = time.monotonic()  # the time first, the busy flag last: see _Board
        row[1] = i
        row[0] = 1.0

    def idle(self) -> None:
        row = self.row
        row[0] = 0.0
        row[2] = time.monotonic()


def _init_worker(bound: dict[int, BoundData], parent: int, board: tuple[Any, Any] | None = None) -> None:
    """A worker process starts: signals, death with the parent, the data sets, and its row of the board."""
    global _WORKER_PROGRESS
    # Ctrl-C goes to the whole foreground process group: the parent decides (it ends the fit at a
    # safe point, or on a second Ctrl-C ends us through close), a worker must not die of it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a forked worker inherits the parent's Python handlers, which run only between bytecodes: the
    # default action ends the worker even inside a compiled oracle that holds the GIL
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent)
    silence_in_worker()
    _WORKER_DATA.update(bound)
    if board is not None:
        shared = _Board.attach(*board)
        _WORKER_PROGRESS = shared.progress(shared.claim())


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Linux: have the kernel send SIGTERM to this worker when its parent dies (even by SIGKILL).

    Chosen over a watchdog thread polling os.getppid(): the kernel signal needs no thread,
    has no polling delay, and ends a worker stuck in a compiled oracle that holds the GIL
    (where a watchdog thread could never run).  The signal follows the parent *thread* that
    started the worker: the pools are started and closed by the thread of one fit; a worker
    lost when that thread ends is replaced like any dead worker (its calls are sent again).
    Elsewhere nothing is done: orphans then end when their parent's pipe closes, or not at all.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):  # no libc symbols (unusual builds): keep the worker anyway
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _run_in_worker(key: int, augmented: bool, indices: Iterable[Any], w: npt.NDArray[np.float64]) -> list[Any]:
    return run_examples(_WORKER_DATA[key], augmented, indices, w, _WORKER_PROGRESS)


class _Inflight:
    """An executor's futures that have not finished (close() must not wait for them), and when each
    was submitted and the last one finished: the clock of workers stuck outside the oracles (`_wait`)."""

    def __init__(self) -> None:
        self._started: dict[Future[Any], float] = {}
        self.last_done = time.monotonic()

    def add(self, future: Future[_T]) -> Future[_T]:
        self._started[future] = time.monotonic()
        future.add_done_callback(self._done)  # runs at once if already done
        return future

    def _done(self, future: Future[Any]) -> None:
        self.last_done = time.monotonic()
        self._started.pop(future, None)

    def deadline(self, future: Future[Any], limit: float) -> float:
        return max(self._started.get(future, 0.0), self.last_done) + limit

    def any(self) -> bool:
        return any(not f.done() for f in list(self._started))

    def clear(self) -> None:
        self._started.clear()


class ProcessExecutor(SerialExecutor):
    """Runs oracles on ``n_jobs`` local processes that hold the bound data sets.

    The data travel once, when the pool starts (a data set bound later restarts the
    pool); each call sends index ranges and w.  Worth it when one oracle call costs
    much more than sending w (graph cuts, large grids), not for OCR's Viterbi.

    Parameters
    ----------
    n_jobs : int
        Worker processes.
    oracle_timeout : float or None
        Seconds one example's oracle may take.  Each example is timed from the start
        of its own oracle (a worker runs the examples of a call in turn and reports
        each, `_Board`): once one has run longer, the waiting call raises
        `OracleTimeout` naming that example -- about oracle_timeout seconds after it
        started, whatever the size of its call.  A call queued behind busy workers is
        not timed out for its wait.  The first example on a new worker also loads the
        compiled oracle: allow for it.  None waits for ever.

    Notes
    -----
    A worker process that dies (killed, out of memory, an oracle that crashes the
    interpreter) is replaced: the pool is restarted with the bound data sets and the
    calls it held are sent again (at most `MAX_RESENDS` times each), whether the death
    shows while a call runs or, for a worker that died while the pool was idle, when
    the next call is submitted.  `close` (or leaving a ``with`` block) terminates
    workers whose calls are still running (a hung oracle, an aborted fit); the workers
    ignore Ctrl-C (the parent handles it) and, on Linux, die with their parent.
    """

    def __init__(self, n_jobs: int, oracle_timeout: float | None = None) -> None:
        super().__init__()
        self.n_jobs = int(n_jobs)
        self.oracle_timeout = check_oracle_timeout(oracle_timeout)
        self._pool: ProcessPoolExecutor | None = None
        self._board: _Board | None = None  # of self._pool; a new pool gets a new one (no dead worker's row)
        self._inflight = _Inflight()

    def bind(self, model: StructuredModel, X: Sequence[Any], Y: Sequence[Any] | None = None) -> int:
        key = super().bind(model, X, Y)
        self._shutdown()  # the workers must start with the new data set
        return key

    def _workers(self) -> ProcessPoolExecutor:
        """The pool (started, with the bound data sets and a fresh board, if there is none)."""
        if self._pool is None:
            self._board = _Board(self.n_jobs, shared=True) if self.oracle_timeout is not None else None
            board = None if self._board is None else (self._board.buffer, self._board.claimed)
            self._pool = ProcessPoolExecutor(self.n_jobs, initializer=_init_worker,
                                             initargs=(dict(self._data), os.getpid(), board))
        return self._pool

    def submit(self, key: int, w: npt.NDArray[np.float64], indices: Collection[Any]) -> _ResentCall:
        return _ResentCall(self, (key, True, np.asarray(indices, np.int64), w))

    def _map(self, key: int, augmented: bool, indices: Iterable[Any] | None, w: npt.NDArray[np.float64]) -> list[Any]:
        idx = np.arange(self._size(key)) if indices is None else np.asarray(indices, np.int64)
        bounds = np.linspace(0, len(idx), self.n_jobs * 4 + 1).astype(int)
        calls = [_ResentCall(self, (key, augmented, idx[a:b], w)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        out = []
        for call in calls:
            out.extend(call.result())
        return out

    def _restart(self, broken: ProcessPoolExecutor) -> ProcessPoolExecutor:
        """A worker died (the pool is broken): a new pool, with the data, unless a call already made one.

        Every call that finds the pool broken -- at submission or while waiting -- comes
        here with the pool it used; the first one replaces it, the others get the new one."""
        if self._pool is broken:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        return self._workers()

    def _shutdown(self, hurry: bool = False) -> None:
        """End the pool: idle workers finish; with ``hurry`` and calls still running, they are terminated."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if hurry and self._inflight.any():
            _terminate_pool(pool)
        else:
            pool.shutdown()
        self._inflight.clear()

    def close(self) -> None:
        """End the workers (terminating those still running a call) and drop the data sets."""
        self._shutdown(hurry=True)
        super().close()


def _terminate_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a process pool whose workers may be running calls that will never return."""
    # ProcessPoolExecutor has no public way to end busy workers before Python 3.14
    # (terminate_workers); its process table is the only handle on them
    terminate = getattr(pool, "terminate_workers", None)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    if terminate is not None:
        terminate()
    else:
        for p in processes:
            if p.is_alive():
                p.terminate()
    for p in processes:
        p.join(5.0)
        if p.is_alive():  # SIGTERM blocked or ignored by the oracle's own code
            p.kill()
            p.join(5.0)


#: how many times one call is sent again after its worker process died
MAX_RESENDS = 3


class _ResentCall:
    """One call on a process pool, sent again on a new pool when a worker died.

    A dead worker shows in one of two places: when the call is submitted (a worker
    that died while the pool was idle: the pool noticed, and refuses new calls at
    once) or while it is waited for (the pool breaks under the running call).  Both
    go the same way: restart the pool (`ProcessExecutor._restart`: the data sets are
    bound again) and send the call again, at most `MAX_RESENDS` times in all.
    """

    def __init__(self, executor: ProcessExecutor,
                 args: tuple[int, bool, npt.NDArray[np.int64], npt.NDArray[np.float64]]) -> None:
        self.executor, self.args = executor, args
        self.resends = 0
        self._send(executor._workers())

    def _send(self, pool: ProcessPoolExecutor) -> None:
        """Submit the call on ``pool``, restarting it as often as it is found broken."""
        while True:
            try:
                future = pool.submit(_run_in_worker, *self.args)
            except BrokenProcessPool:
                self._count_resend()
                pool = self.executor._restart(pool)
                continue
            self.pool, self.board = pool, self.executor._board  # the pool's board (_workers made both)
            self.future = self.executor._inflight.add(future)
            return

    def _count_resend(self) -> None:
        """One more send after a death; RuntimeError once they are used up."""
        if self.resends >= MAX_RESENDS:
            blocks = [int(i) for i in self.args[2]]
            raise RuntimeError(f"worker processes died {MAX_RESENDS + 1} times while the oracles of examples "
                               f"{blocks[:10]}{'...' if len(blocks) > 10 else ''} were sent or running; "
                               f"giving up") from None
        self.resends += 1

    def result(self) -> list[Any]:
        while True:
            try:
                return _wait(self.future, self.executor.oracle_timeout, self.args[2], self.executor._inflight,
                             self.board)
            except BrokenProcessPool:
                self._count_resend()
                self._send(self.executor._restart(self.pool))


class _DaemonThreadPool:
    """A minimal thread pool of daemon threads.

    concurrent.futures' ThreadPoolExecutor joins its threads when the interpreter exits, so
    one oracle that never returns would keep the process alive after the fit was aborted
    (second Ctrl-C, oracle timeout).  A thread cannot be killed; a daemon thread at least
    does not hold the exit."""

    def __init__(self, n_threads: int) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = \
            queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, args=(k,), name=f"structfw-oracle-{k}", daemon=True)
                         for k in range(n_threads)]
        for t in self._threads:
            t.start()

    def _work(self, k: int) -> None:
        _THREAD_SLOT.k = k  # which row of the executor's board this thread writes (_run_on_thread)
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._run(*item)
            item = None  # no reference to w or a result while idle

    @staticmethod
    def _run(future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = fn(*args)
        except BaseException as exc:  # delivered by result(), like ThreadPoolExecutor
            future.set_exception(exc)
        else:
            future.set_result(result)

    def submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        future: Future[_T] = Future()
        self._queue.put((future, fn, args))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        if cancel_futures:
            try:
                while True:
                    item = self._queue.get_nowait()
                    if item is not None:
                        item[0].cancel()
            except queue.Empty:
                pass
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for t in self._threads:
                t.join()


#: the number of a `_DaemonThreadPool` thread, in that thread
_THREAD_SLOT = threading.local()


def _run_on_thread(board: _Board | None, data: BoundData, augmented: bool, indices: Iterable[Any],
                   w: npt.NDArray[np.float64]) -> list[Any]:
    """`_run` on a pool thread, reporting its examples on its row of ``board`` (if any)."""
    return run_examples(data, augmented, indices, w, None if board is None else board.progress(_THREAD_SLOT.k))


class _TimedCall:
    """One call on a thread pool; result() raises OracleTimeout once an example's oracle overstays."""

    def __init__(self, executor: ThreadExecutor, future: Future[list[Any]], indices: Collection[Any],
                 board: _Board | None) -> None:
        self.executor, self.future, self.indices, self.board = executor, future, indices, board

    def result(self) -> list[Any]:
        return _wait(self.future, self.executor.oracle_timeout, self.indices, self.executor._inflight, self.board)


class ThreadExecutor(SerialExecutor):
    """Runs oracles on ``n_jobs`` threads of this process (the data are shared, nothing is sent).

    Worth it when the oracle releases the GIL: the numba kernels (``nogil=True``: chain
    Viterbi, the Boykov-Kolmogorov min cut of the graph-cut models) do; pure-Python oracles
    do not, and then processes are the choice.

    Parameters
    ----------
    n_jobs : int
        Worker threads.
    oracle_timeout : float or None
        Seconds one example's oracle may take, timed from that example's own start
        (see `ProcessExecutor`); the waiting call then raises `OracleTimeout` naming
        the example.  A thread cannot be killed: the hung oracle keeps its thread until
        it returns (the threads are daemons, so it does not hold the interpreter's
        exit); use processes for oracles that may hang.
    """

    def __init__(self, n_jobs: int, oracle_timeout: float | None = None) -> None:
        super().__init__()
        self.n_jobs = int(n_jobs)
        self.oracle_timeout = check_oracle_timeout(oracle_timeout)
        self._pool: _DaemonThreadPool | None = None
        self._board: _Board | None = None  # of self._pool (one row per thread), with a timeout only
        self._inflight = _Inflight()

    def _workers(self) -> _DaemonThreadPool:
        if self._pool is None:
            self._board = _Board(self.n_jobs) if self.oracle_timeout is not None else None
            self._pool = _DaemonThreadPool(self.n_jobs)
        return self._pool

    def _call(self, key: int, augmented: bool, indices: Collection[Any], w: npt.NDArray[np.float64]) -> _TimedCall:
        future = self._inflight.add(self._workers().submit(_run_on_thread, self._board, self._data[key], augmented,
                                                           indices, w))
        return _TimedCall(self, future, indices, self._board)

    def submit(self, key: int, w: npt.NDArray[np.float64], indices: Collection[Any]) -> _TimedCall:
        return self._call(key, True, indices, w)

    def _map(self, key: int, augmented: bool, indices: Iterable[Any] | None, w: npt.NDArray[np.float64]) -> list[Any]:
        idx = np.arange(self._size(key)) if indices is None else np.asarray(indices, np.int64)
        bounds = np.linspace(0, len(idx), self.n_jobs + 1).astype(int)
        calls = [self._call(key, augmented, idx[a:b], w) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        out = []
        for call in calls:
            out.extend(call.result())
        return out

    def close(self) -> None:
        """End the threads; calls still running are not waited for (their threads end when they return)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            busy = self._inflight.any()
            pool.shutdown(wait=not busy, cancel_futures=True)
            self._inflight.clear()
        super().close()


EXECUTORS = ("process", "thread", "ray")


def parse_executor(backend: str) -> tuple[str, str | None]:
    """("process" | "thread" | "ray", Ray address or None) from ``"ray:ADDRESS"`` and the plain names."""
    if isinstance(backend, str) and backend.startswith("ray:"):
        address = backend[4:].strip()
        if not address:
            raise ValueError("executor 'ray:ADDRESS' needs an address after 'ray:' (e.g. 'ray:auto' or "
                             "'ray:ray://head:10001'); plain 'ray' starts or joins the local cluster")
        return "ray", address
    if backend not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS} or 'ray:ADDRESS'; got {backend!r}")
    return backend, None


def check_n_jobs(n_jobs: int | None) -> int | None:
    """n_jobs as given, after checking it is None, -1 or a positive integer."""
    if n_jobs is not None and (not isinstance(n_jobs, (int, np.integer)) or isinstance(n_jobs, bool)
                               or n_jobs == 0 or n_jobs < -1):
        raise ValueError(f"n_jobs must be None, -1 or a positive integer; got {n_jobs!r}")
    return n_jobs


def get_executor(n_jobs: int | None = None, backend: str = "process",
                 oracle_timeout: float | None = None) -> SerialExecutor:
    """The executor for ``n_jobs`` workers of kind ``backend``.

    Parameters
    ----------
    n_jobs : int or None
        None or 1 serial (except with Ray: one actor), ``k > 1`` k workers, ``-1`` one per
        CPU (of the Ray cluster with Ray).
    backend : str
        "process", "thread", "ray" (the local cluster, started if none runs, or the one
        named by the ``RAY_ADDRESS`` environment variable) or "ray:ADDRESS".
    oracle_timeout : float or None
        Seconds one example's oracle may take on a worker, timed from that example's
        own start; once one takes longer, `OracleTimeout` is raised naming it (Ray
        times a call of k examples as a whole, k * oracle_timeout).  A serial in-process oracle
        cannot be pre-empted (a numba kernel holds the thread), so with a timeout the
        oracles always run on workers: one, for ``n_jobs`` None or 1.  Without one, a
        second Ctrl-C is the way out of a hung oracle.

    Returns
    -------
    SerialExecutor
        Or a subclass; a context manager whose exit ends its workers.
    """
    kind, address = parse_executor(backend)
    check_n_jobs(n_jobs)
    oracle_timeout = check_oracle_timeout(oracle_timeout)
    if kind == "ray":
        from .executor_ray import RayExecutor

        return RayExecutor(n_jobs, address, oracle_timeout=oracle_timeout)
    if n_jobs == -1:
        n_jobs = os.cpu_count() or 1
    if n_jobs is None or n_jobs == 1:
        if oracle_timeout is None:
            return SerialExecutor()
        n_jobs = 1
    if kind == "thread":
        return ThreadExecutor(n_jobs, oracle_timeout)
    return ProcessExecutor(n_jobs, oracle_timeout)
