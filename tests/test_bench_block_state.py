"""`structfw bench block-state`: the factored chain state takes the engine's FW steps exactly."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from structfw_bench.block_state import (gram_blocks, make_plan, pack_sequences, replay_dense_rows,
                                        replay_factored, replay_sparse_rows, _row_layout, time_replays)
from structfw.cli import main


def _chains(n=12, S=4, F=7, seed=0):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n):
        L = int(rng.integers(1, 6))  # a one-position sequence has no transition
        X.append(rng.normal(size=(L, F)) * (rng.random((L, F)) < 0.6))
        Y.append(rng.integers(0, S, L))
    return X, Y, S, F


def test_gram_blocks_are_the_sequences_gram_matrices():
    X, Y, S, F = _chains()
    pos = pack_sequences(X, Y)
    G, gofs = gram_blocks(*pos[:4])
    for i, x in enumerate(X):
        L = x.shape[0]
        np.testing.assert_allclose(G[gofs[i]:gofs[i + 1]].reshape(L, L), x @ x.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dense", [True, False])
def test_the_factored_state_takes_the_same_steps_as_the_rows(dense):
    X, Y, S, F = _chains(seed=1)
    n, d, lam = len(X), S * F + S * S, 0.1
    plan = make_plan(X, Y, S, F, lam, steps=3 * n, warm_passes=1, seed=2)
    pos = pack_sequences(X, Y)
    w_r, li_r = np.zeros(d), np.zeros(n)
    B = _row_layout(n, d, pos, plan, dense)
    if dense:
        ell_r = replay_dense_rows(pos, plan, B[0], B[1], w_r, li_r, lam, S, F)
    else:
        ell_r = replay_sparse_rows(pos, plan, B, w_r, li_r, lam, S, F)
    G, gofs = gram_blocks(*pos[:4])
    w_f, li_f = np.zeros(d), np.zeros(n)
    A, T = np.zeros((int(pos[3][-1]), S)), np.zeros((n, S, S))
    ell_f = replay_factored(pos, plan, (A, T, G, gofs), w_f, li_f, lam, S, F)
    assert np.linalg.norm(w_r) > 0
    np.testing.assert_allclose(w_f, w_r, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(li_f, li_r, rtol=1e-9, atol=1e-12)
    assert ell_f == pytest.approx(ell_r, rel=1e-9)
    # the factored state is w_i itself: sum_i of its expansion is w
    w_sum = np.zeros(d)
    for i, x in enumerate(X):
        a = A[pos[3][i]:pos[3][i + 1]]
        w_sum[:S * F] += (a.T @ x).ravel()
        w_sum[S * F:] += T[i].ravel()
    np.testing.assert_allclose(w_sum, w_f, rtol=1e-9, atol=1e-12)


def test_time_replays_reports_both_and_their_agreement():
    X, Y, S, F = _chains(seed=3)
    plan = make_plan(X, Y, S, F, 0.1, steps=2 * len(X), warm_passes=1, seed=0)
    res = time_replays(X, Y, S, F, 0.1, plan, repeats=1, dense=True, log=lambda *a: None)
    assert len(res["rows"]) == len(res["factored"]) == len(res["scores"]) == 1
    assert res["w_rel_diff"] < 1e-9 and res["factored_bytes"] > 0 and res["rows_bytes"] > 0


def test_command_writes_json_and_png(tmp_path):
    res = CliRunner().invoke(main, ["bench", "block-state", "--dataset", "ocr", "--subsample", "40", "--steps", "1",
                                    "--warm-passes", "1", "--repeats", "1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "block_state.json").read_text())
    r = doc["datasets"]["ocr"]
    assert r["n"] == 40 and r["rows_storage"] == "dense" and r["w_rel_diff"] < 1e-9
    assert (tmp_path / "block_state.png").stat().st_size > 0
    bad = CliRunner().invoke(main, ["bench", "block-state", "--steps", "0", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "--steps" in bad.output
