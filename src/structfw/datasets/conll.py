"""CoNLL-2000 chunking at the papers' scale: the column-format reader, the chunking feature
templates, and a generated corpus of the paper's size for when the real one is not at hand.

The BCFW and gap-BCFW papers train a linear chain on CoNLL-2000 (Tjong Kim Sang & Buchholz
2000): n = 8,936 training and 2,012 test sentences of the Wall Street Journal (211,727 and
47,377 tokens, 23.7 and 23.5 per sentence), each token with its part of speech and a chunk tag
in the IOB2 scheme (``B-NP``, ``I-NP``, ``O``, ...), and d = 1,643,026.  The paper's d counts
the joint feature vector, as `structfw.models.ChainModel` does (d = K F + K^2): K must divide
1,643,026, and of its divisors only K = 22 is a number of chunk tags CoNLL-2000 has (22 or 23 by
how the rare tags are counted; the others are 2, 7, 11, 14, 47, ...): F = 74,661 indicator
features per token.  The default width of `load_conll_scale` (`PAPER_N_FEATURES`) is that F,
so its d is the paper's exactly.

Three parts:

* `load_conll` reads a user's own copy of the corpus (``train.txt`` / ``test.txt``, or
  their ``.gz``): one ``word POS chunk-tag`` line per token, a blank line between sentences.
  A malformed line is a ValueError naming the line and what was expected.
* `conll_feature_dicts` applies the chunking templates (`CONLL_TEMPLATES`) to tokens and POS
  tags, and `conll_chain_data` turns a train/test pair of corpora into ChainModel inputs (one
  CSR matrix per sentence) through `ConllVectorizer`, which numbers the features as
  ``structfw.features.SequenceVectorizer(hashing=False)`` does (``n_features`` keeps the
  features present on the most training tokens), several times faster at this size.
* `make_conll_like` generates a corpus of the paper's size when no copy is available (none
  ships with a package here: NLTK downloads its ``conll2000`` corpus at run time, Debian
  packages no CoNLL or treebank data, and no PyPI package we checked ships English chunked
  text), and `load_conll_scale` passes it through the same templates and caches the result
  under ``$STRUCTFW_DATA_HOME`` (or ``~/.cache/structfw``) in ``conll/``.

The templates.  Words and POS tags in a window of -2..+2, the word bigrams w[-1]w[0] and
w[0]w[+1], and the POS bigrams and trigrams of that window are the chunking feature set of Sha
& Pereira (2003, "Shallow parsing with conditional random fields"), the one the CoNLL-2000
chunking template distributed with CRF++ (``example/chunking/template``) writes down.  The
spelling templates of the token itself -- prefixes and suffixes of 1 to 4 characters,
capitalisation, digits and hyphens -- are those of Ratnaparkhi (1996, "A maximum entropy model
for part-of-speech tagging"); the word shape (``Xx``, ``d.d``), as named-entity taggers use it
(e.g. Finkel et al. 2005), is read at -1..+1.  Beyond the sentence's ends the window reads
``<s>`` and ``</s>``, as CRF++ reads its boundary symbols.
"""
from __future__ import annotations

import bisect
import gzip
import os
import re
import time
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from .._linalg import as_chain_csr
from ._cache import CacheFile, data_home, read_cache, write_cache

__all__ = ["load_conll", "conll_feature_dicts", "conll_chain_data", "make_conll_like", "load_conll_scale",
           "ConllCorpus", "ConllVectorizer", "ChainData", "CONLL_TEMPLATES", "CONLL2000_TAGS", "PAPER_N_FEATURES"]

#: The 22 chunk tags of the generated corpus (and the first tags of any corpus's tag list):
#: B- and I- of ten chunk types, B-LST (one-token lists) and O.
CONLL2000_TAGS: tuple[str, ...] = (
    "O", "B-NP", "I-NP", "B-VP", "I-VP", "B-PP", "I-PP", "B-ADVP", "I-ADVP", "B-SBAR", "I-SBAR", "B-ADJP",
    "I-ADJP", "B-PRT", "I-PRT", "B-CONJP", "I-CONJP", "B-INTJ", "I-INTJ", "B-UCP", "I-UCP", "B-LST")
#: The papers' sizes: sentences, the joint dimension d, and the per-token F = (d - 22^2) / 22.
PAPER_N_TRAIN = 8936
PAPER_N_TEST = 2012
PAPER_D = 1_643_026
PAPER_N_FEATURES = (PAPER_D - 22 ** 2) // 22  # 74,661

#: The feature templates, by the name of the feature they emit: w = word (as written), p = POS
#: tag, [k] = offset from the token, ``|`` = a conjunction; ``prefixN`` / ``suffixN`` of the
#: lowercased token; ``shape`` maps upper case to X, lower to x, digits to d, collapsing runs;
#: the flags (``is_title``, ``is_upper``, ``has_digit``, ``has_hyphen``) are on when true.
CONLL_TEMPLATES: tuple[str, ...] = (
    "bias",
    "w[-2]", "w[-1]", "w[0]", "w[+1]", "w[+2]", "w[-1]|w[0]", "w[0]|w[+1]",
    "p[-2]", "p[-1]", "p[0]", "p[+1]", "p[+2]",
    "p[-2]|p[-1]", "p[-1]|p[0]", "p[0]|p[+1]", "p[+1]|p[+2]",
    "p[-2]|p[-1]|p[0]", "p[-1]|p[0]|p[+1]", "p[0]|p[+1]|p[+2]",
    "prefix1", "prefix2", "prefix3", "prefix4", "suffix1", "suffix2", "suffix3", "suffix4",
    "shape[-1]", "shape[0]", "shape[+1]",
    "is_title", "is_upper", "has_digit", "has_hyphen",
)
_VERSION = 1
_TAG = re.compile(r"^(O|[BI]-\S+)$")


# ------------------------------------------------------------------ the reader
class ConllCorpus(NamedTuple):
    """Sentences of a chunked corpus: ``tokens, pos, tags = load_conll(path)``."""

    tokens: list[list[str]]
    pos: list[list[str]]
    tags: list[npt.NDArray[np.str_]]


