"""The eps-approximate regularisation path of Osokin et al. (2016), Section 4.

For every lam > 0 the path gives a weight vector whose primal suboptimality
P_lam(w) - P_lam* is at most ``eps``.  It is piecewise constant in lam except
for the first piece, which is linear in 1/lam:

- breakpoints lam_1 > lam_2 > ... > lam_J and vectors w^1, ..., w^J;
- for lam in [lam_{j+1}, lam_j], w^j is eps-approximate (lam_{J+1} is
  ``lam_end``: 0 when the path *ended*, i.e. eq. (12) gave rho <= 0, otherwise
  the first value below ``min_lam`` the induction reached);
- for lam >= lam_1, (lam_1/lam) w^inf is eps-approximate, where
  w^inf = 1/(lam_1 n) sum_i psi_i(y~_i) is the initial point built from the
  oracle at w = 0 (the paper's alpha^inf, Sec. 4 "Initialization").

Initialisation: y~_i = argmax_y L_i(y) (the max oracle at w = 0),
psi~ = 1/n sum_i psi_i(y~_i), theta_i = max_y -<psi~, psi_i(y)>
= <psi~, phi(x_i, y^)> - <psi~, phi(x_i, y_i)> with y^ = decode(x_i, psi~), and
lam^inf = (||psi~||^2 + 1/n sum_i theta_i) / eps.

Induction: given a kappa*eps-approximate pair (alpha, w) at lam_j (a warm-started
block-coordinate solve), Proposition 1 keeps w and rescales alpha to
lam_{j+1} = rho lam_j; the gap becomes g + (1 - rho) Delta(alpha, lam_j), so
rho = 1 - (eps - g)/Delta (eq. (12)) gives gap exactly eps at lam_{j+1} and at
most eps in between.  rho <= 0 (Delta <= eps - g) ends the path: w^J is
eps-approximate for every 0 < lam <= lam_J.

The guarantee needs L_i(y_i) = 0 (checked) and an exact max oracle and decoder
(with an approximate oracle the measured gaps are only lower bounds).
"""
from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeAlias, cast

import numpy as np
import numpy.typing as npt

from ._linalg import dot
from ._params import BOOLEAN, NONE, RANDOM_STATE, Interval, validate_values
from .solvers.base import Monitor, StopRule
from ._interrupt import deferred_sigint
from .solvers.bcfw import BCFW, BCFWState
from .solvers.kernel_bcfw import KernelBCFW
from .solvers.problem import LAM_FLOOR, OracleCorner, Problem
from .solvers.sharded_state import ShardedState

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .solvers.sharded import ShardedBCFW

    from ._interrupt import InterruptFlag
    from .models.base import StructuredModel

__all__ = ["regularization_path", "RegularizationPath", "default_path_solver"]

#: per-breakpoint records (lists of floats, one entry per breakpoint)
_RECORDS = ("gaps", "deltas", "primals", "passes", "opt_passes", "oracle_calls", "times", "test_losses")
#: why a computation stops (RegularizationPath.status)
STATUSES = ("ended", "min_lam", "max_breakpoints", "not_converged", "interrupted")
#: the ``kind`` of the model file `RegularizationPath.save_state` writes
_STATE_KIND = "RegularizationPathState"
#: the first constructor arguments of a one-piece path (breakpoints, coefs, w_inf, lam_end, status, records)
#: callback(j, lam_j, w_j, info) after every breakpoint
PathCallback: TypeAlias = "Callable[[int, float, npt.NDArray[np.float64], dict[str, float]], object]"
#: the engines of a path and their states: the serial engine's, or the sharded one's (its shards' states)
PathSolver: TypeAlias = "BCFW | ShardedBCFW"
PathState: TypeAlias = "BCFWState | ShardedState"
_TrivialPath: TypeAlias = ("tuple[list[float], npt.NDArray[np.float64], npt.NDArray[np.float64], float, str, "
                           "dict[str, list[float]]]")


def default_path_solver() -> BCFW:
    """The engine used when ``solver=None``: block pairwise steps with gap sampling
    and a gap pass every 2 passes (warm-started solves are short, so the
    default refresh of 10 passes would overshoot the kappa*eps target)."""
    return BCFW(sampling="gap", step="pairwise", gap_refresh=2)


