"""Shared set-up: the GPU markers, the CLI runner, fixture submissions, result rows made by hand,
and the two seams the command tests stand on (a fake GPU, and the rows a command runs)."""

import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from nvgg import timing
from nvgg.result import Result

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"

# A row on the CPU is timed for at most NVGG_CPU_BUDGET_S (timing.cpu_budget_s; 5 s unset): the
# tests' CPU rows show that a path works and no test reads their times past that they exist, so
# half a second. In the environment, so the workers and the nvgg processes the tests start read
# it too; a value set outside stays.
os.environ.setdefault("NVGG_CPU_BUDGET_S", "0.5")


def _capability():
    return torch.cuda.get_device_capability() if torch.cuda.is_available() else None


def pytest_collection_modifyitems(config, items):
    """`gpu` tests need a CUDA GPU, `sm90` tests an H100/H200 (sm_90), `b200` tests a B200
    (sm_100): elsewhere each is skipped with the reason, never run."""
    capability = _capability()
    needs = {
        "gpu": (capability is not None, "needs a CUDA GPU (run with -m gpu on a GPU machine)"),
        "sm90": (capability == (9, 0), "needs an sm_90 GPU (H100/H200)"),
        "b200": (capability == (10, 0), "needs a B200 (sm_100): run with -m b200 there"),
    }
    for item in items:
        for marker, (met, reason) in needs.items():
            if marker in item.keywords and not met:
                item.add_marker(pytest.mark.skip(reason=reason))
                break


REAL_HOST_LOAD = timing.host_load


@pytest.fixture(autouse=True)
def idle_host(monkeypatch):
    """The host's load as an idle 64-core host's (timing.host_load), so what an A/B or a sweep says
    does not hang on how busy the machine running the tests is; a test sets its own to change it
    (REAL_HOST_LOAD: the function itself)."""
    monkeypatch.setattr(timing, "host_load", lambda: (0.0, 64))


@pytest.fixture
def cli():
    """`cli(*argv)`: the app through typer's CliRunner (stdout and stderr apart)."""
    from nvgg.cli import app
    runner = CliRunner()
    return lambda *argv: runner.invoke(app, list(argv))


def submission_path(name: str) -> str:
    """A fixture submission (tests/fixtures/submissions/NAME.py): honest, kept, hang, segfault, ..."""
    return str(FIXTURES / "submissions" / f"{name}.py")


def running(pid: int) -> bool:
    """A process that exists and is no zombie (a killed child whose reaper has not reaped it yet)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def made_result(case: str, strategy: str, backend: str, t: float | None, status: str = "ok", **more) -> Result:
    """A Result as a worker would send it: ten repetitions of `t` µs over a second on a test GPU."""
    stats = (timing.reduce([t] * 10, batch=15, method="leaderboard", clock="cuda events",
                           ends_s=[i * 0.11 for i in range(10)]) if status == "ok" else None)
    env = {"device": "cuda", "gpu": "TestGPU", "torch": "2.13.0", "nvgg": "0.1.0"}
    return Result(case=case, strategy=strategy, backend=backend, status=status, stats=stats, env=env,
                  **more)


@pytest.fixture
def fake_gpu(monkeypatch):
    """This machine as an H100 to the commands' choices (the default device, backend and arch),
    with the checks that ask the hardware itself (rows.precheck) passed: for tests of what a
    command asks for on a GPU, with the rows themselves faked (`fake_rows`)."""
    from nvgg import backends, env, rows, selection
    from nvgg.backends import base
    monkeypatch.setattr(selection, "default_device", lambda: torch.device("cuda"))
    monkeypatch.setattr(env, "collect", lambda device: {"device": "cuda", "gpu": "TestGPU", "torch": torch.__version__,
                                                        "nvgg": "0.1.0"})
    monkeypatch.setattr(backends, "best", lambda device: "cute")
    monkeypatch.setattr(base, "_capability", lambda index: (9, 0))
    monkeypatch.setattr(rows, "precheck", lambda row: None)


@pytest.fixture
def fake_rows(monkeypatch):
    """The seam between the commands and the work: how one row is run (`rows.run_in`), each row
    answered by `fake_rows.answer(row) -> Result` (set by the test; default: 10 µs, ok) in this
    process; `fake_rows.seen` the rows asked for, in order, and `fake_rows.timeouts` the time
    limit of the pool each ran in."""
    from nvgg import rows

    class Fake:
        def __init__(self):
            self.seen, self.timeouts = [], []

        def answer(self, row):
            return made_result(row.case.id, row.strategy or "persistent", row.backend or "cute", 10.0)

        def __call__(self, pool, row, rounds=False, limit_s=None):
            self.seen.append(row)
            self.timeouts.append(pool.timeout_s)
            return self.answer(row)

        def round_in(self, pool, asked, core=None, window_s=None):  # an A/B's round: a row's answer each, in the order asked
            self.rounds.append([row.source for row in asked])
            self.cores.append(core)
            return [self(pool, row, rounds=True) for row in asked]

    fake = Fake()
    fake.rounds, fake.cores = [], []
    monkeypatch.setattr(rows, "run_in", fake)
    monkeypatch.setattr(rows, "round_in", fake.round_in)
    return fake


@pytest.fixture
def in_process(monkeypatch):
    """A pool's calls in this process (NVGG_ISOLATION=off), for tests of what a command makes of
    its pool's answers rather than of the workers that give them: a row on the CPU, a file's TUNE
    read (where `fake_rows` fakes the rows) or a point's build found in the kernel cache, then
    starts no worker, each a torch import, to answer it. One --submission at most: in one process,
    two files' own imports would mix (the command refuses them)."""
    monkeypatch.setenv("NVGG_ISOLATION", "off")


@pytest.fixture
def lost_context(monkeypatch):
    """tests/fixtures/lost_context.py (`fault`: a call that poisons its process's CUDA context),
    importable here and in the local workers the test starts."""
    return _worker_module(monkeypatch, "lost_context")


@pytest.fixture
def worker_state(monkeypatch):
    """tests/fixtures/worker_state.py (`loaded`: which modules a worker has imported), importable
    here and in the local workers the test starts."""
    return _worker_module(monkeypatch, "worker_state")


def _worker_module(monkeypatch, name: str):
    """The module `name` of tests/fixtures, importable here and in the local workers a test starts."""
    import importlib
    import os
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(FIXTURES), os.environ.get("PYTHONPATH")) if p))
    return importlib.import_module(name)
