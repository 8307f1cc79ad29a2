"""Whole-training-set corner kernels: the max oracle and psi of example i in one numba call.

A model that can pack its training set into arrays offers
``compiled_oracle(X, Y) -> (kind, data)`` (see `structfw.models.base.StructuredModel`);
`corner` ``(kind, data, i, w, merged)`` returns ``(psi_idx, psi_val, L)`` of the
loss-augmented labelling y_i* = argmax_y H_i(y; w): the corner (psi_i(y_i*), L_i(y_i*)) the
block-coordinate engine moves toward.  The engine's compiled passes
(`structfw.solvers._fastpass`) call it without entering Python (docs/design.md, "Speed").

Why one ``corner`` with a data tuple rather than a kernel function per model: numba cannot
reliably cache a compiled function that takes another compiled function as an argument
(loading it in a new process fails), and an uncached pass kernel would be compiled again in
every process.  Each kind packs its data into its own tuple of typed arrays (see the packers),
and ``corner`` is resolved by the tuple's *type* when a pass kernel is compiled: a pass over
dense chains compiles the dense-chain oracle only, not every model's (the kind code alone, a
run-time value, made every pass kernel compile all of them: several seconds of a first run).

With ``merged=False`` ``psi_idx`` may repeat an index (the entries then add up): the plain
pass's step does not need them merged, and merging costs more than half the oracle; corner
sets need them sorted and merged.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)
from numba.extending import overload

from .._linalg import sparse_dot_dense
from .chain import (_transition_diff, _viterbi_core, chain_oracle_csr, chain_oracle_csr_weighted, chain_oracle_dense,
                    chain_oracle_dense_weighted, chain_phi_diff_csr, chain_unary_csr, chain_unary_csr_fm,
                    edge_label_diff, feature_major, hamming_loss, weighted_hamming_loss)
from .multiclass import multiclass_oracle, multiclass_oracle_weighted, multiclass_phi_diff

#: the kinds of compiled corner kernel; the ``_W`` kinds are the same training sets with weighted
#: losses (docs/guide/weights.md): their packed tuples end with the loss coefficients, and an
#: unweighted fit never packs or compiles them
CHAIN_DENSE, CHAIN_CSR, MULTICLASS_DENSE, CHAIN_DENSE_W, CHAIN_CSR_W, MULTICLASS_DENSE_W = 0, 1, 2, 3, 4, 5

def _word_starts(X):
    starts = np.zeros(len(X) + 1, np.int64)
    np.cumsum(np.array([x.shape[0] for x in X], np.int64), out=starts[1:])
    return starts


def _f(a):
    return np.ascontiguousarray(a, np.float64)


def _i(a):
    return np.ascontiguousarray(a, np.int64)


# ------------------------------------------------------------------ packing
def pack_chain_dense(X, Y, n_states, n_features):
    """CHAIN_DENSE: (positions stacked (N, F), word starts (n+1,), labels (N,), S, F, and the
    non-zeros of the positions in CSR form: row pointers (N+1,), feature indices, values).

    The oracle scores states with the dense rows (a dense product vectorises); psi walks the
    non-zeros only, with no test per feature (OCR's pixels are 78% zeros: the test cost a
    mispredicted branch per feature, ~0.6 us of a ~7.5 us corner)."""
    Xc = _stacked(X)
    N, F = Xc.shape
    nonzero = Xc != 0.0
    row_ptr = np.zeros(N + 1, np.int64)
    np.cumsum(nonzero.sum(axis=1), out=row_ptr[1:])
    # flat positions, then their columns in place: one index array, where np.nonzero makes two
    nz_f = np.flatnonzero(nonzero)
    nz_x = Xc.reshape(-1)[nz_f]
    np.remainder(nz_f, F, out=nz_f)
    return CHAIN_DENSE, (Xc, _i(_word_starts(X)), _i(np.concatenate(Y)), np.int64(n_states), np.int64(n_features),
                         row_ptr, _i(nz_f), _f(nz_x))


def _stacked(X, rows=False):
    """The inputs' rows as one C-contiguous (N, F) array: their common base, uncopied, when they are
    consecutive row blocks of it (`KernelMap.inputs`), else a stacked copy.  ``rows``: the inputs are
    single rows (1-D; multiclass examples), not blocks of rows."""
    base = getattr(X[0], "base", None)
    if isinstance(base, np.ndarray) and base.ndim == 2 and base.dtype == np.float64 and base.flags.c_contiguous:
        addr = start = base.__array_interface__["data"][0]
        for x in X:
            if x.base is not base or not x.flags.c_contiguous or x.__array_interface__["data"][0] != addr:
                break
            addr += x.nbytes
        else:
            if addr == start + base.nbytes:
                return base
    return _f(np.vstack(X) if rows else np.concatenate(X, axis=0))


def pack_chain_csr(X, Y, n_states, n_features):
    """CHAIN_CSR: the CSR rows of all words stacked: (indptr (N+1,), indices, values,
    word starts (n+1,), labels (N,), S, F)."""
    import scipy.sparse as sp

    Xs = sp.vstack(X, format="csr")
    Xs.sort_indices()
    return CHAIN_CSR, (_i(Xs.indptr), _i(Xs.indices), _f(Xs.data), _i(_word_starts(X)), _i(np.concatenate(Y)),
                       np.int64(n_states), np.int64(n_features))


def pack_multiclass_dense(X, Y, n_classes, n_features):
    """MULTICLASS_DENSE: (examples (n, F), labels (n,), K, F)."""
    return MULTICLASS_DENSE, (_stacked(X, rows=True), _i(np.asarray(Y, np.int64)), np.int64(n_classes),
                              np.int64(n_features))


def pack_chain_dense_weighted(X, Y, A, n_states, n_features):
    """CHAIN_DENSE_W: `pack_chain_dense`'s tuple and the loss coefficients a (N,) of every position
    (the loss of word i is sum_l a_l [y_l != y_il] over its positions)."""
    _, data = pack_chain_dense(X, Y, n_states, n_features)
    return CHAIN_DENSE_W, (*data, _f(np.concatenate(A)))


def pack_chain_csr_weighted(X, Y, A, n_states, n_features):
    """CHAIN_CSR_W: `pack_chain_csr`'s tuple and the loss coefficients a (N,) of every position."""
    _, data = pack_chain_csr(X, Y, n_states, n_features)
    return CHAIN_CSR_W, (*data, _f(np.concatenate(A)))


