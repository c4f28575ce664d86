"""nvgg/kernels/launch.py on the CPU: the driver launch's loaded kernels, through a fake driver (the
GPU tests of the launch objects are in tests/test_sm100_launch.py)."""

from __future__ import annotations

import pytest

from nvgg.kernels import cache as kcache, launch

cu = pytest.importorskip("cuda.bindings.driver")


@pytest.fixture
def driver(monkeypatch, tmp_path):
    """The driver calls launch._function makes, faked: a current context that the test sets, and
    a record of every module load (the context it went to, the image). Returns (entry, set the
    current context, loads)."""
    ok = cu.CUresult.CUDA_SUCCESS
    current = [cu.CUcontext(0)]
    loads = []

    def load(image):
        loads.append((int(current[0]), image))
        return ok, ("module", len(loads))

    monkeypatch.setattr(launch, "_FUNCTIONS", {})
    monkeypatch.setattr(cu, "cuCtxGetCurrent", lambda: (ok, current[0]))
    monkeypatch.setattr(cu, "cuModuleLoadData", load)
    monkeypatch.setattr(cu, "cuModuleGetFunction",
                        lambda module, name: (ok, cu.CUfunction(0x1000 * module[1] + len(name))))
    monkeypatch.setattr(cu, "cuFuncSetAttribute", lambda fn, attribute, value: (ok,))
    (tmp_path / "kernel.cubin").write_bytes(b"\x7fELF cubin")
    info = {"resources": {"kernel_entry": {"registers": 40}}, "dynamic_smem_bytes": 1024}
    entry = kcache.Entry(key=None, fn=None, info=info, directory=tmp_path, compile_s=0.0, hit="disk")

    def use(handle: int) -> None:
        current[0] = cu.CUcontext(handle)

    return entry, use, loads


def test_a_kernel_is_loaded_once_per_cuda_context(driver):
    """A function handle belongs to the context its module was loaded into: a second GPU (or
    another context) must load the cubin again, and a context must not load it twice."""
    entry, use, loads = driver
    use(0xA)
    first = launch._function(entry)
    assert launch._function(entry) is first  # the same context: loaded once
    assert [ctx for ctx, _ in loads] == [0xA]
    use(0xB)
    second = launch._function(entry)
    assert int(second) != int(first)
    assert [ctx for ctx, _ in loads] == [0xA, 0xB] and all(image == b"\x7fELF cubin" for _, image in loads)
    use(0xA)  # back on the first context: its own function again, nothing loaded
    assert launch._function(entry) is first and len(loads) == 2
    use(0xB)
    assert launch._function(entry) is second and len(loads) == 2


def test_no_current_context_is_refused_before_any_load(driver):
    entry, use, loads = driver
    use(0)
    with pytest.raises(RuntimeError, match="no current CUDA context"):
        launch._function(entry)
    assert loads == []
