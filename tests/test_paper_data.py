"""The loaders and generators of the papers' data sizes, on small files the tests write themselves:
CoNLL-2000 column files and templates, the CoNLL-sized generator, LIBSVM pairs (a9a-style), and
Fashion-MNIST's IDX files."""
import bz2
import gzip
import io
import struct

import numpy as np
import pytest
import scipy.sparse as sp

from structfw.datasets import (conll_chain_data, load_conll, load_conll_scale, load_fashion_mnist, load_svmlight,
                               load_svmlight_pair, make_conll_like, read_idx)
from structfw.datasets.conll import (CONLL2000_TAGS, CONLL_TEMPLATES, PAPER_N_FEATURES, ConllVectorizer,
                                     conll_feature_dicts)
from structfw.datasets.fashion import FASHION_MNIST_DIR

CONLL_TEXT = """Confidence NN B-NP
in IN B-PP
the DT B-NP
pound NN I-NP
is VBZ B-VP
widely RB I-VP
expected VBN I-VP
. . O

Chancellor NNP O
of IN B-PP
the DT B-NP
Exchequer NNP I-NP
. . O
"""


# ------------------------------------------------------------------ CoNLL-2000 reader
def test_load_conll_reads_sentences_plain_gz_and_file_objects(tmp_path):
    plain = tmp_path / "train.txt"
    plain.write_text(CONLL_TEXT)
    gz = tmp_path / "train.txt.gz"
    gz.write_bytes(gzip.compress(CONLL_TEXT.replace("\n", "\r\n").encode()))
    for source in (plain, str(gz), io.StringIO(CONLL_TEXT), io.BytesIO(CONLL_TEXT.encode())):
        tokens, pos, tags = load_conll(source)
        assert [len(s) for s in tokens] == [8, 5]
        assert tokens[0][:3] == ["Confidence", "in", "the"] and pos[1] == ["NNP", "IN", "DT", "NNP", "."]
        assert tags[0].tolist() == ["B-NP", "B-PP", "B-NP", "I-NP", "B-VP", "I-VP", "I-VP", "O"]


