"""Model files: one versioned format for every estimator (docs/design.md, "State, warm starts and exact resume").

A model file is an ``.npz`` archive (written with `numpy.savez`, uncompressed)
holding

* ``header``: a JSON object as a 0-d unicode array, with the keys ``format``
  (`FORMAT`), ``version`` (`VERSION`), ``kind`` (the estimator class name)
  and the estimator's own fields;
* plain numeric arrays (bool, integer or floating dtypes), and optionally long JSON
  texts (0-d unicode arrays, e.g. a convergence trace);
* ``digest``: ``"sha256:<hex>"``, the SHA-256 of every other member (name, dtype,
  shape and data, in name order; `members_digest`), so that a corrupted member or one
  replaced by another valid array is refused.  The digest is a check against damage and
  mix-ups, not a signature: whoever can write the file can recompute it (model files are
  still untrusted input, and every field is validated as well).

Model files are untrusted input.  `read_model_file` never unpickles, never
trusts a size it has not bounded, and turns every way a file can be broken
(truncated, corrupted, empty, another format, a pickle-bearing archive, an object or
structured dtype, a huge declared shape, duplicated or unexpected members, an
over-deep or non-standard JSON header) into a `ValueError` naming the file and
the problem.  The small validators below (`header_int`, `array_field`, ...)
let each estimator check every field against the model it builds, with errors that
name the file and the field.  No field is ever used as a path, and estimators take no
execution setting (n_jobs, executors, verbosity) from a file.

Optional solver state (warm starts)
-----------------------------------
A file may carry a solver-state section: JSON meta under the header key ``state``
and arrays named ``state/<name>``.  `pack_state` builds it for
`write_model_file` and `unpack_state` returns it validated as generic
data (a dict and finite numeric arrays); what the arrays mean is for the solver that
wrote them to check.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import struct
import tokenize
import warnings
import zlib
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

import numpy as np
import numpy.typing as npt

#: Value of the header key ``format`` of every structfw model file.
FORMAT = "structfw-model"
#: Version written by this code; files of a higher version are refused.  Version 2 added
#: the whole-file ``digest`` member; version-1 files (without it) load with a warning.
VERSION = 2
#: Name of the member that holds the digest of all the others.
DIGEST_KEY = "digest"
#: Largest uncompressed archive member read (bytes), and largest archive.
MAX_MEMBER_BYTES = 2 ** 32
MAX_FILE_BYTES = 2 ** 34
#: Largest header (characters of JSON).
MAX_HEADER_CHARS = 1 << 22
#: Largest JSON text member (characters).
MAX_TEXT_CHARS = 1 << 28
#: Largest magnitude of a stored weight (coefficients, dual coefficients, support rows).
#: No fit produces larger ones (the iterates are bounded by max ||psi_i|| / lam with
#: lam >= 1e-12), and scores of weights beyond it overflow float64 on ordinary features,
#: so that every label would tie and a constant one be predicted.
MAX_WEIGHT = 1e100
#: Name of the solver-state section (header key, and prefix of its arrays).
STATE_KEY = "state"
#: Bytes read at a time into an array (bounds the temporary memory of a read).
_CHUNK = 1 << 24

_NAME_RE = re.compile(r"^[A-Za-z0-9_.]+(/[A-Za-z0-9_.]+)?$")
_NUMERIC_KINDS = "biuf"
_MISSING = object()


class FieldMap(dict[str, Any]):
    """A dict of fields read from a model file; ``source`` names the file (and the
    enclosing field) in error messages."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        super().__init__(data)
        self.source = source


# --------------------------------------------------------------------------- paths
def model_path(path: str | os.PathLike[str]) -> Path:
    """The path a model file is written to / read from: ``path`` with ``.npz``
    appended unless it already ends in ``.npz`` (so ``save("m")`` then ``load("m")``
    use ``m.npz``, as do ``save("m.npz")`` and ``load("m.npz")``)."""
    path = Path(os.fspath(path))
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


