"""Shard sources: training data that a sharded fit's workers load themselves, shard by shard.

``StructuredSVM(model, shards=K, executor="process" | "ray").fit(source)`` sends each worker the
source (a few paths and options, not the data) and the worker calls ``source.load(k)`` for its own
shard k, so the calling process never holds the training set (docs/guide/scaling-out.md,
"Shard files").  A source is any picklable object with ``len(source)`` (the number of shards) and
``load(k) -> (X_k, Y_k)`` (`ShardSource`); `ShardFiles` is the one for shard files in the formats
the loaders of this package read:

* ``"svmlight"``: one svmlight/LIBSVM file a shard (`load_svmlight`, kept sparse), for
  `MulticlassModel`;
* ``"npz"``: one ``.npz`` archive a shard, written by `write_shard_npz` (dense or CSR rows, and
  ``lengths`` splitting them into sequences for chains);
* ``"conll"`` and ``"wordtag"``: tagged token files (`structfw.datasets.corpus_files`), featurised
  by a function of the sentences given as ``featurize`` and the tags mapped to states by ``tags``.

Every shard is featurised on its own, so whatever maps raw data to features must not learn from the
data (a hashing vectorizer, a fixed vocabulary): the features of one shard cannot depend on another.
"""
from __future__ import annotations

import glob as _glob
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..io import write_npz
from ._cache import CacheFile

__all__ = ["ShardSource", "ShardFiles", "write_shard_npz", "is_shard_source", "FORMATS"]

#: the formats `ShardFiles` reads, and the loader options each takes
FORMATS: dict[str, tuple[str, ...]] = {
    "svmlight": ("n_features", "labels", "zero_based"),
    "npz": (),
    "conll": ("tags", "featurize"),
    "wordtag": ("tags", "featurize"),
}
#: the format a file's suffix implies when ``format`` is None
_SUFFIXES = {".svm": "svmlight", ".svmlight": "svmlight", ".libsvm": "svmlight", ".npz": "npz",
             ".conll": "conll", ".wordtag": "wordtag"}


@runtime_checkable
class ShardSource(Protocol):
    """A data set in K shards that loads shard k on demand (what ``fit(source)`` takes).

    ``len(source)`` is K; ``load(k)`` returns ``(X_k, Y_k)``, shard k's inputs and labellings in the
    form ``fit(X, Y)`` takes them (labels already the model's states 0..n_states-1).  It is pickled to
    every worker, so it should hold where the data are, not the data."""

    def __len__(self) -> int: ...

    def load(self, k: int) -> tuple[Any, Any]: ...


def is_shard_source(obj: object) -> bool:
    """True for an object that loads shards (`ShardSource`): ``__len__`` and a callable ``load``."""
    return not isinstance(obj, (str, bytes, Sequence, np.ndarray)) and isinstance(obj, ShardSource)


