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

The text itself is bounded too, and read piecewise (`_CHUNK` bytes at a time), so that a bound
is found as soon as that many bytes are read, not after the whole stream: a line may hold at
most ``max_line_bytes`` bytes (`MAX_LINE_BYTES`, 64 MiB), and a compressed file may inflate to
at most ``max_decompressed_bytes`` bytes of text -- by default `decompressed_limit` of its size
on disk, ``max(MAX_DECOMPRESSED_FLOOR, DECOMPRESSED_PER_BYTE * size)`` (64 MiB, or 100 times the
file: LIBSVM text deflates 2-20x, a crafted stream up to ~1000x for gzip and far more for bz2 /
xz).  Either is a ValueError naming the file, the limit (and the line).  The text must be UTF-8:
a byte that is not is a ValueError naming the file and its line.

The LIBSVM binary sets (a9a, w8a, ijcnn1, ...) read as they are distributed: one-based ids,
``+1`` / ``-1`` labels, trailing spaces, ``.gz`` / ``.bz2`` / ``.xz`` compression (a malformed
line of a compressed file is named like a plain one's).  `load_svmlight_pair` reads a training
file and its test file with the same columns (a9a.t lacks a9a's last feature) and the same
base of ids, and can map the labels of any two-class file to -1 / +1.
"""
from __future__ import annotations

import lzma
import math
import os
import re
import zlib
from array import array
from collections.abc import Iterator
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
#: the longest line a file may hold, in bytes (without its newline)
MAX_LINE_BYTES = 1 << 26
#: a compressed file may always inflate to this many bytes of text ...
MAX_DECOMPRESSED_FLOOR = 1 << 26
#: ... and beyond the floor to this many times its size on disk
DECOMPRESSED_PER_BYTE = 100
#: the (decompressed) stream is read in pieces of this many bytes: a bound is found within one piece
_CHUNK = 1 << 20
#: the compressions read, by suffix
_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}


def feature_limit(nnz: int) -> int:
    """The largest number of features a file with ``nnz`` stored non-zeros may declare."""
    return max(MAX_FEATURES_FLOOR, FEATURES_PER_NONZERO * int(nnz))


def decompressed_limit(compressed_bytes: int) -> int:
    """The most bytes of text a compressed file of ``compressed_bytes`` bytes may inflate to
    (the default ``max_decompressed_bytes``)."""
    return max(MAX_DECOMPRESSED_FLOOR, DECOMPRESSED_PER_BYTE * int(compressed_bytes))


@overload
def load_svmlight(path: str | os.PathLike[str], n_features: int | None = ..., dense: bool = ...,
                  zero_based: bool | Literal["auto"] = ..., dtype: npt.DTypeLike | None = ...,
                  remap_features: Literal[False] = ..., *, max_decompressed_bytes: int | None = ...,
                  max_line_bytes: int = ...) -> tuple[SvmlightX, npt.NDArray[np.float64]]: ...


@overload
def load_svmlight(path: str | os.PathLike[str], n_features: int | None = ..., dense: bool = ...,
                  zero_based: bool | Literal["auto"] = ..., dtype: npt.DTypeLike | None = ..., *,
                  remap_features: Literal[True], max_decompressed_bytes: int | None = ...,
                  max_line_bytes: int = ...) -> SvmlightRemapped: ...


@overload
def load_svmlight(path: str | os.PathLike[str], n_features: int | None = ..., dense: bool = ...,
                  zero_based: bool | Literal["auto"] = ..., dtype: npt.DTypeLike | None = ...,
                  remap_features: bool = ..., *, max_decompressed_bytes: int | None = ...,
                  max_line_bytes: int = ...) -> (tuple[SvmlightX, npt.NDArray[np.float64]]
                                                 | SvmlightRemapped): ...


def load_svmlight(path: str | os.PathLike[str], n_features: int | None = None, dense: bool = True,
                  zero_based: bool | Literal["auto"] = "auto", dtype: npt.DTypeLike | None = None,
                  remap_features: bool = False, *, max_decompressed_bytes: int | None = None,
                  max_line_bytes: int = MAX_LINE_BYTES) -> (tuple[SvmlightX, npt.NDArray[np.float64]]
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
    max_decompressed_bytes : int, optional
        For a ``.gz`` / ``.bz2`` / ``.xz`` file: the most bytes of text it may inflate to.
        Default `decompressed_limit` of its size, ``max(MAX_DECOMPRESSED_FLOOR,
        DECOMPRESSED_PER_BYTE * size)`` (64 MiB, or 100 times the compressed file); pass a
        larger bound for a file that compresses better.  Not used for uncompressed files,
        whose size on disk bounds them.
    max_line_bytes : int
        The most bytes a line may hold, without its newline (default `MAX_LINE_BYTES`,
        64 MiB).

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
        A line longer than ``max_line_bytes``, more decompressed text than
        ``max_decompressed_bytes``, a damaged compressed stream or a byte that is not UTF-8 --
        naming the file, the bound and the line; found as soon as the bound is passed (within
        1 MiB more of reading).
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
    stream = _Lines(path, _text_bound(path, max_decompressed_bytes),
                    _positive_int(max_line_bytes, "max_line_bytes"))
    fast = None if remap_features else _parse_fast(stream, zero_based)
    if fast is not None:
        X, y = fast
        limit = n_features if n_features is not None else feature_limit(X.nnz)
        if X.shape[1] <= limit and np.isfinite(X.data).all() and np.isfinite(y).all():
            d = X.shape[1] if n_features is None else n_features
            X = sp.csr_matrix((X.data.astype(dtype or np.float64), X.indices.astype(np.int64), X.indptr),
                              shape=(X.shape[0], d))
            return _maybe_dense(X, y, dense, X.nnz, path)
    # an error to locate, ids beyond int32 or a remap: the line-by-line reader (slower, exact messages)
    data, ids, indptr, y, lines = _parse(path, stream)
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


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def _text_bound(path: Path, max_decompressed_bytes: object) -> int | None:
    """The most bytes of text the file may give: None for an uncompressed file."""
    if path.suffix.lower() not in _COMPRESSED:
        if max_decompressed_bytes is not None:
            _positive_int(max_decompressed_bytes, "max_decompressed_bytes")
        return None
    if max_decompressed_bytes is None:
        return decompressed_limit(path.stat().st_size)
    return _positive_int(max_decompressed_bytes, "max_decompressed_bytes")


class _Unreadable(ValueError):
    """A file refused while it is read (a bound passed, a damaged stream, not UTF-8): the exact
    reader would refuse it the same way, so the fast reader's failure is final."""


def _open_binary(path: Path) -> Any:
    """The file's (decompressed) bytes: ``.gz``, ``.bz2`` and ``.xz`` by their suffix."""
    kind = _COMPRESSED.get(path.suffix.lower())
    if kind == "gzip":
        import gzip

        return gzip.open(path, "rb")
    if kind == "bz2":
        import bz2

        return bz2.open(path, "rb")
    if kind == "xz":
        return lzma.open(path, "rb")
    return open(path, "rb")


class _Lines:
    """The lines of an svmlight file as bytes (without their newlines), read under the bounds.

    Each iteration reads the (decompressed) stream anew, in pieces of `_CHUNK` bytes, so that a
    line longer than ``max_line`` or a stream of more than ``max_bytes`` bytes is a ValueError
    once that many bytes are read -- not after a gigabyte-long line has been built -- and checks
    every piece of whole lines as UTF-8, so that a bad byte is named by its own line.  The two
    readers iterate the same object, so they see the same lines and refuse a file alike.
    """

    def __init__(self, path: Path, max_bytes: int | None, max_line: int) -> None:
        self.path, self.max_bytes, self.max_line = path, max_bytes, max_line
        self.kind = _COMPRESSED.get(path.suffix.lower())

    def read(self, size: int = -1) -> bytes:
        """Never used: present because scikit-learn's reader takes an object with ``read`` as a
        file, and then only iterates over it (from offset 0)."""
        raise OSError("an svmlight stream is read by iterating over its lines")

    def __iter__(self) -> Iterator[bytes]:
        try:
            fh = _open_binary(self.path)
        except OSError as exc:
            raise _Unreadable(f"{self.path}: cannot be read ({exc})") from None
        with fh:
            yield from self._lines(fh)

    def _lines(self, fh: Any) -> Iterator[bytes]:
        lineno = total = 0
        partial: list[bytes] = []  # the pieces of the line being read
        partial_len = 0
        while piece := self._piece(fh, lineno):
            total += len(piece)
            if self.max_bytes is not None and total > self.max_bytes:
                raise _Unreadable(self._too_much_text())
            cut = piece.rfind(b"\n") + 1
            if cut:
                block = b"".join([*partial, piece[:cut]]) if partial else piece[:cut]
                rest = piece[cut:]
                partial, partial_len = ([rest], len(rest)) if rest else ([], 0)
                lines = block.split(b"\n")
                del lines[-1]  # the empty string after the block's last newline
                self._check(block, lines, lineno)
                lineno += len(lines)
                yield from lines
            else:
                partial.append(piece)
                partial_len += len(piece)
            if partial_len > self.max_line:
                raise _Unreadable(self._too_long(lineno + 1))
        if partial:  # a last line without a newline
            block = b"".join(partial)
            self._check(block, [block], lineno)
            yield block

    def _piece(self, fh: Any, lineno: int) -> bytes:
        try:
            return cast(bytes, fh.read(_CHUNK))
        except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
            what = f"a damaged {self.kind} stream: " if self.kind else ""
            raise _Unreadable(f"{self.path}: cannot be read after line {lineno} ({what}{exc})") from None

    def _check(self, block: bytes, lines: list[bytes], lineno: int) -> None:
        """The lines of ``block`` (the file's lines lineno+1, ...) are short enough and UTF-8."""
        if len(block) > self.max_line and max(map(len, lines)) > self.max_line:
            k = next(k for k, line in enumerate(lines) if len(line) > self.max_line)
            raise _Unreadable(self._too_long(lineno + k + 1))
        if block.isascii():
            return
        try:
            block.decode("utf-8")
        except UnicodeDecodeError as exc:
            k = block.count(b"\n", 0, exc.start)
            column = exc.start - block.rfind(b"\n", 0, exc.start)
            raise _Unreadable(f"{self.path}: not an svmlight/LIBSVM file (line {lineno + k + 1} is not UTF-8 text: "
                              f"byte {column} of the line, {block[exc.start:exc.end]!r}: {exc.reason})") from None

    def _too_long(self, line: int) -> str:
        return (f"{self.path}: line {line} is longer than max_line_bytes={self.max_line} bytes; pass a larger "
                "max_line_bytes to read it")

    def _too_much_text(self) -> str:
        size = self.path.stat().st_size
        return (f"{self.path}: the {size}-byte {self.kind} file inflates to more than max_decompressed_bytes="
                f"{self.max_bytes} bytes of text (by default max({MAX_DECOMPRESSED_FLOOR}, {DECOMPRESSED_PER_BYTE} "
                "x its size)); pass a larger max_decompressed_bytes to read it")


def _parse_fast(stream: _Lines, zero_based: bool | Literal["auto"]) -> tuple[Any, npt.NDArray[np.float64]] | None:
    """scikit-learn's compiled reader over the bounded stream, or None when the file needs the exact
    one (ids beyond int32, a malformed line to name).  Its CSR is as large as the text; only d is
    checked by the caller."""
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    try:
        return load_svmlight_file(stream, dtype=np.float64, zero_based=zero_based)
    except _Unreadable:
        raise  # the exact reader would stop at the same place
    except (ValueError, OverflowError, UnicodeDecodeError, RuntimeError, TypeError, EOFError, OSError):
        return None


def _line_of(lines: npt.NDArray[np.int64], indptr: npt.NDArray[np.int64], j: int) -> int:
    """The file line of stored entry j."""
    return int(lines[np.searchsorted(indptr, j, side="right") - 1])


#: a token: what bytes.split() (and so scikit-learn's reader) separates by ASCII whitespace
_TOKEN = re.compile(rb"[^ \t\n\r\f\v]+")
_INT64_MAX = int(np.iinfo(np.int64).max)


def _tokens(text: bytes) -> Iterator[bytes]:
    """The tokens of a line: split at once when short, one at a time when long (a 64 MiB line
    split at once would hold tens of millions of bytes objects)."""
    if len(text) <= _CHUNK:
        return iter(text.split())
    return (m.group() for m in _TOKEN.finditer(text))


def _parse(path: Path, stream: _Lines) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64],
                                               npt.NDArray[np.int64], npt.NDArray[np.float64],
                                               npt.NDArray[np.int64]]:
    """(values, int64 ids as written, indptr, labels, line number of each row).

    Line by line, so that an error names its line; ids are Python ints checked against int64,
    values Python floats checked for overflow.  Kept in typed arrays (8 bytes an entry), so the
    memory is bounded by the text as scikit-learn's reader's is."""
    data, ids, indptr = array("d"), array("q"), array("q", [0])
    labels, lines = array("d"), array("q")
    for lineno, raw in enumerate(stream, 1):
        tokens = _tokens(raw.split(b"#", 1)[0])
        label = next(tokens, None)
        if label is None:
            continue
        labels.append(_number(label, path, lineno, "label"))
        prev = None
        for tok in tokens:
            key, sep, val = tok.partition(b":")
            if not sep:
                raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno}: {_show(tok)} is not id:value)")
            if key == b"qid":
                continue
            fid = _feature_id(key, path, lineno)
            if prev is not None and fid <= prev:
                raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno}: feature ids must "
                                 f"increase; {fid} follows {prev})")
            prev = fid
            ids.append(fid)
            data.append(_number(val, path, lineno, "value", f" (feature {fid})"))
        indptr.append(len(ids))
        lines.append(lineno)
    if not labels:
        raise ValueError(f"{path}: not an svmlight/LIBSVM file (no examples)")
    return (np.frombuffer(data, np.float64), np.frombuffer(ids, np.int64), np.frombuffer(indptr, np.int64),
            np.frombuffer(labels, np.float64), np.frombuffer(lines, np.int64))


