"""The kernel-family registry (nvgg/kernels/registry.py): the folders' families found, and a
throwaway one (an "sm_120a" defined here, or in a folder of its own) picked up by every generic
path that used to name the archs: the cute backend's choice, `nvgg compile`'s arch check and table,
ncu's counters, the phase slots. CPU only; nothing of the throwaway family is compiled."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap

import pytest
import torch

from nvgg import backends, cases, kernels, profiles, selection, strategies
from nvgg.backends import cute
from nvgg.kernels import registry
from nvgg.backends.base import KernelInfo
from nvgg.kernels.family import KernelFamily, Knob, NcuCounters
from nvgg.errors import NvggError
from nvgg.kernels.phase_slots import SlotLayout
from nvgg.profiling import ncu, phases

FAKE_LAYOUT = SlotLayout("fake_grouped_gemm_sm120", ("START", "FIRST_MMA", "EXIT"),
                         (("to first MMA", "START", "FIRST_MMA"), ("the rest", "FIRST_MMA", "EXIT")), max_switches=2)
FAKE_NCU = NcuCounters("sm_120", "gb202", "sm__pipe_fake_cycles_active", "fake pipe")


class FakeSm120(KernelFamily):
    """A family of no real kernels: its tables differ from both real ones' wherever they can."""

    arch, capability, gpus, profile = "sm_120a", (12, 0), "RTX 5090", "b200"
    tensormap_modes, default_mode, programmatic = ("host",), "host", False
    columns = (("lanes", "lanes"),)
    model = "the fake model"
    ncu = FAKE_NCU
    compiled: list = []  # what the generic code asked of the family, in order

    def shape_problem(self, case, *, grouped):
        return "the fake kernel takes no case of 2 groups" if case.g == 2 else None

    def compile(self, case, arch, *, grouped=False, sms=None, tensormaps=None):
        self.compiled.append((case.id, arch, grouped, sms, tensormaps))
        return [KernelInfo(f"fake_gemm_sm120[grouped={grouped}]", arch, 64, 1024, 128, {"lanes": 7})]

    def tiles(self, case, *, grouped=False, sms=None):
        return [case.g]

    def group_launcher(self, data, g):
        raise AssertionError("nothing is launched on the CPU")

    def grouped_launcher(self, data, tensormaps=None):
        raise AssertionError("nothing is launched on the CPU")

    def phase_launcher(self, data, tensormaps=None, programmatic=False):
        raise AssertionError("nothing is launched on the CPU")

    def phase_layout(self, tensormaps=None):
        return FAKE_LAYOUT

    def knobs(self):
        return (Knob("lanes", (4, 8)),)

    def point_build(self, case, point, sms=None):
        return (None, "8 lanes do not fit") if point["lanes"] == 8 else (("fake", point["lanes"]), None)

    def default_point(self, case, sms=None):
        return {"lanes": 4}

    def point_estimate(self, case, point, sms=None):
        return 12.5

    def _compile_config(self, config, arch):
        return [KernelInfo("fake_gemm_sm120[lanes=4]", arch, 64, 1024, 128, {"lanes": config[1]})]


@pytest.fixture
def fake(monkeypatch):
    """FakeSm120 registered for one test; CUTE_DSL_ARCH (which `nvgg compile` sets) restored after."""
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    monkeypatch.setattr(FakeSm120, "compiled", [])
    registry.register(FakeSm120)
    yield FakeSm120
    registry.unregister(FakeSm120)


def test_the_families_are_the_folders_and_carry_their_tables():
    from nvgg.kernels.sm90.family import Sm90Kernels
    from nvgg.kernels.sm100.family import Sm100Kernels

    assert registry.families() == (Sm90Kernels, Sm100Kernels)  # by compute capability
    assert registry.archs() == ("sm_90a", "sm_100a")
    assert registry.get("sm_100a") is Sm100Kernels and registry.get("sm_80") is None
    assert registry.for_capability(9) is Sm90Kernels and registry.for_capability(12) is None
    assert [(f.capability, f.gpus, f.profile) for f in registry.families()] == [
        ((9, 0), "H100/H200", "h100"), ((10, 0), "B200", "b200")]
    for family in registry.families():  # the profile compile reads is one of the family's own cards
        assert profiles.get(family.profile).arch == family.arch
    assert Sm90Kernels.columns == () and dict(Sm100Kernels.columns) == {"tmem_columns": "tmem", "cluster": "cluster",
                                                                         "stages": "stages"}
    assert (Sm90Kernels.model, Sm100Kernels.model) == (None, "the B200 model")


