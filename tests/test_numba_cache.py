"""The package-wide stamp of numba's cache (structfw._numba_cache): a kernel cached before a module it
was compiled with changed is compiled again, never loaded with the old code."""
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import structfw

SRC = Path(structfw.__file__).resolve().parent


def test_structfw_kernels_carry_the_package_stamp():
    from structfw._numba_cache import package_stamp
    from structfw.solvers._fastpass import general_chunk

    locator = general_chunk._cache._impl.locator
    assert getattr(type(locator), "structfw_stamped", False)
    own, package = locator.get_source_stamp()
    assert package == package_stamp() and own  # numba's stamp of the file itself, and the package's


def test_the_package_stamp_follows_the_modules_that_use_numba(tmp_path):
    from structfw._numba_cache import package_stamp

    (tmp_path / "sub").mkdir()
    kernel, plain = tmp_path / "sub" / "kernels.py", tmp_path / "plain.py"
    kernel.write_text("from numba import njit\n")
    plain.write_text("x = 1\n")
    before = package_stamp(str(tmp_path))
    plain.write_text("x = 2\n")  # no numba: no kernel can have inlined it
    assert package_stamp.__wrapped__(str(tmp_path)) == before
    kernel.write_text("from numba import njit\nY = 2\n")
    changed = package_stamp.__wrapped__(str(tmp_path))
    assert changed != before
    (tmp_path / "more.py").write_text("import numba\n")
    assert package_stamp.__wrapped__(str(tmp_path)) not in (before, changed)


def test_a_kernel_cached_before_another_module_changed_is_compiled_again(tmp_path):
    """The failure this prevents: numba stamps a cached kernel with its own file only, so after an
    upgrade that changed a callee's module (a kernel inlines or links its callees) it loaded the old
    code.  Here: a copy of the package, a kernel cached, then another module of it edited."""
    pkg = tmp_path / "pkg"
    shutil.copytree(SRC, pkg / "structfw", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(pkg), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    code = ("import numpy as np\n"
            "from structfw.oracles.chain import hamming_loss\n"
            "assert hamming_loss(np.zeros(4, np.int64), np.array([0, 1, 1, 0])) == 0.5\n"
            "print(sum(hamming_loss.stats.cache_hits.values()), sum(hamming_loss.stats.cache_misses.values()))\n")

    def run():
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                             cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return tuple(int(v) for v in out.stdout.split())

    assert run() == (0, 1)  # compiled and cached
    assert run() == (1, 0)  # loaded
    linalg = pkg / "structfw" / "_linalg.py"
    linalg.write_text(linalg.read_text() + "\n# edited\n")
    assert run() == (0, 1)  # compiled again: another module of the package changed


@pytest.mark.parametrize("package", ["structfw", "structfw_bench"])
def test_every_module_that_caches_a_kernel_installs_the_stamp_first(package):
    """A kernel decorated before the package's stamp module (`structfw._numba_cache`, or the
    reproduction's `structfw_bench._numba_cache`) is imported would get numba's own locator."""
    root = SRC if package == "structfw" else Path(importlib.import_module(package).__file__).resolve().parent
    line = "from structfw import _numba_cache" if package == "structfw" else "from . import _numba_cache"
    missing = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        first = min((k for k in (text.find("@njit("), text.find("njit(cache=True")) if k >= 0), default=-1)
        if first < 0 or "cache=True" not in text[first:first + 200]:
            continue
        stamp = text.find(line)
        if stamp < 0 or stamp > first:
            missing.append(str(path.relative_to(root)))
    assert not missing, missing
