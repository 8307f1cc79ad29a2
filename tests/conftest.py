import os
import sys
from pathlib import Path

import pytest

_SRC = Path(__file__).resolve().parents[1] / "src"
if str(_SRC) not in sys.path:  # run the tests without installing the package
    sys.path.insert(0, str(_SRC))


def _shared_data_dir():
    env = os.environ.get("STRUCTFW_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data():
    """Path to the shared data directory; skips the test when it is absent."""
    path = _shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data directory {path} not found (set STRUCTFW_SHARED_DATA)")
    return path
