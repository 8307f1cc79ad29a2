"""A solver's complete state as plain data, for the optional warm-start section of a model file.

`encode_state` turns a state object graph (a `BCFWState`
with its corner store, sampler, averages and random generator; or an FW / SSG /
cutting-plane / online-EG state) into a JSON tree and a dict of numeric arrays;
`decode_state` rebuilds it.  Nothing is executed from a file: only classes of
`STATE_CLASSES` are rebuilt (``object.__new__`` plus attribute assignment),
random generators only of numpy's own bit generators, every other node is a number,
a string, bytes, a list or an array.  Aliasing is kept (``v is w`` when there is no
projection; the sampler draws from the state's own generator), so a loaded state
continues the run exactly like the one in memory.

A digest over the tree and the arrays detects a damaged section, not a forged one (anyone
can recompute it); the rebuilt state is therefore checked field by field
(`check_state`): exact dtypes and shapes against (n, d) and the model, indices in
range, finite values in the ranges the math gives, the identities the solvers maintain
(w = sum_i w_i, l = sum_i l_i, convex weights) and every counter a later allocation is
sized from.  A forged section is a ValueError naming the field, never an out-of-bounds
read, a NaN fit or a huge allocation.
"""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np

from .._linalg import SparseVector
from ._factored import FactoredBlocks
from ._kernels import fenwick_build
from .averaging import AVERAGINGS, LazyAverage
from .block_state import BCFWState
from .rows import SparseRows
from .corners import CornerStore, cs_rehash
from .cutting_plane import CuttingPlaneState
from .fw import FWState
from .online_eg import OnlineEGState
from .problem import LAM_FLOOR, _nonneg_set
from .sampling import SAMPLINGS, BlockSampler
from .sharded_state import ShardedState
from .ssg import SSGState

#: the classes a file may name, by their qualified names
STATE_CLASSES = {f"{c.__module__}.{c.__qualname__}": c for c in (
    BCFWState, CornerStore, BlockSampler, LazyAverage, SparseVector, FWState, SSGState, CuttingPlaneState,
    OnlineEGState, SparseRows, FactoredBlocks, ShardedState)}
#: the engine's state class lived in solvers/bcfw.py until the plan split it out: files saved
#: before name it there
STATE_CLASSES["structfw.solvers.bcfw.BCFWState"] = BCFWState
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
        h.update(a.reshape(-1).view(np.uint8))  # the bytes of tobytes(), without copying them
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
def decode_state(tree, arrays, source="state", model=None, owned=False, shard=False):
    """Rebuild the state of `encode_state` and check it (`check_state`).

    Parameters
    ----------
    tree, arrays
        The section as `encode_state` returned it (read back from a file).
    source : str
        Names the file and section in error messages.
    model : StructuredModel, optional
        The model the state is for: its dimension and positivity constraints are checked too.
    owned : bool
        The arrays were read for this call (from a file) and may become the state's own;
        otherwise each is copied.
    shard : bool
        The state is one shard's `BCFWState` of a sharded fit (its v is the round's global w;
        the sum of its blocks is checked against the other shards' when the fit continues).

    Raises
    ------
    ValueError
        On any problem, naming ``source``, the field and what was expected.
    """
    try:
        if not isinstance(tree, dict) or "root" not in tree or "digest" not in tree:
            raise ValueError("expected the fields 'root' and 'digest'")
        if state_digest(tree["root"], dict(arrays)) != tree["digest"]:
            raise ValueError("digest mismatch: the section is damaged or was edited")
        dec = _Decoder(arrays, owned=owned)
        state = dec.node(tree["root"], 0)
        unused = sorted(set(arrays) - dec.used)
        if unused:
            raise ValueError(f"arrays {unused[:3]} belong to no field")
        d = nonneg = None
        if model is not None:
            d = int(model.size_joint_feature)
            nonneg = _nonneg_set(model, d)[0]
        check_state(state, d=d, nonneg=nonneg, own=[] if shard else None)
        return state
    except ValueError as exc:
        raise ValueError(f"{source}: invalid solver state: {exc}") from None
    except (KeyError, TypeError, AttributeError, IndexError, ArithmeticError, RecursionError, MemoryError,
            UnicodeError) as exc:
        raise ValueError(f"{source}: invalid solver state: malformed ({type(exc).__name__}: {str(exc)[:120]})") \
            from None


class _Decoder:
    def __init__(self, arrays, owned=False):
        self.arrays = arrays
        self.owned = owned
        self.made = {}
        self.used = set()

    def array(self, name):
        if not isinstance(name, str) or name not in self.arrays:
            raise ValueError(f"missing array {str(name)[:40]!r}")
        if name in self.used:  # two fields would share one array: a reference is the only way to alias
            raise ValueError(f"array {name!r} is named by two fields")
        self.used.add(name)
        a = self.arrays[name]
        # each array goes to one field, so the one read from the file is used, not a copy (a BCFW
        # state is n * d * 8 bytes); a caller's own arrays (a state copied in memory) are copied
        return a if self.owned and a.flags.writeable and a.flags.c_contiguous else np.array(a, copy=True)

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
        vals = self.array(nd["v"])
        if lens.dtype.kind != "i" or lens.ndim != 1 or np.any(lens < 0) or \
                (lens.size and lens.max() > vals.shape[0]):
            raise ValueError("ragged lengths must be non-negative integers within the values stored")
        # each length is at most the values' count, so the running sum cannot wrap around
        ends = np.cumsum(lens)
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
            dtype = np.dtype(str(st["dtype"]))
            if dtype.kind not in "iu":  # bit generator states are integer arrays
                raise ValueError(f"random generator state of dtype {dtype}; expected integers")
            return np.array(st["__array__"], dtype=dtype)
        return {k: _rng_state_from_json(v) for k, v in st.items()}
    return st


# --------------------------------------------------------------------------- structure
# A state section is untrusted data: its digest is recomputable, so it proves nothing about
# who wrote it.  Everything a warm-started fit reads is checked here, before the fit: types,
# exact dtypes (the compiled kernels are typed), shapes against (n, d), index ranges, finite
# values whose squares stay finite (||w||^2 enters every dual value), the ranges the math
# gives (l_i >= 0, convex weights, 0 < c <= 1, ...), the identities the solvers maintain
# incrementally (w = sum_i w_i, l = sum_i l_i, w_i = A alpha_[i] from the tracked weights)
# and every counter a later allocation is sized from (the corner pool's live count).