def test_a_registered_family_is_the_cute_backends_for_its_arch(fake):
    assert registry.archs() == ("sm_90a", "sm_100a", "sm_120a") and registry.for_capability(12) is fake
    assert isinstance(cute.family("sm_120a"), fake)
    be = cute.CuteBackend()
    assert isinstance(be.kernels("sm_120a"), fake)
    assert be.compile(cases.get("test-8"), "sm_120a", grouped=True, sms=170)[0].extra == {"lanes": 7}
    assert fake.compiled == [("test-8", "sm_120a", True, 170, "host")]
    with pytest.raises(NvggError, match="takes no case of 2 groups"):
        be.compile(cases.get("3"), "sm_120a")
    assert be.tiles(cases.get("test-8"), arch="sm_120a") == [cases.get("test-8").g]
    # the tensor-map modes are the family's own, checked where every command checks them
    with pytest.raises(NvggError, match="sm_120a persistent kernel has tensor maps host only, not 'device'"):
        selection.check_tensormaps("device", strategy=strategies.get("persistent"), backend="cute", arch="sm_120a")


def test_a_gpu_of_a_registered_familys_arch_runs_the_cute_backend_by_default(fake, monkeypatch):
    pytest.importorskip("cutlass")  # the cute backend is there only with CuTe DSL installed
    monkeypatch.setattr("nvgg.backends.base.arch_of", lambda device: "sm_120a")
    assert backends.best(torch.device("cuda")) == "cute"
    monkeypatch.setattr("nvgg.backends.base.arch_of", lambda device: "sm_80")
    assert backends.best(torch.device("cuda")) == "torch"


def test_the_cute_backends_sentences_list_a_registered_family(fake):
    with pytest.raises(NvggError) as no_gpu:
        cute.CuteBackend().check(cases.get("3"), torch.device("cpu"))
    assert "(sm_90a: H100/H200; sm_100a: B200; sm_120a: RTX 5090)" in str(no_gpu.value)
    with pytest.raises(NvggError, match="has kernels for sm_90a, sm_100a, sm_120a; sm_80 has none"):
        cute.family("sm_80")
    with pytest.raises(NvggError, match="pass arch='sm_90a' or 'sm_100a' or 'sm_120a'"):
        cute.CuteBackend().tiles(cases.get("3"))


def test_compile_targets_a_registered_family_with_its_profile_and_columns(fake, cli):
    pytest.importorskip("cutlass")  # the cute backend is there only with CuTe DSL installed
    out = cli("compile", "--arch", "sm_120a", "--case", "test-8")
    assert out.exit_code == 0, out.output
    header = out.stdout.splitlines()[0]
    assert [h.strip() for h in header.strip("|").split("|")] == [
        "case", "kernel", "regs", "smem B", "threads", "lanes", "occupancy", "limited by"]
    assert "| 7 " in out.stdout.splitlines()[2]
    assert "target sm_120a, occupancy against the b200 profile (148 SMs)" in out.stdout
    assert fake.compiled == [("test-8", "sm_120a", True, 148, "host")]
    out = cli("compile", "--arch", "sm_120a", "--case", "test-8", "--strategy", "graph", "--json", "-")
    (kernel,) = json.loads(out.stdout)["kernels"]
    assert (kernel["arch"], kernel["lanes"], kernel["profile"], kernel["strategy"]) == ("sm_120a", 7, "b200", "graph")
    out = cli("compile", "--arch", "sm_121a", "--case", "test-8")
    assert out.exit_code == 2 and "--arch 'sm_121a': choose sm_100a or sm_120a or sm_90a" in out.stderr


def test_compile_space_names_a_registered_familys_model(fake, cli):
    pytest.importorskip("cutlass")
    out = cli("compile", "--arch", "sm_120a", "--case", "test-8", "--space", "--jobs", "1")
    assert out.exit_code == 0, out.output
    assert "model µs: the fake model that choice follows" in out.stdout
    assert "refused 1: 8 lanes do not fit" in out.stdout and "1 points built, 1 refused" in out.stdout