def load_conll(path_or_file: str | os.PathLike[str] | Any, *, encoding: str = "utf-8") -> ConllCorpus:
    """Read a corpus in the CoNLL-2000 column format.

    One token per line, ``word POS chunk-tag`` separated by white space (``Confidence NN
    B-NP``); a blank line ends a sentence.  Chunk tags are ``O`` or ``B-TYPE`` / ``I-TYPE``
    (IOB2, as the CoNLL-2000 files have them).  ``-DOCSTART-`` lines (CoNLL-2003 style) end a
    sentence and are skipped.

    Parameters
    ----------
    path_or_file : str, Path or file object
        A file (``.gz`` read compressed, as the shared task distributed ``train.txt.gz``) or an
        open file in text or binary mode.
    encoding : str
        Of the file's bytes (the CoNLL-2000 files are ASCII).

    Returns
    -------
    ConllCorpus
        ``(tokens, pos, tags)``: per sentence, the list of its words, the list of their POS
        tags and an array of their chunk tags (str).

    Raises
    ------
    FileNotFoundError
        ``path_or_file`` names no file.
    ValueError
        A line without exactly three columns, a chunk tag that is not ``O``, ``B-X`` or
        ``I-X``, undecodable text or a damaged ``.gz`` -- naming the file and the line -- or
        a file with no sentence.
    """
    if isinstance(path_or_file, (str, os.PathLike)):
        path = Path(path_or_file)
        if not path.is_file():
            raise FileNotFoundError(f"path_or_file: {str(path)!r} is not a file (expected a CoNLL-2000 column "
                                    "file: 'word POS chunk-tag' per line, a blank line between sentences)")
        name = str(path)
        try:
            fh = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
        except OSError as exc:
            raise ValueError(f"{name}: cannot be read ({exc})") from None
        with fh:
            return _parse_conll(fh, name, encoding)
    if hasattr(path_or_file, "read") and isinstance(path_or_file, Iterable):
        return _parse_conll(path_or_file, str(getattr(path_or_file, "name", "<file object>")), encoding)
    raise ValueError(f"path_or_file must be a path or an open file; got {type(path_or_file).__name__}")


def _parse_conll(lines: Iterable[Any], name: str, encoding: str) -> ConllCorpus:
    tokens: list[list[str]] = []
    pos: list[list[str]] = []
    tags: list[npt.NDArray[np.str_]] = []
    cur: tuple[list[str], list[str], list[str]] = ([], [], [])

    def end() -> None:
        nonlocal cur
        if cur[0]:
            tokens.append(cur[0])
            pos.append(cur[1])
            tags.append(np.array(cur[2]))
            cur = ([], [], [])

    n = 0
    try:
        for n, raw in enumerate(lines, 1):
            if isinstance(raw, bytes):
                try:
                    raw = raw.decode(encoding)
                except UnicodeDecodeError:
                    raise ValueError(f"{name}: line {n} is not {encoding} text") from None
            fields = raw.split()
            if not fields:
                end()
                continue
            if fields[0] == "-DOCSTART-":
                end()
                continue
            if len(fields) != 3:
                raise ValueError(f"{name}: line {n}: expected 3 columns 'word POS chunk-tag' separated by white "
                                 f"space, got {len(fields)}: {raw.rstrip()[:80]!r}")
            if not _TAG.match(fields[2]):
                raise ValueError(f"{name}: line {n}: chunk tag {fields[2][:40]!r} is not 'O', 'B-TYPE' or "
                                 "'I-TYPE' (the IOB2 tags of CoNLL-2000, e.g. B-NP)")
            cur[0].append(fields[0])
            cur[1].append(fields[1])
            cur[2].append(fields[2])
    except (OSError, EOFError, zlib.error) as exc:  # a damaged or truncated .gz
        raise ValueError(f"{name}: cannot be read after line {n} ({exc})") from None
    end()
    if not tokens:
        raise ValueError(f"{name}: no sentences (expected 'word POS chunk-tag' lines)")
    return ConllCorpus(tokens, pos, tags)


# ------------------------------------------------------------------ the templates
def _shape(token: str) -> str:
    out: list[str] = []
    for c in token:
        s = "X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c
        if not out or out[-1] != s:
            out.append(s)
    return "".join(out)


def _check_templates(templates: Sequence[str] | None) -> frozenset[str] | None:
    if templates is None:
        return None
    if isinstance(templates, str) or not isinstance(templates, Iterable):
        raise ValueError(f"templates must be a list of names from CONLL_TEMPLATES; got {templates!r}")
    sel = tuple(templates)
    unknown = [t for t in sel if t not in CONLL_TEMPLATES]
    if unknown or not sel:
        raise ValueError(f"templates: unknown or no template(s) {unknown}; known: {list(CONLL_TEMPLATES)}")
    return None if set(sel) == set(CONLL_TEMPLATES) else frozenset(sel)


def _sentence_features(words: Sequence[str], tags: Sequence[str], sel: frozenset[str] | None) -> list[list[str]]:
    """The template features of one sentence: per token the list of its feature names."""
    L = len(words)
    w = ["<s>", "<s>", *words, "</s>", "</s>"]
    p = ["<s>", "<s>", *tags, "</s>", "</s>"]
    shapes = ["<s>", *(_shape(t) for t in words), "</s>"]
    out = []
    for j in range(L):
        k = j + 2  # index into the padded lists
        tok = words[j]
        low = tok.lower()
        f = [
            "bias",
            "w[-2]=" + w[k - 2], "w[-1]=" + w[k - 1], "w[0]=" + tok, "w[+1]=" + w[k + 1], "w[+2]=" + w[k + 2],
            f"w[-1]|w[0]={w[k - 1]}|{tok}", f"w[0]|w[+1]={tok}|{w[k + 1]}",
            "p[-2]=" + p[k - 2], "p[-1]=" + p[k - 1], "p[0]=" + p[k], "p[+1]=" + p[k + 1], "p[+2]=" + p[k + 2],
            f"p[-2]|p[-1]={p[k - 2]}|{p[k - 1]}", f"p[-1]|p[0]={p[k - 1]}|{p[k]}", f"p[0]|p[+1]={p[k]}|{p[k + 1]}",
            f"p[+1]|p[+2]={p[k + 1]}|{p[k + 2]}",
            f"p[-2]|p[-1]|p[0]={p[k - 2]}|{p[k - 1]}|{p[k]}", f"p[-1]|p[0]|p[+1]={p[k - 1]}|{p[k]}|{p[k + 1]}",
            f"p[0]|p[+1]|p[+2]={p[k]}|{p[k + 1]}|{p[k + 2]}",
            "prefix1=" + low[:1], "prefix2=" + low[:2], "prefix3=" + low[:3], "prefix4=" + low[:4],
            "suffix1=" + low[-1:], "suffix2=" + low[-2:], "suffix3=" + low[-3:], "suffix4=" + low[-4:],
            "shape[-1]=" + shapes[j], "shape[0]=" + shapes[j + 1], "shape[+1]=" + shapes[j + 2],
        ]
        if tok.istitle():
            f.append("is_title")
        if tok.isupper():
            f.append("is_upper")
        if any(c.isdigit() for c in tok):
            f.append("has_digit")
        if "-" in tok:
            f.append("has_hyphen")
        if sel is not None:
            f = [name for name in f if name.partition("=")[0] in sel]
        out.append(f)
    return out


def _check_sentences(tokens: Any, pos: Any) -> None:
    if isinstance(tokens, str) or isinstance(pos, str) or len(tokens) != len(pos):
        raise ValueError("tokens and pos must be lists of sentences of the same length "
                         f"(got {type(tokens).__name__} and {type(pos).__name__})")
    for i, (words, tags) in enumerate(zip(tokens, pos)):
        if isinstance(words, str) or isinstance(tags, str) or len(words) != len(tags):
            raise ValueError(f"sentence {i}: tokens[{i}] and pos[{i}] must be lists of strings of the same length")