#: relative rounding tolerated between a sum the solvers keep incrementally and the same sum
#: recomputed (millions of updates of ~1e-16 relative error each stay far below it)
RTOL = 1e-6
#: largest counter (steps, passes, stamps) accepted
MAX_COUNT = 2 ** 62
#: largest n or d accepted (the arrays must hold that many entries anyway)
MAX_SIZE = 2 ** 40

_BCFW_REQUIRED = ("lam", "n", "d", "w", "v", "ell", "dense_blocks", "_wi", "wi_scale", "wi_scaled", "li",
                  "track_alpha", "corners", "truth", "k", "passes", "rng", "sampler", "avg", "oracle_gaps",
                  "full_gap", "needs_refresh", "fingerprint")
# fields a state written before they existed lacks, with the value that state behaved as
_BCFW_DEFAULTS = {"rows_stale": False, "factored": None, "avg2": None, "mp_iter": 0, "mp_approx_passes": 0, "mp_work": 0.0,
                  "mp_exact_dual": 0.0, "mp_exact_cost": 0.0}
_CORNER_FIELDS = ("n", "d", "size", "key", "loss", "alpha", "last", "start", "nnz", "pidx", "pval", "meta")
_SAMPLER_FIELDS = ("kind", "n", "rng", "estimates", "_tree", "_buffer", "_pos")
_AVERAGE_FIELDS = ("kind", "t", "u", "c", "lbar")
_FW_FIELDS = ("n", "d", "w", "v", "ell", "lam", "k", "fingerprint")
_SSG_FIELDS = ("n", "d", "w", "lam", "k", "rng", "avg", "fingerprint")
_CP_FIELDS = ("n", "d", "lam", "fingerprint", "psi", "loss", "gram", "beta", "idle", "born", "w", "v", "ell", "k")
_EG_FIELDS = ("n", "d", "lam", "fingerprint", "c", "V", "wi", "li", "eta", "w", "v", "ell", "k", "rejected",
              "rng", "order", "pos", "initialised")


def _desc(x):
    if isinstance(x, np.ndarray):
        return f"a {x.dtype} array of shape {x.shape}"
    return f"a {type(x).__name__}"


def _expect_fields(obj, path, required, defaults=None):
    """The object's attributes: exactly ``required`` (+ ``defaults``, filled in when absent).

    An unexpected attribute is refused, not ignored: set on the object it would shadow a
    method or property of the class (``dual``, ``wi``) that the solver calls."""
    names = set(vars(obj)) if hasattr(obj, "__dict__") else {k for k in type(obj).__slots__ if hasattr(obj, k)}
    missing = [k for k in required if k not in names]
    if missing:
        raise ValueError(f"{path}: missing field(s) {missing}")
    extra = sorted(names - set(required) - set(defaults or ()))
    if extra:
        raise ValueError(f"{path}: unexpected field(s) {[str(e)[:40] for e in extra[:5]]}")
    for k, v in (defaults or {}).items():
        if k not in names:
            setattr(obj, k, v)


def _int(v, path, lo=0, hi=MAX_COUNT):
    if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or not lo <= v <= hi:
        raise ValueError(f"field {path!r} = {str(v)[:40]}: expected an integer in [{lo}, {hi}]")
    return int(v)


def _real(v, path, lo=-math.inf, hi=math.inf, lo_open=False, allow_inf=False, what=None):
    ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    if ok:
        v = float(v)
        ok = not math.isnan(v) and (allow_inf or math.isfinite(v)) and (v > lo if lo_open else v >= lo) and v <= hi
    if not ok:
        lb = "(" if lo_open else "["
        raise ValueError(f"field {path!r} = {str(v)[:40]}: expected {what or 'a ' + ('' if allow_inf else 'finite ') + 'number'} "
                         f"in {lb}{lo}, {hi}]")
    return v


def _bool(v, path):
    if not isinstance(v, bool):
        raise ValueError(f"field {path!r}: expected true or false, got {_desc(v)}")
    return v


def _str(v, path, choices=None, max_len=256):
    if not isinstance(v, str) or len(v) > max_len or (choices is not None and v not in choices):
        want = f"one of {sorted(choices)}" if choices is not None else f"a string of at most {max_len} characters"
        raise ValueError(f"field {path!r} = {str(v)[:40]!r}: expected {want}")
    return v


def _array(a, path, shape, dtype):
    """``a`` as an array of exactly ``dtype`` and ``shape`` (None entries: any length)."""
    want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    if not isinstance(a, np.ndarray) or a.dtype != np.dtype(dtype) or a.ndim != len(shape) or \
            any(s is not None and s != t for s, t in zip(shape, a.shape)):
        raise ValueError(f"field {path!r} is {_desc(a)}: expected a {np.dtype(dtype)} array of shape {want}")
    return a


def _finite(a, path, what="finite values", squares=True):
    """Finite values whose sum of squares is finite too (a norm or a dual value of them cannot overflow)."""
    if not np.isfinite(a).all():
        raise ValueError(f"field {path!r} holds NaN or inf: expected {what}")
    if not squares:
        return a
    flat = a.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        sq = float(np.dot(flat, flat))
    if not math.isfinite(sq):
        raise ValueError(f"field {path!r} holds values too large (their squares overflow float64): "
                         f"expected {what}")
    return a


def _in_range(a, path, lo=None, hi=None, what=None):
    if a.size and ((lo is not None and a.min() < lo) or (hi is not None and a.max() > hi)):
        bad = (a.min() if lo is not None and a.min() < lo else a.max()).item()
        raise ValueError(f"field {path!r} holds {bad!r}: expected {what or 'values'} in [{lo}, {hi}]")
    return a


def _close(a, b, scale, path, what):
    """|a - b| small against ``scale`` (a bound of the terms summed): the identity ``what`` holds."""
    err = float(np.max(np.abs(np.asarray(a, float) - np.asarray(b, float)), initial=0.0))
    if not err <= RTOL * float(scale) + 1e-300:
        raise ValueError(f"field {path!r} breaks {what} (off by {err:.3g}): the section was edited")


def _nonneg_tol(a, path, what):
    """Non-negative up to the rounding of incremental updates."""
    tol = RTOL * max(1.0, float(np.max(np.abs(a), initial=0.0))) * 1e-3
    return _in_range(a, path, lo=-tol, what=what)


