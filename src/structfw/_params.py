"""Estimator parameters checked once, at ``fit``, from one constraints table per estimator.

scikit-learn's convention (``_parameter_constraints``): every constructor parameter has a list of
accepted kinds, and ``fit`` checks them all before any work, raising a ValueError that names
the parameter, what was given and everything that is accepted.  (scikit-learn's own validator
lives in a private module, ``sklearn.utils._param_validation``, whose API changes between
releases; these few constraint kinds are the project's own.)
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A real (or, with ``integer``, an integral) number in [low, high], ends open when asked;
    bools are not numbers here."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    allow_inf: bool = False

    def accepts(self, v: object) -> bool:
        if isinstance(v, (bool, np.bool_)):
            return False
        kind = numbers.Integral if self.integer else numbers.Real
        if not isinstance(v, kind):
            return False
        try:
            x = float(v)
        except OverflowError:  # an integer beyond float range: within no interval of reals we check
            return False
        if math.isnan(x) or (math.isinf(x) and not self.allow_inf):
            return False
        if self.low is not None and (x < self.low or (self.low_open and x == self.low)):
            return False
        return not (self.high is not None and (x > self.high or (self.high_open and x == self.high)))

    def describe(self) -> str:
        what = "an integer" if self.integer else "a number"
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        bound = " and ".join(parts)
        return f"{what} {bound}".strip() + (" (inf allowed)" if self.allow_inf else "")


@dataclass(frozen=True)
class Options:
    """One of the given values (compared with ==, strings only match strings)."""

    values: tuple[Any, ...]

    def accepts(self, v: object) -> bool:
        return any(type(v) is type(o) and v == o for o in self.values)

    def describe(self) -> str:
        if len(self.values) == 1:
            return repr(self.values[0])
        return "one of " + ", ".join(repr(o) for o in self.values)


@dataclass(frozen=True)
class InstanceOf:
    """An instance of the given type(s)."""

    types: tuple[type, ...]
    name: str

    def accepts(self, v: object) -> bool:
        return isinstance(v, self.types) and not (bool not in self.types and isinstance(v, (bool, np.bool_)))

    def describe(self) -> str:
        return self.name


@dataclass(frozen=True)
class Check:
    """Anything ``test`` accepts (for kinds the others cannot say, e.g. 'ray:ADDRESS')."""

    test: Callable[[object], bool]
    name: str

    def accepts(self, v: object) -> bool:
        try:
            return bool(self.test(v))
        except Exception:  # a test that cannot even look at the value rejects it
            return False

    def describe(self) -> str:
        return self.name


NONE = Options((None,))
BOOLEAN = InstanceOf((bool, np.bool_), "a bool")
#: what numpy.random.default_rng takes: None, a seed >= 0, or a Generator
RANDOM_STATE = [NONE, Interval(0, integer=True), InstanceOf((np.random.Generator,), "a numpy Generator")]


class InvalidParameterError(ValueError):
    """A constructor parameter outside its constraints; ``param`` names it (the command line
    maps it to its flag)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def validate_params(est: Any, table: Mapping[str, list[Any]]) -> None:
    """Check every parameter of ``est`` named in ``table`` (ValueError naming the first that fails).

    A table entry is a list of constraints; a value passes when any of them accepts it."""
    validate_values(type(est).__name__, {name: getattr(est, name) for name in table}, table)


def validate_values(owner: str, values: Mapping[str, Any], table: Mapping[str, list[Any]]) -> None:
    """`validate_params` for the arguments of a function (``owner`` names it in the message):
    every value of ``values`` named in ``table`` against its constraints."""
    for name, constraints in table.items():
        v = values[name]
        if any(c.accepts(v) for c in constraints):
            continue
        kinds = " or ".join(c.describe() for c in constraints)
        raise InvalidParameterError(f"{owner}: parameter {name!r} must be {kinds}; got {v!r}", name)

