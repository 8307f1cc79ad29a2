"""`structfw bench learned`: the learned-features OCR benchmark at a tiny size, its helpers and its CLI."""
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from structfw_bench import learned  # noqa: E402
from structfw.cli import main  # noqa: E402

TINY = ["--n-train", "12", "--n-test", "6", "--epochs", "2", "--batch-size", "4", "--hidden", "16", "--width", "4",
        "--last-passes", "3", "--threads", "1", "--device", "cpu"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("learned")
    threads = torch.get_num_threads()
    res = CliRunner().invoke(main, ["bench", "learned", *TINY, "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert torch.get_num_threads() == threads  # --threads holds for the run only
    return res.output, json.loads((out / "learned.json").read_text()), out


def test_the_bench_writes_every_method_with_sane_numbers(tiny_run):
    output, doc, out = tiny_run
    assert (doc["n_train"], doc["n_test"], doc["epochs"], doc["device"]) == (12, 6, 2, "cpu")
    assert set(doc["methods"]) == {"cnn_hinge", "linear_bcfw", "cnn_ce", "cnn_crf", "last_layer"}
    X, Y, Xt, Yt = learned.load_words(12, 6, 0)
    assert doc["letters_train"] == sum(map(len, Y)) and doc["letters_test"] == sum(map(len, Yt))
    for name, m in doc["methods"].items():
        assert 0 <= m["test_letter_error"] <= 1 and 0 <= m["test_word_error"] <= 1, name
        assert m["test_letter_error"] <= m["test_word_error"] + 1e-12, name  # a wrong letter makes a wrong word
        if name != "last_layer":
            assert m["train_s"] > 0 and [p["epoch"] for p in m["curve"]] == [1, 2], name
            assert m["curve"][-1]["test_letter_error"] == m["test_letter_error"], name
    assert doc["target_met"] == (doc["methods"]["cnn_hinge"]["test_letter_error"] <= doc["target"])
    assert (out / "learned.png").stat().st_size > 1000
    assert "last-layer certificate" in output and "wrote" in output


def test_the_certificate_obeys_weak_duality(tiny_run):
    """The refit's dual bounds every last layer's primal from below: the refit's own and the
    network's (which has the refit's form, so it is a point of the same problem)."""
    last = tiny_run[1]["methods"]["last_layer"]
    tol = 1e-9 * max(1.0, abs(last["primal"]))
    assert last["gap"] >= -tol
    assert math.isclose(last["primal"] - last["dual"], last["gap"], rel_tol=1e-6, abs_tol=1e-9)
    assert last["network_primal"] >= last["dual"] - tol
    assert math.isclose(last["network_bound"], last["network_primal"] - last["dual"], rel_tol=1e-9, abs_tol=1e-12)
    assert last["n_features"] == 16


def test_the_overhead_phases_add_up(tiny_run):
    overhead = tiny_run[1]["overhead"]
    assert set(overhead) == {"cnn_hinge", "cnn_crf"}
    for o in overhead.values():
        phases = [o[k] for k in ("net_forward_ms", "loss_forward_ms", "loss_backward_ms", "net_backward_ms")]
        assert all(p > 0 and math.isfinite(p) for p in phases)
        assert math.isclose(o["layer_ms"], phases[1] + phases[2], rel_tol=1e-9)
        assert math.isclose(o["ratio"], o["layer_ms"] / o["network_ms"], rel_tol=1e-9)


def test_a_batch_pads_each_word_in_order():
    X, Y, _, _ = learned.load_words(5, 1, 3)
    words = learned.Words(torch, X, Y, torch.device("cpu"))
    letters, tags, padded, mask = words.batch([3, 0])
    lengths = [len(Y[3]), len(Y[0])]
    assert mask.sum(1).tolist() == lengths and letters.shape == (sum(lengths), 1, 16, 8)
    flat = letters.reshape(len(letters), -1)
    em = learned.pad(flat, mask)
    for b, i in enumerate((3, 0)):
        L = len(Y[i])
        assert np.array_equal(em[b, :L].numpy(), np.asarray(X[i], np.float32))
        assert np.array_equal(padded[b, :L].numpy(), Y[i])
        assert not em[b, L:].any()
    assert np.array_equal(tags.numpy(), np.concatenate([Y[3], Y[0]]))


def test_errors_count_letters_and_words():
    Y = [np.array([0, 1, 2]), np.array([3])]
    assert learned.errors(Y, [[0, 1, 2], [3]]) == (0.0, 0.0)
    assert learned.errors(Y, [[0, 2, 2], [3]]) == (0.25, 0.5)
    assert learned.errors(Y, [[1, 2, 0], [0]]) == (1.0, 1.0)


def test_every_network_starts_from_the_same_weights():
    a = learned.make_network(torch, 8, 2)
    torch.manual_seed(1)
    b = learned.make_network(torch, 8, 2)
    torch.manual_seed(1)
    c = learned.make_network(torch, 8, 2)
    for p, q in zip(b[0].parameters(), c[0].parameters()):
        assert torch.equal(p, q)
    assert not all(torch.equal(p, q) for p, q in zip(a[0].parameters(), b[0].parameters()))
    assert b[1].bias is None  # the head is a ChainModel's unary weights, nothing more


def test_help_lists_the_options():
    res = CliRunner().invoke(main, ["bench", "learned", "--help"])
    assert res.exit_code == 0, res.output
    for flag in ("--n-train", "--n-test", "--epochs", "--seed", "--lr", "--threads", "--device", "--out",
                 "--last-lam", "--last-passes"):
        assert flag in res.output
    res = CliRunner().invoke(main, ["bench", "--help"])
    assert "learned" in res.output


@pytest.mark.parametrize("args,needle", [(["--device", "tpu"], "--device"), (["--epochs", "0"], "--epochs"),
                                         (["--lr", "-1"], "--lr")])
def test_bad_options_are_usage_errors_naming_the_flag(args, needle):
    res = CliRunner().invoke(main, ["bench", "learned", *args])
    assert res.exit_code == 2 and needle in res.output
