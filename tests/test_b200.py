"""B200 tests of the sm_100a kernels (marker `b200`: `python -m pytest -m b200` on a B200; skipped
elsewhere; this project has never run them: it has had no B200). Every strategy and both tensor-map
modes against the exact reference on the 14 competition cases and on shapes the competition never
uses, outputs poisoned first; repeated launches over the same buffers; the instrumented build's
phase order; a launch on a side stream; programmatic launches back to back over inputs rewritten in
place between calls; the device mode's maps against the host encoder's; the driver launch against
the DSL's own; the persistent grid's size."""

import random

import pytest
import torch

from nvgg import cases, datapath, inputs, reference
from nvgg.cases import make_case

pytestmark = pytest.mark.b200
CUDA = torch.device("cuda")
RUNS = [("persistent", "host"), ("persistent", "device"), ("multistream", None), ("graph", None), ("sequential", None)]


def _extra_cases():
    rng = random.Random(100)
    g16 = [(rng.choice([1, 9, 40, 64, 100, 200, 512]), rng.choice([128, 256, 384, 1024]), rng.choice([256, 512, 1024]))
           for _ in range(16)]
    g64 = [(rng.choice([1, 40, 130, 256, 300]), rng.choice([128, 384]), 256) for _ in range(64)]
    shapes = {
        "g1-m1": [(1, 128, 256)],
        "g1-m7-k16384": [(7, 256, 16384)],
        "g1-m257-n8192": [(257, 8192, 512)],
        "g2-m3-m300": [(3, 384, 768), (300, 128, 256)],
        "g16-mixed": g16,
        "g64-mixed": g64,
    }
    return {name: make_case(name, [s[0] for s in v], [s[1] for s in v], [s[2] for s in v], seed=9)
            for name, v in shapes.items()}


EXTRA = _extra_cases()


@pytest.mark.parametrize("strategy, mode", RUNS)
@pytest.mark.parametrize("case_id", [c.id for c in cases.builtin()])
def test_sm100_matches_the_reference_on_competition_cases(case_id, strategy, mode):
    res = datapath.run_one(cases.get(case_id), strategy=strategy, backend="cute", device=CUDA, batch=2, do_time=False,
                         tensormaps=mode)
    assert res.status == "ok", res.message
    assert res.checked_inputs == 2 and res.tensormaps == (mode or "")


@pytest.mark.parametrize("strategy, mode", [("persistent", "host"), ("persistent", "device"), ("sequential", None)])
@pytest.mark.parametrize("case_id", list(EXTRA))
def test_sm100_matches_the_reference_on_other_shapes(case_id, strategy, mode):
    res = datapath.run_one(EXTRA[case_id], strategy=strategy, backend="cute", device=CUDA, batch=2, do_time=False,
                         tensormaps=mode)
    assert res.status == "ok", res.message


@pytest.mark.parametrize("mode", ["host", "device"])
def test_repeated_launches_over_the_same_buffers(mode):
    """The device mode rewrites its workspace in every launch and the host mode reads one table:
    each launch must compute the whole output again (poisoned in between)."""
    from nvgg.backends import get

    case = cases.get("1")
    data = inputs.generate(case, CUDA)
    launch = get("cute", tensormaps=mode).grouped_launcher(data)
    expected = reference.reference(data, torch.float64)
    for _ in range(3):
        verdict = reference.checked_call(data, launch)
        assert verdict.ok, verdict.message
    assert reference.check(inputs.outputs(data), expected).ok


@pytest.mark.parametrize("mode", ["host", "device"])
def test_phase_buffer_orders_the_phases_of_every_cta(mode):
    from nvgg.backends import get
    from nvgg.profiling import phases

    be = get("cute", tensormaps=mode)
    data = inputs.generate(cases.get("2"), CUDA)
    launch, buffer = be.phase_launcher(data)
    verdict = reference.checked_call(data, launch)
    assert verdict.ok, verdict.message
    layout = be.phase_layout(CUDA)
    rows = buffer.cpu().tolist()
    leaders = [r for r in rows if r[layout.FIRST_MMA] > 0]
    assert leaders
    for r in leaders:
        assert (r[layout.START] <= r[layout.BARRIERS_READY] <= r[layout.TMEM_READY] <= r[layout.EPILOGUE_DONE]
                <= r[layout.EXIT]), r[:layout.SWITCHES]
        assert (r[layout.BARRIERS_READY] <= r[layout.MAPS_READY] <= r[layout.FIRST_TMA_ISSUED]
                <= r[layout.FIRST_TMA_LANDED] <= r[layout.FIRST_MMA] <= r[layout.MAINLOOP_DONE]), r[:layout.SWITCHES]
    report = phases.analyse(buffer.cpu(), layout)
    names = [p.name for p in report.phases]
    assert ("map prefetch" if mode == "host" else "map replace") in names and "tensor-memory alloc" in names
    assert 0 < report.time_to_first_mma_us < report.kernel_us


