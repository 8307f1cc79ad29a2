"""A max oracle made to cost at least a given time: the benchmarks' ``--oracle-cost-us``.

Shah, Kolmogorov and Lampert (2015, Sec. 4.1) explain MP-BCFW's runtime results by the cost of
the max oracle: about 50 µs on OCR (70 % of BCFW's run time), 1-5 ms on the segmentation
tasks.  Our compiled chain oracle costs ~6 µs, so ``with_oracle_cost(model, us)`` makes every
call of the model's max oracle (``loss_augmented_decode``) spin for ``us`` microseconds
first, and count the call.  The wait is inside the call that the engine times as oracle time
(`structfw.solvers.passes.plain_fw_block`, `structfw.solvers.parts.ExactOracle.call_oracle`),
so it is counted as oracle time, for every solver alike.

The compiled passes call the compiled oracle inside numba, where no Python wait can run: a
model with a cost redefines ``loss_augmented_decode``, and the engine therefore trains it on
the Python route (`structfw.solvers.problem.overrides_compiled_methods`), for BCFW and
MP-BCFW alike (MP-BCFW's approximate passes then run step by step in Python too).  Its
iterates equal the compiled route's to rounding.
"""
from __future__ import annotations

import copy
import time


def busy_wait(us: float) -> None:
    """Spin (not sleep: the scheduler's wake-up would add its own latency) for ``us`` microseconds."""
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


class OracleCost:
    """What the costly oracle shares with its caller: the cost per call and the calls made."""

    def __init__(self, us: float) -> None:
        if not us >= 0.0:
            raise ValueError(f"oracle cost must be >= 0 microseconds; got {us!r}")
        self.us = float(us)
        self.calls = 0


class _CostlyOracle:
    """Mixin before a model class: its max oracle spins ``oracle_cost.us`` first."""

    oracle_cost: OracleCost

    def loss_augmented_decode(self, x, y_true, w):
        cost = self.oracle_cost
        cost.calls += 1
        if cost.us > 0.0:
            busy_wait(cost.us)
        return super().loss_augmented_decode(x, y_true, w)


def with_oracle_cost(model, us: float):
    """A copy of ``model`` whose every max-oracle call costs at least ``us`` microseconds more
    (``model.oracle_cost`` holds the cost and counts the calls).  Trained on the engine's
    Python route (module docstring)."""
    cls = type(model)
    costly = type("Costly" + cls.__name__, (_CostlyOracle, cls), {"__module__": __name__})
    out = copy.copy(model)
    out.__class__ = costly
    out.oracle_cost = OracleCost(us)
    return out
