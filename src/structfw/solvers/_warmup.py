"""The first fit's split compile: the plain pass's leaf kernels compiled in a second process.

Beside the kernels it names (this package's block step and dot product, the chain oracle it
reaches downward), so that the general first-use machinery of `structfw._compile` (is the
cache warm, the compile notice) names no solver module.  ``python -m
structfw.solvers._warmup KIND`` is the helper process (docs/install.md, "First run").
"""
from __future__ import annotations

import sys

from .._compile import kernels_cached

#: the plain pass's leaf kernels, which do not need the oracle: a second process can compile
#: them while this one compiles the oracle and the pass around it (docs/install.md, "First run");
#: the dense chain model's prediction and loss too when the fit is on dense chains
LEAF_KERNELS = (("structfw.solvers._fastpass", "fw_block_step"), ("structfw.solvers._kernels", "dense_dot"))
CHAIN_LEAF_KERNELS = (("structfw.oracles.chain", "chain_oracle_dense"), ("structfw.oracles.chain", "hamming_loss"))

_helper = None


def compile_leaves_in_background(kind):
    """On a cold cache, compile `LEAF_KERNELS` (and `CHAIN_LEAF_KERNELS` for
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

    try:
        _helper = subprocess.Popen([sys.executable, "-m", "structfw.solvers._warmup", str(int(kind))],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    import atexit

    atexit.register(_reap_helper, _helper)
    return _helper


#: how long a process that ends waits for its compile helper (which takes a few seconds) to finish
HELPER_EXIT_WAIT_S = 60.0


def _reap_helper(helper, timeout=HELPER_EXIT_WAIT_S):
    """At exit: wait for the compile helper, so that its kernels reach the cache and the process does
    not end with a child still running (Python warns of it, ResourceWarning); stop it after ``timeout``."""
    import subprocess

    try:
        helper.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()


def compile_leaves(kind):
    """Compile (and cache) the leaf kernels for the argument types of the plain pass."""
    import numpy as np

    from ..oracles.chain import chain_oracle_dense, hamming_loss
    from ..oracles.compiled import CHAIN_DENSE
    from ._fastpass import fw_block_step
    from ._kernels import dense_dot

    S, F = 2, 3
    d = S * F + S * S
    w, wi, scratch, empty = np.zeros(d), np.zeros((2, d)), np.zeros(d), np.empty(0)
    idx, val = np.zeros(1, np.int64), np.ones(1)
    # the types of plain_fw_chunk's call: a row of the C-contiguous (n, d) w_i, floats, no average
    fw_block_step(w, wi[0], 1.0, (idx, val, 1.0, 0.0), 0.5, (1.0, -1.0), (empty, 0.0), scratch)
    dense_dot(wi[0], w)
    if kind != CHAIN_DENSE:
        return
    # the chain model's Python calls (prediction, losses): a word (L, F), int64 labels
    y = np.zeros(2, np.int64)
    chain_oracle_dense(np.zeros((2, F)), w, y, S, F, True)
    hamming_loss(y, y)


if __name__ == "__main__":
    compile_leaves(int(sys.argv[1]))
