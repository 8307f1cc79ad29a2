"""The executors' core: what every executor shares, local or on a cluster (docs/design.md, "Layers").

A bound data set (`BoundData`), the handle of one (`new_key`), the oracle run over examples
that names the one that raised (`run_examples`), the errors (`ExampleError`,
`OracleTimeout`), the ``oracle_timeout`` check and `SerialExecutor`, the in-process executor
the others extend.  `structfw.executor` (threads, processes) and `structfw.executor_ray` (a Ray
cluster) both import these names from here; neither imports the other's internals.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, SupportsInt, TypeAlias, cast

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from .models.base import StructuredModel

#: a bound data set: (model, X, Y); Y is None for a set bound only to be decoded
BoundData: TypeAlias = "tuple[StructuredModel, Sequence[Any], Sequence[Any] | None]"

_KEYS = itertools.count()


def new_key() -> int:
    """A handle for a newly bound data set, unique in the process (across executors)."""
    return next(_KEYS)


class ExampleProgress(Protocol):
    """Told each example as its oracle starts, and when a call ends (a worker's row of the
    timeout board, `structfw.executor`)."""

    def start(self, i: int) -> None: ...

    def idle(self) -> None: ...


class PendingCall(Protocol):
    """An oracle call started by ``submit``: ``result()`` waits for its labellings (or raises its error)."""

    def result(self) -> list[Any]: ...


class ExampleError(RuntimeError):
    """An oracle or decoder raised on one example; the message names it."""


class OracleTimeout(ExampleError, TimeoutError):
    """An example's oracle did not return within ``oracle_timeout``; the message names the example.

    The limit is per example: each example's oracle is timed from its own start, also
    when a worker runs several examples of one call in turn (`ProcessExecutor`).

    Attributes
    ----------
    indices : list of int
        The examples whose oracles were still running past the limit (the ones that hung).
        When no worker was running any oracle at all (workers stuck before reaching
        them: starting, or receiving the data), the examples of the call that waited.
    """

    def __init__(self, message: str, indices: Iterable[SupportsInt] = ()) -> None:
        super().__init__(message)
        self.indices = [int(i) for i in indices]


def check_oracle_timeout(oracle_timeout: object) -> float | None:
    """oracle_timeout as a float, or None, after checking it is None or a finite number > 0."""
    if oracle_timeout is None:
        return None
    if isinstance(oracle_timeout, (bool, np.bool_)) or not isinstance(oracle_timeout, (int, float, np.integer,
                                                                                       np.floating)):
        raise ValueError(f"oracle_timeout must be None or a number of seconds > 0; got {oracle_timeout!r}")
    if not (math.isfinite(oracle_timeout) and oracle_timeout > 0):
        raise ValueError(f"oracle_timeout must be None or a finite number of seconds > 0; got {oracle_timeout!r}")
    return float(oracle_timeout)


def timeout_error(oracle_timeout: float, limit: float, indices: Collection[SupportsInt]) -> OracleTimeout:
    """The OracleTimeout of a call timed as a whole (the Ray executor: ``limit`` = k * oracle_timeout)."""
    blocks = [int(i) for i in indices]
    which = (f"example {blocks[0]}" if len(blocks) == 1 else
             f"one of examples {blocks[:10]}{'...' if len(blocks) > 10 else ''}")
    return OracleTimeout(f"the oracle did not return within {limit:g} s (oracle_timeout={oracle_timeout:g} s per "
                         f"example, {len(blocks)} in the call): {which} hung; the workers are ended when the "
                         f"executor closes", blocks)


def run_examples(data: BoundData, augmented: bool, indices: Iterable[Any], w: npt.NDArray[np.float64],
         progress: ExampleProgress | None = None) -> list[Any]:
    """Loss-augmented decoding (or plain decoding) of the examples ``indices`` of data = (model, X, Y) at w.

    ``progress``, when given, is told each example as its oracle starts, and when the call ends."""
    from .models.base import unchecked_method  # loaded already: the bound data set holds a model

    model, X, Y = data
    # the data were validated when bound (check_data): the model's methods without a user call's checks
    call = unchecked_method(model, "loss_augmented_decode" if augmented else "decode")
    out = []
    try:
        for i in indices:
            if progress is not None:
                progress.start(int(i))
            try:
                out.append(call(X[i], cast("Sequence[Any]", Y)[i], w) if augmented else call(X[i], w))  # with Y
            except Exception as exc:  # the worker's traceback is lost across processes: say where
                what = "loss_augmented_decode" if augmented else "decode"
                raise ExampleError(f"{type(model).__name__}.{what} failed on example {int(i)}: "
                                   f"{type(exc).__name__}: {exc}") from exc
    finally:
        if progress is not None:
            progress.idle()
    return out


class SerialExecutor:
    """Runs oracles in the calling process, one example after another.

    A serial oracle cannot be pre-empted: while it runs compiled code (a numba kernel
    holds the thread) neither a timeout nor Ctrl-C can stop it; a pure-Python oracle
    stops on a second Ctrl-C (`structfw._interrupt`).  Use a worker executor with
    ``oracle_timeout`` to bound its time.
    """

    n_jobs = 1
    oracle_timeout: float | None = None

    def __init__(self) -> None:
        self._data: dict[int, BoundData] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def bind(self, model: StructuredModel, X: Sequence[Any], Y: Sequence[Any] | None = None) -> int:
        """Make (model, X, Y) resident where the oracles run; returns a handle for the calls.

        The oracles run the model's methods unchecked (`structfw.models.base.unchecked_method`):
        X and Y must have passed ``model.check_data`` (every caller in structfw binds checked data)."""
        key = new_key()
        self._data[key] = (model, X, Y)
        return key

    def loss_augmented_decode(self, key: int, w: npt.NDArray[np.float64],
                              indices: Iterable[Any] | None = None) -> list[Any]:
        """[argmax_y H_i(y; w) for i in indices] (all bound examples by default)."""
        return self._map(key, True, indices, w)

    def decode(self, key: int, w: npt.NDArray[np.float64], indices: Iterable[Any] | None = None) -> list[Any]:
        """[argmax_y ⟨w, phi(x_i, y)⟩ for i in indices]."""
        return self._map(key, False, indices, w)

    def submit(self, key: int, w: npt.NDArray[np.float64], indices: Collection[Any]) -> PendingCall:
        """Start the loss-augmented decoding of ``indices`` at w; a future of the labellings.

        w is read when the call starts, so the caller must not change it in place
        before then: pass a copy it keeps.  Serially the work is done here, at once."""
        fut: Future[list[Any]] = Future()
        try:
            fut.set_result(run_examples(self._data[key], True, indices, w))
        except Exception as exc:  # delivered by result(), like a worker's error
            fut.set_exception(exc)
        return fut

    def _size(self, key: int) -> int:
        return len(self._data[key][1])

    def _map(self, key: int, augmented: bool, indices: Iterable[Any] | None, w: npt.NDArray[np.float64]) -> list[Any]:
        idx = range(self._size(key)) if indices is None else indices
        return run_examples(self._data[key], augmented, idx, w)

    def close(self) -> None:
        """Drop the bound data sets and end the workers (also what leaving a ``with`` block does)."""
        self._data = {}