def pack_multiclass_dense_weighted(X, Y, A, n_classes, n_features):
    """MULTICLASS_DENSE_W: `pack_multiclass_dense`'s tuple and the loss weight c (n,) of every
    example (its loss is c_i [y != y_i])."""
    _, data = pack_multiclass_dense(X, Y, n_classes, n_features)
    return MULTICLASS_DENSE_W, (*data, _f(np.asarray(A, np.float64)))


# ------------------------------------------------------------------ kernels
# a constant argument makes numba compile a callee once more for its literal type
# (Literal[bool](True)) beside the plain one Python calls use; np.bool_(True) is typed as bool

def corner(kind, data, i, w, merged):
    """(psi_idx, psi_val, L) of the loss-augmented labelling of example i at w.

    Callable from Python (dispatching on ``kind``) and from numba code (resolved by the type
    of ``data`` when the caller is compiled; ``kind`` is then unused)."""
    if kind == CHAIN_DENSE:
        return chain_dense_corner(*data, i, w, merged)
    if kind == CHAIN_CSR:
        return chain_csr_corner(*data, i, w)
    if kind == MULTICLASS_DENSE:
        return multiclass_dense_corner(*data, i, w)
    if kind == CHAIN_DENSE_W:
        if merged:
            return chain_dense_w_corner_merged(*data, i, w)
        return chain_dense_w_corner_unmerged(*data, i, w)
    if kind == CHAIN_CSR_W:
        return chain_csr_w_corner(*data, i, w)
    return multiclass_dense_w_corner(*data, i, w)


def _chain_dense_impl(kind, data, i, w, merged):
    return chain_dense_corner(*data, i, w, merged)