def check_state(state, d=None, nonneg=None, own=None):
    """Check a rebuilt state against the structure the solvers and their kernels read.

    Parameters
    ----------
    state : object
        A state from `decode_state`.
    d : int, optional
        The model's dimension (``size_joint_feature``); checked when given.
    nonneg : ndarray of int, optional
        The model's ``nonnegative_indices``: a state then keeps v and w = Pi(v) apart;
        checked when ``d`` is given.
    own : list, optional
        The state is one shard's of a sharded fit (a `BCFWState` whose v is the round's
        global w, not the sum of its own blocks): the sums of its blocks that the fields
        determine are appended here as (sum, bound) instead of compared with v.

    Raises
    ------
    ValueError
        Naming the field (``Class.field.subfield``) and what was expected.
    """
    cls = type(state)
    if cls is ShardedState and own is None:
        _check_sharded(state, d, nonneg)
        return
    checks = {BCFWState: _check_bcfw, FWState: _check_fw, SSGState: _check_ssg,
              CuttingPlaneState: _check_cutting_plane, OnlineEGState: _check_online_eg}
    if cls not in checks or (own is not None and cls is not BCFWState):
        kinds = ["BCFWState"] if own is not None else sorted(c.__name__ for c in checks)
        raise ValueError(f"the state is a {cls.__name__}, not a solver state ({kinds})")
    path = cls.__name__
    n = _int(getattr(state, "n", None), f"{path}.n", 1, MAX_SIZE)
    dd = _int(getattr(state, "d", None), f"{path}.d", 1, MAX_SIZE)
    if d is not None and dd != d:
        raise ValueError(f"field '{path}.d' = {dd}: expected the model's dimension {d}")
    if own is None:
        checks[cls](state, path, n, dd)
    else:
        _check_bcfw(state, path, n, dd, own)
    if d is not None and hasattr(state, "v"):
        _check_projection(state, path, nonneg)
    _check_aliasing(state, path)


_SHARDED_FIELDS = ("n", "d", "lam", "fingerprint", "K", "sigma", "combine", "states", "v", "w", "ell", "rounds",
                   "steps", "passes", "avg", "full_gap", "needs_refresh", "last_gamma", "entropy", "files_round")
# fields a sharded state written before they existed lacks (MP-BCFW on shards), as that state behaved
_SHARDED_DEFAULTS = {"mp_iter": 0, "mp_approx_passes": 0, "mp_work": 0.0, "mp_exact_dual": 0.0,
                     "mp_exact_cost": 0.0}


def _check_sharded(st, d, nonneg):
    """A sharded fit's state (`structfw.solvers.sharded_state.ShardedState`): its global numbers, each
    shard's engine state on its own (`check_state` with ``own``), and across the shards the identities
    the rounds keep: sum_k n_k = n, lam_k = lam n / (n_k sigma'), l = sum_k (n_k / n) l_k and
    v = sum_k w_k / sigma' with w = Pi(v) (where the fields determine the shards' block sums; factored
    label weights need the data and are checked when the fit continues)."""
    path = "ShardedState"
    if "v" not in vars(st):  # written before positivity ran on shards: v was w
        st.v = st.w
    _expect_fields(st, path, _SHARDED_FIELDS, _SHARDED_DEFAULTS)
    n = _int(st.n, f"{path}.n", 1, MAX_SIZE)
    dd = _int(st.d, f"{path}.d", 1, MAX_SIZE)
    if d is not None and dd != d:
        raise ValueError(f"field '{path}.d' = {dd}: expected the model's dimension {d}")
    lam = _lam(st, path, n)
    _str(st.fingerprint, f"{path}.fingerprint")
    K = _int(st.K, f"{path}.K", 1, n)
    combine = _str(st.combine, f"{path}.combine", ("linesearch", "average", "add"))
    sigma = _real(st.sigma, f"{path}.sigma", 1.0, float(K))
    if sigma != (float(K) if combine == "add" else 1.0):
        raise ValueError(f"field '{path}.sigma' = {sigma!r}: expected sigma' = K = {K} with combine='add' and 1 "
                         "otherwise")
    _primal_point(st, path, dd)
    if d is not None:
        _check_projection(st, path, nonneg)
    ell = _real(st.ell, f"{path}.ell")
    rounds = _int(st.rounds, f"{path}.rounds")
    _int(st.steps, f"{path}.steps")
    _int(st.passes, f"{path}.passes")
    if st.files_round is not None:
        _int(st.files_round, f"{path}.files_round", 0, rounds)
    mp_iter = _check_sharded_mp(st, path)
    _int(st.entropy, f"{path}.entropy", 0, 2 ** 256)
    _real(st.full_gap, f"{path}.full_gap", allow_inf=True)
    if st.full_gap == -math.inf:
        raise ValueError(f"field '{path}.full_gap' = -inf: expected a gap (inf: none measured yet)")
    _bool(st.needs_refresh, f"{path}.needs_refresh")
    if not isinstance(st.last_gamma, float):
        raise ValueError(f"field '{path}.last_gamma' is {_desc(st.last_gamma)}: expected a number (NaN: no round)")
    if st.avg is not None:
        if not isinstance(st.avg, tuple) or len(st.avg) != 4:
            raise ValueError(f"field '{path}.avg' is {_desc(st.avg)}: expected (kind, t, w_bar, l_bar) or null")
        _str(st.avg[0], f"{path}.avg[0]", [k for k in AVERAGINGS if k is not None])
        _int(st.avg[1], f"{path}.avg[1]")
        _finite(_array(st.avg[2], f"{path}.avg[2]", (dd,), np.float64), f"{path}.avg[2]")
        _real(st.avg[3], f"{path}.avg[3]")
    states = st.states
    if not isinstance(states, list) or len(states) != K:
        raise ValueError(f"field '{path}.states' is {_desc(states)}: expected a list of K = {K} shard states")
    missing = [s is None for s in states]
    if any(missing):
        if not all(missing):
            raise ValueError(f"field '{path}.states' holds {sum(missing)} null entries of {K}: expected every "
                             "shard's state, or none (their workers keep them)")
        _check_distinct(st, path)
        return
    sums, sizes = [], []
    for k, s in enumerate(states):
        own = []
        try:
            check_state(s, d=dd, nonneg=nonneg, own=own)
        except ValueError as exc:
            raise ValueError(f"shard {k} ('{path}.states[{k}]'): {exc}") from None
        sizes.append(s.n)
        sums.append(own[0] if own else None)
        if s.mp_iter > mp_iter:
            raise ValueError(f"field '{path}.states[{k}].mp_iter' = {s.mp_iter}: expected at most the fit's outer "
                             f"iterations '{path}.mp_iter' = {mp_iter} (a shard's rounds take the fit's)")
        lam_k = lam * n / (s.n * sigma)
        if not math.isclose(s.lam, lam_k, rel_tol=1e-9):
            raise ValueError(f"field '{path}.states[{k}].lam' = {s.lam!r}: expected lam n / (n_k sigma') = {lam_k!r}")
    if sum(sizes) != n:
        raise ValueError(f"field '{path}.states': the shards hold {sum(sizes)} blocks in all: expected n = {n}")
    weights = np.array(sizes, float) / n
    _close(ell, float(weights @ [s.ell for s in states]), float(weights @ [abs(s.ell) for s in states]) + 1e-300,
           f"{path}.ell", "l = sum_k (n_k / n) l_k")
    if all(x is not None for x in sums):
        total = sum(x[0] for x in sums) / sigma
        _close(st.v, total, sum(x[1] for x in sums) / sigma, f"{path}.v", "v = sum_k w_k (the shards' blocks)")
    _check_distinct(st, path)