def conll_feature_dicts(tokens: Sequence[Sequence[str]], pos: Sequence[Sequence[str]],
                        templates: Sequence[str] | None = None) -> list[list[dict[str, float]]]:
    """The chunking template features of sentences, one feature dict per token.

    Parameters
    ----------
    tokens : list of list of str
        The words of each sentence.
    pos : list of list of str
        Their part-of-speech tags (the same lengths).
    templates : list of str, optional
        A subset of `CONLL_TEMPLATES` (default: all of them).

    Returns
    -------
    list of list of dict
        Per sentence, per token, ``{feature name: 1.0}`` (``"w[-1]=the"``, ``"p[-1]|p[0]=DT|NN"``,
        ``"suffix3=ing"``, ``"is_title"``, ...): what `structfw.features.SequenceVectorizer`
        takes as sequences of feature dicts (`ConllVectorizer` numbers the same features
        faster).
    """
    sel = _check_templates(templates)
    _check_sentences(tokens, pos)
    return [[dict.fromkeys(f, 1.0) for f in _sentence_features(words, tags, sel)]
            for words, tags in zip(tokens, pos)]


class ConllVectorizer:
    """The chunking templates' indicator features of sentences, one CSR matrix per sentence.

    Numbers the features exactly as ``structfw.features.SequenceVectorizer(hashing=False,
    n_features=n_features)`` numbers `conll_feature_dicts` (columns in the features' name
    order; with ``n_features``, the features present on the most training tokens, ties by
    name), but in one pass over the tokens with a plain dictionary: at the papers' size
    (about 211,000 tokens of about 30 features each) the general vectorizer's per-token dict
    checks and scikit-learn's DictVectorizer took about 15 s per 1,000 sentences, this one 2-3 s
    (both timed on a loaded shared machine).

    Parameters
    ----------
    n_features : int, optional
        Keep this many features (the matrices then have exactly ``n_features`` columns, the
        unused ones empty); default every training feature.
    templates : list of str, optional
        A subset of `CONLL_TEMPLATES` (default all).

    Attributes
    ----------
    n_features_ : int
        The columns of every matrix.
    feature_names_ : list of str
        The feature of each used column, in column order.
    raw_features_ : int
        Distinct features of the training tokens before the ``n_features`` cut.
    """

    def __init__(self, n_features: int | None = None, templates: Sequence[str] | None = None) -> None:
        self.n_features = n_features
        self.templates = templates

    def _check(self) -> frozenset[str] | None:
        n = self.n_features
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
            raise ValueError(f"n_features must be a positive integer or None; got {n!r}")
        return _check_templates(self.templates)

    def fit_transform(self, tokens: Sequence[Sequence[str]], pos: Sequence[Sequence[str]]) -> list[sp.csr_matrix]:
        """Learn the feature columns from these sentences and return their matrices.

        Parameters
        ----------
        tokens, pos : list of list of str
            Words and POS tags of each sentence.

        Returns
        -------
        list of scipy.sparse.csr_matrix
            One ``(L_i, n_features_)`` float64 matrix per sentence.
        """
        sel = self._check()
        _check_sentences(tokens, pos)
        vocab: dict[str, int] = {}
        ids: list[int] = []
        lengths: list[int] = []
        for words, tags in zip(tokens, pos):
            for feats in _sentence_features(words, tags, sel):
                ids.extend(vocab.setdefault(f, len(vocab)) for f in feats)
                lengths.append(len(feats))
        flat = np.asarray(ids, np.int64)
        n_raw = len(vocab)
        names = list(vocab)
        by_name = np.empty(n_raw, np.int64)
        by_name[np.asarray(sorted(range(n_raw), key=names.__getitem__), np.int64)] = np.arange(n_raw)
        # each feature occurs at most once per token, so its count is the number of tokens it is on
        freq = np.bincount(flat, minlength=n_raw)
        keep = np.ones(n_raw, bool)
        if self.n_features is not None and n_raw > self.n_features:
            keep[:] = False
            keep[np.lexsort((by_name, -freq))[: int(self.n_features)]] = True
        order = np.argsort(by_name)  # raw ids in name order
        col = np.full(n_raw, -1, np.int64)
        kept_in_order = order[keep[order]]
        col[kept_in_order] = np.arange(kept_in_order.size)
        self.vocabulary_ = {names[i]: int(c) for i, c in zip(kept_in_order.tolist(), range(kept_in_order.size))}
        self.feature_names_ = [names[i] for i in kept_in_order.tolist()]
        self.raw_features_ = n_raw
        self.n_features_ = int(self.n_features) if self.n_features is not None else n_raw
        self._sel = sel
        return self._matrices(col[flat], np.asarray(lengths, np.int64), [len(t) for t in tokens])

    def transform(self, tokens: Sequence[Sequence[str]], pos: Sequence[Sequence[str]]) -> list[sp.csr_matrix]:
        """The matrices of new sentences (features not seen in training are dropped).

        Parameters
        ----------
        tokens, pos : list of list of str
            Words and POS tags of each sentence.

        Returns
        -------
        list of scipy.sparse.csr_matrix
            One ``(L_i, n_features_)`` float64 matrix per sentence.
        """
        if not hasattr(self, "vocabulary_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this ConllVectorizer is not fitted yet; call fit_transform first")
        _check_sentences(tokens, pos)
        get = self.vocabulary_.get
        cols: list[int] = []
        lengths: list[int] = []
        for words, tags in zip(tokens, pos):
            for feats in _sentence_features(words, tags, self._sel):
                cols.extend(get(f, -1) for f in feats)
                lengths.append(len(feats))
        return self._matrices(np.asarray(cols, np.int64), np.asarray(lengths, np.int64), [len(t) for t in tokens])

    def _matrices(self, cols: npt.NDArray[np.int64], per_token: npt.NDArray[np.int64],
                  sentence_lengths: list[int]) -> list[sp.csr_matrix]:
        """Split the tokens' columns (-1 = dropped) into one CSR matrix per sentence."""
        ok = cols >= 0
        token_of = np.repeat(np.arange(per_token.size), per_token)
        kept = np.bincount(token_of[ok], minlength=per_token.size)
        indptr = np.zeros(per_token.size + 1, np.int64)
        np.cumsum(kept, out=indptr[1:])
        indices = cols[ok].astype(np.int32)
        # columns sorted within each row, as scipy's canonical CSR (and DictVectorizer) has them
        order = np.lexsort((indices, token_of[ok]))
        indices = indices[order]
        F = self.n_features_
        out = []
        start = 0
        for L in sentence_lengths:
            a, b = int(indptr[start]), int(indptr[start + L])
            out.append(as_chain_csr(np.ones(b - a), indices[a:b], indptr[start:start + L + 1] - a, (L, F)))
            start += L
        return out


