"""Borrowed views of a compiled pass's arrays: the same arrays without reference counts.

numba counts references to every array a compiled function holds: each time a helper takes an
array out of a tuple, gets one as an argument or keeps one across a branch, it calls
``NRT_incref`` and later ``NRT_decref``, an atomic add each.  Its pruning pass removes the pairs it
can match, not those that cross a loop or a call.  The chunks of the engine's passes take their
state as tuples of arrays (the corner store's ten, the factored storage's eighteen) and hand them
to some twenty helpers a block step, so a step paid 50-100 such pairs: 0.85 us of a 7 us OCR step
of MP-BCFW's exact pass, most of the general chunk's extra time over the plain one
(docs/results/engine.md, "Where the general chunk's time goes").

`borrowed` returns its argument -- an array, or a tuple of arrays, tuples and scalars, nested --
with every array's meminfo (the reference-counted owner) and parent (the Python object) set to
NULL.  The data pointer, shape and strides are the same, so each view reads and writes the same
memory.  numba's ``NRT_incref``/``NRT_decref`` return at once on a NULL meminfo: after borrowing,
the helpers' reference counts cost a call and a compare, not an atomic operation.

This is safe only where the owner outlives the views, which is how a chunk works: the caller's
arrays stay alive, and are neither freed nor resized, until the chunk returns (the corner pool and
the sparse rows grow in Python *between* chunk calls, on the status a chunk returns), and a chunk
never returns or stores a borrowed view.  Arrays a chunk allocates itself stay counted.
"""
from __future__ import annotations

from numba.core import cgutils, types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array


def _without_owners(context, builder, typ, value):
    """``value`` of type ``typ`` with every array's meminfo and parent set to NULL (recursing into tuples)."""
    if isinstance(typ, types.Array):
        ary = make_array(typ)(context, builder, value=value)
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        ary.parent = cgutils.get_null_value(ary.parent.type)
        return ary._getvalue()
    if isinstance(typ, types.BaseTuple):
        items = [_without_owners(context, builder, t, builder.extract_value(value, k)) for k, t in enumerate(typ)]
        return context.make_tuple(builder, typ, items)
    return value


@intrinsic
def borrowed(typingctx, x):
    """``x`` (an array or a nested tuple of arrays and scalars) as views without reference counts (see the
    module docstring: only for values whose owner outlives every use of the views)."""
    def codegen(context, builder, signature, args):
        return _without_owners(context, builder, signature.args[0], args[0])

    return x(x), codegen