def _check_sharded_mp(st, path):
    """MP-BCFW's global numbers of a sharded state (as `BCFWState`'s own): counts, a work counter >= 0,
    the exact pass's dual and cost.  Returns the outer iterations."""
    mp_iter = _int(st.mp_iter, f"{path}.mp_iter")
    _int(st.mp_approx_passes, f"{path}.mp_approx_passes")
    _real(st.mp_work, f"{path}.mp_work", 0.0)
    _real(st.mp_exact_dual, f"{path}.mp_exact_dual")
    _real(st.mp_exact_cost, f"{path}.mp_exact_cost", 0.0)
    return mp_iter


def _check_distinct(st, path):
    """No array or object shared between two shards' states, or with the global fields (a forged
    reference would let one shard's writes change another's)."""
    owner = {}

    def visit(o, where, depth):
        if depth > _MAX_DEPTH or o is None or isinstance(o, (bool, int, float, str, bytes)):
            return
        if id(o) in owner:
            if owner[id(o)][0] != where[0]:
                raise ValueError(f"field {where[1]!r} refers to the same object as {owner[id(o)][1]!r}: "
                                 "expected its own")
            return
        owner[id(o)] = where
        if isinstance(o, (list, tuple)):
            for i, x in enumerate(o):
                visit(x, (where[0], f"{where[1]}[{i}]"), depth + 1)
        elif type(o) in STATE_CLASSES.values():
            for k, v in _fields_of(o).items():
                visit(v, (where[0], f"{where[1]}.{k}"), depth + 1)

    for k, v in _fields_of(st).items():
        if k == "states":
            for i, s in enumerate(v):
                visit(s, (i, f"{path}.states[{i}]"), 1)
        else:
            visit(v, (-1, f"{path}.{k}"), 1)


def _lam(st, path, n):
    lam = _real(st.lam, f"{path}.lam", 0.0, lo_open=True, what="a positive finite number")
    if lam < LAM_FLOOR:   # no fit runs below it (check_lam), so no state of one exists
        raise ValueError(f"field '{path}.lam' = {lam!r}: below the smallest lam a fit accepts, {LAM_FLOOR:g}")
    if not math.isfinite(1.0 / (lam * n)):
        raise ValueError(f"field '{path}.lam' = {lam!r}: too small (1 / (lam n) overflows)")
    return lam


def _primal_point(st, path, d):
    """w, and v = A alpha (the same array, or apart with positivity constraints)."""
    _finite(_array(st.w, f"{path}.w", (d,), np.float64), f"{path}.w")
    if st.v is not st.w:
        _finite(_array(st.v, f"{path}.v", (d,), np.float64), f"{path}.v")


def _check_projection(st, path, nonneg):
    if nonneg is None:
        if st.v is not st.w:
            raise ValueError(f"field '{path}.v': expected the same array as w (the model has no "
                             "nonnegative_indices)")
        return
    if st.v is st.w:
        raise ValueError(f"field '{path}.v': expected an array apart from w (the model constrains w_S >= 0)")
    proj = st.v.copy()
    proj[nonneg] = np.maximum(proj[nonneg], 0.0)
    _close(st.w, proj, np.max(np.abs(st.v), initial=0.0), f"{path}.w", "w = Pi(v)")


def _check_aliasing(state, path):
    """No two fields share an array or object, except v is w and the sampler's generator is the state's:
    a forged reference (``li`` sharing ``oracle_gaps``) would let one field's writes change another."""
    allowed = {id(getattr(state, "w", None))}
    rng = getattr(state, "rng", None)
    seen = {}

    def visit(o, where, depth):
        if depth > _MAX_DEPTH or o is None or isinstance(o, (bool, int, float, str, bytes)):
            return
        if id(o) in seen:
            if not ((id(o) in allowed and where == f"{path}.v") or (o is rng and where == f"{path}.sampler.rng")):
                raise ValueError(f"field {where!r} refers to the same object as {seen[id(o)]!r}: expected its own")
            return
        seen[id(o)] = where
        if isinstance(o, (list, tuple)):
            for i, x in enumerate(o):
                visit(x, f"{where}[{i}]", depth + 1)
        elif type(o) in STATE_CLASSES.values():
            for k, v in _fields_of(o).items():
                visit(v, f"{where}.{k}", depth + 1)

    fields = _fields_of(state)
    for k in ("w", "rng"):  # the owners first: the aliases allowed are their second names
        if k in fields:
            visit(fields[k], f"{path}.{k}", 1)
    for k, v in fields.items():
        if k not in ("w", "rng"):
            visit(v, f"{path}.{k}", 1)


def _fields_of(o):
    if hasattr(o, "__dict__"):
        return dict(vars(o))
    return {k: getattr(o, k) for k in type(o).__slots__ if hasattr(o, k)}


def _ell_and_li(st, path, n):
    ell = _real(st.ell, f"{path}.ell")
    li = _finite(_array(st.li, f"{path}.li", (n,), np.float64), f"{path}.li")
    _nonneg_tol(li, f"{path}.li", "l_i = b^T alpha_[i] >= 0")
    _close(ell, li.sum(), np.abs(li).sum(), f"{path}.ell", "l = sum_i l_i")
    return li