class ShardFiles:
    """Shard files: one file a shard, read by the loader of its format when a worker asks for it.

    Parameters
    ----------
    paths : str, path, or sequence of them
        A glob pattern (its matches sorted by name: shard k is the k-th) or the files themselves, in
        shard order.  Each must exist when the source is made (ValueError naming it).
    format : {"svmlight", "npz", "conll", "wordtag"} or None
        How the files are read; None: from the first file's suffix (.svm, .svmlight, .libsvm, .npz,
        .conll, .wordtag).
    n_features : int
        svmlight: the number of features (every shard the same width, though a shard may lack the
        last features).  Required.
    labels : sequence, optional
        svmlight: the file's labels in the order of the model's states (``labels=[-1, 1]``: label -1
        is state 0).  Default: the labels are the states themselves, integers 0..n_states-1.
    zero_based : bool or "auto"
        svmlight: as `load_svmlight`; default False (one-based ids, LIBSVM's convention; an id 0
        is then an error naming the file).  Not "auto" by default: "auto" decides per file, and a
        shard without an id 0 would be read one-based beside a zero-based one, its columns shifted.
    tags : sequence of str
        conll, wordtag: the tags in the order of the model's states.  Required.
    featurize : callable or object with ``transform``
        conll, wordtag: maps a list of sentences (token lists) to one feature matrix a sentence,
        without learning from them (a hashing vectorizer).  Required, and picklable.

    Examples
    --------
    >>> source = ShardFiles("part-*.svm", n_features=300, labels=[1, 2, 3])  # doctest: +SKIP
    >>> StructuredSVM(MulticlassModel(3, 300), shards=len(source), executor="process").fit(source)  # doctest: +SKIP
    """

    def __init__(self, paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], format: str | None = None,
                 **options: Any) -> None:
        self.paths = _resolve_paths(paths)
        self.format = _check_format(format, self.paths[0])
        unknown = sorted(set(options) - set(FORMATS[self.format]))
        if unknown:
            allowed = ", ".join(FORMATS[self.format]) or "none"
            raise TypeError(f"ShardFiles(format={self.format!r}) takes no option {unknown[0]!r}; its options: "
                            f"{allowed}")
        self.options = _check_options(self.format, options)

    def __len__(self) -> int:
        return len(self.paths)

    def __repr__(self) -> str:
        return f"ShardFiles({len(self.paths)} {self.format} files, first {str(self.paths[0])!r})"

    def describe(self, k: int) -> str:
        """Shard k as error messages name it: its file."""
        return str(self.paths[k])

    def load(self, k: int) -> tuple[Any, list[Any]]:
        """(X_k, Y_k) of shard k, read from its file; a ValueError naming the file if it cannot be."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < len(self.paths):
            raise IndexError(f"shard {k!r} is not one of this source's shards 0..{len(self.paths) - 1}")
        path = self.paths[int(k)]
        if not path.is_file():
            raise ValueError(f"{path}: shard {k}'s file is missing (it existed when the ShardFiles was made)")
        return _READERS[self.format](path, self.options)


# ====================================================================== checks
def _resolve_paths(paths: Any) -> list[Path]:
    """The shard files, absolute (a worker may run elsewhere on this machine's file system)."""
    if isinstance(paths, (str, os.PathLike)):
        text = os.fspath(paths)
        if _glob.has_magic(text):
            found = sorted(_glob.glob(text))
            if not found:
                raise ValueError(f"ShardFiles: the pattern {text!r} matches no file")
            files = [Path(p) for p in found]
        else:
            files = [Path(text)]
    elif isinstance(paths, Sequence) and not isinstance(paths, bytes):
        files = []
        for i, p in enumerate(paths):
            if not isinstance(p, (str, os.PathLike)):
                raise TypeError(f"ShardFiles: paths[{i}] must be a path; got {type(p).__name__}")
            files.append(Path(os.fspath(p)))
        if not files:
            raise ValueError("ShardFiles: paths is empty; give a glob pattern or a list of shard files")
    else:
        raise TypeError(f"ShardFiles: paths must be a glob pattern or a list of files; got {type(paths).__name__}")
    for p in files:
        if not p.is_file():
            raise ValueError(f"ShardFiles: no such file {str(p)!r}")
    return [p.resolve() for p in files]


def _check_format(format: str | None, first: Path) -> str:
    if format is None:
        guess = _SUFFIXES.get(first.suffix.lower())
        if guess is None:
            raise ValueError(f"ShardFiles: cannot tell the format of {str(first)!r} by its suffix; give "
                             f"format= one of {sorted(FORMATS)}")
        return guess
    if format not in FORMATS:
        raise ValueError(f"ShardFiles: format must be one of {sorted(FORMATS)}; got {format!r}")
    return format


def _check_options(fmt: str, options: dict[str, Any]) -> dict[str, Any]:
    out = dict(options)
    if fmt == "svmlight":
        n = out.get("n_features")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"ShardFiles(format='svmlight') needs n_features, a positive integer (every shard "
                             f"the same width); got {n!r}")
        if out.get("labels") is not None:
            labels = list(out["labels"])
            if len(set(labels)) != len(labels) or not labels:
                raise ValueError(f"ShardFiles: labels must list distinct labels, one a state; got {labels!r}")
            out["labels"] = labels
    elif fmt in ("conll", "wordtag"):
        tags = out.get("tags")
        if tags is None or isinstance(tags, str) or not all(isinstance(t, str) for t in tags) or not len(tags):
            raise ValueError(f"ShardFiles(format={fmt!r}) needs tags, the list of tags in the order of the "
                             f"model's states; got {tags!r}")
        if len(set(tags)) != len(tags):
            raise ValueError(f"ShardFiles: tags must be distinct; got {list(tags)!r}")
        out["tags"] = list(tags)
        f = out.get("featurize")
        if not (callable(f) or callable(getattr(f, "transform", None))):
            raise ValueError(f"ShardFiles(format={fmt!r}) needs featurize, a function of a list of sentences (or "
                             "an object with transform) returning one feature matrix a sentence; got "
                             f"{type(f).__name__}")
    return out