class RegularizationPath:
    """An eps-approximate regularisation path (see the module docstring).

    Attributes
    ----------
    breakpoints : ndarray (J,)
        lam_1 > lam_2 > ... > lam_J.
    coefs : ndarray (J, d)
        coefs[j] is w^{j+1}, eps-approximate on [breakpoints[j+1], breakpoints[j]]
        (on [lam_end, lam_J] for the last one).
    w_inf : ndarray (d,)
        Initial vector: (lam_1/lam) w_inf is eps-approximate for lam >= lam_1.
    lam_end : float
        Lower end of the last piece: 0.0 when ``ended`` (rho <= 0), else the
        value below ``min_lam`` where the computation stopped.
    ended : bool
        True when eq. (12) gave rho <= 0: the last w is eps-approximate down to lam = 0.
    status : str
        Why the computation stopped (also `stop_reason`): "ended" (rho <= 0),
        "min_lam" (the next breakpoint fell below min_lam), "max_breakpoints" (the cap
        was reached), "not_converged" (a solve did not reach a gap below eps; that
        breakpoint is dropped and the previous piece reaches down to ``lam_end``) or
        "interrupted" (Ctrl-C, at any point: the breakpoints finished before it are
        kept; a solve it cut short is dropped like a "not_converged" one).  Every
        status but "ended" can be continued with ``regularization_path(...,
        resume=path)`` from ``lam_end`` on.
    gaps : ndarray (J,)
        Duality gap of the (alpha, w^j) pair at lam_j after the solve (<= kappa*eps
        unless the solve hit ``max_passes_per_lam`` with a gap in [kappa*eps, eps),
        which eq. (12) still handles).
    deltas : ndarray (J,)
        Delta(alpha, lam_j) of eq. (11); the gap at lam in the piece is at most
        gaps[j] + (1 - lam/lam_j) deltas[j] <= eps.
    primals : ndarray (J,)
        P_{lam_j}(w^j).
    passes, opt_passes, oracle_calls, times : ndarray (J,)
        Per breakpoint: effective passes (all oracle calls / n, gap passes
        included), passes that moved the iterate, oracle calls, wall seconds.
        The initialisation (2 n oracle/decoder calls) is counted in ``init_*``.
    test_losses : ndarray (J,)
        Mean test loss of w^j when test data were given (NaN otherwise).
    eps, kappa, min_lam : float
    state : BCFWState, ShardedState or None
        The engine's state at ``lam_end`` (or at the last breakpoint, with
        ``state.lam >= lam_end``) when the path was computed with ``keep_state=True``
        or loaded with `load_state`: ``resume`` then continues the induction
        exactly instead of solving at ``lam_end`` from scratch.  Not part of the JSON
        (`save_state` writes it to its own file: it holds the n blocks' dual
        variables and is large).
    """

    # the per-breakpoint records (_RECORDS), set by the constructor
    gaps: npt.NDArray[np.float64]
    deltas: npt.NDArray[np.float64]
    primals: npt.NDArray[np.float64]
    passes: npt.NDArray[np.float64]
    opt_passes: npt.NDArray[np.float64]
    oracle_calls: npt.NDArray[np.float64]
    times: npt.NDArray[np.float64]
    test_losses: npt.NDArray[np.float64]

    def __init__(self, breakpoints: npt.ArrayLike, coefs: npt.ArrayLike, w_inf: npt.ArrayLike, lam_end: float,
                 status: str, eps: float, kappa: float, min_lam: float,
                 records: Mapping[str, Sequence[float]] | None = None, init_oracle_calls: int = 0,
                 init_time: float = 0.0, n: int | None = None, meta: Mapping[str, Any] | None = None,
                 state: PathState | None = None) -> None:
        self.breakpoints = np.asarray(breakpoints, float).reshape(-1)
        self.coefs = np.asarray(coefs, float).reshape(len(self.breakpoints), -1) if len(self.breakpoints) \
            else np.zeros((0, np.asarray(w_inf).shape[0]))
        self.w_inf = np.asarray(w_inf, float)
        self.lam_end = float(lam_end)
        self.status = str(status)
        self.eps, self.kappa, self.min_lam = float(eps), float(kappa), float(min_lam)
        records = records or {}
        J = len(self.breakpoints)
        for name in _RECORDS:
            setattr(self, name, np.asarray(records.get(name, [math.nan] * J), float).reshape(J))
        self.init_oracle_calls = int(init_oracle_calls)
        self.init_time = float(init_time)
        self.n = n
        self.meta = dict(meta or {})
        self.state = state

    # ------------------------------------------------------------ queries
    @property
    def ended(self) -> bool:
        return self.status == "ended"

    @property
    def interrupted(self) -> bool:
        """True when Ctrl-C stopped the computation (the path holds what was finished)."""
        return self.status == "interrupted"

    @property
    def stop_reason(self) -> str:
        return self.status

    @property
    def lam_inf(self) -> float:
        return float(self.breakpoints[0]) if len(self.breakpoints) else math.nan

    def __len__(self) -> int:
        return len(self.breakpoints)

    def __repr__(self) -> str:
        if not len(self):
            return f"RegularizationPath(eps={self.eps}, no breakpoints, status={self.status!r})"
        return (f"RegularizationPath(eps={self.eps}, kappa={self.kappa}, {len(self)} breakpoints "
                f"from lam={self.breakpoints[0]:.4g} to {self.breakpoints[-1]:.4g}, status={self.status!r})")

    def _check_query(self, lam: float) -> float:
        try:
            lam = float(lam)
        except (TypeError, ValueError):
            raise ValueError(f"lam must be a positive number; got {lam!r}") from None
        if not (math.isfinite(lam) and lam > 0):
            raise ValueError(f"lam must be a positive finite number; got {lam!r}")
        if not len(self):
            raise ValueError("the path has no breakpoints")
        if lam < self.lam_end:
            raise ValueError(
                f"lam={lam:.6g} is below the computed part of the path: it was computed down to "
                f"lam={self.lam_end:.6g} (min_lam={self.min_lam:g}, status {self.status!r}); "
                "recompute with a smaller min_lam")
        return lam

    def piece_index(self, lam: float) -> int:
        """Index j of the piece [breakpoints[j+1], breakpoints[j]] holding lam, or -1 for lam > lam_1.

        At a breakpoint the later piece (the solved pair) is chosen."""
        lam = self._check_query(lam)
        if lam > self.breakpoints[0]:
            return -1
        return int(np.count_nonzero(self.breakpoints >= lam)) - 1

    def coef_at(self, lam: float) -> npt.NDArray[np.float64]:
        """An eps-approximate w for this lam (a copy)."""
        j = self.piece_index(lam)
        if j < 0:
            return (self.breakpoints[0] / float(lam)) * self.w_inf
        return self.coefs[j].copy()

    def gap_bound_at(self, lam: float) -> float:
        """The certified duality gap of the path's pair at lam (<= eps)."""
        j = self.piece_index(lam)
        lam = float(lam)
        if j < 0:
            return float("nan")  # bounded by eps via the lam^inf construction
        return float(self.gaps[j] + (1.0 - lam / self.breakpoints[j]) * self.deltas[j])

    # -------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        def f(x: float) -> float | None:
            x = float(x)
            return x if math.isfinite(x) else None

        doc = dict(format="structfw.RegularizationPath", version=1, eps=self.eps, kappa=self.kappa,
                   min_lam=self.min_lam, lam_end=self.lam_end, status=self.status, n=self.n,
                   init_oracle_calls=self.init_oracle_calls, init_time=self.init_time, meta=self.meta,
                   breakpoints=[float(v) for v in self.breakpoints],
                   coefs=[[float(v) for v in c] for c in self.coefs],
                   w_inf=[float(v) for v in self.w_inf])
        for name in _RECORDS:
            doc[name] = [f(v) for v in getattr(self, name)]
        return doc

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """JSON text of the path; also written to ``path`` when given."""
        text = json.dumps(self.to_dict())
        if path is not None:
            Path(path).write_text(text)
        return text

    save = to_json

    @classmethod
    def from_json(cls, source: str | Path) -> Self:
        """Load from a JSON string or a path to a file written by `to_json`.

        Every field is checked (types, finite values, ranges, lengths, decreasing
        breakpoints, a status that agrees with ``lam_end``): a damaged or edited file is a
        ValueError naming the field, never a path that answers queries wrongly."""
        where = "path JSON"
        if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
            where = str(source)
            from .io import read_text_file
            source = read_text_file(source, "structfw regularisation path JSON file")
        try:
            doc = json.loads(source)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{where}: not valid JSON ({str(exc)[:100]})") from None
        return cls(**_validated_fields(doc, where))

    load = from_json

    # ------------------------------------------------------ solver state
    def save_state(self, path: str | os.PathLike[str]) -> Path:
        """Write `state` (the engine's state at the end of the path) to an ``.npz``
        model file, for ``regularization_path(..., resume=..., resume_state=path)``.

        Returns the Path written (``.npz`` appended when missing)."""
        from . import io as sfio
        from .solvers.state_file import encode_state

        if self.state is None:
            raise ValueError("this path holds no solver state: compute it with keep_state=True")
        header, arrays = sfio.pack_state(*encode_state(self.state))
        header.update(lam=float(self.state.lam), lam_end=self.lam_end, eps=self.eps, kappa=self.kappa,
                      n_breakpoints=len(self), fingerprint=self.meta.get("fingerprint"))
        return sfio.write_model_file(path, _STATE_KIND, header, arrays)

    def load_state(self, path: str | os.PathLike[str], model: StructuredModel | None = None) -> Self:
        """Read a file written by `save_state` into `state`, checking that it belongs
        to this path (same eps, kappa, number of breakpoints and ``lam_end``); returns self."""
        from . import io as sfio
        from .solvers.state_file import decode_state

        header, arrays = sfio.read_model_file(path, _STATE_KIND)
        src = header.source
        unpacked = sfio.unpack_state(header, arrays)
        if unpacked is None:
            raise ValueError(f"{src}: no solver state in the file")
        for name, mine in (("eps", self.eps), ("kappa", self.kappa), ("lam_end", self.lam_end),
                           ("n_breakpoints", len(self))):
            if header.get(name) != mine:
                raise ValueError(f"{src}: field {name!r} is {header.get(name)!r}, but the path has {mine!r}: "
                                 "the state belongs to another path (or another point of it)")
        meta, state_arrays = unpacked
        state = decode_state(dict(meta), dict(state_arrays), source=src, model=model)
        if not isinstance(state, (BCFWState, ShardedState)):
            raise ValueError(f"{src}: the state is a {type(state).__name__}, not a BCFWState or ShardedState")
        if not state.lam >= self.lam_end:
            raise ValueError(f"{src}: the state's lam={state.lam!r} is below the path's lam_end={self.lam_end!r}")
        self.state = state
        return self

    # ------------------------------------------------------------- figure
    def plot(self, path: str | os.PathLike[str] | None = None, title: str | None = None) -> Figure:
        """||w||, the certified gap and the cumulative effective passes against 1/lam.

        Returns the matplotlib Figure; writes a PNG to ``path`` when given."""
        from .plotting import _plt

        plt = _plt()
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
        bp = self.breakpoints
        if len(bp):
            lo = self.lam_end if self.lam_end > 0 else bp[-1] / 10.0
            edges = np.concatenate([bp, [lo]])
            norms = np.linalg.norm(self.coefs, axis=1)
            # first (linear) piece: ||(lam_1/lam) w_inf|| for lam in [lam_1, 10 lam_1]
            lam_hi = np.geomspace(10 * bp[0], bp[0], 20)
            axes[0].plot(1 / lam_hi, bp[0] / lam_hi * np.linalg.norm(self.w_inf), color="C1", label="(lam_1/lam) w_inf")
            for j in range(len(bp)):
                axes[0].plot([1 / edges[j], 1 / edges[j + 1]], [norms[j], norms[j]], color="C0",
                             label="w^j" if j == 0 else None)
            axes[0].plot(1 / bp, norms, "k.", ms=3, label="breakpoints")
            # certified gap: g_j at lam_j rising linearly in lam to <= eps at lam_{j+1}
            for j in range(len(bp)):
                lams = np.linspace(bp[j], edges[j + 1], 12)
                lams = lams[lams > 0]
                axes[1].plot(1 / lams, self.gaps[j] + (1 - lams / bp[j]) * self.deltas[j], color="C0", lw=0.8)
            axes[1].axhline(self.eps, color="r", ls="--", label="eps")
            axes[1].axhline(self.kappa * self.eps, color="gray", ls=":", label="kappa eps")
            cum = self.init_passes + np.cumsum(np.nan_to_num(self.passes))
            axes[2].step(1 / bp, cum, where="post", label="path")
            axes[2].plot(1 / bp, cum, "k.", ms=3)
        axes[0].set_ylabel("||w||")
        axes[1].set_ylabel("certified duality gap")
        axes[2].set_ylabel("cumulative effective passes")
        for ax in axes:
            ax.set_xscale("log")
            ax.set_xlabel("1 / lambda")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        axes[0].set_yscale("log")
        axes[2].set_yscale("log")
        fig.suptitle(title or f"eps-approximate regularisation path (eps={self.eps:g}, kappa={self.kappa:g}, "
                              f"{len(bp)} breakpoints)")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
        return fig

    @property
    def init_passes(self) -> float:
        return self.init_oracle_calls / self.n if self.n else 0.0

    @property
    def cumulative_passes(self) -> npt.NDArray[np.float64]:
        """Effective passes (all oracle calls / n) from the start up to each breakpoint."""
        return self.init_passes + np.cumsum(self.passes)

    @property
    def cumulative_times(self) -> npt.NDArray[np.float64]:
        return self.init_time + np.cumsum(self.times)