def _check_sparse_rows(st, path, n, d, stale, own=None):
    """Sparse blocks: `SparseRows` with its scales, or (files saved before it) a list of n
    SparseVector with no scales, which is then converted."""
    if isinstance(st._wi, list):
        if st.wi_scale is not None:
            raise ValueError(f"field '{path}.wi_scale': expected null with a list of sparse blocks")
        if len(st._wi) != n:
            raise ValueError(f"field '{path}._wi' is {_desc(st._wi)}: expected a list of {n} sparse blocks")
        for i, x in enumerate(st._wi):
            _check_sparse(x, f"{path}._wi[{i}]", d)
        st.wi = st._wi  # the setter builds the rows (scales 1)
    if not isinstance(st._wi, SparseRows):
        raise ValueError(f"field '{path}._wi' is {_desc(st._wi)}: expected sparse rows (SparseRows) or dense rows")
    R = st._wi
    p = f"{path}._wi"
    if _int(R.n, f"{p}.n") != n or _int(R.d, f"{p}.d") != d:
        raise ValueError(f"field '{p}' has n = {R.n}, d = {R.d}: expected {n} and {d}")
    start = _array(R.start, f"{p}.start", (n,), np.int64)
    nnz = _array(R.nnz, f"{p}.nnz", (n,), np.int64)
    cap = _array(R.cap, f"{p}.cap", (n,), np.int64)
    idx = np.asarray(R.idx)
    val = np.asarray(R.val)
    if idx.dtype != np.int64 or val.dtype != np.float64 or idx.ndim != 1 or idx.shape != val.shape:
        raise ValueError(f"fields '{p}.idx/val' are {_desc(idx)} and {_desc(val)}: expected int64 and float64 "
                         "pools of one length")
    meta = _array(R.meta, f"{p}.meta", (2,), np.int64)
    P = idx.shape[0]
    if not (0 <= meta[0] <= P):
        raise ValueError(f"field '{p}.meta' top {int(meta[0])} is outside the pool of {P} entries")
    if np.any(nnz < 0) or np.any(nnz > cap) or np.any(start < 0) or np.any(start + cap > meta[0]):
        raise ValueError(f"fields '{p}.start/nnz/cap' put a row outside the pool's used part: expected "
                         "0 <= nnz <= cap and start + cap <= top")
    scale = _array(st.wi_scale, f"{path}.wi_scale", (n,), np.float64)
    _in_range(_finite(scale, f"{path}.wi_scale"), f"{path}.wi_scale", lo=np.nextafter(0.0, 1.0),
              what="positive row scales")
    held = np.flatnonzero(cap > 0)  # rows that hold a slot of the pool
    order = held[np.argsort(start[held], kind="stable")]
    ends = start[order] + cap[order]
    if order.size > 1 and np.any(ends[:-1] > start[order][1:]):
        raise ValueError(f"fields '{p}.start/cap': rows overlap in the pool")
    total = np.zeros(d)
    bound = 0.0
    for i in range(n):
        a, m = int(start[i]), int(nnz[i])
        ri, rv = idx[a:a + m], val[a:a + m]
        if m and (ri[0] < 0 or ri[-1] >= d or np.any(np.diff(ri) <= 0)):
            raise ValueError(f"field '{p}' row {i}: expected strictly increasing indices in [0, {d})")
        if not np.isfinite(rv).all():
            raise ValueError(f"field '{p}' row {i}: expected finite values")
        if not stale:
            np.add.at(total, ri, rv * scale[i])
            bound += float(np.abs(rv).sum()) * float(scale[i])
    if not stale:
        if not np.isfinite(total).all():
            raise ValueError(f"field '{p}' overflows its sum: expected blocks summing to w")
        _v_identity(st, total, bound, path, "v = sum_i w_i", own)


def _v_identity(st, total, bound, path, what, own):
    """v equals the blocks' sum ``total`` -- or, for a shard's state (``own`` a list), whose v is the
    round's global w, the sum is kept in ``own`` for `_check_sharded`."""
    if own is None:
        _close(st.v, total, bound, f"{path}.v", what)
    else:
        own.append((total, bound))


def _check_bcfw(st, path, n, d, own=None):
    _expect_fields(st, path, _BCFW_REQUIRED, _BCFW_DEFAULTS)
    lam = _lam(st, path, n)
    _primal_point(st, path, d)
    _ell_and_li(st, path, n)
    dense = _bool(st.dense_blocks, f"{path}.dense_blocks")
    track = _bool(st.track_alpha, f"{path}.track_alpha")
    stale = _bool(st.rows_stale, f"{path}.rows_stale")
    _bool(st.wi_scaled, f"{path}.wi_scaled")
    entries = None
    if st.corners is not None:
        entries = _check_corners(st.corners, f"{path}.corners", n, d, track)
        if bool(st.corners.labels) != (st.factored is not None):
            raise ValueError(f"field '{path}.corners.labels' is {st.corners.labels!r}: expected corner sets of "
                             "labellings exactly when the state is factored (st.factored set)")
    elif track:
        raise ValueError(f"field '{path}.corners' is missing: expected the corner sets whose weights "
                         "track_alpha=true tracks")
    if st.factored is not None:
        _check_factored(st, path, n, d, stale, entries)
    elif dense:
        wi = _finite(_array(st._wi, f"{path}._wi", (n, d), np.float64), f"{path}._wi")
        scale = _array(st.wi_scale, f"{path}.wi_scale", (n,), np.float64)
        _in_range(_finite(scale, f"{path}.wi_scale"), f"{path}.wi_scale", lo=np.nextafter(0.0, 1.0),
                  what="positive row scales")
        if not st.wi_scaled and np.any(scale != 1.0):
            raise ValueError(f"field '{path}.wi_scale' holds scales other than 1 while wi_scaled is false: "
                             "expected unit scales (the rows are read unscaled)")
        if not stale:
            # sum_i scale_i row_i without an (n, d) temporary; the bound of the terms from the row norms
            total = scale @ wi
            if not np.isfinite(total).all():
                raise ValueError(f"field '{path}.wi_scale' overflows the block sum: expected scales of rows summing to w")
            norms = np.sqrt(np.einsum("ij,ij->i", wi, wi))
            _v_identity(st, total, float(np.abs(scale) @ norms), path, "v = sum_i w_i", own)
    else:
        _check_sparse_rows(st, path, n, d, stale, own)
    if stale and not (track and st.corners is not None):
        raise ValueError(f"field '{path}.rows_stale' is true: expected tracked corner weights "
                         "to rebuild the rows from")
    if track and st.factored is not None:
        _check_labelling_identities(st, path, n, lam, entries)
    elif track:
        _check_alpha_identities(st, path, n, d, lam, entries, own)
    _check_truth(st.truth, f"{path}.truth", n)
    _int(st.k, f"{path}.k")
    _int(st.passes, f"{path}.passes")
    _int(st.mp_iter, f"{path}.mp_iter")
    _int(st.mp_approx_passes, f"{path}.mp_approx_passes")
    _real(st.mp_work, f"{path}.mp_work", 0.0)
    _real(st.mp_exact_dual, f"{path}.mp_exact_dual")
    _real(st.mp_exact_cost, f"{path}.mp_exact_cost", 0.0)
    _rng(st.rng, f"{path}.rng")
    if st.sampler is not None:
        _check_sampler(st.sampler, f"{path}.sampler", n)
    for name in ("avg", "avg2"):
        if getattr(st, name) is not None:
            _check_average(getattr(st, name), f"{path}.{name}", d, st.w)
    if st.avg2 is not None and st.avg is None:
        raise ValueError(f"field '{path}.avg2' is set without '{path}.avg': expected both or neither")
    og = _array(st.oracle_gaps, f"{path}.oracle_gaps", (n,), np.float64)
    if np.isnan(og).any() or np.isneginf(og).any():
        raise ValueError(f"field '{path}.oracle_gaps' holds NaN or -inf: expected block gaps (inf: never visited)")
    _real(st.full_gap, f"{path}.full_gap", allow_inf=True)
    if st.full_gap == -math.inf:
        raise ValueError(f"field '{path}.full_gap' = -inf: expected a gap (inf: none measured yet)")
    _bool(st.needs_refresh, f"{path}.needs_refresh")
    _str(st.fingerprint, f"{path}.fingerprint")


