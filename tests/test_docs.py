"""What the documentation site shows: no raw Sphinx roles, no machine paths, one copy of the ten lines."""
import ast
import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _hooks():
    spec = importlib.util.spec_from_file_location("doc_checks", ROOT / "docs" / "hooks" / "checks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: the package and the papers' reproduction (a distribution of its own, bench/), whose docstrings the
#: same checks hold
SOURCES = (ROOT / "src" / "structfw", ROOT / "bench" / "src" / "structfw_bench")


def _docstrings():
    for path in sorted(p for root in SOURCES for p in root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}", doc


def test_no_sphinx_roles_in_docstrings():
    """mkdocstrings renders docstrings as Markdown, where ":class:`X`" is literal text."""
    role = _hooks().RAW_ROLE
    found = [where for where, doc in _docstrings() if role.search(doc)]
    assert not found, f"raw Sphinx roles (write `Name` in backticks) in: {found[:10]}"


def test_the_docs_build_fails_on_a_raw_role_or_a_machine_path(tmp_path):
    from mkdocs.exceptions import PluginError

    hooks = _hooks()
    hooks.on_config({"config_file_path": str(tmp_path / "mkdocs.yml")})
    page = SimpleNamespace(file=SimpleNamespace(src_path="reference/x.md"))
    assert hooks.on_page_content("<p>see <code>Trace</code></p>", page, {}, None)
    with pytest.raises(PluginError, match="raw Sphinx role"):
        hooks.on_page_content("<p>see :class:`Trace`</p>", page, {}, None)
    with pytest.raises(PluginError, match="machine's path"):
        hooks.on_page_content(f"<pre>{tmp_path}/examples/plot_x.py:3: UserWarning</pre>", page, {}, None)


def _outside_code(text):
    return re.sub(r"```.*?```|``.*?``|`[^`\n]*`", "", text, flags=re.S)


def test_no_maths_in_angle_brackets_is_eaten_as_html():
    """"<w, phi(x, y)>" outside backticks is an HTML tag to Markdown, hidden by the browser: docstrings
    (rendered by mkdocstrings) and pages write it in backticks or as ⟨w, phi(x, y)⟩."""
    eaten = _hooks().EATEN_MATHS
    found = [where for where, doc in _docstrings() if eaten.search(_outside_code(doc))]
    found += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").rglob("*.md"))
              if "generated" not in p.parts and eaten.search(_outside_code(p.read_text()))]
    assert not found, f"maths in angle brackets outside code (use ⟨ ⟩ or backticks) in: {found[:10]}"


def test_the_docs_build_refuses_eaten_maths():
    from mkdocs.exceptions import PluginError

    page = SimpleNamespace(file=SimpleNamespace(src_path="guide/x.md"))
    with pytest.raises(PluginError, match="HTML tag"):
        _hooks().on_page_content("<p>the score <w, phi(x, y)> of y</p>", page, {}, None)
    assert _hooks().on_page_content("<p>the score ⟨w, phi(x, y)⟩ <a href='x'>y</a></p>", page, {}, None)


def test_the_ten_lines_have_one_copy():
    """The docs include the README's section rather than keeping copies that drift apart."""
    readme = (ROOT / "README.md").read_text()
    assert readme.count("[start:ten-lines]") == 1 and readme.count("[end:ten-lines]") == 1
    for page in ("index.md", "guide/estimator.md"):
        text = (ROOT / "docs" / page).read_text()
        assert '--8<-- "README.md:ten-lines"' in text
        assert "sf.datasets.load_ocr(\"train\")" not in text, page


def test_docs_name_no_missing_design_file():
    for path in list((ROOT / "docs").rglob("*.md")) + [p for root in SOURCES for p in root.rglob("*.py")]:
        assert "DESIGN.md" not in path.read_text(), path


