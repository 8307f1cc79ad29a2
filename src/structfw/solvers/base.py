"""What every solver shares: options, the solve skeleton, stop rules, monitoring, results.

Monitoring (full gap passes, test error) is timed apart from optimisation and
its oracle calls are counted apart (``monitor_calls``, docs/design.md, "Passes
and oracle calls").  Every solver runs the one skeleton `Solver.solve`:
state set-up, passes, checkpoints, clock, stop rules, and Ctrl-C taken at a
safe point -- the end of the current block step -- after which the iterate
with the lowest evaluated primal is returned and the state stays usable for a
warm start.
"""
from __future__ import annotations

import math
import numbers
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, TypeAlias, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._interrupt import deferred_sigint
from ..trace import Trace

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .kernel_bcfw import KernelExpansion
    from .problem import Problem


class _SolverState(Protocol):
    """What `continue_or_restart` reads of a solver state: the data it was fitted on."""

    n: int
    d: int
    fingerprint: str


_State = TypeVar("_State", bound=_SolverState)
#: `Monitor.best`: (primal, w copy, gap, dual, certified gap or None) of the best checkpoint
_Best: TypeAlias = "tuple[float, npt.NDArray[np.float64] | KernelExpansion, float, float, float | None]"


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

    def __post_init__(self) -> None:
        if not (isinstance(self.max_passes, (int, float, np.integer, np.floating)) and self.max_passes > 0):
            raise ValueError(f"max_passes must be a positive number; got {self.max_passes!r}")
        if self.tol is not None and not (self.tol >= 0):
            raise ValueError(f"tol must be None or a number >= 0; got {self.tol!r}")
        if not (self.check_every == "auto" or (isinstance(self.check_every, (int, np.integer))
                                                and not isinstance(self.check_every, bool) and self.check_every >= 1)):
            raise ValueError(f"check_every must be an integer >= 1 or 'auto'; got {self.check_every!r}")
        if self.time_budget is not None and not (self.time_budget > 0):
            raise ValueError(f"time_budget must be None or a positive number of seconds; got {self.time_budget!r}")

    def checkpoint_interval(self, n: int, n_test: int = 0) -> int:
        """Passes between checkpoints: ``check_every``, or for "auto" ``ceil(9 * (1 + n_test / n))``
        (a checkpoint costs one oracle pass plus a prediction pass over the n_test test examples)."""
        if self.check_every != "auto":
            return int(self.check_every)
        return max(1, math.ceil(9.0 * (1.0 + n_test / max(n, 1)) - 1e-9))


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
    certified_gap : float or None
        The certified gap at the returned iterate when the model bounds its approximate
        oracle (docs/design.md, "Certified gaps with approximate oracles"), else None.
    """

    w: npt.NDArray[np.float64] | KernelExpansion
    state: Any  # each solver's own state class (FWState, BCFWState, ...)
    trace: Trace
    stopped: str
    gap: float = math.nan
    primal: float = math.nan
    dual: float = math.nan
    extra: dict[str, Any] = field(default_factory=dict)
    certified_gap: float | None = None


class Monitor:
    """Checkpoints, timing, stopping, progress bar and interrupt handling."""

    def __init__(self, problem: Problem, stop: StopRule, meta: Mapping[str, Any] | None,
                 X_test: Sequence[Any] | None = None, Y_test: Sequence[Any] | None = None, verbose: int = 0) -> None:
        self.problem, self.stop = problem, stop
        self.trace = Trace(meta)
        self.X_test, self.Y_test = X_test, Y_test
        self.n_test = 0 if X_test is None else len(X_test)
        self._test_key: int | None = None
        self.verbose = int(verbose)
        self.monitor_calls = 0
        self._t0 = time.perf_counter()
        self._monitor_time = 0.0
        self._monitor_since: float | None = None
        self._bar: Any = None  # a tqdm progress bar
        self.best: _Best | None = None  # (primal, w copy, gap, dual, certified gap or None)
        self.certified_gap: float | None = None  # of the last checkpoint, when the model bounds its oracle
        self.interrupted = False
        # how a solver's w is presented to the trace, the test loss and `best` (KernelBCFW: the
        # kernel expansion of w in the map's coordinates); None: as it is
        self.present: Callable[[npt.NDArray[np.float64]], Any] | None = None
        from .. import _compile, _progress

        # a command running many fits (a benchmark) shows them on one bar (`structfw._progress`)
        self._listener = _progress.listener()
        self._listen_key = -1 if self._listener is None else self._listener.started(
            str((meta or {}).get("solver", "fit")), float(stop.max_passes))
        # otherwise a first fit sits silent (or its bar at 0 % with a false ETA) while numba compiles
        _compile.install_compile_notice()
        if self.verbose >= 1:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=float(stop.max_passes), unit="pass", leave=True,
                             bar_format="{l_bar}{bar}| {n:.1f}/{total:.0f} passes [{elapsed}<{remaining}]{postfix}")
            _compile.active_bar = self._bar

    # -- time
    def start_clock(self) -> None:
        """Start counting optimisation time (solvers call it once their state is set up)."""
        self._t0 = time.perf_counter()
        self._monitor_time = 0.0

    def opt_time(self) -> float:
        """Seconds since start_clock() minus monitoring, including a monitoring block in progress."""
        now = time.perf_counter()
        in_progress = now - self._monitor_since if self._monitor_since is not None else 0.0
        return now - self._t0 - self._monitor_time - in_progress

    def monitoring(self) -> AbstractContextManager[None, Literal[False]]:
        """Context manager: the time spent inside is monitoring, not optimisation."""
        mon = self

        class _Ctx:
            def __enter__(self) -> None:
                mon._monitor_since = time.perf_counter()

            def __exit__(self, *exc: object) -> Literal[False]:
                mon._monitor_time += time.perf_counter() - cast(float, mon._monitor_since)  # set by __enter__
                mon._monitor_since = None
                return False

        return _Ctx()

    # -- checkpoints
    def test_loss(self, w: npt.NDArray[np.float64] | KernelExpansion) -> float | None:
        if self.X_test is None:
            return None
        Y_test = cast("Sequence[Any]", self.Y_test)  # given with X_test (the estimator checks it)
        if hasattr(w, "decode_all"):  # a kernel expansion (KernelBCFW): w exists only implicitly
            return self.problem.model.mean_loss(Y_test, w.decode_all(self.X_test))
        if self._test_key is None:
            self._test_key = self.problem.executor.bind(self.problem.model, self.X_test)
        pred = self.problem.executor.decode(self._test_key, w)
        return self.problem.model.mean_loss(Y_test, pred)

    def record(self, w: npt.NDArray[np.float64] | KernelExpansion, passes: float, oracle_calls: float, primal: float,
               dual: float, gap: float, **extra: float) -> None:
        """Append a checkpoint row (call inside ``monitoring()``)."""
        if self.present is not None and isinstance(w, np.ndarray):
            w = self.present(w)
        row = dict(passes=passes, oracle_calls=oracle_calls, time_s=self.opt_time(),
                   primal=primal, dual=dual, gap=gap, monitor_calls=self.monitor_calls)
        tl = self.test_loss(w)
        if tl is not None:
            row["test_loss"] = tl
        certified = self._certify(w, dual)
        if certified is not None:
            row["primal_bound"], row["certified_gap"] = certified
        row.update(extra)
        self.trace.append(**row)
        if self.best is None or primal < self.best[0]:
            self.best = (primal, w.copy(), gap, dual, self.certified_gap)
        if self._listener is not None:
            self._listener.recorded(self._listen_key, float(extra.get("engine_passes", passes)), gap)
        if self._bar is not None:
            self._bar.n = min(float(extra.get("engine_passes", passes)), self._bar.total)
            post = f"gap={gap:.3g} primal={primal:.5g}" + (f" test={tl:.3f}" if tl is not None else "")
            self._bar.set_postfix_str(post, refresh=True)
        if self.verbose >= 2:
            print(f"pass {passes:7.2f}  gap {gap:.4e}  primal {primal:.6g}  time {row['time_s']:.2f}s", flush=True)

    def _certify(self, w: npt.NDArray[np.float64] | KernelExpansion, dual: float) -> tuple[float, float] | None:
        """(upper bound of P(w), certified gap) at a checkpoint when the model bounds its
        approximate oracle (`Problem.hinge_bounds`), else None.  One more pass over the
        examples, counted as monitoring."""
        self.certified_gap = None
        if not self.problem.certifies or not isinstance(w, np.ndarray) or not np.isfinite(dual):
            return None
        U = self.problem.hinge_bounds(w)
        self.monitor_calls += self.problem.n
        primal_bound = self.problem.primal(w, float(U.sum()))
        self.certified_gap = primal_bound - float(dual)
        return primal_bound, self.certified_gap

    def should_stop(self, engine_passes: float, gap: float | None) -> str | None:
        """Reason to stop at a checkpoint, or None.  ``tol`` applies to the certified gap
        when the model bounds its approximate oracle (the oracle's own gap is then only a
        lower bound of the true one)."""
        if self.certified_gap is not None:
            gap = self.certified_gap
        if self.stop.tol is not None and gap is not None and gap <= self.stop.tol:
            return "tol"
        if engine_passes >= self.stop.max_passes - 1e-9:
            return "max_passes"
        if self.stop.time_budget is not None and self.opt_time() >= self.stop.time_budget:
            return "time_budget"
        return None

    def advance(self, passes: float) -> None:
        """Move the progress bar to ``passes`` after every pass, not only at checkpoints (which may
        be several passes apart): its estimate of the time left is then the measured time per pass,
        monitoring included, times the passes left."""
        if self._listener is not None:
            self._listener.advanced(self._listen_key, passes)
        if self._bar is not None and passes > self._bar.n:
            self._bar.n = min(float(passes), self._bar.total)
            self._bar.refresh()

    def out_of_time(self) -> bool:
        return self.stop.time_budget is not None and self.opt_time() >= self.stop.time_budget

    def close(self) -> None:
        if self._listener is not None:
            self._listener.ended(self._listen_key)
            self._listener = None
        if self._bar is not None:
            from .. import _compile

            if _compile.active_bar is self._bar:
                _compile.active_bar = None
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
    kind : {"choice", "bool", "int", "float", "path"}
    choices : tuple
        Allowed values of a "choice" option (may contain None).
    low : float or None
        Smallest allowed value of an "int"/"float" option (``low_open``: excluded).
    none_ok : bool
        An "int"/"float" option that also takes None (``--name never`` on the command line).
    help : str
        One line for ``--help`` and the docs.
    """

    name: str
    default: object
    kind: str
    choices: tuple[Any, ...] = ()
    low: float | None = None
    low_open: bool = False
    help: str = ""
    none_ok: bool = False  # an "int"/"float" option that may also be None (its meaning is in ``help``)

    def check(self, value: object) -> None:
        """Raise ValueError naming the option unless ``value`` is allowed."""
        if value is None and self.none_ok:
            return
        if self.kind == "choice":
            allowed = value is None if value is None else (
                isinstance(value, str) and value in [c for c in self.choices if isinstance(c, str)])
            if not allowed or (value is None and None not in self.choices):
                raise ValueError(f"{self.name} must be one of {self.choices}; got {value!r}")
            return
        if self.kind == "path":
            if value is not None and not (isinstance(value, (str, os.PathLike)) and os.fspath(value)):
                raise ValueError(f"{self.name} must be a folder's path (str or path-like) or None; got {value!r}")
            return
        if self.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{self.name} must be True or False; got {value!r}")
            return
        number = (numbers.Integral,) if self.kind == "int" else (numbers.Real,)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, number) or (
                self.kind == "float" and not math.isfinite(float(value))):
            what = "an integer" if self.kind == "int" else "a finite number"
            raise ValueError(f"{self.name} must be {what}{self._bound()}{' or None' if self.none_ok else ''}; "
                             f"got {value!r}")
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            what = "an integer" if self.kind == "int" else "a number"
            raise ValueError(f"{self.name} must be {what}{self._bound()}{' or None' if self.none_ok else ''}; "
                             f"got {value!r}")

    def _bound(self) -> str:
        if self.low is None:
            return ""
        return f" {'>' if self.low_open else '>='} {self.low:g}"


