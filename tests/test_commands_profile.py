"""`nvgg profile` (nvgg/commands/profile.py, profiling/session.py): each case under the observers
asked for, one table an observer, a verdict a row, a case's failure costing that case; on a fake GPU
with the observers faked at their entry points (the rows, device_phases.run, ncu.profile,
submission_phases.run)."""

import json

import pytest
from conftest import made_result

from nvgg.errors import NvggError
from nvgg.profiling.phases import Phases


def _cupti(kernel_us=30.0, host=2.0, launches=1):
    return {"calls": 15, "activities": launches, "kernel_us": kernel_us, "sum_us": kernel_us, "span_us": kernel_us,
            "gaps_us": 0.0, "event_us": kernel_us + host, "host_overhead_us": host, "gaps_shown": True,
            "gaps_note": "", "kernels": [{"name": "my_gemm_kernel", "per_call": launches, "mean_us": kernel_us / launches}]}


def test_profile_without_a_case_covers_the_benchmarks_in_one_table(cli, fake_gpu, fake_rows):
    def answer(row):
        res = made_result(row.case.id, "persistent", "cute", 32.0, cupti=_cupti())
        res.setup_us["launch_host"] = 31.0  # the host as slow as the GPU: host-bound
        return res

    fake_rows.answer = answer
    out = cli("profile", "--cupti")
    assert out.exit_code == 0, out.output
    assert [(r.case.id, r.timer, r.strategy) for r in fake_rows.seen] == [(c, "cupti", "persistent") for c in ("1", "2", "3", "4")]
    table = [line for line in out.stdout.splitlines() if "persistent/cute" in line]
    # the verdict's kind in the table, its phrase once under it (the four rows say the same)
    assert len(table) >= 4 and all("host-bound [" in line for line in table[:4])
    assert out.stdout.count("launches take 31.0 µs a call against 30.0 µs of kernels") == 1
    assert "my_gemm_kernel" in out.stdout and "time = kernel µs + host µs" in out.stdout


class _Phases(Phases):
    """A phase run as an observer would return it, for the command's rendering."""

    def __init__(self, case_id):
        self.case_id = case_id

    main = None
    behind = None

    def table(self):
        return f"phases of {self.case_id}"

    def trace(self):
        return {"format": 1, "kind": "trace", "traceEvents": []}

    def to_dict(self):
        return {"case": self.case_id}


def test_profile_phases_keeps_the_cases_it_measured_when_one_is_wrong(cli, fake_gpu, monkeypatch, tmp_path):
    """A case the instrumented build gets wrong (device_phases.run raises NvggError) costs that
    case alone: the cases measured are rendered and written, then the failure is one line, exit 2."""
    from nvgg.profiling import device_phases
    monkeypatch.setenv("NVGG_ISOLATION", "off")

    def fake_run(case, profile=None, tensormaps=None):
        if case.id == "2":
            raise NvggError("the instrumented kernel is wrong on case 2: 3 of 7168 outputs differ")
        return _Phases(case.id)

    monkeypatch.setattr(device_phases, "run", fake_run)
    out = cli("profile", "--phases", "--case", "1,2,3", "--json", str(tmp_path / "p.json"))
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "phases of 1" in out.stdout and "phases of 3" in out.stdout and "phases of 2" not in out.stdout
    assert out.stderr.strip().splitlines()[-1] == ("nvgg: case 2: phases: the instrumented kernel is wrong on case 2: "
                                                   "3 of 7168 outputs differ")
    doc = json.loads((tmp_path / "p.json").read_text())
    assert set(doc["phases"]) == {"1", "3"} and doc["failures"][0].startswith("case 2: phases:")


def test_profile_ncu_exactly_as_users_call_it(cli, fake_gpu, monkeypatch, tmp_path):
    from nvgg.profiling import ncu
    calls = []

    def fake_profile(case, out_dir, **kwargs):
        calls.append((case.id, kwargs))
        return ncu.NcuReport([ncu.KernelMetrics("k", 10.0, 2e6, 70.0, 10.0, 50.0, 60.0, 90, 1024, 132, 256)])

    monkeypatch.setattr(ncu, "profile", fake_profile)
    out = cli("profile", "--ncu", "--out", str(tmp_path))
    assert out.exit_code == 0, out.output
    assert [c for c, _ in calls] == ["1", "2", "3", "4"] and calls[0][1]["strategy"] == "persistent"
    assert calls[0][1]["clock_control"] == "none" and "gpu" not in calls[0][1]  # without --gpus: the GPU it sees
    assert out.stdout.count("| k ") == 4 and "case 4: total 10.00 µs" in out.stdout


