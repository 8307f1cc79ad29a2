"""Model-file container: structfw's hardened npz reader against safetensors.

Fits OCR (bundled) for a few passes with pairwise steps, so that the solver state holds dense
block rows and a corner pool, saves it with ``state=True`` and measures, for the current
``.npz`` container (:mod:`structfw.io`) and for the same members in a safetensors file
(header JSON and the trace as safetensors metadata, every array a tensor):

(a) parser hardening: malformed inputs (truncations, byte flips, a huge declared header or
    member, header garbage, shape/offset lies, pickles, zip bombs, empty and foreign files),
    each counted as a clean rejection (ValueError / SafetensorError), a crash (any other
    exception) or silently accepted;
(b) load time (container read only, and the full ``structfw.load`` for npz);
(c) peak memory of a load (max RSS of a fresh subprocess, minus its RSS after imports).

Usage::

    python scripts/file_container_bench.py [--passes 3] [--n 6251] [--out bench.json]

Prints a JSON report (also written to ``--out``).  Needs ``pip install safetensors``.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np


def _fit_and_save(tmp, passes, n):
    import structfw as sf

    X, Y = sf.datasets.load_ocr("train")
    est = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=sf.solvers.BCFW(step="pairwise"), lam=0.01,
                           max_passes=passes, tol=None, random_state=0).fit(X[:n], Y[:n])
    return est.save(tmp / "ocr.npz", state=True)


def _to_safetensors(npz_path, out):
    """The same members in a safetensors file: header and texts as metadata strings."""
    from safetensors.numpy import save_file

    from structfw import io as sfio

    header, arrays = sfio.read_model_file(npz_path, "StructuredSVM")
    tensors, meta = {}, {"header": json.dumps(dict(header))}
    for k, v in arrays.items():
        if v.dtype.kind == "U":
            meta[k] = str(v[()])
        else:
            tensors[k] = np.ascontiguousarray(v)
    save_file(tensors, str(out), metadata=meta)
    return out


def _read_npz(path):
    from structfw import io as sfio
    return sfio.read_model_file(path, "StructuredSVM")


def _read_st(path):
    from safetensors import safe_open
    from safetensors.numpy import load_file

    with safe_open(str(path), framework="np") as fh:
        meta = fh.metadata()
    json.loads(meta["header"])
    return load_file(str(path))


# ------------------------------------------------------------------ (a) hardening
def _npz_cases(good):
    raw = good.read_bytes()
    rng = np.random.default_rng(0)
    cases = {"empty": b"", "foreign text": b"label 1:0.5\n" * 10, "pickle": pickle.dumps({"a": 1})}
    for frac in (0.001, 0.1, 0.5, 0.9, 0.999):
        cases[f"truncated {frac}"] = raw[:int(len(raw) * frac)]
    for t in range(10):
        b = bytearray(raw)
        for pos in rng.integers(0, len(b), 8):
            b[pos] ^= 0xFF
        cases[f"byte flips {t}"] = bytes(b)
    # an object array (pickle inside), a huge declared shape, a zip bomb, duplicated members
    buf = io.BytesIO()
    np.savez(buf, header=np.array('{"format": "structfw-model"}'), coef=np.array([object()], dtype=object))
    cases["object array"] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        hdr = np.lib.format.header_data_from_array_1_0(np.zeros(3))
        hdr["shape"] = (10 ** 12,)
        npy = io.BytesIO()
        np.lib.format.write_array_header_1_0(npy, hdr)
        zf.writestr("coef.npy", npy.getvalue() + b"\0" * 24)
    cases["huge declared shape"] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("coef.npy", b"\0" * (64 << 20))
    cases["zip bomb (64 MiB of zeros)"] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("header.npy", b"x")
        zf.writestr("header.npy", b"y")
    cases["duplicate members"] = buf.getvalue()
    return cases


def _st_cases(good):
    raw = good.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    rng = np.random.default_rng(0)
    cases = {"empty": b"", "foreign text": b"label 1:0.5\n" * 10, "pickle": pickle.dumps({"a": 1})}
    for frac in (0.001, 0.1, 0.5, 0.9, 0.999):
        cases[f"truncated {frac}"] = raw[:int(len(raw) * frac)]
    for t in range(10):
        b = bytearray(raw)
        for pos in rng.integers(0, len(b), 8):
            b[pos] ^= 0xFF
        cases[f"byte flips {t}"] = bytes(b)

    def with_header(h):
        text = json.dumps(h).encode()
        return struct.pack("<Q", len(text)) + text + raw[8 + n:]

    cases["huge header length"] = struct.pack("<Q", 2 ** 62) + raw[8:]
    cases["header not JSON"] = struct.pack("<Q", n) + b"{" * n + raw[8 + n:]
    name = next(k for k in header if k != "__metadata__")
    h = json.loads(json.dumps(header))
    h[name]["shape"] = [10 ** 12]
    cases["shape lies"] = with_header(h)
    h = json.loads(json.dumps(header))
    h[name]["data_offsets"] = [0, 10 ** 15]
    cases["offset beyond file"] = with_header(h)
    h = json.loads(json.dumps(header))
    h[name]["dtype"] = "OBJECT"
    cases["unknown dtype"] = with_header(h)
    h = json.loads(json.dumps(header))
    keys = [k for k in h if k != "__metadata__"]
    if len(keys) > 1:
        h[keys[1]]["data_offsets"] = h[keys[0]]["data_offsets"]
        cases["overlapping tensors"] = with_header(h)
    h = json.loads(json.dumps(header))
    h["__metadata__"] = {"header": {"nested": "object"}}
    cases["metadata not strings"] = with_header(h)
    return cases


def _classify(read, path, clean_errors):
    t0 = time.perf_counter()
    try:
        read(path)
        outcome = "accepted"
    except clean_errors:
        outcome = "rejected cleanly"
    except Exception as exc:  # noqa: BLE001 - the point is to see which
        outcome = f"crash ({type(exc).__name__})"
    return outcome, time.perf_counter() - t0


def hardening(npz_path, st_path, tmp):
    from safetensors import SafetensorError

    out = {}
    for name, cases, read, suffix, errors in (
            ("npz", _npz_cases(npz_path), _read_npz, ".npz", (ValueError,)),
            ("safetensors", _st_cases(st_path), _read_st, ".safetensors", (SafetensorError, ValueError))):
        rows = {}
        for case, data in cases.items():
            p = tmp / f"case{suffix}"
            p.write_bytes(data)
            outcome, secs = _classify(read, p, errors)
            rows[case] = {"outcome": outcome, "seconds": round(secs, 4)}
        counts = {}
        for r in rows.values():
            key = r["outcome"].split(" (")[0]
            counts[key] = counts.get(key, 0) + 1
        out[name] = {"counts": counts, "cases": rows}
    return out


# ------------------------------------------------------------------ (b), (c)
_CHILD = r"""
import json, resource, sys, time
import numpy as np
kind, path = sys.argv[1], sys.argv[2]
if kind.startswith("npz"):
    import structfw as sf
    from structfw import io as sfio
