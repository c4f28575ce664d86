"""The probe examples on the CPU: they import without building anything, and the CuTe DSL one
compiles for sm_90a with its six marks, and without them to the PTX of the same file with its mark
lines deleted, and for sm_100a (their run on a GPU: tests/test_gpu_probe.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import cutlass
import cutlass.cute as cute
import pytest
import torch
from cutlass import Int32, Int64, Uint8
from cutlass.cute.runtime import from_dlpack, make_fake_stream, make_ptr

from nvgg import probe

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
    assert cuda_ex.PHASES.marks == MARKS and cuda_ex._extension is None
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


def _ptx(module, probes, folder: Path, arch: str = "sm_90a") -> str:
    def ptr(dtype, align):
        return make_ptr(dtype, 1 << 20, cute.AddressSpace.gmem, assumed_align=align)

    args = (ptr(Uint8, 16), ptr(Uint8, 16), Int32(128), Int32(256), Int32(512), ptr(Int64, 16), Int32(2),
            ptr(Int64, 128), Int32(2), Int32(2), probes, make_fake_stream())
    fn = cute.compile(module.grouped_gemm, *args, options=f"--gpu-arch {arch} --keep-ptx --dump-dir {folder}")
    text = fn.artifacts.PTX
    text = text if isinstance(text, str) else text.decode()
    text = text[text.index(".visible .entry"):]
    return text.replace(re.search(r"\.entry (\w+)\(", text).group(1), "KERNEL")


def test_the_dsl_example_compiles_with_its_marks_and_without(tmp_path, monkeypatch):
    monkeypatch.setenv(probe.ENV, "0")
    marked = _load(CUTE, "cute_marked")
    stripped_path = tmp_path / "stripped.py"
    stripped_path.write_text(_strip_marks(CUTE.read_text()))
    stripped = _load(stripped_path, "cute_stripped")
    buf = from_dlpack(torch.zeros(7, len(MARKS), dtype=torch.int64), assumed_align=8)
    on = _ptx(marked, buf.mark_compact_shape_dynamic(mode=0, stride_order=(0, 1)), tmp_path)
    off = _ptx(marked, None, tmp_path)
    plain = _ptx(stripped, None, tmp_path)
    assert on.count("%globaltimer") == len(MARKS) and on.count("@nvp_st st.global.b64") == len(MARKS)
    assert "%globaltimer" not in off and off == plain
    assert "cp.async.bulk.tensor" in off and "tensormap" in off and "mma.sync" in off


def test_the_dsl_example_compiles_for_the_b200_too(tmp_path, monkeypatch):
    """Never run there (no B200 here): the same kernel and marks compile for sm_100a."""
    monkeypatch.setenv(probe.ENV, "0")
    marked = _load(CUTE, "cute_sm100")
    buf = from_dlpack(torch.zeros(7, len(MARKS), dtype=torch.int64), assumed_align=8)
    ptx = _ptx(marked, buf.mark_compact_shape_dynamic(mode=0, stride_order=(0, 1)), tmp_path, "sm_100a")
    assert ptx.count("%globaltimer") == len(MARKS) and "cp.async.bulk.tensor" in ptx and "mma.sync" in ptx