def test_load_conll_blank_runs_docstart_and_no_final_newline(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("-DOCSTART- -X- O\n\n\n a DT B-NP \n\n\n\nb NN B-NP")
    tokens, pos, tags = load_conll(f)
    assert tokens == [["a"], ["b"]] and tags[1].tolist() == ["B-NP"]


@pytest.mark.parametrize("text, line, needle", [
    ("a DT B-NP\nb NN\n", 2, "expected 3 columns"),
    ("a DT B-NP\n\nb NN I-NP extra\n", 3, "got 4"),
    ("a DT B-NP\nb NN NP\n", 2, "chunk tag 'NP'"),
    ("a DT B-NP\nb NN X-NP\n", 2, "'B-TYPE' or 'I-TYPE'"),
])
def test_load_conll_malformed_lines_name_the_line(tmp_path, text, line, needle):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(ValueError, match=f"line {line}") as err:
        load_conll(f)
    assert needle in str(err.value) and "bad.txt" in str(err.value)


def test_load_conll_bad_bytes_empty_absent_and_damaged_gz(tmp_path):
    f = tmp_path / "latin.txt"
    f.write_bytes(b"a DT B-NP\nd\xe9j\xe0 RB B-ADVP\n")
    with pytest.raises(ValueError, match="line 2 is not utf-8"):
        load_conll(f)
    assert load_conll(f, encoding="latin-1").tokens[0][1] == "d\xe9j\xe0"
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(ValueError, match="no sentences"):
        load_conll(tmp_path / "empty.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_conll(tmp_path / "nope.txt")
    bad = tmp_path / "t.txt.gz"
    bad.write_bytes(gzip.compress(CONLL_TEXT.encode())[:40])
    with pytest.raises(ValueError, match="t.txt.gz"):
        load_conll(bad)
    with pytest.raises(ValueError, match="path_or_file"):
        load_conll(42)


# ------------------------------------------------------------------ templates
def test_templates_features_of_a_fixture_sentence():
    tokens, pos, _ = load_conll(io.StringIO(CONLL_TEXT))
    dicts = conll_feature_dicts(tokens, pos)
    first, pound = dicts[0][0], dicts[0][3]
    for name in ("bias", "w[-2]=<s>", "w[0]=Confidence", "w[+1]=in", "w[0]|w[+1]=Confidence|in", "p[-1]=<s>",
                 "p[0]|p[+1]|p[+2]=NN|IN|DT", "prefix4=conf", "suffix3=nce", "shape[0]=Xx", "shape[+1]=x",
                 "is_title"):
        assert name in first, name
    assert {"w[-1]|w[0]=the|pound", "p[-2]|p[-1]=IN|DT", "p[-1]|p[0]|p[+1]=DT|NN|VBZ", "w[+2]=widely"} <= set(pound)
    # one feature per template (the flags only when true): 31 templates + is_title on "Confidence"
    assert len(first) == len(CONLL_TEMPLATES) - 3 and len(pound) == len(CONLL_TEMPLATES) - 4
    assert set(conll_feature_dicts(tokens, pos, templates=["w[0]", "bias"])[0][0]) == {"bias", "w[0]=Confidence"}
    with pytest.raises(ValueError, match="templates"):
        conll_feature_dicts(tokens, pos, templates=["word"])
    with pytest.raises(ValueError, match="same length"):
        conll_feature_dicts([["a", "b"]], [["DT"]])


def test_template_feature_count_on_the_fixture_and_chain_data():
    corpus = load_conll(io.StringIO(CONLL_TEXT))
    data = conll_chain_data(corpus, corpus)
    # the distinct features of the 13 tokens, counted by hand from the templates' names
    distinct = {f for sent in conll_feature_dicts(corpus.tokens, corpus.pos) for tok in sent for f in tok}
    assert data.n_features == len(distinct) == data.info["raw_features"]
    assert data.tags == ("O", "B-NP", "I-NP", "B-VP", "I-VP", "B-PP")
    X, Y, Xt, Yt = data
    assert [x.shape for x in X] == [(8, data.n_features), (5, data.n_features)]
    assert all(sp.isspmatrix_csr(x) and x.has_sorted_indices for x in X)
    assert [y.tolist() for y in Y][1] == [0, 5, 1, 2, 0]
    assert (X[0] != Xt[0]).nnz == 0
    assert data.make_model().size_joint_feature == 6 * data.n_features + 36
    assert data.info["nnz_train"] == sum(len(t) for s in conll_feature_dicts(corpus.tokens, corpus.pos) for t in s)
    cut = conll_chain_data(corpus, n_features=20)
    assert cut.n_features == 20 and cut.X_test == [] and max(x.indices.max() for x in cut.X_train) < 20
    with pytest.raises(ValueError, match="test sentence 0 has the tag 'B-XX'"):
        conll_chain_data(corpus, load_conll(io.StringIO("a DT B-XX\n")), tags=CONLL2000_TAGS)


@pytest.mark.parametrize("n_features", [None, 60])
def test_conll_vectorizer_numbers_features_as_sequence_vectorizer(n_features):
    from structfw.features import SequenceVectorizer

    train, test = make_conll_like(12, 4, seed=5)
    vec = ConllVectorizer(n_features=n_features)
    A = vec.fit_transform(train.tokens, train.pos) + vec.transform(test.tokens, test.pos)
    ref = SequenceVectorizer(hashing=False, n_features=n_features)
    B = ref.fit_transform(conll_feature_dicts(train.tokens, train.pos))
    B += ref.transform(conll_feature_dicts(test.tokens, test.pos))
    assert vec.n_features_ == ref.n_features_
    assert all(a.shape == b.shape and (a != b).nnz == 0 for a, b in zip(A, B))


# ------------------------------------------------------------------ the CoNLL-sized generator
def test_make_conll_like_sizes_tags_and_determinism():
    train, test = make_conll_like(60, 15, seed=3)
    assert len(train.tokens) == 60 and len(test.tokens) == 15
    for corpus in (train, test):
        for w, p, t in zip(*corpus):
            assert len(w) == len(p) == len(t) >= 2 and w[-1] == "." and t[-1] == "O"
            assert set(t.tolist()) <= set(CONLL2000_TAGS)
            # IOB2: an I- tag continues a chunk of its own type
            for a, b in zip(t[:-1], t[1:]):
                assert not b.startswith("I-") or a[2:] == b[2:]
    again, _ = make_conll_like(60, 0, seed=3)
    assert again.tokens == train.tokens and all((a == b).all() for a, b in zip(again.tags, train.tags))
    prefix, _ = make_conll_like(20, 5, seed=3)  # the first sentences do not depend on n
    assert prefix.tokens == train.tokens[:20]
    other, _ = make_conll_like(60, 0, seed=4)
    assert other.tokens != train.tokens
    mean = np.mean([len(s) for s in make_conll_like(400, 0, seed=0)[0].tokens])
    assert 20 < mean < 27  # CoNLL-2000: 23.7
    for bad in (dict(n_train=0), dict(n_test=-1), dict(seed=-1), dict(n_train=2.5)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            make_conll_like(**bad)


def test_load_conll_scale_caches_and_fits_a_chain(tmp_path, monkeypatch):
    import structfw as sf

    monkeypatch.setenv("STRUCTFW_DATA_HOME", str(tmp_path))
    data = load_conll_scale(24, 8, seed=1, n_features=400)
    X, Y, Xt, Yt = data
    assert (len(X), len(Xt), data.n_states, data.n_features) == (24, 8, 22, 400)
    assert data.info["d"] == 22 * 400 + 22 ** 2 and not data.info["cached"]
    assert data.info["generation_seconds"] > 0 and data.info["raw_features"] > 400
    assert all(x.shape == (y.shape[0], 400) for x, y in zip(X + Xt, Y + Yt))
    assert (tmp_path / "conll").is_dir()
    again = load_conll_scale(24, 8, seed=1, n_features=400)
    assert again.info["cached"] and again.info["generation_seconds"] == data.info["generation_seconds"]
    assert all((a != b).nnz == 0 for a, b in zip(again.X_train + again.X_test, X + Xt))
    assert all((a == b).all() for a, b in zip(again.Y_train + again.Y_test, Y + Yt))
    svm = sf.StructuredSVM(data.make_model(), lam=0.1, max_passes=2, tol=None, random_state=0).fit(X, Y)
    pred = svm.predict(Xt)
    assert [p.shape for p in pred] == [y.shape for y in Yt]
    assert np.isfinite(svm.coef_).all()
    with pytest.raises(ValueError, match="n_features"):
        load_conll_scale(5, 1, n_features=0, cache=False)


def test_paper_width_is_the_papers_d():
    assert 22 * PAPER_N_FEATURES + 22 ** 2 == 1_643_026 and len(CONLL2000_TAGS) == 22


# ------------------------------------------------------------------ LIBSVM files
A9A = "-1 3:1 11:1 14:1 19:1 39:1 \n+1 5:1 7:1 123:1 \n-1 1:1 2:1 \n"
A9A_T = "-1 3:1 11:1 \n+1 5:1 122:1 \n"


def test_svmlight_reads_a9a_style_files_and_the_pair(tmp_path):
    tr, te = tmp_path / "a9a", tmp_path / "a9a.t"
    tr.write_text(A9A)
    te.write_text(A9A_T)
    X, y = load_svmlight(tr)
    assert X.shape == (3, 123) and y.tolist() == [-1, 1, -1] and X[1, 122] == 1 and X[2, 0] == 1
    assert load_svmlight(te)[0].shape == (2, 122)  # the test file alone is narrower
    assert load_svmlight(te, n_features=123)[0].shape == (2, 123)
    Xtr, ytr, Xte, yte = load_svmlight_pair(tr, te, binary=True)
    assert Xtr.shape == (3, 123) and Xte.shape == (2, 123) and sp.issparse(Xte)
    assert ytr.dtype == np.int64 and ytr.tolist() == [-1, 1, -1] and yte.tolist() == [-1, 1]
    assert Xte[1, 121] == 1 and Xte[0, 2] == 1
    dense = load_svmlight_pair(tr, te, dense=True, n_features=130)
    assert dense[0].shape == (3, 130) and isinstance(dense[2], np.ndarray)
    with pytest.raises(ValueError, match="line 2"):  # id 123 beyond n_features, named by its line
        load_svmlight_pair(tr, te, n_features=100)


def test_svmlight_pair_zero_based_is_decided_for_both_files(tmp_path):
    (tmp_path / "tr").write_text("1 0:1 2:1\n0 1:1\n")
    (tmp_path / "te").write_text("1 1:1\n0 2:1\n")  # no id 0 here: still zero-based
    Xtr, ytr, Xte, yte = load_svmlight_pair(tmp_path / "tr", tmp_path / "te", binary=True)
    assert Xtr.shape == Xte.shape == (2, 3) and Xte[0, 1] == 1 and ytr.tolist() == [1, -1]
    (tmp_path / "three").write_text("1 1:1\n2 1:1\n3 1:1\n")
    with pytest.raises(ValueError, match="exactly two label values"):
        load_svmlight_pair(tmp_path / "three", tmp_path / "te", binary=True)
    (tmp_path / "other").write_text("5 1:1\n")
    with pytest.raises(ValueError, match="label 5 is not one of the training labels"):
        load_svmlight_pair(tmp_path / "tr", tmp_path / "other", binary=True)


def test_svmlight_compressed_files_and_their_malformed_lines(tmp_path):
    (tmp_path / "a.gz").write_bytes(gzip.compress(A9A.encode()))
    (tmp_path / "a.bz2").write_bytes(bz2.compress(A9A.encode()))
    for name in ("a.gz", "a.bz2"):
        X, y = load_svmlight(tmp_path / name)
        assert X.shape == (3, 123) and y.tolist() == [-1, 1, -1]
    (tmp_path / "bad.gz").write_bytes(gzip.compress(b"-1 3:1\n+1 x:1\n"))
    with pytest.raises(ValueError, match=r"bad.gz.*line 2.*'x' is not an integer"):
        load_svmlight(tmp_path / "bad.gz")
    (tmp_path / "cut.bz2").write_bytes(bz2.compress(A9A.encode() * 50)[:60])
    with pytest.raises(ValueError, match="cut.bz2"):
        load_svmlight(tmp_path / "cut.bz2")


# ------------------------------------------------------------------ Fashion-MNIST (IDX)
def _idx(path, arr, code=0x08, compress=True, extra=b""):
    arr = np.asarray(arr)
    head = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    raw = head + arr.astype(arr.dtype.newbyteorder(">")).tobytes() + extra
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


def _fashion_folder(tmp_path, n_train=20, n_test=10):
    rng = np.random.default_rng(0)
    for part, m in (("train", n_train), ("t10k", n_test)):
        _idx(tmp_path / f"{part}-images-idx3-ubyte.gz", rng.integers(0, 256, (m, 28, 28), dtype=np.uint8))
        _idx(tmp_path / f"{part}-labels-idx1-ubyte.gz", np.arange(m, dtype=np.uint8) % 10)
    return tmp_path


def test_read_idx_types_and_malformed_files(tmp_path):
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4) - 5
    assert np.array_equal(read_idx(_idx(tmp_path / "i.gz", a, code=0x0C)), a)
    f = np.linspace(-1, 1, 6).reshape(3, 2)
    assert np.array_equal(read_idx(_idx(tmp_path / "f", f, code=0x0E, compress=False)), f)
    u = np.array([0, 7, 255], np.uint8)
    assert read_idx(_idx(tmp_path / "u.gz", u)).tolist() == [0, 7, 255]
    with pytest.raises(ValueError, match="holds more bytes"):
        read_idx(_idx(tmp_path / "long.gz", u, extra=b"\x01"))
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"\x00" * 4)
    with pytest.raises(ValueError, match=r"short.*only 4 bytes"):
        read_idx(tmp_path / "short")
    (tmp_path / "magic").write_bytes(b"\x01\x02\x08\x01" + b"\x00" * 8)
    with pytest.raises(ValueError, match="magic"):
        read_idx(tmp_path / "magic")
    (tmp_path / "code").write_bytes(bytes([0, 0, 0x42, 1]) + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(ValueError, match="type code 0x42"):
        read_idx(tmp_path / "code")
    (tmp_path / "huge").write_bytes(bytes([0, 0, 8, 3]) + struct.pack(">3I", 2 ** 31, 2 ** 31, 4))
    with pytest.raises(ValueError, match="MAX_IDX_BYTES"):
        read_idx(tmp_path / "huge")
    (tmp_path / "bad.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="bad.gz"):
        read_idx(tmp_path / "bad.gz")
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "absent.gz")


def test_load_fashion_mnist_on_fixture_files(tmp_path):
    folder = _fashion_folder(tmp_path)
    X, y = load_fashion_mnist(folder, pairs=None)
    assert X.shape == (20, 784) and X.dtype == np.float64 and 0 <= X.min() and X.max() <= 1
    assert y.tolist() == [i % 10 for i in range(20)]
    raw = read_idx(folder / "train-images-idx3-ubyte.gz").reshape(20, -1)
    assert np.allclose(X * 255, raw)
    Xs, ys = load_fashion_mnist(folder, pairs="tops", scale="symmetric", dtype=np.float32)
    assert Xs.dtype == np.float32 and Xs.min() >= -1 and Xs.max() <= 1 and len(ys) == 20
    assert ys.tolist() == [1 if i % 10 in (0, 2, 3, 4, 6) else -1 for i in range(20)]
    X2, y2 = load_fashion_mnist(folder, split="test", pairs=("T-shirt/top", 6), scale=None)
    assert X2.shape == (2, 784) and y2.tolist() == [1, -1] and X2.max() > 1
    Xa, ya = load_fashion_mnist(folder, split="all", pairs=((0, 1), [2]), n=5)
    assert Xa.shape == (5, 784) and ya.tolist() == [1, 1, -1, 1, 1]
    for bad in (dict(pairs="shoes"), dict(pairs=(0, 0)), dict(pairs=(0, 10)), dict(pairs=(0,)),
                dict(split="val"), dict(scale="z"), dict(n=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            load_fashion_mnist(folder, **bad)


def test_load_fashion_mnist_absent_or_mismatched_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install -y dataset-fashion-mnist"):
        load_fashion_mnist(tmp_path)
    folder = _fashion_folder(tmp_path)
    _idx(folder / "train-labels-idx1-ubyte.gz", np.zeros(19, np.uint8))
    with pytest.raises(ValueError, match="expected 20 uint8 labels"):
        load_fashion_mnist(folder)
    _idx(folder / "train-labels-idx1-ubyte.gz", np.full(20, 12, np.uint8))
    with pytest.raises(ValueError, match="labels must be 0..9"):
        load_fashion_mnist(folder)


@pytest.mark.skipif(not (FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").is_file(),
                    reason="Debian's dataset-fashion-mnist is not installed")
def test_load_fashion_mnist_on_the_real_files():
    X, y = load_fashion_mnist(split="test", pairs="even-odd", dtype=np.float32)
    assert X.shape == (10_000, 784) and (y == 1).sum() == 5_000
    assert read_idx(FASHION_MNIST_DIR / "train-labels-idx1-ubyte.gz").shape == (60_000,)