# ====================================================================== readers
def _read_svmlight(path: Path, options: dict[str, Any]) -> tuple[Any, list[Any]]:
    from .svmlight import load_svmlight

    X, y = load_svmlight(path, n_features=options["n_features"], dense=False,
                         zero_based=options.get("zero_based", False))
    if X.shape[0] == 0:
        raise ValueError(f"{path}: no examples")
    return X, _states(y, options.get("labels"), path)


def _states(y: npt.NDArray[np.float64], labels: list[Any] | None, path: Path) -> list[int]:
    """The file's labels as states: by their position in ``labels``, else the labels themselves."""
    if labels is None:
        if not np.all(y == np.round(y)) or (y.size and y.min() < 0):
            j = int(np.argmax((y != np.round(y)) | (y < 0)))
            raise ValueError(f"{path}: example {j} has label {y[j]:g}, not a state 0, 1, ...; give ShardFiles "
                             "labels=[...] (the file's labels in the order of the model's states)")
        return [int(v) for v in y]
    index = {float(v): s for s, v in enumerate(labels)}
    out = []
    for j, v in enumerate(y.tolist()):
        s = index.get(float(v))
        if s is None:
            raise ValueError(f"{path}: example {j} has label {v:g}, which is not in labels={labels!r}")
        out.append(s)
    return out


def _read_tagged(path: Path, options: dict[str, Any], fmt: str) -> tuple[list[Any], list[Any]]:
    from .corpus_files import read_conll_file, read_wordtag_file

    corpus = read_conll_file(path) if fmt == "conll" else read_wordtag_file(path)
    index = {t: s for s, t in enumerate(options["tags"])}
    Y = []
    for i, (tags, line) in enumerate(zip(corpus.tags, corpus.lines)):
        unknown = [t for t in tags if t not in index]
        if unknown:
            raise ValueError(f"{path}: line {line}: tag {unknown[0]!r} is not in tags={options['tags']!r}")
        Y.append(np.array([index[t] for t in tags], np.int64))
    featurize = options["featurize"]
    transform: Callable[[list[list[str]]], Any] = getattr(featurize, "transform", featurize)
    X = list(transform(corpus.sentences))
    if len(X) != len(Y):
        raise ValueError(f"{path}: featurize returned {len(X)} matrices for {len(Y)} sentences")
    return X, Y


