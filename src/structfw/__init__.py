"""structfw: structural SVMs trained with the Frank-Wolfe family of solvers.

>>> import structfw as sf
>>> X, Y = sf.datasets.load_ocr("train")
>>> svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver="bcfw", lam=0.01)

Every name is loaded on first use (PEP 562), so ``import structfw`` and
``structfw --help`` import neither scikit-learn nor numba.
"""
import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> (module, attribute or None for the module itself)
_LAZY = {
    "datasets": (".datasets", None),
    "models": (".models", None),
    "solvers": (".solvers", None),
    "svm": (".svm", None),
    "io": (".io", None),
    "metrics": (".metrics", None),
    "features": (".features", None),
    "StructuredSVM": (".estimator", "StructuredSVM"),
    "LatentStructuredSVM": (".latent", "LatentStructuredSVM"),
    "load": (".loading", "load"),
    "make_tagger": (".features", "make_tagger"),
    "Trace": (".trace", "Trace"),
}

__all__ = ["StructuredSVM", "LatentStructuredSVM", "Trace", "load", "make_tagger", "regularization_path", "datasets",
           "features", "metrics", "models", "solvers", "svm", "__version__"]


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'structfw' has no attribute {name!r}") from None
    mod = importlib.import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def regularization_path(*args: Any, **kwargs: Any) -> Any:
    """The eps-approximate regularisation path: `structfw.path.regularization_path`.

    Takes the same arguments and returns the same `structfw.path.RegularizationPath`.
    The solver modules are imported here, inside the path's Ctrl-C context: a Ctrl-C
    while they load (seconds on a first call) is taken at the path's first safe point
    and gives an "interrupted" path, as a Ctrl-C at any later moment does, instead of
    escaping from the import as a KeyboardInterrupt.
    """
    from ._interrupt import deferred_sigint

    with deferred_sigint():   # the path's own context nests in this one and shares its flag
        from .path import regularization_path as compute

        return compute(*args, **kwargs)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# the annotations above are evaluated when the functions are defined: drop the helper name so
# that dir(structfw) lists the same names as before the package was annotated
del Any