class ChainData(tuple[Any, ...]):
    """``(X_train, Y_train, X_test, Y_test)`` of a chunking task, ready for a `ChainModel`.

    Unpacks as a 4-tuple; also carries ``tags`` (label j of Y is ``tags[j]``), ``n_states``,
    ``n_features``, ``info`` (sizes and timings) and ``make_model()``, which builds
    ``ChainModel(n_states, n_features)``.  X are lists of ``(L_i, n_features)`` CSR float64
    matrices, Y lists of ``(L_i,)`` int64 label arrays.
    """

    tags: tuple[str, ...]
    info: dict[str, Any]
    vectorizer: Any
    _n_features: int

    def __new__(cls, X_train: list[sp.csr_matrix], Y_train: list[npt.NDArray[np.int64]],
                X_test: list[sp.csr_matrix], Y_test: list[npt.NDArray[np.int64]], *, tags: Sequence[str],
                n_features: int, info: dict[str, Any] | None = None, vectorizer: Any = None) -> ChainData:
        self = super().__new__(cls, (X_train, Y_train, X_test, Y_test))
        self.tags = tuple(tags)
        self.info = dict(info or {})
        self.vectorizer = vectorizer
        self._n_features = int(n_features)
        return self

    @property
    def X_train(self) -> list[sp.csr_matrix]:
        return self[0]

    @property
    def Y_train(self) -> list[npt.NDArray[np.int64]]:
        return self[1]

    @property
    def X_test(self) -> list[sp.csr_matrix]:
        return self[2]

    @property
    def Y_test(self) -> list[npt.NDArray[np.int64]]:
        return self[3]

    @property
    def n_states(self) -> int:
        """The number of tags K."""
        return len(self.tags)

    @property
    def n_features(self) -> int:
        """F, the columns of every X matrix (the model's d is K F + K^2)."""
        return self._n_features

    def make_model(self) -> Any:
        """``ChainModel(n_states, n_features)`` for this data."""
        from ..models import ChainModel

        return ChainModel(n_states=self.n_states, n_features=self.n_features)

    def __reduce__(self) -> Any:  # pragma: no cover - pickling keeps the extras
        return (_rebuild_chain_data, (tuple(self), self.tags, self._n_features, self.info))


def _rebuild_chain_data(parts: tuple[Any, ...], tags: Sequence[str], n_features: int,
                        info: dict[str, Any]) -> ChainData:  # pragma: no cover
    return ChainData(*parts, tags=tags, n_features=n_features, info=info)


def _tag_list(corpora: Sequence[ConllCorpus]) -> tuple[str, ...]:
    seen = set()
    for c in corpora:
        for t in c.tags:
            seen.update(np.asarray(t).tolist())
    return tuple(t for t in CONLL2000_TAGS if t in seen) + tuple(sorted(seen - set(CONLL2000_TAGS)))


def _encode(tags: Sequence[npt.ArrayLike], index: dict[str, int], which: str) -> list[npt.NDArray[np.int64]]:
    out = []
    for i, t in enumerate(tags):
        try:
            out.append(np.fromiter((index[s] for s in np.asarray(t).tolist()), np.int64))
        except KeyError as exc:
            raise ValueError(f"{which} sentence {i} has the tag {exc.args[0]!r}, which is not in tags") from None
    return out


def conll_chain_data(train: ConllCorpus, test: ConllCorpus | None = None, *, n_features: int | None = None,
                     tags: Sequence[str] | None = None, templates: Sequence[str] | None = None) -> ChainData:
    """Chunking corpora as ChainModel inputs: the templates' features, one CSR matrix per sentence.

    The features are those of `conll_feature_dicts`, numbered by a `ConllVectorizer` fitted on
    the training sentences as ``SequenceVectorizer(hashing=False)`` would number them (one
    column per feature; a feature seen only in the test sentences is dropped).

    Parameters
    ----------
    train : ConllCorpus
        As `load_conll` returns it (or any ``(tokens, pos, tags)``).
    test : ConllCorpus, optional
        Vectorized with the training vocabulary; without it X_test and Y_test are empty.
    n_features : int, optional
        Keep the ``n_features`` features present on the most training tokens (ties by name);
        the matrices then have exactly ``n_features`` columns.  `PAPER_N_FEATURES` (74,661)
        with the 22 tags gives the papers' d = 1,643,026.  Default: every training feature.
    tags : list of str, optional
        The label set, label j being ``tags[j]``.  Default: the tags that occur in train and
        test, those of `CONLL2000_TAGS` first in its order, then the others sorted.
    templates : list of str, optional
        A subset of `CONLL_TEMPLATES` (default all).

    Returns
    -------
    ChainData
        ``(X_train, Y_train, X_test, Y_test)`` with ``tags``, ``n_features``, ``make_model()``,
        ``vectorizer`` (the fitted `ConllVectorizer`, for new sentences) and ``info`` (sizes,
        ``raw_features`` before the cut, seconds).
    """
    corpora = [train] if test is None else [train, test]
    for name, c in zip(("train", "test"), corpora):
        if not (isinstance(c, tuple) and len(c) == 3):
            raise ValueError(f"{name} must be a (tokens, pos, tags) corpus as load_conll returns; got "
                             f"{type(c).__name__}")
        if len(c[0]) != len(c[2]):
            raise ValueError(f"{name}: {len(c[0])} sentences of tokens but {len(c[2])} of tags")
    if n_features is not None and (isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer))
                                   or n_features < 1):
        raise ValueError(f"n_features must be a positive integer or None; got {n_features!r}")
    if tags is None:
        tags = _tag_list(corpora)
    else:
        if isinstance(tags, str) or len(set(tags)) != len(tags) or len(tags) < 2:
            raise ValueError(f"tags must be a list of at least 2 distinct tag names; got {tags!r}")
        tags = tuple(tags)
    if len(tags) < 2:
        raise ValueError(f"the corpus has fewer than 2 distinct tags ({list(tags)}): nothing to learn")
    index = {t: j for j, t in enumerate(tags)}
    t0 = time.perf_counter()
    vec = ConllVectorizer(n_features=n_features, templates=templates)
    X_train = vec.fit_transform(train[0], train[1])
    Y_train = _encode(train[2], index, "train")
    X_test: list[sp.csr_matrix] = []
    Y_test: list[npt.NDArray[np.int64]] = []
    if test is not None:
        X_test = vec.transform(test[0], test[1])
        Y_test = _encode(test[2], index, "test")
    for which, X, Y in (("train", X_train, Y_train), ("test", X_test, Y_test)):
        for i, (x, y) in enumerate(zip(X, Y)):
            if x.shape[0] != y.shape[0]:
                raise ValueError(f"{which} sentence {i}: {x.shape[0]} tokens but {y.shape[0]} tags")
    F = int(vec.n_features_)
    info = dict(n_train=len(X_train), n_test=len(X_test), n_states=len(tags), n_features=F,
                d=len(tags) * F + len(tags) ** 2, tokens_train=int(sum(x.shape[0] for x in X_train)),
                tokens_test=int(sum(x.shape[0] for x in X_test)), nnz_train=int(sum(x.nnz for x in X_train)),
                nnz_test=int(sum(x.nnz for x in X_test)), raw_features=vec.raw_features_,
                features_seconds=time.perf_counter() - t0)
    return ChainData(X_train, Y_train, X_test, Y_test, tags=tags, n_features=F, info=info, vectorizer=vec)


