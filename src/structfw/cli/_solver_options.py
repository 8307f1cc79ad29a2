"""Solver options on the command line, generated from the solvers' ``PARAMS`` tables.

``train``: every option of every registered solver becomes one flag (``cache_size`` ->
``--cache-size``); its help says which solvers take it.  A flag given on the
command line that the chosen ``--solver`` does not take is a usage error naming
it: nothing is silently dropped.  Defaults are the solver's own (the flag's
default is "not given").

``path`` and the benchmarks: `engine_options` adds flags for a chosen few options of the
block-coordinate engine (``BCFW.PARAMS``), with the table's help, choices and bounds and
the command's own defaults, so that no command writes an engine option's flag by hand.
"""
from __future__ import annotations

import click

from ..solvers import SOLVER_NAMES

#: registered solver names, in registration order (the --solver choices)
SOLVER_CHOICES = list(SOLVER_NAMES)


def option_table():
    """option name -> list of (solver name, Param) that declare it, in declaration order."""
    table = {}
    for sname, cls in SOLVER_NAMES.items():
        for p in cls.PARAMS:
            table.setdefault(p.name, []).append((sname, p))
    return table


def flag(name):
    return "--" + name.replace("_", "-")


def _choices(entries):
    out = []
    for _, p in entries:
        for c in p.choices:
            c = "none" if c is None else c
            if c not in out:
                out.append(c)
    return out


def _defaults(entries):
    seen = {}
    for sname, p in entries:
        seen.setdefault("none" if p.default is None else repr(p.default) if p.kind != "choice" else p.default,
                        []).append(sname)
    if len(seen) == 1:
        return f"default {next(iter(seen))}"
    return "defaults " + "; ".join(f"{v} ({', '.join(s)})" for v, s in seen.items())


def _make_option(name, entries):
    p = entries[0][1]
    solvers = ", ".join(s for s, _ in entries)
    help_ = f"{p.help} [{solvers}; {_defaults(entries)}]"
    if p.kind == "bool":
        return click.option(f"{flag(name)}/--no-{name.replace('_', '-')}", name, default=None, help=help_)
    if p.kind == "choice":
        return click.option(flag(name), name, type=click.Choice(_choices(entries)), default=None, help=help_)
    number = int if p.kind == "int" else float
    if p.none_ok:
        return click.option(flag(name), name, type=_NumberOrNever(number), default=None, help=help_)
    return click.option(flag(name), name, type=number, default=None, help=help_)


class _NumberOrNever(click.ParamType):
    """A number, or "never" (the option's None)."""

    name = "number|never"

    def __init__(self, number):
        self.number = number

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() in ("never", "none"):
            return NEVER
        try:
            return self.number(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not {'an integer' if self.number is int else 'a number'} or 'never'", param, ctx)


#: what a "never" on the command line stands for until it is handed to the solver as None
NEVER = "never"


def solver_options(command):
    """Decorator adding one click option per solver option (and ``--solver``)."""
    for name, entries in reversed(list(option_table().items())):
        command = _make_option(name, entries)(command)
    return click.option("--solver", type=click.Choice(SOLVER_CHOICES), default="bcfw", show_default=True,
                        help="The solver; its options follow (each says which solvers take it).")(command)


def pop_solver_options(kwargs):
    """Remove the solver options from a command's keyword arguments; return those given."""
    given = {}
    for name in option_table():
        value = kwargs.pop(name, None)
        if value is not None:
            given[name] = None if value is NEVER else value
    return given


def build_solver(solver_name, given):
    """The solver object for ``--solver`` with the options given on the command line.

    Raises click.UsageError for options the solver does not take and
    click.BadParameter (naming the flag) for values it rejects.
    """
    cls = SOLVER_NAMES[solver_name]
    own = cls.param_table()
    foreign = [n for n in given if n not in own]
    if foreign:
        table = option_table()
        parts = [f"{flag(n)} (taken by {', '.join(s for s, _ in table[n])})" for n in foreign]
        raise click.UsageError(f"{'; '.join(parts)}: not an option of --solver {solver_name}")
    kwargs = {n: (None if v == "none" else v) for n, v in given.items()}
    try:
        return cls(**kwargs)
    except ValueError as exc:
        msg = str(exc)
        name = next((n for n in sorted(kwargs, key=len, reverse=True) if msg.startswith(n)), None)
        raise click.BadParameter(msg, param_hint=flag(name) if name else "--solver") from None


# ------------------------------------------------------------------ a subset, for path and bench
class _EngineNumber(click.ParamType):
    """An "int"/"float" engine option: a number within the Param's bound, or "never" (None)
    when the Param takes None."""

    def __init__(self, param):
        self.param = param
        self.number = int if param.kind == "int" else float
        self.name = ("integer" if self.number is int else "float") + ("|never" if param.none_ok else "")

    def convert(self, value, param, ctx):
        p = self.param
        if value is None:
            return None
        if p.none_ok and isinstance(value, str) and value.strip().lower() in ("never", "none"):
            return None
        try:
            v = value if isinstance(value, self.number) and not isinstance(value, bool) else self.number(value)
        except (TypeError, ValueError):
            kind = "an integer" if self.number is int else "a number"
            self.fail(f"{value!r} is not {kind}{' or never' if p.none_ok else ''}", param, ctx)
        if p.low is not None and (v < p.low or (p.low_open and v == p.low)):
            self.fail(f"{v} is not {'>' if p.low_open else '>='} {p.low:g}", param, ctx)
        return v


def _none_choice(ctx, param, value):
    return None if value == "none" else value


def engine_option(name, default):
    """One click option for the engine option ``name`` (``BCFW.PARAMS``) with the command's
    ``default``: the flag ``--name`` (underscores as dashes), the table's help, choices
    (None as "none") and bound; a bool whose default is False is a plain ``--name`` flag,
    otherwise ``--name/--no-name``.

    Raises
    ------
    ValueError
        ``name`` is not an engine option, or ``default`` is not one of its values.
    """
    table = SOLVER_NAMES["bcfw"].param_table()
    if name not in table:
        raise ValueError(f"name must be an option of the engine ({', '.join(table)}); got {name!r}")
    p = table[name]
    p.check(default)
    if p.kind == "bool":
        if default:
            return click.option(f"{flag(name)}/--no-{name.replace('_', '-')}", name, default=True,
                                show_default=True, help=p.help)
        return click.option(flag(name), name, is_flag=True, default=False, help=p.help)
    if p.kind == "choice":
        choices = ["none" if c is None else c for c in p.choices]
        return click.option(flag(name), name, type=click.Choice(choices), callback=_none_choice,
                            default="none" if default is None else default, show_default=True, help=p.help)
    return click.option(flag(name), name, type=_EngineNumber(p), default="never" if default is None else default,
                        show_default=True, help=p.help)


def engine_options(**defaults):
    """Decorator adding `engine_option` flags for the engine options named in ``defaults``.

    Parameters
    ----------
    **defaults
        Engine option name -> the command's default, e.g.
        ``@engine_options(step="pairwise", sampling="gap", gap_refresh=2)``; the flags appear
        in ``--help`` in this order and the command receives them under these names.
    """
    options = [engine_option(name, default) for name, default in defaults.items()]

    def decorate(command):
        for option in reversed(options):
            command = option(command)
        return command

    return decorate
