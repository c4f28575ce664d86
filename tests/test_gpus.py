"""--gpus: which GPUs, checked before any work, and rows (a sweep's points) spread over them."""

from __future__ import annotations

import json
import threading
import time

import pytest
from conftest import made_result, submission_path

from nvgg import gpus, profiles
from nvgg.commands.common import parse_gpus, pick_gpus
from nvgg.errors import NO_GPU, NvggError
from nvgg.gpus import Gpu

TWO = [Gpu(0, "NVIDIA H100 80GB HBM3", "GPU-aaaa"), Gpu(1, "NVIDIA H100 80GB HBM3", "GPU-bbbb")]


def test_gpus_named_all_or_by_index():
    assert parse_gpus("all", TWO) == TWO
    assert parse_gpus(" 1 ", TWO) == [TWO[1]] and parse_gpus("1,0", TWO) == [TWO[1], TWO[0]]
    assert pick_gpus(None) is None


@pytest.mark.parametrize("spec, says", [
    ("7", "--gpus 7: no GPU 7; this host shows 2 GPU(s): 0, 1"),
    ("0,2,3", "--gpus 0,2,3: no GPU 2, 3; this host shows 2 GPU(s): 0, 1"),
    ("0,0", "--gpus 0,0: GPU 0 named twice: name each GPU once"),
    ("", "--gpus '': pass all, or GPU indices separated by commas (like 0,1)"),
    ("0,,1", "--gpus '0,,1': pass all, or GPU indices"),
    ("-1", "--gpus '-1': pass all, or GPU indices"),
    ("first", "--gpus 'first': pass all, or GPU indices"),
])
def test_gpus_not_there_twice_or_malformed_are_refused_in_one_line(spec, says):
    with pytest.raises(NvggError) as err:
        parse_gpus(spec, TWO)
    assert str(err.value).startswith(says) and "\n" not in str(err.value) and err.value.code == 2


def test_gpus_of_different_models_are_refused_and_no_gpu_has_its_own_exit_code():
    mixed = [TWO[0], Gpu(1, "NVIDIA A100-SXM4-80GB", "GPU-cccc")]
    with pytest.raises(NvggError, match=r"--gpus all: GPUs of different models \(0: NVIDIA H100 80GB HBM3; 1: NVIDIA "
                                        r"A100-SXM4-80GB\).*pass GPUs of one model"):
        parse_gpus("all", mixed)
    assert parse_gpus("1", mixed) == [mixed[1]]  # one of them is one model
    with pytest.raises(NvggError, match="no GPU is visible here") as err:
        parse_gpus("all", [])
    assert err.value.code == NO_GPU
    with pytest.raises(NvggError, match="pass all, or GPU indices") as err:  # a malformed value, GPU or not
        parse_gpus(",,", [])
    assert err.value.code == 2


class _FakeNvml:
    """NVML with three GPUs, the last of another model."""
    cards = [("NVIDIA H100 80GB HBM3", "GPU-1111"), ("NVIDIA H100 80GB HBM3", "GPU-2222"), ("NVIDIA A100", "GPU-3333")]

    def nvmlDeviceGetCount(self):
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return self.cards[h][0].encode()

    def nvmlDeviceGetUUID(self, h):
        return self.cards[h][1]


@pytest.mark.parametrize("listed, want", [
    (None, [(0, "GPU-1111"), (1, "GPU-2222"), (2, "GPU-3333")]),
    ("1,0", [(0, "GPU-2222"), (1, "GPU-1111")]),     # CUDA's indices follow the list
    ("GPU-3333,0", [(0, "GPU-3333"), (1, "GPU-1111")]),
    ("0,MIG-abc,1", [(0, "GPU-1111")]),              # CUDA stops at the first entry it cannot use
    ("", []),
])
def test_the_visible_gpus_follow_cuda_visible_devices(monkeypatch, listed, want):
    monkeypatch.setattr(profiles, "nvml", lambda: _FakeNvml())
    if listed is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert [(g.index, g.uuid) for g in gpus.visible()] == want
    monkeypatch.setattr(profiles, "nvml", lambda: None)
    assert gpus.visible() == []


