"""Reading svmlight / LIBSVM text files (multiclass model, binary SVM).

A data file is untrusted input, and its memory is bounded by its size: the number of
features d is the largest feature id (+1 when ids are zero-based), which a single line can
make arbitrarily large, and every model allocates d (times the classes) floats for w.  So
d may be at most `feature_limit` of the file's non-zeros -- ``max(MAX_FEATURES_FLOOR,
FEATURES_PER_NONZERO * nnz)`` -- or the ``n_features`` given; a larger id is a ValueError
naming the line and the id, unless ``remap_features=True`` renumbers the ids that occur
(0..k-1, k <= nnz) and returns the mapping.  Feature ids are read as int64 (ids >= 2^31
are ids, not a crash).  Values are float64: 1e150 is a value; a literal nan/inf or a value
that overflows float64 (1e400) is a ValueError naming the line.  X stays sparse unless
``dense=True`` asks for an array, which is refused when it would hold more than
`MAX_DENSE_ENTRIES` entries and ``DENSE_PER_NONZERO`` per non-zero.

The LIBSVM binary sets (a9a, w8a, ijcnn1, ...) read as they are distributed: one-based ids,
``+1`` / ``-1`` labels, trailing spaces, ``.gz`` / ``.bz2`` / ``.xz`` compression (a malformed
line of a compressed file is named like a plain one's).  `load_svmlight_pair` reads a training
file and its test file with the same columns (a9a.t lacks a9a's last feature) and the same
base of ids, and can map the labels of any two-class file to -1 / +1.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast, overload

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import scipy.sparse as sp

    #: X as returned: a dense ndarray or a CSR matrix
    SvmlightX: TypeAlias = "npt.NDArray[Any] | sp.csr_matrix"
    #: (X, y, feature_ids) of remap_features=True
    SvmlightRemapped: TypeAlias = "tuple[SvmlightX, npt.NDArray[np.float64], npt.NDArray[np.int64]]"

#: d is always allowed up to this many features (w of 2^20 float64 is 8 MiB per class)
MAX_FEATURES_FLOOR = 1 << 20
#: beyond the floor, d may grow with the file: this many features per stored non-zero
FEATURES_PER_NONZERO = 16
#: a dense X is built only up to this many entries ...
MAX_DENSE_ENTRIES = 1 << 25
#: ... or this many entries per stored non-zero, whichever is larger
DENSE_PER_NONZERO = 64


def feature_limit(nnz: int) -> int:
    """The largest number of features a file with ``nnz`` stored non-zeros may declare."""
    return max(MAX_FEATURES_FLOOR, FEATURES_PER_NONZERO * int(nnz))


@overload
def load_svmlight(path: str | os.PathLike[str], n_features: int | None = ..., dense: bool = ...,
                  zero_based: bool | Literal["auto"] = ..., dtype: npt.DTypeLike | None = ...,
                  remap_features: Literal[False] = ...) -> tuple[SvmlightX, npt.NDArray[np.float64]]: ...


@overload
def load_svmlight(path: str | os.PathLike[str], n_features: int | None = ..., dense: bool = ...,
                  zero_based: bool | Literal["auto"] = ..., dtype: npt.DTypeLike | None = ..., *,
                  remap_features: Literal[True]) -> SvmlightRemapped: ...


@overload
def load_svmlight(path: str | os.PathLike[str], n_features: int | None = ..., dense: bool = ...,
                  zero_based: bool | Literal["auto"] = ..., dtype: npt.DTypeLike | None = ...,
                  remap_features: bool = ...) -> (tuple[SvmlightX, npt.NDArray[np.float64]]
                                                  | SvmlightRemapped): ...


def load_svmlight(path: str | os.PathLike[str], n_features: int | None = None, dense: bool = True,
                  zero_based: bool | Literal["auto"] = "auto", dtype: npt.DTypeLike | None = None,
                  remap_features: bool = False) -> (tuple[SvmlightX, npt.NDArray[np.float64]]
                                                    | SvmlightRemapped):
    """Read an svmlight/LIBSVM file, in memory bounded by the file's size.

    Parameters
    ----------
    path : str or Path
    n_features : int, optional
        Number of features (needed when a test file lacks the last features).  A feature
        id beyond it is an error (or, with ``remap_features``, fails the same way).
    dense : bool
        Return X as a dense float64 ndarray (default) instead of a CSR matrix.  Refused
        (ValueError) when n_samples * n_features exceeds ``max(MAX_DENSE_ENTRIES,
        DENSE_PER_NONZERO * nnz)``: pass ``dense=False`` for wide sparse data.
    zero_based : bool or "auto"
        Whether feature ids start at 0; "auto": zero-based if an id 0 occurs.
    dtype : numpy dtype, optional
        Of X (default float64).
    remap_features : bool
        Renumber the feature ids that occur as columns 0..k-1 (in increasing id order) and
        also return their original ids; for files whose ids are sparse hashes or exceed
        `feature_limit`.

    Returns
    -------
    X : ndarray (n_samples, n_features) or scipy.sparse.csr_matrix
    y : ndarray (n_samples,)  (labels as stored in the file, float64)
    feature_ids : ndarray of int64, only with ``remap_features=True``
        The file's id of each column of X (as written in the file).

    Raises
    ------
    ValueError
        Not a file, not svmlight text, a non-finite or overflowing value, or a feature id
        making d exceed the limit or ``n_features`` -- naming the file, the line and the id.
    """
    import scipy.sparse as sp

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path {str(path)!r} is not a file")
    if n_features is not None:
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1:
            raise ValueError(f"n_features must be a positive integer; got {n_features!r}")
        n_features = int(n_features)
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto'; got {zero_based!r}")
    fast = None if remap_features else _parse_fast(path, zero_based)
    if fast is not None:
        X, y = fast
        limit = n_features if n_features is not None else feature_limit(X.nnz)
        if X.shape[1] <= limit and np.isfinite(X.data).all() and np.isfinite(y).all():
            d = X.shape[1] if n_features is None else n_features
            X = sp.csr_matrix((X.data.astype(dtype or np.float64), X.indices.astype(np.int64), X.indptr),
                              shape=(X.shape[0], d))
            return _maybe_dense(X, y, dense, X.nnz, path)
    # an error to locate, ids beyond int32 or a remap: the line-by-line reader (slower, exact messages)
    data, ids, indptr, y, lines = _parse(path)
    nnz = data.shape[0]
    one_based = not zero_based if zero_based != "auto" else not (ids.size and ids.min() == 0)
    if one_based and ids.size and ids.min() < 1:
        j = int(np.argmin(ids))
        raise ValueError(f"{path}: feature id {int(ids[j])} on line {_line_of(lines, indptr, j)} is below 1 "
                         "(the ids are one-based: zero_based=False)")
    cols = ids - 1 if one_based else ids
    feature_ids: npt.NDArray[np.int64] | None = None
    if remap_features:
        feature_ids, cols = np.unique(ids, return_inverse=True)
        d = feature_ids.shape[0] if n_features is None else n_features
        if feature_ids.shape[0] > d:
            raise ValueError(f"{path}: {feature_ids.shape[0]} distinct feature ids, more than "
                             f"n_features={n_features}")
    else:
        limit = n_features if n_features is not None else feature_limit(nnz)
        need = int(cols.max()) + 1 if cols.size else 1
        if need > limit:
            j = int(np.argmax(cols >= limit))
            why = (f"n_features={n_features}" if n_features is not None else
                   f"the limit of {limit} features for a file of {nnz} non-zeros (max({MAX_FEATURES_FLOOR}, "
                   f"{FEATURES_PER_NONZERO} per non-zero))")
            raise ValueError(f"{path}: feature id {int(ids[j])} on line {_line_of(lines, indptr, j)} makes "
                             f"{need} features, more than {why}; pass remap_features=True to renumber the ids "
                             "that occur, or n_features")
        d = need if n_features is None else n_features
    X = sp.csr_matrix((data.astype(dtype or np.float64), cols.astype(np.int64), indptr), shape=(len(y), d))
    X, y = _maybe_dense(X, y, dense, nnz, path)
    # remap_features set feature_ids above
    return (X, y, cast("npt.NDArray[np.int64]", feature_ids)) if remap_features else (X, y)


def _maybe_dense(X: Any, y: npt.NDArray[np.float64], dense: bool, nnz: int,
                 path: Path) -> tuple[SvmlightX, npt.NDArray[np.float64]]:
    if dense:
        entries = X.shape[0] * X.shape[1]
        allowed = max(MAX_DENSE_ENTRIES, DENSE_PER_NONZERO * nnz)
        if entries > allowed:
            raise ValueError(f"{path}: a dense X of {X.shape[0]} x {X.shape[1]} ({entries * 8 / 2 ** 30:.1f} GiB) "
                             f"is more than {allowed} entries for {nnz} non-zeros; pass dense=False")
        X = np.ascontiguousarray(X.toarray())
    return X, y


def _parse_fast(path: Path, zero_based: bool | Literal["auto"]) -> tuple[Any, npt.NDArray[np.float64]] | None:
    """scikit-learn's compiled reader, or None when the file needs the exact one (ids beyond int32, a
    malformed line to name).  Its CSR is as large as the file; only d is checked by the caller."""
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    try:
        return load_svmlight_file(str(path), dtype=np.float64, zero_based=zero_based)
    except (ValueError, OverflowError, UnicodeDecodeError, RuntimeError, TypeError, EOFError, OSError):
        return None  # (EOFError, OSError: a damaged compressed file, named by the exact reader)


def _line_of(lines: npt.NDArray[np.int64], indptr: npt.NDArray[np.int64], j: int) -> int:
    """The file line of stored entry j."""
    return int(lines[np.searchsorted(indptr, j, side="right") - 1])


def _parse(path: Path) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64],
                             npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """(values, int64 ids as written, indptr, labels, line number of each row).

    Line by line, so that an error names its line; ids are Python ints checked against
    int64, values Python floats checked for overflow."""
    data: list[float] = []
    ids: list[int] = []
    indptr = [0]
    labels: list[float] = []
    lines: list[int] = []
    big = np.iinfo(np.int64).max
    try:
        fh = _open_text(path)
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None
    with fh:
        lineno = 0
        try:
            for lineno, raw in _lines(fh, path):
                line = raw.split("#", 1)[0].split()
                if not line:
                    continue
                labels.append(_number(line[0], path, lineno, "label"))
                prev = None
                for tok in line[1:]:
                    key, sep, val = tok.partition(":")
                    if not sep:
                        raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno}: {tok[:40]!r} is not "
                                         "id:value)")
                    if key == "qid":
                        continue
                    try:
                        fid = int(key)
                    except ValueError:
                        raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno}: feature id "
                                         f"{key[:40]!r} is not an integer)") from None
                    if not -big <= fid <= big:
                        raise ValueError(f"{path}: feature id {key[:40]} on line {lineno} is beyond int64")
                    if prev is not None and fid <= prev:
                        raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno}: feature ids must "
                                         f"increase; {fid} follows {prev})")
                    prev = fid
                    ids.append(fid)
                    data.append(_number(val, path, lineno, "value", f" (feature {fid})"))
                indptr.append(len(ids))
                lines.append(lineno)
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno + 1} is not UTF-8 text)") from None
    if not labels:
        raise ValueError(f"{path}: not an svmlight/LIBSVM file (no examples)")
    return (np.asarray(data, np.float64), np.asarray(ids, np.int64), np.asarray(indptr, np.int64),
            np.asarray(labels, np.float64), np.asarray(lines, np.int64))


def _open_text(path: Path) -> Any:
    """The file as text: ``.gz``, ``.bz2`` and ``.xz`` are decompressed (as scikit-learn's reader
    does), so that a malformed line of a compressed LIBSVM file is named like a plain one's."""
    suffix = path.suffix.lower()
    if suffix == ".gz":
        import gzip

        return gzip.open(path, "rt", encoding="utf-8")
    if suffix == ".bz2":
        import bz2

        return bz2.open(path, "rt", encoding="utf-8")
    if suffix == ".xz":
        import lzma

        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _lines(fh: Any, path: Path) -> Any:
    """(line number, line) of an open file; a damaged compressed stream is a ValueError."""
    import zlib

    lineno = 0
    it = iter(fh)
    while True:
        try:
            raw = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError:
            raise
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            raise ValueError(f"{path}: cannot be read after line {lineno} ({exc})") from None
        lineno += 1
        yield lineno, raw


