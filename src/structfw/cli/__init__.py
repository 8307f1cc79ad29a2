"""The ``structfw`` command.

One module per command (``demo``, ``train``, ``predict``, ``path``, ``warmup``, the ``svm`` group).
Commands are registered by name and imported only when run or asked for their own ``--help``, so
``structfw --help`` imports neither numba nor scikit-learn and compiles nothing.

The ``bench`` group's commands (the papers' reproduction) belong to a distribution of its own,
structfw-bench (``bench/`` in a checkout): the group imports its package, ``structfw_bench``, by name
and only when the group is used, and takes the commands from ``structfw_bench.COMMANDS``.  Without
it the group's ``--help`` says where to get it and its commands are usage errors saying the same;
nothing else in structfw imports it (tests/test_layers.py).
"""
from __future__ import annotations

import importlib

import click

#: name -> (module, attribute, one-line help shown by the group's --help without importing the module)
COMMANDS = {
    "demo": (".demo", "demo", "BCFW-wavg on the bundled OCR letters: progress, table and convergence plot."),
    "train": (".train", "train", "Train a structural SVM; report pass / gap / primal / test error / time."),
    "predict": (".predict", "predict", "Predict with a saved model; write labels (and --marginals) to JSON or .npz."),
    "path": (".path", "path_command", "Compute an eps-approximate regularisation path (Osokin et al. 2016, Sec. 4)."),
    "warmup": (".warmup", "warmup", "Compile and cache the numba kernels now (otherwise done on first use)."),
    "svm": (".svm", "svm_group", "Kernel SVM (FrankWolfeSVC) on svmlight files: svm train, svm predict."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use.

    The listing in ``--help`` comes from the registry's one-line helps, so it
    imports nothing; ``tests/test_cli.py`` checks each line against the command's
    own docstring so the two cannot drift apart.
    """

    def __init__(self, *args, lazy_commands=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx, name):
        if name in self.commands:
            return self.commands[name]
        if name not in self.lazy_commands:
            return None
        module, attr, _ = self.lazy_commands[name]
        cmd = getattr(importlib.import_module(module, __name__), attr)
        self.commands[name] = cmd
        return cmd

    def invoke(self, ctx):
        # a Ctrl-C outside a fit (loading data, writing outputs): exit 130 as shells expect,
        # not click's "Aborted!" with status 1; inside a fit it is taken at a safe point
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("\nstopped: interrupted", err=True)
            ctx.exit(130)

    def format_commands(self, ctx, formatter):
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy_commands and name not in self.commands:
                rows.append((name, self.lazy_commands[name][2]))
            else:
                cmd = self.get_command(ctx, name)
                if cmd is not None and not cmd.hidden:
                    rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, lazy_commands=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="structfw")
def main():
    """Structural SVMs trained with Frank-Wolfe solvers (BCFW and its variants, MP-BCFW, FW, SSG,
    cutting plane, online-EG), and kernel SVMs with FW/MFW/SWAP/PARTAN."""


#: the one place that says where the benchmarks are, for ``structfw bench --help`` and its errors
BENCH_MISSING = ("The benchmarks are a distribution of their own, structfw-bench, which is not installed: "
                 "pip install structfw-bench (in a checkout of structfw: pip install ./bench).")


def _bench_commands():
    """``structfw_bench.COMMANDS``, or None when that package is not installed.

    Imported by name here, and only here, so that structfw never depends on its reproduction: an
    error raised while importing an installed structfw_bench is its own and propagates.
    """
    try:
        package = importlib.import_module("structfw_bench")
    except ModuleNotFoundError as exc:
        if exc.name != "structfw_bench":
            raise
        return None
    return package.COMMANDS


class BenchGroup(LazyGroup):
    """The ``bench`` group: its lazy commands are structfw_bench's, read when the group is used.

    Without structfw_bench, ``--help`` says where the benchmarks are and a command name is a usage
    error saying the same (exit code 2), never an ImportError.
    """

    def _available(self):
        """Whether structfw_bench is importable; its commands join ``lazy_commands`` when it is."""
        # asked each time rather than remembered: after the first import it is a dictionary look-up
        table = _bench_commands()
        if table is None:
            return False
        for name, entry in table.items():
            self.lazy_commands.setdefault(name, entry)
        return True

    def _own(self, name):
        """Whether ``name`` is a command added to the group itself rather than one of structfw_bench's."""
        return name in self.commands and name not in self.lazy_commands

    def list_commands(self, ctx):
        if not self._available():
            return sorted(name for name in self.commands if self._own(name))
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        if not self._available():
            return self.commands[name] if self._own(name) else None
        return super().get_command(ctx, name)

    def resolve_command(self, ctx, args):
        if args and not self._own(args[0]) and not self._available():
            raise click.UsageError(BENCH_MISSING, ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx, formatter):
        if not self._available():
            with formatter.section("Commands"):
                formatter.write_text(BENCH_MISSING)
            return
        super().format_commands(ctx, formatter)


@main.group(cls=BenchGroup)
@click.pass_context
def bench(ctx):
    """Benchmarks that reproduce the papers' figures and tables (JSON + PNG)."""
    from .._progress import FitsBar, listening

    # every fit the benchmark runs reports to one bar on standard error (on a terminal), so a
    # run of minutes shows what it is doing; the bar closes with the command
    ctx.with_resource(listening(FitsBar(f"bench {ctx.invoked_subcommand}")))

