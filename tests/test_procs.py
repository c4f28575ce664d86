"""Child processes (nvgg/procs.py): workers kept across calls and replaced after a failure, one-shot
children, children under a wrapper (as ncu runs its target), and one set of words for how any of
them ended. On the CPU, with children that hang, crash and exit non-zero."""

import ctypes
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import running as _running

import torch

from nvgg import cases, env, procs
from nvgg.errors import NvggError


def test_workers_are_kept_across_calls_of_a_key_and_replaced_after_a_crash():
    with procs.Pool(30) as pool:
        first = pool.call("a", os.getpid)
        assert first != os.getpid() and pool.call("a", os.getpid) == first
        assert pool.call("b", os.getpid) not in (first, os.getpid())
        with pytest.raises(procs.ChildFailure, match=r"^crashed: the process died \(exit code 7\)"):
            pool.call("a", os._exit, status=7)
        last = pool.call("a", os.getpid)
        assert last not in (first, None)
    # closed: the workers are killed and not waited for (a CUDA context's teardown), yet gone soon after
    deadline = time.monotonic() + 5
    while _running(last) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(last)


def test_a_worker_imports_its_preload_before_its_first_call(monkeypatch, tmp_path):
    """What a pool's workers will run is imported while the caller still starts up; a module that
    cannot be imported is left to the call that needs it, the worker serves on."""
    mark = tmp_path / "mark"
    monkeypatch.setenv("NVGG_TEST_PRELOAD_MARK", str(mark))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent / "fixtures"))
    with procs.Pool(30, preload=("no_such_module_anywhere", "preload_marker")) as pool:
        worker = procs.Worker("w", tmp_path, preload=pool.preload)
        worker.spawn()
        try:
            worker._ensure_ready()  # the ready frame comes after the preload
            assert mark.read_text() == str(worker.proc.pid)
        finally:
            worker.kill()
        mark.unlink()
        pid = pool.call("a", os.getpid)
        assert mark.read_text() == str(pid) != str(os.getpid())


def test_every_rows_worker_preloads_the_data_path_the_command_line_prestarts():
    """The command line's prestarted worker (nvgg/__main__.py, which names the module without
    importing it) preloads what the rows' pools and Ray actors do: datapath.WORKER_PRELOAD."""
    import ast
    from nvgg import __main__ as entry, datapath
    calls = [n for n in ast.walk(ast.parse(Path(entry.__file__).read_text()))
             if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "prestart"]
    assert [ast.literal_eval(k.value) for c in calls for k in c.keywords if k.arg == "preload"] == [
        datapath.WORKER_PRELOAD] == [("nvgg.datapath",)]


def test_a_raising_call_keeps_its_worker_and_an_expected_failure_stays_one():
    with procs.Pool(30) as pool:
        pid = pool.call("a", os.getpid)
        with pytest.raises(procs.ChildError, match="JSONDecodeError: Expecting value") as raised:
            pool.call("a", json.loads, s="x")
        assert "Traceback" in raised.value.trace
        with pytest.raises(NvggError, match="unknown case 'nope'"):
            pool.call("a", cases.get, id="nope")
        assert pool.call("a", os.getpid) == pid


LOST = ("crashed: CUDA error: an illegal memory access was encountered (the CUDA context is lost; the next call "
        "starts a new process)")


def test_a_worker_that_lost_its_cuda_context_is_ended_and_replaced(lost_context):
    """A call that poisons the context fails, whether it raised or caught the error itself (its
    result naming it): the worker, which would fail every later call, exits and the next call of
    its key starts another."""
    with procs.Pool(30) as pool:
        for caught in (False, True):
            pid = pool.call("a", os.getpid)
            with pytest.raises(procs.ChildFailure) as lost:
                pool.call("a", lost_context.fault, caught=caught)
            assert str(lost.value) == LOST and not _running(pid) and "a" not in pool.workers
            assert pool.call("a", os.getpid) not in (pid, os.getpid())


def test_a_worker_past_the_timeout_is_killed_with_what_it_started():
    with procs.Pool(2) as pool:
        pid = pool.call("a", os.getpid)
        t0 = time.monotonic()
        with pytest.raises(procs.ChildFailure, match=r"^timed out after 2 s \(a hang"):
            pool.call("a", subprocess.run, args=["sleep", "60"])
        assert time.monotonic() - t0 < 10 and not _running(pid)