def test_ncu_reads_a_registered_familys_counters(fake, monkeypatch, tmp_path):
    row = "\n".join(",".join(f'"{c}"' for c in line) for line in (
        ["Kernel Name", "gpu__time_duration.sum", ncu.CC_MAJOR, ncu.ArchMetrics(**dataclasses.asdict(FAKE_NCU)).tensor_pct],
        ["", "nsecond", "", "%"], ["fake_gemm_sm120", "10000", "12", "71.5"]))
    (k,) = ncu.parse_raw_csv(row)
    assert (k.arch, k.tensor_pipe, k.tensor_label, k.tensor_pct) == ("sm_120", "sm__pipe_fake_cycles_active",
                                                                     "fake pipe", 71.5)
    seen = {}

    def fake_once(fn, *, wrap, **kwargs):
        seen["cmd"] = list(wrap)
        raise ncu.procs.ChildFailure("stopped here")

    monkeypatch.setattr(ncu, "find_ncu", lambda: "ncu")
    monkeypatch.setattr(ncu, "local_major", lambda: 12)
    monkeypatch.setattr(ncu.procs, "run_once", fake_once)
    with pytest.raises(NvggError, match="stopped here"):
        ncu.profile(cases.get("3"), tmp_path, strategy="persistent", backend="cute", tensormaps=None)
    requested = seen["cmd"][seen["cmd"].index("--metrics") + 1].split(",")
    assert requested == list(ncu.ArchMetrics(**dataclasses.asdict(FAKE_NCU)).requested()) and requested[-1] == "sm__pipe_fake_cycles_active.avg.pct_of_peak_sustained_elapsed"


def test_the_phase_profiler_reads_a_registered_familys_slots(fake, monkeypatch):
    monkeypatch.setattr(cute, "arch_of", lambda device: "sm_120a")
    layout = cute.CuteBackend().phase_layout(torch.device("cuda"))
    assert layout is FAKE_LAYOUT
    rep = phases.analyse([[1_000, 4_000, 9_000, 0, 0, 0], [2_000, 3_000, 8_000, 0, 0, 0]], layout)
    by = {p.name: p for p in rep.phases}
    assert by["to first MMA"].median_us == pytest.approx(2.0) and by["the rest"].median_us == pytest.approx(5.0)
    assert rep.kernel_us == pytest.approx(8.0)


def test_a_family_is_refused_when_half_done_or_a_twin():
    class Half(FakeSm120):
        capability = KernelFamily.capability  # abstract again

    with pytest.raises(NvggError, match="Half leaves capability undefined"):
        registry.register(Half)

    class Twin(FakeSm120):
        arch = "sm_90a"

    with pytest.raises(NvggError, match="two kernel families build for sm_90a: nvgg.kernels.sm90.family.Sm90Kernels"):
        registry.register(Twin)
    assert registry.archs() == ("sm_90a", "sm_100a")


FOLDER_FAMILY = '''
"""A kernel family in a folder of its own, as a new architecture would be."""

from nvgg.kernels.family import KernelFamily


class Sm120Kernels(KernelFamily):
    arch, capability, gpus, profile = "sm_120a", (12, 0), "RTX 5090", "b200"
    tensormap_modes, default_mode, programmatic = ("host",), "host", False

    def shape_problem(self, case, *, grouped):
        return None

    def compile(self, case, arch, *, grouped=False, sms=None, tensormaps=None):
        return []

    def tiles(self, case, *, grouped=False, sms=None):
        return []

    def group_launcher(self, data, g):
        raise NotImplementedError

    def grouped_launcher(self, data, tensormaps=None):
        raise NotImplementedError

    def phase_launcher(self, data, tensormaps=None, programmatic=False):
        raise NotImplementedError

    def phase_layout(self, tensormaps=None):
        raise NotImplementedError
'''


@pytest.fixture
def folder(monkeypatch, tmp_path):
    """A folder beside nvgg/kernels/'s own (on the package's path), its modules forgotten after."""
    monkeypatch.setattr(kernels, "__path__", [*kernels.__path__, str(tmp_path)])
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("nvgg.kernels.sm120")]:
        del sys.modules[name]


def test_a_new_architecture_is_one_folder_with_its_family_file(folder):
    (folder / "sm120").mkdir()
    (folder / "sm120" / "__init__.py").write_text('"""A new architecture."""\n')
    (folder / "sm120" / "family.py").write_text(textwrap.dedent(FOLDER_FAMILY))
    assert registry.archs() == ("sm_90a", "sm_100a", "sm_120a")
    found = cute.family("sm_120a")
    assert type(found).__module__ == "nvgg.kernels.sm120.family" and found.mode() == "host"


def test_a_folder_without_a_family_file_is_no_architecture(folder):
    (folder / "sm120").mkdir()  # a package of helpers, say
    (folder / "sm120" / "__init__.py").write_text("")
    assert registry.archs() == ("sm_90a", "sm_100a")


def test_a_family_file_without_a_family_is_refused(folder):
    (folder / "sm120").mkdir()
    (folder / "sm120" / "__init__.py").write_text("")
    (folder / "sm120" / "family.py").write_text("TABLE = {}\n")
    with pytest.raises(NvggError, match=r"sm120/family.py defines no kernel family"):
        registry.families()
