"""Prefetches for the compiled chunks: the corner sets of the next blocks, asked for ahead of their steps.

A corner set lives in rows of the store's arrays (``key``, ``loss``, ``alpha``, ``last``, ``start``,
``nnz``: one row per block) and in the pool its ``start`` points into.  A pass visits the blocks in a
random order, so each step's first reads of its block's rows and corners miss the caches: in a perf
profile of MP-BCFW's exact pass on OCR, the stalls on those loads were about half of `general_chunk`'s
own samples (docs/results/engine.md, "Where the general chunk's time goes").  When the order is known in
advance (uniform and permuted sampling draw it at the pass's start) the chunk asks for the rows of the
block two steps ahead and for the corners of the block one step ahead, whose ``start`` row was asked
for a step earlier: a step takes microseconds, far longer than a load from memory.  When the blocks are
drawn step by step (gap sampling) the general chunk draws the next block as soon as the sampler has
the step's gap, before the block step, and asks for its rows then (`structfw.solvers._fastpass._draw_ahead`);
the plain chunks, whose gap comes out of the step itself, ask as the step begins.  Either way the
block's corners are asked for all at once just before the scan reads them.  A prefetch is a
hint (``llvm.prefetch``, x86 ``prefetcht0``): it changes no value, only when the loads arrive, and
it never faults, whatever the address.
"""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)


@intrinsic
def prefetch_row(typingctx, arr, i):
    """Ask for the cache line holding arr[i, 0, ...] (a hint; nothing is read or written)."""
    if not isinstance(arr, types.Array) or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty, ity = signature.args
        ary = make_array(aryty)(context, builder, value=args[0])
        zero = context.get_constant(types.intp, 0)
        index = [context.cast(builder, args[1], ity, types.intp)] + [zero] * (aryty.ndim - 1)
        ptr = cgutils.get_item_pointer2(context, builder, ary.data, cgutils.unpack_tuple(builder, ary.shape),
                                        cgutils.unpack_tuple(builder, ary.strides), aryty.layout, index)
        i32, byte_ptr = ir.IntType(32), ir.IntType(8).as_pointer()
        hint = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]),
                                              "llvm.prefetch.p0")
        builder.call(hint, [builder.bitcast(ptr, byte_ptr), i32(0), i32(3), i32(1)])  # read, all cache levels, data
        return context.get_dummy_value()

    return types.none(arr, i), codegen


@njit(cache=True, nogil=True, inline="always")
def _prefetch_rows(S, j):
    """Ask for block j's rows of the store's arrays."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    prefetch_row(size, j)
    prefetch_row(key, j)
    prefetch_row(loss, j)
    prefetch_row(alpha, j)
    prefetch_row(last, j)
    prefetch_row(start, j)
    prefetch_row(nnz, j)


@njit(cache=True, nogil=True)
def prefetch_corners(S, j):
    """Ask for the first pool entries of each of block j's corners (reads its ``size`` and ``start`` rows).

    `general_chunk`'s scan calls it for its own block just before it scores the corners: the scan's loop
    waits for each corner's entries in turn, where these requests go out together (BCPFW-gap on OCR,
    perf, 30 passes: the chunk's own samples 859 and 787 against 958 and 919)."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    values = pval.shape[0] > 0  # none in a store of labellings
    for k in range(min(size[j], start.shape[1])):
        prefetch_row(pidx, start[j, k])
        if values:
            prefetch_row(pval, start[j, k])


@njit(cache=True, nogil=True, inline="always")
def prefetch_truths(starts, Yc, order, s, m, i):
    """On the factored storage: ask for the ground-truth labels Yc[starts[j]:starts[j + 1]] of block
    j = order[s + 1] and for ``starts[order[s + 2]]`` (two stages, as `prefetch_corner_sets`), or with
    m = 0 (blocks drawn step by step) for step s's own block i, whose unary scores are computed before
    the loss augmentation reads its labels.  That read missed the caches: in a perf profile of MP-BCFW's
    exact pass on OCR, 140 of `general_chunk`'s 631 own samples (40 passes) waited on it.  Inlined:
    it writes nothing, and a call would pass the arrays' ~20 fields for two hints."""
    m = min(m, order.shape[0])
    if m == 0:
        _prefetch_labels(starts, Yc, i)
        return
    if s + 2 < m:
        prefetch_row(starts, order[s + 2])
    if s + 1 < m:
        _prefetch_labels(starts, Yc, order[s + 1])


@njit(cache=True, nogil=True, inline="always")
def _prefetch_labels(starts, Yc, j):
    """The cache lines of block j's first and last ground-truth labels (a word spans at most two)."""
    a, b = starts[j], starts[j + 1]
    if b > a:
        prefetch_row(Yc, a)
        prefetch_row(Yc, b - 1)


@njit(cache=True, nogil=True, inline="always")
def prefetch_corner_sets(S, order, s, m, i):
    """Before step s of a chunk ending at m that takes its blocks from ``order``: ask for the corner-set
    rows of block order[s + 2] and for the first entries of each corner of block order[s + 1].  With
    m = 0 (blocks drawn step by step: gap sampling, the largest gap) at most one block is known ahead,
    so it asks for the rows of that block i, which the general chunk draws during the step before
    (`structfw.solvers._fastpass._draw_ahead`; the plain chunks as i's own step begins, where the step
    computes the block's unary scores or oracle before it reads them, and the loads arrive meanwhile).
    Not its corners: finding them reads the rows, which stalls there, and their loads then compete with the unary scores' own (BCPFW-gap on OCR, perf: 4,633
    and 4,564 compiled samples in 30 passes against 5,052 and 5,314 with the corners asked for too)."""
    m = min(m, order.shape[0])
    if m == 0:
        _prefetch_rows(S, i)
        return
    if s + 2 < m:
        _prefetch_rows(S, order[s + 2])
    if s + 1 < m:
        prefetch_corners(S, order[s + 1])
