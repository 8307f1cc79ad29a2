"""The 1-slack cutting-plane method (Joachims, Finley, Yu 2009, Alg. 4; SVMstruct's default).

Iteration k (one batch oracle pass through the executor):

1. y_i* = argmax_y H_i(y; w^(k)) for every i; their average is ONE aggregated
   constraint c = (psi_bar, L_bar) = (1/n sum_i psi_i(y_i*), 1/n sum_i L_i(y_i*))
   (Joachims et al. 2009, Alg. 4 line 5: the most violated constraint of the
   1-slack formulation, OP 5);
2. it joins the working set W, and the master QP over W

       min_w lam/2 ||w||^2 + xi   s.t.  xi >= L_c - ⟨w, psi_c⟩  for c in W,  xi >= 0

   is solved in its dual (Joachims et al. 2009, OP 6, in our scaling):

       max_beta  -1/(2 lam) ||sum_c beta_c psi_c||^2 + sum_c beta_c L_c,
       beta >= 0,  sum_c beta_c <= 1

   (the slack 1 - sum_c beta_c sits on the trivial constraint xi >= 0, i.e. y_i* = y_i).

**Its dual is a point of our dual** (docs/design.md, "Notation"): giving the weight
beta_c of an aggregated constraint to alpha_i(y_i*^(c)) of every block i (and the rest
to alpha_i(y_i)) is a point alpha of the product of simplices with
w = A alpha = sum_c beta_c psi_c / lam and l = b^T alpha = sum_c beta_c L_c.  The
trace therefore reports the honest duality gap P(w) - D(alpha), D = -lam/2 ||w||^2 + l,
from the same oracle pass that produces the next constraint (as batch FW does).  At an
exact master solution it equals Joachims' stopping quantity: the violation
L_bar - ⟨w, psi_bar⟩ of the new constraint minus the slack xi of the working set.

With w_S >= 0 (the model's ``nonnegative_indices``) the master QP gets the constraints
w_S >= 0; their multipliers mu >= 0 enter the dual as w = (Psi beta + mu)/lam, and the
maximisation over mu gives w = Pi(Psi beta / lam), the same dual point as the engine's
(docs/design.md, "Positivity constraints"): D = -lam/2 ||Pi(v)||^2 + l, v = A alpha.

Inactive constraints (beta_c = 0 for ``inactive_after`` consecutive iterations) are
removed, as SVMstruct does; removing a constraint of zero weight leaves alpha unchanged.

The QP library: ``qp_solver="daqp"`` (DAQP, a dual active-set solver, MIT licence, a
core dependency) by default.  Measured on the master problems this solver produces on
OCR at lam = 0.01 (100 iterations on n = 6,251 with the default removal: up to 77
constraints; 300 iterations on n = 1,500 without removal: up to 300), DAQP takes a
median 0.12 ms (2.4 ms at m <= 300), against 0.5 ms (4.4 ms warm) for proxsuite,
1.8 ms (5.9 ms) for cvxopt and 2.2 ms (20 ms) for clarabel; piqp was comparable
(0.3 ms, 1.7 ms).  All are far below the oracle pass (~0.2 s on OCR), so the choice
rests on accuracy and licence: DAQP's objective agrees with cvxopt's to 1e-10, and
after cleaning (weights <= 1e-12 are zero) inactive constraints get exactly zero
weight, which the removal rule needs.  "proxsuite" (BSD-2) and "cvxopt" (GPL, only an
optional extra) are alternatives when installed; the tests cross-check all three.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from .._linalg import axpy
from .base import Param, SolveContext, Solver, continue_or_restart

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .base import Monitor, StopRule
    from .problem import Problem

QP_SOLVERS = ("daqp", "proxsuite", "cvxopt")

#: A dual weight at or below this is zero (interior-point libraries never return exact zeros).
_ZERO_BETA = 1e-12


# ============================================================ master QP backends
def _master_qp(G: npt.NDArray[np.float64], Lq: npt.NDArray[np.float64], PsiS: npt.NDArray[np.float64] | None,
               lam: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The master dual as min_z 1/2 z^T H z + f^T z over z = (beta, mu) >= 0, sum(beta) <= 1.

    Scaled by lam (objective lam * (1/(2 lam) ||Psi beta + mu||^2 - L^T beta)) so that the
    Hessian is the Gram matrix itself, of order ||psi||^2, whatever lam.  ``PsiS`` (s, m)
    are the rows S of the constraints (w_S >= 0), or None.
    """
    m = G.shape[0]
    if PsiS is None:
        return G, -lam * Lq
    s = PsiS.shape[0]
    H = np.empty((m + s, m + s))
    H[:m, :m] = G
    H[:m, m:] = PsiS.T
    H[m:, :m] = PsiS
    H[m:, m:] = np.eye(s)
    return H, np.concatenate([-lam * Lq, np.zeros(s)])


