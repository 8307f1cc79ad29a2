"""Per-block corner sets in flat arrays: one structure for the cache, the active sets and working sets.

A corner of block i is (psi_i(y), L_i(y)); it does not depend on lam, so the
sets survive a change of lam (warm starts, regularisation path).  ``alpha``
holds alpha_i(y) when the engine tracks dual weights (pairwise and away steps):
the active set is S_i = {y : alpha_i(y) > 0} (Osokin et al. 2016, Sec. 3.2);
cache-only corners have alpha = 0 and only those are evicted (Sec. 3.3: S_i
subset of C_i).

Layout (docs/design.md, "Speed"): per block i and slot k < size[i], the corner's
sparse psi lives in a shared pool (``pidx``/``pval`` from ``start[i, k]``, ``nnz[i, k]``
entries, merged and sorted), beside ``loss``, ``alpha``, ``last`` (block step of last
use) and ``key`` (a 64-bit hash of the corner's content: two labellings with the same
(psi, L) are the same corner).  Every operation -- add, find, remove, evict, drop the
inactive, best and away corner -- is a numba kernel over the tuple of arrays
(`CornerStore.arrays`), so compiled passes use them without Python; the class
only grows the arrays when a block or the pool is full.

With the factored block storage of chains (`structfw.solvers._factored`) a store holds
*labellings* instead (``labels=True``): corner k's entries are the labelling y itself (L_i
states in ``pidx``; ``pval`` is empty: a labelling has no values, and a pool of zeros beside the
states doubled the lines a lookup or a store touches), the key is its hash, and its score ⟨psi_i(y), w⟩ comes
from the block's unary scores at w in O(L_i) (`cs_scan` with ``labels``), where a psi of ~L_i F
entries is gathered from w: the same corners, a smaller pool, cheaper scans and no psi built.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from .._linalg import SparseVector
from ..oracles.chain import labelling_score

#: weights below this are treated as zero (drop steps remove the corner)
ALPHA_EPS = 1e-14

#: the scorer of corner sets of psi vectors (`cs_scan`): no unary scores
NO_LABELS = (np.empty((0, 0)), np.empty(0), np.empty(0, np.int64), 0.0)

#: odd 64-bit multipliers of the key's mixing (splitmix64's)
_K1, _K2, _K3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


@intrinsic
def float_bits(typingctx, x):
    """The IEEE-754 bits of a float64 as a uint64: an LLVM bitcast, where viewing a one-element array
    allocated for it cost an allocation per hashed corner."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.uint64(types.float64), codegen


# ================================================================== kernels
@njit(cache=True, nogil=True)
def corner_key(idx, val, L):
    """A 64-bit hash of a corner's entries, their number and its loss.

    Each entry (j, psi_j) is mixed on its own and the mixes are added: a corner's entries are
    sorted and unique, so their set is the corner, and independent mixes vectorise where a
    chained hash (FNV-1a, before) waits for the previous entry's multiply: 0.12 against 0.60 us
    for an OCR corner of ~260 entries, paid by every oracle corner that a cache, an active set or
    MP-BCFW keeps.  Equal keys are confirmed entry by entry (`cs_find`), so a collision costs a
    comparison, never a wrong corner."""
    h = np.uint64(0)
    if val.shape[0] == idx.shape[0]:
        bits = val.view(np.uint64)
        for t in range(idx.shape[0]):
            m = (np.uint64(idx[t]) * _K1 ^ bits[t]) * _K2
            h += m ^ (m >> np.uint64(31))
    else:  # a labelling (no values): the mix of a zero value, so that its key is the same either way
        for t in range(idx.shape[0]):
            m = np.uint64(idx[t]) * _K1 * _K2
            h += m ^ (m >> np.uint64(31))
    h = (h ^ float_bits(np.float64(L)) ^ np.uint64(idx.shape[0])) * _K3
    return h ^ (h >> np.uint64(29))


