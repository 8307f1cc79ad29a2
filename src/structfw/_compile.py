"""Is this machine's numba cache warm?  (The first run compiles the kernels: ~5 s for the demo.)

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

FIRST_RUN_MESSAGE = ("compiling numba kernels (first run on this machine only, about 5 s; "
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


# --------------------------------------------------------------------- first-run split
#: the plain pass's leaf kernels, which do not need the oracle: a second process can compile
#: them while this one compiles the oracle and the pass around it (docs/install.md, "First run");
#: the dense chain model's prediction and loss too when the fit is on dense chains
LEAF_KERNELS = (("structfw.solvers._fastpass", "fw_block_step"), ("structfw.solvers._kernels", "dense_dot"))
CHAIN_LEAF_KERNELS = (("structfw.oracles.chain", "chain_oracle_dense"), ("structfw.oracles.chain", "hamming_loss"))

_helper = None


def compile_leaves_in_background(kind):
    """On a cold cache, compile :data:`LEAF_KERNELS` (and :data:`CHAIN_LEAF_KERNELS` for
    ``kind`` = CHAIN_DENSE, the compiled oracle's kind) in a second process, once per process.

    A first fit otherwise compiles one kernel after the other on one core: the chain oracle
    (~2.5 s), the pass around it (~2 s) and the block step (~1 s, which does not depend on
    the oracle).  With the step compiled beside the oracle, this process loads it from the
    cache when the pass reaches it.  Returns the helper process, or None when the cache is
    warm, it cannot be inspected, or the helper cannot start (this process then compiles
    everything itself, as before)."""
    global _helper
    if _helper is not None:
        return _helper or None
    _helper = False  # asked once per process
    if kernels_cached(LEAF_KERNELS) is not False:
        return None
    import subprocess
    import sys

    try:
        _helper = subprocess.Popen([sys.executable, "-m", "structfw._compile", str(int(kind))],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    return _helper


def compile_leaves(kind):
    """Compile (and cache) the leaf kernels for the argument types of the plain pass."""
    import numpy as np

    from .oracles.chain import chain_oracle_dense, hamming_loss
    from .oracles.compiled import CHAIN_DENSE
    from .solvers._fastpass import fw_block_step
    from .solvers._kernels import dense_dot

    S, F = 2, 3
    d = S * F + S * S
    w, wi, scratch, empty = np.zeros(d), np.zeros((2, d)), np.zeros(d), np.empty(0)
    idx, val = np.zeros(1, np.int64), np.ones(1)
    # the types of plain_fw_chunk's call: a row of the C-contiguous (n, d) w_i, floats, no average
    fw_block_step(w, wi[0], 1.0, idx, val, 0.0, 1.0, 0.5, 1.0, -1.0, empty, 0.0, scratch)
    dense_dot(wi[0], w)
    if kind != CHAIN_DENSE:
        return
    # the chain model's Python calls (prediction, losses): a word (L, F), int64 labels
    y = np.zeros(2, np.int64)
    chain_oracle_dense(np.zeros((2, F)), w, y, S, F, True)
    hamming_loss(y, y)


if __name__ == "__main__":
    import sys

    compile_leaves(int(sys.argv[1]))