def _show(tok: bytes) -> str:
    """A token as quoted in a message: its first 40 bytes as text."""
    return repr(tok[:40].decode("utf-8", "replace"))


def _feature_id(key: bytes, path: Path, lineno: int) -> int:
    # int() refuses more than 4300 digits (with a message about digits): longer keys are judged here
    fid = None
    if len(key) <= 4000:
        try:
            fid = int(key)
        except ValueError:
            pass
    elif key.lstrip(b"+-").isdigit():
        fid = _INT64_MAX + 1
    if fid is None:
        raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno}: feature id {_show(key)} is not an "
                         "integer)")
    if not -_INT64_MAX <= fid <= _INT64_MAX:
        raise ValueError(f"{path}: feature id {key[:40].decode('ascii', 'replace')} on line {lineno} is beyond int64")
    return fid


def load_svmlight_pair(train: str | os.PathLike[str], test: str | os.PathLike[str], *,
                       n_features: int | None = None, dense: bool = False,
                       zero_based: bool | Literal["auto"] = "auto", binary: bool = False,
                       dtype: npt.DTypeLike | None = None, max_decompressed_bytes: int | None = None,
                       max_line_bytes: int = MAX_LINE_BYTES) -> tuple[Any, npt.NDArray[Any], Any, npt.NDArray[Any]]:
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
    max_decompressed_bytes, max_line_bytes : int, optional
        The bounds on each file's text, as for `load_svmlight`.

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
            load_svmlight(p, dense=False, zero_based=True, dtype=dtype, max_decompressed_bytes=max_decompressed_bytes,
                          max_line_bytes=max_line_bytes) for p in (train, test)]
        zero_based = any(X.nnz and int(X.indices.min()) == 0 for X, _ in parts)
        if not zero_based:  # column 0 is empty in both: drop it
            parts = [(sp.csr_matrix((X.data, X.indices - 1, X.indptr), shape=(X.shape[0], max(X.shape[1] - 1, 1))), y)
                     for X, y in parts]
    else:
        parts = [load_svmlight(p, dense=False, zero_based=zero_based, dtype=dtype,
                               max_decompressed_bytes=max_decompressed_bytes, max_line_bytes=max_line_bytes)
                 for p in (train, test)]
    widths = [X.shape[1] for X, _ in parts]
    if n_features is None:
        d = max(widths)
    else:
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1:
            raise ValueError(f"n_features must be a positive integer; got {n_features!r}")
        d = int(n_features)
        for p, w in zip((train, test), widths):
            if w > d:  # the exact error, naming the line
                load_svmlight(p, n_features=d, dense=False, zero_based=zero_based,
                              max_decompressed_bytes=max_decompressed_bytes, max_line_bytes=max_line_bytes)
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


def _number(tok: bytes, path: Path, lineno: int, what: str, where: str = "") -> float:
    try:
        v = float(tok)
    except ValueError:
        raise ValueError(f"{path}: not an svmlight/LIBSVM file (line {lineno}: {what} {_show(tok)} is not a "
                         "number)") from None
    if not math.isfinite(v):
        text = tok[:40].decode("ascii", "replace")
        if tok.strip().lstrip(b"+-").lower() in (b"nan", b"inf", b"infinity"):
            raise ValueError(f"{path}: non-finite {what} {text}{where} on line {lineno}")
        raise ValueError(f"{path}: {what} {text}{where} on line {lineno} overflows float64 (non-finite)")
    return v
