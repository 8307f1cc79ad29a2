"""One executor for every "oracle over many examples at once" (docs/design.md, "Layers").

Gap passes, batch FW steps, test-loss checkpoints and prediction go through it, so
they run serially or on local processes without the solvers changing.  A data set is
*bound* once (:meth:`SerialExecutor.bind`): the model and the examples go to the
workers when they start, and every later call sends only block indices and w.  An
example whose oracle raises is named in the error (:class:`ExampleError`), wherever
it ran.
"""
from __future__ import annotations

import itertools
import os
from concurrent.futures import ProcessPoolExecutor

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

    def _map(self, key, augmented, indices, w):
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.n_jobs, initializer=_init_worker, initargs=(dict(self._data),))
        idx = np.arange(self._size(key)) if indices is None else np.asarray(indices, np.int64)
        bounds = np.linspace(0, len(idx), self.n_jobs * 4 + 1).astype(int)
        futures = [self._pool.submit(_run_in_worker, key, augmented, idx[a:b], w)
                   for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        out = []
        for f in futures:
            out.extend(f.result())
        return out

    def _shutdown(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

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

    def _map(self, key, augmented, indices, w):
        from concurrent.futures import ThreadPoolExecutor

        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.n_jobs)
        idx = np.arange(self._size(key)) if indices is None else np.asarray(indices, np.int64)
        bounds = np.linspace(0, len(idx), self.n_jobs + 1).astype(int)
        data = self._data[key]
        futures = [self._pool.submit(_run, data, augmented, idx[a:b], w)
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


EXECUTORS = ("process", "thread")


def get_executor(n_jobs=None, backend="process"):
    """``None``/1: serial; ``k > 1``: k workers; ``-1``: one per CPU.  ``backend``: "process" or "thread"."""
    if backend not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}; got {backend!r}")
    if n_jobs is None or n_jobs == 1:
        return SerialExecutor()
    if not isinstance(n_jobs, (int, np.integer)) or isinstance(n_jobs, bool) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be None, -1 or a positive integer; got {n_jobs!r}")
    if n_jobs == -1:
        n_jobs = os.cpu_count() or 1
    if n_jobs == 1:
        return SerialExecutor()
    return ThreadExecutor(n_jobs) if backend == "thread" else ProcessExecutor(n_jobs)
