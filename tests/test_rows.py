"""Rows scheduled in workers (nvgg/rows.py): a fault costs one row, the files are written as rows
finish, the timed calls are checked. On the CPU with fixture submissions that crash, hang and
cheat (tests/fixtures/submissions); the GPU versions are in test_rows_gpu.py."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT, running as _running, submission_path

from nvgg import cases, rows
from nvgg.result import Row
from nvgg.versions import Version


def test_compare_keeps_every_row_through_a_crash_and_a_hang(cli, tmp_path):
    # a row's limit of 8 s (its worker's start is not in it): a healthy CPU row takes the timer's
    # budget (NVGG_CPU_BUDGET_S, conftest) and its set-up, well inside that on a loaded 2-core machine
    out_json, out_md = tmp_path / "c.json", tmp_path / "c.md"
    t0 = time.monotonic()
    out = cli("compare", "--case", "test-1,test-4,test-2", "--strategy", "sequential", "--backend", "torch",
              "--submission", submission_path("segfault"), "--submission", submission_path("hang"), "--timeout", "8",
              "--json", str(out_json), "--markdown", str(out_md))
    wall = time.monotonic() - t0
    assert out.exit_code == 1, out.output
    found = {(r["case"], r["source"] or r["strategy"]): r for r in json.loads(out_json.read_text())["results"]}
    assert len(found) == 9
    assert found[("test-4", "segfault.py")]["message"].startswith("crashed: the process died (killed by SIGSEGV)")
    assert found[("test-4", "hang.py")]["message"].startswith("timed out after 8 s")
    # the rows after the crash and the hang ran in new workers of the same submissions
    for case in ("test-1", "test-2"):
        for name in ("sequential", "segfault.py", "hang.py"):
            assert found[(case, name)]["status"] == "ok" and found[(case, name)]["stats"]["runs"] >= 3, found[(case, name)]["message"]
    assert found[("test-4", "sequential")]["status"] == "ok"
    assert "killed by SIGSEGV" in out_md.read_text() and "failed: test-4 submission[hang.py]" in out.stderr
    assert wall < 8 + 90


def _descendants(pid: int) -> set[int]:
    """The processes below `pid` (children, theirs, ...), from /proc: only what this test started."""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent_of[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parent_of.items() if parent in frontier} - found
        found |= frontier
    return found


def test_a_killed_compare_leaves_valid_json_of_the_rows_done_and_no_worker(tmp_path):
    out_json = tmp_path / "c.json"
    temp = tmp_path / "tmp"
    temp.mkdir()
    timeline = tmp_path / "timeline"  # procs.timeline: each step of the command and its workers
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(temp), NVGG_TIMELINE=str(timeline))
    proc = subprocess.Popen([sys.executable, "-m", "nvgg", "compare", "--case", "test-1,test-4,test-2", "--strategy",
                             "sequential", "--backend", "torch", "--submission", submission_path("hang"), "--timeout", "120",
                             "--json", str(out_json)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)

    def rows_begun() -> int:
        return timeline.read_text().count(" row set up\n") if timeline.exists() else 0

    deadline = time.monotonic() + 120
    done = []
    # test-1's two rows and test-4's torch row written, and the fourth row (test-4's hang) set up:
    # its worker is in the submission's sleep, a call in progress when the command is killed
    while time.monotonic() < deadline and (len(done) < 3 or rows_begun() < 4):
        time.sleep(0.1)
        if out_json.exists():
            done = json.loads(out_json.read_text())["results"]
    assert len(done) == 3 and rows_begun() == 4, done
    workers = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # left as an exit does: its folders removed
    assert not list(temp.glob("nvgg-workers-*")), list(temp.iterdir())
    found = json.loads(out_json.read_text())["results"]
    assert [(r["case"], r["status"]) for r in found] == [("test-1", "ok"), ("test-1", "ok"), ("test-4", "ok")]
    gone = time.monotonic() + 1  # a killed worker is gone within the second
    while [pid for pid in workers if _running(pid)] and time.monotonic() < gone:
        time.sleep(0.05)
    assert workers and not [pid for pid in workers if _running(pid)], "a worker outlived its killed parent"


def test_kept_results_fail_the_timed_check():
    res = rows.run_many([Row(cases.get("test-1"), submission=submission_path("kept"))])[0]
    assert res.status == "wrong" and res.message.startswith("right when checked, wrong when timed on new inputs")
    assert res.checked_inputs == 1  # right when checked (a CPU run checks its first input)


def test_an_honest_submission_is_right_when_timed_too():
    res = rows.run_many([Row(cases.get("test-2"), submission=submission_path("honest"))])[0]
    assert res.status == "ok" and not res.flags and res.source == "honest.py", res.message


def test_rows_of_crosses_cases_strategies_backends_and_modes_then_submissions():
    picked = [cases.get("3"), cases.get("4")]
    mine = Version("/w/v1/s.py", "v1/s.py", "0" * 40)
    got = rows.rows_of(picked, ["persistent", "graph"], ["cute"], submissions=[mine], tensormaps=["device", "host"])
    assert [r.name for r in got] == ["3 persistent[device]/cute", "3 persistent[host]/cute", "3 graph/cute",
                                     "3 submission[v1/s.py]", "4 persistent[device]/cute", "4 persistent[host]/cute",
                                     "4 graph/cute", "4 submission[v1/s.py]"]
    assert {(r.submission, r.revision) for r in got if r.submission} == {("/w/v1/s.py", "0" * 40)}


def test_an_unsupported_row_is_a_row_or_with_strict_an_error_before_any_row_runs():
    row = Row(cases.get("test-1"), "graph", "torch")
    [res] = rows.run_many([row])
    assert res.status == "unsupported" and "the graph strategy needs a CUDA GPU" in res.message
    import pytest
    from nvgg.errors import NvggError
    started = []
    with pytest.raises(NvggError, match="the graph strategy needs a CUDA GPU"):
        rows.run_many([Row(cases.get("test-1"), "sequential", "torch"), row], strict=True, on_start=started.append)
    assert started == []
