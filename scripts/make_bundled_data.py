"""Build the compact data files bundled inside ``structfw.datasets``.

Reads the shared copies (``$STRUCTFW_SHARED_DATA`` or ``../shared/data`` next to the
repository) and writes ``src/structfw/datasets/data/{ocr,snakes}.npz``:

* ``ocr.npz``: the OCR letters (Taskar et al. 2003) with the pixels kept packed
  (16 bytes per 16x8 binary letter), labels, word lengths, folds and the word text,
  saved with ``numpy.savez_compressed`` (about 0.4 MB).
* ``snakes.npz``: the snakes grids (Nowozin et al. 2011), unchanged arrays.

Run:  python scripts/make_bundled_data.py [SHARED_DATA_DIR]
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "structfw" / "datasets" / "data"


def shared_dir(argv):
    if len(argv) > 1:
        return Path(argv[1])
    env = os.environ.get("STRUCTFW_SHARED_DATA")
    if env:
        return Path(env)
    return ROOT.parent / "shared" / "data"


def main(argv=sys.argv):
    src = shared_dir(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    with np.load(src / "ocr" / "letters.npz") as d:
        arrays = {
            "pixels": np.ascontiguousarray(d["pixels"], dtype=np.uint8),
            "labels": np.ascontiguousarray(d["labels"], dtype=np.uint8),
            "lengths": np.ascontiguousarray(d["lengths"], dtype=np.int32),
            "folds": np.ascontiguousarray(d["folds"], dtype=np.int8),
            "words": np.asarray(d["words"]),
        }
    np.savez_compressed(OUT / "ocr.npz", **arrays)
    with np.load(src / "snakes" / "snakes.npz") as d:
        arrays = {k: np.asarray(d[k]) for k in d.files}
    np.savez_compressed(OUT / "snakes.npz", **arrays)
    for f in sorted(OUT.glob("*.npz")):
        print(f"{f.relative_to(ROOT)}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
