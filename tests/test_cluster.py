"""nvgg tune --ray: a sweep through a local Ray cluster (GPUs declared as resources, rows faked in
the actors) against the same sweep on this host's pool."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import submission_path

from nvgg import datapath

ray = pytest.importorskip("ray", reason="Ray comes with the test extra: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def local_cluster():
    """A Ray cluster of the test's own on this machine with two GPUs declared (none needed: the rows
    are faked); never one another run started here ("local": a new one, whatever RAY_ADDRESS says)."""
    ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    yield
    ray.shutdown()


def _fake_rows(monkeypatch):
    """datapath's rows answered by a closure (Ray sends it to the actors by value): a time by point
    and case, the process that answered in the row's env."""
    def answer(row):
        from nvgg import timing
        from nvgg.result import Result
        point = dict(row.point)
        t = (100.0 if point["work"] == 1 else 190.0) + (0.5 if point["split"] == 2 else 0.0) + len(row.case.id)
        stats = timing.reduce([t] * 10, batch=15, method="leaderboard", clock="cuda events",
                              ends_s=[i * 0.11 for i in range(10)])
        env = {"device": "cuda", "gpu": "TestGPU", "torch": "2.13.0", "nvgg": "0.1.0", "pid": os.getpid()}
        return Result(case=row.case.id, strategy="submission", backend="submission", status="ok", stats=stats,
                      env=env, source=row.source, point=point)
    monkeypatch.setattr(datapath, "run_row", answer)
    monkeypatch.setattr(datapath, "run_round", answer)  # a version's first run in an A/B
    monkeypatch.setattr(datapath, "round_begin", lambda row, core=None: None)  # then its rounds (rows.round_in)
    monkeypatch.setattr(datapath, "round_window", lambda row, reps=1: None)
    monkeypatch.setattr(datapath, "round_end", answer)


def _measured(doc: dict) -> list:
    """A sweep's file less what says where and when it ran."""
    out = []
    for case in doc["cases"]:
        case = dict(case)
        for key in ("points",):
            case[key] = [{k: v for k, v in p.items() if k not in ("env", "wall_s")} for p in case[key]]
        case["finalists"] = [dict(f, rounds=[{k: v for k, v in r.items() if k not in ("env", "wall_s")}
                                             for r in f["rounds"]]) for f in case["finalists"]]
        out.append(case)
    return out


def test_a_sweep_through_a_local_ray_cluster_equals_the_local_pools(cli, fake_gpu, monkeypatch, tmp_path,
                                                                    local_cluster):
    _fake_rows(monkeypatch)
    docs = {}
    for how in ("local", "ray"):
        doc, cfg = tmp_path / f"{how}.json", tmp_path / f"{how}-map.json"
        extra = ["--ray", "auto"] if how == "ray" else []
        if how == "local":  # the fake answers in this process (a local worker could not unpickle it)
            monkeypatch.setenv("NVGG_ISOLATION", "off")
        else:
            monkeypatch.delenv("NVGG_ISOLATION", raising=False)
        out = cli("tune", "--submission", submission_path("tunable"), "--case", "3,4", "--json", str(doc),
                  "--out", str(cfg), *extra)
        assert out.exit_code == 0, out.output
        docs[how] = json.loads(doc.read_text()), json.loads(cfg.read_text())
    (local, local_map), (remote, remote_map) = docs["local"], docs["ray"]
    assert _measured(remote) == _measured(local) and remote_map == local_map
    assert remote_map["cases"] == {"3": {"work": 1, "split": 1}, "4": {"work": 1, "split": 1}}
    # every point of the Ray sweep answered in the cluster's actors, both GPUs' actors used
    pids = {p["env"]["pid"] for c in remote["cases"] for p in c["points"]}
    assert len(pids) == 2 and os.getpid() not in pids
    assert {p["env"]["pid"] for c in local["cases"] for p in c["points"]} == {os.getpid()}


