"""A fault costs one row: workers per backend, crashes and hangs as failed rows, files written as
rows finish, timed calls checked, flags. On the CPU with fixture submissions that crash, hang
and cheat (tests/fixtures/submissions); the GPU versions are in test_gpu_isolation.py."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nvgg import cases, clocks, isolation, runner, timing
from nvgg.cli import app
from nvgg.errors import NvggError
from nvgg.runner import Result

FIXTURES = Path(__file__).parent / "fixtures" / "submissions"
ROOT = Path(__file__).resolve().parent.parent
cli = CliRunner()


def _sub(name: str) -> str:
    return str(FIXTURES / f"{name}.py")


def test_compare_keeps_every_row_through_a_crash_and_a_hang(tmp_path):
    out_json, out_md = tmp_path / "c.json", tmp_path / "c.md"
    t0 = time.monotonic()
    out = cli.invoke(app, ["compare", "--case", "test-1,test-4,test-2", "--strategy", "sequential", "--backend", "torch",
                           "--submission", _sub("segfault"), "--submission", _sub("hang"), "--timeout", "8",
                           "--json", str(out_json), "--markdown", str(out_md)])
    wall = time.monotonic() - t0
    assert out.exit_code == 1, out.output
    rows = {(r["case"], r["source"] or r["strategy"]): r for r in json.loads(out_json.read_text())["results"]}
    assert len(rows) == 9
    assert rows[("test-4", "segfault.py")]["message"] == "crashed: the worker died (killed by SIGSEGV)"
    assert rows[("test-4", "hang.py")]["message"].startswith("timed out after 8 s")
    # the rows after the crash and the hang ran in new workers of the same submissions
    for case in ("test-1", "test-2"):
        for name in ("sequential", "segfault.py", "hang.py"):
            assert rows[(case, name)]["status"] == "ok" and rows[(case, name)]["stats"]["runs"] >= 3
    assert rows[("test-4", "sequential")]["status"] == "ok"
    assert "killed by SIGSEGV" in out_md.read_text() and "failed: test-4 submission[hang.py]" in out.stderr
    assert wall < 8 + 60


def test_a_killed_compare_leaves_valid_json_of_the_rows_done(tmp_path):
    out_json = tmp_path / "c.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "nvgg", "compare", "--case", "test-1,test-4,test-2", "--strategy",
                             "sequential", "--backend", "torch", "--submission", _sub("hang"), "--timeout", "120",
                             "--json", str(out_json)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    done = []
    while time.monotonic() < deadline and len(done) < 3:  # test-1's two rows and test-4's torch row
        time.sleep(0.5)
        if out_json.exists():
            done = json.loads(out_json.read_text())["results"]
    assert len(done) == 3, done
    time.sleep(2)  # the hang's worker is in its sleep now
    workers = subprocess.run(["pgrep", "-f", "nvgg.isolation"], capture_output=True, text=True).stdout.split()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    rows = json.loads(out_json.read_text())["results"]
    assert [(r["case"], r["status"]) for r in rows] == [("test-1", "ok"), ("test-1", "ok"), ("test-4", "ok")]
    time.sleep(1)
    assert workers and not [pid for pid in workers if _running(pid)], "a worker outlived its killed parent"


def _running(pid) -> bool:
    """A process that exists and is no zombie (a killed worker whose reaper has not reaped it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_kept_results_fail_the_timed_check():
    res = runner.run_many([runner.Row(cases.get("test-1"), submission=_sub("kept"))])[0]
    assert res.status == "wrong" and res.message.startswith("right when checked, wrong when timed on new inputs")
    assert res.checked_inputs == 1  # right when checked (a CPU run checks its first input)


def test_an_honest_submission_is_right_when_timed_too():
    res = runner.run_many([runner.Row(cases.get("test-2"), submission=_sub("honest"))])[0]
    assert res.status == "ok" and not res.flags and res.source == "honest.py", res.message


def test_workers_are_kept_across_rows_of_a_key_and_replaced_after_a_crash():
    with isolation.Pool(30) as pool:
        first = pool.call("a", isolation.Call("os:getpid", {}))
        assert pool.call("a", isolation.Call("os:getpid", {})) == first
        assert pool.call("b", isolation.Call("os:getpid", {})) != first
        with pytest.raises(isolation.RowFailure, match=r"crashed: the worker died \(exit code 7\)"):
            pool.call("a", isolation.Call("os:_exit", {"status": 7}))
        assert pool.call("a", isolation.Call("os:getpid", {})) not in (first, None)


def test_a_raising_call_keeps_its_worker_and_an_expected_failure_stays_one():
    with isolation.Pool(30) as pool:
        pid = pool.call("a", isolation.Call("os:getpid", {}))
        with pytest.raises(isolation.RowError, match="JSONDecodeError: Expecting value"):
            pool.call("a", isolation.Call("json:loads", {"s": "x"}))
        with pytest.raises(NvggError, match="unknown case 'nope'"):
            pool.call("a", isolation.Call("nvgg.cases:get", {"id": "nope"}))
        assert pool.call("a", isolation.Call("os:getpid", {})) == pid


def test_a_call_past_the_timeout_is_killed():
    with isolation.Pool(2) as pool:
        pid = pool.call("a", isolation.Call("os:getpid", {}))
        t0 = time.monotonic()
        with pytest.raises(isolation.RowFailure, match="timed out after 2 s"):
            pool.call("a", isolation.Call("subprocess:run", {"args": ["sleep", "60"]}))
        assert time.monotonic() - t0 < 10 and not _running(pid)


def test_in_process_mode_runs_in_this_process(monkeypatch):
    monkeypatch.setenv("NVGG_ISOLATION", "off")
    with isolation.Pool() as pool:
        assert pool.call("a", isolation.Call("os:getpid", {})) == os.getpid()
        with pytest.raises(isolation.RowError, match="JSONDecodeError"):
            pool.call("a", isolation.Call("json:loads", {"s": "x"}))


def test_cuda_reason_picks_the_cuda_error_out_of_a_message():
    msg = "launch failed: AcceleratorError: CUDA error: an illegal memory access was encountered\nSearch for ..."
    assert isolation.cuda_reason(msg) == "CUDA error: an illegal memory access was encountered"
    assert isolation.cuda_reason("RuntimeError: boom\nmore") == "RuntimeError: boom"


# --- flags: times that cannot be the work's, and clocks -----------------------------------------

def _result(mean_us, escaped_us=None, batch=15, sol_us=10.0, clocks_summary=None):
    from nvgg.sol import Sol
    stats = timing.Stats(runs=10, batch=batch, mean_us=mean_us, std_us=0.1, err_us=0.03, best_us=mean_us,
                         worst_us=mean_us, median_us=mean_us, method="leaderboard", clock="cuda events",
                         escaped_us=escaped_us)
    sol = Sol(case="3", profile="h100", data_path="fp16", bytes=1, flops=1, memory_us=sol_us, compute_us=1.0,
              sol_us=sol_us, bound="memory")
    return Result(case="3", strategy="submission", backend="submission", status="ok", stats=stats, sol=sol,
                  clocks=clocks_summary or {})


def test_a_time_below_the_speed_of_light_is_suspect():
    r = _result(0.109)
    r.flags = runner.flags_of(r)
    assert [f["kind"] for f in r.flags] == ["below-sol"] and r.suspect and not r.trusted
    assert "0.109 µs < 10.000 µs on h100" in r.flags[0]["text"]
    from nvgg import verdict
    assert verdict.judge(r).kind == "below-sol"
    from nvgg.report import check_text, geomeans
    assert check_text(r).startswith("SUSPECT: time below the speed of light")
    assert geomeans([r], {"3"}) == {}


def test_work_escaping_the_events_is_suspect_and_a_sync_is_not():
    # honest: a device synchronise after the end event takes ~10 µs a batch (0.7 µs a call), and
    # a torch submission's up to ~80 µs of a batch of milliseconds
    assert runner.flags_of(_result(100.0, escaped_us=0.7)) == []
    assert runner.flags_of(_result(2000.0, escaped_us=5.5)) == []
    # our kernel left on a side stream on case 3: 68 µs of a 368 µs batch
    assert [f["kind"] for f in runner.flags_of(_result(24.5, escaped_us=4.5, sol_us=13.0))] == ["escaped"]
    # 15 calls of ~100 µs left on another stream: the device runs ~1.5 ms past the end event
    flags = runner.flags_of(_result(12.0, escaped_us=95.0))
    assert [f["kind"] for f in flags] == ["escaped"] and "1425.0 µs a batch" in flags[0]["text"]


def test_throttled_samples_flag_the_row_with_reason_and_range():
    samples = [{"t": i * 0.05, "sm_mhz": mhz, "mem_mhz": 2619, "temp_c": 60 + i, "power_w": 690.0, "reasons": reasons}
               for i, (mhz, reasons) in enumerate([(1755, 0x1), (1410, 0x4), (1530, 0x4 | 0x1), (1755, 0)])]
    summary = clocks.summarise(samples)
    assert summary["sm_mhz"] == [1410, 1642.5, 1755] and summary["reasons"] == ["power cap"]
    assert summary["throttled"] == "throttled: power cap, SM clock 1410-1755 MHz in 50% of the samples while timed"
    r = _result(100.0, clocks_summary=summary)
    r.flags = runner.flags_of(r)
    assert [f["kind"] for f in r.flags] == ["throttled"] and not r.suspect and not r.trusted
    # idle and application-clock reasons are settings, not throttling
    calm = clocks.summarise([dict(s, reasons=0x1 | 0x2) for s in samples])
    assert calm["throttled"] == "" and calm["reasons"] == []


def test_the_sampler_says_why_it_sampled_nothing_on_a_cpu():
    import torch
    with clocks.Sampler(torch.device("cpu")) as s:
        pass
    assert s.summary() == {"samples": 0, "error": "no CUDA device: clocks not sampled", "throttled": ""}


def test_refilled_inputs_are_new_values_at_the_same_addresses():
    import torch
    from nvgg import inputs
    case = cases.get("test-4")
    data = inputs.generate(case, "cpu", seed=7)
    ptrs = [t.data_ptr() for group in data[0] for t in group]
    before = [t.view(torch.uint8).clone() for (a, b, _) in data[0] for t in (a, b)]
    inputs.refill(case, data, 0)
    assert [t.data_ptr() for group in data[0] for t in group] == ptrs
    after = [t.view(torch.uint8) for (a, b, _) in data[0] for t in (a, b)]
    assert all((x != y).float().mean() > 0.5 for x, y in zip(before, after))
    assert all(bool(c.isnan().all()) for _, _, c in data[0])
