"""Builds ahead of the rows (nvgg/prebuild.py): which builds a run lacks, found through the cache's
lookups with a stand-in backend; the builds spread over processes (the pool faked), and the wait
for those processes' end. The build processes themselves run on a GPU machine only."""

import shutil
import subprocess
import time

import pytest

from conftest import running
from nvgg import cases, prebuild, procs, rows
from nvgg.errors import NvggError
from nvgg.kernels import cache as kcache
from nvgg.result import Row

from test_kernel_cache import Build

A = cases.make_case("a", m=[64, 128], n=[256, 256], k=[512, 512])
B = cases.make_case("b", m=[64, 32], n=[256, 128], k=[512, 256])  # shares A's first group


class Kernels:
    """A backend whose builds are cache entries: the persistent one a build shared by every case
    (as cases 2, 3 and the tests share ours), a per-group launch one a shape and one expand."""

    def __init__(self, store):
        self.store = store

    def compile(self, case, arch, *, grouped=False, sms=None):
        parts = [("persistent", sms)] if grouped else [*dict.fromkeys(case.groups), "expand"]
        return [self.store.get(kcache.CacheKey("k", (repr(p),), None, arch, "dsl", "src"), Build(), need_callable=False)
                for p in parts]


class Strategy:
    def __init__(self, grouped):
        self.grouped = grouped


@pytest.fixture
def kernels(monkeypatch, tmp_path):
    found = Kernels(kcache.CompileCache(tmp_path))

    def select(case, strategy, backend, tensormaps, device, point):
        if strategy == "unsupported":
            raise NvggError("no kernel takes it")
        return found, Strategy(strategy == "persistent")
    monkeypatch.setattr(prebuild, "select", select)
    monkeypatch.setattr(prebuild, "arch_of", lambda device: "sm_90a")
    monkeypatch.setattr(prebuild, "_sms", lambda device: 132)
    return found


def test_the_builds_a_run_lacks_once_each_a_per_group_strategy_a_shape_at_a_time(kernels):
    todo = [Row(A, "persistent", "cute", device="cuda"), Row(A, "multistream", "cute", device="cuda"),
            Row(A, "graph", "cute", device="cuda"), Row(B, "persistent", "cute", device="cuda"),
            Row(B, "sequential", "cute", device="cuda"), Row(B, submission="s.py", device="cuda"),
            Row(A, "sequential", "torch", device="cpu"), Row(A, "unsupported", "cute", device="cuda")]
    units = prebuild.missing(todo)
    assert [(u.case.id, u.strategy) for u in units] == [("a", "persistent"), ("a:64x256x512", "multistream"),
                                                        ("a:128x256x512", "multistream"), ("b:32x128x256", "sequential")]
    assert [(u.case.m, u.case.n, u.case.k, u.case.seed) for u in units[1:2]] == [((64,), (256,), (512,), A.seed)]
    for unit in units:  # what the build processes do: the rows' own compile, one unit each
        kernels.compile(unit.case, "sm_90a", grouped=unit.strategy == "persistent", sms=132)
    assert prebuild.missing(todo) == []


class CopiedFromTheRunsCache(kcache.CompileCache):
    """A cache in a folder of its own whose builds are the run's kernel cache's (NVGG_CACHE_DIR or
    the default: compiled there once a run, and not at all from a cache a previous run filled),
    copied in with their SASS: the folder holds exactly the keys asked of it, as a build process's
    cache would."""

    def __init__(self, root, runs):
        super().__init__(root)
        self.runs = runs

    def _build(self, key, build, folder, t0):
        from nvgg.kernels import tools
        entry = self.runs.get(key, build, need_callable=False)
        tools.sass(entry.directory / "kernel.cubin")  # the SASS kernel_info reads: nvdisasm's, once a build
        for name in ("kernel.ptx", "kernel.cubin", "kernel.sass", "info.json"):  # the SASS after its cubin
            if (entry.directory / name).is_file():
                shutil.copy(entry.directory / name, folder / name)
        return kcache.Entry(key, None, dict(entry.info), folder, time.perf_counter() - t0, "cold")


def test_what_is_built_a_group_at_a_time_is_what_the_whole_cases_row_reads(monkeypatch, tmp_path):
    """Our sm_90a kernels compiled on the CPU: the units' builds (each one-group case's, the
    persistent one) are the very keys the row's own compile of the whole case looks up."""
    pytest.importorskip("cutlass")
    from nvgg import backends, strategies
    monkeypatch.setattr(prebuild, "select", lambda case, strategy, backend, tensormaps, device, point: (
        backends.get(backend), strategies.get(strategy)))
    monkeypatch.setattr(prebuild, "arch_of", lambda device: "sm_90a")
    monkeypatch.setattr(prebuild, "_sms", lambda device: 132)
    monkeypatch.setattr(kcache, "_SHARED", CopiedFromTheRunsCache(tmp_path, kcache.shared()))
    case = cases.get("test-8")  # 4 groups, 2 shapes
    todo = [Row(case, s, "cute", device="cuda") for s in ("multistream", "persistent", "graph")]
    units = prebuild.missing(todo)
    assert [(u.case.id, u.strategy) for u in units] == [("test-8:128x128x512", "multistream"),
                                                        ("test-8:128x128x256", "multistream"), ("test-8", "persistent")]
    for unit in units:  # what each build process compiles
        backends.get("cute").compile(unit.case, "sm_90a", grouped=unit.strategy == "persistent", sms=132)
    assert len(list(tmp_path.iterdir())) == 4  # the units' builds, and nothing else
    monkeypatch.setattr(kcache, "_SHARED", kcache.CompileCache(tmp_path))  # a row's worker: a new process
    be = backends.get("cute")
    per_group, grouped = be.compile(case, "sm_90a", sms=132), be.compile(case, "sm_90a", grouped=True, sms=132)
    assert [k.extra["cache_hit"] for k in per_group + grouped] == ["disk"] * 4  # two shapes, the expand, the persistent