def _solve_daqp(H: npt.NDArray[np.float64], f: npt.NDArray[np.float64], m: int,
                z0: npt.NDArray[np.float64] | None) -> npt.NDArray[np.float64]:
    """DAQP (Arnstrom, Bemporad, Axehill 2022): a dual active-set method, started cold.

    Measured on OCR's master problems, DAQP's warm start (the previous active set,
    ``sense = 1``) was 1.4-1.5x slower than its cold start, so ``z0`` is not used.  The
    Gram matrix is only semidefinite (more constraints than dimensions, repeated ones),
    so DAQP's proximal-point iterations are on (``eps_prox``): they converge to a
    solution of the semidefinite problem rather than perturbing it.
    """
    import daqp

    nz = H.shape[0]
    # the first nz bounds are the simple bounds z_j >= 0, the last one the row sum(beta) <= 1
    A = np.zeros((1, nz))
    A[0, :m] = 1.0
    bupper = np.concatenate([np.full(nz, 1e30), [1.0]])
    blower = np.concatenate([np.zeros(nz), [-1e30]])
    sense = np.zeros(nz + 1, dtype=np.int32)
    z, _, flag, _ = daqp.solve(np.ascontiguousarray(H), np.ascontiguousarray(f), A, bupper, blower, sense,
                               eps_prox=1e-6, primal_tol=1e-10, iter_limit=10000)
    if flag < 0:
        raise RuntimeError(f"DAQP failed on the cutting-plane master QP (exit flag {flag})")
    return np.asarray(z, dtype=np.float64)


def _solve_proxsuite(H: npt.NDArray[np.float64], f: npt.NDArray[np.float64], m: int,
                     z0: npt.NDArray[np.float64] | None) -> npt.NDArray[np.float64]:
    """proxsuite's dense ProxQP (Bambade et al. 2022), warm-started from the previous z
    (10x faster than its cold start on working sets of ~300 constraints)."""
    from proxsuite import proxqp

    nz = H.shape[0]
    C = np.vstack([np.eye(nz), np.concatenate([np.ones(m), np.zeros(nz - m)])[None, :]])
    lo = np.concatenate([np.zeros(nz), [-1e20]])
    hi = np.concatenate([np.full(nz, 1e20), [1.0]])
    qp = proxqp.dense.QP(nz, 0, nz + 1)
    qp.settings.eps_abs = 1e-10
    qp.settings.eps_rel = 0.0
    qp.settings.verbose = False
    if z0 is not None:
        qp.settings.initial_guess = proxqp.InitialGuess.WARM_START
    qp.init(H, f, None, None, C, lo, hi)
    if z0 is not None:
        qp.solve(z0, None, None)
    else:
        qp.solve()
    return np.asarray(qp.results.x, dtype=np.float64)


