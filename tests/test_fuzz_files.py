"""Fuzzing every file structfw reads (issue "Nothing lost, nobody fooled (II)"; slow suite).

The promise checked: a file that cannot be read is a ValueError (or a structfw subclass of it)
whose message names the file -- never another exception, a MemoryError, a crash or a hang.
The readers: model files (``structfw.load`` of an estimator's ``.save()``), trace files
(`Trace.from_json`, `Trace.from_csv`), regularisation-path files (`RegularizationPath.from_json`)
and svmlight files, plain and gzip'd (`load_svmlight`).

Each case is read in a child process (forked once per target, replaced after a crash or a hang)
under `test_untrusted_files.address_space_limit` (1 GiB more than the child starts with), so
that a huge allocation is a MemoryError -- counted as a failure -- instead of swapping the machine,
and a segfault or an endless loop is caught by the parent (a case gets ``CASE_SECONDS``).

Inputs (hypothesis, derandomized): random bytes; a valid file with bytes overwritten, truncated,
or a range deleted, duplicated or filled with random bytes; a number of a text file replaced by a
crafted one (nan, inf, 1e308, 1e309, -1, 2**63, 500 digits, ...); a field replaced -- a JSON
value of a trace or path, a header field or an array of a model file (rewritten with its digest
recomputed, as a forger would), a token of an svmlight line; and, for gzip'd svmlight, a valid
stream followed by 100 MiB of one line or of commented lines.

``STRUCTFW_FUZZ_CASES`` sets the cases per target (default 500: the six targets take about 40 s
here); every test prints its counts, and the module the total, for quoting.  A failure found in a
reader of another change is listed in `KNOWN` (its target's test is an xfail while nothing else
fails) and has a reproducer test at the end, an xfail until it is fixed.
"""
import gzip
import json
import math
import multiprocessing
import os
import re
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import structfw as sf  # noqa: E402
from structfw import io as sfio  # noqa: E402
from structfw.datasets import load_svmlight  # noqa: E402
from structfw.path import RegularizationPath, regularization_path  # noqa: E402
from structfw.trace import Trace  # noqa: E402
from test_untrusted_files import address_space_limit  # noqa: E402
from toy import make_toy  # noqa: E402

CASES = int(os.environ.get("STRUCTFW_FUZZ_CASES", "500"))
CASE_SECONDS = float(os.environ.get("STRUCTFW_FUZZ_CASE_SECONDS", "30"))
#: the child's address space: this much more than it starts with
CHILD_EXTRA_BYTES = 1 << 30

#: target -> file suffix
SUFFIX = {"model": ".npz", "trace-json": ".json", "trace-csv": ".csv", "path": ".json", "svmlight": ".svm",
          "svmlight-gz": ".svm.gz"}
TARGETS = list(SUFFIX)

CRAFTED_NUMBERS = [b"nan", b"NaN", b"-nan", b"inf", b"-inf", b"Infinity", b"-Infinity", b"1e308", b"-1e308", b"1e309",
                   b"1e-320", b"-1", b"0", b"-0", b"0.5", b"2147483648", b"-2147483649", b"9223372036854775808",
                   b"18446744073709551616", b"1" * 30, b"9" * 500, b"1e", b"", b"--1", b"0x10", b"1_000", b"+5"]
CRAFTED_JSON = [None, True, -1, 0, 2 ** 63, -(2 ** 63), 10 ** 400, 1e308, -1e308, 1e-320, math.nan, math.inf,
                -math.inf, "x", "", [], {}, [[[[[]]]]], [1e308] * 3, {"a": None}]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")

#: Failures found by this fuzz in readers outside its owner's files, reported and awaiting their
#: fix (then remove the entry, and the xfail of the matching reproducer test below): target ->
#: [(regex on the failure, what it is)].  A case matching one counts as "known"; the target's test is
#: then an xfail, while any other failure still fails it.
KNOWN: dict[str, list[tuple[str, str]]] = {}


# ------------------------------------------------------------------ the readers (in the child)
def _read_svmlight(path):
    for remap in (False, True):
        out = load_svmlight(path, dense=False, remap_features=remap)
        X, y = out[0], out[1]
        # what a file that loads must give: finite values, one label per row
        assert np.isfinite(X.data).all() and np.isfinite(y).all(), "non-finite values loaded"
        assert X.shape[0] == y.shape[0], "rows and labels disagree"


