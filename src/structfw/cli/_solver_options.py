"""``train``'s solver options, generated from the solvers' ``PARAMS`` tables.

Every option of every registered solver becomes one flag (``cache_size`` ->
``--cache-size``); its help says which solvers take it.  A flag given on the
command line that the chosen ``--solver`` does not take is a usage error naming
it: nothing is silently dropped.  Defaults are the solver's own (the flag's
default is "not given").
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
