"""This process's resident memory, read from Linux's /proc/self (the benchmarks and the shards' workers).

``VmRSS`` is the resident set now, ``VmHWM`` its high-water mark.  `reset_peak` restarts the mark
from the current resident set, so that a peak read afterwards is the peak of what ran since -- not an
earlier one, nor the size a forked worker inherited from its parent.  Off Linux (no /proc) every
reading is None and the reset reports False; callers then fall back or leave the figure out.
"""
from __future__ import annotations

import re
from pathlib import Path

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
#: the fields this module reads, in kB in /proc/self/status
FIELDS = ("VmRSS", "VmHWM")


def status_bytes(field: str) -> int | None:
    """A memory field of /proc/self/status, in bytes.

    Parameters
    ----------
    field : {"VmRSS", "VmHWM"}
        The resident set now, or its peak (since the process started or the last `reset_peak`).

    Returns
    -------
    int or None
        The field in bytes; None where there is no /proc/self/status (not Linux) or no such line.

    Raises
    ------
    ValueError
        ``field`` is not one of `FIELDS`.
    """
    if field not in FIELDS:
        raise ValueError(f"field: expected one of {FIELDS}, got {field!r}")
    try:
        text = STATUS.read_text()
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+)\s+kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def reset_peak() -> bool:
    """Restart this process's peak resident set (VmHWM) from its current resident set.

    Returns
    -------
    bool
        True once done; False where it cannot be (not Linux, or /proc/self/clear_refs not
        writable, as in some containers): a peak read then may predate the call.
    """
    try:
        # "5" is the kernel's code for "reset the peak RSS" (Documentation/filesystems/proc.rst)
        with open(CLEAR_REFS, "w") as f:
            f.write("5")
    except OSError:
        return False
    return status_bytes("VmHWM") is not None
