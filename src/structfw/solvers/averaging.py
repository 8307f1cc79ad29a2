"""Averaging of the iterates, shared by BCFW and SSG.

For iterate index t = 1, 2, ... (after the t-th step) the average is
    xbar_t = (1 - rho_t) xbar_{t-1} + rho_t x_t   with
- ``weighted``: rho_t = 2 / (t + 1), i.e. xbar_t = 2/(t(t+1)) sum_s s x_s
  (eq. (14) of the BCFW paper, "BCFW-wavg"/"SSG-wavg");
- ``uniform``: rho_t = 1 / t (plain running average, "SSG-avg");
- ``suffix``: the doubling trick: a uniform average of the iterates since the
  last t that was a power of two (the 0.5-suffix average (15), "-tavg").

The average of w is kept lazily as wbar = c * u + w, so that a step that
changes w in a few coordinates costs only those coordinates:
with delta = w_t - w_{t-1}, c_t = (1 - rho_t) c_{t-1} and u_t = u_{t-1} - delta / c_{t-1}.
The averaged dual value uses the same weights on l (D is concave, so the
averaged alpha is feasible and D(alphabar) = -lam/2 ||wbar||^2 + lbar).
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from . import _decisions

AVERAGINGS = (None, "weighted", "uniform", "suffix")


def averaging_rate(kind: str | None, t: int) -> float:
    """rho_t of the scheme for the t-th iterate (t >= 1): the compiled passes' decision
    (`structfw.solvers._decisions.averaging_rate`) for the scheme's name."""
    if kind is None or kind not in _decisions.AVG_CODES:
        raise ValueError(f"unknown averaging {kind!r}: expected one of {AVERAGINGS[1:]}")
    return float(_decisions.averaging_rate(_decisions.AVG_CODES[kind], int(t)))


class LazyAverage:
    """wbar = c * u + w and lbar, updated in O(size of the step)."""

    def __init__(self, kind: str | None, w: npt.NDArray[np.float64], ell: float, t: int = 0) -> None:
        self.kind = kind
        self.t = int(t)
        self.u = np.zeros_like(w)
        self.c = 1.0
        self.lbar = float(ell)

    def begin_step(self) -> tuple[float, float]:
        """Advance t; returns (rho, inv_c) for the fused kernels."""
        self.t += 1
        rho = averaging_rate(self.kind, self.t)
        inv_c = 1.0 / self.c
        return rho, inv_c

    def end_step(self, rho: float, ell_new: float) -> None:
        """After w moved (u already got -delta/c), finish the recursion
        (`structfw.solvers._decisions.average_close`, as the compiled passes do)."""
        c, lbar = _decisions.average_close(float(rho), self.u, float(self.c), float(self.lbar), float(ell_new))
        self.c, self.lbar = float(c), float(lbar)

    def renormalise(self) -> None:
        self.u *= self.c
        self.c = 1.0

    def wbar(self, w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return self.c * self.u + w

    def set_from(self, wbar: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> None:
        """Make the average equal to ``wbar`` (used after a change of lam)."""
        self.u = wbar - w
        self.c = 1.0
