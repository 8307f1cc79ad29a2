"""``structfw bench block-state``: the engine's block state against a factored one, per FW step.

The dual's block parts w_i (Alg. 1 of Osokin et al. 2016) are stored today as *scaled rows*,
w_i = c_i v_i (solvers/rows.py: dense (n, d) rows while n d 8 bytes <= 2 GiB, else sparse rows in
one pool): a FW step reads the row for ⟨w_i, w⟩ and ||w_i||^2, rescales c_i and writes only the
corner's entries.  The alternative the engine notes propose for chains is a *factored* state:
per position t of sequence i a label-weight vector a_t in R^K and a K x K transition part T_i,
with w_i's unary part sum_t x_t (x) a_t.  Then ⟨w_i, w⟩ = sum_t ⟨a_t, U_t⟩ + ⟨T_i, W_tr⟩ comes from
the unary scores U_t = (⟨x_t, w_k⟩)_k the oracle computes anyway, ||d||^2 from the sequence's
Gram matrix G_i (L_i x L_i, kept), and memory drops from n d to sum_i L_i K + n K^2 (+ sum_i L_i^2).
But w itself must stay explicit for the next oracle call, and w += gamma (w_s - w_i) then writes
every (feature, label) pair of the sequence with a non-zero a_t[k]: L_i x nnz(x_t) x K entries
once the a_t have filled in, where the scaled row writes the corner's 2 L_i nnz(x_t) entries and
reads (dense rows) or reads and writes (sparse rows) the row once.

This benchmark replays one sequence of FW steps on both states and times them: the blocks are
drawn uniformly, each block's corner is the loss-augmented labelling at w* (the iterate after
``--warm-passes`` passes of BCFW: the corners the oracle gives near the optimum), and both
replays start from alpha = e_{y_i} (w = 0) and take the same line-search steps.  Each replay pays
for the oracle's unary scores at the current w (both need them: the oracle computes them for
every step) and for what its state needs beyond them: the scaled rows the merged corner psi
(the engine's compiled corner) and the block step (`solvers._kernels.block_step`); the factored
state the direction, the Gram terms and the expansion into w.  The final w of the two replays is
compared (relative difference; the same iterate in exact arithmetic): a check that the factored
step is the same step.  Writes block_state.json and block_state.png.
"""
from __future__ import annotations

import time
from pathlib import Path

import click
import numpy as np
import scipy.sparse as sp
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)
from structfw._linalg import sparse_dot_dense, sparse_dot_sparse
from structfw.oracles.chain import chain_phi_diff_csr, chain_unary_csr, hamming_loss
from structfw.oracles.compiled import chain_psi_entries
from structfw.solvers._factored import (_clear_transitions, _label_direction, _move_transitions,
                                        _scatter_transitions, _transition_terms, _unary_terms)
from structfw.solvers._fastpass import fw_block_step
from structfw.solvers._kernels import NO_CORNER, block_step, step_along
from structfw.solvers.rows import SparseRows, row_room

# before the first @njit: this package's kernels carry structfw's stamp and this package's
from . import _numba_cache as _bench_numba_cache  # noqa: F401
from ._common import environment, pyplot, write_json

DATASETS = ("ocr", "conll-scale")


# ---------------------------------------------------------------- the sequences, packed
def pack_sequences(X, Y):
    """(indptr, indices, data, starts, labels) of the sequences as one CSR of positions."""
    rows = [sp.csr_matrix(x, dtype=np.float64) for x in X]
    M = sp.vstack(rows, format="csr")
    M.sum_duplicates()
    starts = np.zeros(len(X) + 1, np.int64)
    np.cumsum([x.shape[0] for x in X], out=starts[1:])
    return (M.indptr.astype(np.int64), M.indices.astype(np.int64), M.data.astype(np.float64), starts,
            np.concatenate([np.asarray(y, np.int64) for y in Y]))


