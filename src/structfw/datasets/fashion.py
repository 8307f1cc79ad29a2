"""Fashion-MNIST as large binary SVM tasks (the PARTAN paper's scale: >= 50,000 points).

Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, MIT licence): 60,000 training and 10,000 test
grey 28 x 28 images of ten kinds of clothing, stored as IDX files.  Debian packages them:
``apt-get install -y dataset-fashion-mnist`` puts ``train-images-idx3-ubyte.gz``,
``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz``
in ``/usr/share/datasets/fashion-mnist``.  `read_idx` parses an IDX file (plain or gzip)
from the format's definition: two zero bytes, a type code (0x08 unsigned byte, 0x09 signed
byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64), the number of dimensions, each
dimension as a big-endian uint32, then the values, big-endian, in row-major order.

`load_fashion_mnist` scales the pixels and makes binary tasks by pairing classes: all 60,000
training images split into two groups of classes (``pairs="tops"``, ``"even-odd"``), or one
class against another (``pairs=(0, 6)``: T-shirts against shirts, 12,000 images).
"""
from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["load_fashion_mnist", "read_idx", "FASHION_MNIST_DIR", "FASHION_MNIST_CLASSES", "FASHION_PAIRS"]

#: Where Debian's ``dataset-fashion-mnist`` puts the files.
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
#: The ten classes, by label.
FASHION_MNIST_CLASSES: tuple[str, ...] = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                                          "Shirt", "Sneaker", "Bag", "Ankle boot")
#: Named pairings of classes into a positive and a negative group, each using every image:
#: "tops" (garments for the upper body and dresses, 30,000 training images, against the rest)
#: and "even-odd" (labels 0, 2, 4, 6, 8 against 1, 3, 5, 7, 9; the similar pullovers and coats,
#: T-shirts and dresses fall on opposite sides, so it is the harder of the two).
FASHION_PAIRS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "tops": ((0, 2, 3, 4, 6), (1, 5, 7, 8, 9)),
    "even-odd": ((0, 2, 4, 6, 8), (1, 3, 5, 7, 9)),
}
_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
_IDX_TYPES: dict[int, np.dtype[Any]] = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
                                        0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
#: an IDX header may promise at most this many bytes of values (the file is read up to them)
MAX_IDX_BYTES = 1 << 32


