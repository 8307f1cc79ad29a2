"""``structfw bench maxflow`` runs end to end on tiny graphs and every back-end agrees."""
import json

import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

from structfw_bench.maxflow import bench_maxflow, grid_instance, run_maxflow  # noqa: E402
from structfw.oracles.maxflow import available_backends  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _check(doc, sizes, repeats):
    assert doc["benchmark"] == "maxflow"
    for key in ("sizes", "repeats", "gil_calls", "seed", "backends", "graphs", "instance", "environment",
                "rows", "gil"):
        assert key in doc, key
    assert doc["backends"] == available_backends()
    assert doc["sizes"] == list(sizes)
    assert [g for g in doc["graphs"] if g.startswith("grid")] == [f"grid {s}x{s}" for s in sizes]
    assert len(doc["rows"]) == len(doc["graphs"]) * len(doc["backends"])
    for row in doc["rows"]:
        for key in ("graph", "backend", "V", "E", "seconds_per_call", "min_seconds", "times", "energy",
                    "rel_energy_diff"):
            assert key in row, key
        assert len(row["times"]) == repeats and row["seconds_per_call"] > 0
    for graph in doc["graphs"]:
        energies = {r["backend"]: r["energy"] for r in doc["rows"] if r["graph"] == graph}
        assert set(energies) == set(doc["backends"])
        ref = energies["numba"]
        for backend, energy in energies.items():
            # the integer back-ends round the capacities (scipy: int32)
            assert energy == pytest.approx(ref, rel=1e-7), (graph, backend, energies)


def test_run_maxflow_tiny_grids(tmp_path):
    doc = run_maxflow(sizes=(6, 9), repeats=2, gil_calls=1, slic=False, out=tmp_path, log=lambda s: None)
    _check(doc, (6, 9), 2)
    assert [g["graph"] for g in doc["gil"]] == ["grid 9x9"] * len(doc["backends"])
    on_disk = json.loads((tmp_path / "maxflow.json").read_text())  # strict JSON: no NaN
    assert on_disk["rows"] == json.loads(json.dumps(doc["rows"]))
    assert (tmp_path / "maxflow.png").read_bytes()[:8] == PNG
    assert doc["rows"][0]["V"] == 36 and doc["rows"][0]["E"] == 2 * 6 * 5


def test_cli_with_segmentation_graphs(tmp_path):
    pytest.importorskip("skimage")
    res = CliRunner().invoke(bench_maxflow, ["--sizes", "5", "--repeats", "1", "--gil-calls", "0",
                                             "--out-dir", str(tmp_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output
    doc = json.loads((tmp_path / "maxflow.json").read_text())
    _check(doc, (5,), 1)
    assert any(g.startswith("SLIC") for g in doc["graphs"]) and doc["gil"] == []


def test_cli_rejects_bad_sizes(tmp_path):
    res = CliRunner().invoke(bench_maxflow, ["--sizes", "1", "--out-dir", str(tmp_path)])
    assert res.exit_code == 2 and "--sizes" in res.output


def test_grid_instance_is_a_submodular_grid():
    c0, c1, edges, wts = grid_instance(4, 7, seed=0)
    assert c0.shape == c1.shape == (28,)
    assert edges.shape == (4 * 6 + 3 * 7, 2) and (wts > 0).all()