def _solve_cvxopt(H: npt.NDArray[np.float64], f: npt.NDArray[np.float64], m: int,
                  z0: npt.NDArray[np.float64] | None) -> npt.NDArray[np.float64]:
    """cvxopt's interior-point coneqp (GPL: an optional extra, never the default)."""
    import cvxopt
    from cvxopt import solvers

    nz = H.shape[0]
    Gc = np.vstack([-np.eye(nz), np.concatenate([np.ones(m), np.zeros(nz - m)])[None, :]])
    h = np.concatenate([np.zeros(nz), [1.0]])
    sol = solvers.qp(cvxopt.matrix(H), cvxopt.matrix(f), cvxopt.matrix(Gc), cvxopt.matrix(h),
                     options=dict(show_progress=False, abstol=1e-12, reltol=1e-12, feastol=1e-12))
    return np.array(sol["x"]).ravel()


#: qp_solver -> solve(H, f, m, z0): z minimising 1/2 z^T H z + f^T z (see `_master_qp`)
_QPBackend = Callable[[npt.NDArray[np.float64], npt.NDArray[np.float64], int, npt.NDArray[np.float64] | None],
                      npt.NDArray[np.float64]]
_BACKENDS: dict[str, _QPBackend] = {"daqp": _solve_daqp, "proxsuite": _solve_proxsuite, "cvxopt": _solve_cvxopt}
_PACKAGES = {"daqp": "daqp", "proxsuite": "proxsuite", "cvxopt": "cvxopt"}


def check_qp_solver(name: str) -> None:
    """Import the library of ``qp_solver`` once at fit, with an error naming the option."""
    import importlib

    try:
        importlib.import_module(_PACKAGES[name])
    except ImportError:
        raise ValueError(f"qp_solver={name!r} needs the package {_PACKAGES[name]!r}, which is not installed "
                         f"(pip install {_PACKAGES[name]}); the default 'daqp' is a core dependency") from None


def feasible_beta(z: npt.NDArray[np.float64], m: int) -> npt.NDArray[np.float64]:
    """Clean a QP solution into a point of {beta >= 0, sum(beta) <= 1}.

    Tiny weights become exact zeros (so that inactive constraints are recognised) and a
    sum above 1 by rounding is scaled back: the dual point must be feasible for the
    reported D(alpha) to be a true lower bound."""
    beta = np.where(z[:m] > _ZERO_BETA, z[:m], 0.0)
    s = beta.sum()
    if s > 1.0:
        beta /= s
    return beta


# ============================================================ state
class CuttingPlaneState:
    """Working set, master dual weights and iterate of the 1-slack cutting-plane method.

    Attributes
    ----------
    psi : ndarray (m, d)     psi_bar of each aggregated constraint (lam-free, dense rows)
    loss : ndarray (m,)      L_bar of each constraint
    gram : ndarray (m, m)    ⟨psi_c, psi_c'⟩, kept incrementally
    beta : ndarray (m,)      master dual weights (the dual point: alpha_i(y_i*^(c)) gets beta_c)
    idle : ndarray (m,)      consecutive iterations with beta_c = 0
    born : ndarray (m,)      iteration that added the constraint
    v, w : ndarray (d,)      v = Psi^T beta / lam = A alpha, w = Pi(v) (the same array unconstrained)
    ell : float              l = L^T beta = b^T alpha
    k : int                  iterations done
    """

    def __init__(self, problem: Problem) -> None:
        self.n, self.d = problem.n, problem.d
        self.lam = problem.lam
        self.fingerprint = problem.fingerprint
        self.psi = np.zeros((0, problem.d))
        self.loss = np.zeros(0)
        self.gram = np.zeros((0, 0))
        self.beta = np.zeros(0)
        self.idle = np.zeros(0, np.int64)
        self.born = np.zeros(0, np.int64)
        self.w = np.zeros(problem.d)
        self.v = np.zeros(problem.d) if problem.constrained else self.w
        self.ell = 0.0
        self.k = 0

    @property
    def m(self) -> int:
        """Number of constraints in the working set."""
        return self.loss.shape[0]

    def dual(self) -> float:
        """D(alpha) = -lam/2 ||w||^2 + l (w = Pi(v) with positivity constraints)."""
        return -0.5 * self.lam * float(self.w @ self.w) + self.ell

    def set_beta(self, problem: Problem, beta: npt.NDArray[np.float64]) -> None:
        """The dual point of weights ``beta``: v = Psi^T beta / lam, w = Pi(v), l = L^T beta."""
        self.beta = beta
        self.v[:] = (beta @ self.psi) / problem.lam if self.m else 0.0
        if self.v is not self.w:
            problem.project(self.v, out=self.w)
        self.ell = float(beta @ self.loss) if self.m else 0.0

    def rescale_lam(self, problem: Problem) -> None:
        """Keep beta (hence alpha), change lam: v = A alpha scales by lam_old / lam_new."""
        self.lam = problem.lam
        self.set_beta(problem, self.beta)

    def add(self, psi_bar: npt.NDArray[np.float64], L_bar: float) -> None:
        """Append a constraint with zero weight; the Gram matrix grows by one row."""
        row = self.psi @ psi_bar
        m = self.m
        gram = np.empty((m + 1, m + 1))
        gram[:m, :m] = self.gram
        gram[m, :m] = gram[:m, m] = row
        gram[m, m] = float(psi_bar @ psi_bar)
        self.gram = gram
        self.psi = np.vstack([self.psi, psi_bar[None, :]])
        self.loss = np.append(self.loss, L_bar)
        self.beta = np.append(self.beta, 0.0)
        self.idle = np.append(self.idle, 0)
        self.born = np.append(self.born, self.k)

    def keep(self, mask: npt.NDArray[np.bool_]) -> None:
        """Keep the constraints where ``mask`` is True (beta of removed ones must be 0 or re-solved)."""
        self.psi = self.psi[mask]
        self.loss = self.loss[mask]
        self.gram = self.gram[np.ix_(mask, mask)]
        self.beta = self.beta[mask]
        self.idle = self.idle[mask]
        self.born = self.born[mask]


