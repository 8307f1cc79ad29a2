"""A user's own tagged (and untagged) corpus files: CoNLL columns, word/TAG lines, raw tokens.

What `structfw train --data FILE --format conll|wordtag` and `structfw predict` read.  Three
formats, all UTF-8 text:

* **conll**: one token per line, columns separated by white space, a blank line between
  sentences; the token is the first column and its tag the last (``The DT B-NP``, or
  ``The DT``).  Every token line of a file has the same number of columns.  ``-DOCSTART-``
  lines (CoNLL-2003) end a sentence and are skipped.
* **wordtag**: one sentence a line, tokens separated by white space and written ``word/TAG``;
  the tag is what follows the *last* slash, so ``1/2/CD`` is the word ``1/2`` tagged ``CD``.
  Blank lines are skipped.
* **raw** (prediction input only): one sentence a line, tokens separated by white space.

`structfw.datasets.load_conll` reads the CoNLL-2000 chunking files only (exactly three
columns and IOB2 chunk tags), which is why the general reader lives here.

Every problem is a ValueError naming the file and the line: a CoNLL line whose column count
differs from the file's (set by its first token line), a word/TAG token with an empty word or
tag, or without a slash, bytes that are not UTF-8, and a file with no sentence.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = ["TaggedCorpus", "read_conll_file", "read_wordtag_file", "read_raw_file", "sniff_corpus_format",
           "CORPUS_SUFFIXES"]

#: file suffixes `sniff_corpus_format` reads as a format without looking inside
CORPUS_SUFFIXES = {".conll": "conll", ".conllx": "conll", ".wordtag": "wordtag", ".svm": "svmlight",
                   ".svmlight": "svmlight", ".libsvm": "svmlight"}

#: how many non-blank lines `sniff_corpus_format` looks at
_SNIFF_LINES = 50
_SVMLIGHT_PAIR = re.compile(r"^(qid|\d+):\S+$")


class TaggedCorpus(tuple[list[list[str]], list[list[str]], list[int]]):
    """``(sentences, tags, lines)``: per sentence its tokens, its tags (empty lists for an
    untagged file) and the 1-based line it starts on."""

    __slots__ = ()

    def __new__(cls, sentences: list[list[str]], tags: list[list[str]], lines: list[int]) -> TaggedCorpus:
        return super().__new__(cls, (sentences, tags, lines))

    @property
    def sentences(self) -> list[list[str]]:
        return self[0]

    @property
    def tags(self) -> list[list[str]]:
        return self[1]

    @property
    def lines(self) -> list[int]:
        return self[2]


def text_lines(path: str | os.PathLike[str], max_line_bytes: int | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file; a byte that is not UTF-8 is a ValueError naming the line,
    and with ``max_line_bytes`` each line is bounded before it is decoded (the graph files' reader)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such file")
    limit = -1 if max_line_bytes is None else max_line_bytes + 2  # + the newline (CRLF): a full line from a cut one
    with open(p, "rb") as fh:
        n = 0
        while True:
            raw = fh.readline(limit)
            if not raw:
                return
            n += 1
            if max_line_bytes is not None and len(raw.rstrip(b"\r\n")) > max_line_bytes:
                raise ValueError(f"{p}: line {n}: longer than {max_line_bytes} bytes (max_line_bytes); one graph "
                                 "a line, or pass a larger max_line_bytes")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{p}: line {n}: not UTF-8 text (byte {raw[exc.start]:#04x} at column "
                                 f"{exc.start + 1}); save the file as UTF-8") from None
            # a byte-order mark some editors write at the start would glue onto the first token
            yield n, text.lstrip("\ufeff") if n == 1 else text


def read_conll_file(path: str | os.PathLike[str], *, min_columns: int = 2) -> TaggedCorpus:
    """Read a CoNLL column file: the token in the first column, its tag in the last.

    Parameters
    ----------
    path : str or Path
    min_columns : int
        Fewest columns a token line may have: 2 to train (token and tag), 1 to predict (a
        file of tokens alone, or with tags that are then ignored).

    Returns
    -------
    TaggedCorpus
        Its tags are the last column when the file has two or more, else empty lists.

    Raises
    ------
    ValueError
        Naming the file and the line: a line with another column count than the file's
        first token line, fewer than ``min_columns`` columns, non-UTF-8 bytes; or no sentence.
    """
    sentences: list[list[str]] = []
    tags: list[list[str]] = []
    starts: list[int] = []
    words: list[str] = []
    wtags: list[str] = []
    width = first = 0

    for n, text in text_lines(path):
        fields = text.split()
        if not fields or fields[0] == "-DOCSTART-":
            if words:
                sentences.append(words)
                tags.append(wtags if width >= 2 else [])
                words, wtags = [], []
            continue
        if not width:
            width, first = len(fields), n
            if width < min_columns:
                raise ValueError(f"{path}: line {n}: {width} column; expected at least {min_columns} "
                                 "(the token first, its tag last) separated by white space")
        elif len(fields) != width:
            raise ValueError(f"{path}: line {n}: {len(fields)} columns, but line {first} (the first token line) "
                             f"has {width}; every token line of a CoNLL file has the same columns: "
                             f"{text.rstrip()[:80]!r}")
        if not words:
            starts.append(n)
        words.append(fields[0])
        wtags.append(fields[-1])
    if words:
        sentences.append(words)
        tags.append(wtags if width >= 2 else [])
    if not sentences:
        raise ValueError(f"{path}: no sentences (expected one token a line, a blank line between sentences)")
    return TaggedCorpus(sentences, tags, starts)


def read_wordtag_file(path: str | os.PathLike[str]) -> TaggedCorpus:
    """Read a word/TAG file: one sentence a line, tokens ``word/TAG`` split on the last slash.

    Raises
    ------
    ValueError
        Naming the file, the line and the token: a token without a slash, with an empty word
        (``/NN``) or an empty tag (``word/``), non-UTF-8 bytes; or no sentence.
    """
    sentences: list[list[str]] = []
    tags: list[list[str]] = []
    starts: list[int] = []
    for n, text in text_lines(path):
        tokens = text.split()
        if not tokens:
            continue
        words, wtags = [], []
        for i, tok in enumerate(tokens, 1):
            word, slash, tag = tok.rpartition("/")
            if not slash:
                raise ValueError(f"{path}: line {n}: token {i} {tok[:40]!r} has no slash; expected word/TAG")
            if not word or not tag:
                empty = "word" if not word else "tag"
                raise ValueError(f"{path}: line {n}: token {i} {tok[:40]!r} has an empty {empty}; expected "
                                 "word/TAG (the tag follows the last slash)")
            words.append(word)
            wtags.append(tag)
        sentences.append(words)
        tags.append(wtags)
        starts.append(n)
    if not sentences:
        raise ValueError(f"{path}: no sentences (expected one sentence a line, tokens written word/TAG)")
    return TaggedCorpus(sentences, tags, starts)


def read_raw_file(path: str | os.PathLike[str]) -> TaggedCorpus:
    """Read a file of raw tokens: one sentence a line, tokens separated by white space.

    Blank lines are kept as empty sentences (no tokens), so that an output written line for
    line stays aligned with the input.

    Raises
    ------
    ValueError
        Naming the file and the line: non-UTF-8 bytes; or a file with no token at all.
    """
    sentences = []
    starts = []
    for n, text in text_lines(path):
        sentences.append(text.split())
        starts.append(n)
    if not any(sentences):
        raise ValueError(f"{path}: no tokens (expected one sentence a line, tokens separated by white space)")
    return TaggedCorpus(sentences, [[] for _ in sentences], starts)


def sniff_corpus_format(path: str | os.PathLike[str]) -> str | None:
    """The format of a tagged corpus file: "conll", "wordtag", "svmlight", or None when unsure.

    By the suffix first (`CORPUS_SUFFIXES`), then by the first 50 non-blank lines: svmlight
    when the first line's fields after the label are all ``index:value`` pairs; wordtag
    when every token of every line holds a slash with text on both sides; conll when every
    line has the same number (two or more) of columns and either a blank line separates two
    sentences or every line is one token.  None otherwise (and for a file that is not
    readable UTF-8): the caller falls back on its default reader, which then names the problem.
    """
    p = Path(path)
    fmt = CORPUS_SUFFIXES.get(p.suffix.lower())
    if fmt is not None:
        return fmt
    try:
        with open(p, "rb") as fh:
            head = [fh.readline() for _ in range(4 * _SNIFF_LINES)]
        text = [line.decode("utf-8").lstrip("\ufeff") for line in head if line]
    except (OSError, UnicodeDecodeError):
        return None
    rows = [line.split() for line in text]
    filled = [r for r in rows if r][:_SNIFF_LINES]
    if not filled:
        return None
    if len(filled[0]) >= 2 and all(_SVMLIGHT_PAIR.match(f) for f in filled[0][1:]):
        return "svmlight"
    if all(_is_wordtag(tok) for r in filled for tok in r):
        return "wordtag"
    widths = {len(r) for r in filled}
    if len(widths) == 1 and min(widths) >= 2:
        seen_token = blank_between = False
        for r in rows:
            if r:
                seen_token = True
            elif seen_token:
                blank_between = True
                break
        if blank_between or len(filled) > 1:
            return "conll"
    return None


def _is_wordtag(tok: str) -> bool:
    word, slash, tag = tok.rpartition("/")
    return bool(slash and word and tag)
