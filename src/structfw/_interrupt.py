"""Ctrl-C taken at safe points.

A KeyboardInterrupt raised by Python's default SIGINT handler can surface in the
middle of a block update, or while a numba kernel returns (it then appears as a
``SystemError``), and leave the solver state half-updated.  Long-running loops
therefore run inside :func:`deferred_sigint`: the handler only sets a flag, and
the loop polls :meth:`InterruptFlag.requested` between steps, where the state is
consistent, and ends the run "interrupted" with its best iterate.

Contexts nest (an estimator around a solver around a batch pass): all share one
flag, and the handler that was installed before the outermost context comes back
when it exits.  Outside the main thread no signal can be delivered to us, so the
context does nothing there.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class InterruptFlag:
    """The shared 'Ctrl-C was pressed' flag of the active :func:`deferred_sigint` contexts."""

    def __init__(self):
        self._requested = False
        self.count = 0

    @property
    def requested(self):
        return self._requested

    def set(self, *_):
        self._requested = True
        self.count += 1

    def clear(self):
        self._requested = False
        self.count = 0


_FLAG = InterruptFlag()
_depth = 0
_previous = None


@contextmanager
def deferred_sigint():
    """Within the block, SIGINT sets :data:`interrupt_flag` instead of raising KeyboardInterrupt.

    Yields the flag.  The flag is cleared when the outermost context is entered,
    so a fit never sees a Ctrl-C that was pressed before it started.
    """
    global _depth, _previous
    installed = False
    if threading.current_thread() is threading.main_thread():
        if _depth == 0:
            _FLAG.clear()
            try:
                _previous = signal.signal(signal.SIGINT, _FLAG.set)
                installed = True
            except (ValueError, OSError):  # embedded interpreters without signal support
                installed = False
        _depth += 1
    try:
        yield _FLAG
    finally:
        if threading.current_thread() is threading.main_thread():
            _depth -= 1
            if _depth == 0 and installed:
                signal.signal(signal.SIGINT, _previous if _previous is not None else signal.default_int_handler)
                _previous = None


def interrupt_requested():
    """True when a Ctrl-C arrived inside the active :func:`deferred_sigint` context."""
    return _FLAG.requested
