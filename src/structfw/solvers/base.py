"""What every solver shares: stopping rules, monitoring, checkpoints, results.

Monitoring (full gap passes, test error) is timed apart from optimisation and
its oracle calls are counted apart (``monitor_calls``), as DESIGN.md section 1
asks.  A Ctrl-C during a solve stops it cleanly: the engine finishes the block
it is on, and :meth:`Monitor.finish` keeps the iterate with the lowest primal
among the evaluated ones (the current iterate is evaluated once more unless a
second Ctrl-C arrives).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..trace import Trace


@dataclass
class StopRule:
    """When a solve ends.

    Parameters
    ----------
    max_passes : float
        Passes over the data (n block iterations, or one batch iteration, each).
    tol : float or None
        Stop at a checkpoint whose duality gap (absolute) is <= tol.
    check_every : int
        Passes between checkpoints (full gap passes).
    time_budget : float or None
        Seconds of optimisation time.
    """

    max_passes: float = 50
    tol: float | None = 1e-3
    check_every: int = 1
    time_budget: float | None = None

    def __post_init__(self):
        if not (isinstance(self.max_passes, (int, float, np.integer, np.floating)) and self.max_passes > 0):
            raise ValueError(f"max_passes must be a positive number; got {self.max_passes!r}")
        if self.tol is not None and not (self.tol >= 0):
            raise ValueError(f"tol must be None or a number >= 0; got {self.tol!r}")
        if not (isinstance(self.check_every, (int, np.integer)) and self.check_every >= 1):
            raise ValueError(f"check_every must be an integer >= 1; got {self.check_every!r}")
        if self.time_budget is not None and not (self.time_budget > 0):
            raise ValueError(f"time_budget must be None or a positive number of seconds; got {self.time_budget!r}")


@dataclass
class SolveResult:
    """What a solve returns.

    Attributes
    ----------
    w : ndarray
        The returned weight vector (the averaged iterate for averaged solvers).
    state : object
        Solver state for warm starts (lam-independent corners, block parts).
    trace : Trace
    stopped : str
        "tol", "max_passes", "time_budget" or "interrupted".
    gap, primal, dual : float
        At the returned iterate (last checkpoint).
    """

    w: np.ndarray
    state: object
    trace: Trace
    stopped: str
    gap: float = math.nan
    primal: float = math.nan
    dual: float = math.nan
    extra: dict = field(default_factory=dict)


class Monitor:
    """Checkpoints, timing, stopping, progress bar and interrupt handling."""

    def __init__(self, problem, stop, meta, X_test=None, Y_test=None, verbose=0):
        self.problem, self.stop = problem, stop
        self.trace = Trace(meta)
        self.X_test, self.Y_test = X_test, Y_test
        self.verbose = int(verbose)
        self.monitor_calls = 0
        self._t0 = time.perf_counter()
        self._monitor_time = 0.0
        self._monitor_since = None
        self._bar = None
        self.best = None  # (primal, w copy, gap, dual)
        self.interrupted = False
        if self.verbose >= 1:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=float(stop.max_passes), unit="pass", leave=True,
                             bar_format="{l_bar}{bar}| {n:.1f}/{total:.0f} passes [{elapsed}<{remaining}]{postfix}")

    # -- time
    def start_clock(self):
        """Start counting optimisation time (solvers call it once their state is set up)."""
        self._t0 = time.perf_counter()
        self._monitor_time = 0.0

    def opt_time(self):
        """Seconds since start_clock() minus monitoring, including a monitoring block in progress."""
        now = time.perf_counter()
        in_progress = now - self._monitor_since if self._monitor_since is not None else 0.0
        return now - self._t0 - self._monitor_time - in_progress

    def monitoring(self):
        """Context manager: the time spent inside is monitoring, not optimisation."""
        mon = self

        class _Ctx:
            def __enter__(self):
                mon._monitor_since = time.perf_counter()

            def __exit__(self, *exc):
                mon._monitor_time += time.perf_counter() - mon._monitor_since
                mon._monitor_since = None
                return False

        return _Ctx()

    # -- checkpoints
    def test_loss(self, w):
        if self.X_test is None:
            return None
        pred = self.problem.executor.decode(self.problem.model, self.X_test, w)
        return self.problem.model.mean_loss(self.Y_test, pred)

    def record(self, w, passes, oracle_calls, primal, dual, gap, **extra):
        """Append a checkpoint row (call inside ``monitoring()``)."""
        row = dict(passes=passes, oracle_calls=oracle_calls, time_s=self.opt_time(),
                   primal=primal, dual=dual, gap=gap, monitor_calls=self.monitor_calls)
        tl = self.test_loss(w)
        if tl is not None:
            row["test_loss"] = tl
        row.update(extra)
        self.trace.append(**row)
        if self.best is None or primal < self.best[0]:
            self.best = (primal, w.copy(), gap, dual)
        if self._bar is not None:
            self._bar.n = min(float(extra.get("engine_passes", passes)), self._bar.total)
            post = f"gap={gap:.3g} primal={primal:.5g}" + (f" test={tl:.3f}" if tl is not None else "")
            self._bar.set_postfix_str(post, refresh=True)
        if self.verbose >= 2:
            print(f"pass {passes:7.2f}  gap {gap:.4e}  primal {primal:.6g}  time {row['time_s']:.2f}s", flush=True)

    def should_stop(self, engine_passes, gap):
        """Reason to stop at a checkpoint, or None."""
        if self.stop.tol is not None and gap is not None and gap <= self.stop.tol:
            return "tol"
        if engine_passes >= self.stop.max_passes - 1e-9:
            return "max_passes"
        if self.stop.time_budget is not None and self.opt_time() >= self.stop.time_budget:
            return "time_budget"
        return None

    def out_of_time(self):
        return self.stop.time_budget is not None and self.opt_time() >= self.stop.time_budget

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class Solver:
    """Base class of solvers: parameters in ``__init__``, work in :meth:`solve`."""

    name = "solver"
    has_dual = True

    def get_params(self):
        return dict(self._params)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"{type(self).__name__}({args})"

    def solve(self, problem, stop, state=None, rng=None, monitor=None):  # pragma: no cover
        raise NotImplementedError