READERS = {
    "model": lambda p: sf.load(p),
    "trace-json": lambda p: Trace.from_json(Path(p)),
    "trace-csv": lambda p: Trace.from_csv(Path(p)),
    "path": lambda p: RegularizationPath.from_json(Path(p)),
    "svmlight": _read_svmlight,
    "svmlight-gz": _read_svmlight,
}


def _allowed(exc):
    """ValueError itself, or a subclass structfw defines (its message is structfw's)."""
    return type(exc) is ValueError or type(exc).__module__.startswith("structfw")


def _attempt(target, path):
    """(outcome, detail): "loaded", "refused" (a ValueError naming the file), or "failed"."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            READERS[target](path)
    except ValueError as exc:
        msg = str(exc)
        if not _allowed(exc):
            return "failed", f"{type(exc).__module__}.{type(exc).__name__} (not a plain ValueError): {msg[:300]}"
        if Path(path).name not in msg:
            return "failed", f"ValueError not naming the file: {msg[:300]}"
        return "refused", msg[:300]
    except MemoryError:
        return "failed", "MemoryError (a huge allocation)"
    except BaseException as exc:  # noqa: BLE001 - every other exception breaks the promise
        return "failed", f"{type(exc).__module__}.{type(exc).__name__}: {str(exc)[:300]}"
    return "loaded", ""


def _worker(conn):
    with address_space_limit(CHILD_EXTRA_BYTES):
        while True:
            msg = conn.recv()
            if msg is None:
                return
            conn.send(_attempt(*msg))


class Child:
    """A forked reader process: `run` sends it a case and waits at most CASE_SECONDS."""

    def __init__(self):
        self._ctx = multiprocessing.get_context("fork")
        self._start()

    def _start(self):
        self.conn, theirs = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=_worker, args=(theirs,), daemon=True)
        self.proc.start()
        theirs.close()

    def _restart(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()
        self._start()

    def run(self, target, path):
        self.conn.send((target, str(path)))
        if not self.conn.poll(CASE_SECONDS):
            self._restart()
            return "failed", f"a hang: no answer within {CASE_SECONDS:g} s"
        try:
            return self.conn.recv()
        except EOFError:
            self.proc.join()
            code = self.proc.exitcode
            self._restart()
            return "failed", f"a crash: the reader's process died (exit code {code})"

    def close(self):
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


# ------------------------------------------------------------------ the valid files
def _model_files(d):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 4))
    y = np.arange(20) % 3
    est = sf.StructuredSVM(sf.models.MulticlassModel(3, 4), lam=0.1, max_passes=3, tol=None, random_state=0)
    est.fit(X, y)
    out = {"multiclass": est.save(d / "multiclass"), "multiclass-state": est.save(d / "multiclass-state", state=True)}
    Xc = [rng.normal(size=(L, 3)) for L in (2, 3, 4)]
    Yc = [rng.integers(0, 2, size=L) for L in (2, 3, 4)]
    chain = sf.StructuredSVM(sf.models.ChainModel(2, 3), lam=0.1, max_passes=2, tol=None, random_state=0).fit(Xc, Yc)
    out["chain"] = chain.save(d / "chain")
    return {k: Path(v).read_bytes() for k, v in out.items()}, est


def _svmlight_texts():
    return {
        "a9a-like": b"-1 3:1 11:1 14:1 19:1 39:1 \n+1 5:1 7:1 123:1 \n-1 1:1 2:1 \n",
        "values": b"1 1:0.5 2:-1.25e-3 10:3\n2 qid:3 2:1 4:7.5 # a comment\n0 0:1 5:2\n\n3 1:1e150\n",
    }


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """target -> {name: bytes of a valid file}."""
    d = tmp_path_factory.mktemp("seeds")
    models, est = _model_files(d)
    est.trace_.save(d / "t.json")
    est.trace_.save(d / "t.csv")
    model, X, Y = make_toy(n=5, m=4, d=3, seed=3)
    path = regularization_path(model, X, Y, eps=0.3, min_lam=0.3, random_state=0)
    texts = _svmlight_texts()
    return {
        "model": models,
        "trace-json": {"trace": (d / "t.json").read_bytes(),
                       "small": b'{"meta": {"a": 1}, "columns": {"x": [1, null]}}'},
        "trace-csv": {"trace": (d / "t.csv").read_bytes(), "small": b"passes,gap\n1,0.5\n2,nan\n"},
        "path": {"path": path.to_json().encode()},
        "svmlight": texts,
        "svmlight-gz": {k: gzip.compress(v, mtime=0) for k, v in texts.items()},
    }


@pytest.fixture(scope="module")
def child(seeds):  # forked after the seeds are built: the child starts with everything imported
    c = Child()
    yield c
    c.close()


def _say(config, line):
    """A line on the terminal, whatever the capture mode (the counts are there to be quoted)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:  # pragma: no cover - pytest without its terminal
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


