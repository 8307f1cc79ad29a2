"""Layers import downward only (docs/design.md, "Layers")."""
import ast
import re
import sys
from pathlib import Path

import pytest

import structfw

PKG = Path(structfw.__file__).parent
#: layer -> the packages/modules it must never import (at module level or inside functions)
FORBIDDEN = {
    "oracles": ("solvers", "models", "estimator", "cli", "path", "svm"),
    "models": ("solvers", "estimator", "cli", "path"),
    "solvers": ("estimator", "cli", "path", "features"),
    "datasets": ("solvers", "estimator", "cli", "path"),
}


def _imports(path):
    """Top-level structfw subpackages/modules a file imports (relative imports resolved)."""
    rel = path.relative_to(PKG)
    pkg_parts = list(rel.parts[:-1])
    out = set()
    tree = ast.parse(path.read_text())
    typing_only = set()   # imports under `if TYPE_CHECKING:` never run: annotations, not dependencies
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            typing_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[:len(pkg_parts) - node.level + 1]
                target = base + (node.module.split(".") if node.module else [])
                names = target if target else [a.name for a in node.names]
                if not target:
                    out.update(a.name.split(".")[0] for a in node.names)
                elif names:
                    out.add(names[0])
            elif node.module and node.module.startswith("structfw."):
                out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("structfw."):
                    out.add(a.name.split(".")[1])
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_import_downward_only(layer):
    bad = []
    for path in sorted((PKG / layer).glob("*.py")):
        hits = _imports(path) & set(FORBIDDEN[layer])
        if hits:
            bad.append(f"{path.relative_to(PKG)} imports {sorted(hits)}")
    assert not bad, "; ".join(bad)


def test_the_walk_sees_an_upward_import(tmp_path, monkeypatch):
    fake = PKG / "models" / "chain.py"
    assert "oracles" in _imports(fake)  # a real downward import is found


# ------------------------------------------------------------------ the Layers table names every module
DESIGN = PKG.parents[1] / "docs" / "design.md"
if not DESIGN.exists():  # an installed package: the doc is in the source tree next to the tests
    DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"


def _layers_sections():
    """(names column, whole text) of each entry of design.md's Layers table: an entry is a
    line at column 0 -- names, two or more spaces, a description -- and its indented lines."""
    text = DESIGN.read_text()
    block = text[text.index("## Layers"):]
    block = block[block.index("```") + 3:]
    block = block[block.index("\n") + 1:block.index("```")]
    sections = []
    for line in block.splitlines():
        if line[:1].strip():
            sections.append([line.split("  ")[0], line])
        elif line.strip():
            sections[-1][1] += "\n" + line
    return sections


