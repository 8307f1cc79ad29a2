"""Features from raw data: token sequences for the chain model, images for the segmentation models.

Text: token sequences in, one CSR matrix per sequence out (`SequenceVectorizer`, `make_tagger`).
Images: `PixelFeatures` turns images into per-pixel grids (`GridModel`), pixel graphs
(`GraphCutModel`, `PottsModel`, `GraphModel`) or superpixel graphs with region adjacency
(`GraphModel`, `PottsModel`); `superpixel_labels` maps label images onto the superpixels.

`SequenceVectorizer` is a scikit-learn transformer.  It takes a list of sequences, each either

* a sequence of **tokens** (strings), turned into features by named templates (``"lower"``,
  ``"suffix3"``, ``"shape"``, ``"prev_word"``, ...), or
* a sequence of **feature dicts**, one per token, in sklearn-crfsuite's format
  (``{"word.lower()": "the", "postag": "DT", "word.istitle()": False, "bias": 1.0}``),

and returns a list of ``scipy.sparse.csr_matrix`` of shape ``(L_i, n_features_)``: the ``X`` that
`structfw.models.ChainModel` takes, kept sparse all the way through the solvers.

`make_tagger` puts it in front of a `structfw.StructuredSVM` in a `Tagger`, a scikit-learn
``Pipeline`` that ``GridSearchCV`` can search, that sizes its model from the data and that is
saved and loaded whole::
    import structfw as sf

    tagger = sf.make_tagger(lam=1e-3, window=1)   # n_states counted from the tags
    tagger.fit(sentences, tags)             # lists of token lists and tag lists
    tagger.predict([["Mr.", "Smith", "went", "to", "Paris"]])
    tagger.save("tagger.npz")
    same = sf.load("tagger.npz")
"""
from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import Pipeline

from ._image import CUE_SIZES, check_image, contrast, grid_edges, normalised_graph, pixel_codes
from ._linalg import as_chain_csr

if TYPE_CHECKING:
    from sklearn.utils import Tags

__all__ = ["SequenceVectorizer", "make_tagger", "Tagger", "TAGGER_KIND", "TEMPLATES", "DEFAULT_TEMPLATES", "PixelFeatures",
           "superpixel_labels", "PIXEL_FEATURES", "EDGE_FEATURES"]

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