def test_a_launch_on_a_side_stream_runs_there():
    from nvgg.backends import get

    data = inputs.generate(cases.get("3"), CUDA)
    launch = get("cute").grouped_launcher(data)
    expected = reference.reference(data, torch.float64)
    reference.poison(data)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(1_000_000)  # the kernel must queue behind this on the side stream
        launch()
    side.synchronize()
    assert reference.check(inputs.outputs(data), expected).ok


@pytest.mark.parametrize("mode", ["host", "device"])
def test_back_to_back_programmatic_launches_over_inputs_rewritten_in_place(mode):
    """The persistent kernel starts its CTAs while the kernel before it finishes: whatever that
    kernel wrote (the inputs, refilled in place; C, by the same kernel's launch before) must be
    seen, and C must end as this launch's."""
    from nvgg.backends import get

    case = cases.get("3")
    data = inputs.generate(case, CUDA)
    launch = get("cute", tensormaps=mode).grouped_launcher(data)
    assert launch.programmatic and launch.cluster[0] in (1, 2)
    kept = []
    for i in range(4):
        inputs.refill(case, data, i)  # the kernels right before the launch rewrite its inputs, C to NaN
        launch()
        launch()  # one right behind another over the same tables
        kept.append([c.clone() for c in inputs.outputs(data)])
    torch.cuda.synchronize()
    for i, outs in enumerate(kept):
        twin = inputs.generate(case, CUDA)  # refill's values depend on the case and the index alone
        inputs.refill(case, twin, i)
        verdict = reference.check(outs, reference.reference(twin, torch.float64))
        assert verdict.ok, f"refill {i}: {verdict.message}"


@pytest.mark.parametrize("config_index", range(4))
@pytest.mark.parametrize("case_id", ["test-6", "test-10"])
def test_device_mode_maps_equal_the_host_encoders(case_id, config_index):
    """The device mode rewrites group 0's maps (kernel parameters) for each group a CTA visits, into
    its workspace slot for that visit. After a launch every slot must hold, in words 0-7, the map
    nvgg's host encoder makes for that group (params.group_maps, the host mode's table), bit 21
    (set for a tensor of 128 KiB or more) included: test-6's first group spans 128 KiB in B and the
    later ones do not; test-10's first groups do in A and C, its last one does not."""
    from nvgg.kernels import groups as kgroups
    from nvgg.kernels.sm100 import host, params

    config = host.with_mode(host.CONFIGS[config_index], "device")
    entry = host.compile_gemm(config, need_callable=False)
    data = inputs.generate(cases.get(case_id), CUDA)
    groups = kgroups.all_groups(data)
    tables = host.build_tables(groups, config, host.resident_clusters(entry, config.cta_group),
                               templates=host.templates_of(entry))
    reference.poison(data)
    host.persistent_launch(entry, groups, tables, config)()
    torch.cuda.synchronize()
    templates, workspace, plan = host.templates_of(entry), tables.maps.cpu(), tables.plan
    checked = 0
    for cta in range(plan.clusters * config.cta_group):
        run = plan.records[plan.runs[cta // config.cta_group]:plan.runs[cta // config.cta_group + 1]]
        visited = [r[0] for i, r in enumerate(run) if i == 0 or run[i - 1][0] != r[0]]
        for visit, g in enumerate(visited):
            t = groups[g]
            want = params.group_maps(templates, params.map_addresses(t), t.m, t.n, t.k)
            got = [[w & (1 << 64) - 1 for w in words[:8]] for words in workspace[cta, visit].tolist()]
            assert got == [w[:8] for w in want], (cta, visit, g)
            checked += 1
    assert checked >= len(groups)


@pytest.mark.parametrize("strategy, mode", [("persistent", "host"), ("persistent", "device"), ("sequential", None)])
def test_the_driver_launch_computes_what_the_dsls_launch_does(strategy, mode, monkeypatch):
    """nvgg packs the kernel's parameters itself (kernels/sm100/params.py, checked against the
    DSL's bytes on the CPU); here both launches run, bit for bit the same output."""
    from nvgg.backends import get

    out = {}
    for path in ("driver", "dsl"):
        monkeypatch.setenv("NVGG_SM100_LAUNCH", path)
        data = inputs.generate(cases.get("2"), CUDA)
        be = get("cute", tensormaps=mode)
        launches = [be.grouped_launcher(data)] if strategy == "persistent" else [
            be.group_launcher(data, g) for g in range(len(data[3]))]
        reference.poison(data)
        for launch in launches:
            launch()
        torch.cuda.synchronize()
        out[path] = [c.clone() for c in inputs.outputs(data)]
    assert all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(out["driver"], out["dsl"]))


def test_resident_clusters_match_the_dsls_count():
    from cutlass.utils import HardwareInfo

    from nvgg.kernels.sm100 import config as gemm, host

    torch.zeros(1, device=CUDA)
    for cta_group in (1, 2):
        entry = host.compile_gemm(host.with_mode(gemm.Sm100Config(mma_n=256, cta_group=cta_group), "host"),
                                  need_callable=False)
        assert host.resident_clusters(entry, cta_group) == HardwareInfo(0).get_max_active_clusters(cta_group)