def _check_factored(st, path, n, d, rows_needed, entries):
    """A factored state (`structfw.solvers._factored.FactoredBlocks`): block starts, label weights and
    transitions of consistent shapes, finite, and no rows; its corner sets' labellings (``entries``)
    one state in [0, K) per position of their block.  That they belong to the training set and sum to
    w is checked when the state is continued (`FactoredBlocks.check_layout`): it needs the data."""
    fb, p = st.factored, f"{path}.factored"
    if type(fb) is not FactoredBlocks:
        raise ValueError(f"field {p!r} is {_desc(fb)}: expected FactoredBlocks or None")
    _expect_fields(fb, p, ("starts", "A", "T"))
    starts = _array(fb.starts, f"{p}.starts", (n + 1,), np.int64)
    if starts[0] != 0 or np.any(np.diff(starts) < 0):
        raise ValueError(f"field '{p}.starts' is not a run of block starts: expected 0 = starts[0] <= starts[1] <= ...")
    A = _finite(_array(fb.A, f"{p}.A", (int(starts[-1]), None), np.float64), f"{p}.A")
    K = A.shape[1]
    if K < 1 or K * K > d:
        raise ValueError(f"field '{p}.A' has {K} labels: expected 1 <= K and K*K <= d = {d}")
    _finite(_array(fb.T, f"{p}.T", (n, K, K), np.float64), f"{p}.T")
    _array(st._wi, f"{path}._wi", (n, 0), np.float64)
    _array(st.wi_scale, f"{path}.wi_scale", (n,), np.float64)
    if rows_needed or not st.dense_blocks:
        raise ValueError(f"field {p!r} is set with rows_stale or sparse blocks: expected a factored "
                         "state (dense_blocks true, rows_stale false)")
    if entries is not None:
        cs, (labels, values, _) = st.corners, entries
        live = np.arange(cs.key.shape[1])[None, :] < cs.size[:, None]
        lengths = np.diff(starts)[np.nonzero(live)[0]]
        if not np.array_equal(cs.nnz[live], lengths):
            raise ValueError(f"field '{path}.corners.nnz': expected each labelling to have its block's length "
                             "(the factored state's block starts)")
        _in_range(labels, f"{path}.corners.pidx", 0, K - 1, "labels")
        if np.any(values != 0.0):
            raise ValueError(f"field '{path}.corners.pval': expected zeros (a store of labellings)")


def _check_sparse(x, path, d):
    if type(x) is not SparseVector:
        raise ValueError(f"field {path!r} is {_desc(x)}: expected a SparseVector")
    idx = _array(x.indices, f"{path}.indices", (None,), np.int64)
    _finite(_array(x.values, f"{path}.values", idx.shape, np.float64), f"{path}.values")
    if x.dim != d:
        raise ValueError(f"field '{path}.dim' = {x.dim}: expected {d}")
    _in_range(idx, f"{path}.indices", 0, d - 1, "coordinates")
    if idx.size > 1 and np.any(np.diff(idx) <= 0):
        raise ValueError(f"field '{path}.indices': expected strictly increasing coordinates")


def _check_truth(truth, path, n):
    # kept for inspection only (no solver reads it): its form is checked, not its content
    if not (isinstance(truth, tuple) and len(truth) == 2
            and all(isinstance(t, (list, tuple)) and len(t) == n for t in truth)):
        raise ValueError(f"field {path!r}: expected a pair of {n}-item lists (keys and labellings)")


def _rng(g, path):
    if not isinstance(g, np.random.Generator):
        raise ValueError(f"field {path!r} is {_desc(g)}: expected a numpy random generator")


def _check_sampler(s, path, n):
    if type(s) is not BlockSampler:
        raise ValueError(f"field {path!r} is {_desc(s)}: expected a BlockSampler")
    _expect_fields(s, path, _SAMPLER_FIELDS)
    kind = _str(s.kind, f"{path}.kind", SAMPLINGS)
    if _int(s.n, f"{path}.n", 1, MAX_SIZE) != n:
        raise ValueError(f"field '{path}.n' = {s.n}: expected the state's n = {n}")
    _rng(s.rng, f"{path}.rng")
    est = _finite(_array(s.estimates, f"{path}.estimates", (n,), np.float64), f"{path}.estimates")
    _in_range(est, f"{path}.estimates", lo=0.0, what="block gap estimates (clipped at 0)")
    if not math.isfinite(float(est.sum())):
        raise ValueError(f"field '{path}.estimates' overflows its sum: expected block gap estimates")
    tree = _finite(_array(s._tree, f"{path}._tree", (n + 1,), np.float64), f"{path}._tree")
    if kind == "gap":
        # the Fenwick tree of the estimates; kept incrementally between rebuilds, so up to rounding
        _close(tree, fenwick_build(est), est.sum(), f"{path}._tree", "the Fenwick tree of the estimates")
    buf = _array(s._buffer, f"{path}._buffer", (None,), np.int64)
    if buf.shape[0] not in (0, n):
        raise ValueError(f"field '{path}._buffer' has {buf.shape[0]} entries: expected 0 or {n}")
    _in_range(buf, f"{path}._buffer", 0, n - 1, "block indices")
    _int(s._pos, f"{path}._pos", 0, buf.shape[0])


