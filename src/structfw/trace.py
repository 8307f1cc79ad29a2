"""The convergence record every solver fills (docs/design.md, "Passes and oracle calls").

A `Trace` holds one row per checkpoint.  Indexing by a column name gives
a numpy array; the record saves to and loads from JSON and CSV.
"""
from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn, Self, overload

import numpy as np
import numpy.typing as npt

from .io import read_text_file

#: Columns every solver records (``dual`` is NaN where a solver has none).
CORE_COLUMNS = ("passes", "oracle_calls", "time_s", "primal", "dual", "gap")
#: Columns that count something (>= 0).
COUNT_COLUMNS = ("passes", "engine_passes", "oracle_calls", "monitor_calls", "cache_hits", "time_s",
                 "active_corners")
#: Counts that accumulate over a fit (and its warm-started continuations): never decreasing.
CUMULATIVE_COLUMNS = ("passes", "engine_passes", "oracle_calls", "monitor_calls", "cache_hits", "time_s")


class Trace:
    """Per-checkpoint convergence record.

    What a pass is: two columns count them.  ``engine_passes`` are the solver's own
    passes -- n block steps for BCFW and SSG, one batch step for FW, one exact pass
    plus its approximate passes for MP-BCFW -- and are what ``max_passes`` and
    ``check_every`` count.  ``passes`` are *effective* passes, all optimisation
    oracle calls / n, the x-axis of the papers' figures: gap sampling's full gap
    passes and the cache's refreshes add to it, cache hits do not, so ``passes``
    may run ahead of (gap sampling) or behind (cache) ``engine_passes``.
    Monitoring (the checkpoints' own oracle pass, ``monitor_calls``) is in neither.

    Columns: ``passes`` (effective passes), ``engine_passes``, ``oracle_calls``
    (oracle calls that moved the iterate), ``time_s`` (optimisation time,
    monitoring excluded), ``primal`` P(w), ``dual`` D(alpha), ``gap`` = P - D, and
    when available ``test_loss``, ``monitor_calls``, ``cache_hits``,
    ``active_corners``, ``oracle_time_frac``.

    A fit resumed with ``warm_start=True`` continues the counts of the fit it resumes:
    its ``passes``, ``engine_passes``, ``oracle_calls``, ``monitor_calls``, ``cache_hits``
    and ``time_s`` start from that fit's last entry, and ``meta["resumed_from"]`` holds
    the offsets.

    Attributes
    ----------
    meta : dict
        Run description (solver, lam, n, ...), saved along with the columns.
    """

    def __init__(self, meta: Mapping[str, Any] | None = None) -> None:
        self.meta = dict(meta or {})
        self._rows: list[dict[str, float]] = []

    # -- recording
    def append(self, **row: float | None) -> None:
        self._rows.append({k: float(v) if v is not None else math.nan for k, v in row.items()})

    def shift(self, offsets: Mapping[str, float]) -> None:
        """Add ``offsets[col]`` to every entry of each column ``col`` (a resumed fit's counts
        continue those of the fit it resumes: ``StructuredSVM(warm_start=True)``)."""
        for row in self._rows:
            for col, off in offsets.items():
                if col in row:
                    row[col] += float(off)

    # -- access
    @property
    def columns(self) -> list[str]:
        cols: list[str] = []
        for r in self._rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
        return cols

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, name: int | np.integer[Any]) -> dict[str, float]: ...

    @overload
    def __getitem__(self, name: str) -> npt.NDArray[np.float64]: ...

    def __getitem__(self, name: int | np.integer[Any] | str) -> dict[str, float] | npt.NDArray[np.float64]:
        if isinstance(name, (int, np.integer)):
            return dict(self._rows[name])
        if name not in self.columns:
            raise KeyError(f"trace has no column {name!r}; columns are {self.columns}")
        return np.array([r.get(name, math.nan) for r in self._rows], dtype=float)

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def last(self, name: str, default: float = math.nan) -> float:
        if not self._rows:
            return default
        return self._rows[-1].get(name, default)

    def as_dict(self) -> dict[str, list[float]]:
        return {c: self[c].tolist() for c in self.columns}

    def __repr__(self) -> str:
        return f"Trace({len(self)} checkpoints, columns={self.columns})"

    # -- persistence
    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """Serialise to a JSON string; also write it to ``path`` when given."""
        doc = {"meta": self.meta, "columns": {c: [_json_float(x) for x in self[c]] for c in self.columns}}
        text = json.dumps(doc, indent=1)
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> Self:
        """Load from a JSON string or a path to a JSON file.

        The document is checked as by `from_json_text`; a corrupt or ragged file is a
        ValueError naming the file and the problem."""
        text = str(source)
        name = "trace JSON text"
        if not text.lstrip().startswith("{"):
            name = str(source)
            text = read_text_file(source, "JSON trace")
        try:
            return cls.from_json_text(text)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None

    @classmethod
    def from_json_text(cls, text: str, max_rows: int = 10_000_000) -> Self:
        """Parse the JSON text written by `to_json`, and only text.

        Unlike `from_json`, never reads a file, whatever the string looks
        like: for model files and other untrusted input.  The document is checked
        field by field: an object with ``meta`` (an object of JSON values) and
        ``columns`` (an object mapping names to equally long lists of numbers or
        null, at most ``max_rows`` each).  Any other content is a ``ValueError``.
        """
        if not isinstance(text, str):
            raise ValueError(f"trace JSON must be a str, got {type(text).__name__}")
        try:
            doc = json.loads(text, parse_constant=_reject_json_constant)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"trace is not valid JSON ({str(exc)[:80]})") from None
        if not isinstance(doc, dict) or set(doc) - {"meta", "columns"} or "columns" not in doc:
            raise ValueError("trace JSON must be an object with keys 'meta' and 'columns'")
        meta = {} if doc.get("meta") is None else doc["meta"]
        cols = doc["columns"]
        if not isinstance(meta, dict):
            raise ValueError("trace 'meta' must be a JSON object")
        if not isinstance(cols, dict):
            raise ValueError("trace 'columns' must be a JSON object")
        lengths = set()
        for name, values in cols.items():
            if not isinstance(values, list) or len(values) > max_rows:
                raise ValueError(f"trace column {name[:40]!r} must be a list of at most "
                                 f"{max_rows} numbers")
            for v in values:
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    raise ValueError(f"trace column {name[:40]!r} holds a non-number")
                if isinstance(v, float) and not math.isfinite(v):  # 1e999 parses as inf; to_json writes null
                    raise ValueError(f"trace column {name[:40]!r} holds a number out of float range")
            lengths.add(len(values))
        if len(lengths) > 1:
            raise ValueError("trace columns have different lengths")
        _check_meta(meta)
        tr = cls(meta)
        n = lengths.pop() if lengths else 0
        try:
            for t in range(n):
                tr.append(**{c: (math.nan if cols[c][t] is None else cols[c][t]) for c in cols})
        except OverflowError:  # an integer too large for a float
            raise ValueError("trace holds a number out of float range") from None
        tr.check_values()
        return tr

    def check_values(self) -> None:
        """Raise ValueError unless every column holds values a solver can record.

        The counts (`COUNT_COLUMNS`) are >= 0 and never decrease from one checkpoint to
        the next (a resumed fit continues them); ``primal`` and ``test_loss`` are >= 0
        (P(w) >= 0 since H_i(y_i; w) = 0, eq. (1) of the BCFW paper); ``gap`` is >= 0 up to
        rounding (weak duality); ``oracle_time_frac`` lies in [0, 1].  NaN stands for a
        value not recorded and passes.
        """
        for col in self.columns:
            v = self[col]
            known = v[~np.isnan(v)]
            if col in COUNT_COLUMNS:
                if known.size and known.min() < 0:
                    raise ValueError(f"trace column {col!r} holds a negative count ({known.min():g})")
                if col in CUMULATIVE_COLUMNS and known.size > 1 and np.any(np.diff(known) < 0):
                    k = int(np.flatnonzero(np.diff(known) < 0)[0])
                    raise ValueError(f"trace column {col!r} decreases ({known[k]:g} then {known[k + 1]:g}); "
                                     "counts only grow from one checkpoint to the next")
            elif col in ("primal", "test_loss"):
                if known.size and known.min() < 0:
                    raise ValueError(f"trace column {col!r} holds a negative value ({known.min():g}); "
                                     "it is >= 0 by definition")
            elif col == "gap":
                primal = self["primal"] if "primal" in self else np.zeros(len(self))
                slack = 1e-9 * (1.0 + np.abs(np.nan_to_num(primal)))
                if np.any(v < -slack):
                    k = int(np.flatnonzero(v < -slack)[0])
                    raise ValueError(f"trace column 'gap' holds {v[k]:g} at checkpoint {k}: a duality gap "
                                     "is >= 0 (weak duality)")
            elif col == "oracle_time_frac":
                if known.size and (known.min() < 0 or known.max() > 1):
                    raise ValueError("trace column 'oracle_time_frac' must lie in [0, 1]")

    def to_csv(self, path: str | os.PathLike[str]) -> None:
        cols = self.columns
        with open(path, "w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(cols)
            for r in self._rows:
                wr.writerow([repr(r.get(c, math.nan)) for c in cols])

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str], max_rows: int = 10_000_000) -> Self:
        """Load a CSV written by `to_csv`: a header row of distinct column names, then one
        row of numbers per checkpoint with exactly one field per column.

        Anything else -- an empty file, a ragged or non-numeric row, binary content -- is a
        ValueError naming the file, the line and the problem."""
        src = str(path)
        tr = cls()
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                rows = csv.reader(fh)
                header = next(rows, None)
                if not header:
                    raise ValueError(f"{src}: empty; expected a header row of column names")
                if any(not c for c in header) or len(set(header)) != len(header):
                    raise ValueError(f"{src}: line 1 must name distinct, non-empty columns")
                for row in rows:
                    if not row:
                        continue  # a blank line
                    line = rows.line_num
                    if len(row) != len(header):
                        raise ValueError(f"{src}: line {line} has {len(row)} fields; the header names "
                                         f"{len(header)} columns")
                    if len(tr) >= max_rows:
                        raise ValueError(f"{src}: more than {max_rows} rows")
                    values = {}
                    for c, v in zip(header, row):
                        try:
                            values[c] = float(v)
                        except ValueError:
                            raise ValueError(f"{src}: line {line}, column {c[:40]!r}: {v[:40]!r} is not a "
                                             "number") from None
                    tr._rows.append(values)
        except (UnicodeDecodeError, csv.Error) as exc:
            raise ValueError(f"{src}: not a trace CSV ({type(exc).__name__}: {str(exc)[:80]})") from None
        try:
            tr.check_values()
        except ValueError as exc:
            raise ValueError(f"{src}: {exc}") from None
        return tr

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write JSON or CSV according to the file suffix."""
        path = Path(path)
        if path.suffix.lower() == ".csv":
            self.to_csv(path)
        else:
            self.to_json(path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Self:
        path = Path(path)
        return cls.from_csv(path) if path.suffix.lower() == ".csv" else cls.from_json(path)


def _check_meta(meta: Any, depth: int = 0) -> None:
    """The meta block holds JSON values only: finite numbers (1e999 parses as inf)."""
    if isinstance(meta, float) and not math.isfinite(meta):
        raise ValueError("trace 'meta' holds a number out of float range")
    if isinstance(meta, dict):
        for v in meta.values():
            _check_meta(v, depth + 1)
    elif isinstance(meta, list):
        for v in meta:
            _check_meta(v, depth + 1)


def _reject_json_constant(name: str) -> NoReturn:
    raise ValueError(f"non-standard JSON constant {name}")


def _json_float(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)