def _chain_dense_merged_impl(kind, data, i, w, merged):
    return chain_dense_corner_merged(*data, i, w)


def _chain_dense_unmerged_impl(kind, data, i, w, merged):
    return chain_dense_corner_unmerged(*data, i, w)


def _chain_csr_impl(kind, data, i, w, merged):
    indptr, indices, values, starts, Yc, S, F = data
    return chain_csr_corner(indptr, indices, values, starts, Yc, S, F, i, w)


def _multiclass_dense_impl(kind, data, i, w, merged):
    Xc, labels, K, F = data
    return multiclass_dense_corner(Xc, labels, K, F, i, w)


def _chain_dense_w_impl(kind, data, i, w, merged):
    if merged:
        return chain_dense_w_corner_merged(*data, i, w)
    return chain_dense_w_corner_unmerged(*data, i, w)


def _chain_dense_w_merged_impl(kind, data, i, w, merged):
    return chain_dense_w_corner_merged(*data, i, w)


def _chain_dense_w_unmerged_impl(kind, data, i, w, merged):
    return chain_dense_w_corner_unmerged(*data, i, w)


def _chain_csr_w_impl(kind, data, i, w, merged):
    return chain_csr_w_corner(*data, i, w)


def _multiclass_dense_w_impl(kind, data, i, w, merged):
    return multiclass_dense_w_corner(*data, i, w)


#: the packed layouts, told apart by their tuple length (and, at length 8, by the first array:
#: the dense chain's 2-D positions or the weighted CSR chain's 1-D row pointers)
_IMPL_BY_LENGTH = {7: _chain_csr_impl, 4: _multiclass_dense_impl, 9: _chain_dense_w_impl,
                   5: _multiclass_dense_w_impl}
#: the dense chain kernels' psi choice by the caller's constant ``merged``
_BY_MERGED = {_chain_dense_impl: (_chain_dense_unmerged_impl, _chain_dense_merged_impl),
              _chain_dense_w_impl: (_chain_dense_w_unmerged_impl, _chain_dense_w_merged_impl)}


@overload(corner, inline="always", prefer_literal=True, jit_options={"nogil": True})
def _corner_by_type(kind, data, i, w, merged):
    if not isinstance(data, types.BaseTuple):
        return None
    n = len(data.types)
    if n == 8:
        first = data.types[0]
        impl = _chain_dense_impl if getattr(first, "ndim", 1) == 2 else _chain_csr_w_impl
    else:
        impl = _IMPL_BY_LENGTH.get(n)
    if impl in _BY_MERGED and isinstance(merged, types.BooleanLiteral):
        # the caller's constant picks one psi kernel: a plain pass or a hinge pass then never
        # compiles the merging one (seconds of a first run), a corner-set pass never the other
        return _BY_MERGED[impl][int(merged.literal_value)]
    return impl


@njit(cache=True, nogil=True)
def chain_dense_corner(Xc, starts, Yc, S, F, row_ptr, nz_f, nz_x, i, w, merged):
    """Loss-augmented Viterbi on word i, its sparse psi_i(y*) and normalised Hamming loss."""
    if merged:
        return chain_dense_corner_merged(Xc, starts, Yc, S, F, row_ptr, nz_f, nz_x, i, w)
    return chain_dense_corner_unmerged(Xc, starts, Yc, S, F, row_ptr, nz_f, nz_x, i, w)


@njit(cache=True, nogil=True, inline="always")
def chain_dense_word_oracle(Xc, starts, Yc, S, F, i, w):
    """(x, y_i, y_i*) of word i: its positions, true labels and loss-augmented Viterbi labelling."""
    x = Xc[starts[i]:starts[i + 1]]
    yt = Yc[starts[i]:starts[i + 1]]
    return x, yt, chain_oracle_dense(x, w, yt, S, F, np.bool_(True))


