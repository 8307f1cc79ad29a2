"""The convergence record every solver fills (docs/design.md, "Passes and oracle calls").

A :class:`Trace` holds one row per checkpoint.  Indexing by a column name gives
a numpy array; the record saves to and loads from JSON and CSV.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

#: Columns every solver records (``dual`` is NaN where a solver has none).
CORE_COLUMNS = ("passes", "oracle_calls", "time_s", "primal", "dual", "gap")


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

    Attributes
    ----------
    meta : dict
        Run description (solver, lam, n, ...), saved along with the columns.
    """

    def __init__(self, meta=None):
        self.meta = dict(meta or {})
        self._rows: list[dict] = []

    # -- recording
    def append(self, **row):
        self._rows.append({k: float(v) if v is not None else math.nan for k, v in row.items()})

    # -- access
    @property
    def columns(self):
        cols = []
        for r in self._rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
        return cols

    def __len__(self):
        return len(self._rows)

    def __getitem__(self, name):
        if isinstance(name, (int, np.integer)):
            return dict(self._rows[name])
        if name not in self.columns:
            raise KeyError(f"trace has no column {name!r}; columns are {self.columns}")
        return np.array([r.get(name, math.nan) for r in self._rows], dtype=float)

    def __contains__(self, name):
        return name in self.columns

    def last(self, name, default=math.nan):
        if not self._rows:
            return default
        return self._rows[-1].get(name, default)

    def as_dict(self):
        return {c: self[c].tolist() for c in self.columns}

    def __repr__(self):
        return f"Trace({len(self)} checkpoints, columns={self.columns})"

    # -- persistence
    def to_json(self, path=None):
        """Serialise to a JSON string; also write it to ``path`` when given."""
        doc = {"meta": self.meta, "columns": {c: [_json_float(x) for x in self[c]] for c in self.columns}}
        text = json.dumps(doc, indent=1)
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_json(cls, source):
        """Load from a JSON string or a path to a JSON file."""
        text = str(source)
        if not text.lstrip().startswith("{"):
            text = Path(source).read_text()
        doc = json.loads(text)
        tr = cls(doc.get("meta"))
        cols = doc["columns"]
        n = len(next(iter(cols.values()))) if cols else 0
        for t in range(n):
            tr.append(**{c: (math.nan if cols[c][t] is None else cols[c][t]) for c in cols})
        return tr

    @classmethod
    def from_json_text(cls, text, max_rows=10_000_000):
        """Parse the JSON text written by :meth:`to_json`, and only text.

        Unlike :meth:`from_json`, never reads a file, whatever the string looks
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
        meta = doc.get("meta") or {}
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
            lengths.add(len(values))
        if len(lengths) > 1:
            raise ValueError("trace columns have different lengths")
        tr = cls(meta)
        n = lengths.pop() if lengths else 0
        try:
            for t in range(n):
                tr.append(**{c: (math.nan if cols[c][t] is None else cols[c][t]) for c in cols})
        except OverflowError:  # an integer too large for a float
            raise ValueError("trace holds a number out of float range") from None
        return tr

    def to_csv(self, path):
        cols = self.columns
        with open(path, "w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(cols)
            for r in self._rows:
                wr.writerow([repr(r.get(c, math.nan)) for c in cols])

    @classmethod
    def from_csv(cls, path):
        tr = cls()
        with open(path, newline="") as fh:
            rd = csv.reader(fh)
            header = next(rd)
            for row in rd:
                tr.append(**{c: float(v) for c, v in zip(header, row)})
        return tr

    def save(self, path):
        """Write JSON or CSV according to the file suffix."""
        path = Path(path)
        if path.suffix.lower() == ".csv":
            self.to_csv(path)
        else:
            self.to_json(path)

    @classmethod
    def load(cls, path):
        path = Path(path)
        return cls.from_csv(path) if path.suffix.lower() == ".csv" else cls.from_json(path)


def _reject_json_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def _json_float(x):
    return None if not math.isfinite(x) else float(x)
