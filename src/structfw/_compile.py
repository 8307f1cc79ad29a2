"""First use compiles: is this machine's numba cache warm, and saying so when it is not.

numba caches compiled kernels next to their source (``__pycache__``, or
``NUMBA_CACHE_DIR``); an index whose stamp matches the source means the kernel
will load instead of compiling.  `kernels_cached` reads numba's cache index
through its ``FunctionCache`` object, a private API: any failure answers "unknown"
(None), never an error.

`install_compile_notice` announces compilation where it happens: a listener on
numba's ``numba:compile`` event, which numba fires only when a kernel is really
compiled (never when it is loaded from the cache), prints one line to stderr the first
time a structfw kernel compiles in the process.  Every entry point that may compile
installs it (``StructuredSVM.fit`` / ``predict``, the solvers' monitor, ``FrankWolfeSVC``,
the CLI).  ``STRUCTFW_COMPILE_NOTICE=0`` in the environment silences it.
"""
from __future__ import annotations

import os
import sys

#: (module, kernel) pairs every fit on the bundled data compiles: the engine's plain passes
#: (factored storage, the default for dense chains, and rows) and general pass, and the chain
#: oracle they call
KEY_KERNELS = (
    ("structfw.solvers._fastpass", "factored_fw_chunk"),
    ("structfw.solvers._fastpass", "plain_fw_chunk"),
    ("structfw.solvers._fastpass", "general_chunk"),
    ("structfw.oracles.chain", "chain_oracle_dense"),
)

#: kernel families: name -> (module, kernel) pairs of which a fit of that family compiles at
#: least one; ``structfw warmup`` compiles each family, `cached_families` reports them
FAMILIES = {
    "engine and chain oracle": KEY_KERNELS,
    "multiclass oracle": (("structfw.oracles.compiled", "multiclass_dense_corner"),
                          ("structfw.oracles.multiclass", "multiclass_oracle")),
    "grid oracle": (("structfw.oracles.grid", "grid_loopy_bp"),),
    "graph cut / Potts oracles": (("structfw.oracles.maxflow", "min_cut_numba"),
                                  ("structfw.oracles.potts", "alpha_expansion")),
    "matching oracle": (("structfw.oracles.matching", "matching_scores_dense"),),
    "chain marginals (online-EG)": (("structfw.oracles.marginals", "chain_expectation_dense"),),
    "kernel BCFW": (("structfw.oracles.kernel_chain", "rbf_from_dots"),
                    ("structfw.solvers._fastpass", "factored_fw_chunk")),
    "kernel SVM": (("structfw.svm._solver", "_iterate"),),
}

#: module prefix -> the family the notice names (a structured fit compiles the engine first,
#: whatever its model, so only the families with their own entry point are named)
_MODULE_FAMILY = (
    ("structfw.svm", "the kernel SVM"),
    ("structfw.oracles.kernel_chain", "kernel BCFW"),
)

FIRST_RUN_MESSAGE = ("compiling numba kernels (first use on this machine only: later runs load them from the "
                     "cache; `structfw warmup` compiles them all ahead of time) ...")


def first_run_message(family=None):
    """The one-line notice; names the family whose kernel is compiling when it is specific."""
    if family is None:
        return FIRST_RUN_MESSAGE
    return FIRST_RUN_MESSAGE.replace("kernels (", f"kernels for {family} (", 1)


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


def cached_families():
    """{family: True / False / None} of `FAMILIES` (see `kernels_cached`)."""
    return {name: kernels_cached(kernels) for name, kernels in FAMILIES.items()}


# --------------------------------------------------------------------- the notice
_announced = False
_listener = None
#: the progress bar a fit is drawing, if any: the notice is written above it, not into its line
active_bar = None


def notice_enabled():
    return os.environ.get("STRUCTFW_COMPILE_NOTICE", "1").strip().lower() not in ("0", "false", "no", "off")


def announce(family=None):
    """Print the compile notice to stderr once per process; True if printed now."""
    global _announced
    if _announced or not notice_enabled():
        return False
    _announced = True
    msg = first_run_message(family)
    bar = active_bar
    if bar is not None:
        try:
            bar.write(msg, file=sys.stderr)
            return True
        except Exception:  # a bar that cannot write: plain stderr below
            pass
    print(msg, file=sys.stderr, flush=True)
    return True


def silence_in_worker():
    """A worker process (executor pools, shard workers) never prints the notice: the process that
    started it says it once, instead of one line per worker compiling the same kernels."""
    global _announced
    _announced = True


def _family_of(module):
    for prefix, family in _MODULE_FAMILY:
        if module.startswith(prefix):
            return family
    return None


def install_compile_notice():
    """Listen for numba compiling a structfw kernel and announce the first one (once per
    process; a no-op after that, when silenced, or if numba's event API is unavailable)."""
    global _listener
    if _listener is not None or _announced or not notice_enabled():
        return
    try:
        from numba.core import event
    except ImportError:  # pragma: no cover - numba without the event API
        _listener = False
        return

    class _CompileNotice(event.Listener):
        def on_start(self, ev):
            if _announced:
                return
            dispatcher = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
            module = getattr(getattr(dispatcher, "py_func", None), "__module__", None) or ""
            if module.startswith("structfw.") and module != __name__:
                announce(_family_of(module))

        def on_end(self, ev):
            pass

    _listener = _CompileNotice()
    event.register("numba:compile", _listener)
