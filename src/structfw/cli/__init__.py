"""The ``structfw`` command.

One module per command (``demo``, ``train``, ``predict``, ``path``, ``warmup``, the ``svm`` group; the benchmarks live in
`structfw.bench`).  Commands are registered by name and imported only when run or
asked for their own ``--help``, so ``structfw --help`` imports neither numba nor
scikit-learn and compiles nothing.
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

BENCH_COMMANDS = {
    "fig1": ("..bench.fig1", "bench_fig1", "BCFW paper Figure 1: primal suboptimality against passes."),
    "gaps": ("..bench.gaps", "bench_gaps", "Osokin et al. 2016 Figure 3: gap sampling, pairwise steps, cache."),
    "speed": ("..bench.speed", "bench_speed", "Seconds per engine pass for the 8 Figure-3 variants (the targets)."),
    "path": ("..bench.path", "bench_path", "Regularisation path against grid search (Osokin et al. Figure 4)."),
    "mpbcfw": ("..bench.mpbcfw", "bench_mpbcfw", "MP-BCFW paper Figures 4-6 on digits, OCR, graph cut, Potts."),
    "svm": ("..bench.svm", "bench_svm", "Kernel SVM Tables 2-4: FW/MFW/SWAP/PARTAN against libsvm."),
    "parallel": ("..bench.parallel", "bench_parallel",
                 "Minibatch-parallel BCFW: time and oracle calls to a gap on threads, processes, Ray."),
    "graph-inference": ("..bench.graph_inference", "bench_graph_inference",
                        "Graph inference back-ends (TRW-S, LP, QPBO, tree): time per call and certified gap."),
    "graph-task": ("..bench.graph_task", "bench_graph_task",
                   "GraphModel on superpixel graphs: time to a certified gap, accuracy with and without edges."),
    "pose-oracle": ("..bench.pose", "bench_pose_oracle",
                    "Pose oracle: distance-transform messages against brute force; optional fit (PCP)."),
    "maxflow": ("..bench.maxflow", "bench_maxflow", "Max-flow back-ends on grid and superpixel cuts: ms per cut, energy, GIL."),
    "staleness": ("..bench.staleness", "bench_staleness", "Osokin et al. 2016 Figure 1: staleness of gap estimates in gap sampling (OCR)."),
    "cache-regimes": ("..bench.cache_regimes", "bench_cache_regimes", "Osokin et al. 2016 Figure 2: regimes of the gap-based cache over a grid of F x nu (OCR)."),
    "toy-gap-sampling": ("..bench.toy_gap_sampling", "bench_toy_gap_sampling", "Osokin et al. 2016 App. C: a toy problem where gap sampling is n times faster than uniform."),
    "scaling": ("..bench.scaling", "bench_scaling",
                "Seconds per pass and peak memory against n, d and sequence length, with fitted slopes."),
    "block-state": ("..bench.block_state", "bench_block_state",
                    "Block state storages: the engine's scaled rows against a factored chain state, per FW step."),
    "kernel": ("..bench.kernel", "bench_kernel",
               "Kernel BCFW on OCR subsets: seconds per pass and peak memory by block storage."),
    "sharded": ("..bench.sharded", "bench_sharded",
                "Sharded BCFW on OCR: time and passes to a gap on threads against the serial options."),
    "tagger": ("..bench.tagger", "bench_tagger",
               "structfw's tagger against sklearn-crfsuite: accuracy, fit time and memory, back to back."),
    "rates": ("..bench.rates", "bench_rates",
              "Convergence rates of the BCFW paper's theorems: gap x k against k beside the bounds."),
    "learned": ("..bench.learned", "bench_learned",
                "Learned features on OCR: a CNN under the chain hinge against linear, cross-entropy and CRF."),
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


@main.group(cls=LazyGroup, lazy_commands=BENCH_COMMANDS)
@click.pass_context
def bench(ctx):
    """Benchmarks that reproduce the papers' figures and tables (JSON + PNG)."""
    from .._progress import FitsBar, listening

    # every fit the benchmark runs reports to one bar on standard error (on a terminal), so a
    # run of minutes shows what it is doing; the bar closes with the command
    ctx.with_resource(listening(FitsBar(f"bench {ctx.invoked_subcommand}")))
