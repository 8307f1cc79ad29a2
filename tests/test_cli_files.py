"""The user's own files on the command line: graph files (JSON lines) for GraphModel through
`structfw train` / `structfw predict`, and svmlight files for the kernel SVM (`structfw svm`)."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from structfw.cli import main
from structfw.datasets import load_graph_file
from structfw.datasets.graph_files import GRAPH_KEYS, sniff_graph_file

QUICK = ["--passes", "3", "--quiet"]


def invoke(args):
    return CliRunner().invoke(main, args)


def assert_usage_error(res, *fragments):
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    for f in fragments:
        assert f in res.output, (f, res.output)


def toy_graphs(n=12, seed=0, labels=True, edge_features=True):
    """n path graphs of 3-6 nodes; a node's label is the argmax of its first 3 features."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        V = int(rng.integers(3, 7))
        nodes = rng.normal(size=(V, 4)).round(3)
        g = {"nodes": nodes.tolist(), "edges": [[v - 1, v] for v in range(1, V)]}
        if edge_features:
            g["edge_features"] = [[1.0, float(rng.uniform())] for _ in range(V - 1)]
        if labels:
            g["labels"] = ["abc"[k] for k in nodes[:, :3].argmax(axis=1)]
        out.append(g)
    return out


def write_graphs(path, graphs, blank_lines=False):
    sep = "\n\n" if blank_lines else "\n"
    path.write_text(sep.join(json.dumps(g) for g in graphs) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------ the reader: good files
def test_reader_gives_graphmodel_inputs_labels_and_lines(tmp_path):
    graphs = toy_graphs(4)
    data = load_graph_file(write_graphs(tmp_path / "g.jsonl", graphs, blank_lines=True))
    X, Y, classes, lines = data
    assert lines == [1, 3, 5, 7]  # blank lines skipped, every graph named by its line
    assert data.n_features == 4 and data.n_edge_features == 2
    for x, y, g in zip(X, Y, graphs):
        nodes, edges, ef = x
        assert nodes.dtype == np.float64 and nodes.shape == (len(g["nodes"]), 4)
        assert edges.dtype == np.int64 and edges.tolist() == g["edges"]
        assert ef.shape == (len(g["edges"]), 2)
        assert y.tolist() == g["labels"]
    assert set(classes.tolist()) <= {"a", "b", "c"} and list(classes) == sorted(classes)
    model = data.make_model(pairwise="symmetric")
    assert (model.n_states, model.n_features, model.n_edge_features, model.pairwise) == (len(classes), 4, 2,
                                                                                         "symmetric")
    assert model.check_X(X)  # accepted as they are


def test_reader_without_edge_features_or_labels(tmp_path):
    data = load_graph_file(write_graphs(tmp_path / "g.jsonl", toy_graphs(3, labels=False, edge_features=False)))
    assert data.Y is None and data.classes is None
    assert all(len(x) == 2 for x in data.X) and data.n_edge_features == 1
    with pytest.raises(ValueError, match="line 1: no 'labels'; training needs"):
        load_graph_file(tmp_path / "g.jsonl", require_labels=True)


def test_reader_integer_labels_edgeless_graphs_and_a_byte_order_mark(tmp_path):
    path = tmp_path / "g.txt"
    lines = ['{"nodes": [[1, 2]], "edges": [], "edge_features": [], "labels": [3]}',
             '{"nodes": [[1, 2], [0, 1]], "edges": [[1, 0]], "edge_features": [[0.5, 1, 2]], "labels": [0, 3]}']
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode())
    X, Y, classes, _ = load_graph_file(path)
    assert [y.dtype.kind for y in Y] == ["i", "i"] and classes.tolist() == [0, 3]
    assert X[0][2].shape == (0, 3) and X[1][2].shape == (1, 3)  # the edgeless graph takes the file's Fe
    assert sniff_graph_file(path)