# ------------------------------------------------------------------ the generator
# Function words are real English (the closed classes of the Penn Treebank tag set), listed by
# rough frequency; the open classes (nouns, verbs, adjectives, names) are pseudo-words built
# from syllables, with English-like inflection (-s, -ed, -ing, -ly), so that the affix and
# shape templates see the regularities they see in real text.
_CLOSED: dict[str, tuple[str, ...]] = {
    "DT": ("the", "a", "an", "this", "some", "that", "these", "any", "no", "all", "those", "each", "both",
           "another", "every", "either", "neither"),
    "IN": ("of", "in", "for", "on", "with", "at", "by", "from", "as", "into", "about", "than", "after", "over",
           "under", "between", "through", "during", "before", "without", "against", "since", "until", "among",
           "like", "despite", "near", "across", "per", "via", "behind", "toward", "within", "throughout"),
    "IN-SBAR": ("that", "because", "if", "while", "although", "whether", "as", "since", "before", "after",
                "though", "unless", "so"),
    "WDT": ("which", "that", "whatever"), "WP": ("who", "what", "whom"), "WRB": ("when", "where", "how", "why"),
    "CC": ("and", "but", "or", "nor", "yet"),
    "PRP": ("it", "he", "they", "we", "I", "she", "you", "them", "him", "us", "itself", "themselves"),
    "PRP$": ("its", "their", "his", "our", "her", "my", "your"),
    "MD": ("will", "would", "could", "can", "may", "should", "might", "must"),
    "TO": ("to",), "POS": ("'s",), "EX": ("there",),
    "RP": ("up", "out", "down", "off", "back", "over", "in", "on", "away"),
    "RBX": ("not", "also", "now", "only", "still", "even", "just", "already", "very", "so", "too", "however",
            "ago", "then", "here", "again", "far", "soon", "later", "never"),
    "RBR": ("more", "less", "further", "earlier", "longer"),
    "UH": ("yes", "oh", "well", "no", "ok"), "LS": ("1", "2", "3", "a", "b", "c"),
    "CDW": ("million", "billion", "one", "two", "three", "four", "five", "ten", "hundred", "thousand"),
    "AUX-VB": ("be", "have", "do"), "AUX-VBZ": ("is", "has", "does"), "AUX-VBP": ("are", "have", "do"),
    "AUX-VBD": ("was", "were", "had", "did"), "AUX-VBN": ("been",), "AUX-HAS": ("has",),
    "AUX-VBG": ("being", "having"),
}
# the tag of a closed list whose name is not a Penn tag
_CLOSED_TAG = {"IN-SBAR": "IN", "RBX": "RB", "CDW": "CD", "AUX-VB": "VB", "AUX-VBZ": "VBZ", "AUX-VBP": "VBP",
               "AUX-VBD": "VBD", "AUX-VBN": "VBN", "AUX-HAS": "VBZ", "AUX-VBG": "VBG"}
_ONSETS = ("", "", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "bl", "br", "ch", "cl", "cr", "dr", "fl", "fr", "gr", "pl", "pr", "sh", "sl", "sp", "st", "str", "th", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "ee", "io", "oa", "ou", "y")
_CODAS = ("", "", "", "", "n", "r", "s", "t", "l", "m", "nd", "nt", "st", "ck", "rt", "ng", "x", "p", "d")
_NOUN_SUFFIX = ("", "", "", "", "tion", "ment", "er", "ity", "ness", "ance", "ism", "age", "ure")
_ADJ_SUFFIX = ("", "", "al", "ive", "ous", "ic", "able", "ful", "less", "ent", "ary", "ish")
_NAME_SUFFIX = ("", "", "", "", "son", "ton", "co", "man", "berg", "ia", "ex")
#: stems per open class: nouns, verbs (a quarter shared with the nouns), adjectives, names
_N_NOUNS, _N_VERBS, _N_ADJS, _N_NAMES = 7000, 2200, 2800, 5000

# The chunk process: a Markov chain over chunk types (O is a one-token chunk of punctuation or
# a conjunction), with transition weights that give CoNLL-2000's mix of chunks -- about 55 % NP,
# 21 % VP and 21 % PP of the chunks, 4 % ADVP, 2 % SBAR and ADJP, rare PRT, CONJP, INTJ, LST
# and UCP -- and 13 % of the tokens outside any chunk.
_CHUNKS = ("NP", "VP", "PP", "ADVP", "SBAR", "ADJP", "PRT", "CONJP", "INTJ", "LST", "UCP", "O")
_NEXT: dict[str, dict[str, float]] = {
    "START": dict(NP=58, PP=10, ADVP=6, SBAR=3, O=3, VP=3, INTJ=0.3, LST=0.4, ADJP=1, CONJP=0.1, UCP=0.02),
    "NP": dict(VP=34, PP=24, O=24, NP=4, SBAR=2, ADVP=2, ADJP=1.5, CONJP=0.15, UCP=0.02),
    "VP": dict(NP=58, PP=13, ADJP=5, SBAR=5, PRT=3, ADVP=5, O=8, VP=1),
    "PP": dict(NP=90, VP=3, ADVP=2, ADJP=1, O=2, SBAR=1, PP=1),
    "ADVP": dict(NP=25, VP=25, PP=20, O=25, ADJP=3, SBAR=2),
    "SBAR": dict(NP=85, VP=10, PP=3, ADVP=2),
    "ADJP": dict(PP=30, O=40, NP=15, SBAR=10, VP=5),
    "PRT": dict(NP=40, PP=30, O=25, ADVP=5),
    "CONJP": dict(NP=50, VP=25, PP=20, ADJP=5),
    "INTJ": dict(O=70, NP=30), "LST": dict(NP=60, VP=40), "UCP": dict(PP=50, O=50),
    "O": dict(NP=56, VP=12, PP=12, ADVP=6, SBAR=4, ADJP=2, O=8, CONJP=0.4, INTJ=0.15, UCP=0.02),
}
# Within a chunk, the POS sequence: weighted patterns over POS symbols; "JJ*" and "NN+" repeat.
_PATTERNS: dict[str, tuple[tuple[float, tuple[str, ...]], ...]] = {
    "NP": ((14, ("PRP",)), (30, ("DT", "JJ*", "NN+")), (9, ("DT", "JJ*", "NNS")), (6, ("PRP$", "JJ*", "NN+")),
           (10, ("JJ*", "NNS")), (5, ("NN+",)), (8, ("NNP+",)), (3, ("DT", "NNP+")), (3, ("CD", "NNS")),
           (2, ("CD", "CDW")), (2, ("$", "CD", "CDW")), (2, ("CD", "%")), (1, ("EX",)), (1.5, ("WP",)),
           (2, ("NNP", "POS", "NN+")), (1.5, ("DT", "NN", "NNS"))),
    "VP": ((18, ("VBD",)), (12, ("VBZ",)), (6, ("VBP",)), (10, ("MD", "VB")), (6, ("AUX-VBZ", "VBN")),
           (7, ("AUX-VBD", "VBN")), (4, ("AUX-VBZ", "VBG")), (9, ("TO", "VB")), (3, ("MD", "AUX-VB", "VBN")),
           (6, ("VBN",)), (6, ("VBG",)), (2, ("AUX-VBZ", "RBX", "VBN")), (2, ("MD", "RBX", "VB")),
           (4, ("VB",)), (2, ("AUX-VBD", "RBX", "VB")), (1.5, ("AUX-HAS", "AUX-VBN", "VBN")),
           (2, ("AUX-VBD",)), (2, ("AUX-VBZ",))),
    "PP": ((90, ("IN",)), (7, ("TO",)), (1, ("IN", "IN")), (1, ("JJ", "IN")), (1, ("VBG", "TO"))),
    "ADVP": ((60, ("RBX",)), (25, ("RB",)), (10, ("RBX", "RB")), (5, ("RBR",))),
    "ADJP": ((45, ("JJ",)), (25, ("RBX", "JJ")), (10, ("JJR",)), (5, ("RBR", "JJ")), (5, ("JJ", "CC", "JJ")),
             (5, ("CD", "%")), (5, ("RB", "JJ"))),
    "SBAR": ((75, ("IN-SBAR",)), (15, ("WDT",)), (6, ("WRB",)), (4, ("IN", "IN-SBAR"))),
    "PRT": ((98, ("RP",)), (2, ("RP", "RP"))),
    "CONJP": ((40, ("RB", "RB", "IN")), (30, ("RB", "IN")), (30, ("RBX", "RBX"))),
    "INTJ": ((80, ("UH",)), (20, ("UH", "UH"))),
    "LST": ((100, ("LS",)),),
    "UCP": ((50, ("JJ", "CC", "NN")), (50, ("NN", "CC", "JJ"))),
    "O": ((44, (",",)), (24, ("CC",)), (5, ("``",)), (5, ("''",)), (9, (":",)), (4, ("(",)), (4, (")",)),
          (5, ("RBX",))),
}
_PUNCT = {",": ",", ":": ":", "``": "``", "''": "''", "(": "(", ")": ")", "$": "$", "%": "%", ".": "."}
# POS tag of a punctuation or symbol token (WSJ tags "%" as NN)
_PUNCT_TAG = {"%": "NN"}


