"""Bounded work on untrusted input (issue "Nothing lost, nobody fooled (II)").

- svmlight files: a line may hold at most ``max_line_bytes`` bytes and a compressed file may
  inflate to at most ``max_decompressed_bytes`` bytes, found while the stream is read (a 1 GB line
  in a 1 MB gzip file is a ValueError after 64 MiB, in bounded memory, not a MemoryError after a
  minute); a byte that is not UTF-8 is named by its own line; a damaged gzip / bz2 / xz stream is a
  ValueError naming the file.
- SequenceVectorizer: the window's work is bounded by the sequence (window=10**9 on two tokens
  is window=1), and a token with a lone surrogate is a ValueError naming its sequence and position.
"""
import bz2
import contextlib
import gzip
import lzma
import signal

import numpy as np
import pytest

from structfw.datasets import load_svmlight, load_svmlight_pair
from structfw.datasets import svmlight as svmlight_mod
from structfw.features import SequenceVectorizer, make_tagger
from test_untrusted_files import address_space_limit

COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}
MiB = 1 << 20


@contextlib.contextmanager
def no_hang(seconds=60):
    """A hang guard (not a timing check): what should take milliseconds raises after ``seconds``."""
    def alarm(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except TimeoutError as exc:  # raised afresh: the interrupted frames can be ones pytest cannot render
        raise AssertionError(f"a hang: {exc}") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _members(suffix, block, copies):
    """A compressed file of ``copies`` concatenated streams of ``block``: gzip, bz2 and xz all read
    concatenated streams as one, so a gigabyte of text costs one block's compression to build."""
    return COMPRESS[suffix](block) * copies


@pytest.fixture(autouse=True, scope="module")
def _warm_imports(tmp_path_factory):
    # scikit-learn's reader is imported on first use: not inside the address-space limits below
    f = tmp_path_factory.mktemp("warm") / "w.svm"
    f.write_text("1 1:1\n")
    load_svmlight(f)


# ------------------------------------------------------------------ svmlight: line length
@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_a_gigabyte_line_in_a_small_compressed_file_is_refused_early(tmp_path, suffix):
    f = tmp_path / f"line.svm{suffix}"
    f.write_bytes(_members(suffix, b"1 " + b"1:1 " * (MiB // 4), 1) + _members(suffix, b"1:1 " * (MiB // 4), 1023))
    assert f.stat().st_size < 2 * MiB  # 1 GiB of text
    for remap in (False, True):
        with no_hang(), address_space_limit(1 << 29):  # at most 512 MiB more: never the whole line
            # either bound may be passed first (both are 64 MiB for a file this small): both name the file
            with pytest.raises(ValueError, match=rf"line\.svm\{suffix}: (line 1 is longer than max_line_bytes="
                                                 rf"{svmlight_mod.MAX_LINE_BYTES} bytes|the \d+-byte \w+ file "
                                                 r"inflates to more than max_decompressed_bytes)"):
                load_svmlight(f, remap_features=remap)
    with pytest.raises(ValueError, match=r"line 1 is longer than max_line_bytes=1048576"):
        load_svmlight(f, max_line_bytes=MiB)


def test_the_line_bound_is_exact_and_names_the_line(tmp_path):
    f = tmp_path / "l.svm"
    line = b"1 1:1 2:1"
    f.write_bytes(b"0 1:1\n0 2:1\n" + line + b"\n0 3:1\n")
    assert load_svmlight(f, max_line_bytes=len(line))[0].shape == (4, 3)
    for remap in (False, True):
        with pytest.raises(ValueError, match=rf"l\.svm: line 3 is longer than max_line_bytes={len(line) - 1}"):
            load_svmlight(f, max_line_bytes=len(line) - 1, remap_features=remap)
    # a last line without a newline is bounded too
    f.write_bytes(b"0 1:1\n" + line)
    with pytest.raises(ValueError, match="line 2 is longer"):
        load_svmlight(f, max_line_bytes=len(line) - 1)


def test_a_long_line_spanning_many_pieces_is_found_within_a_piece(tmp_path):
    f = tmp_path / "p.svm"
    f.write_bytes(b"0 1:1\n" + b"1 " + b"1:1 " * (3 * MiB) + b"\n")  # 12 MiB: twelve pieces
    with pytest.raises(ValueError, match=r"p\.svm: line 2 is longer than max_line_bytes=1048576"):
        load_svmlight(f, max_line_bytes=MiB)
    with pytest.raises(ValueError, match=r"p\.svm: not an svmlight/LIBSVM file \(line 2: feature ids must increase"):
        load_svmlight(f, max_line_bytes=13 * MiB)  # within the bound the line is read, and parsed


# ------------------------------------------------------------------ svmlight: decompressed size
@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_a_compressed_stream_inflating_past_the_bound_is_refused(tmp_path, suffix):
    f = tmp_path / f"bomb.svm{suffix}"
    # valid examples with long comments: quick to parse, so the bound (not a parse error) stops it
    block = (b"1 1:1 #" + b"x" * (100_000 - 8) + b"\n") * 10
    f.write_bytes(_members(suffix, block, 100))  # 100 MB of text from a few kB
    limit = svmlight_mod.decompressed_limit(f.stat().st_size)
    assert limit == svmlight_mod.MAX_DECOMPRESSED_FLOOR < 100 * len(block)
    with no_hang(), address_space_limit(1 << 30):
        with pytest.raises(ValueError, match=rf"bomb\.svm\{suffix}: the {f.stat().st_size}-byte \w+ file inflates "
                                             rf"to more than max_decompressed_bytes={limit} bytes"):
            load_svmlight(f)
        with pytest.raises(ValueError, match=r"max_decompressed_bytes=2000000 bytes"):
            load_svmlight(f, max_decompressed_bytes=2_000_000, remap_features=True)
    X, y = load_svmlight(f, max_decompressed_bytes=100 * len(block), dense=False)
    assert X.shape == (1000, 1)


def test_the_decompressed_bound_grows_with_the_file():
    floor, per = svmlight_mod.MAX_DECOMPRESSED_FLOOR, svmlight_mod.DECOMPRESSED_PER_BYTE
    assert svmlight_mod.decompressed_limit(1) == floor
    assert svmlight_mod.decompressed_limit(10 * floor) == per * 10 * floor


def test_uncompressed_files_are_not_held_to_the_decompressed_bound(tmp_path):
    f = tmp_path / "plain.svm"
    f.write_bytes(b"1 1:1\n" * 1000)
    assert load_svmlight(f, max_decompressed_bytes=10)[0].shape == (1000, 1)


@pytest.mark.parametrize("kw,value", [("max_line_bytes", 0), ("max_line_bytes", True), ("max_line_bytes", 2.5),
                                      ("max_decompressed_bytes", -1), ("max_decompressed_bytes", "1GB")])
def test_the_bounds_are_checked(tmp_path, kw, value):
    f = tmp_path / "a.svm.gz"
    f.write_bytes(gzip.compress(b"1 1:1\n"))
    with pytest.raises(ValueError, match=rf"{kw} must be a positive integer"):
        load_svmlight(f, **{kw: value})


# ------------------------------------------------------------------ svmlight: text and streams
@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2", ".xz"])
def test_a_byte_that_is_not_utf8_is_named_by_its_line(tmp_path, suffix):
    lines = [b"1 1:1 2:0.5"] * 30
    lines[20] = b"1 1:1 2:0.5 # caf\xe9"
    text = b"\n".join(lines) + b"\n"
    f = tmp_path / f"u.svm{suffix}"
    f.write_bytes(COMPRESS[suffix](text) if suffix else text)
    for remap in (False, True):
        with pytest.raises(ValueError, match=r"u\.svm.*line 21 is not UTF-8 text: byte 18 of the line"):
            load_svmlight(f, remap_features=remap)


def test_utf8_text_reads_and_a_bad_byte_after_a_piece_is_still_on_its_line(tmp_path):
    f = tmp_path / "c.svm"
    head = "1 1:1 # café\n".encode() * 100_000  # 1.4 MB: the bad byte lies beyond the first piece
    f.write_bytes(head + b"0 2:1 # \xff\n")
    with pytest.raises(ValueError, match="line 100001 is not UTF-8"):
        load_svmlight(f, dense=False)
    f.write_bytes(head)
    assert load_svmlight(f, dense=False)[0].shape == (100_000, 1)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
@pytest.mark.parametrize("damage", ["truncated", "flipped", "not compressed"])
def test_a_damaged_compressed_stream_names_the_file(tmp_path, suffix, damage):
    good = COMPRESS[suffix](b"1 1:1 2:3\n" * 5000)
    bad = {"truncated": good[: len(good) // 2], "flipped": good[:24] + bytes([good[24] ^ 0xFF]) + good[25:],
           "not compressed": b"1 1:1 2:3\n"}[damage]
    f = tmp_path / f"d.svm{suffix}"
    f.write_bytes(bad)
    for remap in (False, True):
        with pytest.raises(ValueError, match=rf"d\.svm\{suffix}: cannot be read after line \d+"):
            load_svmlight(f, remap_features=remap)


def test_compressed_and_plain_files_read_alike(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(300):
        ids = np.sort(rng.choice(400, 5, replace=False)) + 1
        rows.append(f"{i % 3} " + " ".join(f"{j}:{rng.normal():.6g}" for j in ids) + (" # né" if i % 7 == 0 else ""))
    text = ("\n".join(rows) + "\n").encode()
    (tmp_path / "r.svm").write_bytes(text)
    X0, y0 = load_svmlight(tmp_path / "r.svm", dense=False)
    for suffix, compress in COMPRESS.items():
        (tmp_path / f"r.svm{suffix}").write_bytes(compress(text))
        X, y = load_svmlight(tmp_path / f"r.svm{suffix}", dense=False)
        np.testing.assert_array_equal(y, y0)
        assert (X != X0).nnz == 0
        Xr, yr, ids = load_svmlight(tmp_path / f"r.svm{suffix}", dense=False, remap_features=True)
        np.testing.assert_array_equal(Xr.toarray(), X0.toarray()[:, ids - 1])


def test_the_pair_passes_the_bounds_on(tmp_path):
    (tmp_path / "tr.gz").write_bytes(gzip.compress(b"1 1:1\n-1 2:1\n"))
    (tmp_path / "te.gz").write_bytes(gzip.compress(b"1 1:1 2:1 3:1 4:1\n"))
    with pytest.raises(ValueError, match=r"te\.gz: line 1 is longer than max_line_bytes=10"):
        load_svmlight_pair(tmp_path / "tr.gz", tmp_path / "te.gz", max_line_bytes=10)
    with pytest.raises(ValueError, match=r"tr\.gz: .*max_decompressed_bytes=5 bytes"):
        load_svmlight_pair(tmp_path / "tr.gz", tmp_path / "te.gz", max_decompressed_bytes=5)
    assert load_svmlight_pair(tmp_path / "tr.gz", tmp_path / "te.gz")[2].shape == (1, 4)


# ------------------------------------------------------------------ SequenceVectorizer: window
@pytest.mark.parametrize("hashing", [False, True])
def test_a_huge_window_is_the_whole_sequence(hashing):
    X = [["The", "cat"], ["A", "dog", "barks"], ["Hi"]]
    big = SequenceVectorizer(window=10 ** 9, hashing=hashing, n_features=2 ** 12 if hashing else None)
    whole = SequenceVectorizer(window=2, hashing=hashing, n_features=2 ** 12 if hashing else None)
    with no_hang():
        A = big.fit_transform(X)
        A2 = big.transform([["x"] * 50])
    B = whole.fit_transform(X)
    for a, b in zip(A, B):
        assert (a != b).nnz == 0
    if not hashing:
        assert big.vocabulary_ == whole.vocabulary_
    assert A2[0].shape[0] == 50


def test_a_huge_window_on_dict_input():
    X = [[{"w": "a"}, {"w": "b", "n": 2.0}]]
    with no_hang():
        big = SequenceVectorizer(window=10 ** 12, hashing=False).fit(X)
    assert sorted(big.vocabulary_) == sorted(SequenceVectorizer(window=1, hashing=False).fit(X).vocabulary_)


@pytest.mark.parametrize("window", [-1, 1.5, True, "3", None, np.float64(2.0)])
def test_the_window_is_checked_at_fit(window):
    with pytest.raises(ValueError, match=r"window must be an integer >= 0"):
        SequenceVectorizer(window=window).fit([["a", "b"]])


def test_numpy_integer_windows_are_windows():
    X = [["a", "b", "c"]]
    a = SequenceVectorizer(window=np.int64(1), hashing=False).fit(X)
    with no_hang():
        b = SequenceVectorizer(window=np.uint64(2 ** 63), hashing=False).fit(X)
    assert set(a.vocabulary_) <= set(b.vocabulary_)


# ------------------------------------------------------------------ SequenceVectorizer: lone surrogates
@pytest.mark.parametrize("hashing", [True, False])
@pytest.mark.parametrize("X,where", [
    ([["ok"], ["a", "\ud800"]], r"X\[1\]\[1\] \(token 1 of sequence 1\)"),
    ([["b\udce9t"]], r"X\[0\]\[0\] \(token 0 of sequence 0\)"),
    ([[{"w": "ok"}, {"w": "\ud800"}]], r"X\[0\]\[1\]\['w'\]"),
    ([[{"\udfff": 1.0}]], r"X\[0\]\[0\], the feature name"),
    ([[{"tags": ["fine", "\ud83d"]}]], r"X\[0\]\[0\]\['tags'\]"),
])
def test_a_lone_surrogate_is_a_value_error_naming_sequence_and_position(hashing, X, where):
    with pytest.raises(ValueError, match=where + r".*not valid Unicode text: a lone surrogate"):
        SequenceVectorizer(hashing=hashing).fit_transform(X)


def test_the_surrogate_is_located_in_its_token():
    with pytest.raises(ValueError, match=r"a lone surrogate '\\udce9' at character 1"):
        SequenceVectorizer().fit([["b\udce9t"]])


@pytest.mark.parametrize("hashing", [True, False])
def test_a_lone_surrogate_at_transform_is_named_too(hashing):
    vec = SequenceVectorizer(hashing=hashing).fit([["fine", "words"]])
    with pytest.raises(ValueError, match=r"X\[0\]\[2\] \(token 2 of sequence 0\)"):
        vec.transform([["a", "b", "\udc80"]])


def test_valid_unicode_tokens_are_features():
    X = [["café", "😀", "naïve"]]  # a non-BMP character is one code point, valid UTF-8
    for hashing in (True, False):
        out = SequenceVectorizer(hashing=hashing).fit_transform(X)
        assert out[0].shape[0] == 3 and out[0].nnz > 0


def test_the_tagger_refuses_a_lone_surrogate_before_training():
    tagger = make_tagger(2, max_passes=1)
    with pytest.raises(ValueError, match=r"X\[0\]\[1\]"):
        tagger.fit([["a", "\ud800"]], [[0, 1]])


def test_a_pixel_window_wider_than_the_image_is_refused_naming_it():
    """PixelFeatures' window filters cost grows with the window (10**9 + 1 ran for minutes on a
    20 x 20 image): a window wider than the image's reflected neighbourhood is refused."""
    pytest.importorskip("skimage")
    from structfw.features import PixelFeatures
    img = np.random.default_rng(0).random((20, 20))
    with pytest.raises(ValueError, match=r"window=1000000001 is wider than X\[0\] \(20 x 20 pixels\).*<= 41"):
        PixelFeatures(output="grid", window=10 ** 9 + 1, features=("lbp", "gradient")).fit_transform([img])
    out = PixelFeatures(output="grid", window=41, features=("lbp", "gradient")).fit_transform([img])
    assert out[0].shape[:2] == (20, 20)
