"""``structfw train --data corpus --format conll|wordtag`` and ``structfw predict`` with a tagger file."""
import random

import pytest
from click.testing import CliRunner

from structfw.cli import main
from structfw.datasets.corpus_files import sniff_corpus_format

QUICK = ["--passes", "2", "--quiet"]
DETS, NOUNS, VERBS = ["the", "a", "every"], ["cat", "dog", "bird", "man"], ["sees", "likes", "chases"]
TRAIN_TAGS = {"DT", "NN", "VB"}


def invoke(args):
    return CliRunner().invoke(main, args)


def sentences(n=12, seed=0):
    """n toy sentences of (word, tag): DT NN VB DT NN."""
    r = random.Random(seed)
    return [[(r.choice(DETS), "DT"), (r.choice(NOUNS), "NN"), (r.choice(VERBS), "VB"), (r.choice(DETS), "DT"),
             (r.choice(NOUNS), "NN")] for _ in range(n)]


def write_conll(path, sents):
    path.write_text("\n\n".join("\n".join(f"{w}\t_\t{t}" for w, t in s) for s in sents) + "\n", encoding="utf-8")
    return path


def write_wordtag(path, sents):
    path.write_text("".join(" ".join(f"{w}/{t}" for w, t in s) + "\n" for s in sents), encoding="utf-8")
    return path


def assert_usage_error(res, *fragments):
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    for f in fragments:
        assert f in res.output, (f, res.output)


@pytest.fixture(scope="module")
def tagger_file(tmp_path_factory):
    """A tagger trained on a CoNLL file and saved (shared by the predict tests)."""
    tmp = tmp_path_factory.mktemp("tagger")
    data = write_conll(tmp / "train.conll", sentences())
    res = invoke(["train", "--data", str(data), "--save", str(tmp / "tagger.npz")] + QUICK)
    assert res.exit_code == 0, res.output
    return tmp / "tagger.npz"


# ------------------------------------------------------------------ train
@pytest.mark.parametrize("fmt", ["conll", "wordtag"])
def test_train_reads_a_corpus_file_and_saves_a_tagger(tmp_path, fmt):
    from structfw import load
    from structfw.features import Tagger

    write = write_conll if fmt == "conll" else write_wordtag
    data = write(tmp_path / "corpus.txt", sentences())  # no telling suffix: read by content (auto)
    res = invoke(["train", "--data", str(data), "--save", str(tmp_path / "t.npz")] + QUICK)
    assert res.exit_code == 0, res.output
    assert f"{fmt} corpus, 12 sentences, 60 tokens, 3 tags" in res.output
    assert "test error" in res.output and "stopped: max_passes" in res.output
    tagger = load(tmp_path / "t.npz")
    assert isinstance(tagger, Tagger)
    assert set(tagger.classes_.tolist()) == TRAIN_TAGS


def test_format_given_overrides_the_suffix(tmp_path):
    data = write_wordtag(tmp_path / "corpus.conll", sentences())
    res = invoke(["train", "--data", str(data), "--format", "wordtag"] + QUICK)
    assert res.exit_code == 0, res.output
    assert "wordtag corpus" in res.output


def test_sniffing_keeps_svmlight_and_tells_the_corpus_formats(tmp_path):
    (tmp_path / "a").write_text("1 3:0.5 7:1\n2 1:1\n")
    assert sniff_corpus_format(tmp_path / "a") == "svmlight"
    assert sniff_corpus_format(write_wordtag(tmp_path / "b", sentences(3))) == "wordtag"
    assert sniff_corpus_format(write_conll(tmp_path / "c", sentences(3))) == "conll"
    (tmp_path / "d").write_text("one\n")
    assert sniff_corpus_format(tmp_path / "d") is None  # unsure: train reads it as svmlight, as before


def test_a_model_other_than_chain_is_a_usage_error(tmp_path):
    data = write_conll(tmp_path / "c.conll", sentences())
    assert_usage_error(invoke(["train", "--data", str(data), "--model", "grid"] + QUICK), "--model grid",
                       "sequence tagger")


def test_format_for_a_named_set_is_a_usage_error():
    assert_usage_error(invoke(["train", "--data", "ocr", "--format", "conll"] + QUICK), "--format conll",
                       "named data set")


# ------------------------------------------------------------------ bad files name the file and the line
def _bad_conll(tmp_path):
    good = "\n".join(f"{w}\t_\t{t}" for w, t in sentences(1)[0])
    path = tmp_path / "bad.conll"
    path.write_text(good + "\n\nthe\tDT\n", encoding="utf-8")  # line 7 has 2 columns, the file 3
    return path, ["line 7", "2 columns", "line 1"]


def _empty_word(tmp_path):
    path = tmp_path / "bad.wordtag"
    path.write_text("the/DT cat/NN\na/DT /NN\n", encoding="utf-8")
    return path, ["line 2", "token 2", "empty word"]


def _empty_tag(tmp_path):
    path = tmp_path / "bad.wordtag"
    path.write_text("the/DT cat/\n", encoding="utf-8")
    return path, ["line 1", "token 2", "empty tag"]


def _no_slash(tmp_path):
    path = tmp_path / "bad.wordtag"
    path.write_text("the/DT cat/NN\n\nthe/DT dog\n", encoding="utf-8")
    return path, ["line 3", "'dog'", "no slash"]


def _not_utf8(tmp_path):
    path = tmp_path / "bad.conll"
    path.write_bytes(b"the\tDT\ncaf\xe9\tNN\n")
    return path, ["line 2", "not UTF-8"]


