"""Loaders for the data sets bundled inside the package (``datasets/data/*.npz``)."""
from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, overload

import numpy as np
import numpy.typing as npt

DATA_DIR = Path(__file__).resolve().parent / "data"
OCR_N_FOLDS = 10
OCR_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


@functools.lru_cache(maxsize=1)
def _ocr_arrays() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64],
                           npt.NDArray[np.int64], npt.NDArray[np.int64], np.ndarray | None]:
    """Decoded OCR arrays (cached; never hand these out without copying)."""
    with np.load(DATA_DIR / "ocr.npz") as d:
        pixels = np.unpackbits(d["pixels"], axis=1).astype(np.float64)  # (52152, 128)
        labels = d["labels"].astype(np.int64)
        lengths = d["lengths"].astype(np.int64)
        folds = d["folds"].astype(np.int64)
        words = d["words"] if "words" in d.files else None
    pixels.setflags(write=False)
    labels.setflags(write=False)
    starts = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    return pixels, labels, lengths, folds, starts, words


def _check_split(split: object, allowed: tuple[str, ...]) -> None:
    if not isinstance(split, str) or split not in allowed:
        raise ValueError(f"split must be one of {allowed}, got {split!r}")


@overload
def load_ocr(split: str = ..., fold: int = ...,
             return_words: Literal[False] = ...) -> tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.int64]]]:
    ...


@overload
def load_ocr(split: str = ..., fold: int = ..., *, return_words: Literal[True]
             ) -> tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.int64]], list[str] | None]:
    ...


@overload
def load_ocr(split: str = ..., fold: int = ..., return_words: bool = ...
             ) -> (tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.int64]]]
                   | tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.int64]], list[str] | None]):
    ...


def load_ocr(split: str = "train", fold: int = 0, return_words: bool = False
             ) -> (tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.int64]]]
                   | tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.int64]], list[str] | None]):
    """The OCR handwritten-letters sequence labelling set (Taskar et al. 2003).

    6,877 words (52,152 letters), each letter a 16x8 binary image flattened to 128
    pixels (row-major), 26 classes 'a'..'z' (0..25); the capital first letter of
    every word is left out.  Bundled inside the package.

    Parameters
    ----------
    split : {"train", "test", "all"}
        "train": every fold but ``fold`` (n = 6,251 words for fold 0, the split of
        the BCFW paper); "test": fold ``fold`` (626 words for fold 0); "all": all words.
    fold : int in 0..9
        The held-out fold.
    return_words : bool
        Also return the words' text (list of str) as a third value.

    Returns
    -------
    X : list of ndarray, float64, shape (L_i, 128), C-contiguous
    Y : list of ndarray, int64, shape (L_i,), values in 0..25
    words : list of str (only when ``return_words``; None when the bundled file holds no words)

    The arrays are fresh copies: modifying them does not affect later calls.
    """
    _check_split(split, ("train", "test", "all"))
    if isinstance(fold, bool) or not isinstance(fold, (int, np.integer)) or not (
        0 <= fold < OCR_N_FOLDS
    ):
        raise ValueError(f"fold must be an integer in 0..{OCR_N_FOLDS - 1}, got {fold!r}")
    pixels, labels, lengths, folds, starts, words = _ocr_arrays()
    if split == "train":
        sel = np.flatnonzero(folds != fold)
    elif split == "test":
        sel = np.flatnonzero(folds == fold)
    else:
        sel = np.arange(len(lengths))
    # one copy of the selected rows, then per-word views into it (C-contiguous)
    rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in sel])
    P = pixels[rows]
    Lab = labels[rows]
    b = np.zeros(len(sel) + 1, np.int64)
    np.cumsum(lengths[sel], out=b[1:])
    X = [P[b[k]:b[k + 1]] for k in range(len(sel))]
    Y = [Lab[b[k]:b[k + 1]] for k in range(len(sel))]
    if return_words:
        W = [str(words[i]) for i in sel] if words is not None else None
        return X, Y, W
    return X, Y


@functools.lru_cache(maxsize=1)
def _snakes_arrays() -> dict[str, np.ndarray]:
    with np.load(DATA_DIR / "snakes.npz") as d:
        return {k: np.asarray(d[k]) for k in d.files}


def load_snakes(split: str = "train") -> tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.int64]]]:
    """The "snakes" 2-D grid labelling set (Nowozin et al., ICCV 2011).

    200 train and 100 test grids of about 5-7 x 5-6 cells; every cell has an RGB
    colour and one of 11 labels (0 = background, 1..10 = the snake's segments in
    order).  Bundled inside the package.

    Parameters
    ----------
    split : {"train", "test"}

    Returns
    -------
    X : list of ndarray, float64, shape (h_i, w_i, 3)
        Cell colours scaled to [0, 1] (the input format of
        `structfw.models.GridModel` with ``n_features=3``; see
        `snakes_one_hot` for a more useful feature map).
    Y : list of ndarray, int64, shape (h_i, w_i), values in 0..10
    """
    _check_split(split, ("train", "test"))
    d = _snakes_arrays()
    Xc, Yc, shapes = d[f"X_{split}"], d[f"Y_{split}"], d[f"shapes_{split}"]
    X, Y = [], []
    pos = 0
    for h, w in shapes:
        n = int(h) * int(w)
        X.append(Xc[pos:pos + n].reshape(h, w, 3).astype(np.float64) / 255.0)
        Y.append(Yc[pos:pos + n].reshape(h, w).astype(np.int64))
        pos += n
    return X, Y


def snakes_one_hot(X: Iterable[npt.ArrayLike], add_bias: bool = True) -> list[npt.NDArray[np.float64]]:
    """Turn snakes colour grids into one-hot colour features (plus a bias).

    The snake segments are drawn in a small set of distinct colours; a linear unary
    model works much better on an indicator of the colour than on raw RGB.  The
    palette is the set of distinct colours of the *training* grids.

    Returns a list of (h, w, n_colours [+1]) float64 arrays.
    """
    d = _snakes_arrays()
    palette = np.unique(d["X_train"], axis=0).astype(np.float64) / 255.0
    out = []
    for x in X:
        x = np.asarray(x, dtype=np.float64)
        cells = x.reshape(-1, 3)
        dist = ((cells[:, None, :] - palette[None, :, :]) ** 2).sum(-1)
        k = dist.argmin(1)
        f = np.zeros((cells.shape[0], len(palette) + int(add_bias)))
        f[np.arange(cells.shape[0]), k] = 1.0
        if add_bias:
            f[:, -1] = 1.0
        out.append(f.reshape(x.shape[0], x.shape[1], -1))
    return out