class _Stream:
    """Uniform draws from a numpy Generator, buffered (fast scalar draws, deterministic by seed)."""

    def __init__(self, seed: np.random.SeedSequence) -> None:
        self.seed = seed
        self.gen = np.random.Generator(np.random.PCG64(seed))
        self.buf: list[float] = []
        self.i = 0

    def u(self) -> float:
        if self.i == len(self.buf):
            self.buf = self.gen.random(1 << 16).tolist()
            self.i = 0
        v = self.buf[self.i]
        self.i += 1
        return v

    def pick(self, cum: list[float]) -> int:
        """An index drawn with probabilities proportional to the increments of ``cum``."""
        return min(bisect.bisect_right(cum, self.u() * cum[-1]), len(cum) - 1)

    def repeats(self, p: float, cap: int) -> int:
        n = 0
        while n < cap and self.u() < p:
            n += 1
        return n


def _cum(weights: Iterable[float]) -> list[float]:
    return np.cumsum(np.asarray(list(weights), dtype=np.float64)).tolist()


def _zipf(n: int, a: float = 1.07, b: float = 2.7) -> list[float]:
    """Cumulative Zipf-Mandelbrot weights of ranks 1..n: p(r) proportional to (r + b)^-a."""
    return _cum((np.arange(1, n + 1) + b) ** -a)


def _stems(s: _Stream, n: int, taken: set[str]) -> list[str]:
    syll = _cum((0.55, 0.4, 0.05))
    on, vo, co = _cum([1.0] * len(_ONSETS)), _cum([1.0] * len(_VOWELS)), _cum([1.0] * len(_CODAS))
    out: list[str] = []
    while len(out) < n:
        k = s.pick(syll) + 1
        w = "".join(_ONSETS[s.pick(on)] + _VOWELS[s.pick(vo)] + _CODAS[s.pick(co)] for _ in range(k))
        if len(w) >= 2 and w not in taken:
            taken.add(w)
            out.append(w)
    return out


def _plural(w: str) -> str:
    return w + "es" if w.endswith(("s", "x", "sh", "ch")) else w[:-1] + "ies" if w.endswith("y") else w + "s"


