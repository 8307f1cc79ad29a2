"""A user's own graph data for `structfw.models.GraphModel`: one JSON object a line (JSON lines).

What `structfw train --data graphs.jsonl` (``--format graph``) and `structfw predict` read.
Every non-blank line of a UTF-8 file is one graph::

    {"nodes": [[0.5, 1.0], [0.1, 0.0], [0.9, 1.0]], "edges": [[0, 1], [1, 2]],
     "edge_features": [[1.0], [0.3]], "labels": ["sky", "sky", "tree"]}

* ``nodes`` (required): V >= 1 rows of F >= 1 numbers, the node features x_v; F is the same
  on every line.
* ``edges`` (required, may be ``[]``): E pairs ``[u, v]`` of node indices 0..V-1, no
  self-loops, each pair of nodes once (``[u, v]`` and ``[v, u]`` are the same pair; the
  orientation matters only for ``pairwise="full"``).
* ``edge_features`` (optional): E rows of Fe >= 1 numbers, one per edge in the order of
  ``edges``; either every line has them (with the same Fe) or none, in which case every
  edge has the single feature 1 (Fe = 1, one shared pairwise table).
* ``labels`` (optional): V labels, all integers (within int64) or all strings (of at most
  `MAX_LABEL_CHARS` characters) in the whole file; needed to train, optional to predict (then
  every line or none has them).

No other key is accepted (a misspelt ``edge_feature`` would otherwise be silently dropped).
Numbers are finite JSON numbers (``NaN`` and ``Infinity`` are refused, as is a value whose
square overflows float64), node indices are integers.

Why JSON lines: any language writes it with its standard library, one graph a line lets every
error name its line, and the file is read and checked a line at a time, each line bounded
(``max_line_bytes``) before it is parsed, so an untrusted file costs memory in proportion to its
size.  An ``.npz`` archive would need ragged arrays split by offsets, harder to write and to get
right outside Python.

Every problem is a ValueError naming the file and the line: not UTF-8, not a JSON object, a
missing or unknown key, rows of unequal length, a feature count that differs from the first
graph's, an edge out of range, a self-loop or a repeated edge, edge features that do not match
the edges, labels of the wrong number or of mixed kinds (integers and strings), a line longer
than the bound, and a file with no graph.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..models._validation import check_finite
from .corpus_files import text_lines
from .svmlight import MAX_LINE_BYTES

__all__ = ["GraphFile", "load_graph_file", "sniff_graph_file", "GRAPH_SUFFIXES", "GRAPH_KEYS", "MAX_LABEL_CHARS"]

#: file suffixes `sniff_graph_file` reads as graph files without looking inside
GRAPH_SUFFIXES = (".jsonl", ".ndjson")
#: the keys a line may hold; the first two are required
GRAPH_KEYS = ("nodes", "edges", "edge_features", "labels")
#: how many leading bytes `sniff_graph_file` looks at
_SNIFF_BYTES = 1 << 12
#: the longest string label, in characters: numpy keeps string labels at 4 bytes a character of the
#: longest one, so one long label among many short ones would cost that much for every node
MAX_LABEL_CHARS = 64
#: an integer label must fit int64, as the states and classes_ hold them
_INT64_MAX = 2 ** 63 - 1


class GraphFile(NamedTuple):
    """What `load_graph_file` returns: ``X, Y, classes, lines = load_graph_file(path)``.

    X : list of tuples
        One graph per line: ``(nodes (V, F) float64, edges (E, 2) int64)``, or with edge
        features in the file ``(nodes, edges, edge_features (E, Fe) float64)``: the inputs
        `GraphModel` takes.
    Y : list of (V,) arrays, or None
        Each graph's labels as the file gives them (int64 or str arrays; `StructuredSVM`
        encodes them as states), None for a file without labels.
    classes : ndarray or None
        The distinct labels, sorted (the label names; n_states = ``len(classes)``).
    lines : list of int
        The 1-based line of each graph (blank lines are skipped).
    """

    X: list[tuple[npt.NDArray[Any], ...]]
    Y: list[npt.NDArray[Any]] | None
    classes: npt.NDArray[Any] | None
    lines: list[int]

    @property
    def n_features(self) -> int:
        """F, the node features of every graph."""
        return int(self.X[0][0].shape[1])

    @property
    def n_edge_features(self) -> int:
        """Fe, the edge features of every graph (1 when the file gives none)."""
        return int(self.X[0][2].shape[1]) if len(self.X[0]) == 3 else 1

    def make_model(self, **kwargs: Any) -> Any:
        """A `GraphModel` sized from the file: n_states = ``len(classes)``, n_features and
        n_edge_features as read; ``kwargs`` are its other arguments (or override these)."""
        from ..models.graph import GraphModel

        sizes: dict[str, Any] = dict(n_features=self.n_features, n_edge_features=self.n_edge_features)
        if self.classes is not None:
            sizes["n_states"] = len(self.classes)
        return GraphModel(**{**sizes, **kwargs})


def load_graph_file(path: str | os.PathLike[str], *, require_labels: bool = False,
                    max_line_bytes: int = MAX_LINE_BYTES) -> GraphFile:
    """Read a graph file: one JSON object a line (format in the module docstring).

    Parameters
    ----------
    path : str or Path
    require_labels : bool, default False
        Refuse a file without labels (training needs them).
    max_line_bytes : int, default `structfw.datasets.svmlight.MAX_LINE_BYTES` (64 MiB)
        The most bytes a line may hold, checked before the line is parsed (parsing holds
        about 16 bytes per byte of text for a while).

    Returns
    -------
    GraphFile
        ``(X, Y, classes, lines)``; ``make_model()`` builds the `GraphModel` for it.

    Raises
    ------
    ValueError
        Naming the file and the line: any line that is not a valid graph (module
        docstring), graphs that disagree on the feature counts or on which keys they have,
        labels of mixed kinds; or a file with no graph.
    """
    if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be a positive integer, got {max_line_bytes!r}")
    reader = _Reader(str(os.fspath(path)))
    for n, text in text_lines(path, max_line_bytes):
        if text.strip():
            reader.add(n, text)
    return reader.finish(require_labels)


def sniff_graph_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` looks like a graph file: a suffix of `GRAPH_SUFFIXES`, or a first
    non-blank character ``{`` (no svmlight, CoNLL or word/TAG line starts so).  False for a
    file that cannot be read: the caller's default reader then names the problem."""
    p = Path(path)
    if p.suffix.lower() in GRAPH_SUFFIXES:
        return True
    try:
        with open(p, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return False
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"{"




def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a finite number")


# ---------------------------------------------------------------------- one graph a line
class _Reader:
    """The graphs read so far, and what the first graph fixed for the others (F, Fe, keys)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.X: list[tuple[npt.NDArray[Any], ...]] = []
        self.Y: list[npt.NDArray[Any]] = []
        self.lines: list[int] = []
        self.F = self.F_line = 0
        self.Fe: int | None = None  # set by the first graph with an edge (and edge features)
        self.Fe_line = 0
        self.has_ef: bool | None = None
        self.has_labels: bool | None = None
        self.label_kind: str | None = None
        self.label_line = 0
        self.strict = False

    def fail(self, n: int, problem: str) -> ValueError:
        return ValueError(f"{self.src}: line {n}: {problem}")

    def add(self, n: int, text: str) -> None:
        obj = self._parse(n, text)
        # numpy reads [1, true] as [1, 1]: only a line with a JSON boolean needs each entry looked at
        self.strict = "true" in text or "false" in text
        nodes = self._nodes(n, obj["nodes"])
        V = nodes.shape[0]
        edges = self._edges(n, obj["edges"], V)
        self._same_keys(n, obj)
        graph: tuple[npt.NDArray[Any], ...] = (nodes, edges)
        if self.has_ef:
            graph = (nodes, edges, self._edge_features(n, obj["edge_features"], edges.shape[0]))
        if self.has_labels:
            self.Y.append(self._labels(n, obj["labels"], V))
        self.X.append(graph)
        self.lines.append(n)

    def _parse(self, n: int, text: str) -> dict[str, Any]:
        try:
            obj = json.loads(text.rstrip("\r\n"), parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise self.fail(n, f"not JSON ({exc.msg} at column {exc.colno}); expected one graph a line, "
                               '{"nodes": [[...], ...], "edges": [[u, v], ...]}') from None
        except RecursionError:
            raise self.fail(n, "not a graph (JSON nested too deeply)") from None
        except ValueError as exc:  # NaN / Infinity, or an integer of thousands of digits
            raise self.fail(n, f"not a graph ({exc})") from None
        if not isinstance(obj, dict):
            raise self.fail(n, f"expected a JSON object {{\"nodes\": ..., \"edges\": ...}}, got {_json_kind(obj)}")
        unknown = [k for k in obj if k not in GRAPH_KEYS]
        if unknown:
            raise self.fail(n, f"unknown key {unknown[0][:40]!r}; a graph has the keys {', '.join(GRAPH_KEYS)}")
        for key in GRAPH_KEYS[:2]:
            if key not in obj:
                raise self.fail(n, f"no {key!r}; every graph has 'nodes' (V rows of F numbers) and 'edges' "
                                   "([u, v] pairs, may be [])")
        return obj

    def _matrix(self, n: int, value: Any, key: str, rows: str, integer: bool = False) -> npt.NDArray[Any]:
        """``value`` as a 2-d numeric array, or an error naming its first bad row or entry."""
        if not isinstance(value, list):
            raise self.fail(n, f"{key} must be a list of {rows}, got {_json_kind(value)}")
        try:
            arr = np.array(value)
        except (ValueError, OverflowError):
            arr = np.zeros(0)  # ragged rows: found below
        kinds = "i" if integer else "iuf"
        well_formed = bool(value) and arr.ndim == 2 and arr.dtype.kind in kinds
        if well_formed and not self.strict:
            return arr
        problem = _bad_rows(value, key, rows, integer)
        if problem is None and well_formed:
            return arr
        if problem is None and not integer and arr.dtype == object:
            # well formed, but an integer beyond int64 made numpy keep Python objects
            try:
                return np.array(value, dtype=np.float64)
            except OverflowError:
                problem = f"{key}: an integer overflows float64"
        raise self.fail(n, problem or f"{key}: expected {rows}")

    def _nodes(self, n: int, value: Any) -> npt.NDArray[np.float64]:
        nodes = self._matrix(n, value, "nodes", "V >= 1 rows of F >= 1 numbers, one row a node")
        V, F = nodes.shape
        if F == 0:
            raise self.fail(n, "nodes: rows of 0 features; each node needs F >= 1 numbers")
        if not self.F:
            self.F, self.F_line = F, n
        elif F != self.F:
            raise self.fail(n, f"nodes: {F} features a node, but line {self.F_line} (the first graph) has "
                               f"{self.F}; every graph has the same F")
        nodes = np.ascontiguousarray(nodes, dtype=np.float64)
        self._finite(n, nodes, "nodes")
        return nodes

    def _edges(self, n: int, value: Any, V: int) -> npt.NDArray[np.int64]:
        if isinstance(value, list) and not value:
            return np.zeros((0, 2), np.int64)
        edges = self._matrix(n, value, "edges", "[u, v] pairs of node indices", integer=True)
        if edges.shape[1] != 2:
            raise self.fail(n, f"edges: {edges.shape[1]} entries an edge; expected [u, v] pairs")
        from ..oracles.graph import check_graph

        try:
            return check_graph(V, edges, "edges")
        except ValueError as exc:
            raise self.fail(n, str(exc)) from None

    def _same_keys(self, n: int, obj: dict[str, Any]) -> None:
        """Edge features and labels are in every graph of a file or in none."""
        for key, attr in (("edge_features", "has_ef"), ("labels", "has_labels")):
            has = key in obj
            seen = getattr(self, attr)
            if seen is None:
                setattr(self, attr, has)
            elif has != seen:
                first = self.lines[0] if self.lines else n
                raise self.fail(n, f"{'has' if has else 'has no'} {key!r}, but line {first} (the first graph) "
                                   f"{'has none' if has else 'has them'}; give every graph its {key} or none")

    def _edge_features(self, n: int, value: Any, E: int) -> npt.NDArray[np.float64]:
        if isinstance(value, list) and not value and E == 0:
            return np.zeros((0, 0), np.float64)  # its width is set once the file's Fe is known
        ef = self._matrix(n, value, "edge_features", "E rows of Fe >= 1 numbers, one per edge")
        if ef.shape[0] != E:
            raise self.fail(n, f"edge_features: {_count(ef.shape[0], 'row')} for {_count(E, 'edge')}; one row per "
                               "edge, in the order of 'edges'")
        if ef.shape[1] == 0:
            raise self.fail(n, "edge_features: rows of 0 features; each edge needs Fe >= 1 numbers")
        if self.Fe is None:
            self.Fe, self.Fe_line = ef.shape[1], n
        elif ef.shape[1] != self.Fe:
            raise self.fail(n, f"edge_features: {ef.shape[1]} features an edge, but line {self.Fe_line} has "
                               f"{self.Fe}; every edge of the file has the same Fe")
        ef = np.ascontiguousarray(ef, dtype=np.float64)
        self._finite(n, ef, "edge_features")
        return ef

    def _labels(self, n: int, value: Any, V: int) -> npt.NDArray[Any]:
        if not isinstance(value, list):
            raise self.fail(n, f"labels must be a list of V = {V} labels, got {_json_kind(value)}")
        if len(value) != V:
            raise self.fail(n, f"labels: {_count(len(value), 'label')} for {_count(V, 'node')}; one label a node")
        kinds = {_label_kind(v) for v in value}
        if None in kinds:
            bad = next(v for v in value if _label_kind(v) is None)
            raise self.fail(n, f"labels: {_what(bad)} is not a label; labels are integers "
                               "or strings")
        if len(kinds) > 1:
            raise self.fail(n, "labels mix integers and strings; the labels of a file are all integers or all "
                               "strings")
        kind = kinds.pop()
        if self.label_kind is None:
            self.label_kind, self.label_line = kind, n
        elif kind != self.label_kind:
            raise self.fail(n, f"labels are {kind}s, but line {self.label_line} has {self.label_kind} labels; the "
                               "labels of a file are all integers or all strings")
        if kind == "integer":
            big = next((v for v in value if abs(v) > _INT64_MAX), None)
            if big is not None:
                raise self.fail(n, f"labels: {_show(big)} is outside the 64-bit integers")
            return np.array(value, dtype=np.int64)
        longest = max(value, key=len, default="")
        if len(longest) > MAX_LABEL_CHARS:
            raise self.fail(n, f"labels: {_show(longest)} has {len(longest)} characters; a label has at most "
                               f"{MAX_LABEL_CHARS}")
        return np.array(value, dtype=str)

    def _finite(self, n: int, arr: npt.NDArray[np.float64], key: str) -> None:
        try:
            check_finite(arr, key)
        except ValueError as exc:
            raise self.fail(n, str(exc)) from None

    def finish(self, require_labels: bool) -> GraphFile:
        if not self.X:
            raise ValueError(f"{self.src}: no graphs (expected one JSON object a line, "
                             '{"nodes": [[...], ...], "edges": [[u, v], ...]})')
        if require_labels and not self.has_labels:
            raise ValueError(f"{self.src}: line {self.lines[0]}: no 'labels'; training needs the labels of every "
                             "graph (V integers or strings a line)")
        if self.has_ef:
            Fe = self.Fe or 1  # a file of edgeless graphs: any width; 1 is the model's default
            self.X = [x if x[2].shape[1] else (x[0], x[1], np.zeros((0, Fe), np.float64)) for x in self.X]
        if not self.has_labels:
            return GraphFile(self.X, None, None, self.lines)
        classes = np.unique(np.concatenate(self.Y))
        return GraphFile(self.X, self.Y, classes, self.lines)


# ---------------------------------------------------------------------- messages
def _bad_rows(value: list[Any], key: str, rows: str, integer: bool) -> str | None:
    """Why ``value`` is not a matrix of numbers (integers): its first bad row or entry; None when
    every row has the same length and every entry is a number (an integer)."""
    if not value:
        return f"{key} is empty; expected {rows}"
    width = None
    for i, row in enumerate(value):
        if not isinstance(row, list):
            return f"{key}[{i}] is {_what(row)}; expected {rows}"
        if width is None:
            width = len(row)
        elif len(row) != width:
            return f"{key}[{i}] has {_count(len(row), 'entry', 'entries')}, but {key}[0] has {width}; expected {rows}"
        for j, v in enumerate(row):
            ok = isinstance(v, int) if integer else isinstance(v, (int, float))
            if isinstance(v, bool) or not ok:
                what = "an integer" if integer else "a number"
                return f"{key}[{i}][{j}] is {_what(v)}; expected {what}"
            if integer and abs(v) > _INT64_MAX:
                return f"{key}[{i}][{j}] = {_show(v)} is outside the 64-bit integers"
    return None


def _count(k: int, one: str, many: str | None = None) -> str:
    return f"{k} {one if k == 1 else many or one + 's'}"


def _label_kind(v: object) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return "integer"
    if isinstance(v, str):
        return "string"
    return None


def _json_kind(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    return "an object"


def _what(v: object) -> str:
    """A JSON value for a message: its kind and, but for null, its text ("a number 1.5")."""
    return "null" if v is None else f"{_json_kind(v)} {_show(v)}"


def _show(v: object) -> str:
    text = json.dumps(v)
    return text if len(text) <= 40 else text[:37] + "..."
