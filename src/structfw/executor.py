"""One executor for every "oracle over many examples at once" (docs/design.md, "Layers").

Batch FW steps, gap passes and prediction go through :func:`get_executor`;
the solvers never loop over examples themselves for these, so they can run
serially or on local processes without changing.
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np


def _chunk_decode(model, X, Y, w):
    if Y is None:
        return [model.decode(x, w) for x in X]
    return [model.loss_augmented_decode(x, y, w) for x, y in zip(X, Y)]


class SerialExecutor:
    """Runs oracles in the calling process, one example after another."""

    n_jobs = 1

    def loss_augmented_decode(self, model, X, Y, w):
        """[argmax_y H_i(y; w) for every example]."""
        return _chunk_decode(model, X, Y, w)

    def decode(self, model, X, w):
        return _chunk_decode(model, X, None, w)

    def close(self):
        pass


class ProcessExecutor(SerialExecutor):
    """Runs oracles on ``n_jobs`` local processes, in contiguous chunks.

    Worth it only when one oracle call costs much more than shipping an
    example to a worker (graph cuts, large grids), not for OCR's Viterbi.
    """

    def __init__(self, n_jobs):
        self.n_jobs = int(n_jobs)
        self._pool = None

    def _map(self, model, X, Y, w):
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.n_jobs)
        bounds = np.linspace(0, len(X), self.n_jobs * 4 + 1).astype(int)
        futures = [
            self._pool.submit(_chunk_decode, model, X[a:b], None if Y is None else Y[a:b], w)
            for a, b in zip(bounds[:-1], bounds[1:]) if b > a
        ]
        out = []
        for f in futures:
            out.extend(f.result())
        return out

    def loss_augmented_decode(self, model, X, Y, w):
        return self._map(model, X, Y, w)

    def decode(self, model, X, w):
        return self._map(model, X, None, w)

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def get_executor(n_jobs=None):
    """``None``/1: serial; ``k > 1``: k processes; ``-1``: one per CPU."""
    if n_jobs is None or n_jobs == 1:
        return SerialExecutor()
    if not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be None, -1 or a positive integer; got {n_jobs!r}")
    if n_jobs == -1:
        n_jobs = os.cpu_count() or 1
    return ProcessExecutor(n_jobs) if n_jobs > 1 else SerialExecutor()
