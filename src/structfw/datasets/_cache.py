"""The generated-data caches: one atomic write and one validated read for every loader.

`load_segmentation`, `load_superpixel_graphs`, `load_pose` and `load_conll_scale` generate
their data once and keep it as a compressed ``.npz`` file under `data_home()`.  They all
go through this module:

* `write_cache` writes the archive atomically (`structfw.io.write_npz`: a temporary file
  beside the target, renamed over it), so concurrent loaders never see half a file and a
  failed or interrupted write leaves no partial file behind;
* `read_cache` reads it back with ``allow_pickle=False``, hands a `CacheFile` to the
  loader's decoder, whose `CacheFile.array` checks each key's presence, dtype and shape.

A cache holds only data that the loader can generate again, so a file that cannot be read
back (truncated, corrupted, written by other code, missing a key) is not an error: a
`CacheWarning` names the file and the problem, the file is removed, and the loader
generates the data again (and caches it anew).
"""
from __future__ import annotations

import os
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ..io import write_npz

T = TypeVar("T")

#: dtype kinds (`numpy.dtype.kind`) by the names `CacheFile.array` takes
KINDS = {"int": "iu", "float": "f", "str": "U", "number": "iuf"}


class CacheError(ValueError):
    """A cache file that cannot be read back; the message names the file and the key."""


class CacheWarning(RuntimeWarning):
    """A cache file was unreadable or invalid and is being regenerated."""


def data_home() -> Path:
    """``$STRUCTFW_DATA_HOME`` if set, else ``~/.cache/structfw`` (created on demand)."""
    root = os.environ.get("STRUCTFW_DATA_HOME")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "structfw"


class CacheFile(Mapping[str, np.ndarray]):
    """The arrays of one cache file, read in full; `array` returns one of them checked.

    Parameters
    ----------
    path : Path
        The file (named in error messages).
    arrays : dict of str -> ndarray
        Its members.
    """

    def __init__(self, path: Path, arrays: dict[str, np.ndarray]) -> None:
        self.path = Path(path)
        self._arrays = arrays

    def __getitem__(self, key: str) -> np.ndarray:
        return self.array(key)

    def __contains__(self, key: object) -> bool:
        return key in self._arrays

    def __iter__(self) -> Any:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def array(self, key: str, kind: str | None = None, ndim: int | None = None,
              shape: tuple[int | None, ...] | None = None, min_size: int = 0) -> np.ndarray:
        """The member ``key``, checked.

        Parameters
        ----------
        key : str
            Member name.
        kind : {"int", "float", "str", "number"}, optional
            Required dtype family (any when None).
        ndim : int, optional
            Required number of dimensions.
        shape : tuple of int or None, optional
            Required shape; None entries match any length (implies ``ndim``).
        min_size : int, default 0
            Required least number of elements.

        Raises
        ------
        CacheError
            The key is missing or its array is not as required; the message names the
            file and the key.
        """
        if key not in self._arrays:
            raise CacheError(f"{self.path}: missing key {key!r}")
        a = self._arrays[key]
        if kind is not None and a.dtype.kind not in KINDS[kind]:
            raise CacheError(f"{self.path}: key {key!r} holds {a.dtype} values, expected {kind}")
        if shape is not None:
            ndim = len(shape)
        if ndim is not None and a.ndim != ndim:
            raise CacheError(f"{self.path}: key {key!r} has {a.ndim} dimensions, expected {ndim}")
        if shape is not None and any(s is not None and s != n for s, n in zip(shape, a.shape)):
            raise CacheError(f"{self.path}: key {key!r} has shape {a.shape}, expected "
                             f"{tuple('*' if s is None else s for s in shape)}")
        if a.size < min_size:
            raise CacheError(f"{self.path}: key {key!r} holds {a.size} values, expected at least {min_size}")
        return a

    def check(self, ok: bool, key: str, problem: str) -> None:
        """Raise a `CacheError` naming the file, ``key`` and ``problem`` unless ``ok``."""
        if not ok:
            raise CacheError(f"{self.path}: key {key!r} {problem}")


def write_cache(path: str | os.PathLike[str], arrays: Mapping[str, npt.ArrayLike]) -> Path:
    """Write a cache file atomically and compressed, creating its directory.

    Parameters
    ----------
    path : str or path-like
        The ``.npz`` file.
    arrays : dict of str -> array_like
        Its members (no object arrays: `read_cache` never unpickles).

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(os.fspath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_npz(path, arrays, compress=True)


def open_cache(path: str | os.PathLike[str]) -> CacheFile:
    """Read every array of a cache file (``allow_pickle=False``).

    Raises
    ------
    CacheError
        The file cannot be read as an ``.npz`` archive of plain arrays (empty, truncated,
        corrupted, pickled content); the message names the file.
    """
    path = Path(os.fspath(path))
    try:
        with np.load(path, allow_pickle=False) as d:
            if not isinstance(d, np.lib.npyio.NpzFile):
                raise CacheError(f"{path}: not an .npz archive")
            arrays = {key: d[key] for key in d.files}
    except CacheError:
        raise
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, struct.error,
            UnicodeError, NotImplementedError) as exc:
        raise CacheError(f"{path}: unreadable cache file ({type(exc).__name__}: {exc})") from None
    return CacheFile(path, arrays)


def read_cache(path: str | os.PathLike[str] | None, decode: Callable[[CacheFile], T]) -> T | None:
    """``decode(open_cache(path))``, or None when there is nothing valid to read.

    Parameters
    ----------
    path : str, path-like or None
        The cache file; None or a missing file gives None.
    decode : callable
        Builds the loader's data from the `CacheFile`; it raises `CacheError` (through
        `CacheFile.array` / `CacheFile.check`) when a key is missing or invalid.

    Returns
    -------
    The decoded data, or None: no file, or a file that cannot be read back.  In the
    second case a `CacheWarning` names the file and the problem and the file is removed,
    so that the caller's regenerated data replaces it.
    """
    if path is None:
        return None
    path = Path(os.fspath(path))
    try:
        return decode(open_cache(path))
    except FileNotFoundError:
        return None
    except (CacheError, ValueError, IndexError) as exc:
        # ValueError / IndexError: arrays that pass the key checks but do not fit together
        # (a sparse matrix's indptr against its data, say)
        problem = str(exc) if isinstance(exc, CacheError) else f"{path}: invalid content ({exc})"
        warnings.warn(f"{problem}; removing the cache file and generating the data again",
                      CacheWarning, stacklevel=3)
        try:
            path.unlink()
        except OSError:
            pass
        return None