def load_svmlight_pair(train: str | os.PathLike[str], test: str | os.PathLike[str], *,
                       n_features: int | None = None, dense: bool = False,
                       zero_based: bool | Literal["auto"] = "auto", binary: bool = False,
                       dtype: npt.DTypeLike | None = None) -> tuple[Any, npt.NDArray[Any], Any, npt.NDArray[Any]]:
    """Read a LIBSVM training file and its test file (a9a / a9a.t, w8a / w8a.t, ijcnn1 / ijcnn1.t).

    Both get the same columns: a test file often lacks the last features (a9a.t's largest id
    is 122, a9a's 123), so X_test gets the width of the wider file (or ``n_features``), and
    ``zero_based="auto"`` is decided for the two files together (zero-based only if an id 0
    occurs in either), never one way for one file and the other way for the other.

    Parameters
    ----------
    train, test : str or Path
        svmlight/LIBSVM text files (``.gz``, ``.bz2``, ``.xz`` are read compressed).
    n_features : int, optional
        The width of both; a feature id beyond it is a ValueError naming the file and line.
        Default: the larger of the two files' widths.
    dense : bool
        Dense arrays instead of CSR matrices (default False: LIBSVM sets are often wide).
    zero_based : bool or "auto"
        Whether ids start at 0; "auto" decides it for both files together.
    binary : bool
        Map the labels to -1 / +1: the training file must hold exactly two label values
        (``-1/+1``, ``0/1``, ``1/2``, ...); the larger becomes +1.  A test label that is neither
        is a ValueError naming the test file.
    dtype : numpy dtype, optional
        Of X (default float64).

    Returns
    -------
    X_train, y_train, X_test, y_test
        X as CSR matrices (or arrays with ``dense=True``), y float64 (int64 -1 / +1 with
        ``binary``).
    """
    import scipy.sparse as sp

    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto'; got {zero_based!r}")
    if zero_based == "auto":
        # read as written (ids = columns), and call it one-based unless some file has an id 0
        parts: list[tuple[Any, npt.NDArray[np.float64]]] = [
            load_svmlight(p, dense=False, zero_based=True, dtype=dtype) for p in (train, test)]
        zero_based = any(X.nnz and int(X.indices.min()) == 0 for X, _ in parts)
        if not zero_based:  # column 0 is empty in both: drop it
            parts = [(sp.csr_matrix((X.data, X.indices - 1, X.indptr), shape=(X.shape[0], max(X.shape[1] - 1, 1))), y)
                     for X, y in parts]
    else:
        parts = [load_svmlight(p, dense=False, zero_based=zero_based, dtype=dtype) for p in (train, test)]
    widths = [X.shape[1] for X, _ in parts]
    if n_features is None:
        d = max(widths)
    else:
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1:
            raise ValueError(f"n_features must be a positive integer; got {n_features!r}")
        d = int(n_features)
        for p, w in zip((train, test), widths):
            if w > d:  # the exact error, naming the line
                load_svmlight(p, n_features=d, dense=False, zero_based=zero_based)
    out: list[Any] = []
    for p, (X, y) in zip((train, test), parts):
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
        if dense:
            X, y = _maybe_dense(X, y, True, X.nnz, Path(p))
        out += [X, y]
    if binary:
        values = np.unique(out[1])
        if values.shape[0] != 2:
            raise ValueError(f"{train}: binary=True needs exactly two label values in the training file; found "
                             f"{values.shape[0]}: {values[:10].tolist()}")
        bad = ~np.isin(out[3], values)
        if bad.any():
            raise ValueError(f"{test}: label {out[3][np.argmax(bad)]:g} is not one of the training labels "
                             f"{values.tolist()}")
        out[1] = np.where(out[1] == values[1], 1, -1).astype(np.int64)
        out[3] = np.where(out[3] == values[1], 1, -1).astype(np.int64)
    return out[0], out[1], out[2], out[3]


def _number(tok: str, path: Path, lineno: int, what: str, where: str = "") -> float:
    try:
        v = float(tok)
    except ValueError:
        raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno}: {what} {tok[:40]!r} is not a "
                         "number)") from None
    if not math.isfinite(v):
        if tok.strip().lstrip("+-").lower() in ("nan", "inf", "infinity"):
            raise ValueError(f"{path}: non-finite {what} {tok[:40]}{where} on line {lineno}")
        raise ValueError(f"{path}: {what} {tok[:40]}{where} on line {lineno} overflows float64 (non-finite)")
    return v
