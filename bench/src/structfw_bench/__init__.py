"""structfw-bench: the papers' reproduction for structfw, a distribution of its own.

The ``structfw bench ...`` commands (JSON + PNG) that reproduce the papers' figures and tables, and
the helpers they share.  structfw's command line imports this package by name, only when its
``bench`` group is used, and takes the commands from `COMMANDS`; nothing else in structfw imports it.
Importing the package imports nothing else: each command's module is imported when it runs or is
asked for its own ``--help``.
"""
from __future__ import annotations

__all__ = ["COMMANDS"]

#: command name -> (module, click command in it, one-line help shown by ``structfw bench --help``
#: without importing the module; tests check it against the command's own docstring)
COMMANDS = {
    "fig1": ("structfw_bench.fig1", "bench_fig1",
             "BCFW paper Figure 1: primal suboptimality against passes."),
    "gaps": ("structfw_bench.gaps", "bench_gaps",
             "Osokin et al. 2016 Figure 3: gap sampling, pairwise steps, cache."),
    "speed": ("structfw_bench.speed", "bench_speed",
              "Seconds per engine pass for the 8 Figure-3 variants (the targets)."),
    "path": ("structfw_bench.path", "bench_path",
             "Regularisation path against grid search (Osokin et al. Figure 4)."),
    "mpbcfw": ("structfw_bench.mpbcfw", "bench_mpbcfw",
               "MP-BCFW paper Figures 4-6 on digits, OCR, graph cut, Potts."),
    "svm": ("structfw_bench.svm", "bench_svm",
            "Kernel SVM Tables 2-4: FW/MFW/SWAP/PARTAN against libsvm."),
    "parallel": ("structfw_bench.parallel", "bench_parallel",
                 "Minibatch-parallel BCFW: time and oracle calls to a gap on threads, processes, Ray."),
    "graph-inference": ("structfw_bench.graph_inference", "bench_graph_inference",
                        "Graph inference back-ends (TRW-S, LP, QPBO, tree): time per call and certified gap."),
    "graph-task": ("structfw_bench.graph_task", "bench_graph_task",
                   "GraphModel on superpixel graphs: time to a certified gap, accuracy with and without edges."),
    "pose-oracle": ("structfw_bench.pose", "bench_pose_oracle",
                    "Pose oracle: distance-transform messages against brute force; optional fit (PCP)."),
    "maxflow": ("structfw_bench.maxflow", "bench_maxflow",
                "Max-flow back-ends on grid and superpixel cuts: ms per cut, energy, GIL."),
    "staleness": ("structfw_bench.staleness", "bench_staleness",
                  "Osokin et al. 2016 Figure 1: staleness of gap estimates in gap sampling (OCR)."),
    "cache-regimes": ("structfw_bench.cache_regimes", "bench_cache_regimes",
                      "Osokin et al. 2016 Figure 2: regimes of the gap-based cache over a grid of F x nu (OCR)."),
    "toy-gap-sampling": ("structfw_bench.toy_gap_sampling", "bench_toy_gap_sampling",
                         "Osokin et al. 2016 App. C: a toy problem where gap sampling is n times faster than uniform."),
    "scaling": ("structfw_bench.scaling", "bench_scaling",
                "Seconds per pass and peak memory against n, d and sequence length, with fitted slopes."),
    "block-state": ("structfw_bench.block_state", "bench_block_state",
                    "Block state storages: the engine's scaled rows against a factored chain state, per FW step."),
    "kernel": ("structfw_bench.kernel", "bench_kernel",
               "Kernel BCFW on OCR subsets: seconds per pass and peak memory by block storage."),
    "sharded": ("structfw_bench.sharded", "bench_sharded",
                "Sharded BCFW on OCR: time and passes to a gap on threads against the serial options."),
    "tagger": ("structfw_bench.tagger", "bench_tagger",
               "structfw's tagger against sklearn-crfsuite: accuracy, fit time and memory, back to back."),
    "rates": ("structfw_bench.rates", "bench_rates",
              "Convergence rates of the BCFW paper's theorems: gap x k against k beside the bounds."),
    "learned": ("structfw_bench.learned", "bench_learned",
                "Learned features on OCR: a CNN under the chain hinge against linear, cross-entropy and CRF."),
}