@njit(cache=True, nogil=True)
def cs_rehash(S):
    """Recompute every live corner's key from its entries (a loaded state's keys are derived
    data: a file saved with another hash, or with forged keys, still finds its corners)."""
    size, key, loss = S[0], S[1], S[2]
    for i in range(size.shape[0]):
        for k in range(size[i]):
            idx, val = cs_entries(S, i, k)
            key[i, k] = corner_key(idx, val, loss[i, k])


@njit(cache=True, nogil=True)
def cs_entries(S, i, k):
    """(indices, values) of corner k of block i (views into the pool; no values in a store of labellings)."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    a = start[i, k]
    return pidx[a:a + nnz[i, k]], pval[a:a + nnz[i, k]]


@njit(cache=True, nogil=True)
def cs_dot(S, i, k, x):
    """⟨psi_i(y_k), x⟩."""
    idx, val = cs_entries(S, i, k)
    s = 0.0
    for t in range(idx.shape[0]):
        s += val[t] * x[idx[t]]
    return s


@njit(cache=True, nogil=True)
def cs_find(S, i, h, idx, val, L):
    """Slot of the corner (idx, val, L) in block i, or -1."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    for k in range(size[i]):
        if key[i, k] != h or loss[i, k] != L or nnz[i, k] != idx.shape[0]:
            continue
        ki, kv = cs_entries(S, i, k)
        same = True
        if kv.shape[0] == 0:  # a labelling: its states are the corner
            for t in range(idx.shape[0]):
                if ki[t] != idx[t]:
                    same = False
                    break
        else:
            for t in range(idx.shape[0]):
                if ki[t] != idx[t] or kv[t] != val[t]:
                    same = False
                    break
        if same:
            return k
    return -1


@njit(cache=True, nogil=True)
def cs_room(S, i, m):
    """0 if block i can take a new corner of m entries, 1 if the block is full, 2 if the pool is."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    if size[i] >= key.shape[1]:
        return 1
    if meta[0] + m > pidx.shape[0]:
        return 2
    return 0


@njit(cache=True, nogil=True)
def cs_add(S, i, idx, val, L, a0, stamp):
    """Slot of corner (idx, val, L) in block i, added with weight a0 if absent (its last use
    becomes ``stamp`` either way).  The caller made room (`cs_room`)."""
    h = corner_key(idx, val, L)
    return cs_put(S, i, h, cs_find(S, i, h, idx, val, L), idx, val, L, a0, stamp)


@njit(cache=True, nogil=True, inline="always")
def cs_put(S, i, h, k, idx, val, L, a0, stamp):
    """`cs_add` for a caller that has hashed the corner (``h``) and looked it up
    (``k``, -1 if absent): hashing a corner costs about as much as scoring it."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    if k >= 0:
        last[i, k] = stamp
        return k
    k = size[i]
    top = meta[0]
    m = idx.shape[0]
    pidx[top:top + m] = idx
    if pval.shape[0] > 0:  # not a store of labellings
        pval[top:top + m] = val
    start[i, k] = top
    nnz[i, k] = m
    key[i, k] = h
    loss[i, k] = L
    alpha[i, k] = a0
    last[i, k] = stamp
    size[i] = k + 1
    meta[0] = top + m
    meta[1] += m
    return k


@njit(cache=True, nogil=True)
def cs_remove(S, i, k):
    """Swap-remove slot k of block i (its pool entries become garbage until compaction)."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    j = size[i] - 1
    meta[1] -= nnz[i, k]
    if k != j:
        key[i, k] = key[i, j]
        loss[i, k] = loss[i, j]
        alpha[i, k] = alpha[i, j]
        last[i, k] = last[i, j]
        start[i, k] = start[i, j]
        nnz[i, k] = nnz[i, j]
    size[i] = j


@njit(cache=True, nogil=True)
def cs_drop_inactive(S, i):
    """Keep only the active set (no cache): remove the zero-weight corners, at least one stays."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    for k in range(size[i] - 1, -1, -1):
        if alpha[i, k] <= ALPHA_EPS and size[i] > 1:
            cs_remove(S, i, k)


