"""Reading svmlight / LIBSVM text files (multiclass model, binary SVM)."""
from __future__ import annotations

from pathlib import Path


def load_svmlight(path, n_features=None, dense=True, zero_based="auto", dtype=None):
    """Read an svmlight/LIBSVM file with :func:`sklearn.datasets.load_svmlight_file`.

    Parameters
    ----------
    path : str or Path
    n_features : int, optional
        Number of features (needed when a test file lacks the last features).
    dense : bool
        Return X as a dense float64 ndarray (default) instead of a CSR matrix.
    zero_based : bool or "auto"
        Passed to scikit-learn.

    Returns
    -------
    X : ndarray (n_samples, n_features) or scipy.sparse.csr_matrix
    y : ndarray (n_samples,)  (labels as stored in the file, float64)
    """
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "load_svmlight needs scikit-learn; install it with `pip install scikit-learn` "
            "(or `pip install structfw[svm]`)"
        ) from exc
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path {str(path)!r} is not a file")
    import numpy as np

    kw = {"zero_based": zero_based, "dtype": np.float64 if dtype is None else dtype}
    if n_features is not None:
        kw["n_features"] = int(n_features)
    X, y = load_svmlight_file(str(path), **kw)
    if dense:
        X = np.ascontiguousarray(X.toarray())
    return X, y