# ============================================================ file checks
def _validated_fields(doc: Any, where: str) -> dict[str, Any]:
    """Constructor arguments from a JSON document of `RegularizationPath.to_dict`,
    every field checked (ValueError naming the file and the field)."""

    def bad(field: str, problem: str) -> ValueError:
        return ValueError(f"{where}: field {field!r} {problem}")

    def real(field: str, v: Any, lo: float = -math.inf, lo_open: bool = False, hi: float = math.inf,
             hi_open: bool = False) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise bad(field, f"must be a number; got {str(v)[:40]!r}")
        try:
            v = float(v)
        except OverflowError:  # a JSON integer beyond float range (10**400)
            raise bad(field, "is out of float range") from None
        if not math.isfinite(v):
            raise bad(field, f"must be finite; got {v!r}")
        if v < lo or (lo_open and v == lo) or v > hi or (hi_open and v == hi):
            lb = "(" if lo_open else "["
            rb = ")" if hi_open else "]"
            raise bad(field, f"must be in {lb}{lo:g}, {hi:g}{rb}; got {v!r}")
        return v

    def vector(field: str, v: Any, length: int | None = None) -> npt.NDArray[np.float64]:
        if not isinstance(v, list):
            raise bad(field, f"must be a list of numbers; got {type(v).__name__}")
        if length is not None and len(v) != length:
            raise bad(field, f"must have {length} entries; got {len(v)}")
        return np.array([real(f"{field}[{k}]", x) for k, x in enumerate(v)], float)

    if not isinstance(doc, dict) or doc.get("format") != "structfw.RegularizationPath":
        raise ValueError(f"{where}: not a structfw regularisation path JSON document")
    version = doc.get("version")
    if isinstance(version, bool) or version != 1:
        raise bad("version", f"must be 1 (this structfw reads version 1); got {version!r}")
    for field in ("eps", "kappa", "min_lam", "lam_end", "status", "breakpoints", "coefs", "w_inf"):
        if field not in doc:
            raise bad(field, "is missing")
    eps = real("eps", doc["eps"], lo=0.0, lo_open=True)
    kappa = real("kappa", doc["kappa"], lo=0.0, lo_open=True, hi=1.0, hi_open=True)
    min_lam = real("min_lam", doc["min_lam"], lo=0.0, lo_open=True)
    status = doc["status"]
    if status not in STATUSES:
        raise bad("status", f"must be one of {', '.join(STATUSES)}; got {str(status)[:40]!r}")
    lam_end = real("lam_end", doc["lam_end"], lo=0.0)
    if (status == "ended") != (lam_end == 0.0):
        raise bad("lam_end", f"is {lam_end!r}: it must be 0 exactly when the status is 'ended' "
                             f"(status {status!r})")
    bps = vector("breakpoints", doc["breakpoints"])
    if len(bps) and not np.all(bps > 0):
        raise bad("breakpoints", "must be positive")
    if len(bps) > 1 and not np.all(np.diff(bps) < 0):
        k = int(np.flatnonzero(np.diff(bps) >= 0)[0])
        raise bad("breakpoints", f"must decrease strictly (lam_1 > lam_2 > ...); entries {k} and {k + 1} are "
                                 f"{bps[k]!r}, {bps[k + 1]!r}")
    if len(bps) and lam_end > bps[-1]:
        raise bad("lam_end", f"is {lam_end!r}, above the last breakpoint {bps[-1]!r}")
    w_inf = vector("w_inf", doc["w_inf"])
    if not len(w_inf):
        raise bad("w_inf", "must not be empty")
    d = len(w_inf)
    if not isinstance(doc["coefs"], list) or len(doc["coefs"]) != len(bps):
        raise bad("coefs", f"must be a list of {len(bps)} vectors (one per breakpoint)")
    coefs = np.array([vector(f"coefs[{j}]", c, d) for j, c in enumerate(doc["coefs"])], float).reshape(len(bps), d)
    ranges = {"gaps": (-eps, eps), "deltas": (-math.inf, math.inf), "primals": (-math.inf, math.inf),
              "passes": (0.0, math.inf), "opt_passes": (0.0, math.inf), "oracle_calls": (0.0, math.inf),
              "times": (0.0, math.inf), "test_losses": (0.0, math.inf)}
    records: dict[str, list[float]] = {}
    for name in _RECORDS:
        vals = doc.get(name, [None] * len(bps))
        if not isinstance(vals, list) or len(vals) != len(bps):
            raise bad(name, f"must be a list of {len(bps)} numbers or nulls (one per breakpoint)")
        lo, hi = ranges[name]
        # a kept breakpoint's gap is below eps: the induction (eq. (12)) relies on it
        records[name] = [math.nan if v is None else real(f"{name}[{k}]", v, lo=lo, hi=hi,
                                                           hi_open=name == "gaps")
                         for k, v in enumerate(vals)]
    n = doc.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise bad("n", f"must be a positive integer or null; got {str(n)[:40]!r}")
    meta = doc.get("meta", {})
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise bad("meta", f"must be a JSON object; got {type(meta).__name__}")
    init_calls = real("init_oracle_calls", doc.get("init_oracle_calls", 0), lo=0.0)
    init_time = real("init_time", doc.get("init_time", 0.0), lo=0.0)
    return dict(breakpoints=bps, coefs=coefs, w_inf=w_inf, lam_end=lam_end, status=status, eps=eps, kappa=kappa,
                min_lam=min_lam, records=records, init_oracle_calls=int(init_calls), init_time=init_time, n=n,
                meta=meta)


