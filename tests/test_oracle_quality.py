"""The predefined step for a max oracle of multiplicative quality nu (Lacoste-Julien et al. 2013,
App. C, eq. (12) and Alg. C.2): gamma_k = 2n / (nu k + 2n), with Thm. C.1's bound
E[D* - D(alpha_k)] <= 2n / (nu k + 2n) (C_f/nu + h_0), C_f <= 4 R^2 / (lam n) (Lemma A.2)."""
import numpy as np
import pytest

from structfw.solvers import BCFW
from structfw.solvers.base import StopRule
from structfw.solvers.problem import Problem
from toy import EnumModel, exact_optimum, make_toy


class NuOracle(EnumModel):
    """An adversarial oracle of quality nu: among the labellings whose block gap is at least
    nu times the largest, the one with the smallest (it reads the solver's state for
    lam <w_i, w> - l_i, the part of the block gap that does not depend on the labelling)."""

    approximate_oracle = True

    def __init__(self, phi, loss, nu, lam, n):
        super().__init__(phi, loss)
        self.nu, self.lam, self.n, self.ctx = nu, lam, n, None

    def loss_augmented_decode(self, x, y_true, w):
        i = int(x)
        m = self.phi.shape[1]
        H = np.array([self.loss(y_true, i * 1000 + b) - (self.phi[i, int(y_true) % 1000] - self.phi[i, b]) @ w
                      for b in range(m)])
        st = self.ctx.st
        g = self.lam * st.block_w_dot(i, st.w) - st.li[i] + H / self.n
        allowed = np.flatnonzero(g >= self.nu * g.max() - 1e-15)
        return i * 1000 + int(allowed[np.argmin(g[allowed])])


class _Watched(BCFW):
    """BCFW that hands its solve context to the adversarial model (which reads the block gaps)."""

    def init_state(self, problem, state, rng):
        ctx = super().init_state(problem, state, rng)
        self.model.ctx = ctx
        return ctx


def _problem(nu, seed):
    model, X, Y = make_toy(n=6, m=5, d=3, seed=seed)
    lam = 0.05
    adv = NuOracle(model.phi, model.loss_table, nu, lam, len(X))
    return adv, Problem(adv, X, Y, lam), exact_optimum(model, X, Y, lam)[0], model


@pytest.mark.parametrize("nu", [0.3, 0.6])
def test_the_nu_corrected_step_meets_theorem_c1(nu):
    K = 60  # passes
    excess, bound = [], []
    for seed in range(4):
        adv, problem, D_star, model = _problem(nu, seed)
        n = problem.n
        solver = _Watched(step_size="predefined", oracle_quality=nu, check_oracle=False)
        solver.model = adv
        res = solver.solve(problem, StopRule(max_passes=K, check_every=K), rng=seed)
        excess.append(D_star - res.dual)
        R2 = max(float(np.sum((model.phi[i, t] - model.phi[i, b]) ** 2))
                 for i, t in enumerate(np.array(problem.Y) % 1000) for b in range(model.phi.shape[1]))
        Cf = 4.0 * R2 / (problem.lam * n)
        h0 = D_star - 0.0  # D(alpha_0) = 0 at w = 0, l = 0
        k = K * n
        bound.append(2 * n / (nu * k + 2 * n) * (Cf / nu + h0))
    assert np.mean(excess) >= -1e-9
    assert np.mean(excess) <= np.mean(bound)
    # and it does reach the exact optimum's neighbourhood, with an oracle that is never exact
    assert np.mean(excess) < 0.05 * np.mean([b for b in bound])


def test_oracle_quality_sets_the_predefined_step_only():
    plan = BCFW(step_size="predefined", oracle_quality=0.25).plan(_problem(0.5, 0)[1])
    assert plan.nu_step == 0.25 and plan.predefined
    assert BCFW(oracle_quality=0.25).plan(_problem(0.5, 0)[1]).nu_step == 0.0  # line search: no correction
    with pytest.raises(ValueError, match="oracle_quality must be a number in \\(0, 1\\]"):
        BCFW(oracle_quality=1.5)
    with pytest.raises(ValueError, match="oracle_quality must be a number > 0"):
        BCFW(oracle_quality=0.0)