def test_profile_a_submission_with_cupti_and_a_timeout(cli, fake_gpu, fake_rows, tmp_path):
    def answer(row):
        return made_result(row.case.id, "submission", "submission", 40.0, cupti=_cupti(kernel_us=36.0, launches=8))

    fake_rows.answer = answer
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    out = cli("profile", "--cupti", "--submission", str(mine), "--case", "3", "--timeout", "20",
              "--json", str(tmp_path / "p.json"))
    assert out.exit_code == 0, out.output
    [row] = fake_rows.seen
    assert row.timer == "cupti" and row.case.id == "3" and row.submission == str(mine.resolve())
    assert fake_rows.timeouts == [20.0]
    assert "my_gemm_kernel" in out.stdout and "| 8 " in out.stdout
    doc = json.loads((tmp_path / "p.json").read_text())
    assert (doc["format"], doc["kind"]) == (1, "profile")
    assert doc["results"][0]["cupti"]["kernels"][0]["name"] == "my_gemm_kernel" and doc["results"][0]["verdict"]["kind"]


@pytest.mark.parametrize("args, says", [
    (["profile", "--occupancy", "--submission", "mine.py"], "a submission is profiled with --cupti, --ncu and --phases"),
    (["profile", "--phases", "--submission", "nonexistent.py", "--case", "3"], "submission nonexistent.py does not exist"),
    (["profile", "--phases", "--submission", "tests", "--case", "3"], "submission tests is a folder"),
    (["profile", "--phases", "--case", "3", "--trace", "README.md/t.json"], "--trace README.md/t.json cannot be written"),
    (["profile", "--phases", "--case", "3", "--json", "/"], "--json / is a folder"),
    (["profile", "--cupti", "--case", "3", "--trace", "t.json"], "--trace writes the phases inside the kernel"),
    (["profile", "--phases", "--case", "3", "--strategy", "graph"], "--phases instruments the persistent cute kernel"),
    (["profile", "--phases", "--case", "3", "--backend", "torch"], "--phases instruments the persistent cute kernel"),
    (["profile", "--cupti", "--case", "3", "--strategy", "graph", "--tensormaps", "host"], "the graph strategy launches one kernel per group"),
    (["profile"], "choose what to profile"),
])
def test_profile_refusals(cli, fake_gpu, args, says):
    out = cli(*args)
    assert out.exit_code == 2 and says in out.output, out.output


# --- profile --phases --submission: the user's own kernel's marks ------------------------------

def _submission_phases(case_id="4", overflow=False):
    """A submission's phase run as the two children would answer (submission_phases.assemble): one
    launch a call of a kernel marking 4 moments, CUPTI's record of it, and the next call's launch
    starting 4 µs after this one's last mark."""
    from nvgg.profiling.submission_phases import assemble
    marks = ["start", "maps_ready", "first_mma", "epilogue_done"]
    rows = [[1_000, 3_000, 4_000, 101_000], [1_500, 3_100, 4_500, 99_000], [3, 3, 3, 3] if overflow else [0, 0, 0, 0]]
    launch = {"kernel": "cute_gemm", "marks": marks, "rows": rows}
    later = dict(launch, rows=[[t + 104_000 for t in row] for row in rows[:2]] + [[0, 0, 0, 0]])
    marked = {"checked": 3, "busy_us": [101.0, 102.0, 103.0, 104.0], "pair": [[launch], [later]],
              "call": {"busy_us": 102.0, "launches": [launch], "kernels": [["kernel_cutlass_cute_gemm_0", 102.0, 0.0]]}}
    return assemble("mine.py", case_id, marked, {"checked": 3, "busy_us": [99.0, 100.0, 100.0, 101.0]})