@njit(cache=True)
def gram_blocks(indptr, indices, data, starts):
    """Each sequence's Gram matrix G_i[t, s] = ⟨x_t, x_s⟩, flat, with offsets (sum_i L_i^2)."""
    n = starts.shape[0] - 1
    gofs = np.zeros(n + 1, np.int64)
    for i in range(n):
        L = starts[i + 1] - starts[i]
        gofs[i + 1] = gofs[i] + L * L
    G = np.zeros(gofs[n])
    for i in range(n):
        a, L = starts[i], starts[i + 1] - starts[i]
        for t in range(L):
            p0, p1 = indptr[a + t], indptr[a + t + 1]
            for s in range(L):
                q0, q1 = indptr[a + s], indptr[a + s + 1]
                G[gofs[i] + t * L + s] = sparse_dot_sparse(indices[p0:p1], data[p0:p1], indices[q0:q1], data[q0:q1])
    return G, gofs


@njit(cache=True, inline="always")
def _block_x(pos, i):
    """Block i's CSR (indptr from 0, indices, data) and true labels."""
    indptr, indices, data, starts, labels = pos
    a, b = starts[i], starts[i + 1]
    return (indptr[a:b + 1] - indptr[a], indices[indptr[a]:indptr[b]], data[indptr[a]:indptr[b]],
            labels[a:b])


# ---------------------------------------------------------------- the two replays
@njit(cache=True)
def replay_scores(pos, plan, w, S, F):
    """The oracle's unary scores alone, step by step (w does not move): what both replays
    pay in common, to be subtracted from their times."""
    blocks = plan[0]
    total = 0.0
    for k in range(blocks.shape[0]):
        ip, ix, vx, yt = _block_x(pos, blocks[k])
        total += chain_unary_csr(ip, ix, vx, w, S, F, yt, np.bool_(False))[0, 0]
    return total


@njit(cache=True)
def replay_dense_rows(pos, plan, rows, scales, w, li, lam, S, F):
    """The engine's plain compiled pass on dense scaled rows (`_fastpass.plain_fw_chunk`):
    unary scores, the corner as unmerged entries, `_fastpass.fw_block_step`.  Returns l."""
    blocks, cofs, cys = plan
    starts = pos[3]
    n = li.shape[0]
    inv_ln = 1.0 / (lam * n)
    ell = 0.0
    scratch = np.zeros(w.shape[0])
    no_avg = np.empty(0)
    for k in range(blocks.shape[0]):
        i = blocks[k]
        ip, ix, vx, yt = _block_x(pos, i)
        ys = cys[cofs[k]:cofs[k + 1]]
        chain_unary_csr(ip, ix, vx, w, S, F, yt, np.bool_(False))  # the oracle's scores at w
        idx, val = chain_psi_entries(pos[0], pos[1], pos[2], starts[i], yt, ys, S, F)
        dl = hamming_loss(yt, ys) / n - li[i]
        s1 = (idx, val, inv_ln, sparse_dot_dense(idx, val, w))
        gamma, _, scales[i] = fw_block_step(w, rows[i], scales[i], s1, dl, (lam, -1.0), (no_avg, 0.0), scratch)
        li[i] += gamma * dl
        ell += gamma * dl
    return ell


@njit(cache=True)
def replay_sparse_rows(pos, plan, B, w, li, lam, S, F):
    """The engine's compiled general pass on sparse scaled rows (`_fastpass.general_chunk`,
    FW steps): unary scores, the merged corner (`compiled.chain_csr_corner`), `block_step`.
    Returns l."""
    blocks, cofs, cys = plan
    n = li.shape[0]
    inv_ln = 1.0 / (lam * n)
    ell = 0.0
    scratch = np.empty(0)  # no second corner: <s1, s2> is never formed
    for k in range(blocks.shape[0]):
        i = blocks[k]
        ip, ix, vx, yt = _block_x(pos, i)
        ys = cys[cofs[k]:cofs[k + 1]]
        chain_unary_csr(ip, ix, vx, w, S, F, yt, np.bool_(False))  # the oracle's scores at w
        idx, val = chain_phi_diff_csr(ip, ix, vx, yt, ys, S, F)
        if row_room(B, i, idx.shape[0]) != 0:  # _row_layout's room is an upper bound: never here
            raise ValueError("block-state replay: a sparse row has no room")
        dl = hamming_loss(yt, ys) / n - li[i]
        s1 = (idx, val, inv_ln, sparse_dot_dense(idx, val, w))
        gamma, _ = block_step(w, B, i, -1.0, s1, NO_CORNER, dl, (lam, 1.0, -1.0), (scratch, 0.0), scratch)
        li[i] += gamma * dl
        ell += gamma * dl
    return ell


