"""numba's cache, stamped with the whole package's compiled sources.

numba checks a cached kernel against its own source file only.  A kernel compiled with its callees
from other modules (``inline="always"``, or any njit call: numba links the callee's code into the
caller's) is then loaded from the cache after a callee's module changed, with the callee's old code:
`general_chunk` in solvers/_fastpass.py kept a corner-store write that solvers/corners.py no longer
had, and failed on the first pass after an upgrade ("cannot assign slice of shape (0,) from input of
shape (7,)").  pip does not remove numba's cache files (they are not in the package's RECORD), so an
upgrade keeps them.

Here every structfw kernel's cache stamp is numba's own (its file's content hash) together with a
hash of every module of the package that uses numba (`package_stamp`): any change to compiled code
anywhere in the package invalidates every structfw kernel's entry, which is recompiled once and
cached again.  A change to a module without numba code invalidates nothing.  The stamps are held by
locator classes put in front of numba's own (`install`); other packages' kernels are untouched.  This
module is imported, before their first ``@njit``, by every module that caches a kernel.
"""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from typing import Callable

from numba.core import caching

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@lru_cache(maxsize=None)
def package_stamp(root: str = PACKAGE_DIR) -> str:
    """SHA-256 over the relative path and content of every ``.py`` file under ``root`` that mentions
    numba, in a fixed order (computed once a process: about 200 files)."""
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                data = f.read()
            if b"numba" in data:
                h.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0")
                h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def _in_package(py_file: str, root: str = PACKAGE_DIR) -> bool:
    return os.path.abspath(py_file).startswith(root + os.sep)


def _stamped(base: type, root: str, marker: str, stamp: Callable[[], tuple[str, ...]]) -> type:
    """A subclass of numba's locator class ``base`` that takes the files under ``root`` only and
    adds ``stamp()`` to numba's stamp; the class carries the attribute ``marker``."""

    class PackageStampedLocator(base):  # type: ignore[misc, valid-type]
        @classmethod
        def from_function(cls, py_func, py_file):
            if not _in_package(py_file, root):
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return (super().get_source_stamp(), *stamp())

    setattr(PackageStampedLocator, marker, True)
    PackageStampedLocator.__name__ = PackageStampedLocator.__qualname__ = "PackageStamped" + base.__name__.lstrip("_")
    return PackageStampedLocator


def install_for(root: str, marker: str, stamp: Callable[[], tuple[str, ...]]) -> None:
    """Put locators that stamp the kernels of the files under ``root`` with ``stamp()`` in front of
    numba's own (once a process: ``marker`` names the classes).  structfw's are installed on import;
    a package of its own whose kernels call structfw's (the reproduction, structfw_bench) installs
    its own with structfw's `package_stamp` in its ``stamp``."""
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")  # numba >= 0.68, before
    classes = impl._locator_classes  # one list, shared by its subclasses: changed in place
    if any(getattr(c, marker, False) for c in classes):
        return
    # numba's own classes only: another package's stamped ones refuse these files anyway
    bases = [c for c in classes if not any(k.endswith("_stamped") and v is True for k, v in vars(c).items())]
    classes[:0] = [_stamped(c, root, marker, stamp) for c in bases]


def install() -> None:
    """structfw's stamped locators in front of numba's (once a process)."""
    install_for(PACKAGE_DIR, "structfw_stamped", lambda: (package_stamp(),))


install()