def test_a_child_runs_one_call_and_answers_in_a_file():
    assert procs.run_once(os.getpid) != os.getpid()
    assert procs.run_once(json.loads, s='{"a": 1}') == {"a": 1}
    with pytest.raises(procs.ChildError, match="JSONDecodeError"):
        procs.run_once(json.loads, s="x")
    with pytest.raises(NvggError, match="unknown case 'nope'"):
        procs.run_once(cases.get, id="nope")


def test_a_childs_environment_and_gpu(monkeypatch):
    assert procs.run_once(os.getenv, key="NVGG_TEST_MARK", env={"NVGG_TEST_MARK": "7"}) == "7"
    env = procs.environment(gpu=1)
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["PYTHONPATH"].split(os.pathsep)[0] == str(procs.ROOT)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert procs.environment(gpu=1)["CUDA_VISIBLE_DEVICES"] == "6"  # an index among the GPUs this process sees
    with pytest.raises(NvggError, match="GPU 2 is not one of the 2 this process sees"):
        procs.environment(gpu=2)


# every way a child can end without an answer, worded the same for every kind of child: a worker, a
# one-shot child (a submission's phase run), a one-shot child under a wrapper (ncu's target; `env`
# stands in for ncu here: it runs the child as its own process image, so its exit is the child's)
ENDINGS = [
    (os._exit, {"status": 3}, "crashed: the process died (exit code 3)"),
    (ctypes.string_at, {"ptr": 0}, "crashed: the process died (killed by SIGSEGV)"),
    (subprocess.run, {"args": ["sleep", "60"]}, "timed out after 3 s (a hang, or far too slow for its time limit)"),
]


def _ending(kind: str, fn, kwargs) -> str:
    try:
        if kind == "worker":
            with procs.Pool(3) as pool:
                pool.call("a", fn, **kwargs)
        else:
            procs.run_once(fn, timeout_s=3, wrap=("env",) if kind == "wrapped" else (), **kwargs)
    except procs.ChildFailure as exc:
        return str(exc)
    return "answered"


@pytest.mark.parametrize("fn, kwargs, said", ENDINGS, ids=["exit", "segfault", "hang"])
def test_every_kind_of_child_ends_in_the_same_words(fn, kwargs, said):
    from concurrent.futures import ThreadPoolExecutor
    kinds = ("worker", "once", "wrapped")
    with ThreadPoolExecutor(len(kinds)) as threads:  # side by side: a hang waits out its limit once, not three times
        endings = dict(zip(kinds, threads.map(lambda kind: _ending(kind, fn, kwargs), kinds)))
    # a crash adds the last line the child logged (Python's own report of a segfault, say)
    assert {kind: text.split(": ", 2)[:2] if text.startswith("crashed") else text for kind, text in endings.items()} == {
        kind: said.split(": ", 2)[:2] if said.startswith("crashed") else said for kind in endings}
    assert len({text for text in endings.values()}) == 1, endings


def test_a_wrapper_that_fails_before_the_child_starts_is_a_death_with_its_words():
    with pytest.raises(procs.ChildFailure, match=r"crashed: the process died \(exit code 1\)"):
        procs.run_once(os.getpid, wrap=("sh", "-c", "echo 'wrapper: no such tool' >&2; exit 1", "sh"))


def test_in_process_mode_runs_in_this_process(monkeypatch):
    monkeypatch.setenv("NVGG_ISOLATION", "off")
    with procs.Pool() as pool:
        assert pool.call("a", os.getpid) == os.getpid()
        with pytest.raises(procs.ChildError, match="JSONDecodeError"):
            pool.call("a", json.loads, s="x")