# ============================================================== the algorithm
#: the default lower end of the path is MIN_LAM_TIMES_N / n, an order of magnitude above the
#: customary lam = 1/n.  Measured on full OCR (n = 6,251, eps = 0.1, default engine, test error
#: at every breakpoint, 2 shared cores): the breakpoints down to lam = 0.04 take 2-5 s each (330 s
#: for the first 130), below they grow fast (18 passes a breakpoint at lam = 3e-3, 34 at 1e-3,
#: 390 near 3e-5); 10/n = 1.6e-3 is reached in about 10 minutes, the old default 1e-6 not in 30.
MIN_LAM_TIMES_N = 10.0


def default_min_lam(n: int) -> float:
    """The default ``min_lam``: ``MIN_LAM_TIMES_N / n`` (10/n; see `MIN_LAM_TIMES_N`)."""
    return MIN_LAM_TIMES_N / n


def breakpoint_bound(lam_1: float, min_lam: float, eps: float, kappa: float, mean_max_loss: float) -> int:
    """An upper bound on the number of breakpoints from lam_1 down to min_lam.

    From eq. (12) of Osokin et al. (2016): a breakpoint solved to g <= kappa*eps moves to
    rho = lam_{j+1}/lam_j with log(1/rho) >= 1 - rho = (eps - g)/Delta >= (1 - kappa) eps / Delta,
    and Delta = l - lam ||w||^2 <= l = 1/n sum_i sum_y alpha_i(y) L_i(y) <= Lbar, the mean of
    the largest losses (``mean_max_loss``, what the max oracle returns at w = 0).  So every
    breakpoint advances log(lam) by at least (1 - kappa) eps / Lbar.  (A solve stopped by
    ``max_passes_per_lam`` with kappa*eps < g < eps makes a shorter step.)  The bound is
    usually loose (Delta is much smaller than Lbar once w fits the data), but it grows
    like 1/eps, as the true count does."""
    if not (lam_1 > min_lam) or not (mean_max_loss > 0):
        return 1
    return 1 + math.ceil(math.log(lam_1 / min_lam) * mean_max_loss / ((1.0 - kappa) * eps))


def state_path_for(json_path: str | os.PathLike[str]) -> Path:
    """Where the solver state of the path saved at ``json_path`` goes: ``p.json`` -> ``p.state.npz``."""
    p = Path(json_path)
    return p.with_name((p.stem if p.suffix == ".json" else p.name) + ".state.npz")


#: the path's arguments, checked at the call from one constraints table (the estimators' idiom,
#: `structfw._params`), before any work
_PATH_CONSTRAINTS: dict[str, list[Any]] = {
    "eps": [Interval(0.0, low_open=True)],
    "kappa": [Interval(0.0, 1.0, low_open=True, high_open=True)],
    # below LAM_FLOOR no solve runs (check_lam): the path would stop there with nothing to show
    "min_lam": [NONE, Interval(LAM_FLOOR)],
    "max_passes_per_lam": [Interval(0.0, low_open=True, allow_inf=True)],
    "max_breakpoints": [Interval(1, integer=True)],
    "random_state": RANDOM_STATE,
    "verbose": [Interval(0, integer=True), BOOLEAN],
    "progress": [BOOLEAN],
    "keep_state": [BOOLEAN],
}


