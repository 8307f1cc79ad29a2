"""A public tagged corpus that installs with pip and needs no download at run time.

The corpus is the one the ``hironsancorpus`` package ships inside itself (MIT licence,
``pip install "structfw[text]"``): 500 Japanese sentences (15,520 tokens) segmented into
morphemes, each token with its morphological annotation (character type, part of speech and its
sub-types, base form, reading) and a named-entity tag in the IOB2 scheme over eight types
(ART, DAT, LOC, MON, ORG, PER, PSN, TIM).  It is small enough to fit a tagger on in seconds and
has chunk tags, so `structfw.metrics.span_f1` applies.
"""
from __future__ import annotations

from importlib import resources
from typing import Any

import numpy as np

__all__ = ["load_tagged_corpus"]

#: the annotation columns of a token line after the token itself, by the names the feature dicts use
#: (the last column is the tag; lines of tokens without a reading stop after "base")
_COLUMNS = ("char_type", "pos", "pos_1", "pos_2", "pos_3", "conj_type", "conj_form", "base", "reading",
            "pronunciation")
_SPLITS = ("train", "test", "all")
_N_TEST = 50


def _corpus_text() -> str:
    try:
        root = resources.files("hironsan")
    except ModuleNotFoundError:
        raise ModuleNotFoundError("load_tagged_corpus needs the hironsancorpus package, which ships the corpus: "
                                  "pip install 'structfw[text]' (or pip install hironsancorpus)") from None
    return (root / "corpus" / "iob_sents.txt").read_text(encoding="utf-8")


def _parse(text: str) -> list[list[list[str]]]:
    """The sentences of the corpus file, each a list of its token lines split into columns."""
    sentences: list[list[list[str]]] = []
    current: list[list[str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            if current:
                sentences.append(current)
                current = []
            continue
        cols = line.split("\t")
        if len(cols) < 3:
            raise ValueError(f"hironsancorpus iob_sents.txt line {n}: expected a token, its annotation and a "
                             f"tag separated by tabs; got {line!r}")
        current.append(cols)
    if current:
        sentences.append(current)
    return sentences


def load_tagged_corpus(split: str = "train", *, features: str = "tokens") -> tuple[list[Any], list[np.ndarray]]:
    """A Japanese named-entity corpus with IOB2 tags, from the ``hironsancorpus`` package.

    500 sentences of Japanese news and encyclopaedia text, 15,520 morphemes, tagged with
    eight entity types in the IOB2 scheme (``"B-LOC"``, ``"I-LOC"``, ..., ``"O"``; 17 tags in
    all).  The split is the package's own: the first 450 sentences are ``"train"``, the last 50
    ``"test"``.  Needs ``pip install "structfw[text]"`` (the corpus is inside that package; MIT
    licence; nothing is downloaded at run time).

    Parameters
    ----------
    split : {"train", "test", "all"}
        Which sentences.
    features : {"tokens", "dicts"}
        ``"tokens"``: each sentence is a list of its tokens (strings), for
        `structfw.features.SequenceVectorizer`'s templates.  ``"dicts"``: each token is a dict
        of the corpus's own annotation, sklearn-crfsuite style: ``"word"`` and the columns
        ``"char_type"``, ``"pos"``, ``"pos_1"``, ``"pos_2"``, ``"pos_3"``, ``"conj_type"``,
        ``"conj_form"``, ``"base"``, ``"reading"``, ``"pronunciation"`` (those whose value is
        ``"*"``, not applicable, are left out).

    Returns
    -------
    X : list
        One list of tokens (or of feature dicts) per sentence.
    Y : list of ndarray of str
        The tags of each sentence.

    Raises
    ------
    ModuleNotFoundError
        When ``hironsancorpus`` is not installed (the message says how to install it).
    """
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {list(_SPLITS)}; got {split!r}")
    if features not in ("tokens", "dicts"):
        raise ValueError(f"features must be 'tokens' or 'dicts'; got {features!r}")
    sentences = _parse(_corpus_text())
    if split == "train":
        sentences = sentences[:-_N_TEST]
    elif split == "test":
        sentences = sentences[-_N_TEST:]
    X: list[Any] = []
    Y: list[np.ndarray] = []
    for sent in sentences:
        if features == "tokens":
            X.append([cols[0] for cols in sent])
        else:
            X.append([{"word": cols[0],
                       **{name: v for name, v in zip(_COLUMNS, cols[1:-1]) if v not in ("*", "")}}
                      for cols in sent])
        Y.append(np.array([cols[-1] for cols in sent]))
    return X, Y
