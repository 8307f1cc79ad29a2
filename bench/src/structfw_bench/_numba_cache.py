"""numba's cache for this package's own kernels, stamped like structfw's (`structfw._numba_cache`).

block_state.py's kernels call structfw's compiled block steps, and numba links a callee's code into
its caller; numba checks a cached kernel against the kernel's own file only, so after an upgrade of
structfw that changed those steps the benchmark would load its kernels with the old steps inside.
structfw's stamped locators take structfw's files only (this package is a distribution of its own,
outside structfw's folder), so this module puts one more locator class in front of each of numba's,
for the files of this package: numba's own stamp together with structfw's package stamp and this
package's (`structfw._numba_cache.package_stamp` over each folder).  A change to compiled code in
either package invalidates every kernel of this one.  Imported, before their first ``@njit``, by
every module of this package that caches a kernel.
"""
from __future__ import annotations

import os

from numba.core import caching

from structfw import _numba_cache as _core

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _in_package(py_file):
    return os.path.abspath(py_file).startswith(PACKAGE_DIR + os.sep)


def source_stamp_extra():
    """What this package's kernels add to numba's stamp: structfw's package stamp and this one's."""
    return _core.package_stamp(), _core.package_stamp(PACKAGE_DIR)


def _stamped(base):
    """A subclass of numba's locator class ``base`` that takes this package's files only."""

    class BenchStampedLocator(base):
        structfw_bench_stamped = True

        @classmethod
        def from_function(cls, py_func, py_file):
            if not _in_package(py_file):
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return (super().get_source_stamp(), *source_stamp_extra())

    BenchStampedLocator.__name__ = BenchStampedLocator.__qualname__ = "BenchStamped" + base.__name__.lstrip("_")
    return BenchStampedLocator


def install():
    """Put the stamped locators in front of numba's (once a process)."""
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")  # numba >= 0.68, before
    classes = impl._locator_classes  # one list, shared by its subclasses: changed in place
    if any(getattr(c, "structfw_bench_stamped", False) for c in classes):
        return
    # numba's own classes only: structfw's stamped ones refuse this package's files anyway
    bases = [c for c in classes if not getattr(c, "structfw_stamped", False)]
    classes[:0] = [_stamped(c) for c in bases]


install()