def _modules():
    """Every module of the package as (package or "", module name), dunder files left out."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if path.stem.startswith("__") or "__pycache__" in rel.parts:
            continue
        out.append(("/".join(rel.parts[:-1]), path.stem))
    return out


def test_the_layers_table_names_every_module():
    sections = _layers_sections()
    top = {tok.removesuffix(".py") for names, _ in sections for tok in re.split(r"[,\s]+", names)
           if tok and not tok.endswith("/")}
    by_package = {}
    for names, whole in sections:
        for tok in re.findall(r"([\w/]+)/(?=[,\s]|$)", names):
            by_package[tok] = by_package.get(tok, "") + "\n" + whole
    missing = []
    for package, name in _modules():
        if not package:
            if name not in top:
                missing.append(f"{name}.py (a top-level module: name it in the first column)")
        elif package not in by_package:
            missing.append(f"{package}/ (no entry)")
        elif not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", by_package[package]):
            missing.append(f"{package}/{name}.py")
    assert not missing, f"docs/design.md's Layers table does not name: {sorted(set(missing))}"


def test_the_layers_table_names_no_missing_file():
    sections = _layers_sections()
    named = set()
    for names, whole in sections:
        packages = re.findall(r"([\w/]+)/(?=[,\s]|$)", names)
        for package in packages:
            assert (PKG / package / "__init__.py").exists(), f"design.md's Layers table names {package}/"
        for f in re.findall(r"(?<![\w./])(\w+)\.py\b", whole):
            named.add((packages[0] if len(packages) == 1 and f"{f}.py" not in names else "", f))
    for package, name in named:
        assert (PKG / package / f"{name}.py").exists(), \
            f"design.md's Layers table names {package + '/' if package else ''}{name}.py, which does not exist"


def test_the_design_table_check_sees_a_missing_module(monkeypatch, tmp_path):
    doc = tmp_path / "design.md"
    doc.write_text(DESIGN.read_text().replace("_params      the estimators'", "_paramz      the estimators'"))
    monkeypatch.setattr(sys.modules[__name__], "DESIGN", doc)
    with pytest.raises(AssertionError, match=r"_params\.py"):
        test_the_layers_table_names_every_module()


# ------------------------------------------------------------------ no import runs back up
#: every top-level module or package of structfw and its floor (docs/design.md, "Layers", read
#: bottom up): a unit imports only units on lower floors, at module level or inside functions
FLOORS = {
    "_interrupt": 0, "_numba_cache": 0, "_params": 0, "io": 0, "metrics": 0, "_linalg": 0, "_memory": 0,
    "trace": 1, "_compile": 1, "_progress": 1, "plotting": 2, "_image": 2,
    "oracles": 2,
    "models": 3,
    "_labels": 4, "datasets": 4, "svm": 4, "executor_core": 4,
    "executor_ray": 5,
    "executor": 6,
    "solvers": 7,
    "_prediction": 8, "path": 8,
    "_lam_select": 9, "estimator": 10,
    "latent": 11, "features": 11, "torch": 11, "loading": 12,
    "cli": 13,
}


def _unit(path):
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_every_unit_has_a_floor():
    units = {_unit(p) for p in PKG.rglob("*.py") if "__pycache__" not in p.parts} - {"__init__", "__main__"}
    assert units <= set(FLOORS), f"units without a floor in FLOORS: {sorted(units - set(FLOORS))}"


def test_no_import_runs_back_up():
    up = []
    for path in sorted(PKG.rglob("*.py")):
        if "__pycache__" in path.parts or path.name == "__init__.py" and path.parent == PKG:
            continue
        unit = _unit(path)
        for target in _imports(path):
            if target in FLOORS and target != unit and FLOORS[target] >= FLOORS[unit]:
                up.append(f"{path.relative_to(PKG)} ({unit}, floor {FLOORS[unit]}) imports {target} "
                          f"(floor {FLOORS[target]})")
    assert not up, "imports that run back up: " + "; ".join(up)


# ------------------------------------------------------------------ the reproduction sits above the package
#: the papers' reproduction: a distribution of its own (bench/), never a dependency of the package
BENCH_PACKAGE = "structfw_bench"
#: the one module that may name it, and only inside a function: the `structfw bench` group
BENCH_LOADER = Path("cli") / "__init__.py"


def _names_bench(node):
    """Whether an AST node imports structfw_bench: an import statement, or its module name written
    out (importlib.import_module("structfw_bench"), __import__, a name kept for a later import)."""
    def is_bench(name):
        return bool(name) and (name == BENCH_PACKAGE or name.startswith(BENCH_PACKAGE + "."))

    if isinstance(node, ast.Import):
        return any(is_bench(a.name) for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return not node.level and is_bench(node.module)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and is_bench(node.value)


def _bench_references(source):
    """(line, inside a function) of every place a module's source imports or names structfw_bench."""
    found = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if _names_bench(child):
                found.append((child.lineno, in_function))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(source), False)
    return found


def test_the_package_never_imports_the_reproduction():
    """No module of structfw imports structfw_bench but the CLI's, and that one inside a function
    (the `bench` group, when used): the core installs, imports and runs without the reproduction."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(PKG)
        for line, in_function in _bench_references(path.read_text()):
            if rel != BENCH_LOADER:
                bad.append(f"{rel}:{line}")
            elif not in_function:
                bad.append(f"{rel}:{line} (at module level; only inside a function)")
    assert not bad, "structfw imports structfw_bench: " + "; ".join(bad)
    assert any(inside for _, inside in _bench_references((PKG / BENCH_LOADER).read_text())), \
        "the bench group no longer loads structfw_bench by name: update BENCH_LOADER"


def test_the_bench_walk_sees_every_kind_of_import():
    cases = {
        "import structfw_bench\n": [(1, False)],
        "from structfw_bench.fig1 import bench_fig1\n": [(1, False)],
        "def f():\n    import structfw_bench.gaps\n": [(2, True)],
        "import importlib\ndef f():\n    return importlib.import_module('structfw_bench')\n": [(3, True)],
        "NAME = 'structfw_bench'\n": [(1, False)],
        # the command's name, a docstring naming a module of it, a relative import: not imports
        "from . import bench\nx = 'structfw bench fig1'\n\"\"\"see `structfw_bench.fig1`\"\"\"\n": [],
    }
    for source, expected in cases.items():
        assert _bench_references(source) == expected, source