def test_sniff_by_suffix_and_content(tmp_path):
    assert sniff_graph_file(tmp_path / "absent.jsonl")  # the suffix says it
    svm = tmp_path / "a.txt"
    svm.write_text("1 1:0.5 2:1\n")
    assert not sniff_graph_file(svm) and not sniff_graph_file(tmp_path / "absent.txt")
    svm.write_text('\n  {"nodes": [[1]], "edges": []}\n')
    assert sniff_graph_file(svm)


# ------------------------------------------------------------------ the reader: every kind of bad line
FIRST = '{"nodes": [[0, 1], [1, 0]], "edges": [[0, 1]], "edge_features": [[1.0]], "labels": ["a", "b"]}'
TAIL = '"edge_features": [], "labels": ["a"]'


@pytest.mark.parametrize("line, fragment", [
    ('{"nodes": [[0, 1]], "edges": [}', "not JSON (Expecting value at column 31)"),
    ("[1, 2]", "expected a JSON object"),
    ('{"edges": []}', "no 'nodes'"),
    ('{"nodes": [[0, 1]]}', "no 'edges'"),
    ('{"nodes": [[0, 1]], "edges": [], "edge_feature": []}', "unknown key 'edge_feature'"),
    ('{"nodes": [[0, 1], [2]], "edges": []}', "nodes[1] has 1 entry, but nodes[0] has 2"),
    ('{"nodes": [[0, 1, 2]], "edges": []}', "nodes: 3 features a node, but line 1 (the first graph) has 2"),
    ('{"nodes": [], "edges": []}', "nodes is empty"),
    ('{"nodes": [0, 1], "edges": []}', "nodes[0] is a number 0"),
    ('{"nodes": [[0, true]], "edges": []}', "nodes[0][1] is a boolean true; expected a number"),
    ('{"nodes": [[0, "1"]], "edges": []}', "nodes[0][1] is a string \"1\""),
    ('{"nodes": [[0, NaN]], "edges": []}', "NaN is not a finite number"),
    ('{"nodes": [[0, 1e400]], "edges": []}', "nodes contains NaN or infinite values"),
    ('{"nodes": [[0, 1e200]], "edges": []}', "nodes has values too large for float64"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[0, 2]]}', "edges[0] = (0, 2) refers to node 2, outside 0..1"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[1, 1]]}', "edges[0] = (1, 1) is a self-loop"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[0, 1], [1, 0]]}', "edges[1] = (1, 0) repeats edges[0] = (0, 1)"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[0, 1.0]]}', "edges[0][1] is a number 1.0; expected an integer"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[0, 1, 1]]}', "edges: 3 entries an edge; expected [u, v] pairs"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[0, 99999999999999999999]]}', "outside the 64-bit integers"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[0, 1]], "edge_features": [], "labels": ["a", "a"]}',
     "edge_features is empty"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[0, 1]], "edge_features": [[1], [2]], "labels": ["a", "a"]}',
     "edge_features: 2 rows for 1 edge"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [[0, 1]], "edge_features": [[1, 2]], "labels": ["a", "a"]}',
     "edge_features: 2 features an edge, but line 1 has 1"),
    ('{"nodes": [[0, 1]], "edges": [], "labels": ["a"]}', "has no 'edge_features', but line 1"),
    ('{"nodes": [[0, 1]], "edges": [], "edge_features": []}', "has no 'labels', but line 1"),
    ('{"nodes": [[0, 1]], "edges": [], "edge_features": [], "labels": ["a", "b"]}', "labels: 2 labels for 1 node"),
    ('{"nodes": [[0, 1], [1, 1]], "edges": [], "edge_features": [], "labels": ["a", 1]}',
     "labels mix integers and strings"),
    ('{"nodes": [[0, 1]], "edges": [], "edge_features": [], "labels": [1]}',
     "labels are integers, but line 1 has string labels"),
    ('{"nodes": [[0, 1]], "edges": [], "edge_features": [], "labels": [1.5]}', "a number 1.5 is not a label"),
    ('{"nodes": [[0, 1]], "edges": [], "edge_features": [], "labels": [null]}', "labels: null is not a label"),
    ('{"nodes": [[0, 1]], "edges": [], "edge_features": [], "labels": ["' + "x" * 65 + '"]}',
     "has 65 characters; a label has at most 64"),
    ('{"nodes": [[0, 1]], "edges": [], ' + '"labels": ' + "[" * 100000 + "]" * 100000 + "}",
     "JSON nested too deeply"),
])
def test_a_bad_line_is_named_with_the_file(tmp_path, line, fragment):
    path = tmp_path / "g.jsonl"
    path.write_text(FIRST + "\n" + line + "\n")
    with pytest.raises(ValueError) as info:
        load_graph_file(path)
    assert str(info.value).startswith(f"{path}: line 2: "), str(info.value)
    assert fragment in str(info.value), str(info.value)


