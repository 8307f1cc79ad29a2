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
import time
import warnings
from pathlib import Path

import numpy as np

from ._linalg import dot
from .solvers.base import Monitor, StopRule
from .solvers.bcfw import BCFW
from .solvers.problem import Problem

__all__ = ["regularization_path", "RegularizationPath", "default_path_solver"]

#: per-breakpoint records (lists of floats, one entry per breakpoint)
_RECORDS = ("gaps", "deltas", "primals", "passes", "opt_passes", "oracle_calls", "times", "test_losses")


def default_path_solver():
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
        "ended" (rho <= 0), "min_lam" (went below min_lam), "max_breakpoints",
        "not_converged" (a solve did not reach a gap below eps; that breakpoint is
        dropped and the previous piece reaches down to ``lam_end``) or "interrupted"
        (Ctrl-C during a solve; handled the same way).
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
    """

    def __init__(self, breakpoints, coefs, w_inf, lam_end, status, eps, kappa, min_lam, records=None,
                 init_oracle_calls=0, init_time=0.0, n=None, meta=None):
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

    # ------------------------------------------------------------ queries
    @property
    def ended(self):
        return self.status == "ended"

    @property
    def lam_inf(self):
        return float(self.breakpoints[0]) if len(self.breakpoints) else math.nan

    def __len__(self):
        return len(self.breakpoints)

    def __repr__(self):
        if not len(self):
            return f"RegularizationPath(eps={self.eps}, no breakpoints, status={self.status!r})"
        return (f"RegularizationPath(eps={self.eps}, kappa={self.kappa}, {len(self)} breakpoints "
                f"from lam={self.breakpoints[0]:.4g} to {self.breakpoints[-1]:.4g}, status={self.status!r})")

    def _check_query(self, lam):
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

    def piece_index(self, lam):
        """Index j of the piece [breakpoints[j+1], breakpoints[j]] holding lam, or -1 for lam > lam_1.

        At a breakpoint the later piece (the solved pair) is chosen."""
        lam = self._check_query(lam)
        if lam > self.breakpoints[0]:
            return -1
        return int(np.count_nonzero(self.breakpoints >= lam)) - 1

    def coef_at(self, lam):
        """An eps-approximate w for this lam (a copy)."""
        j = self.piece_index(lam)
        if j < 0:
            return (self.breakpoints[0] / float(lam)) * self.w_inf
        return self.coefs[j].copy()

    def gap_bound_at(self, lam):
        """The certified duality gap of the path's pair at lam (<= eps)."""
        j = self.piece_index(lam)
        lam = float(lam)
        if j < 0:
            return float("nan")  # bounded by eps via the lam^inf construction
        return float(self.gaps[j] + (1.0 - lam / self.breakpoints[j]) * self.deltas[j])

    # -------------------------------------------------------- persistence
    def to_dict(self):
        def f(x):
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

    def to_json(self, path=None):
        """JSON text of the path; also written to ``path`` when given."""
        text = json.dumps(self.to_dict())
        if path is not None:
            Path(path).write_text(text)
        return text

    save = to_json

    @classmethod
    def from_json(cls, source):
        """Load from a JSON string or a path to a file written by :meth:`to_json`."""
        if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
            source = Path(source).read_text()
        doc = json.loads(source)
        if doc.get("format") != "structfw.RegularizationPath":
            raise ValueError("not a structfw regularisation path JSON document")
        records = {name: [math.nan if v is None else v for v in doc.get(name, [])] for name in _RECORDS}
        w_inf = np.asarray(doc["w_inf"], float)
        coefs = np.asarray(doc["coefs"], float).reshape(len(doc["breakpoints"]), w_inf.shape[0])
        return cls(doc["breakpoints"], coefs, w_inf, doc["lam_end"], doc["status"], doc["eps"], doc["kappa"],
                   doc["min_lam"], records, doc.get("init_oracle_calls", 0), doc.get("init_time", 0.0),
                   doc.get("n"), doc.get("meta"))

    load = from_json

    # ------------------------------------------------------------- figure
    def plot(self, path=None, title=None):
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
    def init_passes(self):
        return self.init_oracle_calls / self.n if self.n else 0.0

    @property
    def cumulative_passes(self):
        """Effective passes (all oracle calls / n) from the start up to each breakpoint."""
        return self.init_passes + np.cumsum(self.passes)

    @property
    def cumulative_times(self):
        return self.init_time + np.cumsum(self.times)


