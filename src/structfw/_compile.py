"""Is this machine's numba cache warm?  (The first run compiles the kernels: ~8 s for the demo.)

numba caches compiled kernels next to their source (``__pycache__``, or
``NUMBA_CACHE_DIR``); an index whose stamp matches the source means the kernel
will load instead of compiling.  The check reads numba's cache index through its
``FunctionCache`` object, a private API: any failure answers "unknown" (None),
never an error.
"""
from __future__ import annotations

#: (module, kernel) pairs every fit on the bundled data compiles: the engine's plain pass and
#: general pass, and the chain oracle they call
KEY_KERNELS = (
    ("structfw.solvers._fastpass", "plain_fw_chunk"),
    ("structfw.solvers._fastpass", "general_chunk"),
    ("structfw.oracles.chain", "chain_oracle_dense"),
)

FIRST_RUN_MESSAGE = ("compiling numba kernels (first run on this machine only, about 10 s; "
                     "`structfw warmup` does it ahead of time) ...")


def kernels_cached(kernels=KEY_KERNELS):
    """True if any of the kernels has a cache entry for its current source (this machine
    has compiled before: a fit may still compile a variant it has not used), False if
    none has (the first run), None if numba's cache cannot be inspected."""
    import importlib

    try:
        for module, name in kernels:
            dispatcher = getattr(importlib.import_module(module), name)
            if dispatcher._cache._cache_file._load_index():
                return True
        return False
    except Exception:  # private numba API: never let a check break a fit
        return None
