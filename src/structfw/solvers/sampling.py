"""How the block-coordinate engine picks the next block i.

- ``uniform``: i uniform at random (Alg. 1 line 3 of the BCFW paper);
- ``perm``: a fresh random permutation every pass;
- ``gap``: p_i proportional to the last estimate of the block gap g_i
  (Osokin et al. 2016, Sec. 3.1), sampled in O(log n) with a Fenwick tree;
- ``max_gap``: the block with the largest estimate (deterministic, for study).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._decisions import SAMPLER_CODES, draw_block, record_gap
from ._kernels import fenwick_build

SAMPLINGS = ("uniform", "perm", "gap", "max_gap")
_NO_ORDER = np.empty(0, np.int64)
_NO_DRAW = np.empty(0, np.float64)


class BlockSampler:
    """Draws block indices; gap-based variants read and keep the gap estimates.

    Parameters
    ----------
    kind : {"uniform", "perm", "gap", "max_gap"}
    n : int
    rng : numpy.random.Generator
    """

    def __init__(self, kind: str, n: int, rng: np.random.Generator) -> None:
        if kind not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}; got {kind!r}")
        self.kind, self.n, self.rng = kind, n, rng
        self.estimates = np.zeros(n)
        # the Fenwick tree of all-zero estimates; only "gap" sampling reads it (and so compiles
        # its kernels: half a second of a first run the other samplings need not pay)
        self._tree = np.zeros(n + 1)
        self._buffer = np.empty(0, np.int64)
        self._pos = 0

    @property
    def adaptive(self) -> bool:
        return self.kind in ("gap", "max_gap")

    def set_all(self, gaps: npt.ArrayLike) -> None:
        """Replace every estimate (after a full gap pass)."""
        self.estimates = np.maximum(np.asarray(gaps, dtype=float), 0.0)
        if self.kind == "gap":
            self._tree = fenwick_build(self.estimates)

    def update(self, i: int, gap: float) -> None:
        """New estimate of g_i after visiting block i (clipped at 0): the compiled passes' decision
        (`structfw.solvers._decisions.record_gap`); a no-op for the order samplers."""
        record_gap(SAMPLER_CODES[self.kind], self.estimates, self._tree, int(i), float(gap))

    def start_pass(self) -> None:
        if self.kind == "perm":
            self._buffer = self.rng.permutation(self.n)
        elif self.kind == "uniform":
            self._buffer = self.rng.integers(0, self.n, self.n)
        elif self.kind == "gap":
            # re-sum the tree once a pass so that rounding errors of the
            # incremental updates cannot accumulate
            self._tree = fenwick_build(self.estimates)
        self._pos = 0

    def take_order(self, m: int) -> npt.NDArray[np.int64]:
        """The next m blocks of a "uniform"/"perm" pass (for the compiled pass)."""
        out = self._buffer[self._pos:self._pos + m]
        self._pos += m
        return out

    def next(self) -> int:
        """The next block: from the pass's order, or drawn by the compiled passes' decision
        (`structfw.solvers._decisions.draw_block`) from one uniform number of ``rng``, as a
        compiled gap pass draws its step's block."""
        if self.kind in ("perm", "uniform"):
            i = self._buffer[self._pos]
            self._pos += 1
            return int(i)
        draws = self.rng.random(1) if self.kind == "gap" else _NO_DRAW
        return int(draw_block((SAMPLER_CODES[self.kind], _NO_ORDER, draws, self.estimates, self._tree), 0, self.n))


def take_full_gaps(st: Any, gaps: npt.NDArray[np.float64]) -> None:
    """A full gap pass's block gaps g_i become the estimates that gap sampling and the cache
    read (Osokin et al. 2016, Sec. 3.1, 3.3): the sampler's, the gaps at the last oracle call
    and the full gap g = sum_i g_i.  ``st`` is any engine state with ``sampler``,
    ``oracle_gaps``, ``full_gap`` and ``needs_refresh`` (BCFW's and kernel BCFW's)."""
    st.sampler.set_all(gaps)
    st.oracle_gaps[:] = gaps
    st.full_gap = float(np.sum(gaps))
    st.needs_refresh = False