def _check_args(values: Mapping[str, Any]) -> tuple[float, float, float | None]:
    """The path's arguments checked against `_PATH_CONSTRAINTS`; (eps, kappa, min_lam) as floats."""
    validate_values("regularization_path", values, _PATH_CONSTRAINTS)
    min_lam = values["min_lam"]
    return float(values["eps"]), float(values["kappa"]), None if min_lam is None else float(min_lam)


class _ReusingProblem(Problem):
    """A Problem that reuses the last full oracle pass when it is asked again at the same w.

    Proposition 1 keeps w, and corners do not depend on lam, so the gap pass that
    opens the solve at lam_{j+1} would repeat, call for call, the one that closed the
    solve at lam_j.  ``shared["saved_calls"]`` counts the oracle calls so saved.
    """

    shared: dict[str, Any]

    def batch_oracle(self, w: npt.NDArray[np.float64], indices: Iterable[int] | None = None,
                     validate: bool = True) -> list[OracleCorner]:
        sh = self.shared
        if indices is None and sh.get("w") is not None and np.array_equal(w, sh["w"]):
            sh["saved_calls"] += self.n
            return list(sh["res"])
        if indices is None:
            # drop the previous pass before computing the next: two passes of corners
            # (n sparse psi vectors each) need not be alive at once
            sh["w"] = sh["res"] = None
        res = Problem.batch_oracle(self, w, indices=indices, validate=validate)
        if indices is None:
            sh["w"], sh["res"] = np.array(w, copy=True), list(res)
        return res

    def batch_hinges(self, w: npt.NDArray[np.float64], validate: bool = True) -> npt.NDArray[np.float64]:
        # through the reusable pass: the solve at the next lam asks for the same corners
        return np.array([r[3] for r in self.batch_oracle(w, validate=validate)])


