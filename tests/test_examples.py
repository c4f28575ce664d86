"""The probe examples on the CPU: they import without building anything, and the CuTe DSL one
compiles for sm_90a with its six marks, and without them to the PTX of the same file with its mark
lines deleted, and for sm_100a (their run on a GPU: tests/test_gpu_probe.py); the CUDA one's tiles
(its TUNE) each compile for sm_90a with nvcc."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import cutlass
import cutlass.cute as cute
import pytest
import torch
from cutlass import Int32, Int64, Uint8
from cutlass.cute.runtime import from_dlpack, make_fake_stream, make_ptr

from nvgg import probe
from nvgg.kernels import cache as kcache

ROOT = Path(__file__).resolve().parent.parent
CUTE = ROOT / "examples/cute_grouped_gemm/submission.py"
CUDA = ROOT / "examples/cuda_grouped_gemm/submission.py"
MARKS = ("start", "maps_ready", "first_tma_landed", "first_mma", "mainloop_done", "epilogue_done")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_examples_import_without_building_anything(monkeypatch):
    monkeypatch.setenv(probe.ENV, "0")
    cute_ex, cuda_ex = _load(CUTE, "cute_example"), _load(CUDA, "cuda_example")
    assert cute_ex.PHASES.marks == MARKS and cute_ex._COMPILED == {}
    assert cuda_ex.PHASES.marks == MARKS and cuda_ex._extensions == {}
    assert "#define NVGG_PROBES 0" in cuda_ex.PROBE_SOURCE and "namespace cuda_gemm" in cuda_ex.PROBE_SOURCE
    # every mark of the CUDA source names a column of its probe
    used = set(re.findall(r"NVGG_MARK(?:_WARP)?\(probes, cuda_gemm::(\w+)", cuda_ex.KERNEL_SOURCE))
    assert used == set(MARKS)


def _strip_marks(text: str) -> str:
    """The file without its marks: every `mark(probes, ...)` line, and each `if` left with no body."""
    lines = [line for line in text.splitlines() if not re.match(r"\s*mark\(probes", line)]

    def indent(line):
        return len(line) - len(line.lstrip())

    out = []
    for i, line in enumerate(lines):
        following = next((x for x in lines[i + 1:] if x.strip()), "")
        if line.strip().startswith("if ") and line.rstrip().endswith(":") and indent(following) <= indent(line):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class ExampleBuild:
    """The DSL example's build as the kernel cache keys it: with its marks' buffer or without."""

    marks: bool


def _ptx(path: Path, name: str, marks: bool, arch: str = "sm_90a") -> str:
    """The PTX of the example file at `path` compiled for `arch`, with a marks buffer or without,
    its kernel's name made KERNEL. Built through the run's kernel cache (NVGG_CACHE_DIR or the
    default), keyed by the file, this test file (the build's arguments) and nvgg's probe (the
    marks' code): compiled once, and not at all from a cache a previous run filled."""
    def build(folder: Path) -> kcache.Built:
        def ptr(dtype, align):
            return make_ptr(dtype, 1 << 20, cute.AddressSpace.gmem, assumed_align=align)

        module = _load(path, name)
        probes = None
        if marks:
            buf = from_dlpack(torch.zeros(7, len(MARKS), dtype=torch.int64), assumed_align=8)
            probes = buf.mark_compact_shape_dynamic(mode=0, stride_order=(0, 1))
        args = (ptr(Uint8, 16), ptr(Uint8, 16), Int32(128), Int32(256), Int32(512), ptr(Int64, 16), Int32(2),
                ptr(Int64, 128), Int32(2), Int32(2), probes, make_fake_stream())
        fn = cute.compile(module.grouped_gemm, *args,
                          options=f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {folder}")
        text = fn.artifacts.PTX
        return kcache.Built(fn, text if isinstance(text, str) else text.decode(), bytes(fn.artifacts.CUBIN), {})

    probe_code = sorted((ROOT / "nvgg" / "probe").glob("*.py"))
    key = kcache.CacheKey.make(f"example:{path.name}", ExampleBuild(marks), None, arch, [path, __file__, *probe_code])
    text = (kcache.shared().get(key, build, need_callable=False).directory / "kernel.ptx").read_text()
    text = text[text.index(".visible .entry"):]
    return text.replace(re.search(r"\.entry (\w+)\(", text).group(1), "KERNEL")


def test_the_dsl_example_compiles_with_its_marks_and_without(tmp_path, monkeypatch):
    monkeypatch.setenv(probe.ENV, "0")
    stripped_path = tmp_path / "stripped.py"
    stripped_path.write_text(_strip_marks(CUTE.read_text()))
    on = _ptx(CUTE, "cute_marked", marks=True)
    off = _ptx(CUTE, "cute_marked", marks=False)
    plain = _ptx(stripped_path, "cute_stripped", marks=False)
    assert on.count("%globaltimer") == len(MARKS) and on.count("@nvp_st st.global.b64") == len(MARKS)
    assert "%globaltimer" not in off and off == plain
    assert "cp.async.bulk.tensor" in off and "tensormap" in off and "mma.sync" in off


def test_the_dsl_example_compiles_for_the_b200_too(monkeypatch):
    """Never run there (no B200 here): the same kernel and marks compile for sm_100a."""
    monkeypatch.setenv(probe.ENV, "0")
    ptx = _ptx(CUTE, "cute_sm100", marks=True, arch="sm_100a")
    assert ptx.count("%globaltimer") == len(MARKS) and "cp.async.bulk.tensor" in ptx and "mma.sync" in ptx


def test_the_cuda_examples_tiles_are_a_six_point_space_that_compiles_for_sm90a(tmp_path, monkeypatch):
    """The CUDA example declares its tile as TUNE (nvgg reads 6 points, the default first); each
    tile's device code compiles for sm_90a and fits a block's registers and shared memory, the
    default with no spills; CONFIG
    picks the tile, and a tile outside the space is refused in the file's own words."""
    import shutil
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from nvgg import tune
    from nvgg.backends import submission as sub
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc (the CUDA toolkit) to compile the example's device code")
    monkeypatch.setenv(probe.ENV, "0")
    ex = _load(CUDA, "cuda_example_tune")
    space = sub.declared_space(str(CUDA))
    assert space == {"bm": [64, 32, 128], "bn": [128, 64]}
    points = [dict(p) for p in tune.points_of(space)]
    assert len(points) == 6 and points[0] == {"bm": 64, "bn": 128}

    def build(point):
        bm, bn = point["bm"], point["bn"]
        src = tmp_path / f"tile_{bm}x{bn}.cu"
        src.write_text(ex.OFF_SOURCE + ex.tile_source(bm, bn) + ex.KERNEL_SOURCE +
                       # the launch asks for the tiles and 128 bytes to align them: at most 227 KB a block (sm_90)
                       "static_assert(sizeof(SharedTiles) + 128 <= 232448, \"over a block's shared memory\");\n")
        # the device code alone (-cubin): the host compiler, a large share of an object's build, has
        # nothing to do with what is checked; ptxas reports the same either way
        done = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-cubin", "-Xptxas", "-v", str(src),
                               "-o", str(src.with_suffix(".cubin"))], capture_output=True, text=True, timeout=300)
        return point, done

    with ThreadPoolExecutor(3) as pool:
        for (point, done) in pool.map(build, points):
            assert done.returncode == 0, (point, done.stderr[-2000:])
            info = done.stderr.split("grouped_gemm_kernel")[-1]
            if point == points[0]:  # the file's own choice spills nothing (128 x 128, 16 warps capped at 128
                assert "0 bytes spill stores, 0 bytes spill loads" in info, (point, info)  # registers, spills a little)
            regs = int(re.search(r"Used (\d+) registers", info).group(1))
            assert regs * ex.threads(point["bm"], point["bn"]) <= 65536, (point, regs)
    assert ex.tile() == (64, 128)
    ex.CONFIG = {"bm": 32, "bn": 64}
    assert ex.tile() == (32, 64)
    ex.CONFIG = {"bm": 256, "bn": 64}
    with pytest.raises(ValueError, match="bm must be one of"):
        ex.tile()