def read_idx(path: str | os.PathLike[str]) -> npt.NDArray[Any]:
    """Read an IDX file (the MNIST format), plain or gzip-compressed (``.gz``).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    ndarray
        Of the file's shape; its type in native byte order (uint8 for images and labels).

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not an IDX file (bad magic number, unknown type code, no dimensions), values that
        do not fill the declared shape, trailing bytes or a damaged gzip stream -- naming the
        file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: {str(path)!r} is not a file")
    opener: Any = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(4)
            if len(head) < 4 or head[0] != 0 or head[1] != 0:
                raise ValueError(f"{path}: not an IDX file (the magic number must start with two zero bytes; "
                                 f"got {head.hex() or 'an empty file'})")
            code, ndim = head[2], head[3]
            if code not in _IDX_TYPES:
                raise ValueError(f"{path}: not an IDX file (type code 0x{code:02x}; expected one of "
                                 f"{', '.join(f'0x{c:02x}' for c in _IDX_TYPES)})")
            if ndim == 0:
                raise ValueError(f"{path}: not an IDX file (0 dimensions)")
            raw_dims = fh.read(4 * ndim)
            if len(raw_dims) < 4 * ndim:
                raise ValueError(f"{path}: truncated IDX header ({ndim} dimensions declared, "
                                 f"{len(raw_dims) // 4} present)")
            dims = tuple(int(v) for v in np.frombuffer(raw_dims, ">u4"))
            dtype = _IDX_TYPES[code]
            need = int(np.prod(dims, dtype=object)) * dtype.itemsize
            if need > MAX_IDX_BYTES:
                raise ValueError(f"{path}: the IDX header declares shape {dims}, {need} bytes, more than "
                                 f"MAX_IDX_BYTES = {MAX_IDX_BYTES}")
            body = fh.read(need + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: cannot be read as IDX ({exc})") from None
    if len(body) != need:
        what = "more" if len(body) > need else f"only {len(body)}"
        raise ValueError(f"{path}: the IDX header declares shape {dims} ({need} bytes of values), but the file "
                         f"holds {what} bytes of values")
    return np.frombuffer(body, dtype).astype(dtype.newbyteorder("="), copy=True).reshape(dims)


def _group(value: Any, where: str) -> tuple[int, ...]:
    """A class or a group of classes (ids 0..9 or names) as a tuple of ids."""
    items = [value] if isinstance(value, (int, np.integer, str)) else value
    try:
        items = list(items)
    except TypeError:
        raise ValueError(f"{where} must be a class (0..9 or a name) or a list of classes; got {value!r}") from None
    out = []
    for c in items:
        if isinstance(c, str):
            if c not in FASHION_MNIST_CLASSES:
                raise ValueError(f"{where}: unknown class {c!r}; the classes are {list(FASHION_MNIST_CLASSES)}")
            out.append(FASHION_MNIST_CLASSES.index(c))
        elif isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c <= 9:
            out.append(int(c))
        else:
            raise ValueError(f"{where}: a class must be 0..9 or a class name; got {c!r}")
    if not out:
        raise ValueError(f"{where} names no class")
    return tuple(out)


def _check_pairs(pairs: Any) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    if pairs is None:
        return None
    if isinstance(pairs, str):
        if pairs not in FASHION_PAIRS:
            raise ValueError(f"pairs must be None, one of {list(FASHION_PAIRS)} or (positive, negative) classes; "
                             f"got {pairs!r}")
        return FASHION_PAIRS[pairs]
    if not isinstance(pairs, Sequence) or len(pairs) != 2:
        raise ValueError(f"pairs must be None, one of {list(FASHION_PAIRS)} or a pair (positive, negative) of "
                         f"classes or class groups, e.g. (0, 6) or ((0, 2), (4,)); got {pairs!r}")
    pos, neg = _group(pairs[0], "pairs[0]"), _group(pairs[1], "pairs[1]")
    both = set(pos) & set(neg)
    if both:
        raise ValueError(f"pairs: classes {sorted(both)} are on both sides")
    return pos, neg


def load_fashion_mnist(path: str | os.PathLike[str] | None = None, split: str = "train", pairs: Any = "tops",
                       scale: str | None = "unit", dtype: npt.DTypeLike = np.float64,
                       n: int | None = None) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
    """Fashion-MNIST images as rows of X, with binary (+1 / -1) or class labels.

    Parameters
    ----------
    path : str or Path, optional
        The folder of the four IDX files (``train-images-idx3-ubyte.gz``, ...; the unpacked
        names without ``.gz`` are read too).  Default `FASHION_MNIST_DIR`, where
        ``apt-get install -y dataset-fashion-mnist`` puts them.
    split : {"train", "test", "all"}
        60,000 training images, the 10,000 test images, or both (train first).
    pairs : str, pair or None
        The binary task: a name of `FASHION_PAIRS` (``"tops"``, default, or ``"even-odd"``:
        every image, two groups of five classes), or ``(positive, negative)`` where each side
        is a class (0..9 or a name of `FASHION_MNIST_CLASSES`) or a list of classes -- the
        images of other classes are left out (``(0, 6)``: T-shirt/top against Shirt).  None:
        all images with their class labels 0..9.
    scale : {"unit", "symmetric", None}
        Pixels / 255 in [0, 1] (default), 2 pixels / 255 - 1 in [-1, 1] (as LIBSVM's scaled
        sets), or the raw 0..255 values.
    dtype : numpy dtype
        Of X (float64 by default; float32 halves the 376 MB of the 60,000 training images).
    n : int, optional
        Keep the first n images of the task (in file order).

    Returns
    -------
    X : ndarray (m, 784)
        One flattened 28 x 28 image per row.
    y : ndarray (m,) int64
        +1 / -1 with ``pairs``, else the class 0..9.

    Raises
    ------
    FileNotFoundError
        The files are not there; the message says to install ``dataset-fashion-mnist``.
    ValueError
        Bad arguments, or files that are not IDX or do not match (image and label counts,
        28 x 28 images, labels 0..9) -- naming the file.
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all'; got {split!r}")
    if scale not in ("unit", "symmetric", None):
        raise ValueError(f"scale must be 'unit', 'symmetric' or None; got {scale!r}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
        raise ValueError(f"n must be a positive integer or None; got {n!r}")
    groups = _check_pairs(pairs)
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a folder (str or Path) or None; got {type(path).__name__}")
    folder = FASHION_MNIST_DIR if path is None else Path(path)
    images, labels = [], []
    for part in (("train", "test") if split == "all" else (split,)):
        img, lab = (_find(folder, name) for name in _FILES[part])
        Xi, yi = read_idx(img), read_idx(lab)
        if Xi.ndim != 3 or Xi.shape[1:] != (28, 28) or Xi.dtype != np.uint8:
            raise ValueError(f"{img}: expected uint8 images of shape (m, 28, 28); got {Xi.dtype} {Xi.shape}")
        if yi.ndim != 1 or yi.shape[0] != Xi.shape[0] or yi.dtype != np.uint8:
            raise ValueError(f"{lab}: expected {Xi.shape[0]} uint8 labels (one per image of {img.name}); "
                             f"got {yi.dtype} {yi.shape}")
        if yi.size and yi.max() > 9:
            raise ValueError(f"{lab}: labels must be 0..9; found {int(yi.max())}")
        images.append(Xi.reshape(Xi.shape[0], -1))
        labels.append(yi.astype(np.int64))
    X8 = np.concatenate(images) if len(images) > 1 else images[0]
    y = np.concatenate(labels) if len(labels) > 1 else labels[0]
    if groups is not None:
        pos, neg = groups
        keep = np.isin(y, pos + neg)
        X8, y = X8[keep], np.where(np.isin(y[keep], pos), 1, -1).astype(np.int64)
    if n is not None:
        X8, y = X8[:n], y[:n]
    if scale is None:
        X = X8.astype(dtype)
    else:
        X = X8.astype(dtype)
        X *= 1.0 / 255.0 if scale == "unit" else 2.0 / 255.0
        if scale == "symmetric":
            X -= 1.0
    return np.ascontiguousarray(X), np.ascontiguousarray(y)


def _find(folder: Path, name: str) -> Path:
    for candidate in (folder / (name + ".gz"), folder / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"Fashion-MNIST file {name}.gz (or {name}) not found in {folder}: install Debian's package "
        "(apt-get install -y dataset-fashion-mnist, which puts the files in "
        f"{FASHION_MNIST_DIR}), or pass path= the folder of your own copy")
