"""``structfw warmup``: compile and cache every numba kernel family before the first real fit.

numba compiles a kernel on its first call and caches the machine code on disk
(``cache=True``); a first fit otherwise spends seconds compiling (the families and
their times: docs/install.md, "The first run compiles").  Warm-up runs tiny fits that
reach every kernel family -- the engine with the chain oracle, the other models'
oracles, the kernelized BCFW and the kernel SVM -- so later runs load instead of
compiling.  The families compile in parallel worker processes (one per core, at most
``--jobs``): numba compiles on one core, and the families share no kernel
specialisation, so two workers nearly halve the wall time on two idle cores.
"""
from __future__ import annotations

import os
import time

import click


# ------------------------------------------------------------------ the families' tiny fits
def _rng():
    import numpy as np

    return np.random.default_rng(0)


def _chain_data(sparse=False):
    import numpy as np
    import scipy.sparse as sp

    rng = _rng()
    X = [rng.normal(size=(int(rng.integers(2, 5)), 4)) for _ in range(8)]
    Y = [rng.integers(0, 3, len(x)) for x in X]
    if sparse:
        X = [sp.csr_matrix(np.where(x > 0.5, x, 0.0)) for x in X]
    return X, Y


def _fit(model, solver, X, Y, passes=2):
    from ..estimator import StructuredSVM

    svm = StructuredSVM(model, solver=solver, lam=0.1, max_passes=passes, tol=None, check_every=1,
                        random_state=0).fit(X, Y)
    svm.predict(X)


def _engine_chain():
    from .. import models, solvers

    chain = models.ChainModel(n_states=3, n_features=4)
    X, Y = _chain_data()
    # a dense chain's w_i are stored factored (corner sets of labellings); dense rows are the other passes
    for solver in (solvers.BCFW(averaging="weighted"), solvers.BCFW(sampling="gap"),
                   solvers.BCFW(block_storage="dense", averaging="weighted"),
                   solvers.BCFW(step="pairwise", cache=True), solvers.BCFW(step="away"),
                   solvers.BCFW(step="pairwise", cache=True, block_storage="dense"),
                   solvers.MPBCFW(approx_rule="work"), solvers.FW(), solvers.SSG(), solvers.CuttingPlane()):
        _fit(chain, solver, X, Y)
    Xs, Ys = _chain_data(sparse=True)
    _fit(chain, solvers.BCFW(), Xs, Ys)
    # sparse block storage: the compiled passes on sparse rows (text tasks pick it at large n*d)
    _fit(chain, solvers.BCFW(block_storage="sparse", averaging="weighted"), Xs, Ys)
    _fit(chain, solvers.BCFW(block_storage="sparse", step="pairwise", cache=True), Xs, Ys)


def _online_eg():
    from .. import models, solvers

    X, Y = _chain_data()
    _fit(models.ChainModel(n_states=3, n_features=4), solvers.OnlineEG(), X, Y)


def _multiclass():
    import scipy.sparse as sp

    from .. import models, solvers

    rng = _rng()
    X = rng.normal(size=(12, 4))
    Y = rng.integers(0, 3, 12)
    model = models.MulticlassModel(n_classes=3, n_features=4)
    for rows in (X, sp.csr_matrix(X)):
        _fit(model, solvers.BCFW(), rows, Y)
        _fit(model, solvers.BCFW(step="pairwise", cache=True), rows, Y)


def _grid():
    from .. import models, solvers

    rng = _rng()
    X = [rng.normal(size=(3, 4, 2)) for _ in range(4)]
    Y = [rng.integers(0, 3, (3, 4)) for _ in range(4)]
    _fit(models.GridModel(n_states=3, n_features=2), solvers.BCFW(), X, Y)


def _graph(rng, V, F, Fe):
    import numpy as np

    edges = np.array([[v, v + 1] for v in range(V - 1)] + [[0, V - 1]], dtype=np.int64)
    return rng.normal(size=(V, F)), edges, np.abs(rng.normal(size=(len(edges), Fe)))


def _graph_cut_potts():
    from .. import models, solvers

    rng = _rng()
    X = [_graph(rng, 5, 3, 2) for _ in range(4)]
    _fit(models.GraphCutModel(n_features=3, n_edge_features=2), solvers.BCFW(), X,
         [rng.integers(0, 2, 5) for _ in X])
    _fit(models.PottsModel(n_states=3, n_features=3, n_edge_features=2), solvers.BCFW(), X,
         [rng.integers(0, 3, 5) for _ in X])


def _graph_crf():
    import numpy as np

    from .. import models, solvers

    rng = _rng()
    # trees (max-product, sum-product for online EG), then cycles: TRW-S with its certified gap,
    # QPBO (binary) and the dense and sparse joint-feature kernels
    trees = [(rng.normal(size=(5, 3)), np.array([[0, 1], [1, 2], [1, 3], [3, 4]], np.int64)) for _ in range(4)]
    cycles = [_graph(rng, 5, 3, 1)[:2] for _ in range(4)]
    labels = [rng.integers(0, 3, 5) for _ in range(4)]
    _fit(models.GraphModel(3, 3), solvers.BCFW(), trees, labels)
    _fit(models.GraphModel(3, 3), solvers.OnlineEG(), trees, labels)
    _fit(models.GraphModel(3, 3), solvers.BCFW(), cycles, labels)
    import scipy.sparse as sp

    _fit(models.GraphModel(2, 3, nonnegative_pairwise=True, pairwise="potts"), solvers.BCFW(),
         [(sp.csr_matrix(x), e) for x, e in cycles], [y % 2 for y in labels])


