"""One executor for every "oracle over many examples at once" (docs/design.md, "Layers").

Gap passes, batch FW steps, minibatches, cutting-plane rounds, test-loss checkpoints
and prediction go through it, so they run serially, on local threads or processes, or
on a Ray cluster (:mod:`structfw.executor_ray`) without the solvers changing.  A data
set is *bound* once (:meth:`SerialExecutor.bind`): the model and the examples go to the
workers once, and every later call sends only block indices and w.  An example whose
oracle raises is named in the error (:class:`ExampleError`), wherever it ran.

Besides the blocking calls, :meth:`SerialExecutor.submit` starts one oracle call and
returns a future: the asynchronous minibatch engine keeps a window of them in flight.
"""
from __future__ import annotations

import itertools
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

#: a worker process's bound data sets, filled by its initializer
_WORKER_DATA: dict = {}
_KEYS = itertools.count()


class ExampleError(RuntimeError):
    """An oracle or decoder raised on one example; the message names it."""


def _run(data, augmented, indices, w):
    """Loss-augmented decoding (or plain decoding) of the examples ``indices`` of data = (model, X, Y) at w."""
    model, X, Y = data
    out = []
    for i in indices:
        try:
            out.append(model.loss_augmented_decode(X[i], Y[i], w) if augmented else model.decode(X[i], w))
        except Exception as exc:  # the worker's traceback is lost across processes: say where
            what = "loss_augmented_decode" if augmented else "decode"
            raise ExampleError(f"{type(model).__name__}.{what} failed on example {int(i)}: "
                               f"{type(exc).__name__}: {exc}") from exc
    return out


def _init_worker(bound):
    _WORKER_DATA.update(bound)


def _run_in_worker(key, augmented, indices, w):
    return _run(_WORKER_DATA[key], augmented, indices, w)


class SerialExecutor:
    """Runs oracles in the calling process, one example after another."""

    n_jobs = 1

    def __init__(self):
        self._data = {}

    def bind(self, model, X, Y=None):
        """Make (model, X, Y) resident where the oracles run; returns a handle for the calls."""
        key = next(_KEYS)
        self._data[key] = (model, X, Y)
        return key

    def loss_augmented_decode(self, key, w, indices=None):
        """[argmax_y H_i(y; w) for i in indices] (all bound examples by default)."""
        return self._map(key, True, indices, w)

    def decode(self, key, w, indices=None):
        """[argmax_y <w, phi(x_i, y)> for i in indices]."""
        return self._map(key, False, indices, w)

    def submit(self, key, w, indices):
        """Start the loss-augmented decoding of ``indices`` at w; a future of the labellings.

        w is read when the call starts, so the caller must not change it in place
        before then: pass a copy it keeps.  Serially the work is done here, at once."""
        fut = Future()
        try:
            fut.set_result(_run(self._data[key], True, indices, w))
        except Exception as exc:  # delivered by result(), like a worker's error
            fut.set_exception(exc)
        return fut

    def _size(self, key):
        return len(self._data[key][1])

    def _map(self, key, augmented, indices, w):
        idx = range(self._size(key)) if indices is None else indices
        return _run(self._data[key], augmented, idx, w)

    def close(self):
        self._data = {}