@pytest.mark.parametrize("make", [_bad_conll, _empty_word, _empty_tag, _no_slash, _not_utf8],
                         ids=["conll-columns", "empty-word", "empty-tag", "no-slash", "not-utf8"])
def test_a_malformed_corpus_file_names_the_file_and_the_line(tmp_path, make):
    path, fragments = make(tmp_path)
    assert_usage_error(invoke(["train", "--data", str(path)] + QUICK), f"--data {path}", *fragments)


def test_a_corpus_too_small_to_split_is_a_usage_error(tmp_path):
    data = write_wordtag(tmp_path / "c.wordtag", sentences(3))
    assert_usage_error(invoke(["train", "--data", str(data)] + QUICK), "3 sentences", "80/20")


# ------------------------------------------------------------------ predict
def test_predict_tags_a_raw_file_as_word_slash_tag_lines(tmp_path, tagger_file):
    raw = tmp_path / "raw.txt"
    raw.write_text("the cat sees a dog\n\nevery bird likes the man\nthe zebra\n", encoding="utf-8")
    out = tmp_path / "tags.txt"
    res = invoke(["predict", "--model", str(tagger_file), "--data", str(raw), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "3 sentences, 12 tokens tagged" in res.output
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == 5  # one output line per input line, the blank one kept
    assert lines[1] == ""
    for src, tagged in zip(raw.read_text().splitlines(), lines):
        pairs = [tok.rpartition("/") for tok in tagged.split()]
        assert [w for w, _, _ in pairs] == src.split()
        assert {t for _, _, t in pairs} <= TRAIN_TAGS


def test_predict_reads_and_writes_conll_columns(tmp_path, tagger_file):
    data = tmp_path / "in.conll"
    data.write_text("the\nbird\nsees\n\na\tX\tQQ\n", encoding="utf-8")  # first block untagged
    assert_usage_error(invoke(["predict", "--model", str(tagger_file), "--data", str(data), "--out",
                               str(tmp_path / "o.txt")]), "line 5", "3 columns")
    data.write_text("the\nbird\nsees\n\na\ncat\n", encoding="utf-8")
    out = tmp_path / "o.txt"
    res = invoke(["predict", "--model", str(tagger_file), "--data", str(data), "--out", str(out)])
    assert res.exit_code == 0, res.output
    blocks = out.read_text(encoding="utf-8").strip("\n").split("\n\n")
    assert len(blocks) == 2
    rows = [line.split("\t") for line in blocks[0].splitlines()]
    assert [r[0] for r in rows] == ["the", "bird", "sees"] and all(len(r) == 2 for r in rows)
    assert {r[1] for b in blocks for r in (line.split("\t") for line in b.splitlines())} <= TRAIN_TAGS


def test_predict_on_a_wordtag_file_reports_the_token_accuracy(tmp_path, tagger_file):
    data = write_wordtag(tmp_path / "held.wordtag", sentences(4, seed=1))
    res = invoke(["predict", "--model", str(tagger_file), "--data", str(data), "--out", str(tmp_path / "o.txt")])
    assert res.exit_code == 0, res.output
    assert "token accuracy" in res.output


def test_predict_options_that_do_not_apply_to_a_tagger_are_errors(tmp_path, tagger_file):
    raw = tmp_path / "raw.txt"
    raw.write_text("the cat\n", encoding="utf-8")
    base = ["predict", "--model", str(tagger_file), "--data", str(raw)]
    assert_usage_error(invoke(base + ["--out", str(tmp_path / "o.txt"), "--marginals"]), "--marginals",
                       "tagger file")
    assert_usage_error(invoke(base + ["--out", str(tmp_path / "o.json")]), "--out", "tagged text")


def test_predict_bad_raw_file_names_the_file_and_the_line(tmp_path, tagger_file):
    raw = tmp_path / "raw.txt"
    raw.write_bytes(b"the cat\nthe \xff dog\n")
    assert_usage_error(invoke(["predict", "--model", str(tagger_file), "--data", str(raw), "--out",
                               str(tmp_path / "o.txt")]), f"--data {raw}", "line 2", "not UTF-8")


def test_svmlight_files_still_train_and_predict_as_before(tmp_path):
    data = tmp_path / "d.txt"  # no telling suffix: the content says svmlight
    data.write_text("".join(f"{i % 2} 1:{i % 2 + 0.1 * i} 2:{1 - i % 2}\n" for i in range(10)))
    res = invoke(["train", "--data", str(data), "--save", str(tmp_path / "m.npz")] + QUICK)
    assert res.exit_code == 0, res.output
    assert "corpus" not in res.output and "test error" in res.output
    assert_usage_error(invoke(["predict", "--model", str(tmp_path / "m.npz"), "--data", str(data), "--format",
                               "conll", "--out", str(tmp_path / "o.json")]), "--format conll", "estimator")
    res = invoke(["predict", "--model", str(tmp_path / "m.npz"), "--data", str(data), "--out",
                  str(tmp_path / "o.json")])
    assert res.exit_code == 0, res.output


def test_a_file_auto_cannot_tell_says_which_format_to_give(tmp_path):
    data = tmp_path / "r.txt"
    data.write_text("the cat sat\na dog\n", encoding="utf-8")  # neither svmlight nor a tagged corpus
    assert_usage_error(invoke(["train", "--data", str(data)] + QUICK), "not an svmlight", "--format conll")