def _vocabulary(s: _Stream) -> dict[str, tuple[list[str], list[float]]]:
    """POS -> (words by rank, cumulative Zipf weights)."""
    taken: set[str] = set()
    flat = _cum([1.0])

    def suffixed(stems: list[str], suffixes: tuple[str, ...]) -> list[str]:
        cum = _cum([1.0] * len(suffixes))
        return [w + suffixes[s.pick(cum)] for w in stems]

    nouns = suffixed(_stems(s, _N_NOUNS, taken), _NOUN_SUFFIX)
    shared = nouns[: _N_VERBS // 4]  # noun/verb ambiguity (NN/VB, NNS/VBZ)
    verbs = _stems(s, _N_VERBS - len(shared), taken)
    # interleave the shared stems among the verbs' ranks
    lemmas = [w for pair in zip(verbs, shared) for w in pair] + verbs[len(shared):]
    adjs = suffixed(_stems(s, _N_ADJS, taken), _ADJ_SUFFIX)
    names = [w.capitalize() for w in suffixed(_stems(s, _N_NAMES, taken), _NAME_SUFFIX)]
    voc: dict[str, tuple[list[str], list[float]]] = {}
    voc["NN"] = (nouns, _zipf(len(nouns)))
    voc["NNS"] = ([_plural(w) for w in nouns], _zipf(len(nouns)))
    voc["NNP"] = (names, _zipf(len(names), a=1.0))
    voc["JJ"] = (adjs, _zipf(len(adjs)))
    voc["JJR"] = ([w + ("r" if w.endswith("e") else "er") for w in adjs[:300]], _zipf(300))
    voc["RB"] = ([w + "ly" for w in adjs[::3]], _zipf(len(adjs[::3])))
    past = [w + ("d" if w.endswith("e") else "ed") for w in lemmas]
    voc["VB"] = voc["VBP"] = (lemmas, _zipf(len(lemmas)))
    voc["VBZ"] = ([_plural(w) for w in lemmas], _zipf(len(lemmas)))
    voc["VBD"] = voc["VBN"] = (past, _zipf(len(past)))
    voc["VBG"] = ([(w[:-1] if w.endswith("e") and len(w) > 2 else w) + "ing" for w in lemmas], _zipf(len(lemmas)))
    for name, words in _CLOSED.items():
        voc[name] = (list(words), _zipf(len(words), a=1.3, b=0.5))
    for sym in _PUNCT:
        voc[sym] = ([sym], flat)
    return voc


def _number(s: _Stream) -> str:
    r = s.u()
    if r < 0.35:
        return str(1 + int(s.u() * 99))
    if r < 0.6:
        return f"{int(s.u() * 100)}.{int(s.u() * 100):02d}" if s.u() < 0.5 else f"{int(s.u() * 20)}.{int(s.u() * 10)}"
    if r < 0.8:
        return str(1950 + int(s.u() * 50))
    return f"{1 + int(s.u() * 99)},{int(s.u() * 1000):03d}"


def _chunk(s: _Stream, kind: str, voc: dict[str, tuple[list[str], list[float]]],
           pat_cum: dict[str, list[float]]) -> tuple[list[str], list[str]]:
    """(words, POS tags) of one chunk of type ``kind``."""
    pats = _PATTERNS[kind]
    pattern = pats[s.pick(pat_cum[kind])][1]
    words: list[str] = []
    pos: list[str] = []
    for sym in pattern:
        if sym.endswith("*"):
            n, sym = s.repeats(0.3, 3), sym[:-1]
        elif sym.endswith("+"):
            n, sym = 1 + s.repeats(0.25, 3), sym[:-1]
        else:
            n = 1
        for _ in range(n):
            if sym == "CD":
                words.append(_number(s))
                pos.append("CD")
                continue
            ws, cum = voc[sym]
            words.append(ws[s.pick(cum)])
            pos.append(_CLOSED_TAG.get(sym, _PUNCT_TAG.get(sym, sym)))
    return words, pos


def _sentences(s: _Stream, n: int, voc: dict[str, tuple[list[str], list[float]]],
               mean_length: float) -> ConllCorpus:
    nxt = {a: (list(b), _cum(b.values())) for a, b in _NEXT.items()}
    pat_cum = {k: _cum(w for w, _ in v) for k, v in _PATTERNS.items()}
    shape = 4.5  # a gamma law of sentence lengths: sd = mean / sqrt(4.5), about 11 tokens
    # from a stream of their own, so that the first k sentences do not depend on n
    lengths = np.random.Generator(np.random.PCG64(s.seed.spawn(1)[0])).gamma(shape, mean_length / shape, size=n)
    tokens, pos, tags = [], [], []
    for i in range(n):
        target = max(2, int(round(lengths[i])))
        W: list[str] = []
        P: list[str] = []
        T: list[str] = []
        state = "START"
        while len(W) < target - 1:
            names, cum = nxt[state]
            state = names[s.pick(cum)]
            if state == "O" and not W:  # a sentence opens with a quote, not a comma
                w, p = ["``"], ["``"]
            else:
                w, p = _chunk(s, state, voc, pat_cum)
            W += w
            P += p
            T += ["O"] * len(w) if state == "O" else [f"B-{state}"] + [f"I-{state}"] * (len(w) - 1)
        W.append(".")
        P.append(".")
        T.append("O")
        if W[0][:1].islower():
            W[0] = W[0][0].upper() + W[0][1:]
        tokens.append(W)
        pos.append(P)
        tags.append(np.array(T))
    return ConllCorpus(tokens, pos, tags)


def _check_count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


#: the mean sentence length of the gamma law, set so that the sentences (which end when a chunk
#: passes the drawn length, plus the final full stop) average CoNLL-2000's 23.7 tokens
_MEAN_LENGTH = 23.4


def make_conll_like(n_train: int = PAPER_N_TRAIN, n_test: int = PAPER_N_TEST,
                    seed: int = 0) -> tuple[ConllCorpus, ConllCorpus]:
    """Generate a chunked corpus shaped like CoNLL-2000: words, POS tags and IOB2 chunk tags.

    A hidden Markov structure on two levels: chunk types follow a Markov chain whose
    transitions give CoNLL-2000's mix of chunks (NP, VP, PP, ADVP, SBAR, ADJP, PRT, CONJP,
    INTJ, LST, UCP and tokens outside chunks); each chunk emits a POS sequence from its type's
    patterns (``DT JJ* NN+``, ``MD VB``, ``IN``, ...), and each POS tag a word.  Function words
    are the real English closed classes; nouns, verbs, adjectives and names are pseudo-words
    with English inflection (``-s``, ``-ed``, ``-ing``, ``-ly``), drawn with Zipfian ranks
    (p(r) ~ (r + 2.7)^-1.07), some shared between nouns and verbs.  Sentence lengths follow a
    gamma law averaging about 23.7 tokens (CoNLL-2000: 211,727 / 8,936 training tokens); each
    ends with ``.`` and starts with a capital.  The labels use the 22 tags of `CONLL2000_TAGS`.

    Parameters
    ----------
    n_train, n_test : int
        Sentences (default the papers' 8,936 and 2,012; n_test may be 0).
    seed : int
        The vocabulary, the training and the test sentences come from three streams of this
        seed, so the first k training sentences do not depend on n_train or n_test.

    Returns
    -------
    train, test : ConllCorpus
        ``(tokens, pos, tags)`` each, as `load_conll` returns them.
    """
    n_train = _check_count(n_train, "n_train", 1)
    n_test = _check_count(n_test, "n_test", 0)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed!r}")
    vocab_seed, train_seed, test_seed = np.random.SeedSequence([int(seed), 2000]).spawn(3)
    voc = _vocabulary(_Stream(vocab_seed))
    train = _sentences(_Stream(train_seed), n_train, voc, _MEAN_LENGTH)
    test = _sentences(_Stream(test_seed), n_test, voc, _MEAN_LENGTH)
    return train, test


# ------------------------------------------------------------------ the cached, featurized set
def _cache_path(n_train: int, n_test: int, seed: int, n_features: int | None) -> Path:
    f = "all" if n_features is None else str(n_features)
    return data_home() / "conll" / f"conll-scale-n{n_train}-t{n_test}-s{seed}-f{f}-v{_VERSION}.npz"


def _stack(X: list[sp.csr_matrix], Y: list[npt.NDArray[np.int64]]) -> dict[str, np.ndarray]:
    lengths = np.array([x.shape[0] for x in X], np.int64)
    M = sp.vstack(X, format="csr") if X else sp.csr_matrix((0, 1))
    return dict(lengths=lengths, indptr=M.indptr.astype(np.int64), indices=M.indices.astype(np.int32),
                data=M.data.astype(np.float64), y=np.concatenate(Y).astype(np.int8) if Y else np.zeros(0, np.int8))


