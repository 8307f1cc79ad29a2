"""Prefetch hints (structfw.solvers._prefetch): they compile on every array layout the chunks use,
change nothing, and stay inside the order they are given."""
import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from structfw._linalg import SparseVector
from structfw.solvers._prefetch import prefetch_corner_sets, prefetch_corners, prefetch_row, prefetch_truths
from structfw.solvers.corners import CornerStore


@njit(cache=False)
def _touch_rows(a, rows):
    for r in rows:
        prefetch_row(a, r)
    return a.sum()


def test_prefetch_row_reads_nothing_and_writes_nothing():
    rng = np.random.default_rng(0)
    for a in (rng.random(7), rng.random((5, 3)), rng.random((6, 4))[:, 1:3], np.arange(12).reshape(3, 2, 2),
              rng.random((4, 4)).T):
        before = a.copy()
        assert _touch_rows(a, np.array([0, a.shape[0] - 1])) == pytest.approx(before.sum())
        np.testing.assert_array_equal(a, before)


def test_prefetch_row_names_what_it_takes():
    @njit(cache=False)
    def bad(x):
        prefetch_row(x, 0)

    with pytest.raises(TypingError):
        bad(3.0)


def test_prefetch_corner_sets_leaves_the_store_as_it_was():
    store = CornerStore(4, 10, capacity=2)
    rng = np.random.default_rng(1)
    for i in range(4):
        for _ in range(3):  # a third corner grows the block's slots
            idx = np.sort(rng.choice(10, 3, replace=False))
            store.add(i, SparseVector(idx, rng.random(3), 10), float(rng.random()))
    S = store.arrays
    before = [a.copy() for a in S]
    order = np.array([3, 1, 0, 2, 1])
    for s in range(len(order)):
        # chunks that end before, at and after the order's end, and m = 0 (step s's own block)
        for m in (0, 2, len(order), len(order) + 3):
            prefetch_corner_sets(S, order, s, m, order[s])
        prefetch_corners(S, order[s])  # the scan's own block, just before it reads the corners
    for a, b in zip(S, before):
        np.testing.assert_array_equal(a, b)


@njit(cache=False)
def _truths(starts, Yc, order, m):
    for s in range(order.shape[0]):
        prefetch_truths(starts, Yc, order, s, m, order[s])


def test_prefetch_truths_stays_inside_the_blocks_and_changes_nothing():
    # blocks of lengths 3, 0, 5, 1 (an empty block has no labels to ask for)
    starts = np.array([0, 3, 3, 8, 9])
    Yc = np.arange(9) % 4
    order = np.array([2, 1, 0, 3, 1])
    s0, y0 = starts.copy(), Yc.copy()
    for m in (0, 2, len(order), len(order) + 3):
        _truths(starts, Yc, order, m)
    np.testing.assert_array_equal(starts, s0)
    np.testing.assert_array_equal(Yc, y0)
