"""A kernel family's space (nvgg/space.py, family.py knobs): every point of the persistent build's
knobs a case, refused with the family's own reason or built, the family's choice marked; `nvgg
compile --space` builds them on the CPU."""

import json

import jsonschema
import pytest

from nvgg import cases, space
from nvgg.backends import cute
from nvgg.kernels.sm100.family import _model_inputs
from nvgg.cases import make_case
from nvgg.errors import NvggError
from nvgg.kernels.sm100 import host as sm100_host
from nvgg.result import SCHEMA


@pytest.mark.parametrize("case_id", ["1", "2", "3", "4"])
def test_sm100_space_holds_the_models_choice_with_the_models_times(case_id):
    case = cases.get(case_id)
    points = space.points(cute.family("sm_100a"), case)
    assert len(points) == 2 * 2 * 2 and not any(p.refused for p in points)  # mma_n x cta_group x tensor maps
    (default,) = [p for p in points if p.default]
    chosen = sm100_host.choose(case.groups, *_model_inputs(None)).config
    assert default.values == {"mma_n": chosen.mma_n, "cta_group": chosen.cta_group, "tensormaps": "host"}
    for p in points:  # the model's time is the one host.choose ranks by, and the choice is its fastest
        config = sm100_host.gemm.Sm100Config(mma_n=p.values["mma_n"], cta_group=p.values["cta_group"])
        assert p.estimate_us == sm100_host.estimate(case.groups, config, *_model_inputs(None)).makespan_us
        assert default.estimate_us <= p.estimate_us


def test_sm90_space_refuses_with_the_configs_own_reasons_and_holds_the_default():
    fam = cute.family("sm_90a")
    for cid in ("1", "2", "3", "4"):
        points = space.points(fam, cases.get(cid))
        (default,) = [p for p in points if p.default]
        assert not default.refused and default.values == fam.default_point(cases.get(cid))
        built = [p for p in points if not p.refused]
        assert 40 <= len(built) < len(points)
    narrow_wide = next(p for p in points if p.values["tile_m"] == 64 and p.values["wide_tiles"])
    assert narrow_wide.refused == "wide_tiles needs the persistent kernel with tile_m 128 and half tiles"
    deep = next(p for p in points if p.values["tile_m"] == 128 and p.values["stages"] == 6 and p.values["slots"] == 8
                and not p.values["wide_tiles"])
    assert "bytes of shared memory, over sm_90's" in deep.refused and deep.estimate_us is None
    # a shape the kernel cannot take: every point refused, saying which group
    bad = make_case("bad", [64, 64], [256, 200], [512, 512])
    reasons = {p.refused for p in space.points(fam, bad)}
    assert all(reasons) and any(r.startswith("group 1: n=200 is not a multiple of") for r in reasons)


def test_a_build_the_compiler_refuses_is_that_points_error():
    class Flaky(type(cute.family("sm_100a"))):
        def compile_point(self, case, arch, point, sms=None):
            if point["mma_n"] == 256:
                raise RuntimeError("ptxas: out of registers\nmore")
            return []

    built = space.compile_all(Flaky(), [cases.get("4")], "sm_100a")
    assert len(built) == 8
    assert {b.error for b in built if b.point.values["mma_n"] == 256} == {"RuntimeError: ptxas: out of registers"}
    assert all(b.error == "" for b in built if b.point.values["mma_n"] == 128)


def test_a_family_without_knobs_has_no_space():
    class Bare(type(cute.family("sm_100a"))):
        def knobs(self):
            return ()

    with pytest.raises(NvggError, match="declare no choices to sweep"):
        space.points(Bare(), cases.get("4"))


def test_compile_space_builds_every_sm100_point_on_the_cpu(cli, in_process, tmp_path):
    doc = tmp_path / "s.json"
    out = cli("compile", "--arch", "sm_100a", "--case", "4", "--space", "--json", str(doc))
    assert out.exit_code == 0, out.output
    raw = json.loads(doc.read_text())
    jsonschema.validate(raw, json.loads(SCHEMA.read_text()))
    got = raw["space"]
    assert len(got) == 8 and all(p["kernels"] and not p["refused"] and not p["error"] for p in got)
    assert [p["name"] for p in got if p["default"]] == ["mma_n=256 cta_group=2 tensormaps=host"]
    assert len({p["kernels"][0]["name"] for p in got}) == 8  # a build a point: tiles, clusters and maps differ
    out = cli("compile", "--arch", "sm_100a", "--case", "4", "--space")
    assert out.exit_code == 0 and "| 4    | 256   | 2         | host       | *" in out.stdout
    assert "8 points built, 0 refused, 0 failed to compile" in out.stdout


@pytest.mark.parametrize("args, says", [
    (["--strategy", "graph"], "--space sweeps the persistent kernel's choices"),
    (["--tensormaps", "host"], "--space sweeps the persistent kernel's choices"),
    (["--backend", "torch"], "the torch backend runs library kernels nvgg does not compile"),
])
def test_compile_space_refusals(cli, args, says):
    out = cli("compile", "--arch", "sm_100a", "--case", "4", "--space", *args)
    assert out.exit_code == 2 and says in out.stderr, out.output


