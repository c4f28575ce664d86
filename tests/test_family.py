"""The kernel-family interface (nvgg/kernels/family.py): both families implement all of it, with
one default for each choice, and the cute backend runs the family it is given (CPU)."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("cutlass")

from nvgg import cases  # noqa: E402
from nvgg.backends.cute import CuteBackend  # noqa: E402
from nvgg.kernels.sm90.family import Sm90Kernels  # noqa: E402
from nvgg.kernels.sm100.family import Sm100Kernels  # noqa: E402
from nvgg.kernels.family import KernelFamily  # noqa: E402
from nvgg.errors import NvggError  # noqa: E402
from nvgg.kernels.sm90.phase_slots import SM90, SM90_CHUNKS  # noqa: E402

FAMILIES = [Sm90Kernels, Sm100Kernels]
# the interface's methods with a choice a caller may leave open, and those choices
CHOICES = {"compile": ("tensormaps",), "grouped_launcher": ("tensormaps",),
           "phase_launcher": ("tensormaps", "programmatic"), "phase_layout": ("tensormaps",)}


def test_the_interface_cannot_be_instantiated_half_done():
    class NoLaunches(KernelFamily):
        arch, tensormap_modes, default_mode, programmatic = "sm_90a", ("host",), "host", False

        def shape_problem(self, case, *, grouped):
            return None

    with pytest.raises(TypeError, match="grouped_launcher"):
        NoLaunches()
    assert KernelFamily.__abstractmethods__ == {
        "arch", "capability", "gpus", "profile", "tensormap_modes", "default_mode", "programmatic", "shape_problem",
        "compile", "tiles", "group_launcher", "grouped_launcher", "phase_launcher", "phase_layout"}


@pytest.mark.parametrize("cls", FAMILIES)
def test_each_family_implements_the_whole_interface(cls):
    kernels = cls()
    assert isinstance(kernels, KernelFamily) and not cls.__abstractmethods__
    assert kernels.arch == {Sm90Kernels: "sm_90a", Sm100Kernels: "sm_100a"}[cls]
    assert set(kernels.tensormap_modes) == {"device", "host"}
    assert kernels.programmatic is True  # both launch the timed persistent kernel programmatically


@pytest.mark.parametrize("cls", FAMILIES)
def test_every_open_choice_has_the_interfaces_default(cls):
    for method, choices in CHOICES.items():
        ours = inspect.signature(getattr(cls, method)).parameters
        declared = inspect.signature(getattr(KernelFamily, method)).parameters
        for choice in choices:
            assert ours[choice].default == declared[choice].default, (cls.__name__, method, choice)
    assert inspect.signature(KernelFamily.phase_launcher).parameters["programmatic"].default is False


@pytest.mark.parametrize("cls", FAMILIES)
def test_no_tensor_map_mode_means_host_on_both(cls):
    kernels = cls()
    assert kernels.default_mode == kernels.mode(None) == kernels.mode() == "host"
    assert kernels.mode("device") == "device"
    with pytest.raises(NvggError, match="not 'shared'"):
        kernels.mode("shared")
    assert kernels.phase_layout().phases == kernels.phase_layout("host").phases


def test_the_sm100_phase_slots_follow_the_mode():
    kernels = Sm100Kernels()
    labels = {mode: [p[0] for p in kernels.phase_layout(mode).phases] for mode in (None, "host", "device")}
    assert "map prefetch" in labels[None] and labels[None] == labels["host"]
    assert "map replace" in labels["device"]
    # the sm_90a slots are the same in both modes; the default build (chunks) names its phases apart
    assert Sm90Kernels().phase_layout() is Sm90Kernels().phase_layout("device") is SM90_CHUNKS
    assert Sm90Kernels(readiness="rows").phase_layout("host") is SM90
    assert SM90_CHUNKS.names == SM90.names and SM90_CHUNKS.slots == SM90.slots


@pytest.mark.parametrize("cls", FAMILIES)
def test_a_persistent_build_without_a_mode_is_the_default_modes(cls):
    kernels = cls()
    case = cases.get("test-8")
    (info,) = kernels.compile(case, kernels.arch, grouped=True)
    assert info.extra["tensormaps"] == "host"
    assert info.name == CuteBackend().compile(case, kernels.arch, grouped=True)[0].name


class Recording(KernelFamily):
    """A family that records what the backend asks of it."""

    arch, tensormap_modes, default_mode, programmatic = "sm_90a", ("device", "host"), "host", False
    capability, gpus, profile = (9, 0), "H100/H200", "h100"

    def __init__(self):
        self.calls = []

    def shape_problem(self, case, *, grouped):
        self.calls.append(("shape_problem", case.id, grouped))
        return None

    def compile(self, case, arch, *, grouped=False, sms=None, tensormaps=None):
        self.calls.append(("compile", case.id, arch, grouped, sms, tensormaps))
        return []

    def tiles(self, case, *, grouped=False, sms=None):
        return [len(self.calls)]

    def group_launcher(self, data, g):
        raise AssertionError("nothing is launched on the CPU")

    def grouped_launcher(self, data, tensormaps=None):
        raise AssertionError("nothing is launched on the CPU")

    def phase_launcher(self, data, tensormaps=None, programmatic=False):
        raise AssertionError("nothing is launched on the CPU")

    def phase_layout(self, tensormaps=None):
        return SM90


def test_the_backend_runs_the_family_it_is_given_on_its_arch():
    recording = Recording()
    be = CuteBackend(tensormaps="device", family=recording)
    case = cases.get("test-8")
    assert be.kernels("sm_90a") is recording and be.mode("sm_90a") == "device"
    assert be.compile(case, "sm_90a", grouped=True) == []
    assert recording.calls == [("shape_problem", "test-8", True), ("compile", "test-8", "sm_90a", True, None, "device")]
    assert be.tiles(case, arch="sm_90a") == [2]
    # any other arch: that arch's own family
    assert isinstance(be.kernels("sm_100a"), Sm100Kernels)
    assert isinstance(CuteBackend().kernels("sm_90a"), Sm90Kernels)


def test_a_variant_build_is_what_the_backend_compiles():
    serial = CuteBackend(family=Sm90Kernels(programmatic=False))
    case = cases.get("test-8")
    assert serial.kernels("sm_90a").programmatic is False
    (info,) = serial.compile(case, "sm_90a", grouped=True)
    assert info.extra["launch"] == "stream order"
    assert CuteBackend().compile(case, "sm_90a", grouped=True)[0].extra["launch"] == "programmatic"
    (grid,) = CuteBackend(family=Sm90Kernels(readiness="grid")).compile(case, "sm_90a", grouped=True)
    # the default wait; test-8's tiles of 1-2 stages are never split (a piece holds at least 2)
    assert info.name.endswith("tensormaps=host,chunks_wait]")
    assert grid.name == info.name.replace(",chunks_wait]", ",grid_wait]")
