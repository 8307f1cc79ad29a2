"""Per-block corner sets: one structure for the cache, the active set and working sets.

A corner of block i is a labelling y with its (psi_i(y), L_i(y)); it does not
depend on lam, so a corner set survives a change of lam (warm starts,
regularisation path).  When the engine tracks dual weights (pairwise and
away steps), ``alpha`` holds alpha_i(y) and the active set is
S_i = {y : alpha_i(y) > 0} (Osokin et al. 2016, Sec. 3.2); cache-only corners
have alpha = 0, and only those may be evicted (Sec. 3.3: S_i subset of C_i).
"""
from __future__ import annotations

import numpy as np

from .._linalg import sparse_dot_dense

#: weights below this are treated as zero (drop steps remove the corner)
ALPHA_EPS = 1e-14


class CornerSet:
    """Corners of one block: labelling keys, psi, L, alpha and last use."""

    __slots__ = ("keys", "labels", "psi", "loss", "alpha", "last_used")

    def __init__(self):
        self.keys = {}
        self.labels = []
        self.psi = []
        self.loss = []
        self.alpha = []
        self.last_used = []

    def __len__(self):
        return len(self.psi)

    def add(self, key, y, psi, L, alpha=0.0, it=0):
        k = self.keys.get(key, -1)
        if k >= 0:
            self.last_used[k] = it
            return k
        self.keys[key] = len(self.psi)
        self.labels.append(y)
        self.psi.append(psi)
        self.loss.append(float(L))
        self.alpha.append(float(alpha))
        self.last_used.append(it)
        return len(self.psi) - 1

    def remove(self, k):
        """Swap-remove slot k (its key must map to k)."""
        last = len(self.psi) - 1
        key_k = next(key for key, v in self.keys.items() if v == k)
        del self.keys[key_k]
        if k != last:
            key_last = next(key for key, v in self.keys.items() if v == last)
            self.keys[key_last] = k
            for lst in (self.labels, self.psi, self.loss, self.alpha, self.last_used):
                lst[k] = lst[last]
        for lst in (self.labels, self.psi, self.loss, self.alpha, self.last_used):
            lst.pop()

    def scores(self, w):
        """H_i(y; w) = L_i(y) - <w, psi_i(y)> for every corner."""
        return np.array([L - sparse_dot_dense(p.indices, p.values, w) for p, L in zip(self.psi, self.loss)])

    def active(self):
        return [k for k, a in enumerate(self.alpha) if a > ALPHA_EPS]

    def evict(self, max_size, protect=()):
        """Drop the longest-unused corners with alpha = 0 until size <= max_size."""
        while len(self.psi) > max_size:
            cand = [k for k in range(len(self.psi)) if self.alpha[k] <= ALPHA_EPS and k not in protect]
            if not cand:
                return
            k = min(cand, key=lambda j: self.last_used[j])
            self.remove(k)
            protect = tuple(p if p != len(self.psi) else k for p in protect)
