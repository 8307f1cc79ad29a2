"""The state of a sharded fit (docs/design.md, "Sharded training"), apart from the rounds that move it.

`ShardedState` is what a model file's state section holds for a sharded fit
(`structfw.solvers.state_file` writes it without importing the compiled rounds and, in its
`_check_sharded`, checks the identities a state read from a file must keep: every shard's engine
state valid on its own, and w = sum_k w_k, l = sum_k l_k across them in global units).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .averaging import averaging_rate
from .block_state import BCFWState
from .problem import Problem

class ShardedState:
    """The complete state of a sharded fit: each shard's engine state and the round's global numbers.

    Attributes
    ----------
    n, d, lam, fingerprint : the problem's (warm starts check them)
    K, sigma, combine : shards, the local quadratic factor sigma' and the rule
    states : list of BCFWState, or of None
        Shard k's engine state on its sub-problem (lam_k = lam n / (n_k sigma')); None where the
        state lives with the shard's worker only (a fit from a shard source), and in its state file
        when the solver has a ``state_dir``.
    v, w, ell : the global v = sum_i w_i, w = Pi(v) and l = sum_i l_i; with positivity constraints
        (the model's ``nonnegative_indices``) w is v with w_S clipped at 0, otherwise the same array
    rounds, steps, passes : rounds done, block steps of all shards, completed passes (steps // n;
        with MP-BCFW the exact passes, while ``steps`` counts the approximate passes' steps too)
    avg : (kind, t, v_bar, l_bar) of the rounds' average (of v: w_bar = Pi(v_bar)), or None
    full_gap : the last full duality gap (the cache rule's g); needs_refresh : the estimates are stale
    last_gamma : the last round's gamma
    entropy : int
        The seed sequence's entropy; shard k's generator is seeded from ``seed(k)``.
    files_round : int or None
        The round after which the workers last wrote their states to the ``state_dir`` files.
    mp_iter, mp_approx_passes, mp_work, mp_exact_dual, mp_exact_cost
        MP-BCFW on shards (`structfw.solvers.sharded.mp_outer_iteration`), decided over the global
        dual: outer iterations done, approximate sharded passes of the last one, the global work
        counter (sum over the shards), and the dual before the last exact pass and its work, which
        the slope rule of its approximate passes measures from (cost 0: none are due).  The
        fields of `BCFWState` of the same names, for the whole training set.
    """

    def __init__(self, problem: Problem, K: int, sigma: float, combine: str, states: list[Any],
                 averaging: str | None, entropy: Any = None) -> None:
        self.n, self.d, self.lam, self.fingerprint = problem.n, problem.d, problem.lam, problem.fingerprint
        self.K, self.sigma, self.combine = K, float(sigma), combine
        self.states = states
        self.w = np.zeros(problem.d)
        self.v = np.zeros(problem.d) if problem.constrained else self.w
        self.ell = 0.0
        self.rounds = self.steps = self.passes = 0
        self.avg = None if averaging is None else (averaging, 0, np.zeros(problem.d), 0.0)
        self.full_gap = math.inf
        self.needs_refresh = True
        self.last_gamma = math.nan
        # an int, so that a model file can hold it (numpy draws 128 bits when given None)
        self.entropy = int(np.random.SeedSequence(entropy).entropy)
        self.files_round: int | None = None
        self.mp_iter = 0
        self.mp_approx_passes = 0
        self.mp_work = 0.0
        self.mp_exact_dual = 0.0
        self.mp_exact_cost = 0.0

    def seed(self, k: int) -> np.random.SeedSequence:
        """Shard k's seed: the k-th child of the fit's seed sequence (``SeedSequence(entropy).spawn(K)[k]``)."""
        return np.random.SeedSequence(self.entropy, spawn_key=(k,))

    def dual(self) -> float:
        """D(alpha) = -lam/2 ||w||^2 + l, w = Pi(v) (docs/design.md, "Positivity constraints")."""
        return -0.5 * self.lam * float(np.dot(self.w, self.w)) + self.ell

    def delta(self) -> float:
        """Delta(alpha, lam) = l - lam ||w||^2 (eq. (11) of Osokin et al. 2016) of the global point."""
        return self.ell - self.lam * float(np.dot(self.w, self.w))

    def keep_w_change_lam(self, lam_new: float) -> None:
        """Proposition 1 of Osokin et al. (2016) on every shard: rho = lam_new / lam, w kept, l <- rho l.

        Shard k's engine state moves to its own lam_k = lam_new n / (n_k sigma') with
        `BCFWState.keep_w_change_lam` (its rho is the same: lam_k scales with lam), which keeps its
        w_i (sigma' times the global ones) and scales its l_i; the global l scales alike, so
        l = sum_k (n_k / n) l_k and w = sum_k w_k / sigma' still hold.  The rounds' average is an
        average of dual points, and the map of Proposition 1 is affine in alpha: w_bar is kept and
        l_bar scaled by rho too.  Needs the shards' states in this process (not on the workers of a
        shard source)."""
        if any(s is None for s in self.states):
            raise ValueError("keep_w_change_lam: the shards' states live on their workers (a fit from a shard "
                             "source); Proposition 1 needs every shard's state in this process")
        rho = lam_new / self.lam
        for s in self.states:
            # the expression of ShardedBCFW._open's sub-problems: the same float lam_k
            s.keep_w_change_lam(lam_new * self.n / (s.n * self.sigma))
        self.ell *= rho
        if self.avg is not None:
            kind, t, wbar, lbar = self.avg
            self.avg = (kind, t, wbar, rho * lbar)
        self.lam = lam_new
        self.needs_refresh = True
        self.mp_exact_cost = 0.0  # the dual the slope rule measures from was at the old lam

    def average_round(self) -> None:
        """The rounds' average after a round: w_bar <- (1 - rho_t) w_bar + rho_t w (and l_bar), t the round,
        rho_t of the averaging kind (`structfw.solvers.averaging.averaging_rate`): the iterates' averages of
        the serial engine with a round in place of a block step.  It averages v = A alpha (the dual
        points): with positivity constraints the averaged primal point is then w_bar = Pi(v_bar)."""
        if self.avg is None:
            return
        kind, t, vbar, lbar = self.avg
        t += 1
        rho = averaging_rate(kind, t)
        vbar = (1.0 - rho) * vbar + rho * self.v
        self.avg = (kind, t, vbar, (1.0 - rho) * lbar + rho * self.ell)
