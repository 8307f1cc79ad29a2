"""`structfw bench sharded` with executors and memory (issue 52), and the memory readings under it.

`structfw._memory` reads this process's resident set and its peak from /proc/self/status and
restarts the peak; a shard's worker (`ShardHost`) records its resident set at start as a baseline
and answers "memory" with it and its peak since; a sharded solve on workers leaves every worker's
reading in its trace's meta, and the benchmark reports the largest worker's peak above its baseline
beside the serial fits' own peaks.  Memory figures exist on Linux only (skipped elsewhere).
"""
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from structfw import _memory
from structfw_bench import sharded as bench
from structfw.solvers import Problem, StopRule
from structfw.solvers.sharded import ShardedBCFW, ShardHost

LINUX = sys.platform.startswith("linux")
MB = 2 ** 20
needs_proc = pytest.mark.skipif(not LINUX, reason="VmRSS and VmHWM are Linux's")


def _peak_resettable():
    if not _memory.reset_peak():
        pytest.skip("/proc/self/clear_refs is not writable here")


# ====================================================================== _memory
@needs_proc
def test_the_resident_set_and_its_peak_are_read_in_bytes():
    rss, peak = _memory.status_bytes("VmRSS"), _memory.status_bytes("VmHWM")
    assert isinstance(rss, int) and rss > MB  # an interpreter with numpy is larger than a megabyte
    assert peak >= rss - 8 * MB  # the peak is never far below what is resident now


@needs_proc
def test_the_peak_restarts_from_the_current_resident_set_and_grows_with_what_is_touched():
    big = np.ones(40 * MB // 8)  # an earlier peak, freed
    del big
    _peak_resettable()
    rss = _memory.status_bytes("VmRSS")
    assert _memory.status_bytes("VmHWM") <= rss + 8 * MB
    block = np.ones(32 * MB // 8)
    assert _memory.status_bytes("VmHWM") - rss >= 30 * MB
    del block


def test_an_unknown_field_is_refused_by_name():
    with pytest.raises(ValueError, match=r"field: expected one of \('VmRSS', 'VmHWM'\), got 'VmSize'"):
        _memory.status_bytes("VmSize")


def test_without_proc_the_readings_are_none_and_the_reset_reports_false(monkeypatch, tmp_path):
    monkeypatch.setattr(_memory, "STATUS", tmp_path / "no-status")
    monkeypatch.setattr(_memory, "CLEAR_REFS", tmp_path / "no-dir" / "clear_refs")
    assert _memory.status_bytes("VmRSS") is None and _memory.status_bytes("VmHWM") is None
    assert _memory.reset_peak() is False


# ====================================================================== the worker's "memory"
def test_a_shard_host_answers_memory_before_its_load():
    host = ShardHost()
    status, mem = host.call("memory", ())
    assert status == "ok" and set(mem) == {"baseline", "peak"}
    if not LINUX:
        assert mem == {"baseline": None, "peak": None}
        return
    assert mem["baseline"] > MB and mem["peak"] > MB
    assert host.call("pid", ())[0] == "ok" and host.call("counters", ())[0] == "error"  # no shard yet


@needs_proc
def test_a_shard_hosts_peak_grows_above_its_baseline_with_what_it_touches():
    _peak_resettable()
    host = ShardHost()  # in this process: its baseline is this process's resident set now
    block = np.ones(32 * MB // 8)
    mem = host.call("memory", ())[1]
    assert mem["peak"] - mem["baseline"] >= 30 * MB
    del block


def _tiny_problem(n=24, S=3, F=4, seed=0):
    import structfw as sf

    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(1, 4)), F)) for _ in range(n)]
    Y = [rng.integers(0, S, x.shape[0]) for x in X]
    return Problem(sf.models.ChainModel(S, F), X, Y, 0.1)


@pytest.mark.slow  # 20 s of the default suite (cold cache, 2 cores): CI's slow stage runs it
def test_a_solve_on_processes_records_each_workers_memory_and_one_on_threads_none():
    problem = _tiny_problem()
    stop = StopRule(max_passes=2, tol=None)
    res = ShardedBCFW(shards=2, executor="process").solve(problem, stop, rng=0)
    workers = res.trace.meta["worker_memory"]
    assert len(workers) == 2 and all(set(w) == {"baseline", "peak"} for w in workers)
    if LINUX:
        assert all(w["baseline"] > MB and w["peak"] > MB for w in workers)
        assert bench.worker_peak(workers) >= 0
    threads = ShardedBCFW(shards=2, executor="thread").solve(problem, stop, rng=0)
    assert "worker_memory" not in threads.trace.meta