def test_in_process_calls_from_threads_take_turns_and_leave_stdout_as_it_was(monkeypatch):
    """Threads that call an in-process pool at once (compiles side by side, a pool a GPU): each
    call moves stdout aside while it runs, so they run one at a time, and stdout is the same after."""
    import sys
    import threading
    monkeypatch.setenv("NVGG_ISOLATION", "off")
    spans, stdout = [], sys.stdout

    def call(i: int) -> None:
        begun = time.monotonic()
        print(f"call {i}")  # on stderr while it runs
        time.sleep(0.05)
        spans.append((begun, time.monotonic()))

    with procs.Pool() as pool:
        threads = [threading.Thread(target=pool.call, args=("a", call), kwargs={"i": i}) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    spans.sort()
    assert len(spans) == 4 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    assert sys.stdout is stdout


@pytest.mark.parametrize("value, isolated", [("on", True), ("OFF", False), ("0", False), ("", True)])
def test_isolation_setting(monkeypatch, value, isolated):
    monkeypatch.setenv("NVGG_ISOLATION", value)
    assert procs.isolated() is isolated


def test_an_unknown_isolation_setting_is_refused(monkeypatch):
    monkeypatch.setenv("NVGG_ISOLATION", "garbage")
    with pytest.raises(NvggError, match="NVGG_ISOLATION='garbage': set it to on"):
        procs.Pool()


def test_cuda_reason_picks_the_cuda_error_out_of_a_message():
    msg = "launch failed: AcceleratorError: CUDA error: an illegal memory access was encountered\nSearch for ..."
    assert procs.cuda_reason(msg) == "CUDA error: an illegal memory access was encountered"
    assert procs.cuda_reason("RuntimeError: boom\nmore") == "RuntimeError: boom"


def test_side_by_side_runs_every_target_at_once_and_raises_the_first_failure_once_all_ended():
    import threading
    import time

    from nvgg import procs
    started, ended = [], []
    both = threading.Barrier(2, timeout=5)  # only passes if the two run at once

    def steady(stop):
        both.wait()
        started.append("steady")
        deadline = time.monotonic() + 5
        while not stop.is_set() and time.monotonic() < deadline:  # told to stop once the other raised
            time.sleep(0.01)
        ended.append(stop.is_set())

    def failing(stop):
        both.wait()
        raise ValueError("the second one failed")

    with pytest.raises(ValueError, match="the second one failed"):
        procs.side_by_side([steady, failing], "test")
    assert started == ["steady"] and ended == [True]  # stopped, and ended before the error came back
    procs.side_by_side([lambda stop: ended.append(stop.is_set())], "test")
    assert ended[-1] is False


def _thread_personality() -> int:
    return int(Path("/proc/thread-self/personality").read_text(), 16)


def _layout_of_a_child() -> tuple[str, str]:
    """Where a one-call child's executable and stack were mapped (its first line of /proc/self/maps,
    the end of its [stack])."""
    maps = procs.run_once(Path("/proc/self/maps").read_text).splitlines()
    return maps[0].split()[0], next(line.split()[0].split("-")[1] for line in maps if line.endswith("[stack]"))


@pytest.mark.skipif(not Path("/proc/thread-self/personality").exists(), reason="Linux's personality flags")
def test_children_start_with_one_memory_layout():
    """Address randomisation is off in every child where the kernel lets this thread turn it off:
    two children map their executable and stack alike, workers report a fixed layout in their
    environment; this thread's own personality is as it was once the child started."""
    before = _thread_personality()
    with procs.fixed_layout() as fixed:
        inside = _thread_personality()
    assert _thread_personality() == before
    assert bool(inside & procs.ADDR_NO_RANDOMIZE) == fixed
    want = "fixed" if fixed or procs.layout() == "fixed" else "randomised"
    assert procs.run_once(procs.layout) == want
    system_wide_off = Path("/proc/sys/kernel/randomize_va_space").read_text().strip() == "0"
    assert (_layout_of_a_child() == _layout_of_a_child()) == (want == "fixed" or system_wide_off)
    with procs.Pool(60) as pool:
        assert pool.call("a", env.collect, device=torch.device("cpu"))["address_layout"] == want


def test_a_child_starts_where_the_kernel_refuses_a_fixed_layout(monkeypatch):
    class Refusing:
        @staticmethod
        def personality(_flags):
            return -1
    monkeypatch.setattr(procs.ctypes, "CDLL", lambda *a, **k: Refusing())
    with procs.fixed_layout() as fixed:
        assert not fixed
    assert procs.run_once(procs.layout) == procs.layout()  # as this process's own, inherited
