"""What every solver shares: options, the solve skeleton, stop rules, monitoring, results.

Monitoring (full gap passes, test error) is timed apart from optimisation and
its oracle calls are counted apart (``monitor_calls``, docs/design.md, "Passes
and oracle calls").  Every solver runs the one skeleton :meth:`Solver.solve`:
state set-up, passes, checkpoints, clock, stop rules, and Ctrl-C taken at a
safe point -- the end of the current block step -- after which the iterate
with the lowest evaluated primal is returned and the state stays usable for a
warm start.
"""
from __future__ import annotations

import math
import numbers
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._interrupt import deferred_sigint
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
    check_every : int or "auto"
        Passes between checkpoints.  A checkpoint of a block solver is a full
        oracle pass (plus a prediction pass over test data, if given), so
        checking after every pass doubles a fit's work; "auto" checks every
        ``ceil(9 * c)`` passes, c = the checkpoint's cost in passes, which keeps
        monitoring at or under 10 % of the work.  Batch solvers (FW, cutting
        plane) get the gap from the oracle pass they need anyway and check
        after every pass regardless.
    time_budget : float or None
        Seconds of optimisation time.
    """

    max_passes: float = 50
    tol: float | None = 1e-3
    check_every: int | str = "auto"
    time_budget: float | None = None

    def __post_init__(self):
        if not (isinstance(self.max_passes, (int, float, np.integer, np.floating)) and self.max_passes > 0):
            raise ValueError(f"max_passes must be a positive number; got {self.max_passes!r}")
        if self.tol is not None and not (self.tol >= 0):
            raise ValueError(f"tol must be None or a number >= 0; got {self.tol!r}")
        if not (self.check_every == "auto" or (isinstance(self.check_every, (int, np.integer))
                                                and not isinstance(self.check_every, bool) and self.check_every >= 1)):
            raise ValueError(f"check_every must be an integer >= 1 or 'auto'; got {self.check_every!r}")

    def checkpoint_interval(self, n, n_test=0):
        """Passes between checkpoints: ``check_every``, or for "auto" ``ceil(9 * (1 + n_test / n))``
        (a checkpoint costs one oracle pass plus a prediction pass over the n_test test examples)."""
        if self.check_every != "auto":
            return int(self.check_every)
        return max(1, math.ceil(9.0 * (1.0 + n_test / max(n, 1)) - 1e-9))
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
        self.n_test = 0 if X_test is None else len(X_test)
        self._test_key = None
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

            from .._compile import FIRST_RUN_MESSAGE, kernels_cached

            if kernels_cached() is False:
                # otherwise the bar sits at 0 % with a false ETA while numba compiles
                print(FIRST_RUN_MESSAGE, file=sys.stderr, flush=True)
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
        if hasattr(w, "decode_all"):  # a kernel expansion (KernelBCFW): w exists only implicitly
            return self.problem.model.mean_loss(self.Y_test, w.decode_all(self.X_test))
        if self._test_key is None:
            self._test_key = self.problem.executor.bind(self.problem.model, self.X_test)
        pred = self.problem.executor.decode(self._test_key, w)
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


# ======================================================================== parameters
@dataclass(frozen=True)
class Param:
    """One solver option, declared once: validation, defaults, CLI choices and docs read it.

    Parameters
    ----------
    name : str
    default : object
    kind : {"choice", "bool", "int", "float"}
    choices : tuple
        Allowed values of a "choice" option (may contain None).
    low : float or None
        Smallest allowed value of an "int"/"float" option (``low_open``: excluded).
    help : str
        One line for ``--help`` and the docs.
    """

    name: str
    default: object
    kind: str
    choices: tuple = ()
    low: float | None = None
    low_open: bool = False
    help: str = ""

    def check(self, value):
        """Raise ValueError naming the option unless ``value`` is allowed."""
        if self.kind == "choice":
            allowed = value is None if value is None else (
                isinstance(value, str) and value in [c for c in self.choices if isinstance(c, str)])
            if not allowed or (value is None and None not in self.choices):
                raise ValueError(f"{self.name} must be one of {self.choices}; got {value!r}")
            return
        if self.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{self.name} must be True or False; got {value!r}")
            return
        number = (numbers.Integral,) if self.kind == "int" else (numbers.Real,)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, number) or (
                self.kind == "float" and not math.isfinite(float(value))):
            what = "an integer" if self.kind == "int" else "a finite number"
            raise ValueError(f"{self.name} must be {what}{self._bound()}; got {value!r}")
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            what = "an integer" if self.kind == "int" else "a number"
            raise ValueError(f"{self.name} must be {what}{self._bound()}; got {value!r}")

    def _bound(self):
        if self.low is None:
            return ""
        return f" {'>' if self.low_open else '>='} {self.low:g}"


class Solver:
    """Base class of solvers: options declared in ``PARAMS``, the solve loop in :meth:`solve`.

    Options follow scikit-learn's conventions: the constructor stores every
    argument unchanged as an attribute of the same name (after checking it),
    :meth:`get_params` reads the attributes, :meth:`set_params` checks and sets
    them, so ``sklearn.base.clone`` and nested ``solver__option`` searches work,
    and :meth:`solve` checks them again (an attribute may have been assigned).

    Subclasses fill in the solve skeleton:

    - :meth:`init_state` -- a new state, or the previous one continued (warm start);
    - :meth:`run_pass` -- one pass of optimisation, polling the interrupt flag
      between its steps;
    - :meth:`checkpoint` -- measure (and for some variants refresh) the gap, record a trace row;
    - :meth:`result_w` -- the returned iterate (the average for averaged variants).
    """

    name = "solver"
    has_dual = True
    PARAMS: tuple = ()

    def _init_params(self, values):
        for p in self.PARAMS:
            p.check(values[p.name])
            setattr(self, p.name, values[p.name])

    @classmethod
    def param_table(cls):
        """{name: Param} of the options this solver takes."""
        return {p.name: p for p in cls.PARAMS}

    def get_params(self, deep=True):
        return {p.name: getattr(self, p.name) for p in self.PARAMS}

    def set_params(self, **params):
        table = self.param_table()
        for key, value in params.items():
            if key not in table:
                raise ValueError(f"invalid option {key!r} for {type(self).__name__}; valid options are "
                                 f"{sorted(table)}")
            table[key].check(value)
        for key, value in params.items():
            setattr(self, key, value)
        return self

    def validate_params(self):
        for p in self.PARAMS:
            p.check(getattr(self, p.name))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    @property
    def label(self):
        return self.name.upper()

    # ------------------------------------------------------------- skeleton
    def solve(self, problem, stop, state=None, rng=None, monitor=None):
        """Run until a stop rule fires; returns a :class:`SolveResult`.

        ``state`` continues a previous solve exactly (same data and lam: the
        iterates are those of one uninterrupted run); ``rng`` seeds a new state
        only.  Ctrl-C is deferred to the end of the current step
        (:func:`structfw._interrupt.deferred_sigint`): the solve then ends
        "interrupted" with the best evaluated iterate, the state stays consistent.
        """
        self.validate_params()
        own = set(vars(self))  # what solve adds to the solver object is per-run and removed at the end
        if monitor is None:
            monitor = Monitor(problem, stop, {"solver": self.label})
        with deferred_sigint() as flag:
            st = self.init_state(problem, state, rng)
            monitor.start_clock()
            stopped = None
            try:
                gap = self.checkpoint(problem, st, monitor, initial=True)
                stopped = "interrupted" if flag.requested else monitor.should_stop(0, gap)
                done = 0
                since_check = 0
                while stopped is None:
                    self.run_pass(problem, st, flag)
                    done += 1
                    since_check += 1
                    if flag.requested:
                        stopped = "interrupted"
                        # the state is consistent: evaluate it once (a second Ctrl-C is ignored)
                        self.checkpoint(problem, st, monitor, initial=False, monitoring_only=True)
                        break
                    if self.checkpoint_due(st, since_check, done, stop, monitor):
                        since_check = 0
                        gap = self.checkpoint(problem, st, monitor, initial=False)
                        stopped = "interrupted" if flag.requested else monitor.should_stop(done, gap)
            except KeyboardInterrupt:
                # raised by code rather than by the signal (a model's oracle, or no handler could be
                # installed): the oracle runs before a step touches the state, so it is consistent
                stopped = "interrupted"
                try:
                    self.checkpoint(problem, st, monitor, initial=False, monitoring_only=True)
                except KeyboardInterrupt:
                    pass
            finally:
                monitor.close()
        result = self.result(st, monitor, stopped)
        for key in set(vars(self)) - own:
            delattr(self, key)  # a solver object holds options only, never a run's data
        return result

    def checkpoint_due(self, state, since_check, done, stop, monitor):
        every = stop.checkpoint_interval(monitor.problem.n, monitor.n_test)
        return since_check >= every or done >= stop.max_passes - 1e-9 or monitor.out_of_time()

    def result(self, state, monitor, stopped):
        tr = monitor.trace
        if stopped == "interrupted" and monitor.best is not None:
            primal, w, gap, dual = monitor.best
        else:
            w = self.result_w(state)
            primal, dual, gap = tr.last("primal"), tr.last("dual"), tr.last("gap")
        return SolveResult(w=w, state=state, trace=tr, stopped=stopped, gap=gap, primal=primal, dual=dual)

    def result_w(self, state):
        return state.w.copy()

    def init_state(self, problem, state, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def run_pass(self, problem, state, flag):  # pragma: no cover - abstract
        raise NotImplementedError

    def checkpoint(self, problem, state, monitor, initial, monitoring_only=False):  # pragma: no cover
        raise NotImplementedError


def continue_or_restart(state, state_cls, problem):
    """The previous state if it belongs to this problem, else None (with a warning when one was given).

    A state is reused only for the same data (size, dimension and fingerprint of
    X and Y): continuing on other data would silently mix two problems."""
    if state is None:
        return None
    if not isinstance(state, state_cls):
        warnings.warn(f"warm start: the previous state is a {type(state).__name__}, not a {state_cls.__name__} "
                      "(the solver changed); starting afresh", RuntimeWarning, stacklevel=3)
        return None
    if (state.n, state.d) != (problem.n, problem.d) or state.fingerprint != problem.fingerprint:
        warnings.warn(f"warm start: the previous state was fitted on other data (n={state.n}, d={state.d}) "
                      f"than this fit (n={problem.n}, d={problem.d}); starting afresh", RuntimeWarning,
                      stacklevel=3)
        return None
    return state