@njit(cache=True)
def _factored_move(w, ip, ix, vx, D, gamma, S, F):
    """w += gamma d's unary part: every (feature, label) pair of the sequence with D[t, k] != 0
    (the transitions: `structfw.solvers._factored._move_transitions`)."""
    for t in range(D.shape[0]):
        for p in range(ip[t], ip[t + 1]):
            f, x = ix[p], vx[p]
            for k in range(S):
                if D[t, k] != 0.0:
                    w[k * F + f] += gamma * D[t, k] * x


@njit(cache=True)
def replay_factored(pos, plan, fstate, w, li, lam, S, F):
    """The same FW steps on the factored state ``fstate`` = (A, T, G, gofs): A (positions, K)
    the label weights, T (n, K, K) the transition parts, G/gofs the Gram matrices; the direction,
    its terms and the transitions' move are the engine's (solvers/_factored.py).  Returns l."""
    blocks, cofs, cys = plan
    A, T, G, gofs = fstate
    starts = pos[3]
    n = li.shape[0]
    inv_ln = 1.0 / (lam * n)
    w_tr = w[S * F:]
    no_average = np.zeros(0)
    longest = 0
    for i in range(n):
        longest = max(longest, starts[i + 1] - starts[i])
    D = np.empty((longest, S))
    live = np.empty(longest, np.bool_)
    E = np.zeros(S * S)
    none = np.zeros(0, np.int64)  # the FW step's direction has one corner
    ell = 0.0
    for k in range(blocks.shape[0]):
        i = blocks[k]
        ip, ix, vx, yt = _block_x(pos, i)
        ys = cys[cofs[k]:cofs[k + 1]]
        U = chain_unary_csr(ip, ix, vx, w, S, F, yt, np.bool_(False))  # the oracle's scores at w
        a, b = starts[i], starts[i + 1]
        Di = D[:b - a]
        _label_direction(A[a:b], yt, -1.0, ys, inv_ln, none, 0.0, Di, live)
        dl = hamming_loss(yt, ys) / n - li[i]
        wd, nrm = _unary_terms(Di, U, G[gofs[i]:gofs[i + 1]], live)
        T_i = T[i].reshape(S * S)
        _scatter_transitions(E, yt, ys, inv_ln, none, 0.0, S)
        wd_tr, nrm_tr = _transition_terms(T_i, -1.0, E, w_tr)
        gamma = step_along(lam * (wd + wd_tr) - dl, nrm + nrm_tr, lam, 1.0, -1.0)
        if gamma > 0.0:
            _factored_move(w, ip, ix, vx, Di, gamma, S, F)
            A[a:b] += gamma * Di
            _move_transitions(w_tr, no_average, 0.0, T_i, -1.0, E, gamma)
        _clear_transitions(E, yt, ys, none, S)
        li[i] += gamma * dl
        ell += gamma * dl
    return ell


# ---------------------------------------------------------------- the run
def _load(dataset, subsample, seed):
    if dataset == "ocr":
        from ._common import load_ocr_data

        X, Y = load_ocr_data(subsample, seed)[:2]
    else:
        from structfw.datasets import load_conll_scale

        X, Y = load_conll_scale()[:2]
        if subsample is not None:
            keep = np.random.default_rng(seed).permutation(len(X))[:subsample]
            X, Y = [X[i] for i in keep], [Y[i] for i in keep]
    S = int(max(int(np.max(y)) for y in Y)) + 1
    return X, Y, S, X[0].shape[1]


def make_plan(X, Y, S, F, lam, steps, warm_passes, seed):
    """(blocks, corner offsets, corner labels): blocks drawn uniformly, each with the
    loss-augmented labelling at w* (after ``warm_passes`` passes of BCFW)."""
    from structfw import StructuredSVM
    from structfw.models import ChainModel
    from structfw.solvers import BCFW

    model = ChainModel(S, F)
    est = StructuredSVM(model, solver=BCFW(), lam=lam, max_passes=warm_passes, tol=None,
                        check_every=10 ** 6, random_state=seed).fit(X, Y)
    w_star = est.coef_
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, len(X), steps).astype(np.int64)
    Xc = model.check_X(X)
    corners = [np.asarray(model.loss_augmented_decode(Xc[i], np.asarray(Y[i], np.int64), w_star), np.int64)
               for i in blocks]
    cofs = np.zeros(steps + 1, np.int64)
    np.cumsum([len(c) for c in corners], out=cofs[1:])
    return blocks, cofs, np.concatenate(corners)