# --------------------------------------------------------------------------- writing
def write_model_file(path: str | os.PathLike[str], kind: str, header: Mapping[str, Any],
                     arrays: Mapping[str, npt.ArrayLike], texts: Mapping[str, str] | None = None) -> Path:
    """Write a model file atomically (temporary file in the same directory + rename).

    Parameters
    ----------
    path : str or path-like
        Destination; ``.npz`` is appended when missing (see `model_path`).
    kind : str
        The estimator class name, checked by `read_model_file`.
    header : dict
        JSON-able fields (no NaN/inf: write None for a missing number).
    arrays : dict of str -> ndarray
        Numeric arrays (bool, integer or float dtypes).
    texts : dict of str -> str, optional
        Long JSON texts stored as 0-d unicode arrays.

    Returns
    -------
    Path
        The file written.
    """
    path = model_path(path)
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "kind": str(kind)}
    for key, value in header.items():
        if key in doc:
            raise ValueError(f"header key {key!r} is reserved")
        doc[key] = value
    # Any: numpy's stub of savez(**kwds) would read an ndarray value as its allow_pickle flag
    members: dict[str, Any] = {"header": np.array(json.dumps(doc, allow_nan=False))}
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if not _NAME_RE.match(name) or name in ("header", DIGEST_KEY):
            raise ValueError(f"invalid array name {name!r}")
        if arr.dtype.kind not in _NUMERIC_KINDS:
            raise ValueError(f"array {name!r} must be numeric, got dtype {arr.dtype}")
        members[name] = np.ascontiguousarray(arr)
    for name, text in (texts or {}).items():
        if not _NAME_RE.match(name) or name in members or name == DIGEST_KEY:
            raise ValueError(f"invalid text name {name!r}")
        members[name] = np.array(str(text))
    members[DIGEST_KEY] = np.array(members_digest(members))
    return write_npz(path, members)