@pytest.fixture(scope="module")
def totals(request):
    counts = {}
    yield counts
    if counts:
        _say(request.config, f"fuzzed files: {sum(counts.values())} cases in all "
                             f"({', '.join(f'{k} {v}' for k, v in counts.items())})")


# ------------------------------------------------------------------ mutations
def _json_nodes(doc, path=()):
    yield path
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _json_nodes(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _json_nodes(v, path + (i,))


def _set(doc, path, value):
    if not path:
        return value
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


def _replace_json_field(draw, data):
    doc = json.loads(data)
    nodes = list(_json_nodes(doc))
    where = draw(st.sampled_from(nodes))
    value = draw(st.sampled_from(CRAFTED_JSON))
    text = json.dumps(_set(doc, where, value))  # NaN / Infinity written as JSON's non-standard tokens
    return f"field {where} = {value!r:.40}", text.encode()


def _replace_model_field(draw, data, tmp):
    src = tmp / "seed.npz"
    src.write_bytes(data)
    header, arrays = sfio.read_model_file(src, "StructuredSVM")
    header, arrays = json.loads(json.dumps(dict(header))), dict(arrays)
    texts = {k: str(v[()]) for k, v in arrays.items() if v.dtype.kind == "U"}
    arrays = {k: v for k, v in arrays.items() if v.dtype.kind != "U"}
    if draw(st.booleans()) and arrays:
        name = draw(st.sampled_from(sorted(arrays)))
        a = arrays[name]
        how = draw(st.sampled_from(["nan", "inf", "1e308", "-1", "2**62", "empty", "extra", "reshape", "int", "bool"]))
        if how in ("nan", "inf", "1e308", "-1", "2**62") and a.size:
            a = a.astype(np.float64 if how in ("nan", "inf", "1e308") and a.dtype.kind != "f" else a.dtype)
            a.flat[draw(st.integers(0, a.size - 1))] = {"nan": np.nan, "inf": np.inf, "1e308": 1e308, "-1": -1,
                                                        "2**62": 2 ** 62 if a.dtype.kind in "iu" else 2.0 ** 62}[how]
        elif how == "empty":
            a = a[:0]
        elif how == "extra":
            a = np.concatenate([a.reshape(-1), a.reshape(-1)[:1]]) if a.size else np.zeros(3)
        elif how == "reshape":
            a = a.reshape(-1)[:, None] if a.ndim != 2 else a.T.copy()
        elif how == "int":
            a = a.astype(np.int64) if a.dtype.kind == "f" else a.astype(np.float64)
        else:
            a = a != 0
        arrays[name] = a
        what = f"array {name} {how}"
    else:
        where = draw(st.sampled_from([p for p in _json_nodes(header) if p]))
        value = draw(st.sampled_from([v for v in CRAFTED_JSON
                                      if not (isinstance(v, float) and not math.isfinite(v))]))
        header = _set(header, where, value)
        what = f"header {where} = {value!r:.40}"
    try:
        out = sfio.write_model_file(tmp / "forged.npz", "StructuredSVM", header, arrays, texts=texts)
    except (ValueError, TypeError):  # not writable (a reserved key, a non-JSON value): keep the seed
        return what + " (unwritable: seed kept)", data
    return what, Path(out).read_bytes()


def _replace_svmlight_token(draw, text):
    lines = text.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    toks = lines[i].split(b" ")
    j = draw(st.integers(0, len(toks) - 1))
    crafted = draw(st.sampled_from(CRAFTED_NUMBERS + [b"qid", b"qid:1", b":", b"1:", b":1", b"#", b"\xff", b"\x00"]))
    part = draw(st.sampled_from(["id", "value", "whole"]))
    key, sep, val = toks[j].partition(b":")
    toks[j] = (crafted + b":" + (val or b"1") if part == "id" else key + b":" + crafted if part == "value"
               else crafted)
    lines[i] = b" ".join(toks)
    return f"line {i + 1} token {j} {part} = {crafted[:20]!r}", b"\n".join(lines)


@st.composite
def cases(draw, target, seeds, tmp):
    """(description, bytes) of one fuzzed file of ``target``."""
    how = draw(st.sampled_from(["random", "overwrite", "truncate", "delete", "duplicate", "insert", "number",
                                "field", "field"]))
    if how == "random":
        data = draw(st.binary(max_size=2048))
        return f"random {len(data)} bytes", data
    name = draw(st.sampled_from(sorted(seeds[target])))
    data = seeds[target][name]
    gz = target == "svmlight-gz"
    if gz and draw(st.integers(0, 19)) == 0:  # now and then a stream inflating to 100 MiB (~10 kB of gzip)
        # one line (the line bound), or commented lines (the decompressed bound; short lines would take
        # seconds to parse before it)
        line = draw(st.sampled_from([b"1:1 ", b"#" * 64, b"\n1 1:1 #" + b"x" * 1000]))
        return f"{name}: + 100 MiB of {line!r}", data + gzip.compress(line * ((1 << 20) // len(line)), mtime=0) * 100
    if how in ("number", "field") and gz:  # a crafted text, compressed as a valid stream
        what, text = _text_mutation(draw, how, "svmlight", gzip.decompress(data), tmp)
        return f"{name}: {what} (gzip'd)", gzip.compress(text, mtime=0)
    if how in ("number", "field"):
        what, data = _text_mutation(draw, how, target, data, tmp)
        return f"{name}: {what}", data
    n = len(data)
    if how == "truncate":
        cut = draw(st.integers(0, n - 1))
        return f"{name}: truncated to {cut} bytes", data[:cut]
    a = draw(st.integers(0, n - 1))
    b = min(n, a + draw(st.integers(1, 64)))
    if how == "overwrite":
        junk = draw(st.binary(min_size=1, max_size=8))
        return f"{name}: bytes {a}.. overwritten with {junk!r}", data[:a] + junk + data[a + len(junk):]
    if how == "delete":
        return f"{name}: bytes {a}:{b} deleted", data[:a] + data[b:]
    if how == "duplicate":
        return f"{name}: bytes {a}:{b} duplicated", data[:b] + data[a:b] + data[b:]
    junk = draw(st.binary(min_size=1, max_size=64))
    return f"{name}: {junk!r:.60} inserted at {a}", data[:a] + junk + data[a:]


def _text_mutation(draw, how, target, data, tmp):
    if target == "model":  # a binary file: its numbers are edited as fields
        return _replace_model_field(draw, data, tmp)
    if how == "field" and target in ("trace-json", "path"):
        return _replace_json_field(draw, data)
    if how == "field" and target == "svmlight":
        return _replace_svmlight_token(draw, data)
    numbers = list(_NUMBER.finditer(data))
    if not numbers:
        return "no number to replace", data
    m = numbers[draw(st.integers(0, len(numbers) - 1))]
    crafted = draw(st.sampled_from(CRAFTED_NUMBERS))
    return (f"number {m.group()[:20]!r} at byte {m.start()} -> {crafted[:20]!r}",
            data[:m.start()] + crafted + data[m.end():])


# ------------------------------------------------------------------ the test
def _known(target, detail):
    return next((what for pattern, what in KNOWN.get(target, []) if re.search(pattern, detail)), None)


def _fuzz(target, seeds, child, tmp, totals, config):
    counts = {"loaded": 0, "refused": 0, "failed": 0, "known": 0}
    failures, known = [], {}
    suffix = SUFFIX[target]

    @settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(target, seeds, tmp))
    def fuzz(case):
        what, data = case
        path = tmp / f"case{suffix}"
        path.write_bytes(data)
        outcome, detail = child.run(target, path)
        which = _known(target, detail) if outcome == "failed" else None
        if which is not None:
            outcome = "known"
            known.setdefault(which, f"{what}: {detail}")
        counts[outcome] += 1
        if outcome == "failed" and len(failures) < 20:
            kept = tmp / f"failure-{len(failures)}{suffix}"
            kept.write_bytes(data)
            failures.append(f"{what}: {detail}\n    reproducer: {kept}"
                            + (f" = {data!r}" if len(data) <= 300 else ""))

    fuzz()
    n = sum(counts.values())
    totals[target] = n
    _say(config, f"fuzzed {target} files: {n} cases: {counts['refused']} refused, {counts['loaded']} loaded, "
                 f"{counts['failed']} failed" + (f", {counts['known']} known failures" if counts["known"] else ""))
    assert counts["refused"] > 0, "no case was refused: the mutations do not reach the reader"
    assert not failures, f"{counts['failed']} of {n} {target} cases broke the promise:\n" + "\n".join(failures)
    if known:
        pytest.xfail(f"{counts['known']} of {n} cases hit known failures: "
                     + "; ".join(f"{which} (e.g. {example[:200]})" for which, example in known.items()))


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_fuzzed_files_fail_only_with_value_errors_naming_the_file(target, seeds, child, tmp_path, totals, request):
    _fuzz(target, seeds, child, tmp_path, totals, request.config)


@pytest.mark.slow
def test_the_child_reports_a_crash_a_hang_and_a_memory_error(child, tmp_path):
    """The guard itself: what the fuzz would count as failures is reported as failures."""
    p = tmp_path / "x.svm"
    p.write_bytes(b"1 1:1\n")
    assert child.run("svmlight", p) == ("loaded", "")
    READERS["crash"] = lambda path: os._exit(3)
    READERS["hang"] = lambda path: __import__("time").sleep(3600)
    READERS["huge"] = lambda path: np.ones(1 << 33)
    READERS["other"] = lambda path: {}["x"]
    READERS["unnamed"] = lambda path: int("x")
    global CASE_SECONDS
    try:
        c = Child()  # forked with the extra readers
        saved, CASE_SECONDS = CASE_SECONDS, 2.0
        try:
            assert c.run("crash", p)[1].startswith("a crash")
            assert c.run("hang", p)[1].startswith("a hang")
            assert c.run("huge", p)[1].startswith("MemoryError")
            assert "KeyError" in c.run("other", p)[1]
            assert "not naming the file" in c.run("unnamed", p)[1]
            assert c.run("svmlight", p) == ("loaded", "")
        finally:
            CASE_SECONDS = saved
            c.close()
    finally:
        for k in ("crash", "hang", "huge", "other", "unnamed"):
            READERS.pop(k)


# ------------------------------------------------------------------ the known failures, as reproducers
def _saved_model(tmp_path):
    """(header, arrays, texts) of a small saved model, for write_model_file to rewrite."""
    rng = np.random.default_rng(0)
    est = sf.StructuredSVM(sf.models.MulticlassModel(3, 4), lam=0.1, max_passes=2, tol=None, random_state=0)
    est.fit(rng.normal(size=(12, 4)), np.arange(12) % 3)
    header, arrays = sfio.read_model_file(est.save(tmp_path / "m"), "StructuredSVM")
    arrays = dict(arrays)
    return dict(header), arrays, {"trace": str(arrays.pop("trace")[()])}


# Found by the fuzz above (io.header_float, solvers.problem.check_lam, path._validated_fields): a JSON
# integer beyond float range raised OverflowError; kept as regression tests.
def test_a_huge_integer_in_a_model_header_is_a_value_error(tmp_path):
    # reproducer: a valid model file whose header field "dual" is rewritten to 10**400 and the digest
    # recomputed (sfio.write_model_file); structfw.load raises OverflowError from io.header_float
    header, arrays, texts = _saved_model(tmp_path)
    header["dual"] = 10 ** 400
    f = sfio.write_model_file(tmp_path / "forged", "StructuredSVM", header, arrays, texts=texts)
    with pytest.raises(ValueError, match=r"forged\.npz.*'dual'"):
        sf.load(f)


def test_a_huge_integer_lam_in_a_model_file_is_a_value_error(tmp_path):
    # reproducer: the header's "params" "lam" rewritten to 10**400 (digest recomputed); structfw.load
    # raises OverflowError from solvers.problem.check_lam (StructuredSVM(lam=10**400).fit does too)
    header, arrays, texts = _saved_model(tmp_path)
    header["params"] = dict(header["params"], lam=10 ** 400)
    f = sfio.write_model_file(tmp_path / "forged", "StructuredSVM", header, arrays, texts=texts)
    with pytest.raises(ValueError, match=r"forged\.npz.*lam"):
        sf.load(f)


def test_a_huge_integer_in_a_path_file_is_a_value_error(tmp_path):
    # reproducer: a valid path JSON with "kappa": 10**400; RegularizationPath.from_json raises
    # OverflowError from path._validated_fields' real()
    model, X, Y = make_toy(n=5, m=4, d=3, seed=3)
    doc = json.loads(regularization_path(model, X, Y, eps=0.3, min_lam=0.3, random_state=0).to_json())
    doc["kappa"] = 10 ** 400
    f = tmp_path / "kappa.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"kappa\.json.*'kappa'"):
        RegularizationPath.from_json(f)
