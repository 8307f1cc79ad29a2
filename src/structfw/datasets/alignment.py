"""A synthetic word-alignment task for `structfw.models.MatchingModel`.

The BCFW paper's third task is the word alignment of Taskar, Lacoste-Julien and Klein
(2005) on a bilingual corpus (n = 5,000 sentence pairs, d = 82 edge features).  No such
corpus can be had offline, so `make_alignment` generates sentence pairs with the
same structure -- one-to-one partial alignments, null words on both sides, local word
reordering -- and edge features of the kinds Taskar et al. use (a noisy bilingual
dictionary, a distributional similarity, relative position, orthographic similarity,
word frequency), each binned into indicator features so that a linear scorer can learn
how much to trust each one.

The generative process, with one random generator seeded by ``random_state``:

1. A source vocabulary of ``vocab`` words with Zipf frequencies (exponent 1.1); each
   source word v has a translation t(v) in a target vocabulary of the same size, a latent
   "meaning" vector e_v in R^8, and an orthographic form shared with its translation for
   cognates (30 % of the words).
2. A noisy dictionary: it lists (v, t(v)) for 70 % of the words and, for 10 % of the
   words, also a wrong translation.
3. A sentence pair: m_s ~ U{3..12} source words drawn by frequency; each is translated
   with probability 0.8 (otherwise it is unaligned); 0-2 spurious target words are
   inserted; target positions follow the source order with local distortion (each
   translated word's position jittered by N(0, 1.5) before sorting).  y[j] = the target
   position of source word j's translation, or -1.
4. Edge (j, k) features (``N_FEATURES`` = 82, one-hot unless said): bias (1);
   dictionary pair (1), dictionary pair x relative-position bin (10); the cosine of the
   two words' meaning vectors plus N(0, 0.35) noise, 10 bins; the relative-position
   distance |j/m_s - k/m_t|, 10 bins; orthographic similarity (1 for a cognate pair,
   else U(0, 0.7)), plus N(0, 0.1) noise, 10 bins; the source word's frequency rank and
   the target word's, 10 bins each (a frequent word is less informative); the product of
   the dictionary and similarity indicators (10); and whether k is the best-similarity
   target of j and j the best of k (competition features, 2); 8 constant-zero padding
   features are not used (the paper's d = 82 counts some empty ones too) -- all in a
   CSR matrix with one row per edge (`structfw.models.MatchingInput`).

Deterministic for a given ``random_state``; 5,000 pairs take about 4 s and 40 MB.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

if TYPE_CHECKING:
    from ..models.matching import MatchingInput

#: edge features of `make_alignment` (d of the matching model)
N_FEATURES = 82
_BINS = 10


def _bin(v: npt.ArrayLike, lo: float, hi: float) -> npt.NDArray[np.int64]:
    return np.clip(((np.asarray(v) - lo) / (hi - lo) * _BINS).astype(np.int64), 0, _BINS - 1)


class _Lexicon:
    def __init__(self, rng: np.random.Generator, vocab: int) -> None:
        self.vocab = vocab
        p = 1.0 / np.arange(1, vocab + 1) ** 1.1
        self.p = p / p.sum()
        self.rank_bin = _bin(np.log(np.arange(1, vocab + 1)), 0.0, np.log(vocab) + 1e-9)
        self.translation = rng.permutation(vocab)
        self.inverse = np.argsort(self.translation)
        self.meaning = rng.normal(size=(vocab, 8))
        self.meaning /= np.linalg.norm(self.meaning, axis=1, keepdims=True)
        self.cognate = rng.random(vocab) < 0.3
        self.in_dict = rng.random(vocab) < 0.7
        wrong = rng.random(vocab) < 0.1
        self.wrong = np.where(wrong, rng.integers(0, vocab, vocab), -1)


def _pair(rng: np.random.Generator,
          lex: _Lexicon) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    ms = int(rng.integers(3, 13))
    src = rng.choice(lex.vocab, ms, p=lex.p)
    aligned = rng.random(ms) < 0.8
    trans = lex.translation[src[aligned]]
    spurious = rng.choice(lex.vocab, int(rng.integers(0, 3)), p=lex.p)
    # local distortion: source order plus noise, then the spurious words at random places
    keys = np.concatenate([np.flatnonzero(aligned) + rng.normal(0, 1.5, aligned.sum()),
                           rng.uniform(0, ms, spurious.size)])
    order = np.argsort(keys, kind="stable")
    tgt = np.concatenate([trans, spurious])[order]
    mt = tgt.size
    if mt == 0:  # keep at least one target word
        tgt = rng.choice(lex.vocab, 1, p=lex.p)
        mt, order = 1, np.array([0])
        aligned[:] = False
    pos = np.empty(order.size, np.int64)
    pos[order] = np.arange(order.size)
    y = np.full(ms, -1, np.int64)
    y[np.flatnonzero(aligned)] = pos[: aligned.sum()]
    return src, tgt, y


def _edge_features(rng: np.random.Generator, lex: _Lexicon, src: npt.NDArray[np.int64],
                   tgt: npt.NDArray[np.int64]) -> sp.csr_matrix:
    ms, mt = src.size, tgt.size
    J, K = np.meshgrid(np.arange(ms), np.arange(mt), indexing="ij")
    s, t = src[J], tgt[K]
    true_pair = lex.translation[s] == t
    in_dict = (true_pair & lex.in_dict[s]) | (lex.wrong[s] == t)
    sim = np.einsum("jkf,jkf->jk", lex.meaning[s], lex.meaning[lex.inverse[t]])
    sim = sim + rng.normal(0, 0.35, sim.shape)
    dist = np.abs((J + 0.5) / ms - (K + 0.5) / mt)
    ortho = np.where(true_pair & lex.cognate[s], 1.0, rng.uniform(0, 0.7, sim.shape)) + rng.normal(0, 0.1, sim.shape)
    sim_bin = _bin(sim, -1.0, 1.0)
    dist_bin = _bin(dist, 0.0, 1.0)
    best_k = sim == sim.max(axis=1, keepdims=True)
    best_j = sim == sim.max(axis=0, keepdims=True)
    cols = [
        np.zeros_like(J),                              # 0 bias
        np.where(in_dict, 1, -1),                      # 1 dictionary pair
        np.where(in_dict, 2 + dist_bin, -1),           # 2..11 dictionary x position
        12 + sim_bin,                                  # 12..21 similarity
        22 + dist_bin,                                 # 22..31 position distance
        32 + _bin(ortho, -0.2, 1.2),                   # 32..41 orthography
        42 + lex.rank_bin[s],                          # 42..51 source frequency
        52 + lex.rank_bin[lex.inverse[t]],             # 52..61 target frequency
        np.where(in_dict, 62 + sim_bin, -1),           # 62..71 dictionary x similarity
        np.where(best_k, 72, -1),                      # 72 best target of j
        np.where(best_j, 73, -1),                      # 73 best source of k
    ]                                                  # 74..81 padding (never set)
    C = np.stack([c.reshape(-1) for c in cols], axis=1)
    rows = np.repeat(np.arange(ms * mt), C.shape[1])
    keep = C.reshape(-1) >= 0
    return sp.csr_matrix((np.ones(keep.sum()), (rows[keep], C.reshape(-1)[keep])), shape=(ms * mt, N_FEATURES))


def make_alignment(n: int = 5000, vocab: int = 2000,
                   random_state: int | None = 0) -> tuple[list[MatchingInput], list[npt.NDArray[np.int64]]]:
    """Synthetic sentence pairs with gold one-to-one partial alignments (module docstring).

    Parameters
    ----------
    n : int >= 1
        Sentence pairs (the BCFW paper's task has 5,000).
    vocab : int >= 10
        Size of each vocabulary.
    random_state : int or None

    Returns
    -------
    X : list of `structfw.models.MatchingInput`
        CSR edge features (m_s * m_t, ``N_FEATURES``) of each pair.
    Y : list of (m_s,) int64 arrays
        y[j] = the target position aligned to source word j, or -1.

    Train with ``MatchingModel(n_features=N_FEATURES)``.
    """
    from ..models.matching import MatchingInput

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    if isinstance(vocab, bool) or not isinstance(vocab, (int, np.integer)) or vocab < 10:
        raise ValueError(f"vocab must be an integer >= 10; got {vocab!r}")
    rng = np.random.default_rng(random_state)
    lex = _Lexicon(rng, int(vocab))
    X, Y = [], []
    for _ in range(int(n)):
        src, tgt, y = _pair(rng, lex)
        feats = _edge_features(rng, lex, src, tgt)
        feats.indptr = feats.indptr.astype(np.int64)
        feats.indices = feats.indices.astype(np.int64)
        X.append(MatchingInput(feats, src.size, tgt.size))
        Y.append(y)
    return X, Y
