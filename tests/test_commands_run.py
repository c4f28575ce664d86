"""`nvgg run` (nvgg/commands/run.py): the row it asks for, what it prints and writes, its exit code;
for real on the CPU, and on a fake GPU with the row faked (conftest: fake_gpu, fake_rows)."""

import json

import pytest
import torch
from conftest import made_result


def test_run_on_the_cpu_end_to_end(cli, tmp_path):
    out = cli("run", "--case", "test-2", "--json", str(tmp_path / "r.json"))
    assert out.exit_code == 0, out.output
    assert "(CPU)" in out.stdout and "sequential/torch" in out.stdout and "different bits" in out.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert (doc["format"], doc["kind"]) == (1, "results") and doc["results"][0]["status"] == "ok"
    assert doc["results"][0]["stats"]["clock"] == "host clock (CPU run)"


def test_run_asks_for_the_row_it_parsed(cli, fake_gpu, fake_rows, tmp_path):
    fake_rows.answer = lambda row: made_result(row.case.id, "graph", "torch", 42.0)
    out = cli("run", "--case", "3", "--strategy", "graph", "--backend", "torch", "--timer", "per-call",
              "--timeout", "30", "--json", str(tmp_path / "r.json"))
    assert out.exit_code == 0, out.output
    [row] = fake_rows.seen
    assert (row.case.id, row.strategy, row.backend, row.profile, row.timer, row.tensormaps, row.submission, row.device) == (
        "3", "graph", "torch", None, "per-call", None, None, "cuda")
    assert fake_rows.timeouts == [30.0]
    assert "TestGPU" in out.stdout and "42.00" in out.stdout
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["time_us"] == 42.0


def test_run_defaults_to_this_gpus_best_and_passes_the_tensor_map_mode(cli, fake_gpu, fake_rows):
    assert cli("run", "--case", "3", "--tensormaps", "HOST").exit_code == 0
    assert cli("run", "--case", "3").exit_code == 0
    assert [(r.strategy, r.backend, r.tensormaps) for r in fake_rows.seen] == [
        ("persistent", "cute", "host"), ("persistent", "cute", None)]
    bad = cli("run", "--case", "3", "--tensormaps", "shared")
    assert bad.exit_code == 2 and "shared" in bad.output


def test_a_quick_run_asks_for_one_window_and_no_energy(cli, fake_gpu, fake_rows):
    assert cli("run", "--case", "3").exit_code == 0
    assert cli("run", "--case", "3", "--quick").exit_code == 0
    assert [(r.span, r.energy) for r in fake_rows.seen] == [(True, True), (False, False)]


def test_a_wrong_or_suspect_row_exits_1(cli, fake_gpu, fake_rows):
    fake_rows.answer = lambda row: made_result(row.case.id, "persistent", "cute", None, status="wrong",
                                               message="input 0: 3 of 7168 outputs differ")
    out = cli("run", "--case", "3")
    assert out.exit_code == 1 and "WRONG" in out.stdout


def test_a_submission_brings_its_own_launch_scheme(cli, fake_gpu, fake_rows, tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    out = cli("run", "--case", "3", "--submission", str(mine), "--strategy", "graph")
    assert out.exit_code == 2 and "--submission brings its own launch scheme" in out.stderr and not fake_rows.seen
    fake_rows.answer = lambda row: made_result(row.case.id, "submission", "submission", 20.0, source="mine.py")
    assert cli("run", "--case", "3", "--submission", str(mine)).exit_code == 0
    assert fake_rows.seen[0].submission == str(mine.resolve())


def test_the_table_fits_100_columns_with_its_verdict_under_it(cli, fake_gpu, fake_rows):
    from nvgg.verdict import Verdict

    def answer(row):
        r = made_result(row.case.id, "persistent", "cute", 28.56, tensormaps="host")
        r.verdict = Verdict("host-bound", "host-bound: launches take 31.0 µs a call against 28.0 µs of kernels")
        return r

    fake_rows.answer = answer
    out = cli("run", "--case", "3")
    assert out.exit_code == 0, out.output
    table = [line for line in out.stdout.splitlines() if line.startswith("|")]
    assert len(table) == 3 and max(map(len, table)) <= 100, table
    assert "host-bound [1]" in table[2] and "[1] launches take 31.0 µs a call against 28.0 µs of kernels" in out.stdout


def test_the_evaluators_l2_clear_is_asked_for_checked_for_memory_and_refused_on_a_cpu(cli, fake_gpu, fake_rows, monkeypatch):
    from nvgg import cases, datapath, inputs, timing
    from nvgg.errors import NvggError
    assert cli("run", "--case", "3", "--l2", "evaluator").exit_code == 0
    assert cli("run", "--case", "3").exit_code == 0
    assert [r.l2 for r in fake_rows.seen] == ["evaluator", "nvgg"]
    assert timing.EVALUATOR_L2_BYTES == 62.5 * 2**30 and set(timing.L2_CLEARS) == {"nvgg", "evaluator"}
    # 62.5 GiB of randn beside the inputs: refused up front where the GPU has less free
    monkeypatch.setattr(inputs, "memory_free", lambda device: int(60e9))
    gpu = torch.device("cuda")
    datapath.check_memory(cases.get("3"), gpu, 15)  # nvgg's clear: the inputs fit
    with pytest.raises(NvggError, match=r"the evaluator's L2 clear of 62\.5 GiB\) and the GPU has 60\.0 GB free"):
        datapath.check_memory(cases.get("3"), gpu, 15, "evaluator")


def test_the_evaluators_l2_clear_needs_a_gpu(cli):
    out = cli("run", "--case", "test-1", "--l2", "evaluator")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 3 and len(lines) == 1 and "--l2 evaluator clears a GPU's L2" in lines[0], out.output