def test_a_point_is_the_build_the_backend_compiles_and_tiles_by():
    from nvgg.backends import get
    case = cases.get("4")
    point = {"mma_n": 128, "cta_group": 1, "tensormaps": "device"}
    fixed = get("cute", point=point)
    (info,) = fixed.compile(case, "sm_100a", grouped=True)
    assert info.to_dict()["mma_tile"] == [128, 128, 256] and info.to_dict()["tensormaps"] == "device"
    assert info.to_dict()["cluster"] == [1, 1, 1] and info.to_dict()["model"]["model_us"] == pytest.approx(1.843, abs=0.01)
    assert fixed.mode("sm_100a") == "device" and get("cute").mode("sm_100a") == "host"
    (default,) = get("cute").compile(case, "sm_100a", grouped=True)
    assert default.to_dict()["mma_tile"] == [256, 256, 256]  # no point: the model's choice, as before
    # the point's tiles: 128-row tiles of A cover case 4's groups in more tiles than the model's 256
    assert fixed.tiles(case, grouped=True, arch="sm_100a")[0] > get("cute").tiles(case, grouped=True, arch="sm_100a")[0]
    sm90_point = {"tile_m": 64, "stages": 4, "slots": 8, "half_tiles": True, "wide_tiles": False, "tensormaps": "host", "split_k": False}
    assert cute.family("sm_90a").with_point(sm90_point).tiles(case, grouped=True)[0] > \
        cute.family("sm_90a").tiles(case, grouped=True)[0]
    refused = dict(sm90_point, wide_tiles=True)
    assert cute.family("sm_90a").with_point(refused).shape_problem(case, grouped=True) == \
        "wide_tiles needs the persistent kernel with tile_m 128 and half tiles"
    with pytest.raises(NvggError, match="sets mma_n, cta_group, tensormaps; got mma_n"):
        cute.family("sm_100a").with_point({"mma_n": 128})
    with pytest.raises(NvggError, match="the torch backend has no choices to sweep"):
        get("torch", point=point)


def test_a_point_runs_with_the_persistent_strategy_alone(monkeypatch):
    import torch

    from nvgg import selection
    from nvgg.backends import base
    monkeypatch.setattr(base, "_capability", lambda index: (10, 0))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    point = {"mma_n": 128, "cta_group": 2, "tensormaps": "host"}
    for strategy, maps in (("graph", None), ("persistent", "device")):
        with pytest.raises(NvggError, match="run it with the persistent strategy and no tensor-map mode of its own"):
            selection.select(cases.get("4"), strategy, "cute", maps, torch.device("cuda"), point)


def test_compile_space_of_a_case_no_build_takes_is_one_line(cli):
    out = cli("compile", "--arch", "sm_90a", "--space", "--shape", "m: [64]; n: [200]; k: [512]; g: 1")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1, out.output
    assert "case shape: no build of the sm_90a persistent kernel takes it: n=200 is not a multiple of 128" in lines[0]


def test_the_space_compiles_its_distinct_builds_side_by_side_in_processes(cli, tmp_path, monkeypatch):
    """--jobs 2 from a cold cache: every point built by the worker processes (each distinct build
    once, into the cache), the same answer as one build after another, which then only reads it."""
    monkeypatch.setenv("NVGG_CACHE_DIR", str(tmp_path / "cache"))
    docs = []
    for jobs in ("2", "1"):
        doc = tmp_path / f"s{jobs}.json"
        out = cli("compile", "--arch", "sm_100a", "--case", "3,4", "--space", "--jobs", jobs, "--json", str(doc))
        assert out.exit_code == 0, out.output
        docs.append(json.loads(doc.read_text())["space"])
    assert len(list((tmp_path / "cache").iterdir())) == 8  # the 8 builds serve both cases
    parallel, serial = docs
    assert len(parallel) == 16 and all(p["kernels"] and not p["error"] for p in parallel)
    assert [[(k["name"], k["registers"], k["smem_bytes"]) for k in p["kernels"]] for p in parallel] == \
        [[(k["name"], k["registers"], k["smem_bytes"]) for k in p["kernels"]] for p in serial]
    assert all(k["cache_hit"] for p in serial for k in p["kernels"])
    out = cli("compile", "--arch", "sm_100a", "--case", "4", "--jobs", "2")
    assert out.exit_code == 2 and "--jobs compiles the builds of --space side by side" in out.stderr


def test_a_build_refused_in_a_compile_process_is_that_points_error(monkeypatch):
    """In the side-by-side path a compiler's refusal comes back from the worker: the points of that
    build carry it, the others their kernels."""
    monkeypatch.setenv("NVGG_ISOLATION", "off")  # the workers' calls in this process: space.build replaced

    def build(arch, case, point, sms):
        if point["mma_n"] == 256:
            raise RuntimeError("ptxas: out of registers\nmore")
        return [{"name": f"k{point['mma_n']}{point['cta_group']}{point['tensormaps']}"}]
    monkeypatch.setattr(space, "build", build)
    built = space.compile_all(cute.family("sm_100a"), [cases.get("3"), cases.get("4")], "sm_100a", jobs=3)
    assert len(built) == 16 and [b.point.case for b in built] == ["3"] * 8 + ["4"] * 8
    for b in built:
        if b.point.values["mma_n"] == 256:
            assert (b.kernels, b.error) == ([], "RuntimeError: ptxas: out of registers")
        else:
            assert b.error == "" and b.kernels[0]["name"].startswith("k128")
