"""Ctrl-C taken at safe points, per fit.

A KeyboardInterrupt raised by Python's default SIGINT handler can surface in the
middle of a block update, or while a numba kernel returns (it then appears as a
``SystemError``), and leave the solver state half-updated.  Long-running loops
therefore run inside `deferred_sigint`: the handler only sets the fit's
`InterruptFlag`, and the loop polls `InterruptFlag.requested` between
steps, where the state is consistent, and ends the run "interrupted" with its best
iterate.

Every fit has its own flag (a token), never one shared by the process:

- The outermost context of a thread makes a fresh flag; the contexts nested in it
  (an estimator around a solver around a batch pass) share it.  A fit therefore never
  starts "interrupted" because of an earlier fit, in any thread.
- Python runs signal handlers in the main thread only, and the handler is installed
  only while a fit runs there: Ctrl-C stops the main thread's fit and nothing else.
  Fits in other threads are not affected (stop them with their own flag,
  `current_flag` inside the fit, or with their time budget).
- A second Ctrl-C while the first is still pending (the fit has not reached its safe
  point yet, e.g. an oracle hangs) aborts at once: the handler puts back the handler
  that was installed before the fit and raises KeyboardInterrupt, which ends the fit
  with no result; the executors' workers are ended on the way out (their ``close``
  runs in the fit's ``finally``).  A third Ctrl-C then goes to the previous handler.
  A serial in-process oracle cannot be pre-empted while it runs compiled code that
  holds the thread (a numba kernel): the KeyboardInterrupt surfaces when it returns.
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


class InterruptFlag:
    """One fit's "Ctrl-C was pressed" token, shared by the nested `deferred_sigint` contexts.

    Attributes
    ----------
    count : int
        Ctrl-C presses received (the second one aborts the fit).
    aborted : bool
        True once a second Ctrl-C aborted the fit: code that turns a KeyboardInterrupt
        into an "interrupted" result must let it through then.
    """

    def __init__(self) -> None:
        self._requested = False
        self.count = 0
        self.aborted = False

    @property
    def requested(self) -> bool:
        """True once an interrupt was requested for this fit."""
        return self._requested

    def set(self, *_: object) -> None:
        """Request the interrupt (a signal handler's signature is accepted, and ignored)."""
        self._requested = True
        self.count += 1

    def clear(self) -> None:
        self._requested = False
        self.count = 0
        self.aborted = False


# each thread's outermost context: its flag and the nesting depth; the signal handler runs in the
# main thread, so it reads the main thread's entry and cannot reach a fit of another thread
_local = threading.local()
# the SIGINT handler the main thread's outermost context replaced
_previous: Callable[[int, FrameType | None], Any] | int | None = None
_installed = False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    flag: InterruptFlag | None = getattr(_local, "flag", None)
    if flag is None:  # no fit in the main thread any more: behave as Python's default
        _restore_handler()
        raise KeyboardInterrupt
    if flag.requested:
        # the first Ctrl-C was not taken yet, so the fit is stuck (a hung oracle): stop waiting
        flag.set()
        flag.aborted = True
        _restore_handler()
        raise KeyboardInterrupt
    flag.set()


def _restore_handler() -> None:
    global _previous, _installed
    if _installed:
        _installed = False
        try:
            signal.signal(signal.SIGINT, _previous if _previous is not None else signal.default_int_handler)
        except (ValueError, OSError):  # pragma: no cover - interpreter shutting down
            pass
        _previous = None


@contextmanager
def deferred_sigint() -> Iterator[InterruptFlag]:
    """Within the block, SIGINT requests the interrupt of this fit instead of raising KeyboardInterrupt.

    Yields the fit's `InterruptFlag`: a fresh one in the outermost context of
    the thread (a fit never sees a Ctrl-C pressed before it started, nor one meant for
    another fit), the enclosing context's one when nested.  Only contexts of the main
    thread receive Ctrl-C; a second Ctrl-C while the first is pending raises
    KeyboardInterrupt at once (see the module's docstring).
    """
    global _previous, _installed
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        _local.flag = InterruptFlag()
        if threading.current_thread() is threading.main_thread():
            try:
                _previous = signal.signal(signal.SIGINT, _on_sigint)
                _installed = True
            except (ValueError, OSError):  # embedded interpreters without signal support
                _installed = False
    _local.depth = depth + 1
    flag: InterruptFlag = _local.flag
    try:
        yield flag
    finally:
        _local.depth -= 1
        if _local.depth == 0:
            if threading.current_thread() is threading.main_thread():
                _restore_handler()
            _local.flag = None


def current_flag() -> InterruptFlag | None:
    """The `InterruptFlag` of the fit running in this thread, or None outside any fit.

    Code running inside a fit (a model's oracle, a callback) may hand it to another
    thread, whose ``set()`` then stops that fit at its next safe point."""
    return getattr(_local, "flag", None)


def interrupt_requested() -> bool:
    """True when an interrupt was requested for the fit running in this thread."""
    flag: InterruptFlag | None = getattr(_local, "flag", None)
    return flag is not None and flag.requested