else:
    import safetensors.numpy, safetensors
    import json as _j
def rss():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
base = rss()
t0 = time.perf_counter()
if kind == "npz-read":
    sfio.read_model_file(path, "StructuredSVM")
elif kind == "npz-load":
    sf.load(path)
else:
    with safetensors.safe_open(path, framework="np") as fh:
        _j.loads(fh.metadata()["header"])
    safetensors.numpy.load_file(path)
secs = time.perf_counter() - t0
print(json.dumps({"seconds": secs, "peak_extra_bytes": rss() - base}))
"""


def timing(npz_path, st_path, repeats):
    out = {}
    for kind, path in (("npz-read", npz_path), ("npz-load", npz_path), ("safetensors-read", st_path)):
        runs = []
        for _ in range(repeats):
            res = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path)], capture_output=True, text=True,
                                 check=True)
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        out[kind] = {"seconds_min": round(min(r["seconds"] for r in runs), 4),
                     "peak_extra_MiB": round(min(r["peak_extra_bytes"] for r in runs) / 2 ** 20, 1)}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--n", type=int, default=6251, help="OCR training words used (6251: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        npz_path = _fit_and_save(tmp, args.passes, args.n)
        st_path = _to_safetensors(npz_path, tmp / "ocr.safetensors")
        report = {
            "model": f"OCR ChainModel(26, 128), n={args.n}, BCFW(step='pairwise'), {args.passes} passes, state=True",
            "file_bytes": {"npz": os.path.getsize(npz_path), "safetensors": os.path.getsize(st_path)},
            "load": timing(npz_path, st_path, args.repeats),
            "hardening": hardening(npz_path, st_path, tmp),
        }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return report


if __name__ == "__main__":
    main()