@njit(cache=True, fastmath=True, nogil=True)  # the inlined oracle's flags (oracles/chain.py)
def chain_dense_corner_merged(Xc, starts, Yc, S, F, row_ptr, nz_f, nz_x, i, w):
    """`chain_dense_corner` with psi sorted and merged (what corner sets store)."""
    x, yt, y = chain_dense_word_oracle(Xc, starts, Yc, S, F, i, w)
    idx, val = chain_psi_merged(row_ptr, nz_f, nz_x, starts[i], yt, y, S, F)
    return idx, val, hamming_loss(yt, y)


@njit(cache=True, nogil=True)
def chain_psi_merged(row_ptr, nz_f, nz_x, r0, ya, yb, S, F):
    """phi(x, ya) - phi(x, yb) with sorted, unique indices and no zeros, from the non-zeros of
    the positions (rows r0 + p of the CSR arrays, sorted by feature) where the labels differ.

    The values of `structfw.oracles.chain.chain_phi_diff_dense` to the bit (the same non-zero
    terms added in the same order).  The differing rows are sorted by the state they add to or
    subtract from (a counting sort); a state that one row touches -- most of them -- copies that
    row, only a state of several rows is summed over its F features.  With one work array and
    the transitions sorted in place, the merged psi of an OCR word (loss-augmented labellings after
    6 passes: 5.1 differing positions) costs 2.0 us against 2.6 us summing every touched state
    over its F features, and 0.7 us unmerged (`chain_psi_entries`)."""
    L = ya.shape[0]
    nd = 0
    room = 2 * L
    for p in range(L):
        if ya[p] != yb[p]:
            room += 2 * (row_ptr[r0 + p + 1] - row_ptr[r0 + p])
            nd += 1
    out_i = np.empty(room, np.int64)
    out_v = np.empty(room)
    m = 0
    if nd > 0:
        work = np.zeros(2 * S + 1 + 2 * nd, np.int64)
        first, multi = _rows_by_state(ya, yb, r0, S, work)
        acc = np.zeros(F if multi else 0)
        rows = work[2 * S + 1:]
        for s in range(S):
            if first[s + 1] > first[s]:
                m = _state_block(row_ptr, nz_f, nz_x, rows[first[s]:first[s + 1]], s * F, F, acc, out_i, out_v, m)
    m = _transition_diff(ya, yb, S, S * F, out_i, out_v, m)
    return out_i[:m], out_v[:m]


@njit(cache=True, nogil=True, inline="always")
def _rows_by_state(ya, yb, r0, S, work):
    """The differing rows grouped by state, in the order of p: state s's rows are
    work[2S+1 + first[s] : 2S+1 + first[s+1]], r for an added row and ~r for a subtracted one
    (first = work[:S+1]); and whether some state has more than one."""
    first = work[:S + 1]
    fill = work[S + 1:2 * S + 1]
    rows = work[2 * S + 1:]
    for p in range(ya.shape[0]):
        a = ya[p]
        b = yb[p]
        if a != b:
            if a >= 0:
                first[a + 1] += 1
            if b >= 0:
                first[b + 1] += 1
    multi = False
    for s in range(S):
        multi = multi or first[s + 1] > 1
        first[s + 1] += first[s]
        fill[s] = first[s]
    for p in range(ya.shape[0]):
        a = ya[p]
        b = yb[p]
        if a != b:
            if a >= 0:
                rows[fill[a]] = r0 + p
                fill[a] += 1
            if b >= 0:
                rows[fill[b]] = ~(r0 + p)
                fill[b] += 1
    return first, multi


@njit(cache=True, nogil=True, inline="always")
def _state_block(row_ptr, nz_f, nz_x, rows, base, F, acc, out_i, out_v, m):
    """Append the block base + f of the rows' signed sum (non-zeros, sorted by f) from m."""
    if rows.shape[0] == 1:  # 0.0 +- x_f is +-x_f: the row as it is
        q = rows[0]
        if q >= 0:
            for t in range(row_ptr[q], row_ptr[q + 1]):
                out_i[m] = base + nz_f[t]
                out_v[m] = nz_x[t]
                m += 1
        else:
            for t in range(row_ptr[~q], row_ptr[~q + 1]):
                out_i[m] = base + nz_f[t]
                out_v[m] = -nz_x[t]
                m += 1
        return m
    for j in range(rows.shape[0]):
        q = rows[j]
        if q >= 0:
            for t in range(row_ptr[q], row_ptr[q + 1]):
                acc[nz_f[t]] += nz_x[t]
        else:
            for t in range(row_ptr[~q], row_ptr[~q + 1]):
                acc[nz_f[t]] -= nz_x[t]
    for f in range(F):
        # written always, kept only when non-zero: no unpredictable branch per feature
        v = acc[f]
        out_i[m] = base + f
        out_v[m] = v
        m += v != 0.0
        acc[f] = 0.0
    return m