@pytest.fixture
def two_gpus(monkeypatch, fake_rows):
    """Two H100s to --gpus; each faked row notes the GPU of the pool it ran in and takes a little
    time, so both GPUs' threads take rows."""
    monkeypatch.setattr(gpus, "visible", lambda: TWO)
    ran_on, lock = {}, threading.Lock()
    plain = fake_rows.__class__.__call__

    def call(self, pool, row, rounds=False, limit_s=None):
        time.sleep(0.01)
        with lock:
            ran_on.setdefault(pool.gpu, []).append((row, rounds))
            return plain(self, pool, row, rounds, limit_s)
    monkeypatch.setattr(fake_rows.__class__, "__call__", call)
    return ran_on


def test_compare_spreads_its_rows_over_the_gpus_and_lists_them_as_asked(cli, fake_gpu, fake_rows, two_gpus, tmp_path):
    doc = tmp_path / "c.json"
    out = cli("compare", "--case", "1,2,3,4", "--strategy", "persistent,sequential", "--backend", "cute", "--gpus",
              "all", "--json", str(doc))
    assert out.exit_code == 0, out.output
    assert set(two_gpus) == {0, 1} and sum(len(v) for v in two_gpus.values()) == 8  # each row once, both GPUs used
    assert [g for g, rs in two_gpus.items() for r, _ in rs if r.case.id == "1"]
    rows = json.loads(doc.read_text())["results"]
    assert [(r["case"], r["strategy"]) for r in rows] == [(c, s) for c in "1234" for s in ("persistent", "sequential")]


@pytest.mark.parametrize("argv, says", [
    (["compare", "--case", "3", "--gpus", "7"], "nvgg: --gpus 7: no GPU 7; this host shows 2 GPU(s): 0, 1"),
    (["run", "--case", "3", "--gpus", "0,0"], "nvgg: --gpus 0,0: GPU 0 named twice"),
    (["tune", "--submission", submission_path("tunable"), "--case", "3", "--gpus", "x"], "nvgg: --gpus 'x': pass all"),
])
def test_bad_gpus_are_refused_before_any_row(cli, fake_gpu, fake_rows, two_gpus, argv, says):
    out = cli(*argv)
    assert out.exit_code == 2 and out.stderr.startswith(says) and len(out.stderr.strip().splitlines()) == 1
    assert fake_rows.seen == []


def test_a_sweep_over_two_gpus_measures_every_point_once_and_names_the_winners_one_gpu_names(cli, fake_gpu, fake_rows,
                                                                                           in_process, two_gpus,
                                                                                           tmp_path):
    times = {(("work", 2), ("split", 1)): 130.0, (("work", 2), ("split", 2)): 129.0,
             (("work", 1), ("split", 1)): 100.5, (("work", 1), ("split", 2)): 100.0}

    def answer(row):
        t = times[tuple(row.point)] * (1.0 if row.case.id == "3" else 0.5)
        return made_result(row.case.id, "submission", "submission", t, source=row.source, point=dict(row.point))
    fake_rows.answer = answer
    docs = {}
    for spread in ([], ["--gpus", "all"]):
        doc = tmp_path / f"t{len(spread)}.json"
        fake_rows.seen.clear()
        two_gpus.clear()
        out = cli("tune", "--submission", submission_path("tunable"), "--case", "3,4", "--json", str(doc), *spread)
        assert out.exit_code == 0, out.output
        docs[bool(spread)] = json.loads(doc.read_text())
        firsts = sorted((r.case.id, str(r.point)) for rs in two_gpus.values() for r, rounds in rs if not rounds)
        assert firsts == sorted((c, str(p)) for c in "34" for p in times)  # every point once a case
    assert set(two_gpus) == {0, 1}
    for case in ("3", "4"):  # each case's finalists' rounds all on one GPU
        rounds = [g for g, rs in two_gpus.items() for r, rounds in rs if rounds and r.case.id == case]
        assert len(rounds) >= 3 * 5 and len(set(rounds)) == 1
    one, two = ([(c["case"], c["winner"], [p["point"] for p in c["points"]]) for c in d["cases"]] for d in
                (docs[False], docs[True]))
    assert [c[0] for c in two] == ["3", "4"] and [c[1] for c in one] == [c[1] for c in two] == [{"work": 1, "split": 2}] * 2
    assert [sorted(map(str, c[2])) for c in one] == [sorted(map(str, c[2])) for c in two]


