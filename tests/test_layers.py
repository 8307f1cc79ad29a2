"""Layers import downward only (docs/design.md, "Layers")."""
import ast
from pathlib import Path

import pytest

import structfw

PKG = Path(structfw.__file__).parent
#: layer -> the packages/modules it must never import (at module level or inside functions)
FORBIDDEN = {
    "oracles": ("solvers", "models", "estimator", "cli", "bench", "path", "svm"),
    "models": ("solvers", "estimator", "cli", "bench", "path"),
    "solvers": ("estimator", "cli", "bench", "path", "features"),
    "datasets": ("solvers", "estimator", "cli", "bench", "path"),
}


def _imports(path):
    """Top-level structfw subpackages/modules a file imports (relative imports resolved)."""
    rel = path.relative_to(PKG)
    pkg_parts = list(rel.parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
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
