"""Profile structfw's compiled (numba) code with Linux ``perf``, by function.

``perf`` cannot name the functions numba compiles at run time: they live in anonymous memory.
This script runs a Python snippet, then writes ``/tmp/perf-<pid>.map`` (perf's map of JIT code:
start, size, name per line) for every structfw kernel the snippet compiled, so that
``perf report`` names them.  Only code compiled in this process has an object file to read
symbols from, so the script points numba at an empty cache directory (everything compiles: the
first seconds of the profile are the compiler's).

    perf record -F 1999 -o prof.data python scripts/perf_map.py "
    import structfw as sf
    X, Y = sf.datasets.load_ocr('train')
    sf.StructuredSVM(sf.models.ChainModel(26, 128), sf.solvers.BCFW(multi_plane=True),
                     lam=0.01, max_passes=40).fit(X, Y)"
    perf report -i prof.data --no-children --sort symbol | grep _ZN8structfw

Samples that stay unnamed at one small address range of anonymous memory are numba's runtime
helpers compiled at start-up (the reference counts' NRT_incref / NRT_decref): count them to see
what a kernel's reference counting costs (docs/results/engine.md, "Where the general chunk's
time goes").
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile


def _dispatchers():
    """Every numba dispatcher defined in a loaded structfw module."""
    from numba.core.registry import CPUDispatcher

    seen = set()
    for name, mod in list(sys.modules.items()):
        if not name.startswith("structfw") or mod is None:
            continue
        for value in list(vars(mod).values()):
            if isinstance(value, CPUDispatcher) and id(value) not in seen:
                seen.add(id(value))
                yield value


def _symbols(library):
    """(address, size, name) of the functions in a compiled library's object code (``nm``)."""
    obj = getattr(library, "_compiled_object", None)
    if obj is None:  # loaded from the disk cache: no object code to read
        return
    with tempfile.NamedTemporaryFile(suffix=".o", delete=False) as f:
        f.write(obj)
        path = f.name
    try:
        listing = subprocess.run(["nm", "--defined-only", "-S", path], capture_output=True, text=True,
                                 check=True).stdout
    finally:
        os.unlink(path)
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in ("t", "T"):
            try:
                address = library.get_pointer_to_function(parts[3])
            except Exception:  # a local symbol the engine does not export
                continue
            if address:
                yield address, int(parts[1], 16), parts[3]


def write_perf_map(path: str | None = None) -> int:
    """Write perf's map of this process's structfw kernels; returns how many functions it names."""
    entries = {}
    for dispatcher in _dispatchers():
        for cres in dispatcher.overloads.values():
            for address, size, name in _symbols(cres.library):
                entries[address] = (size, name)
    path = path or f"/tmp/perf-{os.getpid()}.map"
    with open(path, "w") as f:
        for address in sorted(entries):
            size, name = entries[address]
            f.write(f"{address:x} {size:x} {name}\n")
    return len(entries)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    if "NUMBA_CACHE_DIR" not in os.environ or os.listdir(os.environ["NUMBA_CACHE_DIR"]):
        # numba reads its configuration when first imported: re-run with an empty cache directory
        env = dict(os.environ, NUMBA_CACHE_DIR=tempfile.mkdtemp(prefix="structfw-perf-"))
        return subprocess.call([sys.executable, *argv], env=env)
    exec(compile(argv[1], "<snippet>", "exec"), {"__name__": "__snippet__"})
    print(f"perf map: {write_perf_map()} compiled functions named in /tmp/perf-{os.getpid()}.map",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