# ============================================================== the algorithm
def _check_args(eps, kappa, min_lam, max_passes_per_lam, max_breakpoints):
    def num(name, v):
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number; got {v!r}") from None
        if math.isnan(v):
            raise ValueError(f"{name} must be a number; got {v!r}")
        return v

    eps, kappa, min_lam = num("eps", eps), num("kappa", kappa), num("min_lam", min_lam)
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"eps must be a positive finite number; got {eps!r}")
    if not (0 < kappa < 1):
        raise ValueError(f"kappa must satisfy 0 < kappa < 1; got {kappa!r}")
    if not (min_lam > 0 and math.isfinite(min_lam)):
        raise ValueError(f"min_lam must be a positive finite number; got {min_lam!r}")
    if not (num("max_passes_per_lam", max_passes_per_lam) > 0):
        raise ValueError(f"max_passes_per_lam must be a positive number; got {max_passes_per_lam!r}")
    if not (isinstance(max_breakpoints, (int, np.integer)) and max_breakpoints >= 1):
        raise ValueError(f"max_breakpoints must be an integer >= 1; got {max_breakpoints!r}")
    return eps, kappa, min_lam


class _ReusingProblem(Problem):
    """A Problem that reuses the last full oracle pass when it is asked again at the same w.

    Proposition 1 keeps w, and corners do not depend on lam, so the gap pass that
    opens the solve at lam_{j+1} would repeat, call for call, the one that closed the
    solve at lam_j.  ``shared["saved_calls"]`` counts the oracle calls so saved.
    """

    def batch_oracle(self, w, indices=None, validate=True):
        sh = self.shared
        if indices is None and sh.get("w") is not None and np.array_equal(w, sh["w"]):
            sh["saved_calls"] += self.n
            return list(sh["res"])
        res = Problem.batch_oracle(self, w, indices=indices, validate=validate)
        if indices is None:
            sh["w"], sh["res"] = np.array(w, copy=True), list(res)
        return res

    def batch_hinges(self, w, validate=True):
        # through the reusable pass: the solve at the next lam asks for the same corners
        return np.array([r[3] for r in self.batch_oracle(w, validate=validate)])