# ====================================================================== the benchmark
def test_the_largest_worker_above_its_baseline_is_the_workers_figure():
    assert bench.worker_peak([dict(baseline=10, peak=30), dict(baseline=5, peak=40)]) == 35
    assert bench.worker_peak([dict(baseline=10, peak=8)]) == 0  # a peak read just under the baseline
    assert bench.worker_peak([dict(baseline=None, peak=None)]) is None and bench.worker_peak(None) is None


def test_the_memory_ratio_is_to_the_least_serial_fit_per_seed():
    def run(executor, fit, worker=None):
        r = dict(executor=executor, time_s={"0.1": 1.0, "0.01": 2.0}, passes={"0.1": 1.0, "0.01": 2.0},
                 fit_memory_bytes=fit)
        if worker is not None:
            r["worker_peak_above_baseline_bytes"] = worker
        return r

    arms = bench.summarise({"serial A": [run("serial", 100), run("serial", 300)],
                            "serial B": [run("serial", 200), run("serial", 200)],
                            "K=2 thread": [run("thread", 150), run("thread", 100)],
                            "K=2 process": [run("process", 400, 50), run("process", 500, 120)]})
    assert arms["K=2 thread"]["median_memory_ratio_to_best_serial"] == pytest.approx(np.median([1.5, 0.5]))
    proc = arms["K=2 process"]
    assert proc["median_memory_ratio_to_best_serial"] == pytest.approx(np.median([0.5, 0.6]))
    assert proc["median_fit_memory_bytes"] == 450 and proc["median_worker_peak_above_baseline_bytes"] == 85
    assert proc["executor"] == "process" and arms["serial A"]["median_worker_peak_above_baseline_bytes"] is None


def test_the_executors_option_is_checked_by_name():
    assert bench.check_executors("thread, process,thread") == ["thread", "process"]
    with pytest.raises(ValueError, match=r"--executors: expected names among thread, process, ray, got 'gpu'"):
        bench.check_executors("thread,gpu")
    with pytest.raises(ValueError, match="--executors: expected a comma-separated list"):
        bench.check_executors(" , ")
    out = CliRunner().invoke(bench.bench_sharded, ["--executors", "fork"])
    assert out.exit_code == 2 and "--executors" in out.output and "'fork'" in out.output


def test_a_small_run_reports_time_and_memory_per_executor(tmp_path):
    doc = bench.run_sharded("0.01", 1, (2,), ["linesearch"], (0,), ["gap"], 3, 1, tmp_path, log=lambda _: None,
                            executors=("thread", "process"), subsample=200)
    arms = doc["arms"]
    assert doc["executors"] == ["thread", "process"] and (tmp_path / "sharded.json").exists()
    assert set(arms) == {"serial BCFW", "serial BCFW-gap", "serial BCPFW-gap", "K=2 thread linesearch m=auto gap",
                         "K=2 process linesearch m=auto gap"}
    proc = arms["K=2 process linesearch m=auto gap"]
    run = proc["runs"][0]
    assert proc["executor"] == "process" and len(run["worker_memory"]) == 2
    for name, arm in arms.items():
        assert {"median_time_s", "median_passes", "median_ratio_to_best_serial", "median_fit_memory_bytes",
                "median_memory_bytes", "median_memory_ratio_to_best_serial"} <= set(arm)
        assert "worker_memory" in arm["runs"][0] or arm["executor"] != "process"
    if LINUX and _memory.reset_peak():
        assert all(a["median_fit_memory_bytes"] >= 0 for a in arms.values())
        assert proc["median_worker_peak_above_baseline_bytes"] > 0
        assert all(w["peak"] > MB and w["baseline"] > MB for w in run["worker_memory"])
    table = bench.format_table(doc)
    assert "worker MB" in table and "K=2 process linesearch m=auto gap" in table


def test_the_conll_scale_chain_runs_at_small_size_and_its_options_are_checked(tmp_path):
    """--data conll-scale: the chunking chain's sparse rows on two threads, every arm to the targets or
    max_passes; --n-features is the chain's only."""
    doc = bench.run_sharded("0.01", 1, (2,), ["linesearch"], (0,), ["uniform"], 4, 2, tmp_path, log=lambda _: None,
                            data="conll-scale", subsample=40, n_features=300)
    assert doc["data"] == "conll-scale" and doc["n"] == 40 and doc["d"] == 22 * 300 + 22 ** 2
    assert set(doc["arms"]) >= {"serial BCFW", "K=2 thread linesearch m=auto uniform"}
    for arm in doc["arms"].values():
        gaps = arm["runs"][0]["curve"]["gap"]
        assert len(gaps) >= 2 and gaps[-1] < gaps[0]
    from click.testing import CliRunner

    out = CliRunner().invoke(bench.bench_sharded, ["--n-features", "100", "--out", str(tmp_path / "x")])
    assert out.exit_code == 2 and "--n-features applies to --data conll-scale" in out.output