class ProcessExecutor(SerialExecutor):
    """Runs oracles on ``n_jobs`` local processes that hold the bound data sets.

    The data travel once, when the pool starts (a data set bound later restarts the
    pool); each call sends index ranges and w.  Worth it when one oracle call costs
    much more than sending w (graph cuts, large grids), not for OCR's Viterbi.
    """

    def __init__(self, n_jobs):
        super().__init__()
        self.n_jobs = int(n_jobs)
        self._pool = None

    def bind(self, model, X, Y=None):
        key = super().bind(model, X, Y)
        self._shutdown()  # the workers must start with the new data set
        return key

    def _workers(self):
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.n_jobs, initializer=_init_worker, initargs=(dict(self._data),))
        return self._pool

    def submit(self, key, w, indices):
        return _ResentCall(self, (key, True, np.asarray(indices, np.int64), w))

    def _map(self, key, augmented, indices, w):
        idx = np.arange(self._size(key)) if indices is None else np.asarray(indices, np.int64)
        bounds = np.linspace(0, len(idx), self.n_jobs * 4 + 1).astype(int)
        calls = [_ResentCall(self, (key, augmented, idx[a:b], w)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        out = []
        for call in calls:
            out.extend(call.result())
        return out

    def _restart(self, broken):
        """A worker died (the pool is broken): a new pool, with the data, unless a call already made one."""
        if self._pool is broken:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        return self._workers()

    def _shutdown(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


#: how many times one call is sent again after its worker process died
MAX_RESENDS = 3


class _ResentCall:
    """One call on a process pool; result() sends it again on a new pool if a worker died."""

    def __init__(self, executor, args):
        self.executor, self.args = executor, args
        self.pool = executor._workers()
        self.future = self.pool.submit(_run_in_worker, *args)

    def result(self):
        for _ in range(MAX_RESENDS):
            try:
                return self.future.result()
            except BrokenProcessPool:
                self.pool = self.executor._restart(self.pool)
                self.future = self.pool.submit(_run_in_worker, *self.args)
        try:
            return self.future.result()
        except BrokenProcessPool:
            blocks = [int(i) for i in self.args[2]]
            raise RuntimeError(f"worker processes died {MAX_RESENDS + 1} times running the oracles of examples "
                               f"{blocks[:10]}{'...' if len(blocks) > 10 else ''}; giving up") from None

    def close(self):
        self._shutdown()
        super().close()


class ThreadExecutor(SerialExecutor):
    """Runs oracles on ``n_jobs`` threads of this process (the data are shared, nothing is sent).

    Worth it when the oracle releases the GIL: the numba kernels (``nogil=True``: chain
    Viterbi, the Boykov-Kolmogorov min cut of the graph-cut models) do; pure-Python oracles
    do not, and then processes are the choice.
    """

    def __init__(self, n_jobs):
        super().__init__()
        self.n_jobs = int(n_jobs)
        self._pool = None

    def _workers(self):
        from concurrent.futures import ThreadPoolExecutor

        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.n_jobs)
        return self._pool

    def submit(self, key, w, indices):
        return self._workers().submit(_run, self._data[key], True, indices, w)

    def _map(self, key, augmented, indices, w):
        pool = self._workers()
        idx = np.arange(self._size(key)) if indices is None else np.asarray(indices, np.int64)
        bounds = np.linspace(0, len(idx), self.n_jobs + 1).astype(int)
        data = self._data[key]
        futures = [pool.submit(_run, data, augmented, idx[a:b], w)
                   for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        out = []
        for f in futures:
            out.extend(f.result())
        return out

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        super().close()


EXECUTORS = ("process", "thread", "ray")


def parse_executor(backend):
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


def check_n_jobs(n_jobs):
    """n_jobs as given, after checking it is None, -1 or a positive integer."""
    if n_jobs is not None and (not isinstance(n_jobs, (int, np.integer)) or isinstance(n_jobs, bool)
                               or n_jobs == 0 or n_jobs < -1):
        raise ValueError(f"n_jobs must be None, -1 or a positive integer; got {n_jobs!r}")
    return n_jobs


def get_executor(n_jobs=None, backend="process"):
    """The executor for ``n_jobs`` workers of kind ``backend``.

    ``n_jobs``: None or 1 serial (except with Ray: one actor), ``k > 1`` k workers,
    ``-1`` one per CPU (of the Ray cluster with Ray).  ``backend``: "process",
    "thread", "ray" (the local cluster, started if none runs, or the one named by the
    ``RAY_ADDRESS`` environment variable) or "ray:ADDRESS"."""
    kind, address = parse_executor(backend)
    check_n_jobs(n_jobs)
    if kind == "ray":
        from .executor_ray import RayExecutor

        return RayExecutor(n_jobs, address)
    if n_jobs is None or n_jobs == 1:
        return SerialExecutor()
    if n_jobs == -1:
        n_jobs = os.cpu_count() or 1
    if n_jobs == 1:
        return SerialExecutor()
    return ThreadExecutor(n_jobs) if kind == "thread" else ProcessExecutor(n_jobs)
