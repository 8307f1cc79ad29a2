"""Features from raw data for the chain model: token sequences in, one CSR matrix per sequence out.

`SequenceVectorizer` is a scikit-learn transformer.  It takes a list of sequences, each either

* a sequence of **tokens** (strings), turned into features by named templates (``"lower"``,
  ``"suffix3"``, ``"shape"``, ``"prev_word"``, ...), or
* a sequence of **feature dicts**, one per token, in sklearn-crfsuite's format
  (``{"word.lower()": "the", "postag": "DT", "word.istitle()": False, "bias": 1.0}``),

and returns a list of ``scipy.sparse.csr_matrix`` of shape ``(L_i, n_features_)``: the ``X`` that
`structfw.models.ChainModel` takes, kept sparse all the way through the solvers.

`make_tagger` puts it in front of a `structfw.StructuredSVM` in a scikit-learn ``Pipeline``
that ``GridSearchCV`` can search::

    import structfw as sf
    from structfw.features import make_tagger

    tagger = make_tagger(n_states=9, lam=1e-3, window=1)
    tagger.fit(sentences, tags)             # lists of token lists and tag lists
    tagger.predict([["Mr.", "Smith", "went", "to", "Paris"]])
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin

if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline
    from sklearn.utils import Tags

__all__ = ["SequenceVectorizer", "make_tagger", "TEMPLATES", "DEFAULT_TEMPLATES"]

#: The token templates of `SequenceVectorizer` and what each emits for the token ``"Paris"``
#: at position i (feature names; boolean templates emit their name, value 1, only when true).
#: ``prefixN`` / ``suffixN`` exist for N = 1..9.
TEMPLATES: dict[str, str] = {
    "bias": "bias: a constant 1 on every token (a per-tag bias)",
    "word": "word=Paris: the token as it is",
    "lower": "lower=paris: the token lowercased",
    "prefixN": "prefix3=par: the first N characters of the lowercased token (all of it if shorter)",
    "suffixN": "suffix3=ris: the last N characters of the lowercased token (all of it if shorter)",
    "shape": "shape=Xx: the token's characters mapped to X (upper), x (lower), d (digit), others "
             "kept, runs collapsed ('U.S.' -> 'X.X.', '1999' -> 'd', 'e-mail' -> 'x-x')",
    "is_title": "is_title: str.istitle() ('Paris')",
    "is_upper": "is_upper: str.isupper() ('NASA')",
    "is_lower": "is_lower: str.islower() ('went')",
    "is_digit": "is_digit: str.isdigit() ('1999')",
    "has_digit": "has_digit: some character is a digit ('A4')",
    "has_hyphen": "has_hyphen: the token contains '-'",
    "is_punct": "is_punct: no character is a letter or a digit (',', '...')",
    "prev_word": "prev_word=went: the previous token lowercased, '<s>' at the start",
    "next_word": "next_word=.: the next token lowercased, '</s>' at the end",
    "bos": "bos: the token is the first of its sequence",
    "eos": "eos: the token is the last of its sequence",
}

#: The templates used when none are given: a bias, the word, its affixes and shape, and its
#: neighbours' words.
DEFAULT_TEMPLATES: tuple[str, ...] = ("bias", "lower", "prefix2", "prefix3", "suffix2", "suffix3", "shape",
                                      "is_title", "is_upper", "is_digit", "prev_word", "next_word", "bos", "eos")

_AFFIX = re.compile(r"^(prefix|suffix)([1-9])$")
# templates that describe a token's place in its sequence rather than the token: the window does
# not copy them from the neighbours (a neighbour's "bos" is the token's own position, said twice)
_POSITIONAL = frozenset({"bias", "prev_word", "next_word", "bos", "eos"})
_BOOLEAN = {"is_title": str.istitle, "is_upper": str.isupper, "is_lower": str.islower, "is_digit": str.isdigit,
            "has_digit": lambda t: any(c.isdigit() for c in t), "has_hyphen": lambda t: "-" in t,
            "is_punct": lambda t: bool(t) and not any(c.isalnum() for c in t)}
_DEFAULT_N_FEATURES = 2 ** 18


def _known_template(name: object) -> bool:
    return isinstance(name, str) and (name in TEMPLATES or _AFFIX.match(name) is not None)


def _shape(token: str) -> str:
    out: list[str] = []
    for c in token:
        s = "X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c
        if not out or out[-1] != s:
            out.append(s)
    return "".join(out)


def _token_features(token: str, templates: Sequence[str]) -> dict[str, float]:
    """The features of one token by the templates that do not look at its neighbours."""
    feats: dict[str, float] = {}
    low = token.lower()
    for t in templates:
        if t in _POSITIONAL:
            continue
        if t == "word":
            feats["word=" + token] = 1.0
        elif t == "lower":
            feats["lower=" + low] = 1.0
        elif t == "shape":
            feats["shape=" + _shape(token)] = 1.0
        elif t in _BOOLEAN:
            if _BOOLEAN[t](token):
                feats[t] = 1.0
        else:
            m = _AFFIX.match(t)
            assert m is not None  # the templates were checked by _check_params
            n = int(m.group(2))
            feats[f"{t}={low[:n] if m.group(1) == 'prefix' else low[-n:]}"] = 1.0
    return feats


def _dict_features(token: Mapping[Any, Any], where: str) -> dict[str, float]:
    """A crfsuite-style feature dict as {name: value}: a string value v of key k becomes the
    feature "k=v" (value 1), as scikit-learn's DictVectorizer and FeatureHasher read it; a list of
    strings one such feature per string; True is 1, and False, None and 0 are no feature."""
    feats: dict[str, float] = {}
    for k, v in token.items():
        if not isinstance(k, str):
            raise ValueError(f"{where} has a feature name {k!r} of type {type(k).__name__}; names must be strings")
        if isinstance(v, str):
            feats[f"{k}={v}"] = 1.0
        elif isinstance(v, (bool, np.bool_)):
            if v:
                feats[k] = 1.0
        elif isinstance(v, (int, float, np.integer, np.floating)):
            x = float(v)
            if not np.isfinite(x):
                raise ValueError(f"{where}[{k!r}] is {v!r}; feature values must be finite")
            if x != 0.0:
                feats[k] = x
        elif v is None:
            continue
        elif isinstance(v, (list, tuple, set, frozenset)) and all(isinstance(s, str) for s in v):
            for s in v:
                feats[f"{k}={s}"] = 1.0
        else:
            raise ValueError(f"{where}[{k!r}] is a {type(v).__name__}; feature values must be strings, "
                             "numbers, booleans, None or lists of strings")
    return feats


# auto_wrap_output_keys=None: the output is a list of matrices, which set_output's pandas or polars
# containers cannot hold, so transform is not wrapped (mypy reads the keyword as object's)
class SequenceVectorizer(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):  # type: ignore[call-arg]
    """Turn a list of token sequences into a list of sparse feature matrices, one per sequence.

    Each sequence of length L becomes a ``scipy.sparse.csr_matrix`` of shape ``(L, n_features_)``
    (float64), row l holding the features of token l: the input `structfw.models.ChainModel`
    takes (``ChainModel(n_states, vectorizer.n_features_)``).  All tokens of all sequences are
    vectorized by one call of scikit-learn's ``FeatureHasher`` or ``DictVectorizer`` and split
    back by the sequences' lengths.

    Parameters
    ----------
    templates : sequence of str
        For sequences of tokens (strings): the features each token gets, by name (see
        `TEMPLATES`): ``"bias"``, ``"word"``, ``"lower"``, ``"prefixN"`` and ``"suffixN"``
        (N = 1..9), ``"shape"``, ``"is_title"``, ``"is_upper"``, ``"is_lower"``, ``"is_digit"``,
        ``"has_digit"``, ``"has_hyphen"``, ``"is_punct"``, ``"prev_word"``, ``"next_word"``,
        ``"bos"``, ``"eos"``.  Default `DEFAULT_TEMPLATES`.  Ignored for sequences of feature
        dicts, whose features are the dicts' own.
    window : int >= 0
        Also give each token the features of its neighbours up to ``window`` positions away,
        named by their offset (``"-1:lower=the"``, ``"+2:is_title"``); a neighbour beyond the
        sequence's ends gives nothing.  For token input these are the neighbours' non-positional
        template features (not ``bias``, ``bos``, ``eos``, ``prev_word``, ``next_word``); for
        dict input, all of the neighbour's dict.  Default 0: each token's own features only.
    hashing : bool
        True (default): hash the feature names into ``n_features`` columns with
        ``sklearn.feature_extraction.FeatureHasher`` (``alternate_sign=False``).  No vocabulary
        is kept and every feature seen at transform counts, and the width is known before
        ``fit``, so a `make_tagger` pipeline can size its model up front; distinct features may
        share a column (with 2**18 columns and 10^5 distinct features, about one in five shares
        one).  False: ``sklearn.feature_extraction.DictVectorizer`` learns the training tokens'
        features, one column each; a feature first seen at transform is dropped.
    n_features : int or None
        The number of columns.  With hashing, the hash space; None (default) is 2**18.  Without
        hashing, None makes one column per training feature, and an int keeps the
        ``n_features`` features present on the most training tokens, the matrices then having
        exactly ``n_features`` columns (the unused ones empty), so that the width is again known
        before ``fit``.

    Attributes
    ----------
    n_features_ : int
        The number of columns of every matrix ``transform`` returns.
    input_kind_ : str
        ``"tokens"`` or ``"dicts"``: what ``fit`` was given; ``transform`` takes the same.
    vocabulary_ : dict or None
        Without hashing: feature name -> column.  None with hashing.

    Examples
    --------
    >>> vec = SequenceVectorizer(templates=("lower", "is_title"), hashing=False)
    >>> Xs = vec.fit_transform([["The", "cat"], ["A", "dog", "barks"]])
    >>> [x.shape for x in Xs]
    [(2, 6), (3, 6)]
    """

    def __init__(self, templates: Sequence[str] = DEFAULT_TEMPLATES, window: int = 0, hashing: bool = True,
                 n_features: int | None = None) -> None:
        self.templates = templates
        self.window = window
        self.hashing = hashing
        self.n_features = n_features

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        # the input is a list of sequences of tokens or dicts, not a 2-D array
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.input_tags.dict = True
        tags.requires_fit = True
        return tags

    # ------------------------------------------------------------ validation
    def _check_params(self) -> tuple[tuple[str, ...], int]:
        templates = self.templates
        if isinstance(templates, str) or not isinstance(templates, Iterable):
            raise ValueError(f"templates must be a list of template names such as ('lower', 'suffix3'); "
                             f"got {templates!r}")
        templates = tuple(templates)
        unknown = [t for t in templates if not _known_template(t)]
        if unknown:
            raise ValueError(f"templates: unknown template(s) {unknown}; known: {sorted(TEMPLATES)} "
                             "(prefixN and suffixN for N = 1..9)")
        window = self.window
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 0:
            raise ValueError(f"window must be an integer >= 0; got {window!r}")
        if not isinstance(self.hashing, (bool, np.bool_)):
            raise ValueError(f"hashing must be True or False; got {self.hashing!r}")
        n = self.n_features
        if n is None:
            pass
        elif isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= 2 ** 31 - 1:
            raise ValueError(f"n_features must be an integer in [1, 2**31 - 1] or None; got {n!r}")
        return templates, int(window)

    @staticmethod
    def _check_input(X: Any) -> tuple[list[Sequence[Any]], str | None]:
        """X as a list of sequences, and the kind of its tokens ("tokens", "dicts"; None if no token)."""
        if isinstance(X, (str, bytes, Mapping)) or not isinstance(X, Iterable) or sp.issparse(X):
            raise ValueError(f"X must be a list of sequences (each a list of tokens or of feature dicts); "
                             f"got {type(X).__name__}")
        X = list(X)
        kind = None
        for i, seq in enumerate(X):
            if isinstance(seq, (str, bytes)):
                raise ValueError(f"X[{i}] is a {type(seq).__name__}, not a sequence of tokens: X must be a list "
                                 "of sequences (a list of token lists); for one sentence pass [tokens]")
            if isinstance(seq, Mapping):
                raise ValueError(f"X[{i}] is a dict, not a sequence: X must be a list of sequences of feature "
                                 "dicts (one dict per token); for one sequence pass [dicts]")
            if not isinstance(seq, Sequence) and not (isinstance(seq, np.ndarray) and seq.ndim == 1):
                raise ValueError(f"X[{i}] must be a sequence of tokens (list, tuple or 1-D array); "
                                 f"got {type(seq).__name__}")
            for j, tok in enumerate(seq):
                k = "tokens" if isinstance(tok, str) else "dicts" if isinstance(tok, Mapping) else None
                if k is None:
                    raise ValueError(f"X[{i}][{j}] is a {type(tok).__name__} ({tok!r:.40}); a token must be a "
                                     "string (featurized by the templates) or a dict of features")
                if kind is None:
                    kind = k
                elif k != kind:
                    raise ValueError(f"X[{i}][{j}] is a {'string' if k == 'tokens' else 'dict'} but earlier "
                                     f"tokens are {'strings' if kind == 'tokens' else 'dicts'}: all tokens of X "
                                     "must be of one kind")
        return X, kind

    # ------------------------------------------------------------ features
    def _token_dicts(self, X: list[Sequence[Any]], kind: str | None, templates: tuple[str, ...],
                     window: int) -> list[dict[str, float]]:
        """The feature dicts of all tokens of all sequences, in order (one list for one vectorizer call)."""
        out: list[dict[str, float]] = []
        tset = set(templates)
        for i, seq in enumerate(X):
            L = len(seq)
            if kind == "dicts":
                own = [_dict_features(tok, f"X[{i}][{j}]") for j, tok in enumerate(seq)]
            else:
                own = [_token_features(tok, templates) for tok in seq]
            for j in range(L):
                feats = dict(own[j])
                if kind == "tokens":
                    if "bias" in tset:
                        feats["bias"] = 1.0
                    if "bos" in tset and j == 0:
                        feats["bos"] = 1.0
                    if "eos" in tset and j == L - 1:
                        feats["eos"] = 1.0
                    if "prev_word" in tset:
                        feats["prev_word=" + (seq[j - 1].lower() if j > 0 else "<s>")] = 1.0
                    if "next_word" in tset:
                        feats["next_word=" + (seq[j + 1].lower() if j < L - 1 else "</s>")] = 1.0
                for off in range(-window, window + 1):
                    if off and 0 <= j + off < L:
                        feats.update((f"{off:+d}:{name}", v) for name, v in own[j + off].items())
                out.append(feats)
        return out

    def _split(self, M: Any, lengths: list[int]) -> list[sp.csr_matrix]:
        """The rows of the stacked matrix M back as one CSR matrix per sequence."""
        M = sp.csr_matrix(M, dtype=np.float64)
        F = self.n_features_
        data, indices, indptr = M.data, M.indices, M.indptr
        out = []
        start = 0
        for L in lengths:
            a, b = indptr[start], indptr[start + L]
            # copies, so that one sequence's matrix does not keep the whole corpus's arrays alive
            out.append(sp.csr_matrix((data[a:b].copy(), indices[a:b].copy(), indptr[start:start + L + 1] - a),
                                     shape=(L, F)))
            start += L
        return out

    # ------------------------------------------------------------ fit / transform
    def _fit(self, X: Any) -> tuple[list[dict[str, float]], list[int]]:
        templates, window = self._check_params()
        X, kind = self._check_input(X)
        if not X:
            raise ValueError("X holds no sequences")
        if kind is None:
            raise ValueError("X holds no tokens (every sequence is empty)")
        dicts = self._token_dicts(X, kind, templates, window)
        if self.hashing:
            from sklearn.feature_extraction import FeatureHasher

            width = _DEFAULT_N_FEATURES if self.n_features is None else int(self.n_features)
            self._vectorizer = FeatureHasher(n_features=width, input_type="dict", alternate_sign=False,
                                             dtype=np.float64)
            self.vocabulary_ = None
            self.n_features_ = width
        else:
            from sklearn.feature_extraction import DictVectorizer

            dv = DictVectorizer(dtype=np.float64, sparse=True, sort=True).fit(dicts)
            if self.n_features is not None and len(dv.vocabulary_) > self.n_features:
                # keep the features present on the most training tokens; ties by name, for a
                # result that does not depend on the order of the corpus
                counts = np.asarray(dv.transform(dicts).getnnz(axis=0))
                keep = np.lexsort((np.arange(counts.size), -counts))[: int(self.n_features)]
                support = np.zeros(counts.size, dtype=bool)
                support[keep] = True
                dv.restrict(support)
            self._vectorizer = dv
            self.vocabulary_ = dict(dv.vocabulary_)
            self.n_features_ = len(dv.vocabulary_) if self.n_features is None else int(self.n_features)
        self.input_kind_ = kind
        self._templates, self._window = templates, window
        return dicts, [len(seq) for seq in X]

    def fit(self, X: Any, y: Any = None) -> Self:
        """Learn the features' columns (without hashing) from the tokens of X.

        Parameters
        ----------
        X : list of sequences
            Each a sequence of tokens (strings) or of feature dicts, all of one kind.
        y : ignored
            Accepted for the ``Pipeline`` API.

        Returns
        -------
        SequenceVectorizer
            self.
        """
        self._fit(X)
        return self

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> list[sp.csr_matrix]:
        """`fit` and `transform` in one pass over X's tokens.

        Parameters
        ----------
        X : list of sequences
            Each a sequence of tokens (strings) or of feature dicts, all of one kind.
        y : ignored
            Accepted for the ``Pipeline`` API.
        **fit_params : dict
            Not used.

        Returns
        -------
        list of scipy.sparse.csr_matrix
            One ``(L_i, n_features_)`` float64 matrix per sequence.
        """
        dicts, lengths = self._fit(X)
        return self._split(self._vectorizer.transform(dicts), lengths)

    def transform(self, X: Any) -> list[sp.csr_matrix]:
        """The feature matrices of the sequences of X.

        Parameters
        ----------
        X : list of sequences
            Of the kind ``fit`` was given (tokens or feature dicts).  An empty sequence gives a
            ``(0, n_features_)`` matrix.

        Returns
        -------
        list of scipy.sparse.csr_matrix
            One ``(L_i, n_features_)`` float64 matrix per sequence.
        """
        if not hasattr(self, "n_features_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this SequenceVectorizer is not fitted yet; call fit(X) first")
        X, kind = self._check_input(X)
        if kind is not None and kind != self.input_kind_:
            raise ValueError(f"X holds {'strings' if kind == 'tokens' else 'feature dicts'} but this vectorizer "
                             f"was fitted on {'strings' if self.input_kind_ == 'tokens' else 'feature dicts'}")
        lengths = [len(seq) for seq in X]
        dicts = self._token_dicts(X, kind, self._templates, self._window)
        if not dicts:
            return [sp.csr_matrix((L, self.n_features_), dtype=np.float64) for L in lengths]
        return self._split(self._vectorizer.transform(dicts), lengths)


def make_tagger(n_states: int, *, solver: Any = "bcfw", lam: float = 0.01, n_features: int = 2 ** 18,
                **options: Any) -> Pipeline:
    """A sequence tagger: ``Pipeline([("features", SequenceVectorizer), ("svm", StructuredSVM(ChainModel))])``.

    The chain model's size must be fixed when the pipeline is built, before any data is seen:
    ``ChainModel(n_states, n_features)`` has one weight per (tag, feature column), and
    `StructuredSVM` checks that every input matrix has ``n_features`` columns.  The vectorizer
    is therefore given the same fixed width: by default it hashes the features into
    ``n_features`` columns (``hashing=True``), whatever the data; with ``hashing=False`` it keeps
    the ``n_features`` most frequent training features.  Either way the pipeline can be cloned
    and searched (``GridSearchCV`` over ``svm__lam``, ``features__window``, ...) without
    resizing anything at fit time.  Searching ``features__n_features`` itself would break that
    agreement: build one pipeline per width instead.

    Parameters
    ----------
    n_states : int >= 2
        The number of distinct tags (``len({t for y in Y for t in y})``).  Tags may be strings:
        the estimator encodes them (``classes_``).
    solver : str or Solver
        `StructuredSVM`'s ``solver``.
    lam : float
        `StructuredSVM`'s ``lam``.
    n_features : int
        Columns of the feature matrices and features of the model.  The solvers keep dense
        vectors of ``n_states * n_features`` weights, so a smaller hash space (2**16) is faster
        on a small corpus, at more collisions.
    **options
        Parameters of `SequenceVectorizer` (``templates``, ``window``, ``hashing``) or of
        `StructuredSVM` (``max_passes``, ``tol``, ``random_state``, ...), each sent to the one
        that has it.

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``"features"`` and ``"svm"``; ``fit(X, Y)`` takes lists of token (or feature
        dict) sequences and of tag sequences, ``predict(X)`` returns tag arrays.

    Examples
    --------
    >>> tagger = make_tagger(3, lam=0.1, window=1, max_passes=5)
    >>> tagger = tagger.fit([["the", "cat", "sat"], ["a", "dog", "ran"]], [["D", "N", "V"], ["D", "N", "V"]])
    >>> tagger.predict([["the", "dog", "sat"]])[0].tolist()
    ['D', 'N', 'V']
    """
    from sklearn.pipeline import Pipeline

    from .estimator import StructuredSVM
    from .models.chain import ChainModel

    vec_names = set(SequenceVectorizer().get_params()) - {"n_features"}
    svm_names = set(StructuredSVM.__init__.__code__.co_varnames[1:StructuredSVM.__init__.__code__.co_argcount])
    svm_names -= {"model", "solver", "lam"}
    unknown = sorted(set(options) - vec_names - svm_names)
    if unknown:
        raise TypeError(f"make_tagger got unexpected option(s) {unknown}; the vectorizer takes {sorted(vec_names)} "
                        f"and the estimator {sorted(svm_names)}")
    vec = SequenceVectorizer(n_features=n_features, **{k: v for k, v in options.items() if k in vec_names})
    svm = StructuredSVM(ChainModel(n_states, n_features), solver=solver, lam=lam,
                        **{k: v for k, v in options.items() if k in svm_names})
    return Pipeline([("features", vec), ("svm", svm)])