def _read_npz(path: Path, options: dict[str, Any]) -> tuple[Any, list[Any]]:
    """A `write_shard_npz` archive: rows as ``X`` (dense) or ``data``/``indices``/``indptr``/``shape``
    (CSR), labels ``y``, and ``lengths`` when the rows are the tokens of sequences."""
    import scipy.sparse as sp

    d = _open_npz(path)
    y = d.array("y", "int", ndim=1)
    if "X" in d:
        M: Any = d.array("X", "float", ndim=2)
    else:
        shape = d.array("shape", "int", shape=(2,))
        data = d.array("data", "float", ndim=1)
        indices = d.array("indices", "int", shape=data.shape)
        indptr = d.array("indptr", "int", shape=(int(shape[0]) + 1,))
        d.check(indptr[0] == 0 and indptr[-1] == data.size and bool(np.all(np.diff(indptr) >= 0)), "indptr",
                f"does not index the {data.size} stored values")
        d.check(indices.size == 0 or (indices.min() >= 0 and indices.max() < shape[1]), "indices",
                f"holds column indices outside 0..{int(shape[1]) - 1}")
        M = sp.csr_matrix((data, indices, indptr), shape=(int(shape[0]), int(shape[1])))
    d.check(y.shape[0] == M.shape[0], "y", f"holds {y.shape[0]} labels for {M.shape[0]} rows")
    if "lengths" not in d:
        d.check(M.shape[0] > 0, "y", "holds no examples")
        return M, [int(v) for v in y]
    lengths = d.array("lengths", "int", ndim=1, min_size=1)
    d.check(bool(np.all(lengths >= 1)) and int(lengths.sum()) == M.shape[0], "lengths",
            f"must be >= 1 each and sum to the {M.shape[0]} rows")
    ends = np.cumsum(lengths)
    starts = ends - lengths
    X = [M[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
    return X, [y[a:b].astype(np.int64) for a, b in zip(starts.tolist(), ends.tolist())]


def _open_npz(path: Path) -> CacheFile:
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {key: f[key] for key in f.files}
    except Exception as exc:  # any failure to read the archive is the file's problem: name it
        raise ValueError(f"{path}: not a readable .npz shard file ({type(exc).__name__}: {exc})") from None
    return CacheFile(path, arrays)


_READERS: dict[str, Callable[[Path, dict[str, Any]], tuple[Any, list[Any]]]] = {
    "svmlight": _read_svmlight,
    "npz": _read_npz,
    "conll": lambda path, options: _read_tagged(path, options, "conll"),
    "wordtag": lambda path, options: _read_tagged(path, options, "wordtag"),
}


def write_shard_npz(path: str | os.PathLike[str], X: Any, Y: Sequence[Any]) -> Path:
    """Write one shard as an ``.npz`` file `ShardFiles(format="npz")` reads.

    Parameters
    ----------
    path : str or path
    X : 2-D array or sparse matrix (one row an example), or list of 2-D arrays or sparse matrices
        (one an example: a sequence's tokens)
    Y : list of int, or list of int arrays (one label a token)

    Returns
    -------
    Path
        ``path``.
    """
    import scipy.sparse as sp

    sequences = isinstance(X, list)
    if sequences:
        if len(X) != len(Y) or not X:
            raise ValueError(f"write_shard_npz: X and Y must be non-empty lists of the same length; got {len(X)} "
                             f"and {len(Y)}")
        lengths = np.array([x.shape[0] for x in X], np.int64)
        M = sp.vstack(X, format="csr") if any(sp.issparse(x) for x in X) else np.vstack(X)
        y = np.concatenate([np.asarray(v, np.int64).ravel() for v in Y])
    else:
        M, y, lengths = X, np.asarray(Y, np.int64).ravel(), None
    arrays: dict[str, Any] = {"y": y}
    if sp.issparse(M):
        C = sp.csr_matrix(M)
        arrays.update(data=C.data.astype(np.float64), indices=C.indices.astype(np.int64),
                      indptr=C.indptr.astype(np.int64), shape=np.array(C.shape, np.int64))
    else:
        arrays["X"] = np.asarray(M, np.float64)
    if lengths is not None:
        arrays["lengths"] = lengths
    return write_npz(path, arrays)
