"""Borrowed views (structfw.solvers._borrow): the same memory, no reference counts, no leaks."""
import numpy as np
import pytest
from numba import njit, types
from numba.core import cgutils
from numba.core.runtime import _nrt_python, rtsys
from numba.extending import intrinsic
from numba.np.arrayobj import make_array

from structfw.solvers._borrow import borrowed


@intrinsic
def _has_owner(typingctx, arr):
    """Whether an array value carries a meminfo (a reference-counted owner)."""
    def codegen(context, builder, signature, args):
        ary = make_array(signature.args[0])(context, builder, value=args[0])
        return builder.icmp_unsigned("!=", ary.meminfo, cgutils.get_null_value(ary.meminfo.type))

    return types.boolean(arr), codegen


@njit(cache=False)
def _owners(t):
    a, (b, k) = t
    c, (d, _) = borrowed(t)
    return _has_owner(a), _has_owner(b), _has_owner(c), _has_owner(d)


@njit(cache=False)
def _write_through(t):
    a, (b, k, flag) = borrowed(t)
    a[0] = 7.0
    b[1] = k
    return a.sum() + b.sum(), flag


@njit(cache=False)
def _single(x):
    v = borrowed(x)
    v[2] = -1.0
    return v.shape[0]


@njit(cache=False)
def _allocates_beside(t, m):
    a, b = borrowed(t)
    total = 0.0
    for r in range(m):
        tmp = np.empty(a.shape[0])  # counted: freed each round
        tmp[:] = a
        b[r % b.shape[0]] += tmp.sum()
        total += b[r % b.shape[0]]
    return total


def test_views_read_and_write_the_callers_memory():
    a = np.arange(4, dtype=np.float64)
    b = np.zeros(3, np.int64)
    s, flag = _write_through((a, (b, 5, True)))
    assert a[0] == 7.0 and b[1] == 5
    assert s == 7.0 + 1 + 2 + 3 + 5
    assert flag is True
    x = np.ones(5)
    assert _single(x) == 5 and x[2] == -1.0


def test_views_have_no_owner_and_the_originals_keep_theirs():
    assert _owners((np.zeros(2), (np.zeros((2, 2)), 3))) == (True, True, False, False)


def test_strided_views_keep_their_strides():
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    col = base[:, 1]  # a non-contiguous view: the borrowed copy must keep its strides
    _single(col)
    assert base[2, 1] == -1.0 and base[2, 2] == 10.0


def test_no_meminfo_is_leaked_or_freed_twice():
    a = np.linspace(0.0, 1.0, 7)
    b = np.zeros(3)
    _allocates_beside((a, b), 2)  # compile
    was_on = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        before = rtsys.get_allocation_stats()
        for _ in range(50):
            _allocates_beside((a, b), 20)
        after = rtsys.get_allocation_stats()
    finally:
        if not was_on:
            _nrt_python.memsys_disable_stats()
    allocated = after.mi_alloc - before.mi_alloc
    freed = after.mi_free - before.mi_free
    assert allocated >= 50 * 20  # the temporaries are counted ...
    assert allocated == freed  # ... and all freed; the borrowed views never were owners
    # the caller's arrays are intact and still usable
    assert np.all(np.isfinite(b)) and a[-1] == 1.0


def test_float_bits_are_the_ieee_bits_the_corner_key_hashes():
    """`float_bits` (corner_key's loss bits, an LLVM bitcast) is the float64's bit pattern: signed zeros,
    infinities, NaN and subnormals included; keys of corners that differ only in their loss differ."""
    from structfw.solvers.corners import corner_key, float_bits

    bits = njit(lambda x: float_bits(x))
    for x in (0.0, -0.0, 0.125, 1 / 3, -2.5e300, np.inf, -np.inf, np.nan, 5e-324):
        assert bits(x) == np.array([x]).view(np.uint64)[0]
    idx, val = np.array([1, 5, 9]), np.array([0.5, -1.0, 2.0])
    assert corner_key(idx, val, 0.25) == corner_key(idx.copy(), val.copy(), 0.25)
    assert corner_key(idx, val, 0.25) != corner_key(idx, val, 0.5)
    with pytest.raises(Exception, match="float_bits"):
        bits(np.int64(3))