def test_ray_refusals_are_one_line_before_any_row(cli, fake_gpu, fake_rows, monkeypatch):
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--ray", "auto", "--gpus", "all")
    assert out.exit_code == 2 and "--ray sweeps over the cluster's GPUs, --gpus over this host's: pass one" in out.stderr
    import socket
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as a command in a process of its own
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--ray", address)
        assert out.exit_code == 2 and out.stderr.startswith(f"nvgg: cannot reach a Ray cluster at {address} (")
        assert len(out.stderr.strip().splitlines()) == 1
    monkeypatch.setitem(sys.modules, "ray", None)  # as where Ray is not installed
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--ray", "auto")
    assert out.exit_code == 2 and out.stderr.strip() == ("nvgg: a sweep over a Ray cluster needs Ray, which is not "
                                                         "installed: pip install 'nvgg[ray]'")
    assert fake_rows.seen == []


def test_a_pools_first_call_finds_its_worker_started_a_ray_actor_as_a_local_worker(local_cluster, worker_state):
    """A worker starts (procs.warm_up: torch, the CUDA context where there is one, the data path)
    before its first call, whose limit then holds the call alone: a Ray actor as a local worker.
    (An actor that imported torch in its first call made a sweep's 60-s point time out on a loaded
    host.)"""
    from ray import cloudpickle

    from nvgg import cluster, procs
    cloudpickle.register_pickle_by_value(worker_state)  # the actors cannot import the test's fixtures folder
    started = {}
    try:
        for name, pool in (("local", procs.Pool(60, preload=(datapath.__name__,))), ("ray", cluster.RayPool(60))):
            with pool:
                started[name] = pool.call("a", worker_state.loaded, names=["torch", datapath.__name__])
    finally:
        cloudpickle.unregister_pickle_by_value(worker_state)
    assert started == {"local": ["nvgg.datapath", "torch"], "ray": ["nvgg.datapath", "torch"]}


def test_a_ray_pool_answers_as_a_local_pool_and_replaces_an_actor_that_lost_its_cuda_context(local_cluster,
                                                                                           lost_context):
    """One reply protocol: a value, a call that raised, nvgg's own refusal and a lost CUDA context
    (a call that poisons its process, raising or caught) read the same from a Ray actor as from a
    local worker; the poisoned process is ended and the next call runs in another."""
    from ray import cloudpickle

    from nvgg import cases, cluster, procs
    from nvgg.errors import NvggError
    cloudpickle.register_pickle_by_value(lost_context)  # the actors cannot import the test's fixtures folder
    said = {}
    try:
        for name, pool in (("local", procs.Pool(60)), ("ray", cluster.RayPool(60))):
            with pool:
                pid = pool.call("a", os.getpid)
                # a Ray pool is one actor whatever the key, a local pool a worker a key
                assert pid != os.getpid() and (pool.call("b", os.getpid) == pid) == (name == "ray")
                with pytest.raises(procs.ChildError) as raised:
                    pool.call("a", json.loads, s="x")
                with pytest.raises(NvggError) as refused:
                    pool.call("a", cases.get, id="nope")
                assert pool.call("a", os.getpid) == pid  # kept through both
                lost = []
                for caught in (False, True):
                    with pytest.raises(procs.ChildFailure) as failure:
                        pool.call("a", lost_context.fault, caught=caught)
                    lost.append(str(failure.value))
                    after = pool.call("a", os.getpid)
                    assert after not in (pid, os.getpid())
                    pid = after
                said[name] = (str(raised.value), str(refused.value), refused.value.code, lost)
    finally:
        cloudpickle.unregister_pickle_by_value(lost_context)
    assert said["ray"] == said["local"]
    assert said["ray"][0].startswith("JSONDecodeError: Expecting value") and said["ray"][2] == 2
    assert said["ray"][3] == ["crashed: CUDA error: an illegal memory access was encountered (the CUDA context is lost; "
                              "the next call starts a new process)"] * 2
