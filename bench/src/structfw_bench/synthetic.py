"""A larger synthetic chain (sequence labelling) problem for the benchmarks.

``make_chain_problem`` samples sequences from an HMM-like generator:

- labels follow a Markov chain whose rows put most of their mass on a few
  preferred successors (so the transition features carry information);
- emissions are noisy: ``sparse=True`` gives binary bag-of-features rows (each
  state owns ``n_active`` features that fire with probability ``p_on``; every
  position also fires ``n_noise`` random features, some of them those of a
  *confusable* state), returned as scipy.sparse CSR rows; ``sparse=False`` gives
  dense rows = (state prototype + Gaussian noise) / sqrt(F) (prototypes of a state and its
  confusable twin are close).

Per-position classification is ambiguous (tens of percent error for a unary
classifier) while the chain structure helps, so the problem is learnable but
not trivial, like OCR.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def make_chain_problem(n=25000, n_states=10, n_features=200, sparse=True, seed=0, min_len=4, max_len=12,
                       n_active=6, p_on=0.3, n_noise=10, noise=2.0, n_test=None):
    """Sample a sequence-labelling data set from an HMM-like generator.

    Parameters
    ----------
    n : int
        Number of training sequences.
    n_states, n_features : int
        Labels S and features F per position (the ChainModel has d = S*F + S^2).
    sparse : bool
        Binary sparse emissions as CSR rows (True) or dense Gaussian emissions (False).
    seed : int
    min_len, max_len : int
        Sequence lengths are uniform in [min_len, max_len].
    n_active, p_on, n_noise : sparse emissions (see module doc).
    noise : float
        Standard deviation of the dense emission noise (prototypes have unit-order entries).
    n_test : int or None
        Test sequences (default n // 10).

    Returns
    -------
    X, Y, X_test, Y_test : lists; X[i] is (L_i, F) CSR (sparse) or float64 ndarray,
        Y[i] is an int64 array (L_i,) in 0..S-1.
    """
    if n < 1 or n_states < 2 or n_features < 1 or not (1 <= min_len <= max_len):
        raise ValueError("need n >= 1, n_states >= 2, n_features >= 1 and 1 <= min_len <= max_len")
    if sparse and n_active * n_states > n_features:
        raise ValueError(f"sparse emissions need n_features >= n_active * n_states = {n_active * n_states}")
    rng = np.random.default_rng(seed)
    S, F = int(n_states), int(n_features)
    # transitions: each state prefers 2 successors
    T = np.full((S, S), 0.2 / S)
    for a in range(S):
        T[a, rng.choice(S, 2, replace=False)] += 0.4
    T /= T.sum(1, keepdims=True)
    start = np.full(S, 1.0 / S)
    twin = rng.permutation(S)  # the confusable state of each state
    if sparse:
        own = rng.permutation(F)[: S * n_active].reshape(S, n_active)
    else:
        protos = rng.normal(0.0, 1.0, (S, F))
        protos = 0.6 * protos + 0.4 * protos[twin]  # twins are close

    n_test = max(1, n // 10) if n_test is None else int(n_test)

    def sample(m):
        X, Y = [], []
        for _ in range(m):
            L = int(rng.integers(min_len, max_len + 1))
            y = np.empty(L, np.int64)
            y[0] = rng.choice(S, p=start)
            for t in range(1, L):
                y[t] = rng.choice(S, p=T[y[t - 1]])
            if sparse:
                rows, cols = [], []
                for t in range(L):
                    on = own[y[t]][rng.random(n_active) < p_on]
                    conf = own[twin[y[t]]][rng.random(n_active) < p_on * 0.8]
                    rnd = rng.integers(0, F, n_noise)
                    f = np.unique(np.concatenate([on, conf, rnd]))
                    rows.append(np.full(len(f), t))
                    cols.append(f)
                r, c = np.concatenate(rows), np.concatenate(cols)
                X.append(sp.csr_matrix((np.ones(len(r)), (r, c)), shape=(L, F)))
            else:
                X.append(np.ascontiguousarray((protos[y] + rng.normal(0.0, noise, (L, F))) / np.sqrt(F)))
            Y.append(y)
        return X, Y

    X, Y = sample(int(n))
    Xt, Yt = sample(n_test)
    return X, Y, Xt, Yt
