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

from structfw import _numba_cache as _core

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def source_stamp_extra():
    """What this package's kernels add to numba's stamp: structfw's package stamp and this one's."""
    return _core.package_stamp(), _core.package_stamp(PACKAGE_DIR)


def install():
    """Put the stamped locators in front of numba's (once a process)."""
    _core.install_for(PACKAGE_DIR, "structfw_bench_stamped", source_stamp_extra)


install()