def test_bytes_lines_and_files_the_reader_refuses(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_bytes(FIRST.encode() + b"\n" + b'{"nodes": [[0, 1]], "edges": [], "labels": ["\xe9"]}\n')
    with pytest.raises(ValueError, match=r"line 2: not UTF-8 text \(byte 0xe9"):
        load_graph_file(path)
    path.write_text(FIRST + "\n" + '{"nodes": [[' + "1, " * 400 + '1]], "edges": []}\n')
    with pytest.raises(ValueError, match=r"line 2: longer than 1000 bytes \(max_line_bytes\)"):
        load_graph_file(path, max_line_bytes=1000)
    path.write_text(FIRST + "\n")
    assert len(load_graph_file(path, max_line_bytes=len(FIRST)).X) == 1  # a line of exactly the bound is read
    with pytest.raises(ValueError, match="line 1: longer than"):
        load_graph_file(path, max_line_bytes=len(FIRST) - 1)
    path.write_text("\n  \n")
    with pytest.raises(ValueError, match="no graphs"):
        load_graph_file(path)
    with pytest.raises(ValueError, match="max_line_bytes must be a positive integer"):
        load_graph_file(path, max_line_bytes=0)
    assert GRAPH_KEYS[:2] == ("nodes", "edges")


# ------------------------------------------------------------------ structfw train / predict on graph files
@pytest.fixture(scope="module")
def graph_model(tmp_path_factory):
    """A GraphModel trained on a graph file and saved: (folder, data file, model file)."""
    tmp = tmp_path_factory.mktemp("graphs")
    data = write_graphs(tmp / "train.jsonl", toy_graphs(12))
    res = invoke(["train", "--model", "graph", "--data", str(data), "--save", str(tmp / "m.npz")] + QUICK)
    assert res.exit_code == 0, res.output
    assert f"{data}: graph file, 12 graphs" in res.output and "3 labels, 4 node and 2 edge features" in res.output
    return tmp, data, tmp / "m.npz"


def test_predict_writes_every_graphs_labels(graph_model):
    from structfw import StructuredSVM

    tmp, data, model = graph_model
    out = tmp / "labels.json"
    res = invoke(["predict", "--model", str(model), "--data", str(data), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "12 graphs" in res.output and "token accuracy" in res.output
    doc = json.loads(out.read_text())
    graphs = load_graph_file(data)
    assert doc["n_examples"] == 12 and doc["lines"] == graphs.lines and doc["split"] == "all"
    assert [len(y) for y in doc["labels"]] == [len(x[0]) for x in graphs.X]
    expected = StructuredSVM.load(model).predict(graphs.X)
    assert doc["labels"] == [list(map(str, y)) for y in expected]
    assert 0.0 <= doc["token_accuracy"] <= 1.0 and set(doc["classes"]) == {"a", "b", "c"}


def test_predict_an_unlabelled_graph_file_found_by_its_content(graph_model, tmp_path):
    _, _, model = graph_model
    data = write_graphs(tmp_path / "new.txt", toy_graphs(3, seed=5, labels=False))
    out = tmp_path / "labels.npz"
    res = invoke(["predict", "--model", str(model), "--data", str(data), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "3 graphs" in res.output and "accuracy" not in res.output
    with np.load(out) as z:
        assert z["shapes"].ravel().tolist() == [len(g["nodes"]) for g in toy_graphs(3, seed=5)]
        assert set(z["labels"].tolist()) <= {"a", "b", "c"}


def test_predict_refuses_what_does_not_apply_to_a_graph_file(graph_model, tmp_path):
    _, data, model = graph_model
    out = str(tmp_path / "o.json")
    assert_usage_error(invoke(["predict", "--model", str(model), "--data", str(data), "--out", out, "--split",
                               "train"]), "--split: not an option of a graph file")
    narrow = write_graphs(tmp_path / "narrow.jsonl", toy_graphs(2, edge_features=False))
    assert_usage_error(invoke(["predict", "--model", str(model), "--data", str(narrow), "--out", out]),
                       "its graphs have 1 edge feature, but the model", "takes 2")
    assert_usage_error(invoke(["predict", "--model", str(model), "--data", "ocr", "--out", out, "--format",
                               "graph"]), "--format graph applies to a file")


def test_train_names_the_file_and_line_of_a_bad_graph(tmp_path):
    graphs = [json.dumps(g) for g in toy_graphs(6)]
    graphs[2] = graphs[2].replace('"edges": [[0, 1]', '"edges": [[0, 0]')
    data = tmp_path / "bad.jsonl"
    data.write_text("\n".join(graphs) + "\n")
    assert_usage_error(invoke(["train", "--data", str(data)] + QUICK),
                       f"--data {data}: line 3: edges[0] = (0, 0) is a self-loop")
    # --model graph reads a file of unknown content as a graph file, whose reader names the problem
    text = tmp_path / "notes.txt"
    text.write_text("nodes: 1 2 3\n")
    assert_usage_error(invoke(["train", "--model", "graph", "--data", str(text)] + QUICK), "line 1: not JSON")


def test_train_refuses_graph_files_it_cannot_train_on(tmp_path):
    unlabelled = write_graphs(tmp_path / "u.jsonl", toy_graphs(6, labels=False))
    assert_usage_error(invoke(["train", "--data", str(unlabelled)] + QUICK), "no 'labels'; training needs")
    few = write_graphs(tmp_path / "few.jsonl", toy_graphs(4))
    assert_usage_error(invoke(["train", "--data", str(few)] + QUICK), "has 4 graphs; at least 5")
    graphs = toy_graphs(6)
    for g in graphs:
        g["labels"] = ["x"] * len(g["nodes"])
    one = write_graphs(tmp_path / "one.jsonl", graphs)
    assert_usage_error(invoke(["train", "--data", str(one)] + QUICK), "has a single label ('x')")
    held_out = int(np.random.default_rng(0).permutation(6)[-1])  # in the test part of --seed 0's split
    graphs[held_out]["labels"][0] = "rare"
    rare = write_graphs(tmp_path / "rare.jsonl", graphs)
    assert_usage_error(invoke(["train", "--data", str(rare)] + QUICK), "label 'rare' occurs only in the test part",
                       f"line {held_out + 1}; --seed 0")
    assert_usage_error(invoke(["train", "--model", "chain", "--data", str(rare)] + QUICK),
                       "--model chain does not apply", "its model is graph")


# ------------------------------------------------------------------ structfw svm train / predict
def write_svmlight(path, n=36, seed=0, classes=(1, 2, 3), labels=None):
    """n points of 2 features around one centre per class, as an svmlight file."""
    rng = np.random.default_rng(seed)
    centres = {c: rng.normal(scale=3, size=2) for c in classes}
    rows = []
    for i in range(n):
        c = classes[i % len(classes)]
        x = centres[c] + rng.normal(scale=0.3, size=2)
        rows.append(f"{c if labels is None else labels} 1:{x[0]:.4f} 2:{x[1]:.4f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_svm_train_and_predict_round_trip(tmp_path):
    from structfw.datasets import load_svmlight
    from structfw.svm import FrankWolfeSVC

    data = write_svmlight(tmp_path / "train.svm")
    model = tmp_path / "svc.npz"
    res = invoke(["svm", "train", "--data", str(data), "--C", "10", "--gamma", "0.5", "--method", "swap",
                  "--tol", "1e-3", "--save", str(model)])
    assert res.exit_code == 0, res.output
    assert "36 examples, 2 features, 3 classes" in res.output
    assert "FrankWolfeSVC(C=10.0, gamma=0.5, method='swap', tol=0.001)" in res.output
    assert res.output.count(" vs rest") == 3 and "stopped: converged" in res.output
    svc = FrankWolfeSVC.load(model)
    assert (svc.C, svc.gamma, svc.method, svc.tol) == (10.0, 0.5, "swap", 1e-3)

    test = write_svmlight(tmp_path / "test.svm", n=9, seed=0)
    out = tmp_path / "pred.json"
    res = invoke(["svm", "predict", "--model", str(model), "--data", str(test), "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    X, y = load_svmlight(test)
    assert doc["labels"] == svc.predict(X).tolist() and doc["classes"] == [1, 2, 3]
    assert doc["accuracy"] == pytest.approx(float(np.mean(svc.predict(X) == y)), rel=1e-12)
    assert f"accuracy {doc['accuracy']:.4f}" in res.output

    placeholder = write_svmlight(tmp_path / "new.svm", n=4, labels=0)
    res = invoke(["svm", "predict", "--model", str(model), "--data", str(placeholder), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "accuracy not computed (the file's label 0" in res.output and json.loads(out.read_text())["accuracy"] is None


@pytest.mark.parametrize("args, flag", [
    (["--C", "0"], "--C"), (["--C", "many"], "--C"), (["--gamma", "wide"], "--gamma"),
    (["--gamma", "-1"], "--gamma"), (["--method", "newton"], "--method"), (["--kernel", "precomputed"], "--kernel"),
    (["--max-iter", "0"], "--max-iter"), (["--max-iter", "2.5"], "--max-iter"), (["--sample-size", "0"],
                                                                                  "--sample-size"),
    (["--block", "0"], "--block"), (["--tol", "0"], "--tol"), (["--random-state", "-3"], "--random-state"),
])
def test_svm_train_bad_flags_exit_2_naming_the_flag(tmp_path, args, flag):
    data = write_svmlight(tmp_path / "train.svm")
    res = invoke(["svm", "train", "--data", str(data)] + args)
    assert_usage_error(res, f"'{flag}'")


def test_svm_flags_are_the_classifiers_parameters():
    from structfw.cli.svm import svm_train
    from structfw.svm import FrankWolfeSVC

    names = {p.name for p in svm_train.params} - {"data", "save", "help"}
    assert names == set(FrankWolfeSVC._parameter_constraints)
    flags = {p.name: p.opts[0] for p in svm_train.params}
    assert flags["C"] == "--C" and flags["cache_size"] == "--cache-size"


def test_svm_refuses_data_and_model_files_that_do_not_apply(tmp_path, graph_model):
    one = write_svmlight(tmp_path / "one.svm", classes=(4,))
    assert_usage_error(invoke(["svm", "train", "--data", str(one)]), "has a single class")
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5\n1 1:x\n")
    assert_usage_error(invoke(["svm", "train", "--data", str(bad)]), f"--data {bad}", "line 2")
    _, _, structured = graph_model
    out = str(tmp_path / "p.json")
    assert_usage_error(invoke(["svm", "predict", "--model", str(structured), "--data", str(one), "--out", out]),
                       "holds a StructuredSVM, not a FrankWolfeSVC")
    model = tmp_path / "svc.npz"
    assert invoke(["svm", "train", "--data", str(write_svmlight(tmp_path / "t.svm", classes=(1, 2))), "--save",
                   str(model)]).exit_code == 0
    assert_usage_error(invoke(["predict", "--model", str(model), "--data", str(one), "--out", out]),
                       "structfw svm predict")
    wide = tmp_path / "wide.svm"
    wide.write_text("1 1:0.5 7:1\n")
    assert_usage_error(invoke(["svm", "predict", "--model", str(model), "--data", str(wide), "--out", out]),
                       f"--data {wide}", "line 1")
