"""Online exponentiated gradient on the SSVM dual (Collins, Globerson, Koo, Carreras, Bartlett 2008).

The dual (docs/design.md, "Notation") is maximised over the product of simplices with
each block kept in the exponential family

    alpha_i(y) ∝ exp(theta_i(y)),   theta_i(y) = c_i L_i(y) + ⟨v_i, phi(x_i, y)⟩   (+ a constant),

so a block is the pair (c_i, v_i) (Collins et al. 2008, Sec. 3: the EG update keeps
theta_i in the span of the parts; here the parts are the loss and the joint features).
The online algorithm (Collins et al. 2008, Fig. 1, online variant) visits one block at a
time and takes the EG step theta_i <- theta_i + eta_i n grad_i D(alpha); the dual's
gradient in alpha_i(y) is H_i(y; w)/n with H_i(y; w) = L_i(y) - ⟨w, phi(x_i, y_i)⟩ + ⟨w, phi(x_i, y)⟩,
and the middle term does not depend on y (it cancels in the normalisation), so

    c_i <- c_i + eta_i,    v_i <- v_i + eta_i w.

The block's new contribution comes from the model's **expectation oracle**
``model.expectation(x, y_true, v, c) -> (E_phi, E_loss, log_Z)`` under that distribution:

    w_i = (phi(x_i, y_i) - E_alpha_i[phi(x_i, y)]) / (lam n),   l_i = E_alpha_i[L_i(y)] / n,

and w = sum_i w_i, l = sum_i l_i, D(alpha) = -lam/2 ||w||^2 + l as in the engine.

Step size (the rule implemented): every block starts with ``eta`` (option); an update
that would decrease the dual objective D is rejected and that block's eta_i is halved,
so its next visit tries the smaller step (Collins et al. 2008, Sec. 6: "if the objective
did not improve, halve eta", applied per example as in their online experiments).
Each visit is one expectation call, counted as one oracle call.

Start: theta_i(y) = init_c L_i(y); the default init_c = 0 is alpha_i uniform over Y_i
(EG needs an interior point; the maximum-entropy one needs no parameter), a negative
init_c concentrates alpha_i near y_i, i.e. w near 0 where BCFW starts.  Its block parts take one expectation call
per block, made at the first checkpoint and counted as oracle calls (and time) of the first solve.

With w_S >= 0 (the model's ``nonnegative_indices``) the gradient is taken at w = Pi(v)
(docs/design.md, "Positivity constraints") and D = -lam/2 ||Pi(v)||^2 + l.

Memory: v_i and w_i are dense d-vectors per block, 2 n d floats (OCR: n = 6,251,
d = 4,028: 0.4 GB), which is why this baseline is for moderate n d only.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .._linalg import as_dense
from ..models.base import StructuredModel
from .base import Param, SolveContext, Solver, continue_or_restart

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .base import Monitor
    from .problem import Problem

EG_SAMPLINGS = ("perm", "uniform")

#: Relative size of a change of D that is rounding, not a decrease.
_NOISE = 1e-12


def has_expectation(model: object) -> bool:
    """True when the model implements the expectation oracle (not only inherits a stub)."""
    fn = getattr(type(model), "expectation", None)
    return callable(fn) and fn is not getattr(StructuredModel, "expectation", None)


def block_expectation(problem: Problem, i: int, v: npt.ArrayLike, c: float) -> tuple[npt.NDArray[np.float64], float]:
    """(E_phi as dense ndarray, E_loss) of alpha_i ∝ exp(c L_i(y) + ⟨v, phi(x_i, y)⟩).

    The model is reached through the problem's data; a NaN or infinite result is an error
    naming the example (an overflowing expectation oracle would silently poison w)."""
    E_phi, E_loss, _ = problem.expectation(i, v, c)
    E_phi = as_dense(E_phi)
    E_loss = float(E_loss)
    if E_phi.shape != (problem.d,) or not (np.all(np.isfinite(E_phi)) and math.isfinite(E_loss)):
        raise ValueError(f"{type(problem.model).__name__}.expectation returned a non-finite or wrongly shaped "
                         f"result for example {i} (E_phi shape {E_phi.shape}, expected ({problem.d},))")
    return E_phi, E_loss


class OnlineEGState:
    """Complete state of online EG: block parameters, block parts, step sizes, sampler.

    Attributes
    ----------
    c : ndarray (n,)        loss coefficients c_i of theta_i
    V : ndarray (n, d)      feature coefficients v_i of theta_i
    wi : ndarray (n, d)     w_i = A alpha_[i] at lam
    li : ndarray (n,)       l_i = b^T alpha_[i]
    eta : ndarray (n,)      per-block step sizes (halved on a rejected update)
    v, w : ndarray (d,)     v = sum_i w_i = A alpha, w = Pi(v) (the same array unconstrained)
    ell : float             l = sum_i l_i
    k : int                 block visits done
    order, pos              the current pass's visiting order and position in it
    rng : numpy.random.Generator
    """

    def __init__(self, problem: Problem, rng: int | np.random.Generator | None, eta0: float) -> None:
        n, d = problem.n, problem.d
        self.n, self.d = n, d
        self.lam = problem.lam
        self.fingerprint = problem.fingerprint
        self.c = np.zeros(n)
        self.V = np.zeros((n, d))
        self.wi = np.zeros((n, d))
        self.li = np.zeros(n)
        self.eta = np.full(n, float(eta0))
        self.w = np.zeros(d)
        self.v = np.zeros(d) if problem.constrained else self.w
        self.ell = 0.0
        self.k = 0
        self.rejected = 0
        self.rng = np.random.default_rng(rng)
        self.order: npt.NDArray[np.int64] | None = None
        self.pos = 0
        self.initialised = False

    def dual(self) -> float:
        return -0.5 * self.lam * float(self.w @ self.w) + self.ell

    def rescale_lam(self, problem: Problem) -> None:
        """Keep alpha (c_i, v_i), change lam: w_i = A alpha_[i] scales by lam_old / lam_new."""
        s = self.lam / problem.lam
        self.wi *= s
        self.v *= s
        if self.v is not self.w:
            problem.project(self.v, out=self.w)
        self.lam = problem.lam


class OnlineEG(Solver):
    """Online exponentiated gradient on the SSVM dual (needs the model's expectation oracle).

    Parameters
    ----------
    eta : float > 0
        Initial step size of every block (halved per block when an update would decrease D).
        The default 0.1 was the best of 0.01-0.3 on OCR at lam = 0.01.
    sampling : {"perm", "uniform"}
        Block order: a new random permutation every pass, or uniform draws.
    init_c : float
        The start theta_i(y) = init_c L_i(y): 0 (default) is the uniform distribution;
        a negative value puts most of alpha_i on y_i (w near 0, the start of BCFW).  On OCR
        (normalised Hamming loss) init_c = -50 gave a primal of 0.79 after 8 passes against
        9.3 from the uniform start; far below that (-300) the first steps are lost in rounding.
    """

    name = "online-eg"
    PARAMS = (
        Param("eta", 0.1, "float", low=0.0, low_open=True,
              help="Initial EG step size per block (halved when an update would decrease the dual)."),
        Param("sampling", "perm", "choice", EG_SAMPLINGS, help="Block order within a pass."),
        Param("init_c", 0.0, "float",
              help="Start at theta_i = init_c L_i(y): 0 is uniform alpha, < 0 concentrates alpha near y_i (w near 0)."),
    )

    eta: float
    sampling: str
    init_c: float

    def __init__(self, eta: float = 0.1, sampling: str = "perm", init_c: float = 0.0) -> None:
        self._init_params(locals())

    @property
    def label(self) -> str:
        return "online-EG"

    # ------------------------------------------------------------ state
    def init_state(self, problem: Problem, state: object | None,
                   rng: int | np.random.Generator | None) -> _OnlineEGContext:
        if not has_expectation(problem.model):
            raise ValueError(
                f"solver 'online-eg' needs the model's expectation oracle: {type(problem.model).__name__} has no "
                "method expectation(x, y_true, v, c) -> (E_phi, E_loss, log_Z) (expectations under "
                "alpha(y) ∝ exp(c Delta(y_true, y) + <v, phi(x, y)>)); use another solver or implement it")
        st = continue_or_restart(state, OnlineEGState, problem) or OnlineEGState(problem, rng, self.eta)
        if st.lam != problem.lam:
            st.rescale_lam(problem)
        return _OnlineEGContext(problem, st)

    def _start(self, ctx: _OnlineEGContext) -> None:
        """theta_i = init_c L_i(y) (0: alpha_i uniform); w_i, l_i from one expectation call per block."""
        problem, st = ctx.problem, ctx.state
        lam, n = problem.lam, problem.n
        zero = np.zeros(problem.d)
        st.c[:] = self.init_c
        for i in range(n):
            E_phi, E_loss = block_expectation(problem, i, zero, self.init_c)
            st.wi[i] = (self._phi_true(problem, i) - E_phi) / (lam * n)
            st.li[i] = E_loss / n
        ctx.calls += n
        st.v[:] = st.wi.sum(axis=0)
        if st.v is not st.w:
            problem.project(st.v, out=st.w)
        st.ell = float(st.li.sum())
        st.initialised = True

    @staticmethod
    def _phi_true(problem: Problem, i: int) -> npt.NDArray[np.float64]:
        return as_dense(problem.joint_feature_true(i))

    # ------------------------------------------------------------ skeleton
    def checkpoint(self, ctx: _OnlineEGContext, monitor: Monitor, initial: bool,
                   monitoring_only: bool = False) -> float:
        """A monitoring oracle pass at w: P(w), and the gap P(w) - D(alpha)."""
        problem, st = ctx.problem, ctx.state
        n = problem.n
        if not st.initialised:  # optimisation work, so outside monitoring(): its time counts
            self._start(ctx)
        with monitor.monitoring():
            res = problem.batch_oracle(st.w, validate=True)
            monitor.monitor_calls += n
            primal = problem.primal(st.w, sum(r[3] for r in res))
            dual = st.dual()
            monitor.record(st.w, ctx.visits / n, ctx.calls, primal, dual, primal - dual,
                           engine_passes=ctx.passes, rejected=st.rejected)
        return primal - dual

    def run_pass(self, ctx: _OnlineEGContext, flag: InterruptFlag) -> None:
        """n block visits (the rest of the current pass after an interrupted one)."""
        st = ctx.state
        n = ctx.problem.n
        if st.order is None:
            st.order = st.rng.permutation(n) if self.sampling == "perm" else st.rng.integers(0, n, n)
            st.pos = 0
        while st.pos < n:
            if flag.requested:
                return
            self._visit(ctx, int(st.order[st.pos]))
            st.pos += 1
        st.order = None
        ctx.passes += 1

    def _visit(self, ctx: _OnlineEGContext, i: int) -> None:
        """One EG step on block i (Collins et al. 2008, Fig. 1 online): accept if D does not decrease."""
        problem, st = ctx.problem, ctx.state
        lam, n = problem.lam, problem.n
        eta = st.eta[i]
        c_new = st.c[i] + eta
        v_new = st.V[i] + eta * st.w  # theta_i += eta H_i(.; w): the gradient at the current w = Pi(v)
        E_phi, E_loss = block_expectation(problem, i, v_new, c_new)
        ctx.calls += 1
        ctx.visits += 1
        st.k += 1
        wi_new = (self._phi_true(problem, i) - E_phi) / (lam * n)
        li_new = E_loss / n
        delta = wi_new - st.wi[i]
        if st.v is st.w:
            # D(alpha') - D(alpha) = -lam (<w, delta> + ||delta||^2 / 2) + (l_i' - l_i)
            gain = -lam * (float(st.w @ delta) + 0.5 * float(delta @ delta)) + (li_new - st.li[i])
            w_new = None
        else:
            w_new = problem.project(st.v + delta)
            gain = -0.5 * lam * (float(w_new @ w_new) - float(st.w @ st.w)) + (li_new - st.li[i])
        # a decrease below rounding level is not a decrease: near a block's optimum the gain is
        # ~1e-17 of either sign, and halving on noise would shrink eta_i until the block stalls
        if gain < -_NOISE * (lam * float(st.w @ st.w) + abs(st.ell)):
            st.eta[i] = 0.5 * eta  # rejected: the next visit of this block tries half the step
            st.rejected += 1
            return
        st.c[i] = c_new
        st.V[i] = v_new
        st.wi[i] = wi_new
        st.ell += li_new - st.li[i]
        st.li[i] = li_new
        st.v += delta
        if w_new is not None:
            st.w[:] = w_new


class _OnlineEGContext(SolveContext):
    """An online-EG solve: its state and this solve's expectation calls, visits and passes."""

    def __init__(self, problem: Problem, state: OnlineEGState) -> None:
        super().__init__(problem, state)
        self.state: OnlineEGState = state
        self.calls = 0
        self.visits = 0
        self.passes = 0
