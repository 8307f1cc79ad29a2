"""The convergence record every solver fills (DESIGN.md section 3).

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

    Columns: ``passes`` (effective passes: optimisation oracle calls / n),
    ``oracle_calls`` (oracle calls that moved the iterate), ``time_s``
    (optimisation time, monitoring excluded), ``primal`` P(w), ``dual`` D(alpha),
    ``gap`` = P - D, and when available ``test_loss``, ``monitor_calls``,
    ``cache_hits``, ``active_corners``, ``oracle_time_frac``.

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


def _json_float(x):
    return None if not math.isfinite(x) else float(x)