@njit(cache=True, fastmath=True, nogil=True)  # the inlined oracle's flags (oracles/chain.py)
def chain_dense_corner_unmerged(Xc, starts, Yc, S, F, row_ptr, nz_f, nz_x, i, w):
    """`chain_dense_corner` with psi as unmerged entries (enough for a step or a dot product)."""
    x, yt, y = chain_dense_word_oracle(Xc, starts, Yc, S, F, i, w)
    idx, val = chain_psi_entries(row_ptr, nz_f, nz_x, starts[i], yt, y, S, F)
    return idx, val, hamming_loss(yt, y)


@njit(cache=True, nogil=True, inline="always")  # inlined for the first run (oracles/chain.py)
def chain_psi_entries(row_ptr, nz_f, nz_x, r0, ya, yb, S, F):
    """phi(x, ya) - phi(x, yb) as unmerged (index, value) entries: x_p in block ya_p and
    -x_p in block yb_p at every position p where the labels differ (x_p's non-zeros: row
    r0 + p of the CSR arrays), +-1 on changed transitions."""
    L = ya.shape[0]
    m = 0
    for p in range(L):
        if ya[p] != yb[p]:
            m += row_ptr[r0 + p + 1] - row_ptr[r0 + p]
    idx = np.empty(2 * m + 4 * L, np.int64)
    val = np.empty(2 * m + 4 * L)
    k = 0
    for p in range(L):
        a = ya[p]
        b = yb[p]
        if a == b:
            continue
        for t in range(row_ptr[r0 + p], row_ptr[r0 + p + 1]):
            f = nz_f[t]
            v = nz_x[t]
            idx[k] = a * F + f
            val[k] = v
            idx[k + 1] = b * F + f
            val[k + 1] = -v
            k += 2
    for p in range(L - 1):
        k = edge_label_diff(ya[p], ya[p + 1], yb[p], yb[p + 1], S * F, S, idx, val, k)
    # views, not copies: the caller only reads them
    return idx[:k], val[:k]


@njit(cache=True, nogil=True, inline="always")
def _csr_sequence(indptr, indices, values, starts, Yc, i):
    """Sequence i's CSR position features (row pointers from 0, indices, values) and labels."""
    a = starts[i]
    b = starts[i + 1]
    return indptr[a:b + 1] - indptr[a], indices[indptr[a]:indptr[b]], values[indptr[a]:indptr[b]], Yc[a:b]


@njit(cache=True, nogil=True)
def chain_csr_corner(indptr, indices, values, starts, Yc, S, F, i, w):
    """As `chain_dense_corner` for sparse (CSR) position features; psi is always merged."""
    ip, ix, vx, yt = _csr_sequence(indptr, indices, values, starts, Yc, i)
    y = chain_oracle_csr(ip, ix, vx, w, yt, S, F, np.bool_(True))
    idx, val = chain_phi_diff_csr(ip, ix, vx, yt, y, S, F)
    return idx, val, hamming_loss(yt, y)


@njit(cache=True, nogil=True)
def chain_csr_corner_fm(indptr, indices, values, starts, Yc, S, F, i, w, WT):
    """`chain_csr_corner` with the unary scores from the feature-major copy WT (F, S) of w's unary
    weights (`chain_unary_csr_fm`); the transitions from w.  The same corner to the bit when WT
    equals w's unary weights."""
    ip, ix, vx, yt = _csr_sequence(indptr, indices, values, starts, Yc, i)
    U = chain_unary_csr_fm(ip, ix, vx, WT, yt, np.bool_(True))
    y, _ = _viterbi_core(U, w, S * F, S)
    idx, val = chain_phi_diff_csr(ip, ix, vx, yt, y, S, F)
    return idx, val, hamming_loss(yt, y)