def _matching():
    from .. import datasets, models, solvers
    from ..datasets.alignment import N_FEATURES

    X, Y = datasets.make_alignment(8, random_state=0)
    _fit(models.MatchingModel(N_FEATURES), solvers.BCFW(), X, Y)


def _kernel_bcfw():
    from .. import models, solvers

    X, Y = _chain_data()
    chain = models.ChainModel(n_states=3, n_features=4)
    for solver in (solvers.KernelBCFW(), solvers.KernelBCFW(step="pairwise", averaging="weighted")):
        _fit(chain, solver, X, Y)
    rng = _rng()
    _fit(models.MulticlassModel(n_classes=3, n_features=4), solvers.KernelBCFW(), list(rng.normal(size=(12, 4))),
         [int(v) for v in rng.integers(0, 3, 12)])


def _kernel_svm():
    import numpy as np

    from ..svm import FrankWolfeSVC

    rng = _rng()
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    FrankWolfeSVC(max_iter=50).fit(X, y)
    # large inputs (n_samples * n_features >= 1e6) use float32 kernel columns: another specialisation
    FrankWolfeSVC(max_iter=50, kernel_dtype="float32").fit(X, y)
    # the randomised search's sample-only gradient (the paper's) has kernels of its own
    FrankWolfeSVC(max_iter=50, sample_size=10, gradient="sample").fit(X, y)


#: family -> (what it covers, its tiny fits); listed slowest first, so the workers finish together
FAMILIES = {
    "engine + chain oracle": ("BCFW (all steps, sampling, cache, averaging, factored and row storage), MP-BCFW, "
                              "FW, SSG, cutting plane, dense and sparse chains", _engine_chain),
    "kernel SVM": ("FrankWolfeSVC, float64 and float32 kernel columns", _kernel_svm),
    "multiclass oracle": ("dense and sparse rows", _multiclass),
    "kernel BCFW": ("chains and multiclass, the factored pass", _kernel_bcfw),
    "graph cut + Potts oracles": ("min cut, alpha expansion", _graph_cut_potts),
    "grid oracle": ("loopy belief propagation", _grid),
    "graph CRFs": ("tree max-product and marginals, TRW-S, QPBO", _graph_crf),
    "matching oracle": ("bipartite matching", _matching),
    "chain marginals": ("online-EG's expectation oracle", _online_eg),
}


def warm_family(name):
    """Compile one family (in this process); returns (name, seconds, error message or None)."""
    import warnings

    os.environ["STRUCTFW_COMPILE_NOTICE"] = "0"  # warm-up says what it compiles itself
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tiny fits do not converge, and need not
            FAMILIES[name][1]()
    except Exception as exc:  # report and go on: one family must not stop the others
        return name, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"
    return name, time.perf_counter() - t0, None


def warm_kernels(log=None, jobs=None):
    """Compile every family, ``jobs`` worker processes at a time (default: one per core, at most 2);
    returns [(family, seconds, error or None)] in completion order."""
    names = list(FAMILIES)
    jobs = min(len(names), jobs or min(os.cpu_count() or 1, 2))
    results = []

    def report(res):
        results.append(res)
        if log:
            name, secs, err = res
            log(f"  {secs:6.1f} s  {name}" + (f": FAILED ({err})" if err else f" ({FAMILIES[name][0]})"))

    if jobs <= 1:
        for name in names:
            report(warm_family(name))
        return results
    import multiprocessing

    # spawn: a fresh interpreter per worker, never a fork of a process that holds numba's or BLAS's threads
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for res in pool.imap_unordered(warm_family, names):
            report(res)
    return results


@click.command("warmup")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Worker processes compiling at once [default: one per core, at most 2].")
def warmup(jobs):
    """Compile and cache the numba kernels now (otherwise done on first use).

    Run it once after installing (or after upgrading numba): every kernel family -- the
    engine and each model's oracle, kernel BCFW, the kernel SVM -- is compiled, and a
    first fit then starts at once.  Prints each family's compile time and the total.
    """
    from .._compile import cached_families

    cached = cached_families()
    warm = sum(v is True for v in cached.values())
    click.echo(f"compiling numba kernels: {len(FAMILIES)} families ({warm} of {len(cached)} already cached) ...")
    t0 = time.perf_counter()
    results = warm_kernels(log=click.echo, jobs=jobs)
    failed = [name for name, _, err in results if err]
    click.echo(f"done in {time.perf_counter() - t0:.1f} s (compile time of the families: "
               f"{sum(s for _, s, _ in results):.1f} s); later runs load the cached kernels")
    if failed:
        raise click.ClickException(f"could not compile: {', '.join(failed)}")
