"""MkDocs hook: fail the build on what a reader should never see in a rendered page.

- a raw Sphinx role (":class:`Name`"): mkdocstrings renders numpy-style docstrings as
  Markdown, where roles are not markup, so they reach the page as literal text;
- maths in angle brackets left as raw text ("<w, phi(x, y)>"): Markdown passes it through as an
  HTML tag, which the browser hides (write it in backticks or with the brackets ⟨ ⟩);
- this machine's absolute path (a warning or traceback printed by a gallery example
  carries the build machine's file names into the page).

Registered in mkdocs.yml under ``hooks:``; with ``strict: true`` an error here fails
``mkdocs build`` (CI builds the site).
"""
from __future__ import annotations

import os
import re

from mkdocs.exceptions import PluginError

#: a reStructuredText role as Sphinx writes them; "py:" domains included
RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj|ref|doc|term|math|const):`")

#: an HTML "tag" whose name runs into a comma or a parenthesis: maths, never markup
EATEN_MATHS = re.compile(r"<[A-Za-z_][A-Za-z0-9_\[\]]*(?:,|\()[^<>\n]*>")

_root = None


def on_config(config):
    global _root
    _root = os.path.dirname(os.path.abspath(config["config_file_path"]))
    return config


def on_page_content(html, page, config, files):
    where = page.file.src_path
    match = RAW_ROLE.search(html)
    if match:
        start = max(match.start() - 60, 0)
        raise PluginError(f"{where}: raw Sphinx role {match.group(0)!r} in the rendered page "
                          f"(write `Name` in backticks): ...{html[start:match.end() + 40]}...")
    match = EATEN_MATHS.search(html)
    if match:
        raise PluginError(f"{where}: {match.group(0)!r} is read as an HTML tag and hidden in the page "
                          f"(write it in backticks or with the brackets ⟨ ⟩)")
    if _root and _root in html:
        at = html.index(_root)
        raise PluginError(f"{where}: the page shows this machine's path {_root!r} "
                          f"(a warning or traceback printed by an example?): ...{html[max(at - 120, 0):at + 80]}...")
    return html