def members_digest(members: Mapping[str, npt.NDArray[Any]]) -> str:
    """``"sha256:<hex>"`` of a model file's members other than ``digest``.

    Each member contributes its name, its dtype in little-endian form, its shape and its
    C-ordered data, in name order: the digest depends on what the arrays hold, not on
    how the archive stored them (byte order, ``.npy`` version, member order).
    """
    h = hashlib.sha256()
    for name in sorted(members):
        if name == DIGEST_KEY:
            continue
        a = np.asarray(members[name])
        dtype = a.dtype.newbyteorder("<") if a.dtype.byteorder not in ("|", "<") else a.dtype
        data = np.ascontiguousarray(a, dtype=dtype)
        h.update(f"{name}\0{dtype.str}\0{tuple(int(n) for n in a.shape)}\0".encode())
        h.update(memoryview(data.reshape(-1).view(np.uint8)))  # type: ignore[arg-type]
    return "sha256:" + h.hexdigest()


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, Any], compress: bool = False) -> Path:
    """Write ``arrays`` to the ``.npz`` archive ``path`` atomically.

    The archive is written to a new temporary file beside ``path`` (created exclusively,
    with the permissions ``open`` gives), flushed to disk and renamed over ``path``, so a
    reader sees the old file or the whole new one, never part of one; if anything fails
    (an error, Ctrl-C) the temporary file is removed and ``path`` is untouched.  Model
    files (`write_model_file`), the generated-data caches (`structfw.datasets`) and
    ``structfw predict``'s ``.npz`` output are all written by it.

    Parameters
    ----------
    path : str or path-like
        Destination, used as given (no suffix is added); its directory must exist.
    arrays : dict of str -> array_like
        The archive's members (`numpy.savez` keyword arguments).
    compress : bool, default False
        Deflate the members (`numpy.savez_compressed`).

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(os.fspath(path))
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write {path}: the directory {path.parent} does not exist")
    if path.is_dir():
        raise IsADirectoryError(f"cannot write {path}: it is a directory")
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    save = np.savez_compressed if compress else np.savez
    try:
        with open(tmp, "xb") as fh:
            save(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def pack_state(meta: Mapping[str, Any],
               arrays: Mapping[str, npt.NDArray[Any]]) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """Solver-state section for `write_model_file`: returns
    ``(header_fields, array_fields)`` to merge into the header and the arrays."""
    return {STATE_KEY: dict(meta)}, {f"{STATE_KEY}/{k}": v for k, v in arrays.items()}


# --------------------------------------------------------------------------- reading
def read_text_file(path: str | os.PathLike[str], what: str, max_bytes: int = MAX_TEXT_CHARS) -> str:
    """The UTF-8 text of a small file (a trace, a path), for a parser of untrusted input.

    A file larger than ``max_bytes``, or one that is not UTF-8 text (random bytes, a
    binary file given by mistake), is a ValueError naming the file and what was expected
    (``what``); a missing file stays a FileNotFoundError.
    """
    src = os.fspath(path)
    p = Path(src)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundError(f"no {what} at {src}") from None
    except (OSError, ValueError) as exc:  # a name too long, an embedded NUL
        raise ValueError(f"{_short(src)}: cannot be read as a {what} ({_short(exc)})") from None
    if size > max_bytes:
        raise ValueError(f"{src}: {size} bytes, larger than any {what} ({max_bytes} bytes at most)")
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{src}: not a {what} (not UTF-8 text: {exc.reason} at byte {exc.start})") from None


def read_model_file(path: str | os.PathLike[str], kind: str,
                    max_member_bytes: int = MAX_MEMBER_BYTES) -> tuple[FieldMap, FieldMap]:
    """Read and structurally validate a model file of estimator ``kind``.

    Returns
    -------
    header : FieldMap
        The JSON header (``format``, ``version`` and ``kind`` checked and removed).
    arrays : FieldMap
        Every other member: numeric ndarrays, and texts as 0-d unicode arrays
        (read them with `text_field`).

    Raises
    ------
    FileNotFoundError
        No file at ``path`` (nor at ``path`` + ``.npz``).
    ValueError
        Anything wrong with the file's content, naming the file and the problem.
    """
    path = _existing(path)
    src = str(path)
    size = path.stat().st_size
    if not path.is_file():
        raise ValueError(f"{src} is not a regular file")
    if size == 0:
        raise ValueError(f"{src} is empty; not a structfw model file")
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{src} is {size} bytes, larger than any structfw model file")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] != b"PK":
        raise ValueError(f"{src} is not a structfw model file (not an .npz archive; "
                         f"starts with {magic!r})")
    try:
        members = _read_members(path, src, max_member_bytes)
    except ValueError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, KeyError,
            NotImplementedError, RuntimeError, OverflowError, MemoryError, TypeError,
            UnicodeError, IndexError, AttributeError, SyntaxError, RecursionError,
            struct.error, zlib.error, tokenize.TokenError) as exc:
        # every way zipfile / the .npy header parser can fail on a corrupted archive
        raise ValueError(f"{src} is corrupted or truncated ({type(exc).__name__}: "
                         f"{_short(exc)})") from None
    if "header" not in members:
        raise ValueError(f"{src} is not a structfw model file (no 'header' member)")
    header = _parse_header(members["header"], src)
    if header.get("format") != FORMAT:
        raise ValueError(f"{src} is not a structfw model file "
                         f"(format {_short(header.get('format'))!r})")
    version: Any = header.get("version")  # a JSON value, checked next
    if not _is_int(version) or version < 1:
        raise ValueError(f"{src}: field 'version' must be an integer >= 1")
    if version > VERSION:
        raise ValueError(f"{src} was written by a newer structfw (format version "
                         f"{version}; this one reads up to {VERSION})")
    if header.get("kind") != kind:
        raise ValueError(f"{src} holds a {_short(header.get('kind'))!r} model, "
                         f"not a {kind!r}")
    _check_digest(members, version, src)
    for key in ("format", "version", "kind"):
        del header[key]
    return FieldMap(header, src), FieldMap(members, src)


def model_kind(path: str | os.PathLike[str]) -> str | None:
    """The ``kind`` of a model file's header (the estimator class it holds), or None.

    Reads only the ``header`` member, with the bounds of `read_model_file`; any file that is
    not a readable structfw model file gives None rather than an error, so that a loader
    dispatching on the kind (`structfw.load`) leaves the full diagnosis to the loader it
    falls back on.  Nothing else in the file is checked: the loader then reads it whole.
    """
    try:
        p = _existing(path)
        if not p.is_file() or p.stat().st_size > MAX_FILE_BYTES:
            return None
        with zipfile.ZipFile(p) as zf:
            info = zf.getinfo("header.npy")
            if info.compress_type != zipfile.ZIP_STORED or info.file_size > 4 * MAX_HEADER_CHARS + 4096:
                return None
            with zf.open(info) as fp:
                doc = _parse_header(_read_npy(fp, info.file_size, str(p), "header"), str(p))
    except (ValueError, OSError, KeyError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError,
            OverflowError, MemoryError, TypeError, UnicodeError, struct.error, zlib.error):
        return None
    kind = doc.get("kind")
    return kind if doc.get("format") == FORMAT and isinstance(kind, str) else None


def _check_digest(members: dict[str, npt.NDArray[Any]], version: int, src: str) -> None:
    """Check (and remove) the ``digest`` member, and remove ``header`` (already parsed).

    A version-2 file must carry a digest equal to `members_digest` of its other members;
    a version-1 file has none and loads with a warning, since nothing covers its members
    but the zip reader's per-member CRC.
    """
    stored = members.pop(DIGEST_KEY, None)
    actual = members_digest(members)
    members.pop("header")
    if stored is None:
        if version >= 2:
            raise ValueError(f"{src}: member 'digest' is missing (a version-{version} model file "
                             "carries the digest of its members)")
        warnings.warn(f"{src} is a version-1 model file without a digest: its members are checked "
                      "one by one but not as a whole; save it again to add one", UserWarning, stacklevel=4)
        return
    if stored.dtype.kind != "U" or stored.shape != ():
        raise ValueError(f"{src}: member 'digest' must be a text")
    if str(stored[()]) != actual:
        raise ValueError(f"{src}: the digest does not match the members (a member was changed, "
                         "replaced or corrupted after the file was written)")


def _existing(path: str | os.PathLike[str]) -> Path:
    p = model_path(path)
    if p.exists():
        return p
    raw = Path(os.fspath(path))
    if raw.exists():  # a model file renamed without its .npz suffix
        return raw
    raise FileNotFoundError(f"no model file at {p}")


def _short(x: object, n: int = 80) -> str:
    s = str(x)
    return s if len(s) <= n else s[:n] + "..."


def _read_members(path: Path, src: str, max_member_bytes: int) -> dict[str, npt.NDArray[Any]]:
    out = {}
    size = path.stat().st_size
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if not infos:
            raise ValueError(f"{src} is an empty archive; not a structfw model file")
        if len(infos) > 10_000:
            raise ValueError(f"{src} has {len(infos)} members; not a structfw model file")
        for info in infos:
            name = info.filename
            if not name.endswith(".npy") or not _NAME_RE.match(name[:-4]):
                raise ValueError(f"{src}: unexpected archive member {_short(name)!r}")
            key = name[:-4]
            if key in out:
                raise ValueError(f"{src}: archive member {key!r} appears twice")
            if info.compress_type != zipfile.ZIP_STORED:
                # structfw writes stored members; a compressed one could declare any
                # size (zip bomb), so it is refused rather than inflated
                raise ValueError(f"{src}: member {key!r} is compressed; structfw model "
                                 "files are written uncompressed (np.savez)")
            if info.file_size > max_member_bytes or info.file_size > size:
                raise ValueError(f"{src}: member {key!r} declares {info.file_size} bytes, "
                                 "more than the file holds")
            with zf.open(info) as fp:
                out[key] = _read_npy(fp, info.file_size, src, key)
    return out


def _read_npy(fp: IO[bytes], member_bytes: int, src: str, key: str) -> npt.NDArray[Any]:
    """One .npy member, checking the dtype and shape before reading any data."""
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError, tokenize.TokenError) as exc:
        # numpy reads the header with Python's tokenizer: a corrupted one can end mid-statement
        raise ValueError(f"{src}: member {key!r} is not a valid .npy array "
                         f"({_short(exc)})") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"{src}: member {key!r} has dtype {_short(dtype)}; model files hold "
                         "only plain numeric arrays and texts (no pickled objects)")
    if dtype.kind == "U":
        if shape != ():
            raise ValueError(f"{src}: member {key!r} must be a 0-d text, got shape {shape}")
    elif dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"{src}: member {key!r} has unsupported dtype {dtype}")
    if len(shape) > 8 or any(not _is_int(s) or s < 0 for s in shape):
        raise ValueError(f"{src}: member {key!r} has an invalid shape {_short(shape)}")
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes > member_bytes:
        raise ValueError(f"{src}: member {key!r} declares shape {shape} ({nbytes} bytes) "
                         f"but holds at most {member_bytes} bytes: truncated or corrupted")
    # read straight into the array, in chunks: a whole-member bytes object plus the array
    # would double the peak memory of a load (a BCFW state is n * d * 8 bytes)
    arr = np.empty(count, dtype=dtype)
    # ndarray has the buffer protocol; its stub declares no __buffer__ before Python 3.12
    view = memoryview(arr.view(np.uint8))  # type: ignore[arg-type]
    done = 0
    while done < nbytes:
        # a ZipExtFile (io.BufferedIOBase), which typeshed types as IO[bytes]
        got = fp.readinto(view[done:done + _CHUNK])  # type: ignore[attr-defined]
        if not got:
            raise ValueError(f"{src}: member {key!r} is truncated")
        done += got
    arr = arr.reshape(shape, order="F" if fortran else "C")
    if not dtype.isnative:
        arr = arr.astype(dtype.newbyteorder("="))
    return arr if arr.flags.c_contiguous else np.array(arr, order="C")  # (ascontiguousarray makes 0-d 1-d)


def _parse_header(arr: npt.NDArray[Any], src: str) -> dict[str, Any]:
    if arr.dtype.kind != "U" or arr.shape != ():
        raise ValueError(f"{src}: 'header' must be a JSON text")
    text = str(arr[()])
    if len(text) > MAX_HEADER_CHARS:
        raise ValueError(f"{src}: 'header' is {len(text)} characters long; too large")
    doc = _loads(text, src, "header")
    if not isinstance(doc, dict):
        raise ValueError(f"{src}: 'header' must be a JSON object")
    return doc


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"non-standard JSON constant {name}")


def _loads(text: str, src: str, field: str) -> Any:
    """Strict JSON: no NaN/Infinity; over-deep nesting is a ValueError (the C decoder
    raises RecursionError at the interpreter's limit, never overflows the stack)."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"{src}: {field!r} is not valid JSON ({_short(exc)})") from None


def loads_json(text: str, source: str, field: str) -> Any:
    """Parse a JSON text read from a model file (same rules as the header)."""
    return _loads(text, source, field)


def unpack_state(header: dict[str, Any], arrays: dict[str, Any]) -> tuple[FieldMap, FieldMap] | None:
    """The solver-state section of a file read by `read_model_file`, or None.

    Returns ``(meta, state_arrays)``: the JSON meta (a dict) and the arrays named
    ``state/<name>`` (keys without the prefix), all numeric.  The section is removed from
    ``header`` and ``arrays``.  Values are the solver's to check: it knows which field an
    array is and what range it has (`structfw.solvers.state_file.check_state`).
    """
    src = getattr(header, "source", "model file")
    names = [k for k in arrays if k.startswith(STATE_KEY + "/")]
    if STATE_KEY not in header:
        if names:
            raise ValueError(f"{src}: state arrays {names[:3]} without a 'state' header")
        return None
    meta = header.pop(STATE_KEY)
    if not isinstance(meta, dict):
        raise ValueError(f"{src}: field 'state' must be a JSON object")
    out: dict[str, npt.NDArray[Any]] = {}
    for k in names:
        a = arrays.pop(k)
        if a.dtype.kind not in _NUMERIC_KINDS:
            raise ValueError(f"{src}: field {k!r} must be numeric")
        out[k[len(STATE_KEY) + 1:]] = a
    return FieldMap(meta, f"{src} [state]"), FieldMap(out, f"{src} [state]")


# --------------------------------------------------------------------------- validators
def _src(mapping: object) -> str:
    return getattr(mapping, "source", "model file")


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _get(mapping: Mapping[str, Any], name: str, default: Any) -> Any:
    if name in mapping:
        return mapping[name]
    if default is not _MISSING:
        return default
    raise ValueError(f"{_src(mapping)}: missing field {name!r}")


def check_fields(mapping: Mapping[str, Any], required: Sequence[str], optional: Sequence[str] = ()) -> None:
    """Raise unless ``mapping`` has every ``required`` key and no key outside
    ``required`` + ``optional``."""
    keys = set(mapping)
    missing = [k for k in required if k not in keys]
    if missing:
        raise ValueError(f"{_src(mapping)}: missing field(s) {missing}")
    extra = sorted(keys - set(required) - set(optional))
    if extra:
        raise ValueError(f"{_src(mapping)}: unexpected field(s) {[_short(e, 40) for e in extra[:5]]}")


def header_int(header: Mapping[str, Any], name: str, lo: int | None = None, hi: int | None = None,
               default: Any = _MISSING) -> int:
    """An integer field in [lo, hi]."""
    v = _get(header, name, default)
    if not _is_int(v):
        raise ValueError(f"{_src(header)}: field {name!r} must be an integer, got {_short(v)!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{_src(header)}: field {name!r} = {v} is outside [{lo}, {hi}]")
    return int(v)


def header_float(header: Mapping[str, Any], name: str, lo: float | None = None, hi: float | None = None,
                 allow_none: bool = False, default: Any = _MISSING) -> float:
    """A finite number in [lo, hi] (integers accepted); None (-> NaN) if ``allow_none``."""
    v = _get(header, name, default)
    if v is None and allow_none:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{_src(header)}: field {name!r} must be a number, got {_short(v)!r}")
    try:
        v = float(v)
    except OverflowError:  # a JSON integer beyond float range (10**400)
        raise ValueError(f"{_src(header)}: field {name!r} is out of float range") from None
    if not math.isfinite(v):
        raise ValueError(f"{_src(header)}: field {name!r} must be finite")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{_src(header)}: field {name!r} = {v} is outside [{lo}, {hi}]")
    return v


def header_bool(header: Mapping[str, Any], name: str, default: Any = _MISSING) -> bool:
    v = _get(header, name, default)
    if not isinstance(v, bool):
        raise ValueError(f"{_src(header)}: field {name!r} must be true or false, got {_short(v)!r}")
    return v


def header_str(header: Mapping[str, Any], name: str, max_len: int = 256, default: Any = _MISSING) -> str:
    v = _get(header, name, default)
    if not isinstance(v, str) or len(v) > max_len:
        raise ValueError(f"{_src(header)}: field {name!r} must be a string of at most "
                         f"{max_len} characters, got {_short(v)!r}")
    return v


def header_str_choice(header: Mapping[str, Any], name: str, choices: Sequence[str], default: Any = _MISSING) -> str:
    """A string among ``choices``."""
    v = _get(header, name, default)
    if not isinstance(v, str) or v not in choices:
        raise ValueError(f"{_src(header)}: field {name!r} must be one of {sorted(choices)}, "
                         f"got {_short(v)!r}")
    return v


def header_dict(header: Mapping[str, Any], name: str, default: Any = _MISSING) -> FieldMap:
    """A JSON-object field, as a `FieldMap` whose errors name ``name`` too."""
    v = _get(header, name, default)
    if not isinstance(v, dict):
        raise ValueError(f"{_src(header)}: field {name!r} must be a JSON object, got {_short(v)!r}")
    return FieldMap(v, f"{_src(header)} [{name}]")


def header_list(header: Mapping[str, Any], name: str, max_len: int | None = None,
                default: Any = _MISSING) -> list[Any]:
    v = _get(header, name, default)
    if not isinstance(v, list) or (max_len is not None and len(v) > max_len):
        raise ValueError(f"{_src(header)}: field {name!r} must be a list"
                         + (f" of at most {max_len} items" if max_len is not None else ""))
    return v


def text_field(arrays: Mapping[str, Any], name: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """A text member (0-d unicode array) as a str."""
    a = _get(arrays, name, _MISSING)
    if not isinstance(a, np.ndarray) or a.dtype.kind != "U" or a.shape != ():
        raise ValueError(f"{_src(arrays)}: field {name!r} must be a text")
    s = str(a[()])
    if len(s) > max_chars:
        raise ValueError(f"{_src(arrays)}: field {name!r} is too long")
    return s


def weight_field(arrays: Mapping[str, Any], name: str,
                 shape: Sequence[int | None] | None = None) -> npt.NDArray[np.float64]:
    """A float array of weights: finite, every entry of magnitude at most `MAX_WEIGHT`."""
    a = array_field(arrays, name, shape=shape, dtype="f", finite=True)
    top = float(np.max(np.abs(a))) if a.size else 0.0
    if top > MAX_WEIGHT:
        raise ValueError(f"{_src(arrays)}: field {name!r} has an entry of magnitude {top:.3g}, above "
                         f"{MAX_WEIGHT:g}: no fit produces such weights, and their scores overflow "
                         "(every label would tie)")
    return a


def array_field(arrays: Mapping[str, Any], name: str, shape: Sequence[int | None] | None = None,
                dtype: npt.DTypeLike = "f", finite: bool = True, lo: float | None = None,
                hi: float | None = None) -> npt.NDArray[Any]:
    """A numeric array member, checked and returned as a writable C array.

    Parameters
    ----------
    shape : tuple of (int or None), optional
        Expected shape; None entries match any length.
    dtype : {"f", "i", "b"} or numpy dtype
        "f": any float or integer array, returned as float64; "i": any integer array,
        returned as int64 (values outside int64 rejected); "b": bool.
    finite : bool
        Reject NaN / inf (float arrays).
    lo, hi : numbers, optional
        Bounds on every value.
    """
    src = _src(arrays)
    a = _get(arrays, name, _MISSING)
    if not isinstance(a, np.ndarray) or a.dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"{src}: field {name!r} must be a numeric array")
    if shape is not None:
        ok = a.ndim == len(shape) and all(s is None or s == t for s, t in zip(shape, a.shape))
        if not ok:
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{src}: field {name!r} has shape {a.shape}, expected {want}")
    if dtype == "f":
        if a.dtype.kind not in "fiu":
            raise ValueError(f"{src}: field {name!r} must be a float array, got {a.dtype}")
        with np.errstate(over="ignore"):
            a = a.astype(np.float64)
    elif dtype == "i":
        if a.dtype.kind not in "iu":
            raise ValueError(f"{src}: field {name!r} must be an integer array, got {a.dtype}")
        if a.dtype.kind == "u" and a.size and a.max() > np.iinfo(np.int64).max:
            raise ValueError(f"{src}: field {name!r} has values beyond int64")
        a = a.astype(np.int64)
    elif dtype == "b":
        if a.dtype.kind != "b":
            raise ValueError(f"{src}: field {name!r} must be a bool array, got {a.dtype}")
    else:
        if a.dtype != np.dtype(dtype):
            raise ValueError(f"{src}: field {name!r} must have dtype {np.dtype(dtype)}, got {a.dtype}")
    if finite and a.dtype.kind == "f" and not np.isfinite(a).all():
        raise ValueError(f"{src}: field {name!r} contains NaN or inf")
    if a.size and lo is not None and a.min() < lo:
        raise ValueError(f"{src}: field {name!r} has values below {lo}")
    if a.size and hi is not None and a.max() > hi:
        raise ValueError(f"{src}: field {name!r} has values above {hi}")
    return np.ascontiguousarray(a)