@njit(cache=True, nogil=True)
def cs_evict(S, i, max_size):
    """Remove the longest-unused zero-weight corners until block i holds <= max_size."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    while size[i] > max_size:
        best = -1
        for k in range(size[i]):
            if alpha[i, k] <= ALPHA_EPS and (best < 0 or last[i, k] < last[i, best]):
                best = k
        if best < 0:
            return
        cs_remove(S, i, best)


@njit(cache=True, nogil=True)
def cs_expire(S, i, oldest):
    """Remove block i's zero-weight corners last used before ``oldest`` (MP-BCFW: planes not
    active during the last T outer iterations); at least one corner stays."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    for k in range(size[i] - 1, -1, -1):
        if last[i, k] < oldest and alpha[i, k] <= ALPHA_EPS and size[i] > 1:
            cs_remove(S, i, k)


@njit(cache=True, nogil=True)
def cs_best(S, i, w):
    """(slot, H, score) of argmax over block i's corners of H_i(y; w) = L_i(y) - ⟨w, psi_i(y)⟩,
    with the corner's score ⟨psi_i(y), w⟩ (a block step along it needs it again)."""
    r = cs_scan(S, i, w, True, False, NO_LABELS)
    return r[0], r[1], r[2]


@njit(cache=True, nogil=True)
def cs_away(S, i, w):
    """argmin over the active set of H_i(y; w): the away corner of pairwise and away steps."""
    return cs_away_and_weighted_score(S, i, w)[0]


@njit(cache=True, nogil=True)
def cs_away_and_weighted_score(S, i, w):
    """(`cs_away`, sum_k alpha_k ⟨psi_k, w⟩, the away corner's score) in one sweep over
    the active set.

    With tracked weights w_i = sum_k alpha_k psi_k / (lam n), so the second value is
    lam n ⟨w_i, w⟩: the block gap's part from w_i without reading the dense row of w_i.
    The third is ⟨psi_a, w⟩, which a pairwise or away step along psi_a needs again.
    Ties go to the first slot."""
    r = cs_scan(S, i, w, False, True, NO_LABELS)
    return r[3], r[4], r[5]


@njit(cache=True, nogil=True)
def cs_weighted_rows(S, rows, c):
    """rows[i] = c sum_k alpha_ik psi_i(y_k) for every block: w_i = A alpha_[i] with
    c = 1/(lam n), rebuilt from the tracked weights (rows the pairwise steps left stale)."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    for i in range(size.shape[0]):
        row = rows[i]
        row[:] = 0.0
        for k in range(size[i]):
            a = alpha[i, k]
            if a > 0.0:
                b = start[i, k]
                for t in range(b, b + nnz[i, k]):
                    row[pidx[t]] += (c * a) * pval[t]


@njit(cache=True, nogil=True, inline="always")
def _corner_score(S, i, k, w, labels):
    """⟨psi_i(y_k), w⟩: a dot product with the corner's psi, or for a set of labellings (``labels`` =
    (U, W_tr, y_i, ⟨phi(x_i, y_i), w⟩), the block's unary scores at w, the transition weights, its ground
    truth and the truth's score) the truth's score less the labelling's, O(L) instead of a gather of its
    psi's entries (the truth is scored once per scan, not once per corner)."""
    U = labels[0]
    if U.shape[1] == 0:
        return cs_dot(S, i, k, w)
    y, _ = cs_entries(S, i, k)
    return labels[3] - labelling_score(U, labels[1], y)