def csr_feature_major(compiled, w):
    """The feature-major copy WT (F, S) of w's unary weights that `corner_fm` and `chain_csr_hinges_fm`
    read, for a CSR chain training set ``compiled`` = (CHAIN_CSR, data); None for every other kind."""
    kind, data = compiled
    if kind != CHAIN_CSR:
        return None
    return feature_major(w, int(data[5]), int(data[6]))


def corner_fm(kind, data, i, w, WT):
    """`corner` (merged psi) for a caller that keeps a feature-major copy WT of w's unary weights
    ((0, 0): none): the CSR chain's kernel reads it (`chain_csr_corner_fm`), every other kind
    ignores it.  Resolved by the type of ``data`` in compiled callers, as `corner`."""
    if WT.shape[0] > 0 and kind == CHAIN_CSR:
        return chain_csr_corner_fm(*data, i, w, WT)
    return corner(kind, data, i, w, True)


@overload(corner_fm, inline="always", jit_options={"nogil": True})
def _corner_fm_by_type(kind, data, i, w, WT):
    if not isinstance(data, types.BaseTuple):
        return None
    if _IMPL_BY_LENGTH.get(len(data.types)) is _chain_csr_impl:
        def csr(kind, data, i, w, WT):
            if WT.shape[0] > 0:
                return chain_csr_corner_fm(*data, i, w, WT)
            return chain_csr_corner(*data, i, w)
        return csr
    return lambda kind, data, i, w, WT: corner(kind, data, i, w, True)


@njit(cache=True, nogil=True)
def chain_csr_hinge(indptr, indices, values, starts, Yc, S, F, i, w):
    """H_i(y*; w) of sequence i with CSR features, without psi: the loss-augmented Viterbi
    score max_y [Delta(y_i, y) + ⟨w, phi(y)⟩] minus the truth's score ⟨w, phi(y_i)⟩ (the loss
    enters the unary scores of the states y_t != y_i,t only, so U[t, y_i,t] is the plain score).
    A gap pass needs only H_i; building and merging psi was a third of its time on text."""
    ip, ix, vx, yt = _csr_sequence(indptr, indices, values, starts, Yc, i)
    U = chain_unary_csr(ip, ix, vx, w, S, F, yt, np.bool_(True))
    return _hinge_from_scores(U, w, yt, S, F)


@njit(cache=True, nogil=True, inline="always")
def _hinge_from_scores(U, w, yt, S, F):
    """The Viterbi score of the loss-augmented unary scores U minus the truth's score."""
    _, best = _viterbi_core(U, w, S * F, S)
    truth = 0.0
    for t in range(yt.shape[0]):
        truth += U[t, yt[t]]
    for t in range(yt.shape[0] - 1):
        truth += w[S * F + yt[t] * S + yt[t + 1]]
    return best - truth


@njit(cache=True, nogil=True)
def chain_csr_hinges_fm(indptr, indices, values, starts, Yc, S, F, w, WT, H):
    """H[i] = `chain_csr_hinge` of every sequence, the unary scores from the feature-major copy WT
    (F, S) of w's unary weights (`chain_unary_csr_fm`): a gap pass over sparse chain inputs.  The
    same values to the bit."""
    for i in range(starts.shape[0] - 1):
        ip, ix, vx, yt = _csr_sequence(indptr, indices, values, starts, Yc, i)
        U = chain_unary_csr_fm(ip, ix, vx, WT, yt, np.bool_(True))
        H[i] = _hinge_from_scores(U, w, yt, S, F)


def corner_hinge(kind, data, i, w):
    """H_i(y*; w) = L_i(y*) - ⟨psi_i(y*), w⟩ of example i at w: what a gap pass needs.

    Callable from Python and from numba code (resolved by the type of ``data``, as `corner`):
    the CSR chain computes it from its Viterbi score, the other layouts from the unmerged psi."""
    impl = _chain_csr_hinge_impl if kind == CHAIN_CSR else _psi_hinge_impl
    return impl(kind, data, i, w)