def test_profile_phases_of_a_submission(cli, fake_gpu, monkeypatch, tmp_path):
    from nvgg.profiling import submission_phases
    seen = []

    def fake_run(path, case, timeout_s=None):
        seen.append((path, case.id, timeout_s))
        return _submission_phases(case.id)

    monkeypatch.setattr(submission_phases, "run", fake_run)
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    trace, doc = tmp_path / "t.json", tmp_path / "p.json"
    out = cli("profile", "--phases", "--submission", str(mine), "--case", "4", "--timeout", "90",
              "--trace", str(trace), "--json", str(doc))
    assert out.exit_code == 0, out.output
    assert seen == [(str(mine.resolve()), "4", 90.0)]
    text = out.stdout
    row = next(line for line in text.splitlines() if "start → maps_ready" in line)
    assert [c.strip() for c in row.strip("|").split("|")] == ["cute_gemm", "0", "start → maps_ready", "2", "1.800", "2.000"]
    assert "time to first MMA 3.00 µs (median), setup share 3.0%" in text
    assert ("CUPTI kernel time a call 102.50 µs with marks (quartiles 101.25-103.75) vs 100.00 µs without "
            "(99.25-100.75): +2.5% (medians of 4 calls each" in text)
    assert ("the marks span 100.00 µs of the 102.00 µs kernel time of the 1 launch(es) they mark (CUPTI, 98.0%; the "
            "call's kernels: 102.00 µs)") in text
    assert ("start at +4.00 µs (earliest; median +4.25), first MMA at +7.25 µs (median) from the last mark of the same "
            "launch of this call") in text
    # the calls do not overlap: nothing for the verdict's setup judgement to read
    assert _submission_phases().behind is None
    assert "the calls do not overlap" in text
    written = json.loads(trace.read_text())
    assert (written["format"], written["kind"]) == (1, "trace")
    assert {e["tid"] for e in written["traceEvents"] if e["ph"] == "X"} == {0, 1}
    kernels = json.loads(doc.read_text())["phases"]["4"]["kernels"]
    assert kernels[0]["kernel"] == "cute_gemm" and kernels[0]["phases"][0]["median_us"] == pytest.approx(1.8)


def test_profile_phases_of_a_submission_states_bad_input_in_one_line_and_keeps_the_rest(cli, fake_gpu, monkeypatch,
                                                                                         tmp_path):
    from nvgg.profiling import submission_phases

    def fake_run(path, case, timeout_s=None):
        if case.id == "3":
            raise submission_phases.CaseFailure("case 3 (with marks): timed out after 60 s (a hang, or far too slow "
                                                "for its time limit)")
        return _submission_phases(case.id, overflow=case.id == "4")

    monkeypatch.setattr(submission_phases, "run", fake_run)
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    doc = tmp_path / "p.json"
    out = cli("profile", "--phases", "--submission", str(mine), "--case", "2,3,4", "--json", str(doc))
    assert out.exit_code == 2
    assert "case 2:" in out.stdout and "case 4:" in out.stdout and set(json.loads(doc.read_text())["phases"]) == {"2", "4"}
    errors = [line for line in out.stderr.splitlines() if line.startswith("nvgg: ")]
    assert errors == ["nvgg: case 3 (with marks): timed out after 60 s (a hang, or far too slow for its time limit)",
                      "nvgg: case 4: cute_gemm: CTAs up to index 2 marked but its buffer holds 2: the marks of 1 CTAs "
                      "are lost; pass the launch's CTA count to buffer()"]

    # a problem of the submission itself (here: no marks) stops at the first case: one line
    def unmarked(path, case, timeout_s=None):
        raise NvggError("submission mine.py asked for no probe buffer in a call: mark its kernels with nvgg.probe")

    monkeypatch.setattr(submission_phases, "run", unmarked)
    out = cli("profile", "--phases", "--submission", str(mine))
    assert out.exit_code == 2 and out.stderr.count("nvgg: ") == 1 and "asked for no probe buffer" in out.stderr


