"""`structfw.load`: any structfw model file, loaded by the kind its header names.

Above the estimators and the tagger (docs/design.md, "Layers"), so that none of them imports
another to dispatch: a tagger file (`structfw.features.Tagger.save`) loads as a `Tagger`, a
kernel SVM's (`structfw.svm.FrankWolfeSVC.save`) as a `FrankWolfeSVC`, any other file as a
`StructuredSVM`, whose checks then report whatever is wrong with it.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import io as sfio

if TYPE_CHECKING:
    from .estimator import StructuredSVM
    from .features import Tagger
    from .svm import FrankWolfeSVC


def load(path: str | os.PathLike[str]) -> StructuredSVM | Tagger | FrankWolfeSVC:
    """Load a structfw model file: a `StructuredSVM`, a `Tagger` or a `FrankWolfeSVC`, by the kind
    its header names (`structfw.io.model_kind`).

    Raises
    ------
    FileNotFoundError
        No file at ``path`` (nor at ``path`` + ``.npz``).
    ValueError
        A file that is not a valid model file of its kind, naming the file and the problem.
    """
    kind = sfio.model_kind(path)
    if kind == "Tagger":
        from .features import Tagger

        return Tagger.load(path)
    if kind == "FrankWolfeSVC":
        from .svm import FrankWolfeSVC

        return FrankWolfeSVC.load(path)
    from .estimator import StructuredSVM

    return StructuredSVM.load(path)