def regularization_path(model, X, Y, eps=0.1, kappa=0.5, solver=None, min_lam=1e-6, max_passes_per_lam=500,
                        random_state=None, verbose=0, X_test=None, Y_test=None, max_breakpoints=100000,
                        callback=None):
    """Compute an eps-approximate regularisation path (Osokin et al. 2016, Sec. 4, Alg. 7).

    Parameters
    ----------
    model : StructuredModel
        Its loss must satisfy L_i(y_i) = Delta(y_i, y_i) = 0; the max oracle and
        ``decode`` must be exact for the guarantee.
    X, Y : lists
        Training data.
    eps : float > 0
        Every returned w has primal suboptimality (in fact duality gap) <= eps.
    kappa : float in (0, 1)
        Each breakpoint's pair is solved to duality gap <= kappa * eps.
    solver : BCFW or None
        The warm-started block-coordinate engine (default
        :func:`default_path_solver`, BCPFW with gap sampling); any step
        ("fw", "pairwise", "away"), sampling or cache, but no averaging (the
        induction needs the dual variables of the returned w).
    min_lam : float > 0
        Stop once the next breakpoint falls below this.
    max_passes_per_lam : float
        Engine passes allowed per breakpoint.  If a solve ends with a gap
        >= eps the path stops there with status "not_converged" (a warning).
    random_state : int, Generator or None
    verbose : int
        1: one line per breakpoint.
    X_test, Y_test : lists, optional
        Record the mean test loss of every w^j (not timed).
    max_breakpoints : int
    callback : callable, optional
        Called as ``callback(j, lam_j, w_j, info_dict)`` after every breakpoint.

    Returns
    -------
    RegularizationPath
    """
    eps, kappa, min_lam = _check_args(eps, kappa, min_lam, max_passes_per_lam, max_breakpoints)
    if solver is None:
        solver = default_path_solver()
    if not isinstance(solver, BCFW):
        raise ValueError(f"solver must be a structfw.solvers.BCFW engine (any options but averaging); "
                         f"got {solver!r}")
    if solver.averaging is not None:
        raise ValueError(f"solver must not average its iterates (averaging={solver.averaging!r}): the path "
                         "needs the dual variables of the returned w; use averaging=None")
    X, Y = model.check_data(X, Y)
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

    # ---- initialisation (Sec. 4): y~_i from the oracle at w = 0, psi~, theta_i, lam^inf
    t0 = time.perf_counter()
    res0 = problem.batch_oracle(np.zeros(d), validate=True)
    psi_t = np.zeros(d)
    for _, psi, _, _ in res0:
        np.add.at(psi_t, psi.indices, psi.values)
    psi_t /= n
    y_hat = problem.decode_all(psi_t)
    theta = np.empty(n)
    for i, y in enumerate(y_hat):
        psi_h, _ = problem.corner(i, y)
        # theta_i = max_y -<psi~, psi_i(y)> >= 0 (y = y_i gives 0)
        theta[i] = max(-dot(psi_h, psi_t), 0.0)
    S = float(psi_t @ psi_t) + float(theta.mean())
    init_calls = 2 * n
    meta = dict(model=type(model).__name__, n=n, d=d, solver=solver.label, solver_params=solver.get_params(),
                max_passes_per_lam=float(max_passes_per_lam))
    meta["solver_params"] = {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
                             for k, v in meta["solver_params"].items()}
    if S <= 0.0:
        # psi~ = 0 and theta = 0: w = 0 is optimal for every lam
        return RegularizationPath([1.0], np.zeros((1, d)), np.zeros(d), 0.0, "ended", eps, kappa, min_lam,
                                  {"gaps": [0.0], "deltas": [0.0], "primals": [float(np.mean([r[3] for r in res0]))],
                                   "passes": [0.0], "opt_passes": [0.0], "oracle_calls": [0.0], "times": [0.0],
                                   "test_losses": [math.nan]}, init_calls, time.perf_counter() - t0, n, meta)
    lam = S / eps
    # the primal point of alpha^inf; with w_S >= 0 it is Pi(A alpha^inf) (Pi(c v) = c Pi(v) for c > 0)
    w_inf = problem.project(psi_t / lam)
    state = solver.state_at_corners(problem.with_lam(lam), [r[0] for r in res0], rng=rng)
    init_time = time.perf_counter() - t0

    # ---- induction (Prop. 1 + eq. (12))
    bps, coefs = [], []
    rec = {name: [] for name in _RECORDS}
    stop = StopRule(max_passes=max_passes_per_lam, tol=kappa * eps, check_every=1)
    status = "max_breakpoints"
    lam_end = math.nan
    if verbose:
        print(f"regularisation path: n={n}, d={d}, eps={eps:g}, kappa={kappa:g}, lam_inf={lam:.6g}, "
              f"solver {solver.label}", flush=True)
    for j in range(max_breakpoints):
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
        bps.append(lam)
        coefs.append(state.w.copy())
        rec["gaps"].append(g)
        rec["deltas"].append(delta)
        rec["primals"].append(float(res.primal))
        rec["passes"].append(calls / n)
        rec["opt_passes"].append(opt_calls / n)
        rec["oracle_calls"].append(calls)
        rec["times"].append(dt)
        tl = math.nan
        if X_test is not None:
            tl = model.mean_loss(Y_test, problem.executor.decode(test_key, state.w))
        rec["test_losses"].append(tl)
        if verbose:
            print(f"  [{j + 1:4d}] lam={lam:.6g} gap={g:.3e} Delta={delta:.4g} passes={calls / n:.1f} "
                  f"time={dt:.2f}s" + (f" test={tl:.4f}" if X_test is not None else ""), flush=True)
        if callback is not None:
            callback(j, lam, state.w, dict(gap=g, delta=delta, passes=calls / n, time=dt, test_loss=tl))
        if res.stopped == "interrupted" or not g < eps:
            if res.stopped == "interrupted":
                status = "interrupted"
            else:
                warnings.warn(f"the solve at lam={lam:.6g} stopped ({res.stopped}) with duality gap {g:.4g} >= "
                              f"eps={eps:g}; the path stops here (raise max_passes_per_lam)", RuntimeWarning,
                              stacklevel=2)
                status = "not_converged"
            lam_end = lam
            # this pair is not eps-approximate: drop it; the previous piece reaches down to lam
            bps.pop()
            coefs.pop()
            failed = {name: rec[name].pop() for name in _RECORDS}
            if not bps:  # first solve failed: keep alpha^inf, eps-approximate at lam_1 by construction
                bps.append(lam)
                coefs.append(w_inf.copy())
                for name in _RECORDS:
                    rec[name].append(failed[name])
                rec["gaps"][-1] = math.nan
                rec["deltas"][-1] = math.nan
            break
        if delta <= eps - g:
            # eq. (12) gives rho <= 0: w is eps-approximate for every smaller lam
            status, lam_end = "ended", 0.0
            break
        rho = 1.0 - (eps - g) / delta
        lam_next = rho * lam
        if lam_next < min_lam:
            status, lam_end = "min_lam", lam_next
            break
        state.keep_w_change_lam(lam_next)
        lam = lam_next
    else:
        lam_end = lam
    return RegularizationPath(bps, np.array(coefs), w_inf, lam_end, status, eps, kappa, min_lam, rec,
                              init_calls, init_time, n, meta)
