"""``structfw warmup``: compile and cache the numba kernels before the first real fit.

numba compiles a kernel on its first call and caches the machine code on disk
(``cache=True``); the first fit on a machine otherwise spends ~15 s compiling.
Warm-up runs tiny fits that reach every kernel of the common paths, so later
runs -- ``structfw demo`` included -- load instead of compiling.
"""
from __future__ import annotations

import time

import click


def warm_kernels(log=None):
    """Run tiny fits through the common kernels; returns [(what, seconds)]."""
    import numpy as np
    import scipy.sparse as sp

    from .. import models, solvers
    from ..estimator import StructuredSVM

    rng = np.random.default_rng(0)
    chain = models.ChainModel(n_states=3, n_features=4)
    Xc = [rng.normal(size=(int(rng.integers(2, 5)), 4)) for _ in range(8)]
    Yc = [rng.integers(0, 3, len(x)) for x in Xc]
    Xs = [sp.csr_matrix(np.where(x > 0.5, x, 0.0)) for x in Xc]
    multi = models.MulticlassModel(n_classes=3, n_features=4)
    Xm = rng.normal(size=(12, 4))
    Ym = rng.integers(0, 3, 12)
    jobs = [
        ("chain: BCFW, averaging, prediction", chain, solvers.BCFW(averaging="weighted"), Xc, Yc),
        ("chain: BCFW with gap sampling", chain, solvers.BCFW(sampling="gap"), Xc, Yc),
        ("chain: pairwise steps and the cache", chain, solvers.BCFW(step="pairwise", cache=True), Xc, Yc),
        ("chain: away steps", chain, solvers.BCFW(step="away"), Xc, Yc),
        ("chain: MP-BCFW", chain, solvers.MPBCFW(approx_rule="work"), Xc, Yc),
        ("chain: FW and SSG", chain, solvers.FW(), Xc, Yc),
        ("chain: SSG", chain, solvers.SSG(), Xc, Yc),
        ("chain: sparse rows", chain, solvers.BCFW(), Xs, Yc),
        ("chain: online-EG (expectation oracle)", chain, solvers.OnlineEG(), Xc, Yc),
        ("multiclass: dense rows", multi, solvers.BCFW(), Xm, Ym),
        ("multiclass: sparse rows", multi, solvers.BCFW(), sp.csr_matrix(Xm), Ym),
    ]
    times = []
    for what, model, solver, X, Y in jobs:
        t0 = time.perf_counter()
        svm = StructuredSVM(model, solver=solver, lam=0.1, max_passes=2, tol=None, check_every=1,
                            random_state=0).fit(X, Y)
        svm.predict(X)
        times.append((what, time.perf_counter() - t0))
        if log:
            log(f"  {times[-1][1]:6.1f} s  {what}")
    return times


@click.command("warmup")
def warmup():
    """Compile and cache the numba kernels now (otherwise done on first use).

    Run it once after installing (or after upgrading numba): the first fit then
    starts at once instead of compiling for ~15 s.
    """
    from .._compile import kernels_cached

    state = {True: "some already cached", False: "none cached yet", None: "cache state unknown"}[kernels_cached()]
    click.echo(f"compiling numba kernels ({state}) ...")
    t0 = time.perf_counter()
    warm_kernels(log=click.echo)
    click.echo(f"done in {time.perf_counter() - t0:.1f} s; later runs load the cached kernels")