def _row_layout(n, d, pos, plan, dense):
    """Fresh scaled rows (w_i = 0), their memory touched (so that no replay pays the first-touch
    page faults): dense (n, d), or sparse rows with room for every entry the replay can write
    (the engine grows rows between chunks; here before the replay): per position, its features
    under each label the truth and the block's corners give it, and the transitions."""
    scales = np.ones(n)
    if dense:
        rows = np.zeros((n, d))
        rows.fill(0.0)
        return (rows, scales)
    indptr, starts, labels = pos[0], pos[3], pos[4]
    blocks, cofs, cys = plan
    seen = {}
    for k, i in enumerate(blocks.tolist()):
        seen.setdefault(i, []).append(cys[cofs[k]:cofs[k + 1]])
    R = SparseRows(n, d, pool=n)
    for i, corners in seen.items():
        a, b = int(starts[i]), int(starts[i + 1])
        ys = np.vstack([labels[a:b]] + corners)
        per_pos = [len(set(ys[:, t].tolist())) for t in range(b - a)]
        nnz = np.diff(indptr[a:b + 1])
        R.make_room(i, int(np.dot(per_pos, nnz)) + 2 * (b - a) * len(corners))
    R.idx.fill(0)
    R.val.fill(0.0)
    return R.arrays(scales)


def _state_bytes(B, dense):
    """Bytes the rows hold: the (n, d) array, or the sparse rows' live entries (index and value)
    and their per-row start, size and capacity."""
    if dense:
        return int(B[0].nbytes)
    return int(B[2].sum()) * 16 + 3 * 8 * B[2].shape[0]


def time_replays(X, Y, S, F, lam, plan, repeats, dense, log=print):
    """Seconds per step of both replays (median of ``repeats``), state bytes, and the relative
    difference of their final w."""
    pos = pack_sequences(X, Y)
    n, d = len(X), S * F + S * S
    P = int(pos[3][-1])
    G, gofs = gram_blocks(pos[0], pos[1], pos[2], pos[3])
    m = plan[0].shape[0]
    out = {"rows": [], "factored": [], "scores": []}
    # compile on a few steps first (numba's cache makes later runs load them)
    for kind in ("rows", "factored", "scores"):
        short = (plan[0][:3], plan[1][:4], plan[2][:plan[1][3]])
        _run(kind, pos, short, n, d, P, S, F, lam, G, gofs, dense)
    for r in range(repeats):
        for kind in ("rows", "factored", "scores"):
            secs, w, nbytes = _run(kind, pos, plan, n, d, P, S, F, lam, G, gofs, dense)
            out[kind].append(secs / m)
            out[kind + "_bytes"] = nbytes
            out[kind + "_w"] = w
        log(f"  repeat {r + 1}: rows {1e6 * out['rows'][-1]:.1f} us/step, factored "
            f"{1e6 * out['factored'][-1]:.1f} us/step, the scores alone {1e6 * out['scores'][-1]:.1f}")
    w_r, w_f = out.pop("rows_w"), out.pop("factored_w")
    out.pop("scores_w"), out.pop("scores_bytes")
    out["w_rel_diff"] = float(np.linalg.norm(w_r - w_f) / max(np.linalg.norm(w_r), 1e-300))
    out["gram_bytes"] = int(G.nbytes)
    return out


def _run(kind, pos, plan, n, d, P, S, F, lam, G, gofs, dense):
    w, li = np.zeros(d), np.zeros(n)
    if kind == "scores":
        t = time.perf_counter()
        replay_scores(pos, plan, w, S, F)
        return time.perf_counter() - t, w, 0
    if kind == "rows":
        B = _row_layout(n, d, pos, plan, dense)
        t = time.perf_counter()
        if dense:
            replay_dense_rows(pos, plan, B[0], B[1], w, li, lam, S, F)
        else:
            replay_sparse_rows(pos, plan, B, w, li, lam, S, F)
        return time.perf_counter() - t, w, _state_bytes(B, dense)
    A, T = np.zeros((P, S)), np.zeros((n, S, S))
    A.fill(0.0)
    T.fill(0.0)
    t = time.perf_counter()
    replay_factored(pos, plan, (A, T, G, gofs), w, li, lam, S, F)
    return time.perf_counter() - t, w, A.nbytes + T.nbytes + G.nbytes + gofs.nbytes