def _check_average(a, path, d, w):
    if type(a) is not LazyAverage:
        raise ValueError(f"field {path!r} is {_desc(a)}: expected a LazyAverage")
    _expect_fields(a, path, _AVERAGE_FIELDS)
    _str(a.kind, f"{path}.kind", [k for k in AVERAGINGS if k is not None])
    _int(a.t, f"{path}.t")
    # u ~ -delta / c may be large when c is small; only wbar = c u + w is ever formed
    _finite(_array(a.u, f"{path}.u", (d,), np.float64), f"{path}.u", squares=False)
    # c only shrinks from 1 (c_t = (1 - rho_t) c_{t-1}) and is renormalised below 1e-150, so a
    # smaller c is forged (1 / c would blow u up)
    c = _real(a.c, f"{path}.c", 1e-160, 1.0)
    _real(a.lbar, f"{path}.lbar")
    with np.errstate(over="ignore", invalid="ignore"):
        wbar = c * a.u + w
    _finite(wbar, f"{path}.u", "an average wbar = c u + w whose squares are finite")


def _check_corners(cs, path, n, d, track):
    """Check a corner store; returns its live pool entries (coordinates, values, corner number)."""
    if type(cs) is not CornerStore:
        raise ValueError(f"field {path!r} is {_desc(cs)}: expected a CornerStore")
    _expect_fields(cs, path, _CORNER_FIELDS, {"labels": False})
    _bool(cs.labels, f"{path}.labels")
    if _int(cs.n, f"{path}.n", 1, MAX_SIZE) != n or _int(cs.d, f"{path}.d", 1, MAX_SIZE) != d:
        raise ValueError(f"fields '{path}.n', '{path}.d' = ({cs.n}, {cs.d}): expected the state's ({n}, {d})")
    key = _array(cs.key, f"{path}.key", (n, None), np.uint64)
    C = key.shape[1]
    if C < 2:
        raise ValueError(f"field '{path}.key' has {C} slots per block: expected at least 2")
    size = _in_range(_array(cs.size, f"{path}.size", (n,), np.int64), f"{path}.size", 0, C, "corner set sizes")
    loss = _finite(_array(cs.loss, f"{path}.loss", (n, C), np.float64), f"{path}.loss")
    alpha = _finite(_array(cs.alpha, f"{path}.alpha", (n, C), np.float64), f"{path}.alpha")
    last = _array(cs.last, f"{path}.last", (n, C), np.int64)
    start = _array(cs.start, f"{path}.start", (n, C), np.int64)
    nnz = _array(cs.nnz, f"{path}.nnz", (n, C), np.int64)
    pidx = _array(cs.pidx, f"{path}.pidx", (None,), np.int64)
    P = pidx.shape[0]
    if cs.labels:  # a labelling has no values: none are saved (files saved before kept zeros: dropped here)
        pval = _array(cs.pval, f"{path}.pval", (None,), np.float64)
        if pval.shape[0] not in (0, P) or np.any(pval != 0.0):
            raise ValueError(f"field '{path}.pval': expected no values (a store of labellings)")
        cs.pval = pval = np.empty(0)
    else:
        pval = _array(cs.pval, f"{path}.pval", (P,), np.float64)
    meta = _array(cs.meta, f"{path}.meta", (2,), np.int64)
    live = np.arange(C)[None, :] < size[:, None]
    _in_range(loss[live], f"{path}.loss", lo=0.0, what="task losses")
    _in_range(last[live], f"{path}.last", 0, MAX_COUNT, "stamps")
    s, m = start[live], nnz[live]
    _in_range(m, f"{path}.nnz", 0, P, "entry counts")
    _in_range(s, f"{path}.start", 0, P, "pool offsets")
    if not 0 <= meta[0] <= P:
        raise ValueError(f"field '{path}.meta' has pool top {meta[0]}: expected one in [0, {P}] (the pool stored)")
    if s.size and (s + m).max() > meta[0]:
        raise ValueError(f"field '{path}.start' puts corner entries outside the pool (top {meta[0]})")
    # the live count sizes the pool's next growth: it must be the entries the corners hold
    if meta[1] != int(m.sum()):
        raise ValueError(f"field '{path}.meta' counts {meta[1]} live entries: expected {int(m.sum())}, "
                         "the entries of the live corners")
    nonempty = m > 0  # an empty corner (the ground truth's psi = 0) may sit at any offset
    order = np.argsort(s[nonempty], kind="stable")
    so, eo = s[nonempty][order], (s + m)[nonempty][order]
    if so.size > 1 and np.any(so[1:] < eo[:-1]):
        raise ValueError(f"field '{path}.start': corners overlap in the pool; expected disjoint entries")
    # every live entry, corner by corner (disjoint, so at most P of them)
    total = int(m.sum())
    first = np.repeat(s - (np.cumsum(m) - m), m)
    entries = first + np.arange(total)
    pi, pv = pidx[entries], (np.zeros(total) if cs.labels else pval[entries])
    _in_range(pi, f"{path}.pidx", 0, d - 1, "coordinates")
    _finite(pv, f"{path}.pval")
    seg = np.repeat(np.arange(m.shape[0]), m)
    same = seg[1:] == seg[:-1]
    if not cs.labels and np.any(np.diff(pi)[same] <= 0):  # a labelling's states repeat
        raise ValueError(f"field '{path}.pidx': expected strictly increasing coordinates within each corner")
    cs_rehash(cs.arrays)  # derived from the entries just checked: never trusted from the file
    if track:
        a = alpha[live]
        _in_range(a, f"{path}.alpha", lo=-1e-12, what="convex weights (>= 0)")
        if np.any(size < 1):
            raise ValueError(f"field '{path}.size': every block needs a corner to hold its weights")
        sums = np.where(live, alpha, 0.0).sum(axis=1)
        bad = np.flatnonzero(np.abs(sums - 1.0) > RTOL)
        if bad.size:
            raise ValueError(f"field '{path}.alpha': block {int(bad[0])}'s weights sum to {sums[bad[0]]!r}; "
                             "expected convex weights summing to 1")
    return pi, pv, seg


def _check_alpha_identities(st, path, n, d, lam, entries, own=None):
    """With tracked weights, w_i = A alpha_[i] and l_i = b^T alpha_[i] are determined by the corners."""
    cs = st.corners
    pi, pv, seg = entries
    live = np.arange(cs.key.shape[1])[None, :] < cs.size[:, None]
    a, L = cs.alpha[live], cs.loss[live]
    blocks = np.nonzero(live)[0]
    inv = 1.0 / (lam * n)
    v = np.bincount(pi, weights=pv * a[seg], minlength=d) * inv
    bound = float(np.abs(pv * a[seg]).sum()) * inv
    _v_identity(st, v, bound, path, "v = A alpha (the corners' tracked weights)", own)
    _check_loss_identity(st, path, n, blocks, a, L)


