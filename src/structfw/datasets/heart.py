"""The heart_scale data set of LIBSVM, bundled inside the package.

270 patients, 13 features scaled to [-1, 1], labels +1 / -1 (presence / absence of
heart disease; Statlog heart data).  The file is the one distributed with LIBSVM /
LIBLINEAR (BSD-3 licence), in svmlight format.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

#: Path of the bundled svmlight file.
HEART_SCALE_PATH = Path(__file__).resolve().parent / "data" / "heart_scale"
N_FEATURES = 13


def load_heart_scale() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """heart_scale as dense arrays.

    Returns
    -------
    X : ndarray (270, 13) float64
        Features in [-1, 1] (absent svmlight entries are 0).
    y : ndarray (270,) int64
        Labels +1 / -1.
    """
    rows, labels = [], []
    with open(HEART_SCALE_PATH) as fh:
        for line in fh:
            parts = line.split()
            if not parts:
                continue
            labels.append(int(float(parts[0])))
            x = np.zeros(N_FEATURES)
            for item in parts[1:]:
                idx, val = item.split(":")
                x[int(idx) - 1] = float(val)
            rows.append(x)
    return np.vstack(rows), np.asarray(labels, dtype=np.int64)