def _check_text(text: str, where: str) -> None:
    """Refuse a string that is not valid Unicode text (a lone surrogate such as '\\ud800', which
    ``errors="surrogateescape"`` decoding leaves): FeatureHasher hashes a name's UTF-8 bytes, which
    such a string has none of.  Refused whether or not the features are hashed, so that an input
    is accepted or refused alike by both vectorizers."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{where} ({text!r:.40}) is not valid Unicode text: a lone surrogate {text[exc.start]!r} at "
                         f"character {exc.start}; decode the input with errors='replace' (not 'surrogateescape') "
                         "or drop the character") from None


def _dict_features(token: Mapping[Any, Any], where: str) -> dict[str, float]:
    """A crfsuite-style feature dict as {name: value}: a string value v of key k becomes the
    feature "k=v" (value 1), as scikit-learn's DictVectorizer and FeatureHasher read it; a list of
    strings one such feature per string; True is 1, and False, None and 0 are no feature."""
    feats: dict[str, float] = {}
    for k, v in token.items():
        if not isinstance(k, str):
            raise ValueError(f"{where} has a feature name {k!r} of type {type(k).__name__}; names must be strings")
        _check_text(k, f"{where}, the feature name")
        if isinstance(v, str):
            _check_text(v, f"{where}[{k!r}]")
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
                _check_text(s, f"{where}[{k!r}]")
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
        Any size is accepted: only the offsets inside the sequence are visited, so a window at
        least as long as a sequence gives each of its tokens the features of all the others,
        at a cost bounded by the sequence's length, never by the window.
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

    Tokens, feature names and string feature values must be valid Unicode text: a string
    holding a lone surrogate (``"\\ud800"``, as ``errors="surrogateescape"`` decoding leaves) is
    a ValueError naming its sequence and position (``X[i][j]``), with hashing or without.

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
                if k == "tokens":
                    _check_text(tok, f"X[{i}][{j}] (token {j} of sequence {i})")
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
                # only the offsets that land inside the sequence: a window of 10**9 costs what L - 1 does
                for off in range(max(-window, -j), min(window, L - 1 - j) + 1):
                    if off:
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
            # the index arrays become int64 copies, so that one sequence's matrix does not keep the
            # whole corpus's arrays alive; in the form ChainModel.check_X keeps without a copy
            out.append(as_chain_csr(data[a:b].copy(), indices[a:b], indptr[start:start + L + 1] - a, (L, F)))
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


# =================================================================== the tagger
#: The ``kind`` of a tagger's model file (`Tagger.save`), on which `structfw.load` dispatches.
TAGGER_KIND = "Tagger"
_STEP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_MAX_TEMPLATES = 1000
_MAX_WIDTH = 2 ** 31 - 1


class Tagger(Pipeline):
    """A sequence tagger as one object: a `SequenceVectorizer` and a `StructuredSVM` on a
    `structfw.models.ChainModel`, made by `make_tagger`.

    A scikit-learn ``Pipeline`` subclass rather than an estimator of its own, so that what
    worked on the pipeline `make_tagger` returned before keeps working: ``named_steps``,
    ``tagger[-1]``, nested parameters (``svm__lam``, ``features__window``) for ``clone``,
    ``get_params``/``set_params`` and ``GridSearchCV``.  What it adds to a plain pipeline:

    * the chain model is sized at `fit`, from the data: ``n_states`` tags (the number of
      distinct tags of Y when ``n_states`` is None) and the vectorizer's fitted width
      ``n_features_``, so neither has to be counted by hand and ``features__n_features`` can be
      searched too.  The estimator step's ``model`` parameter is set to that model (None
      before the first fit when it cannot be known yet);
    * the estimator's prediction methods on raw sentences: `predict_marginals`,
      `predict_top_k`, `predict_proba_sequence`, `decision_function`, `calibrate_temperature`,
      `score`, each `StructuredSVM`'s method of the same name on the vectorized input;
    * `save` and `load` (and `structfw.load`) of the whole tagger in one model file.

    Parameters
    ----------
    steps : list of (str, estimator)
        Two steps: ``(name, SequenceVectorizer)`` then ``(name, StructuredSVM)``; `make_tagger`
        names them ``"features"`` and ``"svm"``.  The estimator's ``model`` is None or a
        ``ChainModel``, replaced at fit by one of the data's size.
    n_states : int >= 2 or None
        The number of tags.  None (default): the number of distinct tags in the Y given to
        `fit` (at least 2).  Tags may be strings or any labels; the estimator encodes them
        (``classes_``).
    memory : None
        As ``Pipeline``'s (caching of the vectorizer is not used by `fit`).
    verbose : bool
        As ``Pipeline``'s.

    Attributes
    ----------
    classes_ : ndarray
        The tags, in the order of the model's states (the estimator's ``classes_``).
    """

    def __init__(self, steps: list[tuple[str, Any]], *, n_states: int | None = None, memory: Any = None,
                 verbose: bool = False) -> None:
        super().__init__(steps, memory=memory, verbose=verbose)
        self.n_states = n_states

    # ------------------------------------------------------------ parts
    def _parts(self) -> tuple[SequenceVectorizer, Any]:
        """(vectorizer, estimator), checked to be the two steps a tagger has."""
        from .estimator import StructuredSVM

        steps = self.steps
        ok = (isinstance(steps, list) and len(steps) == 2 and all(isinstance(s, tuple) and len(s) == 2 for s in steps)
              and isinstance(steps[0][1], SequenceVectorizer) and isinstance(steps[1][1], StructuredSVM))
        if not ok:
            raise ValueError("steps: a Tagger has two steps, [(name, SequenceVectorizer), (name, StructuredSVM)]; "
                             f"got {[(n, type(s).__name__) for n, s in steps] if isinstance(steps, list) else steps!r}")
        return steps[0][1], steps[1][1]

    def _check_n_states(self) -> int | None:
        K = self.n_states
        if K is None:
            return None
        if isinstance(K, (bool, np.bool_)) or not isinstance(K, (int, np.integer)) or not 2 <= K <= _MAX_WIDTH:
            raise ValueError(f"n_states must be an integer >= 2 or None (counted from the tags at fit); got {K!r}")
        return int(K)

    def _size_model(self, svm: Any, Y: list[Any], n_features: int) -> None:
        """Give the estimator a ChainModel of this data's size (kept when it already is)."""
        from .models.chain import ChainModel

        model = svm.model
        if model is not None and not isinstance(model, ChainModel):
            raise ValueError(f"the estimator step's model must be a ChainModel (or None, made at fit); "
                             f"got {type(model).__name__}")
        K = self._check_n_states()
        if K is None:
            K = max(2, _count_tags(Y))
        if model is None or (model.n_states, model.n_features) != (K, n_features):
            svm.model = ChainModel(K, n_features)

    def _check_fitted(self) -> tuple[SequenceVectorizer, Any]:
        vec, svm = self._parts()
        if not (hasattr(vec, "n_features_") and hasattr(svm, "coef_")):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this Tagger is not fitted yet; call fit(X, Y) first")
        return vec, svm

    def __sklearn_is_fitted__(self) -> bool:
        try:
            self._check_fitted()
        except ValueError:
            return False
        return True

    # ------------------------------------------------------------ fit
    def fit(self, X: Any, Y: Any, X_test: Any = None, Y_test: Any = None,
            sample_weight: Any = None) -> Self:
        """Fit the vectorizer on X, size the chain model to the data and train the estimator.

        Parameters
        ----------
        X : list of sequences
            Sentences: each a list of tokens (strings) or of feature dicts, all of one kind.
        Y : list of sequences
            One tag sequence per sentence (strings or any labels, all of one kind).
        X_test, Y_test : lists, optional
            Held-out sentences and tags, given together: the trace records ``test_loss``.
        sample_weight : sequence, optional
            `StructuredSVM.fit`'s: per sentence a weight, or an array of one weight per token.

        Returns
        -------
        Tagger
            self.
        """
        from ._labels import _as_list

        vec, svm = self._parts()
        Y = _as_list(Y, "Y")  # read once: a generator could not be read again by the estimator
        Xt = vec.fit_transform(X)
        self._size_model(svm, Y, int(vec.n_features_))
        Xt_test = None if X_test is None else vec.transform(X_test)
        svm.fit(Xt, Y, X_test=Xt_test, Y_test=Y_test, sample_weight=sample_weight)
        return self

    # ------------------------------------------------------------ predict
    def predict(self, X: Any, **params: Any) -> Any:
        """The best tag sequence of each sentence (`StructuredSVM.predict`): a list of arrays of tags."""
        vec, svm = self._check_fitted()
        return svm.predict(vec.transform(X), **params)

    def decision_function(self, X: Any, **params: Any) -> Any:
        """The score of each sentence's predicted tags (`StructuredSVM.decision_function`): an (n,) array."""
        vec, svm = self._check_fitted()
        return svm.decision_function(vec.transform(X), **params)

    def predict_marginals(self, X: Any, temperature: float | None = None,
                          approximate: bool | dict[str, Any] = False) -> list[np.ndarray]:
        """Per sentence an (L, K) array of tag marginals (`StructuredSVM.predict_marginals`);
        column k is the tag ``classes_[k]``."""
        vec, svm = self._check_fitted()
        return svm.predict_marginals(vec.transform(X), temperature=temperature, approximate=approximate)

    def predict_proba_sequence(self, X: Any, temperature: float | None = None) -> np.ndarray:
        """The probability of each sentence's predicted tags (`StructuredSVM.predict_proba_sequence`)."""
        vec, svm = self._check_fitted()
        return svm.predict_proba_sequence(vec.transform(X), temperature=temperature)

    def predict_top_k(self, X: Any, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per sentence the k best tag sequences and their scores, best first
        (`StructuredSVM.predict_top_k`): ``(tags (m, L), scores (m,))``."""
        vec, svm = self._check_fitted()
        return svm.predict_top_k(vec.transform(X), k)

    def calibrate_temperature(self, X_val: Any, Y_val: Any) -> Self:
        """Fit the temperature of `predict_marginals` on held-out sentences
        (`StructuredSVM.calibrate_temperature`; its ``temperature_`` and ``calibration_`` are
        the estimator step's).  Returns self."""
        vec, svm = self._check_fitted()
        svm.calibrate_temperature(vec.transform(X_val), Y_val)
        return self

    def score(self, X: Any, Y: Any, sample_weight: Any = None, **params: Any) -> float:
        """Mean per-sentence tag accuracy (`StructuredSVM.score`); ``sample_weight`` is not supported."""
        if sample_weight is not None:
            raise ValueError("sample_weight: Tagger.score does not weigh sentences; use structfw.metrics")
        vec, svm = self._check_fitted()
        return float(svm.score(vec.transform(X), Y))

    # ------------------------------------------------------------ files
    def save(self, path: str | os.PathLike[str], state: bool = False) -> Path:
        """Write the whole fitted tagger to one model file (`structfw.io`; no pickle).

        The file holds the vectorizer's fitted state (templates, window, hashing, widths, the
        input kind and, without hashing, the vocabulary as a JSON list of feature names in
        column order), the tagger's ``n_states`` and step names, and the estimator's own model
        file (`StructuredSVM.save`) as one byte member, so that it is read back by exactly the
        estimator's loader and its checks.  The whole file carries a digest.  ``.npz`` is
        appended to ``path`` when missing.

        Parameters
        ----------
        path : str or path-like
        state : bool
            Also save the estimator's solver state (`StructuredSVM.save`).

        Returns
        -------
        Path
            The file written.
        """
        vec, svm = self._check_fitted()
        names = [name for name, _ in self.steps]
        header: dict[str, Any] = {"steps": names, "n_states": self._check_n_states(),
                                  "vectorizer": _vectorizer_header(vec)}
        texts = {} if vec.vocabulary_ is None else {"vocabulary": _vocabulary_text(vec.vocabulary_)}
        with tempfile.TemporaryDirectory() as tmp:
            inner = svm.save(Path(tmp) / "estimator.npz", state=state)
            blob = np.frombuffer(inner.read_bytes(), dtype=np.uint8)
        from . import io as sfio

        return sfio.write_model_file(path, TAGGER_KIND, header, {"estimator": blob}, texts=texts)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Tagger:
        """Read a tagger written by `save`, every field checked (`structfw.load` does the same).

        The file is untrusted input: each field is validated (known templates, a window >= 0,
        widths in range, a vocabulary that is a list of distinct strings no longer than the
        width, the estimator's file by `StructuredSVM.load`, a ChainModel whose width is the
        vectorizer's), and anything wrong is a ValueError naming the file and the field.
        """
        from . import io as sfio

        header, arrays = sfio.read_model_file(path, TAGGER_KIND)
        src = header.source
        sfio.check_fields(header, ["steps", "n_states", "vectorizer"])
        names = _step_names(sfio.header_list(header, "steps", max_len=2), src)
        n_states = None if header["n_states"] is None else sfio.header_int(header, "n_states", lo=2, hi=_MAX_WIDTH)
        vh = sfio.header_dict(header, "vectorizer")
        hashing = sfio.header_bool(vh, "hashing")
        sfio.check_fields(arrays, ["estimator"] + ([] if hashing else ["vocabulary"]))
        vocabulary = None if hashing else _vocabulary_from_text(arrays, src)
        vec = _vectorizer_from_header(vh, vocabulary)
        svm = _estimator_from_blob(sfio.array_field(arrays, "estimator", shape=(None,), dtype=np.uint8), src)
        from .models.chain import ChainModel

        model = svm.model
        if not isinstance(model, ChainModel):
            raise ValueError(f"{src}: field 'estimator' holds a {type(model).__name__}, not a ChainModel")
        if model.n_features != vec.n_features_:
            raise ValueError(f"{src}: field 'vectorizer.n_features_' = {vec.n_features_}, but the estimator's "
                             f"ChainModel has {model.n_features} features")
        if n_states is not None and model.n_states != n_states:
            raise ValueError(f"{src}: field 'n_states' = {n_states}, but the estimator's ChainModel has "
                             f"{model.n_states} states")
        return cls([(names[0], vec), (names[1], svm)], n_states=n_states)


def _count_tags(Y: list[Any]) -> int:
    """The number of distinct labels in Y (each Y[i] checked as `StructuredSVM.fit` checks it)."""
    from ._labels import _as_labels

    seen: set[Any] = set()
    for i, y in enumerate(Y):
        seen.update(np.unique(_as_labels(y, f"Y[{i}]")).tolist())
    return len(seen)


def _vectorizer_header(vec: SequenceVectorizer) -> dict[str, Any]:
    """The fitted vectorizer's state as JSON fields (its templates and window as fitted)."""
    n = vec.n_features
    return {"templates": list(vec._templates), "window": int(vec._window), "hashing": vec.vocabulary_ is None,
            "n_features": None if n is None else int(n), "n_features_": int(vec.n_features_),
            "input_kind": vec.input_kind_}


def _vocabulary_text(vocabulary: Mapping[str, int]) -> str:
    """The vocabulary as a JSON list of names, name k being column k (DictVectorizer's columns
    are 0..V-1, also after `restrict`)."""
    import json

    names = [""] * len(vocabulary)
    for name, j in vocabulary.items():
        names[j] = name
    return json.dumps(names)


def _vocabulary_from_text(arrays: Any, src: str) -> list[str]:
    from . import io as sfio

    names = sfio.loads_json(sfio.text_field(arrays, "vocabulary"), src, "vocabulary")
    if not isinstance(names, list):
        raise ValueError(f"{src}: field 'vocabulary' must be a JSON list of feature names (strings), "
                         f"got a JSON {type(names).__name__}")
    for j, s in enumerate(names):
        if not isinstance(s, str):
            raise ValueError(f"{src}: field 'vocabulary' must be a list of feature names (strings); "
                             f"entry {j} is of type {type(s).__name__}")
        if not s.isascii():
            try:
                s.encode("utf-8")
            except UnicodeEncodeError:  # JSON's \ud800 escapes decode to lone surrogates
                raise ValueError(f"{src}: field 'vocabulary': entry {j} is not valid Unicode text "
                                 "(a lone surrogate)") from None
    if len(set(names)) != len(names):
        raise ValueError(f"{src}: field 'vocabulary' names a feature twice")
    return names


def _vectorizer_from_header(vh: Any, vocabulary: list[str] | None) -> SequenceVectorizer:
    """A fitted SequenceVectorizer rebuilt from its checked fields (and vocabulary, without hashing)."""
    from . import io as sfio

    src = vh.source
    sfio.check_fields(vh, ["templates", "window", "hashing", "n_features", "n_features_", "input_kind"])
    templates = sfio.header_list(vh, "templates", max_len=_MAX_TEMPLATES)
    unknown = [t for t in templates if not _known_template(t)]
    if unknown:
        raise ValueError(f"{src}: field 'templates' holds unknown template(s) {unknown[:5]!r:.200}")
    window = sfio.header_int(vh, "window", lo=0, hi=2 ** 63 - 1)
    hashing = sfio.header_bool(vh, "hashing")
    n_features = None if vh["n_features"] is None else sfio.header_int(vh, "n_features", lo=1, hi=_MAX_WIDTH)
    width = sfio.header_int(vh, "n_features_", lo=1, hi=_MAX_WIDTH)
    kind = sfio.header_str_choice(vh, "input_kind", ("tokens", "dicts"))
    if vocabulary is not None and len(vocabulary) > width:
        raise ValueError(f"{src}: field 'n_features_' = {width} is smaller than the vocabulary "
                         f"({len(vocabulary)} features)")
    vec = SequenceVectorizer(templates=tuple(templates), window=window, hashing=hashing, n_features=n_features)
    vec._templates, vec._window = tuple(templates), window
    if vocabulary is None:
        from sklearn.feature_extraction import FeatureHasher

        vec._vectorizer = FeatureHasher(n_features=width, input_type="dict", alternate_sign=False,
                                        dtype=np.float64)
        vec.vocabulary_ = None
    else:
        from sklearn.feature_extraction import DictVectorizer

        dv = DictVectorizer(dtype=np.float64, sparse=True, sort=True)
        dv.feature_names_ = list(vocabulary)
        dv.vocabulary_ = {name: j for j, name in enumerate(vocabulary)}
        vec._vectorizer = dv
        vec.vocabulary_ = dict(dv.vocabulary_)
    vec.n_features_ = width
    vec.input_kind_ = kind
    return vec


def _step_names(names: list[Any], src: str) -> list[str]:
    ok = (len(names) == 2 and all(isinstance(n, str) and _STEP_NAME.match(n) and "__" not in n for n in names)
          and names[0] != names[1])
    if not ok:
        raise ValueError(f"{src}: field 'steps' must be two distinct step names (letters, digits, single "
                         f"underscores); got {names!r:.100}")
    return names


def _estimator_from_blob(blob: np.ndarray, src: str) -> Any:
    """The StructuredSVM of a tagger file's ``estimator`` member (a whole estimator model file),
    read by `StructuredSVM.load` with its every check; its errors name the tagger file's field."""
    from .estimator import StructuredSVM

    with tempfile.TemporaryDirectory() as tmp:
        inner = Path(tmp) / "estimator.npz"
        inner.write_bytes(blob.tobytes())
        try:
            return StructuredSVM.load(inner)
        except ValueError as exc:
            raise ValueError(str(exc).replace(str(inner), f"{src} [estimator]")) from None


def make_tagger(n_states: int | None = None, *, solver: Any = "bcfw", lam: float | str = 0.01,
                n_features: int | None = None, **options: Any) -> Tagger:
    """A sequence tagger: `Tagger` ``([("features", SequenceVectorizer), ("svm", StructuredSVM)])``.

    The `Tagger` (a scikit-learn ``Pipeline``) sizes its `structfw.models.ChainModel` at fit:
    ``n_states`` tags (by default the number of distinct tags of Y) and the vectorizer's width
    ``n_features_``.  By default the feature space is sized to the data: one column per feature
    seen in training (``hashing=False, n_features=None``; features unseen in training are
    ignored at prediction, as a CRF tagger does), and the solver keeps its blocks' w_i as sparse
    rows (``block_storage="sparse"``).  On the bundled corpus this fit took 0.7x the CPU time and
    0.75x the peak memory of 2**18 hashed columns, at the same accuracy, and 0.3x the CPU time
    and memory of the dense rows that ``block_storage="auto"`` picks for 10,570 columns
    (docs/guide/features.md, "Sizing the feature space").  ``hashing=True`` hashes into
    ``n_features`` columns (2**18 when None) whatever the data; ``hashing=False`` with an int
    keeps the ``n_features`` most frequent training features.  The tagger can be cloned and searched (``GridSearchCV`` over ``svm__lam``,
    ``features__window``, ``features__n_features``, ...), and saved whole (`Tagger.save`,
    `structfw.load`).

    Parameters
    ----------
    n_states : int >= 2 or None
        The number of distinct tags; None (default): counted from the tags at fit.  Tags may
        be strings: the estimator encodes them (``classes_``).
    solver : str or Solver
        `StructuredSVM`'s ``solver``.
    lam : float or "auto"
        `StructuredSVM`'s ``lam``.  0.01 by default rather than "auto": in `structfw bench tagger`
        ``lam="auto"`` (ten warm-started fits on 80 % of the data, then the refit) took about 4x
        the fit time and was no more accurate beyond the seeds' spread (docs/results/tagger.md).
    n_features : int or None
        Columns of the feature matrices and features of the model (`SequenceVectorizer`'s
        ``n_features``); None (default): every training feature (a vocabulary), or 2**18 hashed
        columns with ``hashing=True``.  The solvers keep dense vectors of
        ``n_states * n_features`` weights.
    **options
        Parameters of `SequenceVectorizer` (``templates``, ``window``, ``hashing``) or of
        `StructuredSVM` (``max_passes``, ``tol``, ``random_state``, ...), each sent to the one
        that has it.

    Returns
    -------
    Tagger
        Steps ``"features"`` and ``"svm"``; ``fit(X, Y)`` takes lists of token (or feature
        dict) sequences and of tag sequences, ``predict(X)`` returns tag arrays.

    Examples
    --------
    >>> tagger = make_tagger(lam=0.1, window=1, max_passes=5)
    >>> tagger = tagger.fit([["the", "cat", "sat"], ["a", "dog", "ran"]], [["D", "N", "V"], ["D", "N", "V"]])
    >>> tagger.predict([["the", "dog", "sat"]])[0].tolist()
    ['D', 'N', 'V']
    """
    from .estimator import StructuredSVM
    from .models.chain import ChainModel

    vec_names = set(SequenceVectorizer().get_params()) - {"n_features"}
    svm_names = set(StructuredSVM.__init__.__code__.co_varnames[1:StructuredSVM.__init__.__code__.co_argcount])
    svm_names -= {"model", "solver", "lam"}
    unknown = sorted(set(options) - vec_names - svm_names)
    if unknown:
        raise TypeError(f"make_tagger got unexpected option(s) {unknown}; the vectorizer takes {sorted(vec_names)} "
                        f"and the estimator {sorted(svm_names)}")
    vec_options = {k: v for k, v in options.items() if k in vec_names}
    vec_options.setdefault("hashing", False)  # with hashing, None is the vectorizer's 2**18
    vec = SequenceVectorizer(n_features=n_features, **vec_options)
    if isinstance(solver, str) and solver == "bcfw":
        from .solvers import BCFW

        # a tagger's psi_i are sparse (a few features a token): sparse rows hold them in far less
        # memory than the n x d dense rows "auto" takes when they fit, and step faster
        solver = BCFW(block_storage="sparse")
    # the model is known up front when both sizes are (as before); otherwise the tagger makes it at fit
    model = ChainModel(n_states, n_features) if n_states is not None and n_features is not None else None
    svm = StructuredSVM(model, solver=solver, lam=lam,  # type: ignore[arg-type]
                        **{k: v for k, v in options.items() if k in svm_names})
    tagger = Tagger([("features", vec), ("svm", svm)], n_states=n_states)
    tagger._check_n_states()  # a bad n_states is named here, not first at fit
    return tagger


# =================================================================== images
#: The node features `PixelFeatures` can compute (``features=``), in the order of their columns.
PIXEL_FEATURES: dict[str, str] = {
    "lab": "colour in CIE Lab (skimage.color.rgb2lab), L/100, a/128, b/128: the pixel's value, or a "
           "superpixel's mean and standard deviation (3 or 6 columns)",
    "position": "row / H and column / W of the pixel, or a superpixel's centroid (2 columns)",
    "lbp": "texture: local binary patterns (skimage.feature.local_binary_pattern, 'uniform', lbp_points "
           "neighbours at lbp_radius), as a normalised histogram of the lbp_points + 2 codes over the "
           "superpixel, or over a window x window neighbourhood of a pixel",
    "gradient": "HOG-like: a histogram of unsigned gradient orientations (Sobel, skimage.filters) in "
                "n_orientations bins weighted by the magnitude, normalised, plus the mean magnitude "
                "(n_orientations + 1 columns), over the superpixel or a pixel's window",
    "bins": "the quantised cues of structfw.datasets.segmentation's generated sets (smoothed intensity 12, "
            "hue 8, saturation 4, Laplacian-of-Gaussian texture 8, gradient magnitude 6 bins): one-hot per "
            "pixel, normalised histograms per superpixel (38 columns)",
    "bias": "a constant 1 (a per-label bias)",
}
#: The edge features `PixelFeatures` can compute (``edge_features=``); all are >= 0, as
#: `GraphCutModel` and `PottsModel` require.
EDGE_FEATURES: dict[str, str] = {
    "contrast": "exp(-beta ||Lab_u - Lab_v||^2) of the two pixels or superpixel means, beta = 1 / (2 mean "
                "squared difference over the image's edges) (Boykov & Jolly 2001; Rother et al. 2004)",
    "boundary": "the number of 4-neighbour pixel pairs the two superpixels share over its mean across "
                "the image's edges (1 for pixel graphs)",
    "bias": "a constant 1 (a learned pairwise table / Potts weight shared by every edge)",
}
DEFAULT_PIXEL_FEATURES: tuple[str, ...] = ("lab", "position", "lbp", "gradient", "bias")
DEFAULT_EDGE_FEATURES: tuple[str, ...] = ("contrast", "boundary", "bias")
_OUTPUTS = ("superpixels", "pixels", "grid")


def _check_names(value: Any, known: Mapping[str, str], name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValueError(f"{name} must be a list of names such as {tuple(known)[:2]}; got {value!r}")
    out = tuple(value)
    unknown = [v for v in out if v not in known]
    if unknown:
        raise ValueError(f"{name}: unknown name(s) {unknown}; known: {list(known)}")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} names a feature twice: {list(out)}")
    return out


def _check_images(X: Any) -> list[Any]:
    if isinstance(X, np.ndarray) and X.ndim in (2, 3) and X.dtype != object and (X.ndim == 2 or X.shape[-1] == 3):
        raise ValueError(f"X must be a list of images, got one array of shape {X.shape}; for one image pass [img]")
    if isinstance(X, (str, bytes, Mapping)) or not isinstance(X, Iterable) or sp.issparse(X):
        raise ValueError(f"X must be a list of images (arrays (H, W) or (H, W, 3)); got {type(X).__name__}")
    X = list(X)
    if not X:
        raise ValueError("X holds no images")
    return X


def _region_adjacency(seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(edges (E, 2) int64 with u < v, sorted, and the number of 4-neighbour pixel pairs each
    pair of regions shares) of a label map with labels 0..n-1."""
    n = int(seg.max()) + 1
    a = np.concatenate([seg[:, :-1].ravel(), seg[:-1, :].ravel()])
    b = np.concatenate([seg[:, 1:].ravel(), seg[1:, :].ravel()])
    cross = a != b
    lo, hi = np.minimum(a[cross], b[cross]), np.maximum(a[cross], b[cross])
    pairs, length = np.unique(lo.astype(np.int64) * n + hi, return_counts=True)
    return np.stack([pairs // n, pairs % n], 1).astype(np.int64), length.astype(np.float64)


def superpixel_labels(segments: Sequence[Any], label_images: Sequence[Any]) -> list[np.ndarray]:
    """The majority label of each superpixel, per image.

    Parameters
    ----------
    segments : list of (H, W) int arrays
        Superpixel maps with labels 0..S-1 (`PixelFeatures.segments`).
    label_images : list of (H, W) int arrays
        Per-pixel labels; negative values mark unlabelled pixels, which do not vote.

    Returns
    -------
    list of (S,) int64
        Per superpixel the label most of its labelled pixels carry (ties: the smallest label);
        -1 for a superpixel none of whose pixels is labelled.
    """
    if isinstance(segments, np.ndarray) or isinstance(label_images, np.ndarray):
        raise ValueError("segments and label_images must be lists (one (H, W) array per image); for one "
                         "image pass [seg], [labels]")
    segments, label_images = list(segments), list(label_images)
    if len(segments) != len(label_images):
        raise ValueError(f"segments and label_images differ in length ({len(segments)} vs {len(label_images)})")
    out = []
    for i, (seg, lab) in enumerate(zip(segments, label_images)):
        seg, lab = np.asarray(seg), np.asarray(lab)
        if not np.issubdtype(seg.dtype, np.integer) or seg.ndim != 2 or seg.size == 0 or seg.min() < 0:
            raise ValueError(f"segments[{i}] must be a non-empty (H, W) array of superpixel indices >= 0, "
                             f"got shape {seg.shape}, dtype {seg.dtype}")
        if lab.shape != seg.shape:
            raise ValueError(f"label_images[{i}] has shape {lab.shape}, but its segments {seg.shape}")
        if not (np.issubdtype(lab.dtype, np.integer) or lab.dtype == np.bool_):
            raise ValueError(f"label_images[{i}] must hold integer labels, got dtype {lab.dtype}")
        s, y = seg.ravel().astype(np.int64), lab.ravel().astype(np.int64)
        n = int(s.max()) + 1
        keep = y >= 0
        K = int(y[keep].max()) + 1 if keep.any() else 1
        votes = np.zeros((n, K), np.int64)
        np.add.at(votes, (s[keep], y[keep]), 1)
        best = votes.argmax(1).astype(np.int64)  # argmax: the first (smallest) label on ties
        best[votes.sum(1) == 0] = -1
        out.append(best)
    return out


class PixelFeatures(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):  # type: ignore[call-arg]
    """Turn images into the inputs of the segmentation models: pixel grids, pixel graphs or
    superpixel graphs with region adjacency.

    Every image is read as RGB in [0, 1] (grey images are repeated over the channels; integer
    images are scaled by their dtype's range, uint8 by 255) and described by scikit-image:
    colour in CIE Lab, position, local binary patterns and a gradient-orientation histogram
    (`PIXEL_FEATURES`).  Per pixel, the texture histograms are taken over a ``window x window``
    neighbourhood; per superpixel (SLIC, ``skimage.segmentation.slic``), over its pixels, with
    the Lab mean and standard deviation and the centroid.  Edges join 4-neighbour pixels or
    adjacent superpixels (they share a 4-neighbour pixel pair), with non-negative features
    (`EDGE_FEATURES`): the colour contrast, the shared boundary and a bias.

    The transform depends on the images only (SLIC is deterministic), so `fit` learns nothing but
    the widths, and labels can be mapped independently: `transform_labels` gives each node its
    label (the majority label of a superpixel's pixels, `superpixel_labels`) and `to_pixels` paints
    node labels back onto the pixels.

    Parameters
    ----------
    output : {"superpixels", "pixels", "grid"}, default "superpixels"
        "superpixels": per image ``(node_features (S, F), edges (E, 2), edge_features (E, Fe))``
        over its SLIC superpixels (`GraphModel`, `PottsModel`, `GraphCutModel`). "pixels": the
        same over all H W pixels, 4-connected, nodes in row-major order. "grid": an
        ``(H, W, F)`` array per image (`GridModel`; no edge features).
    features : sequence of str, default ("lab", "position", "lbp", "gradient", "bias")
        The node features, by name (`PIXEL_FEATURES`), in this column order.  ``"bins"`` gives
        the features of `structfw.datasets.segmentation`'s generated sets (the same code).
    edge_features : sequence of str, default ("contrast", "boundary", "bias")
        The edge features (`EDGE_FEATURES`); ignored for "grid".  Must not be empty for the graph
        outputs.
    n_segments : int >= 1, default 100
        SLIC's target number of superpixels (the result may have fewer or more).
    compactness : float > 0, default 10.0
        SLIC's balance of colour and space proximity (higher: more regular superpixels).
    sigma : float >= 0, default 1.0
        Width of the Gaussian smoothing before SLIC.
    lbp_points : int >= 1, default 8
        Neighbours of a local binary pattern; ``lbp_points + 2`` texture columns.
    lbp_radius : float > 0, default 1.0
        Their radius in pixels.
    n_orientations : int >= 1, default 8
        Orientation bins of the gradient histogram over [0, pi).
    window : odd int >= 1, default 5
        The neighbourhood of a pixel's texture histograms (pixel outputs only), at most
        2 max(H, W) + 1 for an H x W image (wider is refused at transform, naming the image).
    normalize : bool, default True
        Divide the node and edge features of a graph output by its number of nodes V.  The joint
        features sum over nodes and edges while the Hamming loss is a mean, so without this the
        useful ``lam`` grows like V^2 with the image size (`structfw.datasets.segmentation`
        normalises its graphs alike).  Ignored for "grid".

    Attributes
    ----------
    n_features_ : int
        F, the columns of the node features (the models' ``n_features``).
    n_edge_features_ : int or None
        Fe, the columns of the edge features (``n_edge_features``); None for "grid".
    feature_names_ : list of str
        The name of each node feature column.

    Examples
    --------
    >>> import numpy as np
    >>> pf = PixelFeatures(n_segments=4, features=("lab", "bias"), edge_features=("contrast",))
    >>> img = np.zeros((8, 8, 3)); img[:, 4:] = 1.0
    >>> (nodes, edges, ef), = pf.fit_transform([img])
    >>> nodes.shape[1], pf.n_features_, ef.shape[1]
    (7, 7, 1)
    """

    def __init__(self, output: str = "superpixels", features: Sequence[str] = DEFAULT_PIXEL_FEATURES,
                 edge_features: Sequence[str] = DEFAULT_EDGE_FEATURES, n_segments: int = 100,
                 compactness: float = 10.0, sigma: float = 1.0, lbp_points: int = 8, lbp_radius: float = 1.0,
                 n_orientations: int = 8, window: int = 5, normalize: bool = True) -> None:
        self.output = output
        self.features = features
        self.edge_features = edge_features
        self.n_segments = n_segments
        self.compactness = compactness
        self.sigma = sigma
        self.lbp_points = lbp_points
        self.lbp_radius = lbp_radius
        self.n_orientations = n_orientations
        self.window = window
        self.normalize = normalize

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # a list of images
        tags.requires_fit = True
        return tags

    # ------------------------------------------------------------ validation
    def _check_params(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if self.output not in _OUTPUTS:
            raise ValueError(f"output must be one of {_OUTPUTS}, got {self.output!r}")
        feats = _check_names(self.features, PIXEL_FEATURES, "features")
        if not feats:
            raise ValueError("features is empty: name at least one of " + str(list(PIXEL_FEATURES)))
        efeats = _check_names(self.edge_features, EDGE_FEATURES, "edge_features")
        if not efeats and self.output != "grid":
            raise ValueError(f"edge_features is empty, but output={self.output!r} makes graphs, whose models "
                             "need at least one edge feature (('bias',) for a plain pairwise table)")

        def integer(name: str, lo: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")

        def real(name: str, positive: bool) -> None:
            v = getattr(self, name)
            ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and np.isfinite(v)
            if not ok or (v <= 0 if positive else v < 0):
                raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {v!r}")

        integer("n_segments", 1)
        integer("lbp_points", 1)
        integer("n_orientations", 1)
        integer("window", 1)
        if self.window % 2 == 0:
            raise ValueError(f"window must be odd (a neighbourhood centred on the pixel), got {self.window}")
        real("compactness", True)
        real("sigma", False)
        real("lbp_radius", True)
        if not isinstance(self.normalize, (bool, np.bool_)):
            raise ValueError(f"normalize must be True or False, got {self.normalize!r}")
        return feats, efeats

    def _names(self, feats: tuple[str, ...]) -> list[str]:
        sp_out = self.output == "superpixels"
        names: list[str] = []
        for f in feats:
            if f == "lab":
                names += ["lab_L", "lab_a", "lab_b"] + (["lab_L_std", "lab_a_std", "lab_b_std"] if sp_out else [])
            elif f == "position":
                names += ["row", "col"]
            elif f == "lbp":
                names += [f"lbp_{c}" for c in range(int(self.lbp_points) + 2)]
            elif f == "gradient":
                names += [f"orientation_{c}" for c in range(int(self.n_orientations))] + ["gradient_magnitude"]
            elif f == "bins":
                names += [f"{cue}_bin_{c}" for cue, n in zip(("intensity", "hue", "saturation", "texture",
                                                               "gradient"), CUE_SIZES) for c in range(n)]
            else:
                names.append("bias")
        return names

    # ------------------------------------------------------------ per image
    def _segment(self, rgb: np.ndarray) -> np.ndarray:
        """The SLIC superpixels of one checked image, relabelled 0..S-1 (int64)."""
        from skimage.segmentation import slic

        seg = slic(rgb, n_segments=int(self.n_segments), compactness=float(self.compactness),
                   sigma=float(self.sigma), start_label=0, channel_axis=-1)
        _, inv = np.unique(seg, return_inverse=True)
        return inv.reshape(seg.shape).astype(np.int64)

    def _cues(self, rgb: np.ndarray, feats: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Per-pixel maps: lab (H, W, 3) scaled, lbp codes (H, W) int, orientation bins and magnitudes."""
        from skimage.color import rgb2gray, rgb2lab

        out: dict[str, np.ndarray] = {}
        lab = rgb2lab(rgb)
        out["lab"] = lab / np.array([100.0, 128.0, 128.0])
        grey = rgb2gray(rgb)
        if "lbp" in feats:
            from skimage.feature import local_binary_pattern
            from skimage.util import img_as_ubyte

            out["lbp"] = local_binary_pattern(img_as_ubyte(grey), int(self.lbp_points), float(self.lbp_radius),
                                              method="uniform").astype(np.int64)
        if "gradient" in feats:
            from skimage.filters import sobel_h, sobel_v

            gy, gx = sobel_h(grey), sobel_v(grey)
            mag = np.hypot(gx, gy)
            theta = np.mod(np.arctan2(gy, gx), np.pi)
            nb = int(self.n_orientations)
            out["orient"] = np.minimum((theta / np.pi * nb).astype(np.int64), nb - 1)
            out["mag"] = mag
        if "bins" in feats:
            codes, _ = pixel_codes(rgb)
            for c, code in enumerate(codes):
                out[f"bins{c}"] = code
        return out

    def _check_window(self, H: int, W: int, where: str) -> None:
        """A pixel's window must fit the image's reflected neighbourhood: a wider one is mostly
        padding, and its filters cost grows with the window (10**9 ran for minutes on 20 x 20)."""
        if self.output == "superpixels":
            return  # the histograms are taken over each superpixel; the window is not used
        limit = 2 * max(H, W) + 1
        if int(self.window) > limit:
            raise ValueError(f"window={self.window} is wider than {where} ({H} x {W} pixels) allows: a pixel's "
                             f"neighbourhood would be mostly reflected padding; use an odd window <= {limit}")

    def _node_features(self, cues: dict[str, np.ndarray], seg: np.ndarray | None,
                       feats: tuple[str, ...]) -> np.ndarray:
        """(V, F): per region of ``seg`` (superpixels) or per pixel (seg None)."""
        from scipy import ndimage

        H, W = cues["lab"].shape[:2]
        if seg is not None:
            s = seg.ravel()
            n = int(s.max()) + 1
            count = np.bincount(s, minlength=n).astype(np.float64)

            def mean(v: np.ndarray) -> np.ndarray:
                return np.bincount(s, v.ravel(), n) / count

            def hist(codes: np.ndarray, nb: int, weights: np.ndarray | None = None) -> np.ndarray:
                h = np.zeros((n, nb))
                np.add.at(h, (s, codes.ravel()), 1.0 if weights is None else weights.ravel())
                tot = h.sum(1, keepdims=True)
                return np.divide(h, tot, out=np.zeros_like(h), where=tot > 0)
        else:
            win = int(self.window)

            def hist(codes: np.ndarray, nb: int, weights: np.ndarray | None = None) -> np.ndarray:
                w = np.ones(codes.shape) if weights is None else weights
                h = np.stack([ndimage.uniform_filter(np.where(codes == c, w, 0.0), win, mode="reflect")
                              for c in range(nb)], -1).reshape(H * W, nb)
                tot = h.sum(1, keepdims=True)
                return np.divide(h, tot, out=np.zeros_like(h), where=tot > 1e-12)

        ii, jj = np.mgrid[0:H, 0:W]
        cols: list[np.ndarray] = []
        for f in feats:
            if f == "lab":
                lab = cues["lab"]
                if seg is None:
                    cols.append(lab.reshape(-1, 3))
                else:
                    m = np.stack([mean(lab[..., c]) for c in range(3)], 1)
                    sq = np.stack([mean(lab[..., c] ** 2) for c in range(3)], 1)
                    cols += [m, np.sqrt(np.maximum(sq - m ** 2, 0.0))]
            elif f == "position":
                r, c = ii / max(H - 1, 1), jj / max(W - 1, 1)
                cols.append(np.stack([r.ravel(), c.ravel()], 1) if seg is None else np.stack([mean(r), mean(c)], 1))
            elif f == "lbp":
                cols.append(hist(cues["lbp"], int(self.lbp_points) + 2))
            elif f == "bins":
                for c, n_bins in enumerate(CUE_SIZES):
                    code = cues[f"bins{c}"]
                    if seg is None:
                        cols.append(np.eye(n_bins)[code.ravel()])
                    else:
                        cols.append(hist(code, n_bins))
            elif f == "gradient":
                mag = cues["mag"]
                cols.append(hist(cues["orient"], int(self.n_orientations), mag))
                if seg is None:
                    cols.append(ndimage.uniform_filter(mag, int(self.window), mode="reflect").reshape(-1, 1))
                else:
                    cols.append(mean(mag)[:, None])
            else:
                cols.append(np.ones((H * W if seg is None else int(seg.max()) + 1, 1)))
        return np.ascontiguousarray(np.concatenate(cols, 1), dtype=np.float64)

    def _edges(self, cues: dict[str, np.ndarray], seg: np.ndarray | None, nodes_lab: np.ndarray | None,
               efeats: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:

        H, W = cues["lab"].shape[:2]
        if seg is None:
            edges = grid_edges(H, W)
            length = np.ones(edges.shape[0])
            colour = cues["lab"].reshape(-1, 3)
        else:
            edges, length = _region_adjacency(seg)
            colour = np.asarray(nodes_lab, dtype=np.float64)
        E = edges.shape[0]
        cols = []
        for f in efeats:
            if f == "contrast":
                cols.append(contrast(colour[edges[:, 0]], colour[edges[:, 1]]) if E else np.zeros(0))
            elif f == "boundary":
                cols.append(length / length.mean() if E else np.zeros(0))
            else:
                cols.append(np.ones(E))
        return edges, np.ascontiguousarray(np.stack(cols, 1).reshape(E, len(efeats)), dtype=np.float64)

    def _transform_one(self, img: Any, where: str, feats: tuple[str, ...], efeats: tuple[str, ...]) -> Any:
        rgb = check_image(img, where)
        H, W = rgb.shape[:2]
        self._check_window(H, W, where)
        cues = self._cues(rgb, feats)
        if self.output == "grid":
            return self._node_features(cues, None, feats).reshape(H, W, -1)
        seg = self._segment(rgb) if self.output == "superpixels" else None
        nodes = self._node_features(cues, seg, feats)
        mean_lab = None
        if seg is not None:
            s = seg.ravel()
            n = int(s.max()) + 1
            count = np.bincount(s, minlength=n)
            mean_lab = np.stack([np.bincount(s, cues["lab"][..., c].ravel(), n) / count for c in range(3)], 1)
        edges, ef = self._edges(cues, seg, mean_lab, efeats)
        if self.normalize:
            nodes, edges, ef = normalised_graph(nodes, edges, ef)
        return (np.ascontiguousarray(nodes), edges, np.ascontiguousarray(ef))

    # ------------------------------------------------------------ fit / transform
    def fit(self, X: Any, y: Any = None) -> Self:
        """Check the parameters and the images of X and set the widths (nothing is learned).

        Parameters
        ----------
        X : list of images
            Each an array (H, W) or (H, W, 3): floats in [0, 1] or integers (uint8: 0..255).
        y : ignored
            Accepted for the ``Pipeline`` API.

        Returns
        -------
        PixelFeatures
            self.
        """
        feats, efeats = self._check_params()
        for i, img in enumerate(_check_images(X)):
            check_image(img, f"X[{i}]")
        self.feature_names_ = self._names(feats)
        self.n_features_ = len(self.feature_names_)
        self.n_edge_features_ = None if self.output == "grid" else len(efeats)
        return self

    def transform(self, X: Any) -> list[Any]:
        """The model inputs of the images of X.

        Parameters
        ----------
        X : list of images
            Each an array (H, W) or (H, W, 3): floats in [0, 1] or integers (uint8: 0..255).

        Returns
        -------
        list
            Per image: for "superpixels" and "pixels" a tuple ``(node_features (V, F) float64,
            edges (E, 2) int64, edge_features (E, Fe) float64 >= 0)``; for "grid" an (H, W, F)
            float64 array.
        """
        if not hasattr(self, "n_features_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this PixelFeatures is not fitted yet; call fit(X) first")
        feats, efeats = self._check_params()
        return [self._transform_one(img, f"X[{i}]", feats, efeats) for i, img in enumerate(_check_images(X))]

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> list[Any]:
        """`fit` then `transform` (each image is read once)."""
        feats, efeats = self._check_params()
        X = _check_images(X)
        out = [self._transform_one(img, f"X[{i}]", feats, efeats) for i, img in enumerate(X)]
        self.feature_names_ = self._names(feats)
        self.n_features_ = len(self.feature_names_)
        self.n_edge_features_ = None if self.output == "grid" else len(efeats)
        return out

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """The node feature names (`feature_names_`) as an array of str."""
        if not hasattr(self, "feature_names_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this PixelFeatures is not fitted yet; call fit(X) first")
        return np.asarray(self.feature_names_, dtype=object)

    # ------------------------------------------------------------ labels
    def segments(self, X: Any) -> list[np.ndarray]:
        """Per image the (H, W) int64 map from pixels to nodes: the superpixel of each pixel
        (labels 0..S-1, as in `transform`'s node order), or for pixel outputs the row-major
        pixel index.  Needs no fit."""
        self._check_params()
        out = []
        for i, img in enumerate(_check_images(X)):
            rgb = check_image(img, f"X[{i}]")
            if self.output == "superpixels":
                out.append(self._segment(rgb))
            else:
                H, W = rgb.shape[:2]
                out.append(np.arange(H * W, dtype=np.int64).reshape(H, W))
        return out

    def transform_labels(self, X: Any, label_images: Sequence[Any]) -> list[np.ndarray]:
        """The node labels of per-pixel label images: what `StructuredSVM.fit` takes as Y after
        this transformer.

        A ``Pipeline`` passes Y to the estimator unchanged, so map the label images first::
            Y_nodes = features.transform_labels(images, label_images)
            pipeline.fit(images, Y_nodes)

        Parameters
        ----------
        X : list of images
            The images (their superpixels are recomputed, deterministically).
        label_images : list of (H, W) int arrays
            Per-pixel labels; negative values mark unlabelled pixels.

        Returns
        -------
        list of int64 arrays
            "superpixels": (S,) the majority label of each superpixel (`superpixel_labels`; -1
            where no pixel is labelled); "pixels": (H W,) the labels in row-major order; "grid":
            the (H, W) label images.
        """
        X = _check_images(X)
        if isinstance(label_images, np.ndarray) or len(label_images) != len(X):
            raise ValueError(f"label_images must be a list of one (H, W) label array per image of X "
                             f"({len(X)} images)")
        if self.output == "superpixels":
            return superpixel_labels(self.segments(X), label_images)
        out = []
        for i, (img, lab) in enumerate(zip(X, label_images)):
            lab = np.asarray(lab)
            if lab.shape != np.shape(img)[:2]:
                raise ValueError(f"label_images[{i}] has shape {lab.shape}, but X[{i}] is {np.shape(img)[:2]}")
            if not (np.issubdtype(lab.dtype, np.integer) or lab.dtype == np.bool_):
                raise ValueError(f"label_images[{i}] must hold integer labels, got dtype {lab.dtype}")
            lab = lab.astype(np.int64)
            out.append(lab if self.output == "grid" else lab.ravel())
        return out

    def to_pixels(self, X: Any, Y: Sequence[Any]) -> list[np.ndarray]:
        """Node labels (e.g. ``predict``'s) painted back onto the pixels: per image an (H, W) array.

        Parameters
        ----------
        X : list of images
            The images the labels are of.
        Y : list of arrays
            Per image one label per node of `transform`'s output (any dtype, e.g. string labels).
        """
        segs = self.segments(X)
        if isinstance(Y, np.ndarray) or len(Y) != len(segs):
            raise ValueError(f"Y must be a list of one label array per image of X ({len(segs)} images)")
        out = []
        for i, (seg, y) in enumerate(zip(segs, Y)):
            y = np.asarray(y)
            n = int(seg.max()) + 1
            if y.shape != (n,) and y.shape != seg.shape:
                raise ValueError(f"Y[{i}] has shape {y.shape}, but X[{i}] has {n} nodes")
            out.append(y if y.shape == seg.shape and self.output == "grid" else y.ravel()[seg])
        return out

