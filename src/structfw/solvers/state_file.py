"""A solver's complete state as plain data, for the optional warm-start section of a model file.

:func:`encode_state` turns a state object graph (a :class:`~structfw.solvers.BCFWState`
with its corner store, sampler, averages and random generator; or an FW / SSG /
cutting-plane / online-EG state) into a JSON tree and a dict of numeric arrays;
:func:`decode_state` rebuilds it.  Nothing is executed from a file: only classes of
:data:`STATE_CLASSES` are rebuilt (``object.__new__`` plus attribute assignment),
random generators only of numpy's own bit generators, every other node is a number,
a string, bytes, a list or an array.  Aliasing is kept (``v is w`` when there is no
projection; the sampler draws from the state's own generator), so a loaded state
continues the run exactly like the one in memory.

A digest over the tree and the arrays detects a damaged section; the rebuilt state
is then checked against the structure the compiled kernels index
(:func:`check_state`), so a forged section is a ValueError, never an out-of-bounds
read.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from .._linalg import SparseVector
from .averaging import LazyAverage
from .bcfw import BCFWState
from .corners import CornerStore
from .cutting_plane import CuttingPlaneState
from .fw import FWState
from .online_eg import OnlineEGState
from .sampling import BlockSampler
from .ssg import SSGState

#: the classes a file may name, by their qualified names
STATE_CLASSES = {f"{c.__module__}.{c.__qualname__}": c for c in (
    BCFWState, CornerStore, BlockSampler, LazyAverage, SparseVector, FWState, SSGState, CuttingPlaneState,
    OnlineEGState)}
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
_MAX_DEPTH = 8


# --------------------------------------------------------------------------- encoding
def encode_state(state):
    """``(tree, arrays)``: a JSON-able tree (with its ``digest``) and named numeric arrays."""
    enc = _Encoder()
    tree = {"root": enc.node(state, 0)}
    tree["digest"] = state_digest(tree["root"], enc.arrays)
    return tree, enc.arrays


def state_digest(root, arrays):
    h = hashlib.sha256(json.dumps(root, sort_keys=True).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class _Encoder:
    def __init__(self):
        self.arrays = {}
        self.seen = {}  # id -> node number, for aliasing
        self.keep = []  # keep encoded objects alive so ids stay unique

    def array(self, a):
        name = f"a{len(self.arrays)}"
        self.arrays[name] = np.ascontiguousarray(a)
        return name

    def node(self, o, depth):
        if depth > _MAX_DEPTH:
            raise ValueError("state nests too deeply to be saved")
        if o is None or isinstance(o, (bool, np.bool_)):
            return {"t": "b", "v": None if o is None else bool(o)}
        if isinstance(o, (int, np.integer)):
            return {"t": "i", "v": int(o)}
        if isinstance(o, (float, np.floating)):
            return {"t": "f", "v": repr(float(o))}  # repr keeps inf and every bit of the float
        if isinstance(o, str):
            return {"t": "s", "v": o}
        if isinstance(o, bytes):
            return {"t": "y", "v": o.hex()}
        if id(o) in self.seen:
            return {"t": "ref", "v": self.seen[id(o)]}
        self.seen[id(o)] = len(self.seen)
        self.keep.append(o)
        num = self.seen[id(o)]
        if isinstance(o, np.ndarray):
            if o.dtype.kind not in "biuf":
                raise ValueError(f"cannot save a state array of dtype {o.dtype}")
            return {"t": "arr", "n": num, "v": self.array(o)}
        if isinstance(o, np.random.Generator):
            return {"t": "rng", "n": num, "v": _jsonable_rng_state(o.bit_generator.state)}
        if isinstance(o, (list, tuple)):
            ragged = self._ragged(o)
            if ragged is not None:
                return {"t": "ragged", "n": num, "tuple": isinstance(o, tuple), **ragged}
            return {"t": "tuple" if isinstance(o, tuple) else "list", "n": num,
                    "v": [self.node(x, depth + 1) for x in o]}
        qual = f"{type(o).__module__}.{type(o).__qualname__}"
        if qual not in STATE_CLASSES:
            raise ValueError(f"cannot save a state holding a {qual}")
        return {"t": "obj", "n": num, "cls": qual,
                "v": {k: self.node(v, depth + 1) for k, v in _fields(o).items()}}

    def _ragged(self, seq):
        """A list of n 1-D arrays (or SparseVectors) as two or three arrays, not n members."""
        if len(seq) < 2:
            return None
        if all(type(x) is np.ndarray and x.ndim == 1 and x.dtype == seq[0].dtype for x in seq) \
                and seq[0].dtype.kind in "biuf":
            lens = np.array([x.shape[0] for x in seq], np.int64)
            return {"kind": "arrays", "lens": self.array(lens), "v": self.array(np.concatenate(seq))}
        if all(type(x) is SparseVector and x.dim == seq[0].dim for x in seq):
            lens = np.array([x.indices.shape[0] for x in seq], np.int64)
            return {"kind": "sparse", "dim": seq[0].dim, "lens": self.array(lens),
                    "idx": self.array(np.concatenate([x.indices for x in seq]).astype(np.int64)),
                    "v": self.array(np.concatenate([x.values for x in seq]).astype(np.float64))}
        return None


def _fields(o):
    if isinstance(o, CornerStore):
        # the pool up to its top only: the rest is garbage or reserved, never written memory
        f = dict(vars(o))
        top = int(o.meta[0])
        f["pidx"], f["pval"] = o.pidx[:top], o.pval[:top]
        return f
    if hasattr(o, "__dict__"):
        return dict(vars(o))
    return {k: getattr(o, k) for k in type(o).__slots__}


def _jsonable_rng_state(st):
    if isinstance(st, dict):
        return {k: _jsonable_rng_state(v) for k, v in st.items()}
    if isinstance(st, np.ndarray):
        return {"__array__": st.tolist(), "dtype": st.dtype.str}
    if isinstance(st, (np.integer,)):
        return int(st)
    return st


# --------------------------------------------------------------------------- decoding
def decode_state(tree, arrays, source="state"):
    """Rebuild the state of :func:`encode_state`; ValueError naming ``source`` on any problem."""
    try:
        if not isinstance(tree, dict) or "root" not in tree or "digest" not in tree:
            raise ValueError("expected the fields 'root' and 'digest'")
        if state_digest(tree["root"], dict(arrays)) != tree["digest"]:
            raise ValueError("digest mismatch: the section is damaged or was edited")
        dec = _Decoder(arrays)
        state = dec.node(tree["root"], 0)
        check_state(state)
        return state
    except ValueError as exc:
        raise ValueError(f"{source}: invalid solver state: {exc}") from None
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
        raise ValueError(f"{source}: invalid solver state: malformed ({type(exc).__name__}: {exc})") from None


class _Decoder:
    def __init__(self, arrays):
        self.arrays = arrays
        self.made = {}

    def array(self, name):
        if not isinstance(name, str) or name not in self.arrays:
            raise ValueError(f"missing array {name!r}")
        return np.array(self.arrays[name], copy=True)

    def node(self, nd, depth):
        if depth > _MAX_DEPTH:
            raise ValueError("nested too deeply")
        t = nd["t"]
        if t == "b":
            return None if nd["v"] is None else bool(nd["v"])
        if t == "i":
            if not isinstance(nd["v"], int) or isinstance(nd["v"], bool):
                raise ValueError("an integer field is not an integer")
            return nd["v"]
        if t == "f":
            return float(nd["v"])
        if t == "s":
            return str(nd["v"])
        if t == "y":
            return bytes.fromhex(nd["v"])
        if t == "ref":
            if nd["v"] not in self.made:
                raise ValueError("a reference to an object not yet defined")
            return self.made[nd["v"]]
        value = self._compound(nd, depth)
        self.made[nd["n"]] = value
        return value

    def _compound(self, nd, depth):
        t = nd["t"]
        if t == "arr":
            return self.array(nd["v"])
        if t == "rng":
            st = _rng_state_from_json(nd["v"])
            name = st.get("bit_generator")
            if name not in _BIT_GENERATORS:
                raise ValueError(f"unknown bit generator {name!r}")
            bitgen = getattr(np.random, name)()
            bitgen.state = st
            return np.random.Generator(bitgen)
        if t in ("list", "tuple"):
            # the list exists before its items, so an item may refer back to it
            out = []
            self.made[nd["n"]] = out
            out.extend(self.node(x, depth + 1) for x in nd["v"])
            return tuple(out) if t == "tuple" else out
        if t == "ragged":
            return self._ragged(nd)
        if t == "obj":
            cls = STATE_CLASSES.get(nd["cls"])
            if cls is None:
                raise ValueError(f"class {nd['cls']!r} is not a solver-state class")
            obj = object.__new__(cls)
            self.made[nd["n"]] = obj
            for k, v in nd["v"].items():
                if not isinstance(k, str) or not k.isidentifier():
                    raise ValueError(f"bad field name {k!r}")
                setattr(obj, k, self.node(v, depth + 1))
            return obj
        raise ValueError(f"unknown node type {t!r}")

    def _ragged(self, nd):
        lens = self.array(nd["lens"])
        if lens.dtype.kind != "i" or lens.ndim != 1 or np.any(lens < 0):
            raise ValueError("ragged lengths must be non-negative integers")
        ends = np.cumsum(lens)
        vals = self.array(nd["v"])
        if vals.ndim != 1 or vals.shape[0] != (ends[-1] if len(ends) else 0):
            raise ValueError("ragged values do not match their lengths")
        starts = ends - lens
        if nd["kind"] == "arrays":
            out = [vals[s:e].copy() for s, e in zip(starts, ends)]
        elif nd["kind"] == "sparse":
            idx = self.array(nd["idx"])
            dim = int(nd["dim"])
            if idx.shape != vals.shape or idx.dtype.kind != "i" or (idx.size and (idx.min() < 0 or idx.max() >= dim)):
                raise ValueError("sparse block indices out of range")
            out = [SparseVector(idx[s:e].copy(), vals[s:e].copy(), dim) for s, e in zip(starts, ends)]
        else:
            raise ValueError(f"unknown ragged kind {nd['kind']!r}")
        return tuple(out) if nd["tuple"] else out


def _rng_state_from_json(st):
    if isinstance(st, dict):
        if "__array__" in st:
            return np.array(st["__array__"], dtype=np.dtype(st["dtype"]))
        return {k: _rng_state_from_json(v) for k, v in st.items()}
    return st


# --------------------------------------------------------------------------- structure
def check_state(state):
    """Check what compiled kernels index: shapes against (n, d), corner pools in bounds."""
    n, d = getattr(state, "n", None), getattr(state, "d", None)
    if not (isinstance(n, int) and isinstance(d, int) and n >= 1 and d >= 1):
        raise ValueError("n and d must be positive integers")
    for name in ("w", "v"):
        a = getattr(state, name, None)
        if a is not None and (not isinstance(a, np.ndarray) or a.shape != (d,) or a.dtype != np.float64):
            raise ValueError(f"{name} must be a float64 array of shape ({d},)")
    if isinstance(state, BCFWState):
        _check_bcfw(state, n, d)


def _check_bcfw(st, n, d):
    wi, scale = getattr(st, "_wi", None), getattr(st, "wi_scale", None)
    if st.dense_blocks:
        if not (isinstance(wi, np.ndarray) and wi.shape == (n, d) and wi.dtype == np.float64):
            raise ValueError(f"wi must be a float64 array of shape ({n}, {d})")
        if not (isinstance(scale, np.ndarray) and scale.shape == (n,) and scale.dtype == np.float64
                and np.all(np.isfinite(scale)) and np.all(scale > 0.0)):
            raise ValueError(f"wi_scale must be a positive float64 array of shape ({n},)")
    elif not (isinstance(wi, list) and len(wi) == n and all(isinstance(x, SparseVector) and x.dim == d
                                                             for x in wi)):
        raise ValueError(f"wi must be {n} sparse blocks of dimension {d}")
    stale = getattr(st, "rows_stale", False)
    if not isinstance(stale, bool):
        raise ValueError("rows_stale must be a bool")
    if stale and not (st.dense_blocks and st.track_alpha and st.corners is not None):
        raise ValueError("rows_stale needs dense rows and tracked corner weights to rebuild them from")
    for name in ("li", "oracle_gaps"):
        a = getattr(st, name)
        if not (isinstance(a, np.ndarray) and a.shape == (n,)):
            raise ValueError(f"{name} must have shape ({n},)")
    if st.corners is not None:
        _check_corners(st.corners, n, d)
    if st.sampler is not None:
        s = st.sampler
        if s.n != n or s.estimates.shape != (n,) or s._tree.shape != (n + 1,) or \
                (s._buffer.size and (s._buffer.min() < 0 or s._buffer.max() >= n)):
            raise ValueError("the sampler does not match the n blocks")
    for avg in (st.avg, st.avg2):
        if avg is not None and (not isinstance(avg, LazyAverage) or avg.u.shape != (d,)):
            raise ValueError(f"an average must have shape ({d},)")


def _check_corners(cs, n, d):
    if not isinstance(cs, CornerStore) or cs.n != n or cs.d != d:
        raise ValueError("the corner store does not match the problem")
    C = cs.key.shape[1] if cs.key.ndim == 2 else -1
    for name in ("key", "loss", "alpha", "last", "start", "nnz"):
        if getattr(cs, name).shape != (n, C):
            raise ValueError(f"corners.{name} must have shape ({n}, {C})")
    P = cs.pidx.shape[0]
    if cs.size.shape != (n,) or cs.size.min() < 0 or cs.size.max() > C or cs.pval.shape != (P,):
        raise ValueError("corner set sizes out of range")
    if cs.meta.shape != (2,) or not 0 <= cs.meta[0] <= P:
        raise ValueError("corner pool top out of range")
    live = np.arange(C)[None, :] < cs.size[:, None]
    start, nnz = cs.start[live], cs.nnz[live]
    if start.size and (start.min() < 0 or nnz.min() < 0 or (start + nnz).max() > cs.meta[0]):
        raise ValueError("corner entries outside the pool")
    used = np.zeros(P, bool)
    for s, m in zip(start, nnz):
        used[s:s + m] = True
    if used.any() and (cs.pidx[used].min() < 0 or cs.pidx[used].max() >= d):
        raise ValueError("corner coordinates outside 0..d-1")
