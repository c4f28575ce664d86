"""The result and its file (nvgg/result.py): every JSON nvgg writes carries its format and kind and
validates against the schema the package ships; files of older formats are read (migrated), newer
ones and other kinds refused in one line; a row survives the round trip typed."""

import json

import jsonschema
import pytest
from conftest import FIXTURES, made_result

from nvgg import result as resultmod
from nvgg.errors import NvggError
from nvgg.gate import Compared
from nvgg.result import FORMAT, Flag, Result
from nvgg.verdict import Verdict

SCHEMA = json.loads(resultmod.SCHEMA.read_text())


def validate(doc: dict) -> None:
    """`doc` is a file of the shipped schema (jsonschema's Draft 2020-12 validator)."""
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)


def test_the_schema_is_a_valid_schema_and_rejects_what_it_should():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    row = made_result("3", "graph", "torch", 10.0).to_dict()
    validate(resultmod.document("results", env={"device": "cpu", "gpu": None, "torch": "2", "nvgg": "0"},
                                results=[row], geomean_us={}))
    for broken in ({"format": 2, "kind": "results"}, {"format": 1, "kind": "timings"},
                   {"format": 1, "kind": "results", "env": {}, "results": [dict(row, status="great")], "geomean_us": {}},
                   {"format": 1, "kind": "cases", "cases": [{"id": "x"}]}):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


def test_an_energy_figure_and_its_absence_validate():
    from nvgg import clocks
    changes = [(0.097, 0.103, 10_000), (0.198, 0.202, 40_000), (0.296, 0.304, 71_000)]
    ends = [0.0005 + k * 0.001 for k in range(500)]
    env = {"device": "cuda", "gpu": "TestGPU", "torch": "2", "nvgg": "0"}
    for energy in (clocks.energy_a_call(changes, ends, 15, 0.52, {"watts": 71.2}),
                   clocks.energy_a_call(changes, ends, 15, 0.52, {"note": "the card was busy"}),
                   clocks.energy_a_call(changes[:2], ends, 15, 0.52, {})):
        row = made_result("3", "persistent", "cute", 35.0, energy=energy).to_dict()
        validate(resultmod.document("results", env=env, results=[row], geomean_us={}))
    for broken in ({"idle_watts": "71 W"}, {"mj_per_call": 20.3, "within_parts": {"count": 0.01, "drift": 0.02}}):
        row = made_result("3", "persistent", "cute", 35.0, energy=broken).to_dict()
        with pytest.raises(jsonschema.ValidationError):
            validate(resultmod.document("results", env=env, results=[row], geomean_us={}))


@pytest.mark.parametrize("argv, kind", [
    (["cases"], "cases"),
    (["sol", "--case", "all"], "sol"),
    (["sol", "--case", "1", "--profile", "h100"], "sol"),
    (["compile", "--arch", "sm_100a", "--case", "3", "--strategy", "persistent", "--backend", "cute"], "compile"),
    (["run", "--case", "test-1"], "results"),
    (["compare", "--case", "test-1", "--strategy", "sequential,graph", "--backend", "torch"], "results"),
])
def test_every_commands_json_validates(cli, in_process, tmp_path, argv, kind):
    path = tmp_path / "out.json"
    out = cli(*argv, "--json", str(path))
    assert out.exit_code == 0, out.output
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["kind"]) == (FORMAT, kind)
    validate(doc)
    printed = cli(*argv, "--json", "-")
    assert json.loads(printed.stdout)["kind"] == kind


def test_profiles_json_and_a_trace_validate(cli, fake_gpu, fake_rows, tmp_path):
    path = tmp_path / "p.json"
    assert cli("profile", "--cupti", "--case", "3,4", "--json", str(path)).exit_code == 0
    doc = json.loads(path.read_text())
    assert doc["kind"] == "profile" and doc["cases"] == ["3", "4"]
    validate(doc)
    from nvgg.kernels.phase_slots import SlotLayout
    from nvgg.profiling import phases
    layout = SlotLayout.for_probe("k", ["start", "exit"])
    validate(json.loads(json.dumps(phases.chrome_trace([[1000, 2000], [0, 0]], layout))))


def test_a_file_written_before_the_format_was_recorded_is_migrated():
    """tests/fixtures/results/format0-compare.json: written by nvgg at a1b53d0."""
    path = FIXTURES / "results" / "format0-compare.json"
    assert "format" not in json.loads(path.read_text())
    rows = resultmod.read_results(path)
    assert [(r["case"], r["strategy"], r["status"]) for r in rows] == [
        ("test-1", "sequential", "ok"), ("test-1", "graph", "unsupported"),
        ("test-2", "sequential", "ok"), ("test-2", "graph", "unsupported")]
    assert resultmod.load(path)[0].stats.mean_us == rows[0]["time_us"]


def test_format_0_rows_of_the_persistent_kernel_ran_device_maps():
    """Before the mode was recorded, the persistent cute kernel had one: its maps made in the kernel."""
    old = {"env": {}, "geomean_us": {}, "results": [{"case": "1", "strategy": "persistent", "backend": "cute", "status": "ok"},
                                                   {"case": "1", "strategy": "graph", "backend": "cute", "status": "ok"}]}
    doc = resultmod.migrate(old, "old.json", "baseline")
    assert (doc["format"], doc["kind"]) == (FORMAT, "results")
    assert [r["tensormaps"] for r in doc["results"]] == ["device", ""]


def test_a_newer_format_or_another_kind_is_refused_in_one_line(tmp_path):
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": FORMAT + 1, "kind": "results", "results": []}))
    with pytest.raises(NvggError, match=rf"baseline .*newer.json is nvgg file format {FORMAT + 1}, written by a newer "
                                        rf"nvgg; this one reads formats 0 to {FORMAT}"):
        resultmod.read_results(newer, "baseline")
    cases = FIXTURES / "results" / "format0-cases.json"  # a list: no nvgg result file of any format
    with pytest.raises(NvggError, match="is not an nvgg file"):
        resultmod.read_results(cases)
    sol = tmp_path / "sol.json"
    sol.write_text(json.dumps(resultmod.document("sol", sol=[])))
    with pytest.raises(NvggError, match="is an nvgg sol file, not results"):
        resultmod.read_results(sol)


def test_a_row_round_trips_typed():
    r = made_result("3", "persistent", "cute", 7.5, tensormaps="host")
    r.flags = [Flag("throttled", "throttled: power cap")]
    r.verdict = Verdict("device", "device: 2.0x the memory floor of h100", {"gap": 2.0})
    r.gate = Compared("same", 0.01, 0.04, 7.4, "", False)
    back = Result.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r and back.flags[0].kind == "throttled" and not back.suspect and not back.trusted
    assert back.verdict.phrase.startswith("device: 2.0x") and back.gate.kind == "same"
    bare = Result.from_dict(json.loads(json.dumps(made_result("3", "graph", "torch", None, status="error").to_dict())))
    assert bare.verdict is None and bare.gate is None and bare.flags == []