def test_profile_phases_trace_of_several_cases_holds_every_case_and_launch(cli, fake_gpu, monkeypatch, tmp_path):
    """--trace with several cases: one trace, a process a case and launch, named "case ID: kernel
    (launch i)", each process's CTAs on tracks of their own."""
    from nvgg.profiling import submission_phases

    def fake_run(path, case, timeout_s=None):
        run = _submission_phases(case.id)
        if case.id == "1":  # a second launch of the kernel a call
            run.launches.append(dict(run.launches[0]))
            run.marked = submission_phases.marked_launches(run.launches)
        return run

    monkeypatch.setattr(submission_phases, "run", fake_run)
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    trace = tmp_path / "t.json"
    out = cli("profile", "--phases", "--submission", str(mine), "--case", "1,4", "--trace", str(trace))
    assert out.exit_code == 0, out.output
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {0: "case 1: cute_gemm (launch 0)", 1: "case 1: cute_gemm (launch 1)", 2: "case 4: cute_gemm (launch 0)"}
    assert {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"} == {(p, c) for p in range(3) for c in (0, 1)}
    # each case from its own first reading
    assert sorted({e["ts"] for e in events if e["ph"] == "i" and e["name"] == "start"}) == [0.0, 0.5]


def test_profile_gives_a_config_maps_point_to_every_observer(cli, fake_gpu, fake_rows, monkeypatch, tmp_path):
    """--config: each case's point reaches the CUPTI row, ncu's child, the occupancy report and the
    phases, for our persistent kernel's builds and for a submission's CONFIG alike."""
    from nvgg.profiling import device_phases, ncu, occupancy_report, submission_phases
    monkeypatch.setenv("NVGG_ISOLATION", "off")
    seen = []
    monkeypatch.setattr(ncu, "profile", lambda case, out_dir, **kw: seen.append(("ncu", case.id, kw.get("point")))
                        or ncu.NcuReport([ncu.KernelMetrics("k", 10.0, 2e6, 70.0, 10.0, 50.0, 60.0, 90, 1024, 132, 256)]))
    monkeypatch.setattr(occupancy_report, "report", lambda case, be, st, device, prof: seen.append(("occupancy", case.id, be.point))
                        or [])
    monkeypatch.setattr(device_phases, "run", lambda case, profile=None, tensormaps=None, point=None:
                        seen.append(("phases", case.id, point)) or _Phases(case.id))
    ours = {"tile_m": 128, "stages": 3, "slots": 8, "half_tiles": True, "wide_tiles": False, "tensormaps": "device", "split_k": False}
    other = dict(ours, stages=5, tensormaps="host")
    cfg = tmp_path / "map.json"
    cfg.write_text(json.dumps({"format": 1, "kind": "config", "target": "persistent/cute", "arch": "sm_90a",
                               "space": {}, "cases": {"3": ours, "4": other}}))
    out = cli("profile", "--cupti", "--ncu", "--occupancy", "--phases", "--case", "3,4", "--config", str(cfg),
              "--out", str(tmp_path))
    assert out.exit_code == 0, out.output
    assert [tuple(r.point) for r in fake_rows.seen] == [tuple(ours.items()), tuple(other.items())]
    assert all((r.strategy, r.backend) == ("persistent", "cute") for r in fake_rows.seen)
    assert seen == [(what, cid, p) for cid, p in (("3", ours), ("4", other)) for what in ("ncu", "occupancy", "phases")]
    out = cli("profile", "--cupti", "--case", "3", "--strategy", "graph", "--config", str(cfg))
    assert out.exit_code == 2 and "--config holds builds of the persistent cute kernel" in out.stderr
    cfg.write_text(json.dumps({"format": 1, "kind": "config", "target": "persistent/cute", "arch": "sm_100a",
                               "space": {}, "cases": {"3": ours}}))
    out = cli("profile", "--cupti", "--case", "3", "--config", str(cfg))
    assert out.exit_code == 2 and "holds sm_100a builds of our kernel and this machine has sm_90a" in out.stderr

    # a submission's map: its CONFIG for the row and the phases' children
    phases_points = []
    monkeypatch.setattr(submission_phases, "run", lambda path, case, timeout_s=None, point=():
                        phases_points.append(point) or _submission_phases(case.id))
    mine = tmp_path / "mine.py"
    mine.write_text("TUNE = {'work': [1, 2]}\n\ndef custom_kernel(data):\n    return None\n")
    fake_rows.seen.clear()
    cfg.write_text(json.dumps({"format": 1, "kind": "config", "target": "mine.py", "arch": "", "space": {"work": [1, 2]},
                               "cases": {"4": {"work": 2}}}))
    out = cli("profile", "--cupti", "--phases", "--submission", str(mine), "--case", "4", "--config", str(cfg))
    assert out.exit_code == 0, out.output
    assert [tuple(r.point) for r in fake_rows.seen] == [(("work", 2),)] and phases_points == [(("work", 2),)]
    out = cli("profile", "--cupti", "--case", "4", "--config", str(cfg))
    assert out.exit_code == 2 and "--config holds a submission's points" in out.stderr


def test_profile_says_a_bad_config_map_before_the_missing_gpu(cli, tmp_path):
    """On a machine without a GPU a map that cannot serve is still the first thing said (exit 2)."""
    out = cli("profile", "--cupti", "--case", "3", "--config", str(tmp_path / "nope.json"))
    assert out.exit_code == 2 and "config map" in out.stderr and "does not exist" in out.stderr
    out = cli("profile", "--cupti", "--case", "3")
    assert out.exit_code == 3 and "needs a CUDA GPU" in out.stderr