@njit(cache=True, nogil=True, inline="always")
def cs_scan(S, i, w, want_best, want_away, labels):
    """One sweep over block i's corners, each scored once: (best, H_best, ⟨psi_best, w⟩, away,
    sum_k alpha_k ⟨psi_k, w⟩, ⟨psi_away, w⟩) -- the best corner over all corners (when
    ``want_best``), the away corner and the weighted score over the active ones (when
    ``want_away``; only the active corners are scored when the best is not wanted).  A step
    that needs both (cache or approximate pass with pairwise/away steps) scores each corner
    once instead of twice.  ``labels``: `NO_LABELS` for corners stored as psi, else what
    `_corner_score` reads for corners stored as labellings."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    best = -1
    hb = 0.0
    sb = 0.0
    away = -1
    ha = 0.0
    sa = 0.0
    total = 0.0
    for k in range(size[i]):
        active = alpha[i, k] > ALPHA_EPS
        if not (want_best or active):
            continue
        score = _corner_score(S, i, k, w, labels)
        h = loss[i, k] - score
        if want_best and (best < 0 or h > hb):
            best = k
            hb = h
            sb = score
        if want_away and active:
            total += alpha[i, k] * score
            if away < 0 or h < ha:
                away = k
                ha = h
                sa = score
    return best, hb, sb, away, total, sa


@njit(cache=True, nogil=True)
def cs_clip(S, i):
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    for k in range(size[i]):
        if alpha[i, k] < ALPHA_EPS:
            alpha[i, k] = 0.0


@njit(cache=True, nogil=True)
def _compact(S, new_pidx, new_pval):
    """Copy the live entries into new pools (in block/slot order); returns their count."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    top = 0
    for i in range(size.shape[0]):
        for k in range(size[i]):
            a = start[i, k]
            m = nnz[i, k]
            new_pidx[top:top + m] = pidx[a:a + m]
            if new_pval.shape[0] > 0:
                new_pval[top:top + m] = pval[a:a + m]
            start[i, k] = top
            top += m
    return top


@njit(cache=True, nogil=True)
def _compact_in_place(S, blocks, slots):
    """Move the live entries down to the start of the pool, corner by corner in the order
    given (increasing start: a move then never overwrites entries still to be moved);
    returns their count."""
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    top = 0
    for t in range(blocks.shape[0]):
        i = blocks[t]
        k = slots[t]
        a = start[i, k]
        m = nnz[i, k]
        if a != top:
            for e in range(m):
                pidx[top + e] = pidx[a + e]
            if pval.shape[0] > 0:
                for e in range(m):
                    pval[top + e] = pval[a + e]
            start[i, k] = top
        top += m
    return top