def _check_loss_identity(st, path, n, blocks, a, L):
    """l_i = b^T alpha_[i]: the live corners' weights ``a`` times their losses ``L``, per block."""
    li = np.bincount(blocks, weights=a * L, minlength=n) / n
    _close(st.li, li, float(np.abs(a * L).sum()) / n + 1e-300, f"{path}.li",
           "l_i = b^T alpha_[i] (the corners' tracked weights)")


def _check_labelling_identities(st, path, n, lam, entries):
    """With tracked weights on the factored storage, each block's label weights are those of its active
    labellings, A_i = sum_y alpha_i(y) (e_{y_i,t} - e_{y_t})_t / (lam n), and l_i = b^T alpha_[i]."""
    cs, fb = st.corners, st.factored
    labels, _, seg = entries
    live = np.arange(cs.key.shape[1])[None, :] < cs.size[:, None]
    a, L, m = cs.alpha[live], cs.loss[live], cs.nnz[live]
    blocks = np.nonzero(live)[0]
    _check_loss_identity(st, path, n, blocks, a, L)
    truth = np.concatenate([np.atleast_1d(np.asarray(y, np.int64)).ravel() for y in st.truth[1]] or [np.zeros(0, int)])
    if truth.shape[0] != fb.A.shape[0] or np.any((truth < 0) | (truth >= fb.A.shape[1])):
        raise ValueError(f"field '{path}.truth' does not label the factored state's positions: expected one "
                         f"label in [0, {fb.A.shape[1]}) per position")
    # position of every labelling entry: its block's start plus its offset within the labelling
    pos = np.repeat(fb.starts[blocks], m) + (np.arange(labels.shape[0]) - np.repeat(np.cumsum(m) - m, m))
    c = a[seg] / (lam * n)
    A = np.zeros_like(fb.A)
    np.add.at(A, (pos, truth[pos]), c)
    np.add.at(A, (pos, labels), -c)
    _close(fb.A.ravel(), A.ravel(), float(np.abs(c).sum()) + 1e-300, f"{path}.factored.A",
           "label weights A_i = sum_y alpha_i(y) psi_i(y) / (lam n) (the corners' tracked weights)")


def _check_fw(st, path, n, d):
    _expect_fields(st, path, _FW_FIELDS)
    _lam(st, path, n)
    _primal_point(st, path, d)
    _real(st.ell, f"{path}.ell")
    _int(st.k, f"{path}.k")
    _str(st.fingerprint, f"{path}.fingerprint")


def _check_ssg(st, path, n, d):
    _expect_fields(st, path, _SSG_FIELDS)
    _lam(st, path, n)
    _finite(_array(st.w, f"{path}.w", (d,), np.float64), f"{path}.w")
    _int(st.k, f"{path}.k")
    _rng(st.rng, f"{path}.rng")
    if st.avg is not None:
        _check_average(st.avg, f"{path}.avg", d, st.w)
    _str(st.fingerprint, f"{path}.fingerprint")


def _check_cutting_plane(st, path, n, d):
    _expect_fields(st, path, _CP_FIELDS)
    lam = _lam(st, path, n)
    _primal_point(st, path, d)
    psi = _finite(_array(st.psi, f"{path}.psi", (None, d), np.float64), f"{path}.psi")
    m = psi.shape[0]
    loss = _finite(_array(st.loss, f"{path}.loss", (m,), np.float64), f"{path}.loss")
    _in_range(loss, f"{path}.loss", lo=0.0, what="averaged task losses")
    gram = _finite(_array(st.gram, f"{path}.gram", (m, m), np.float64), f"{path}.gram")
    norms = np.sqrt(np.einsum("ij,ij->i", psi, psi))
    _close(gram, psi @ psi.T, float(norms.max(initial=0.0)) ** 2, f"{path}.gram", "gram = Psi Psi^T")
    beta = _finite(_array(st.beta, f"{path}.beta", (m,), np.float64), f"{path}.beta")
    _in_range(beta, f"{path}.beta", lo=0.0, what="dual weights (>= 0, summing to at most 1)")
    if beta.sum() > 1.0 + RTOL:
        raise ValueError(f"field '{path}.beta' sums to {beta.sum()!r}: expected dual weights summing to at most 1")
    _in_range(_array(st.idle, f"{path}.idle", (m,), np.int64), f"{path}.idle", 0, MAX_COUNT, "counts")
    _in_range(_array(st.born, f"{path}.born", (m,), np.int64), f"{path}.born", 0, MAX_COUNT, "iterations")
    ell = _real(st.ell, f"{path}.ell")
    v = (beta @ psi) / lam if m else np.zeros(d)
    _close(st.v, v, float(beta @ norms) / lam, f"{path}.v", "v = Psi^T beta / lam")
    _close(ell, float(beta @ loss) if m else 0.0, float(beta @ loss) if m else 0.0, f"{path}.ell",
           "l = L^T beta")
    _int(st.k, f"{path}.k")
    _str(st.fingerprint, f"{path}.fingerprint")


def _check_online_eg(st, path, n, d):
    _expect_fields(st, path, _EG_FIELDS)
    _lam(st, path, n)
    _primal_point(st, path, d)
    _finite(_array(st.c, f"{path}.c", (n,), np.float64), f"{path}.c")
    _finite(_array(st.V, f"{path}.V", (n, d), np.float64), f"{path}.V")
    wi = _finite(_array(st.wi, f"{path}.wi", (n, d), np.float64), f"{path}.wi")
    eta = _finite(_array(st.eta, f"{path}.eta", (n,), np.float64), f"{path}.eta")
    _in_range(eta, f"{path}.eta", lo=np.nextafter(0.0, 1.0), what="positive step sizes")
    _ell_and_li(st, path, n)
    if _bool(st.initialised, f"{path}.initialised"):
        norms = np.sqrt(np.einsum("ij,ij->i", wi, wi))
        _close(st.v, wi.sum(axis=0), float(norms.sum()), f"{path}.v", "v = sum_i w_i")
    _int(st.k, f"{path}.k")
    _int(st.rejected, f"{path}.rejected")
    _rng(st.rng, f"{path}.rng")
    if st.order is not None:
        _in_range(_array(st.order, f"{path}.order", (n,), np.int64), f"{path}.order", 0, n - 1, "block indices")
    _int(st.pos, f"{path}.pos", 0, n)
    _str(st.fingerprint, f"{path}.fingerprint")