def run_block_state(datasets=DATASETS, steps_passes=2.0, warm_passes=3, repeats=3, out="bench_out/block_state",
                    subsample=None, seed=0, log=print):
    """Both replays on each dataset; writes block_state.json / .png and returns the document."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "block-state", "environment": environment(), "steps_passes": steps_passes,
           "warm_passes": warm_passes, "repeats": repeats, "seed": seed, "datasets": {}}
    for name in datasets:
        X, Y, S, F = _load(name, subsample, seed)
        n, d = len(X), S * F + S * S
        lam = 1.0 / n
        dense = n * d * 8 <= 2 * 1024 ** 3  # the engine's "auto" rule
        steps = max(1, int(round(steps_passes * n)))
        log(f"[block-state] {name}: n = {n}, d = {d}, {'dense' if dense else 'sparse'} rows, {steps} steps")
        plan = make_plan(X, Y, S, F, lam, steps, warm_passes, seed)
        res = time_replays(X, Y, S, F, lam, plan, repeats, dense, log)
        r, f = float(np.median(res["rows"])), float(np.median(res["factored"]))
        sc = float(np.median(res["scores"]))
        doc["datasets"][name] = dict(n=n, d=d, S=S, F=F, lam=lam, steps=steps,
                                     rows_storage="dense" if dense else "sparse",
                                     rows_us_per_step=1e6 * r, factored_us_per_step=1e6 * f,
                                     scores_us_per_step=1e6 * sc, factored_over_rows=f / r,
                                     state_work_ratio=(f - sc) / (r - sc) if min(r, f) > sc else None,
                                     rows_bytes=int(res["rows_bytes"]),
                                     factored_bytes=int(res["factored_bytes"]), gram_bytes=res["gram_bytes"],
                                     w_rel_diff=res["w_rel_diff"], repeats_rows=res["rows"],
                                     repeats_factored=res["factored"], repeats_scores=res["scores"])
        log(f"  rows {1e6 * r:.1f} us/step ({res['rows_bytes'] / 2 ** 20:.0f} MiB), factored {1e6 * f:.1f} "
            f"us/step ({res['factored_bytes'] / 2 ** 20:.0f} MiB): {f / r:.2f}x; |w_r - w_f| / |w_r| = "
            f"{res['w_rel_diff']:.1e}")
    write_json(out / "block_state.json", doc)
    _plot(doc, out / "block_state.png")
    return doc


def _plot(doc, path):
    plt = pyplot()
    names = list(doc["datasets"])
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    x = np.arange(len(names))
    for ax, key, label in ((axes[0], "us_per_step", "microseconds per FW step"),
                           (axes[1], "bytes", "block state (MiB)")):
        scale = 1.0 if key == "us_per_step" else 2.0 ** -20
        rows = [doc["datasets"][k]["rows_" + key] * scale for k in names]
        fac = [doc["datasets"][k]["factored_" + key] * scale for k in names]
        ax.bar(x - 0.2, rows, 0.4, label="scaled rows (engine)")
        ax.bar(x + 0.2, fac, 0.4, label="factored (L_i x K + K^2)")
        ax.set_xticks(x, names)
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@click.command("block-state")
@click.option("--dataset", "datasets", type=click.Choice(DATASETS), multiple=True,
              help="Tasks to replay (repeat the option; default: both).")
@click.option("--steps", "steps_passes", default=2.0, show_default=True, type=click.FloatRange(0, min_open=True),
              help="Replayed FW steps, in passes (steps / n).")
@click.option("--warm-passes", default=3, show_default=True, type=click.IntRange(1),
              help="Passes of BCFW to the w* whose corners are replayed.")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1))
@click.option("--subsample", default=None, type=click.IntRange(2), help="Use this many random sequences.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0))
@click.option("--out", default="bench_out/block_state", show_default=True, type=click.Path(file_okay=False))
def bench_block_state(datasets, steps_passes, warm_passes, repeats, subsample, seed, out):
    """Block state storages: the engine's scaled rows against a factored chain state, per FW step."""
    run_block_state(datasets or DATASETS, steps_passes, warm_passes, repeats, out, subsample, seed, log=click.echo)
