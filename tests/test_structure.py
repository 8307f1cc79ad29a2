"""The engine stays readable: the size limits of the issue "One plan, one block step".

No function in solvers/ over 80 lines or 12 parameters (constructors aside: their parameter lists
are the estimator's options), and the BCFW class under 250 lines.  The compiled kernels meet them
by taking related arguments as tuples (a corner with its coefficient and score, the sampler, the
step rule, the average); docs/design.md, "The engine and its parts".
"""
import ast
from pathlib import Path

import pytest

import structfw.solvers as solvers_pkg

SOLVERS = Path(solvers_pkg.__file__).parent
MAX_LINES, MAX_PARAMS, MAX_BCFW_LINES = 80, 12, 250


def _n_params(fn):
    args = fn.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (args.vararg is not None) + (args.kwarg is not None)


def oversized(source, filename="<source>"):
    """(name, lines, parameters) of every function of ``source`` over the limits."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            params = _n_params(node)
            if lines > MAX_LINES or (params > MAX_PARAMS and node.name != "__init__"):
                out.append((node.name, lines, params))
    return out


@pytest.mark.parametrize("path", sorted(SOLVERS.glob("*.py")), ids=lambda p: p.name)
def test_no_function_in_solvers_is_over_the_limits(path):
    found = oversized(path.read_text(), str(path))
    assert found == [], f"{path.name}: over {MAX_LINES} lines or {MAX_PARAMS} parameters: {found}"


def test_the_bcfw_class_is_under_250_lines():
    tree = ast.parse((SOLVERS / "bcfw.py").read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BCFW"]
    assert cls.end_lineno - cls.lineno + 1 < MAX_BCFW_LINES


def test_the_check_sees_a_long_function_and_a_long_signature():
    """The checks above can fail."""
    long_body = "def f(x):\n" + "    x += 1\n" * MAX_LINES + "    return x\n"
    assert oversized(long_body) == [("f", MAX_LINES + 2, 1)]
    many = "def g(" + ", ".join(f"a{k}" for k in range(MAX_PARAMS + 1)) + "):\n    pass\n"
    assert oversized(many) == [("g", 2, MAX_PARAMS + 1)]
    method = "class C:\n    def h(self, " + ", ".join(f"a{k}" for k in range(MAX_PARAMS)) + "):\n        pass\n"
    assert oversized(method) == []  # self is not a parameter
    ctor = "class C:\n    def __init__(self, " + ", ".join(f"a{k}" for k in range(20)) + "):\n        pass\n"
    assert oversized(ctor) == []