# ============================================================ solver
class CuttingPlane(Solver):
    """The 1-slack cutting-plane method with a working set solved by a QP library.

    Parameters
    ----------
    qp_solver : {"daqp", "proxsuite", "cvxopt"}
        Library that solves the master QP (see the module docstring for the measurements).
    inactive_after : int >= 0
        Remove a constraint after this many consecutive iterations with zero dual
        weight (0: never remove).
    max_constraints : int >= 2
        Largest working set; when full, a zero-weight constraint is removed, or else the
        two of least weight are merged (aggregation keeps the dual point and convergence).
    """

    name = "cutting-plane"
    PARAMS = (
        Param("qp_solver", "daqp", "choice", QP_SOLVERS, help="QP library for the master problem."),
        Param("inactive_after", 50, "int", low=0,
              help="Drop a constraint after this many iterations with zero dual weight (0: never)."),
        Param("max_constraints", 1000, "int", low=2, help="Largest working set."),
    )

    qp_solver: str
    inactive_after: int
    max_constraints: int

    def __init__(self, qp_solver: str = "daqp", inactive_after: int = 50, max_constraints: int = 1000) -> None:
        self._init_params(locals())

    @property
    def label(self) -> str:
        return "cutting-plane"

    def init_state(self, problem: Problem, state: object | None,
                   rng: int | np.random.Generator | None) -> _CuttingPlaneContext:
        check_qp_solver(self.qp_solver)
        st = continue_or_restart(state, CuttingPlaneState, problem) or CuttingPlaneState(problem)
        if st.lam != problem.lam:
            st.rescale_lam(problem)
        return _CuttingPlaneContext(problem, st)

    def checkpoint_due(self, ctx: _CuttingPlaneContext, since_check: int, done: int, stop: StopRule,
                       monitor: Monitor) -> bool:
        return True  # the next iteration needs this oracle pass anyway (it gives the new constraint)

    def checkpoint(self, ctx: _CuttingPlaneContext, monitor: Monitor, initial: bool,
                   monitoring_only: bool = False) -> float:
        """One oracle pass at w^(k): the aggregated constraint, P(w^(k)) and the gap P - D."""
        problem, st = ctx.problem, ctx.state
        n = problem.n
        res = problem.batch_oracle(st.w, validate=True)
        psi_bar = np.zeros(problem.d)
        L_bar = 0.0
        hinge = 0.0
        for (_, psi, L, H) in res:
            axpy(1.0 / n, psi, psi_bar)
            L_bar += L / n
            hinge += H
        ctx.cut = (psi_bar, L_bar)
        k = st.k - ctx.k0
        with monitor.monitoring():
            if monitoring_only:
                monitor.monitor_calls += n
            primal = problem.primal(st.w, hinge)
            dual = st.dual()
            monitor.record(st.w, float(k), k * n, primal, dual, primal - dual, engine_passes=k,
                           n_constraints=st.m)
        return primal - dual

    def run_pass(self, ctx: _CuttingPlaneContext, flag: InterruptFlag) -> None:
        """Alg. 4 lines 6-7: add the constraint, re-solve the master QP, drop inactive constraints."""
        problem, st = ctx.problem, ctx.state
        # set by the checkpoint that precedes every pass (checkpoint_due is always True)
        psi_bar, L_bar = cast("tuple[npt.NDArray[np.float64], float]", ctx.cut)
        ctx.cut = None
        if st.m >= self.max_constraints:
            self._make_room(st)
        st.add(psi_bar, L_bar)
        st.set_beta(problem, self._solve_master(problem, st))
        st.idle = np.where(st.beta > 0.0, 0, st.idle + 1)
        if self.inactive_after > 0:
            # zero weight: removing it changes neither alpha nor the master optimum
            drop = (st.idle >= self.inactive_after) & (st.beta == 0.0)
            if drop.any():
                st.keep(~drop)
        st.k += 1

    def _make_room(self, st: CuttingPlaneState) -> None:
        """Free one slot of a full working set without moving the dual point.

        A constraint of zero weight goes first (the longest idle, then the oldest).  When
        every constraint has weight, the two of least weight are merged into their
        beta-weighted average with the summed weight (Kiwiel's aggregation, as in
        bundle methods): w and l are unchanged, so D never decreases and the method
        still converges, where evicting a weighted constraint could cycle."""
        zero = np.flatnonzero(st.beta == 0.0)
        mask = np.ones(st.m, bool)
        if zero.size:
            mask[zero[np.lexsort((st.born[zero], -st.idle[zero]))[0]]] = False
            st.keep(mask)
            return
        a, b = np.argsort(st.beta, kind="stable")[:2]
        wa, wb = st.beta[a], st.beta[b]
        psi = (wa * st.psi[a] + wb * st.psi[b]) / (wa + wb)
        st.psi[a] = psi
        st.loss[a] = (wa * st.loss[a] + wb * st.loss[b]) / (wa + wb)
        st.beta[a] = wa + wb
        st.born[a] = max(st.born[a], st.born[b])
        row = st.psi @ psi
        st.gram[a, :] = row
        st.gram[:, a] = row
        mask[b] = False
        st.keep(mask)

    def _solve_master(self, problem: Problem, st: CuttingPlaneState) -> npt.NDArray[np.float64]:
        """beta of the master dual over the working set (warm start: the previous beta, new one 0)."""
        PsiS = st.psi[:, problem.nonneg_idx].T if problem.constrained else None
        H, f = _master_qp(st.gram, st.loss, PsiS, problem.lam)
        z0 = st.beta if PsiS is None else np.concatenate([st.beta, np.maximum(-(PsiS @ st.beta), 0.0)])
        z = _BACKENDS[self.qp_solver](H, f, st.m, z0 if st.m > 1 else None)
        beta = feasible_beta(z, st.m)
        return beta


class _CuttingPlaneContext(SolveContext):
    """A cutting-plane solve: the state, the iteration it started from, and the aggregated
    constraint that the checkpoint before each iteration found."""

    def __init__(self, problem: Problem, state: CuttingPlaneState) -> None:
        super().__init__(problem, state)
        self.state: CuttingPlaneState = state
        self.k0 = state.k
        self.cut: tuple[npt.NDArray[np.float64], float] | None = None