def test_command_help_is_plain_text():
    """click prints docstrings as they are: no reST markup in any command's --help."""
    import click
    from click.testing import CliRunner

    from structfw.cli import main

    runner = CliRunner()
    ctx = click.Context(main)

    def commands(cmd, path):
        yield path
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from commands(cmd.get_command(ctx, name), path + [name])

    role = _hooks().RAW_ROLE
    for path in commands(main, []):
        out = runner.invoke(main, path + ["--help"]).output
        assert "Usage:" in out, path
        assert "``" not in out and not role.search(out), (path, out)


def test_every_parameter_of_the_public_estimators_models_and_solvers_is_described():
    """Each constructor parameter has an entry with a description in its class's numpy-style
    Parameters section (the API pages render them; an empty entry reads as an omission)."""
    import inspect

    import structfw as sf
    from structfw import models, solvers, svm

    internal = {"BCFWState", "KernelExpansion", "Monitor", "SolveResult", "Problem", "StopRule"}
    classes = [sf.StructuredSVM, svm.FrankWolfeSVC]
    for mod in (models, solvers):
        classes += [getattr(mod, n) for n in mod.__all__
                    if inspect.isclass(getattr(mod, n)) and n not in internal]
    missing = {}
    for cls in classes:
        doc = inspect.getdoc(cls) or ""
        section = re.search(r"Parameters\n-+\n(.*?)(?:\n\w[\w ]*\n-+\n|\Z)", doc, re.S)
        lines = section.group(1).split("\n") if section else []
        described = set()
        for k, line in enumerate(lines):
            entry = re.match(r"^(\w+(?:, \w+)*)\s*(?::.*)?$", line)
            if entry and k + 1 < len(lines) and lines[k + 1].startswith("    ") and lines[k + 1].strip():
                described.update(entry.group(1).split(", "))
        try:
            params = inspect.signature(cls.__init__).parameters.values()
        except (TypeError, ValueError):
            continue
        names = [p.name for p in params if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        undocumented = [name for name in names if name not in described]
        if undocumented:
            missing[cls.__name__] = undocumented
    assert not missing, missing


def _design():
    return (ROOT / "docs" / "design.md").read_text()


def test_docstrings_cite_sections_design_md_has():
    """Code cites docs/design.md only, as 'docs/design.md, "<section>"' with a real heading."""
    headings = [h.strip() for h in re.findall(r"^#+ (.+)$", _design(), re.M)]
    bad = []
    for path in sorted(p for root in SOURCES for p in root.rglob("*.py")):
        for section in re.findall(r'design\.md, "([^"]+)"', path.read_text()):
            section = " ".join(section.replace("#", " ").split())  # a citation wrapped over lines
            if not any(h.startswith(section) for h in headings):
                bad.append(f"{path.relative_to(ROOT)}: {section!r}")
    assert not bad, f"docs/design.md has no such section: {bad}"


def test_the_parts_table_is_true_to_the_engine():
    """Every option of ENGINE_PARAMS and every part the plan can choose is in the table of
    docs/design.md, "The engine and its parts", and the table names nothing else."""
    from structfw.solvers import parts, plan

    text = _design()
    section = text[text.index("## The engine and its parts"):text.index("### Adding a corner source")]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    options = {p.name for p in plan.ENGINE_PARAMS}
    in_section = set(re.findall(r"`(\w+)`", section))
    assert options <= in_section, f"options missing from the section: {sorted(options - in_section)}"
    sources = {"ExactOracle", "GapCache", "WorkingSet"}
    steps = {cls.__name__ for cls in parts.STEP_PARTS.values()}
    named = set(re.findall(r"`([A-Z]\w+)`", table))
    assert named == sources | steps, named ^ (sources | steps)
    for name in named:
        assert hasattr(parts, name), name
    from structfw.solvers.sampling import SAMPLINGS

    row = next(line for line in table.splitlines() if line.startswith("| sampler"))
    assert all(s in row for s in SAMPLINGS), row
    row = next(line for line in table.splitlines() if line.startswith("| averaging"))
    assert all(a in row for a in plan.BCFW_AVERAGINGS if a), row
    for opt in re.findall(r"`(\w+)`", table):
        assert opt in options or opt in named or opt == "nonnegative_indices", opt
