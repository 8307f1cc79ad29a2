"""Progress of a command that runs many fits: one bar that every fit reports to.

A fit's own bar (``verbose=1``) moves after every pass.  A benchmark runs dozens of fits with
``verbose=0`` (their bars would scroll the screen away and cost time inside the measured
loops), and used to sit silent for minutes.  While a `FitsBar` is `listening`, every fit's
`structfw.solvers.base.Monitor` (and the kernel SVM's solver) reports to it: a fit started, a
pass done, a checkpoint's gap, the fit finished.  The bar counts finished fits against the
planned number (`FitsBar.plan`, when the command knows it: then its estimate of the time left is
the measured time per fit times the fits left) and shows the fit in flight: its label, its pass
against its ``max_passes``, its last gap and its own time left (its measured time per pass times
the passes left).

The listener is process-wide, not a context variable: fits that a benchmark runs in worker
threads report too.  The calls are cheap (a time read and a tqdm refresh at most every 0.2 s), so
timed loops are not disturbed.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

_LISTENER: FitsBar | None = None


def listener() -> FitsBar | None:
    """The bar fits report to now, or None (no command is listening)."""
    return _LISTENER


@contextmanager
def listening(bar: FitsBar) -> Iterator[FitsBar]:
    """Make ``bar`` the process's listener inside the block (the previous one after it)."""
    global _LISTENER
    previous, _LISTENER = _LISTENER, bar
    try:
        yield bar
    finally:
        _LISTENER = previous
        bar.close()


class _Fit:
    """A fit in flight, as the bar shows it."""

    __slots__ = ("label", "max_passes", "passes", "gap", "t0")

    def __init__(self, label: str, max_passes: float) -> None:
        self.label, self.max_passes = label, float(max_passes)
        self.passes, self.gap = 0.0, float("nan")
        self.t0 = time.perf_counter()

    def describe(self) -> str:
        text = f"{self.label} pass {self.passes:.0f}/{self.max_passes:.0f}"
        if self.gap == self.gap:
            text += f" gap {self.gap:.3g}"
        if self.passes >= 1 and self.max_passes < float("inf"):
            left = (time.perf_counter() - self.t0) / self.passes * max(self.max_passes - self.passes, 0.0)
            text += f" (<= {_clock(left)} left)"
        return text


_FORMATS = {True: "{l_bar}{bar}| {n_fmt}/{total_fmt} fits [{elapsed}<{remaining}]{postfix}",
            False: "{desc}: {n_fmt} fits [{elapsed}]{postfix}"}


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds}s"


class FitsBar:
    """A tqdm bar over the fits of one command (see the module's docstring).

    Parameters
    ----------
    desc : str
        What the command does (``"bench fig1"``), the bar's label.
    total : int or None
        Fits planned, if known up front (more may be added with `plan`).
    file : text stream
        Where the bar is drawn (standard error by default, so that JSON on standard output is
        untouched).
    disable : bool or None
        tqdm's: None (default) draws only on a terminal, so logs and captured output stay clean.
    """

    def __init__(self, desc: str, total: int | None = None, file: TextIO | None = None,
                 disable: bool | None = None, mininterval: float = 0.2) -> None:
        self.desc, self.total, self.file, self.disable = desc, total, file, disable
        self._lock = threading.Lock()
        self._fits: dict[int, _Fit] = {}
        self._next = 0
        self.finished = 0
        self.mininterval = mininterval
        self._last = 0.0
        self._bar: Any = None  # drawn at the first fit, so a command that runs none draws nothing

    @property
    def bar(self) -> Any:
        """The tqdm bar (made on first use)."""
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, unit="fit", leave=True, dynamic_ncols=True,
                             file=self.file if self.file is not None else sys.stderr, disable=self.disable,
                             bar_format=_FORMATS[self.total is not None])
        return self._bar

    def plan(self, fits: int) -> None:
        """Add ``fits`` fits to the planned total (the estimate of the time left uses it)."""
        with self._lock:
            bar = self.bar
            if bar.total is None:
                bar.total = 0
                bar.bar_format = _FORMATS[True]
            bar.total += int(fits)
            self._refresh(force=True)

    # -- what a fit reports (Monitor calls these)
    def started(self, label: str, max_passes: float) -> int:
        """A fit began; returns its key for the other calls."""
        with self._lock:
            key = self._next
            self._next += 1
            self._fits[key] = _Fit(label, max_passes)
            self._refresh(force=True)
        return key

    def advanced(self, key: int, passes: float) -> None:
        with self._lock:
            fit = self._fits.get(key)
            if fit is not None:
                fit.passes = float(passes)
                self._refresh()

    def recorded(self, key: int, passes: float, gap: float) -> None:
        with self._lock:
            fit = self._fits.get(key)
            if fit is not None:
                fit.passes, fit.gap = max(fit.passes, float(passes)), float(gap)
                self._refresh()

    def ended(self, key: int) -> None:
        with self._lock:
            if self._fits.pop(key, None) is not None:
                self.finished += 1
                self.bar.update(1)
                self._refresh(force=True)

    # -- drawing
    def _refresh(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last < self.mininterval:
            return
        self._last = now
        live = list(self._fits.values())
        post = live[-1].describe() if live else ""
        if len(live) > 1:
            post = f"{len(live)} fits running; {post}"
        self.bar.set_postfix_str(post, refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