def _chain_csr_hinge_impl(kind, data, i, w):
    indptr, indices, values, starts, Yc, S, F = data
    return chain_csr_hinge(indptr, indices, values, starts, Yc, S, F, i, w)


def _psi_hinge_impl(kind, data, i, w):
    idx, val, L = corner(kind, data, i, w, False)
    return L - sparse_dot_dense(idx, val, w)


@overload(corner_hinge, inline="always", jit_options={"nogil": True})
def _corner_hinge_by_type(kind, data, i, w):
    if not isinstance(data, types.BaseTuple):
        return None
    return _chain_csr_hinge_impl if len(data.types) == 7 else _psi_hinge_impl


@njit(cache=True, nogil=True)
def multiclass_dense_corner(Xc, labels, K, F, i, w):
    """argmax_k ⟨w_k, x_i⟩ + [k != y_i], its psi (always merged: two sorted blocks) and the 0-1 loss."""
    yt = labels[i]
    y = multiclass_oracle(Xc[i], w, yt, K, F, np.bool_(True))
    idx, val = multiclass_phi_diff(Xc[i], yt, y, F)
    return idx, val, 0.0 if y == yt else 1.0


# ------------------------------------------------------- weighted losses
@njit(cache=True, fastmath=True, nogil=True, inline="always")
def chain_dense_w_word_oracle(Xc, starts, Yc, S, F, A, i, w):
    """(y_i, a_i, y_i*) of word i with weighted loss coefficients a_i."""
    x = Xc[starts[i]:starts[i + 1]]
    yt = Yc[starts[i]:starts[i + 1]]
    a = A[starts[i]:starts[i + 1]]
    return yt, a, chain_oracle_dense_weighted(x, w, yt, a, S, F)


@njit(cache=True, fastmath=True, nogil=True)
def chain_dense_w_corner_merged(Xc, starts, Yc, S, F, row_ptr, nz_f, nz_x, A, i, w):
    """`chain_dense_corner_merged` with the weighted loss sum_l a_l [y_l != y_il]."""
    yt, a, y = chain_dense_w_word_oracle(Xc, starts, Yc, S, F, A, i, w)
    idx, val = chain_psi_merged(row_ptr, nz_f, nz_x, starts[i], yt, y, S, F)
    return idx, val, weighted_hamming_loss(yt, y, a)


@njit(cache=True, fastmath=True, nogil=True)
def chain_dense_w_corner_unmerged(Xc, starts, Yc, S, F, row_ptr, nz_f, nz_x, A, i, w):
    """`chain_dense_corner_unmerged` with the weighted loss."""
    yt, a, y = chain_dense_w_word_oracle(Xc, starts, Yc, S, F, A, i, w)
    idx, val = chain_psi_entries(row_ptr, nz_f, nz_x, starts[i], yt, y, S, F)
    return idx, val, weighted_hamming_loss(yt, y, a)


@njit(cache=True, nogil=True)
def chain_csr_w_corner(indptr, indices, values, starts, Yc, S, F, A, i, w):
    """`chain_csr_corner` with the weighted loss."""
    ip, ix, vx, yt = _csr_sequence(indptr, indices, values, starts, Yc, i)
    c = A[starts[i]:starts[i + 1]]
    y = chain_oracle_csr_weighted(ip, ix, vx, w, yt, c, S, F)
    idx, val = chain_phi_diff_csr(ip, ix, vx, yt, y, S, F)
    return idx, val, weighted_hamming_loss(yt, y, c)


@njit(cache=True, nogil=True)
def multiclass_dense_w_corner(Xc, labels, K, F, A, i, w):
    """`multiclass_dense_corner` with the loss A_i [y != y_i]."""
    yt = labels[i]
    y = multiclass_oracle_weighted(Xc[i], w, yt, A[i], K, F)
    idx, val = multiclass_phi_diff(Xc[i], yt, y, F)
    return idx, val, 0.0 if y == yt else A[i]