class SolveContext:
    """One solve's own data, created by `Solver.init_state` and handed to every hook.

    A solver object holds its options only; what a run needs between its hooks -- the
    problem, the state it moves and anything a solver keeps from one hook to the next
    (FW's corner, BCFW's plan, the kernel map) -- lives here, so that a solve that ends
    in any way (a result, an exception, a second Ctrl-C) leaves the solver as it was, and
    two solves with one solver object share nothing.

    Attributes
    ----------
    problem : Problem
    state : object
        The solver's state (``FWState``, ``BCFWState``, ...): what a warm start continues.
    """

    def __init__(self, problem: Problem, state: Any) -> None:
        self.problem = problem
        self.state = state


class Solver:
    """Base class of solvers: options declared in ``PARAMS``, the solve loop in `solve`.

    Options follow scikit-learn's conventions: the constructor stores every
    argument unchanged as an attribute of the same name (after checking it),
    `get_params` reads the attributes, `set_params` checks and sets
    them, so ``sklearn.base.clone`` and nested ``solver__option`` searches work,
    and `solve` checks them again (an attribute may have been assigned).

    Subclasses fill in the solve skeleton, each hook taking the `SolveContext` that
    `init_state` returned (nothing of a run is stored on the solver):

    - `init_state` -- a new state, or the previous one continued (warm start), in a context;
    - `run_pass` -- one pass of optimisation, polling the interrupt flag
      between its steps;
    - `checkpoint` -- measure (and for some variants refresh) the gap, record a trace row;
    - `result_w` -- the returned iterate (the average for averaged variants).
    """

    name = "solver"
    has_dual = True
    PARAMS: tuple[Param, ...] = ()

    def _init_params(self, values: Mapping[str, Any]) -> None:
        for p in self.PARAMS:
            p.check(values[p.name])
            setattr(self, p.name, values[p.name])

    @classmethod
    def param_table(cls) -> dict[str, Param]:
        """{name: Param} of the options this solver takes."""
        return {p.name: p for p in cls.PARAMS}

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {p.name: getattr(self, p.name) for p in self.PARAMS}

    def set_params(self, **params: Any) -> Self:
        table = self.param_table()
        for key, value in params.items():
            if key not in table:
                raise ValueError(f"invalid option {key!r} for {type(self).__name__}; valid options are "
                                 f"{sorted(table)}")
            table[key].check(value)
        for key, value in params.items():
            setattr(self, key, value)
        return self

    def validate_params(self) -> None:
        for p in self.PARAMS:
            p.check(getattr(self, p.name))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    @property
    def label(self) -> str:
        return self.name.upper()

    # ------------------------------------------------------------- skeleton
    def solve(self, problem: Problem, stop: StopRule, state: object | None = None,
              rng: int | np.random.Generator | None = None, monitor: Monitor | None = None) -> SolveResult:
        """Run until a stop rule fires; returns a `SolveResult`.

        ``state`` continues a previous solve exactly (same data and lam: the
        iterates are those of one uninterrupted run); ``rng`` seeds a new state
        only.  Ctrl-C is deferred to the end of the current step
        (`structfw._interrupt.deferred_sigint`): the solve then ends
        "interrupted" with the best evaluated iterate, the state stays consistent.
        A second Ctrl-C before that safe point (a hung oracle) raises KeyboardInterrupt.
        """
        self.validate_params()
        if monitor is None:
            monitor = Monitor(problem, stop, {"solver": self.label})
        with deferred_sigint() as flag:
            ctx = self.init_state(problem, state, rng)
            resumed = state is not None and ctx.state is state
            monitor.start_clock()
            stopped = None
            try:
                gap = self.checkpoint(ctx, monitor, initial=True)
                if resumed:
                    _check_resumed_gap(self, problem, monitor, gap)
                stopped = "interrupted" if flag.requested else monitor.should_stop(0, gap)
                done = 0
                since_check = 0
                while stopped is None:
                    self.run_pass(ctx, flag)
                    done += 1
                    since_check += 1
                    monitor.advance(done)
                    if flag.requested:
                        stopped = "interrupted"
                        # the state is consistent: evaluate it once (a second Ctrl-C aborts it)
                        self.checkpoint(ctx, monitor, initial=False, monitoring_only=True)
                        break
                    if self.checkpoint_due(ctx, since_check, done, stop, monitor):
                        since_check = 0
                        gap = self.checkpoint(ctx, monitor, initial=False)
                        if resumed:
                            _check_resumed_gap(self, problem, monitor, gap)
                        stopped = "interrupted" if flag.requested else monitor.should_stop(done, gap)
            except ValueError as exc:
                if not resumed or str(exc).startswith("warm start:"):
                    raise
                # a state within every range a file can be checked for can still be far from this
                # problem's (w at 1e150: the oracle's scores lose all precision; a step size that
                # overflows the expectation oracle): name the state as the likely cause
                raise ValueError(f"warm start: the fit continued from the given solver state failed: {exc} "
                                 "(a damaged or forged state does not fit this problem; fit with warm_start=False "
                                 "to start afresh)") from exc
            except KeyboardInterrupt:
                if flag.aborted:  # a second Ctrl-C: the user wants out now, not a result
                    raise
                # raised by code rather than by the signal (a model's oracle, or no handler could be
                # installed): the oracle runs before a step touches the state, so it is consistent
                stopped = "interrupted"
                try:
                    self.checkpoint(ctx, monitor, initial=False, monitoring_only=True)
                except KeyboardInterrupt:
                    if flag.aborted:
                        raise
            finally:
                monitor.close()
        return self.result(ctx, monitor, stopped)

    def checkpoint_due(self, ctx: Any, since_check: int, done: int, stop: StopRule, monitor: Monitor) -> bool:
        every = stop.checkpoint_interval(monitor.problem.n, monitor.n_test)
        return since_check >= every or done >= stop.max_passes - 1e-9 or monitor.out_of_time()

    def result(self, ctx: Any, monitor: Monitor, stopped: str) -> SolveResult:
        tr = monitor.trace
        if stopped == "interrupted" and monitor.best is not None:
            primal, w, gap, dual, certified = monitor.best
        else:
            w = self.result_w(ctx)
            primal, dual, gap = tr.last("primal"), tr.last("dual"), tr.last("gap")
            certified = monitor.certified_gap
        return SolveResult(w=w, state=ctx.state, trace=tr, stopped=stopped, gap=gap, primal=primal, dual=dual,
                           certified_gap=certified)

    def result_w(self, ctx: Any) -> npt.NDArray[np.float64] | KernelExpansion:
        return cast("npt.NDArray[np.float64]", ctx.state.w.copy())

    def init_state(self, problem: Problem, state: object | None,
                   rng: int | np.random.Generator | None) -> SolveContext:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_pass(self, ctx: Any, flag: InterruptFlag) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def checkpoint(self, ctx: Any, monitor: Monitor, initial: bool,
                   monitoring_only: bool = False) -> float:  # pragma: no cover
        raise NotImplementedError