def _unstack(d: CacheFile, prefix: str, F: int) -> tuple[list[sp.csr_matrix], list[npt.NDArray[np.int64]]]:
    lengths = d.array(prefix + "lengths", "int", ndim=1)
    d.check(lengths.size == 0 or lengths.min() >= 0, prefix + "lengths", "holds negative lengths")
    tokens = int(lengths.sum())
    indptr = d.array(prefix + "indptr", "int", shape=(tokens + 1,))
    data = d.array(prefix + "data", "float", ndim=1)
    indices = d.array(prefix + "indices", "int", shape=data.shape)
    y = d.array(prefix + "y", "int", shape=(tokens,))
    d.check(indptr[0] == 0 and indptr[-1] == data.size and bool(np.all(np.diff(indptr) >= 0)), prefix + "indptr",
            f"does not index the {data.size} stored values")
    d.check(indices.size == 0 or (indices.min() >= 0 and indices.max() < F), prefix + "indices",
            f"holds feature indices outside 0..{F - 1}")
    X, Y = [], []
    start = 0
    for L in lengths.tolist():
        a, b = int(indptr[start]), int(indptr[start + L])
        X.append(as_chain_csr(data[a:b], indices[a:b], indptr[start:start + L + 1] - a, (L, F)))
        Y.append(y[start:start + L].astype(np.int64))
        start += L
    return X, Y


def _save(path: Path, data: ChainData) -> None:
    arrays: dict[str, Any] = {}
    for prefix, X, Y in (("train_", data.X_train, data.Y_train), ("test_", data.X_test, data.Y_test)):
        arrays.update({prefix + k: v for k, v in _stack(X, Y).items()})
    arrays["n_features"] = np.array([data.n_features])
    arrays["tags"] = np.array(data.tags)
    arrays["seconds"] = np.array([data.info["generation_seconds"], data.info["features_seconds"]])
    arrays["raw_features"] = np.array([data.info.get("raw_features", -1)])
    write_cache(path, arrays)


def _decode(d: CacheFile) -> ChainData:
    F = int(d.array("n_features", "int", shape=(1,))[0])
    d.check(F >= 1, "n_features", f"is {F}, expected at least 1")
    tags = tuple(d.array("tags", "str", ndim=1, min_size=1).tolist())
    X, Y = _unstack(d, "train_", F)
    Xt, Yt = _unstack(d, "test_", F)
    for key, labels in (("train_y", Y), ("test_y", Yt)):
        d.check(all(y.size == 0 or (y.min() >= 0 and y.max() < len(tags)) for y in labels), key,
                f"holds tags outside 0..{len(tags) - 1}")
    gen_s, feat_s = (float(v) for v in d.array("seconds", "number", shape=(2,)))
    raw = int(d.array("raw_features", "int", shape=(1,))[0])
    info = dict(generation_seconds=gen_s, features_seconds=feat_s, raw_features=raw)
    return ChainData(X, Y, Xt, Yt, tags=tags, n_features=F, info=info)


def _load(path: Path) -> ChainData | None:
    """The cached set at ``path``, or None when it is missing or unreadable (then removed,
    with a `CacheWarning` naming the file and the problem; `structfw.datasets._cache`)."""
    return read_cache(path, _decode)


def load_conll_scale(n_train: int = PAPER_N_TRAIN, n_test: int = PAPER_N_TEST, seed: int = 0,
                     n_features: int | None = PAPER_N_FEATURES, cache: bool = True,
                     verbose: bool = False) -> ChainData:
    """A CoNLL-2000-sized chunking task: `make_conll_like` through the CoNLL templates, cached.

    At the defaults: 8,936 training and 2,012 test sentences, 22 tags, F = 74,661 features
    per token -- the features present on the most training tokens, of about 396,000 that the
    templates produce; 29.4 are active per token -- so the ChainModel's d = 22 F + 22^2 =
    1,643,026, the papers' d.  The first call takes about 18 s of CPU (30-45 s on a shared
    machine) and 0.5 GB of memory; the cache file is 11 MB and loads in 1-4 s.

    Parameters
    ----------
    n_train, n_test : int
        Sentences (the first ones of `make_conll_like`'s streams).
    seed : int
        Of `make_conll_like`.
    n_features : int or None
        F, the columns kept (`conll_chain_data`); None keeps every training feature.
    cache : bool
        Read/write ``<data_home()>/conll/conll-scale-n<n>-t<n_test>-s<seed>-f<F>-v<version>.npz``
        (a file that cannot be read back is regenerated, with a warning naming it).
    verbose : bool
        Print what was generated or loaded, with the seconds it took.

    Returns
    -------
    ChainData
        ``X_train, Y_train, X_test, Y_test = load_conll_scale()``; also ``make_model()``
        (``ChainModel(22, F)``), ``tags`` and ``info``: ``generation_seconds`` (sentences)
        and ``features_seconds`` (templates and vectorizer) of the generation, which a cached
        load reports too, ``load_seconds`` of this call, ``cached``, ``path``, and the sizes
        (``n_train``, ``n_test``, ``d``, ``nnz_train``, ``nnz_test``, ``tokens_train``, ...).
    """
    n_train = _check_count(n_train, "n_train", 1)
    n_test = _check_count(n_test, "n_test", 0)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed!r}")
    if n_features is not None:
        n_features = _check_count(n_features, "n_features", 1)
    t0 = time.perf_counter()
    path = _cache_path(n_train, n_test, int(seed), n_features)
    loaded = _load(path) if cache else None
    if loaded is not None:
        data = loaded
        cached = True
    else:
        train, test = make_conll_like(n_train, n_test, int(seed))
        gen_s = time.perf_counter() - t0
        data = conll_chain_data(train, test if n_test else None, n_features=n_features, tags=CONLL2000_TAGS)
        data.info["generation_seconds"] = gen_s
        data.vectorizer = None  # the vocabulary is large and not needed for the generated set
        cached = False
        if cache:
            _save(path, data)
    X, Y, Xt, Yt = data
    K, F = data.n_states, data.n_features
    data.info.update(cached=cached, path=str(path) if cache else None, load_seconds=time.perf_counter() - t0,
                     n_train=len(X), n_test=len(Xt), n_states=K, n_features=F, d=K * F + K * K,
                     tokens_train=int(sum(x.shape[0] for x in X)), tokens_test=int(sum(x.shape[0] for x in Xt)),
                     nnz_train=int(sum(x.nnz for x in X)), nnz_test=int(sum(x.nnz for x in Xt)))
    if verbose:
        i = data.info
        how = (f"loaded from {path} in {i['load_seconds']:.1f} s (generated in {i['generation_seconds']:.1f} s "
               f"+ {i['features_seconds']:.1f} s of features)") if cached else \
            (f"generated in {i['generation_seconds']:.1f} s + {i['features_seconds']:.1f} s of features"
             + (f", cached in {path}" if cache else ""))
        print(f"CoNLL-scale chain: n = {i['n_train']:,} / {i['n_test']:,} sentences, {i['tokens_train']:,} / "
              f"{i['tokens_test']:,} tokens, K = {K}, F = {F:,}, d = {i['d']:,}, nnz = {i['nnz_train']:,} / "
              f"{i['nnz_test']:,}; {how}")
    return data