@pytest.mark.parametrize("spec, code, says", [
    ("all", 3, "nvgg: --gpus all: no GPU is visible here"),
    ("0", 3, "nvgg: --gpus 0: no GPU is visible here"),
    ("x", 2, "nvgg: --gpus 'x': pass all, or GPU indices"),
    ("0,0", 2, "nvgg: --gpus 0,0: GPU 0 named twice"),
])
def test_profile_refuses_gpus_as_run_does_on_a_machine_without_one(cli, monkeypatch, spec, code, says):
    monkeypatch.setattr(gpus, "visible", lambda: [])
    run = cli("run", "--case", "test-1", "--gpus", spec)
    profile = cli("profile", "--cupti", "--case", "test-1", "--gpus", spec)
    assert (profile.exit_code, profile.stderr) == (run.exit_code, run.stderr) == (code, run.stderr)
    assert run.stderr.startswith(says) and len(run.stderr.strip().splitlines()) == 1


def test_profile_spreads_its_cases_over_the_gpus_each_observer_on_its_cases_gpu(cli, fake_gpu, fake_rows, two_gpus,
                                                                                monkeypatch, tmp_path):
    from nvgg.profiling import ncu
    ncu_on = {}

    def fake_ncu(case, out_dir, gpu=None, **target):
        ncu_on[case.id] = gpu
        return ncu.NcuReport([ncu.KernelMetrics("k", 10.0, 2e6, 70.0, 10.0, 50.0, 60.0, 90, 1024, 132, 256)])
    monkeypatch.setattr(ncu, "profile", fake_ncu)
    doc = tmp_path / "p.json"
    out = cli("profile", "--cupti", "--ncu", "--gpus", "all", "--out", str(tmp_path), "--json", str(doc))
    assert out.exit_code == 0, out.output
    row_on = {row.case.id: g for g, ran in two_gpus.items() for row, _ in ran}
    assert sorted(row_on) == ["1", "2", "3", "4"] and set(row_on.values()) == {0, 1}  # each case once, both GPUs used
    assert ncu_on == row_on  # ncu's target on the GPU of the case's CUPTI row
    written = json.loads(doc.read_text())
    assert [r["case"] for r in written["results"]] == ["1", "2", "3", "4"]  # as asked, however they finished
    assert list(written["ncu"]) == ["1", "2", "3", "4"]


def test_profile_phases_of_a_submission_on_the_gpu_asked_for_and_its_own_failure_said_once(cli, fake_gpu, two_gpus,
                                                                                         monkeypatch, tmp_path):
    from nvgg.profiling import submission_phases
    on, both = [], threading.Barrier(2, timeout=10)

    def unmarked(path, case, timeout_s=None, gpu=None):
        on.append((case.id, gpu))
        if len(on) > 1:  # the spread's: its first two cases both under way before either fails
            both.wait()
        raise NvggError("submission mine.py asked for no probe buffer in a call: mark its kernels with nvgg.probe")
    monkeypatch.setattr(submission_phases, "run", unmarked)
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    out = cli("profile", "--phases", "--submission", str(mine), "--case", "2,3,4", "--gpus", "1")
    assert out.exit_code == 2 and on == [("2", 1)]  # one GPU: the cases after the submission's own failure not tried
    out = cli("profile", "--phases", "--submission", str(mine), "--case", "2,3,4", "--gpus", "all")
    # two GPUs: the first two cases both met it, on a GPU each; it is said once, the third case not tried
    assert out.exit_code == 2 and sorted(c for c, _ in on[1:]) == ["2", "3"] and {g for _, g in on[1:]} == {0, 1}
    assert [line for line in out.stderr.splitlines() if line.startswith("nvgg: ")] == [
        "nvgg: submission mine.py asked for no probe buffer in a call: mark its kernels with nvgg.probe"]