def _check_resumed_gap(solver: Solver, problem: Problem, monitor: Monitor, gap: float) -> None:
    """A continued state must be a feasible dual point of this problem: weak duality, P(w) >= D(alpha).

    A state read from a file passed its field checks (`structfw.solvers.state_file.check_state`),
    but a forger who keeps every field in range and consistent can still pair a w with an l no dual
    point has; only the data can tell, and a checkpoint has just measured it.  Checked at every
    checkpoint of a continued fit, not only the first: a forged plane in a corner set (a finite loss
    no labelling has) enters the dual only when a step uses it (MP-BCFW's approximate passes)."""
    if not solver.has_dual or problem.approximate:  # an approximate oracle may under-estimate P
        return
    primal, dual = monitor.trace.last("primal"), monitor.trace.last("dual")
    tol = 1e-6 * max(1.0, abs(primal), abs(dual)) if math.isfinite(primal) and math.isfinite(dual) else 0.0
    if not (math.isfinite(gap) and gap >= -tol):
        raise ValueError(f"warm start: the solver state does not fit this problem: duality gap {gap!r} at its dual "
                         f"point (primal {primal!r}, dual {dual!r}) where weak duality needs >= 0; the state was "
                         "damaged or forged (fit with warm_start=False to start afresh)")


def continue_or_restart(state: object | None, state_cls: type[_State], problem: Problem) -> _State | None:
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