class _Progress:
    """A tqdm bar over log(lam) from lam_1 down to min_lam, and the per-breakpoint lines.

    The bar's position is log(lam_1 / lam) for the lowest lam covered so far, so its
    ETA assumes the rest of the range costs what the covered part did per unit of
    log(lam) -- optimistic on most problems, where solves take more passes at small lam.
    The postfix shows the breakpoints done, the current lam, the last solve's passes and
    the number of breakpoints the spacing so far extrapolates to."""

    def __init__(self, enabled: bool, lam_1: float, min_lam: float, lam: float, done: int) -> None:
        self.bar: Any = None
        self.lam_1 = lam_1
        self.j0 = done
        self.total = math.log(lam_1 / min_lam) if lam_1 > min_lam else 0.0
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=max(self.total, 1e-12), initial=min(self._pos(lam), self.total), leave=True,
                            bar_format="{l_bar}{bar}| log(lam_1/lam) {n:.2f}/{total:.2f} "
                                       "[{elapsed}<{remaining}]{postfix}", desc="path")

    def _pos(self, lam: float) -> float:
        return math.log(self.lam_1 / lam) if lam > 0 else self.total

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line, flush=True)

    def update(self, count: int, lam: float, covered_to: float, passes: float) -> None:
        if self.bar is None:
            return
        pos = min(self._pos(covered_to), self.total)
        est = f", ~{count * self.total / pos:.0f} in all" if pos > 0 and covered_to > 0 else ""
        self.bar.set_postfix_str(f"{count} breakpoints, lam={lam:.3g}, {passes:.0f} passes{est}", refresh=False)
        self.bar.update(pos - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _resume_source(resume: RegularizationPath | str | os.PathLike[str] | None,
                   resume_state: str | os.PathLike[str] | None, model: StructuredModel) -> RegularizationPath | None:
    """The path to continue (with its solver state when one is available) or None."""
    if resume is None:
        if resume_state is not None:
            raise ValueError("resume_state is given without resume (the path it continues)")
        return None
    if isinstance(resume, RegularizationPath):
        prev = resume
    elif isinstance(resume, (str, Path)):
        prev = RegularizationPath.from_json(Path(resume))
        if resume_state is None and state_path_for(resume).exists():
            resume_state = state_path_for(resume)
    else:
        raise ValueError(f"resume must be a RegularizationPath or the path of its JSON file; got {resume!r}")
    if resume_state is not None:
        prev.load_state(resume_state, model=model)
    return prev


def regularization_path(model: StructuredModel, X: Sequence[Any], Y: Sequence[Any], eps: float | None = None,
                        kappa: float | None = None, solver: PathSolver | None = None, min_lam: float | None = None,
                        max_passes_per_lam: float = 500, random_state: int | np.random.Generator | None = None,
                        verbose: int = 0, X_test: Sequence[Any] | None = None, Y_test: Sequence[Any] | None = None,
                        max_breakpoints: int = 1000, callback: PathCallback | None = None, progress: bool = False,
                        resume: RegularizationPath | str | os.PathLike[str] | None = None,
                        resume_state: str | os.PathLike[str] | None = None,
                        keep_state: bool = False) -> RegularizationPath:
    """Compute an eps-approximate regularisation path (Osokin et al. 2016, Sec. 4, Alg. 7).

    Parameters
    ----------
    model : StructuredModel
        Its loss must satisfy L_i(y_i) = Delta(y_i, y_i) = 0; the max oracle and
        ``decode`` must be exact for the guarantee.
    X, Y : lists
        Training data.
    eps : float > 0, default 0.1 (or the resumed path's)
        Every returned w has primal suboptimality (in fact duality gap) <= eps.
    kappa : float in (0, 1), default 0.5 (or the resumed path's)
        Each breakpoint's pair is solved to duality gap <= kappa * eps.
    solver : BCFW, ShardedBCFW or None
        The warm-started block-coordinate engine (default
        `default_path_solver`, BCPFW with gap sampling); any step
        ("fw", "pairwise", "away"), sampling or cache, but no averaging (the
        induction needs the dual variables of the returned w).  A `ShardedBCFW`
        (threads, processes or Ray actors) runs every solve on its shards, Proposition 1
        acting on each shard in its own units; its w_i are stored as rows
        (``block_storage="auto"`` runs as "dense" or "sparse", the rows "auto" would
        give; "factored" is refused), and X, Y must be in memory (no shard source).
    min_lam : float > 0 or None
        Stop once the next breakpoint falls below this.  None: ``10 / n``
        (`default_min_lam`), an order of magnitude above the usual lam = 1/n:
        on full OCR (eps = 0.1) the path gets there in about 10 minutes, while the
        breakpoints below it cost tens to hundreds of passes each.
    max_passes_per_lam : float
        Engine passes allowed per breakpoint.  If a solve ends with a gap
        >= eps the path stops there with status "not_converged" (a warning).
    random_state : int, Generator or None
    verbose : int
        1: one line per breakpoint.
    X_test, Y_test : lists, optional
        Record the mean test loss of every w^j (not timed).
    max_breakpoints : int, default 1000
        Cap on the number of breakpoints of the path (resumed ones included); the
        computation stops there with status "max_breakpoints" and a RuntimeWarning.
        Their number grows like 1/eps: before the first solve, a RuntimeWarning says
        when the bound of eq. (12) (`breakpoint_bound`) exceeds the cap.
    callback : callable, optional
        Called as ``callback(j, lam_j, w_j, info_dict)`` after every breakpoint.
    progress : bool
        Show a tqdm bar over log(lam) from lam_1 to ``min_lam`` with the breakpoint
        count, the current lam, the passes of the last solve and an estimate of the
        total (per-breakpoint lines of ``verbose`` are printed above it).
    resume : RegularizationPath, str or Path, optional
        Continue this path (or the one saved in this JSON file) from its ``lam_end``
        down to ``min_lam`` without recomputing its breakpoints.  Its solver state
        (`RegularizationPath.state`, or ``resume_state``, or for a file
        ``p.json`` the file ``p.state.npz`` when it exists) makes the continuation
        exactly the uninterrupted computation; without one the first solve starts
        from w = 0 at ``lam_end`` (correct, only slower).  The training data, eps and
        kappa must be those of the path.  The state is taken over (the given path's
        ``state`` becomes None).
    resume_state : str or Path, optional
        A file written by `RegularizationPath.save_state`.
    keep_state : bool
        Keep the engine's final state on the returned path (`RegularizationPath.state`,
        `RegularizationPath.save_state`), to resume it later.  It holds the
        dual variables of all n blocks (hundreds of MB on OCR), so it is off by default.

    Returns
    -------
    RegularizationPath
        Ctrl-C never loses the path: it is deferred to the next safe point (within a
        solve: the end of a block step; elsewhere: between the steps of the
        initialisation and between breakpoints) and the breakpoints finished so far are
        returned with ``status == "interrupted"`` and a consistent engine state
        (``keep_state=True`` keeps it for ``resume``).
    """
    # from the first line on: a Ctrl-C while the data are checked is taken at the first safe point
    with deferred_sigint() as flag:
        return _regularization_path(model, X, Y, eps, kappa, solver, min_lam, max_passes_per_lam, random_state,
                                    verbose, X_test, Y_test, max_breakpoints, callback, progress, resume,
                                    resume_state, keep_state, flag)


def _regularization_path(model: StructuredModel, X: Sequence[Any], Y: Sequence[Any], eps: float | None,
                         kappa: float | None, solver: PathSolver | None, min_lam: float | None, max_passes_per_lam: float,
                         random_state: int | np.random.Generator | None, verbose: int, X_test: Sequence[Any] | None,
                         Y_test: Sequence[Any] | None, max_breakpoints: int,
                         callback: PathCallback | None, progress: bool,
                         resume: RegularizationPath | str | os.PathLike[str] | None,
                         resume_state: str | os.PathLike[str] | None, keep_state: bool,
                         flag: InterruptFlag) -> RegularizationPath:
    prev = _resume_source(resume, resume_state, model)
    if prev is not None:
        for name, given in (("eps", eps), ("kappa", kappa)):
            saved = getattr(prev, name)
            if given is not None and float(given) != saved:
                raise ValueError(f"{name}={given!r} differs from the resumed path's {name}={saved!r}: a path "
                                 f"continues with its own {name} (omit {name})")
        eps, kappa = prev.eps, prev.kappa
    eps = 0.1 if eps is None else eps
    kappa = 0.5 if kappa is None else kappa
    eps, kappa, min_lam = _check_args(dict(eps=eps, kappa=kappa, min_lam=min_lam, max_passes_per_lam=max_passes_per_lam,
                                           max_breakpoints=max_breakpoints, random_state=random_state,
                                           verbose=verbose, progress=progress, keep_state=keep_state))
    if solver is None:
        solver = default_path_solver()
    from .datasets.shard_source import is_shard_source
    from .solvers.sharded import ShardedBCFW

    if is_shard_source(X):
        raise ValueError(f"X={X!r} is a shard source: the regularisation path needs the training set in this "
                         "process (its initialisation and Proposition 1 act on every block's dual variables); "
                         "load the shards and give X, Y as lists (solver=ShardedBCFW(...) still runs the solves on "
                         "shards)")
    if not isinstance(solver, (BCFW, ShardedBCFW)):
        raise ValueError(f"solver must be a structfw.solvers.BCFW or ShardedBCFW engine (any options but "
                         f"averaging); got {solver!r}")
    if isinstance(solver, ShardedBCFW) and solver.block_storage == "factored":
        raise ValueError("solver=ShardedBCFW(block_storage='factored'): the path needs every shard's w_i as rows "
                         "(block_storage 'dense' or 'sparse'; 'auto' runs as the rows it would choose): it starts "
                         "from the oracle's corners at w = 0 written into the rows")
    if isinstance(solver, KernelBCFW):
        raise ValueError("solver must be a linear BCFW engine: the path of a kernel problem is the path of its "
                         "map's linear problem (kmap = KernelMap(model, X, (kernel, gamma, degree, coef0)); "
                         "regularization_path(kmap.linear_model(), kmap.inputs(), Y, ...); kmap.expansion(w) "
                         "predicts; docs/guide/kernel-bcfw.md)")
    if solver.block_storage == "factored":
        raise ValueError("solver must store its w_i as rows (block_storage 'auto', 'dense' or 'sparse'): the path "
                         "starts from the oracle's corners at w = 0 written into the rows; got block_storage='factored'")
    if solver.averaging is not None:
        raise ValueError(f"solver must not average its iterates (averaging={solver.averaging!r}): the path "
                         "needs the dual variables of the returned w; use averaging=None")
    X, Y = cast("tuple[list[Any], list[Any]]", model.check_data(X, Y))  # a Y given is returned as a list
    if isinstance(solver, ShardedBCFW) and solver.block_storage == "auto":
        # "auto" may store a chain's or a multiclass model's w_i factored on shards: the rows it would
        # give otherwise (dense when the largest shard's n_k d doubles fit max_dense_bytes)
        n_k = -(-len(X) // solver.shards)
        rows = "dense" if n_k * model.size_joint_feature * 8 <= solver.max_dense_bytes else "sparse"
        solver = ShardedBCFW(**dict(solver.get_params(), block_storage=rows))
    if (X_test is None) != (Y_test is None):
        raise ValueError("X_test and Y_test must be given together")
    if X_test is not None:
        X_test, Y_test = model.check_data(X_test, Y_test)
    for i, y in enumerate(Y):
        L0 = float(model.loss(y, y))
        if L0 != 0.0:
            raise ValueError(f"the regularisation path needs L_i(y_i) = Delta(Y[i], Y[i]) = 0; got {L0!r} for "
                             f"Y[{i}]")
    rng = np.random.default_rng(random_state)
    problem = _ReusingProblem(model, X, Y, 1.0, validated=True)
    test_key = problem.executor.bind(model, X_test) if X_test is not None else None
    problem.shared = {"w": None, "res": None, "saved_calls": 0}
    n, d = problem.n, problem.d
    if min_lam is None:
        min_lam = default_min_lam(n)
    meta: dict[str, Any]  # solver_params is rewritten below
    meta = dict(model=type(model).__name__, n=n, d=d, solver=solver.label, solver_params=solver.get_params(),
                max_passes_per_lam=float(max_passes_per_lam), fingerprint=problem.fingerprint)
    meta["solver_params"] = {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
                             for k, v in meta["solver_params"].items()}

    state = None
    bps, coefs = [], []
    rec: dict[str, list[float]] = {name: [] for name in _RECORDS}
    w_inf = np.zeros(d)
    lam_1 = lam = math.nan
    covered_to = math.nan   # every lam in [covered_to, lam_1] has an eps-approximate w so far
    init_calls, init_time = 0, 0.0
    mean_max_loss = math.nan
    if prev is not None and len(prev):
        _check_resumable(prev, problem, solver)
        if prev.ended or not (prev.lam_end > min_lam):
            return prev  # nothing below lam_end to compute (or the path already covers every lam)
        bps, coefs = list(prev.breakpoints), list(prev.coefs)
        rec = {name: list(getattr(prev, name)) for name in _RECORDS}
        w_inf, lam_1 = prev.w_inf.copy(), float(prev.breakpoints[0])
        covered_to = lam = prev.lam_end
        init_calls, init_time = prev.init_oracle_calls, prev.init_time
        mean_max_loss = float(prev.meta.get("mean_max_loss", math.nan) or math.nan)
        state, prev.state = prev.state, None
        if bps[-1] == lam:
            # alpha^inf's placeholder at lam_1 (the first solve was cut short): solved now
            for lst in [bps, coefs, *rec.values()]:
                lst.pop()
    status = None
    failed = None
    bar = None
    try:
        if math.isnan(lam):
            t0 = time.perf_counter()
            lam_1, w_inf, state, init_calls, mean_max_loss, trivial = _initialise(
                problem, solver, eps, rng, flag)
            init_time = time.perf_counter() - t0
            if trivial is not None:
                bp0, coefs0, w0, lam_end0, status0, records0 = trivial
                return RegularizationPath(bp0, coefs0, w0, lam_end0, status0, eps, kappa, min_lam, records0,
                                          init_oracle_calls=init_calls, init_time=init_time, n=n, meta=meta)
            covered_to = lam = lam_1
        elif state is not None and state.lam > lam:
            state.keep_w_change_lam(lam)  # Proposition 1 from the last breakpoint down to lam_end
        meta["mean_max_loss"] = mean_max_loss
        bound = breakpoint_bound(lam, min_lam, eps, kappa, mean_max_loss) + len(bps)
        if bound > max_breakpoints:
            warnings.warn(
                f"eps={eps:g} from lam={lam:.4g} down to min_lam={min_lam:.4g} may need up to {bound} "
                f"breakpoints (the bound of eq. (12): the count grows like 1/eps); the path stops after "
                f"max_breakpoints={max_breakpoints} (status 'max_breakpoints'). Raise eps or min_lam, or "
                "raise max_breakpoints", RuntimeWarning, stacklevel=3)
        bar = _Progress(progress, lam_1, min_lam, lam, len(bps))
        if verbose:
            bar.write(f"regularisation path: n={n}, d={d}, eps={eps:g}, kappa={kappa:g}, lam_1={lam_1:.6g}, "
                      f"from lam={lam:.6g} to min_lam={min_lam:.4g}, solver {solver.label}")
        stop = StopRule(max_passes=max_passes_per_lam, tol=kappa * eps, check_every=1)
        cum_time = init_time + float(np.nansum(rec["times"]))
        while True:
            if flag.requested:
                raise KeyboardInterrupt
            if len(bps) >= max_breakpoints:
                status = "max_breakpoints"
                warnings.warn(f"the path stopped after max_breakpoints={max_breakpoints} breakpoints; it covers "
                              f"lam down to {covered_to:.4g} (min_lam={min_lam:.4g}); continue it with "
                              "resume=path and a larger max_breakpoints", RuntimeWarning, stacklevel=3)
                break
            pj = problem.with_lam(lam)
            monitor = Monitor(pj, stop, dict(meta, lam=lam), verbose=0)
            t1 = time.perf_counter()
            saved0 = problem.shared["saved_calls"]
            res = solver.solve(pj, stop, state=state, rng=rng, monitor=monitor)
            state = res.state
            g = float(res.gap)   # gap pass at the solve's final iterate: exact for (alpha, w) at lam
            delta = state.delta()
            dt = time.perf_counter() - t1
            tr = res.trace
            opt_calls = tr.last("oracle_calls", 0.0)
            calls = opt_calls + tr.last("monitor_calls", 0.0) - (problem.shared["saved_calls"] - saved0)
            row = dict(gaps=g, deltas=delta, primals=float(res.primal), passes=calls / n,
                       opt_passes=opt_calls / n, oracle_calls=calls, times=dt, test_losses=math.nan)
            del res, tr, monitor
            if row["passes"] != row["passes"]:
                row["passes"] = 0.0
            if flag.requested or not g < eps:
                # not eps-approximate (or cut short): not a breakpoint; the previous piece reaches down to lam
                failed = row
                status = "interrupted" if flag.requested else "not_converged"
                if status == "not_converged":
                    warnings.warn(f"the solve at lam={lam:.6g} stopped with duality gap {g:.4g} >= eps={eps:g}; "
                                  "the path stops here (raise max_passes_per_lam)", RuntimeWarning,
                                  stacklevel=3)
                break
            if X_test is not None:
                # X_test and Y_test are given together
                row["test_losses"] = model.mean_loss(cast("list[Any]", Y_test),
                                                     problem.executor.decode(cast(int, test_key), state.w))
            # eq. (12): rho <= 0 ends the path (w is eps-approximate for every smaller lam)
            lam_next = 0.0 if delta <= eps - g else (1.0 - (eps - g) / delta) * lam
            for name in _RECORDS:
                rec[name].append(row[name])
            bps.append(lam)
            coefs.append(state.w.copy())
            covered_to = lam_next
            cum_time += dt
            j = len(bps) - 1
            bar.update(len(bps), lam, covered_to, row["passes"])
            if verbose:
                bar.write(f"  [{j + 1:4d}] lam={lam:.6g} gap={g:.3e} Delta={delta:.4g} "
                          f"passes={row['passes']:.1f} time={dt:.2f}s"
                          + (f" test={row['test_losses']:.4f}" if X_test is not None else ""))
            if callback is not None:
                callback(j, lam, state.w, dict(gap=g, delta=delta, passes=row["passes"], time=dt,
                                               test_loss=row["test_losses"], lam_next=lam_next,
                                               cum_time=cum_time, n_breakpoints=len(bps)))
            if lam_next == 0.0:
                status = "ended"
                break
            if lam_next < min_lam:
                status = "min_lam"
                break
            state.keep_w_change_lam(lam_next)   # Proposition 1: w kept, gap exactly eps at lam_next
            lam = lam_next
    except KeyboardInterrupt:
        # from the flag at a safe point, or raised by user code (a callback, a model's decode)
        # between the updates of the records: everything appended so far is consistent
        status = "interrupted"
    finally:
        if bar is not None:
            bar.close()
    if math.isnan(lam_1):   # stopped before lam^inf was known: nothing computed
        return RegularizationPath([], np.zeros((0, d)), w_inf, 0.0, "interrupted", eps, kappa, min_lam, None,
                                  init_calls, init_time, n, meta, state=None)
    if not bps:
        # the first solve did not finish: alpha^inf is eps-approximate at lam_1 by construction
        bps, coefs = [lam_1], [w_inf.copy()]
        row = failed or {}
        rec = {name: [row.get(name, 0.0 if name in ("passes", "opt_passes", "oracle_calls", "times")
                                  else math.nan)] for name in _RECORDS}
        rec["gaps"][0] = rec["deltas"][0] = math.nan
        covered_to = lam_1
    lam_end = 0.0 if status == "ended" else covered_to
    return RegularizationPath(bps, np.array(coefs), w_inf, lam_end, status, eps, kappa, min_lam, rec,
                              init_calls, init_time, n, meta, state=state if keep_state else None)


def _initialise(problem: Problem, solver: PathSolver, eps: float, rng: np.random.Generator,
                flag: InterruptFlag) -> tuple[float, npt.NDArray[np.float64], PathState | None, int, float,
                                              _TrivialPath | None]:
    """Sec. 4 "Initialization": y~_i from the oracle at w = 0, psi~, theta_i, lam^inf, alpha^inf.

    Returns (lam_1, w_inf, state, oracle calls, Lbar, trivial) where ``trivial`` holds
    the arguments of a one-piece path when psi~ = 0 and theta = 0 (w = 0 is optimal for
    every lam).  Raises KeyboardInterrupt between its steps when Ctrl-C was pressed."""
    n, d = problem.n, problem.d
    res0 = problem.batch_oracle(np.zeros(d), validate=True)
    if flag.requested:
        raise KeyboardInterrupt
    labellings = [r[0] for r in res0]
    losses = np.array([float(r[2]) for r in res0])
    psi_t = np.zeros(d)
    for _, psi, _, _ in res0:
        np.add.at(psi_t, psi.indices, psi.values)
    psi_t /= n
    hinge0 = float(np.mean([r[3] for r in res0]))
    del res0  # n corners: not needed beyond this point
    y_hat = problem.decode_all(psi_t)
    if flag.requested:
        raise KeyboardInterrupt
    theta = np.empty(n)
    for i, y in enumerate(y_hat):
        psi_h, _ = problem.corner(i, y)
        # theta_i = max_y -<psi~, psi_i(y)> >= 0 (y = y_i gives 0)
        theta[i] = max(-dot(psi_h, psi_t), 0.0)
    del y_hat
    S = float(psi_t @ psi_t) + float(theta.mean())
    calls = 2 * n
    if S <= 0.0:
        records = {"gaps": [0.0], "deltas": [0.0], "primals": [hinge0], "passes": [0.0], "opt_passes": [0.0],
                   "oracle_calls": [0.0], "times": [0.0], "test_losses": [math.nan]}
        return 1.0, np.zeros(d), None, calls, float(losses.mean()), ([1.0], np.zeros((1, d)), np.zeros(d), 0.0,
                                                                      "ended", records)
    lam = S / eps
    # the primal point of alpha^inf; with w_S >= 0 it is Pi(A alpha^inf) (Pi(c v) = c Pi(v) for c > 0)
    w_inf = problem.project(psi_t / lam)
    if flag.requested:
        raise KeyboardInterrupt
    state = solver.state_at_corners(problem.with_lam(lam), labellings, rng=rng)
    return lam, w_inf, state, calls, float(losses.mean()), None


def _check_resumable(prev: RegularizationPath, problem: Problem, solver: PathSolver) -> None:
    """The path (and its state) belongs to this training set and this engine can continue it."""
    fp = prev.meta.get("fingerprint")
    if prev.n is not None and prev.n != problem.n:
        raise ValueError(f"resume: the path was computed on n={prev.n} examples, these data have n={problem.n}")
    if prev.w_inf.shape[0] != problem.d:
        raise ValueError(f"resume: the path has d={prev.w_inf.shape[0]} features, this model d={problem.d}")
    if fp is not None and fp != problem.fingerprint:
        raise ValueError("resume: the path was computed on other training data (its fingerprint differs)")
    st = prev.state
    if st is None:
        return
    from .solvers.sharded import ShardedBCFW

    sharded = isinstance(solver, ShardedBCFW)
    if not isinstance(st, ShardedState if sharded else BCFWState):
        want = "ShardedState (the solver is a ShardedBCFW)" if sharded else "BCFWState"
        raise ValueError(f"resume: the path's state is a {type(st).__name__}, not a {want}")
    if (st.n, st.d) != (problem.n, problem.d) or st.fingerprint != problem.fingerprint:
        raise ValueError("resume: the path's solver state belongs to other training data")
    if not st.lam >= prev.lam_end:
        raise ValueError(f"resume: the path's state is at lam={st.lam!r}, below its lam_end={prev.lam_end!r}")
    tracked = all(s is not None and s.track_alpha for s in st.states) if isinstance(st, ShardedState) \
        else st.track_alpha
    if solver.step in ("pairwise", "away") and not tracked:
        raise ValueError(f"resume: the saved state has no active sets, which step={solver.step!r} needs; resume "
                         f"with the engine the path was computed with ({prev.meta.get('solver')})")