class Pool:
    """procs.Pool's calls answered here: each unit's build, one of them refused as a DSL error."""

    made = []

    def __init__(self, timeout_s=None, *, spare=True):
        self.spare, self.calls = spare, []
        Pool.made.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def call(self, key, fn, **kwargs):
        self.calls.append((key, fn, kwargs["row"].case.id))
        if kwargs["row"].case.id == "bad":
            raise procs.ChildError("DSLRuntimeError: refused")
        return 1000 + len(kwargs["row"].case.id)


def test_the_builds_spread_over_processes_the_failed_left_to_their_rows(monkeypatch):
    units = [Row(cases.make_case(name, m=64, n=256, k=512), "persistent", device="cuda") for name in ("a", "bb", "bad", "cccc", "d")]
    monkeypatch.setattr(prebuild, "missing", lambda todo: units)
    monkeypatch.setattr(procs, "Pool", Pool)
    gone, notes = [], []
    monkeypatch.setattr(prebuild, "_gone", gone.append)
    Pool.made.clear()
    done = prebuild.ahead(units, jobs=3, on_note=notes.append)
    [pool] = Pool.made
    assert not pool.spare  # the rows' worker started ahead stays theirs
    assert sorted(c[2] for c in pool.calls) == ["a", "bad", "bb", "cccc", "d"]
    assert {c[0] for c in pool.calls} <= {"build:0", "build:1", "build:2"} and {c[1] for c in pool.calls} == {prebuild.build}
    assert (done.builds, done.jobs, done.failed) == (5, 3, 1) and gone == [{1001, 1002, 1004}]
    assert notes[0] == "building the rows' kernels ahead: 5 builds, 3 at once"
    assert notes[1].startswith("built 5 ahead in ") and notes[1].endswith(" s (1 left to their rows)")


def test_one_missing_build_or_rows_in_nvggs_own_process_build_nothing_ahead(monkeypatch):
    one = [Row(A, "persistent", device="cuda")]
    monkeypatch.setattr(prebuild, "missing", lambda todo: one)
    monkeypatch.setattr(procs, "Pool", Pool)
    Pool.made.clear()
    notes = []
    assert prebuild.ahead(one, on_note=notes.append) == prebuild.Ahead() and not Pool.made and not notes
    monkeypatch.setattr(prebuild, "missing", lambda todo: one * 4)
    monkeypatch.setenv("NVGG_ISOLATION", "off")  # rows in this process: its own compiles, in turn
    assert prebuild.ahead(one * 4, on_note=notes.append) == prebuild.Ahead() and not Pool.made and not notes


def test_run_many_builds_ahead_before_its_first_row(monkeypatch, fake_rows):
    order = []
    monkeypatch.setattr(prebuild, "ahead", lambda todo, timeout_s=None, on_note=None: order.append(("ahead", len(todo), timeout_s)))
    todo = [Row(A, "persistent", "cute", device="cuda"), Row(B, "persistent", "cute", device="cuda")]
    rows.run_many(todo, timeout_s=60, on_start=lambda row: order.append(("row", row.case.id)))
    assert order == [("ahead", 2, 60), ("row", "a"), ("row", "b")]


def test_the_wait_for_the_build_processes_ends_with_them():
    proc = subprocess.Popen(["sleep", "30"])
    assert prebuild._running(proc.pid)
    t0 = time.monotonic()
    prebuild._gone({proc.pid}, limit_s=0.3)  # still running: waited for, up to the limit
    assert time.monotonic() - t0 >= 0.3
    proc.kill()
    deadline = time.monotonic() + 5
    while running(proc.pid) and time.monotonic() < deadline:  # killed, not yet reaped: a zombie has ended
        time.sleep(0.01)
    assert not prebuild._running(proc.pid)
    t0 = time.monotonic()
    prebuild._gone({proc.pid})
    assert time.monotonic() - t0 < 0.5
    proc.wait()
    assert not prebuild._running(proc.pid)


@pytest.mark.gpu
@pytest.mark.sm90
def test_on_a_gpu_the_rows_read_from_disk_what_was_built_ahead(monkeypatch, tmp_path):
    monkeypatch.setenv("NVGG_CACHE_DIR", str(tmp_path))  # a bare machine's cache, for the build processes and the row's worker
    monkeypatch.setattr(kcache, "_SHARED", kcache.CompileCache(tmp_path))  # and for this process's lookups
    todo = [Row(cases.get("test-8"), s, "cute", device="cuda") for s in ("persistent", "multistream", "graph")]
    assert [(u.case.id, u.strategy) for u in prebuild.missing(todo)] == [
        ("test-8", "persistent"), ("test-8:128x128x512", "multistream"), ("test-8:128x128x256", "multistream")]
    done = prebuild.ahead(todo)
    assert (done.builds, done.failed) == (3, 0) and prebuild.missing(todo) == []
    [res] = rows.run_many(todo[1:2])
    assert res.status == "ok" and [k["cache_hit"] for k in res.kernels] == ["disk"] * 3, (res.message, res.kernels)
