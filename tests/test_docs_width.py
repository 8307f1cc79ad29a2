"""Code on the documentation site reads without horizontal scrolling (issue 51).

Every line of a fenced code block in the docs pages, and every line of the gallery's examples,
is at most ``L`` characters: the width that docs/stylesheets/width.css makes room for on a
desktop window of 1220 px or more.
"""
import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# the stylesheet's arithmetic is for this many characters: change both together
L = 88

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<rest>.*)$")


def fenced_lines(text):
    """The lines inside the fenced code blocks of a Markdown text.

    Parameters
    ----------
    text : str
        A Markdown page.

    Yields
    ------
    (int, str)
        The 1-based line number and the line as the block shows it: without the indentation
        of its opening fence, which Markdown strips (a block inside a list item).
    """
    opening = None
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if opening is None:
            if match:
                opening = match
            continue
        if match and _closes(opening, match):
            opening = None
            continue
        indent = opening["indent"]
        yield number, line[len(indent):] if line.startswith(indent) else line.lstrip()


def _closes(opening, match):
    # a block opened by ```` may show ``` lines; only a bare run of the same character, at
    # least as long, ends it
    fence, closing = opening["fence"], match["fence"]
    return closing[0] == fence[0] and len(closing) >= len(fence) and not match["rest"].strip()


def columns(line):
    """The columns a line takes in a monospace font: two for a wide (CJK) character."""
    # a browser draws CJK from a fallback font about 1em wide, against 0.6em for a Latin
    # character: counting it as two is the terminal convention and errs on the safe side
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def too_long(name, lines, limit=L):
    """``"name:line: n > limit"`` for each of ``lines`` (pairs of number and text) over ``limit``."""
    return [f"{name}:{number}: {columns(line)} > {limit}" for number, line in lines
            if columns(line) > limit]


def _pages():
    for path in sorted(DOCS.rglob("*.md")):
        # the gallery's pages are generated from examples/, which are checked as source
        if "generated" not in path.relative_to(DOCS).parts:
            yield path
    # the pages include README.md's snippets (``--8<--``), and GitHub shows its blocks at about
    # the same width
    yield ROOT / "README.md"


def test_docs_code_blocks_fit_the_page():
    found = []
    for path in _pages():
        found += too_long(path.relative_to(ROOT), fenced_lines(path.read_text()))
    assert not found, "code lines wider than the page (break them):\n" + "\n".join(found)


def test_examples_fit_the_gallery_page():
    examples = sorted((ROOT / "examples").glob("plot_*.py"))
    assert examples
    found = []
    for path in examples:
        found += too_long(path.relative_to(ROOT), enumerate(path.read_text().splitlines(), 1))
    assert not found, "example lines wider than the gallery page (break them):\n" + "\n".join(found)


def test_a_long_line_in_a_block_is_named_and_prose_is_not():
    wide = "x" * (L + 1)
    page = "\n".join([
        wide,                       # 1: prose wraps, not checked
        "```python",
        "x" * L,                    # 3: exactly L fits
        wide,                       # 4
        "```",
        wide,                       # 6
        "  ````text",               # a block in a list item, holding a ``` line
        "  ```",
        "  " + "y" * L,             # 9: its indentation is not shown
        "  " + wide,                # 10
        "  ````",
        wide,                       # 12
        "```",
        "x" * (L - 3) + "東京",     # 14: two columns a character
        "```",
    ])
    assert too_long("page.md", fenced_lines(page)) == [f"page.md:4: {L + 1} > {L}",
                                                       f"page.md:10: {L + 1} > {L}",
                                                       f"page.md:14: {L + 1} > {L}"]


def test_the_stylesheet_is_sized_for_this_limit():
    css = (DOCS / "stylesheets" / "width.css").read_text()
    assert f"hold {L} characters" in css
    assert "stylesheets/width.css" in (ROOT / "mkdocs.yml").read_text()