# ================================================================== the store
class CornerStore:
    """The corner sets of all n blocks (see the module docstring).

    Parameters
    ----------
    n, d : int
    capacity : int
        Initial slots per block (grows when a block fills up).
    labels : bool
        The corners are stored as labellings (the factored storage), not as psi vectors.
    """

    #: stores saved before labelling corners existed hold psi vectors
    labels = False

    def __init__(self, n, d, capacity=8, pool=None, labels=False):
        self.n, self.d = int(n), int(d)
        if labels:
            self.labels = True
        C = max(int(capacity), 2)
        P = int(pool) if pool is not None else max(1024, 16 * n)
        self.size = np.zeros(n, np.int64)
        self.key = np.zeros((n, C), np.uint64)
        self.loss = np.zeros((n, C))
        self.alpha = np.zeros((n, C))
        self.last = np.zeros((n, C), np.int64)
        self.start = np.zeros((n, C), np.int64)
        self.nnz = np.zeros((n, C), np.int64)
        self.pidx = np.empty(P, np.int64)
        self.pval = np.empty(0 if self.labels else P)  # a labelling has no values
        self.meta = np.zeros(2, np.int64)  # [top of the pool, live entries]

    @property
    def arrays(self):
        """The tuple the kernels take (rebuilt after growth: do not keep it across calls)."""
        return (self.size, self.key, self.loss, self.alpha, self.last, self.start, self.nnz, self.pidx,
                self.pval, self.meta)

    # ------------------------------------------------------------ growth
    def make_room(self, i, m):
        """Grow until block i can take one more corner of m entries."""
        while True:
            r = cs_room(self.arrays, i, m)
            if r == 0:
                return
            if r == 1:
                self._grow_slots()
            else:
                self._grow_pool(m)

    def reserve(self, slots, entries):
        """Room for ``slots`` more corners in every block and ``entries`` more pool entries."""
        while self.key.shape[1] - int(self.size.max(initial=0)) < slots:
            self._grow_slots()
        if self.meta[0] + entries > self.pidx.shape[0]:
            self._grow_pool(entries)

    def _grow_slots(self):
        n, C = self.key.shape
        for name in ("key", "loss", "alpha", "last", "start", "nnz"):
            old = getattr(self, name)
            new = np.zeros((n, 2 * C), old.dtype)
            new[:, :C] = old
            setattr(self, name, new)

    def _grow_pool(self, m):
        live = int(self.meta[1])
        P = self.pidx.shape[0]
        if live + m <= P // 2:
            # at least half of the pool is garbage: compact it in place.  Copying into a new
            # pool instead cost a pairwise fit on the 25,000-sequence chain ~60 ms a time,
            # most of it faulting in the fresh 100 MB, about once a pass
            blocks, slots = np.nonzero(np.arange(self.key.shape[1])[None, :] < self.size[:, None])
            order = np.argsort(self.start[blocks, slots], kind="stable")
            self.meta[0] = _compact_in_place(self.arrays, blocks[order].astype(np.int64),
                                             slots[order].astype(np.int64))
            return
        newP = max(2 * P, 2 * (live + m))
        new_idx, new_val = np.empty(newP, np.int64), np.empty(0 if self.labels else newP)
        self.meta[0] = _compact(self.arrays, new_idx, new_val)
        self.pidx, self.pval = new_idx, new_val

    # ------------------------------------------------------------ operations
    def add(self, i, psi, L, alpha=0.0, stamp=0, y=None):
        """Slot of corner (psi, L) in block i (added if absent); a store of labellings keeps its
        labelling ``y`` instead of psi."""
        if self.labels:
            idx = np.atleast_1d(np.asarray(y, np.int64)).ravel().copy()
            val = np.zeros(idx.shape[0])
        else:
            idx = np.ascontiguousarray(psi.indices, np.int64)
            val = np.ascontiguousarray(psi.values, np.float64)
        self.make_room(i, idx.shape[0])
        return int(cs_add(self.arrays, i, idx, val, float(L), float(alpha), int(stamp)))

    def psi(self, i, k):
        if self.labels:
            raise ValueError("this corner store keeps labellings (the factored block storage), not psi vectors: "
                             "read them with labelling(i, k)")
        idx, val = cs_entries(self.arrays, i, k)
        return SparseVector(idx.copy(), val.copy(), self.d)

    def labelling(self, i, k):
        """The labelling of corner k of block i (a store of labellings)."""
        if not self.labels:
            raise ValueError("this corner store keeps psi vectors, not labellings: read them with psi(i, k)")
        return cs_entries(self.arrays, i, k)[0].copy()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return BlockCorners(self, i)

    def __iter__(self):
        return (BlockCorners(self, i) for i in range(self.n))

    def n_active(self, weighted):
        if not weighted:
            return float(self.size.sum())
        cols = np.arange(self.alpha.shape[1])
        return float(((self.alpha > ALPHA_EPS) & (cols[None, :] < self.size[:, None])).sum())


class BlockCorners:
    """Read view of block i's corners (for inspection and tests): ``alpha``, ``loss``, ``psi``."""

    def __init__(self, store, i):
        self.store, self.i = store, i

    def __len__(self):
        return int(self.store.size[self.i])

    @property
    def alpha(self):
        return self.store.alpha[self.i, :len(self)]

    @property
    def loss(self):
        return self.store.loss[self.i, :len(self)]

    @property
    def psi(self):
        return [self.store.psi(self.i, k) for k in range(len(self))]

    def active(self):
        return [k for k in range(len(self)) if self.alpha[k] > ALPHA_EPS]
