"""structfw: structural SVMs trained with the Frank-Wolfe family of solvers.

>>> import structfw as sf
>>> X, Y = sf.datasets.load_ocr("train")
>>> svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver="bcfw", lam=0.01)
"""
from . import datasets, models, solvers
from .estimator import StructuredSVM, load
from .trace import Trace

__version__ = "0.1.0"

__all__ = ["StructuredSVM", "Trace", "load", "datasets", "models", "solvers", "svm", "__version__"]


def __getattr__(name):
    # the kernel SVM layer imports scikit-learn: load it on first use only
    if name == "svm":
        import importlib

        mod = importlib.import_module(".svm", __name__)
        globals()["svm"] = mod
        return mod
    if name == "regularization_path":
        from .path import regularization_path

        return regularization_path
    raise AttributeError(f"module 'structfw' has no attribute {name!r}")
