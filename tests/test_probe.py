"""nvgg.probe on the CPU: names checked where they are given, the buffer's pool, and the PTX a mark
compiles to (a timer read and a store when on; nothing, byte for byte, when off) in CuTe DSL and
in CUDA C++ (NVRTC, from the test extra, compiles without a GPU)."""

from __future__ import annotations

import os
import re
import struct
from typing import Optional

import cutlass
import cutlass.cute as cute
import pytest
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

from nvgg import probe
from nvgg.probe import Probe, ProbeError


# --- names ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel, marks, says", [
    ("gemm", ("start", "first_mma", "start"), "names mark 'start' 2 times"),
    ("gemm", ("start", "first mma"), "mark 'first mma' is not an identifier"),
    ("my gemm", ("start",), "probe name 'my gemm' is not an identifier"),
    ("gemm", (), "has 0 marks"),
    ("gemm", tuple(f"m{i}" for i in range(33)), "has 33 marks"),
    ("gemm", "start", "marks must be a list of names"),
    ("gemm", ("start", 3), "marks must be a list of names"),
])
def test_bad_probes_are_refused_where_they_are_made(kernel, marks, says):
    with pytest.raises(ProbeError, match=re.escape(says)):
        Probe(kernel, marks)


def test_one_name_one_set_of_marks():
    Probe("twice_same", ("a", "b"))
    assert Probe("twice_same", ("a", "b")).marks == ("a", "b")  # a module imported again
    with pytest.raises(ProbeError, match="two probes are named 'twice_same'"):
        Probe("twice_same", ("a", "c"))


def test_columns_and_unknown_marks():
    p = Probe("cols", ("start", "maps_ready", "first_mma"))
    assert [p.column(m) for m in p.marks] == [0, 1, 2]
    with pytest.raises(ProbeError, match="has no mark 'frist_mma': its marks are start, maps_ready, first_mma"):
        p.column("frist_mma")


def test_off_means_no_buffer(monkeypatch):
    monkeypatch.delenv(probe.ENV, raising=False)
    p = Probe("off", ("start", "exit"))
    assert not p.on and p.buffer(132) is None and p.cute_buffer(132) is None
    monkeypatch.setenv(probe.ENV, "0")
    assert p.buffer(132) is None


def test_a_buffer_needs_the_cta_count(monkeypatch):
    monkeypatch.setenv(probe.ENV, "1")
    with pytest.raises(ProbeError, match="needs the launch's CTA count"):
        Probe("count", ("a",)).buffer(0)


def test_the_pool_hands_out_zeroed_views_call_by_call():
    s = probe.Session(device="cpu")
    p, q = Probe("pool_a", ("s", "e")), Probe("pool_b", ("s", "m", "e"))
    a = s.take(p, 3)
    b = s.take(q, 2)
    assert a.shape == (4, 2) and b.shape == (3, 3) and a.dtype == torch.int64
    assert a.data_ptr() + 8 * a.numel() == b.data_ptr()  # views of one chunk, back to back
    a.fill_(7)
    s.begin()                       # a new call: the pool zeroed, the buffers handed out again
    assert int(a.abs().sum()) == 0 and s.calls() == [[]]
    c = s.take(p, 3)
    assert c.data_ptr() == a.data_ptr()
    s.next_call()                   # back to back: no zeroing, the next buffers after the last
    d = s.take(p, 3)
    assert d.data_ptr() == c.data_ptr() + 8 * c.numel()
    assert [[launch.probe.kernel for launch in call] for call in s.calls()] == [["pool_a"], ["pool_a"]]
    big = s.take(q, probe.Session.CHUNK)  # more than the chunk holds: a new zeroed chunk
    assert big.shape == (probe.Session.CHUNK + 1, 3) and int(big.abs().sum()) == 0
    s.begin()                       # ... and one pool large enough for both from then on
    assert len(s._chunks) == 1 and s._chunks[0].numel() >= probe.Session.CHUNK + (probe.Session.CHUNK + 1) * 3
    e = s.take(q, 1)
    assert e.data_ptr() == s._chunks[0].data_ptr() and s.calls()[0][0].to_dict() == {
        "kernel": "pool_b", "marks": ["s", "m", "e"], "rows": [[0, 0, 0], [0, 0, 0]]}
    # nothing calls begin() (probes on, nothing profiling): the pool starts over, it never grows
    for _ in range(3 * probe.Session.MAX_LAUNCHES):
        s.take(p, 3)
    assert sum(len(call) for call in s.calls()) <= probe.Session.MAX_LAUNCHES and len(s._chunks) <= 2


def test_the_cuda_header_names_columns_and_switches(monkeypatch):
    p = Probe("hdr", ("start", "first_mma"))
    monkeypatch.setenv(probe.ENV, "1")
    on = p.cuda_source()
    assert "#define NVGG_PROBES 1" in on and "namespace hdr { enum : int { start = 0, first_mma = 1, SLOTS = 2 }; }" in on
    monkeypatch.setenv(probe.ENV, "0")
    assert "#define NVGG_PROBES 0" in p.cuda_source()
    assert os.path.isfile(os.path.join(probe.include_dir(), probe.HEADER))


# --- CUDA C++: the header through NVRTC -------------------------------------------------------

KERNEL_CU = r"""
extern "C" __global__ void scale(float* x, int n, nvgg_probes probes) {
  NVGG_MARK_WARP(probes, cu::start, 0);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
  NVGG_MARK(probes, cu::done);
}
"""


def _nvrtc_ptx(source: str) -> str:
    from cuda.bindings import nvrtc  # cuda-bindings comes with the CuTe DSL; libnvrtc with the test extra
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"probe.cu", 0, [], [])
    opts = [b"--gpu-architecture=compute_90a"]
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if res != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise AssertionError(log.decode())
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    return ptx.decode().rstrip("\x00 ")


def test_cuda_marks_compile_to_a_timer_read_and_a_store_or_to_nothing(monkeypatch):
    p = Probe("cu", ("start", "done"))
    unmarked = _nvrtc_ptx(p.cuda_source() + "\n".join(l for l in KERNEL_CU.splitlines() if "NVGG_MARK" not in l))
    monkeypatch.setenv(probe.ENV, "1")
    on = _nvrtc_ptx(p.cuda_source() + KERNEL_CU)
    # the DSL's block (nvgg/probe/cute.py): predicated, no branch of its own; column c at +8c bytes
    assert on.count("%globaltimer") == 2 and on.count("bra") == unmarked.count("bra")
    for column in (0, 1):
        assert f"@nvp_st st.global.b64 [nvd_at+{8 * column}], nvd_t;" in on
        assert f"@nvp_over red.global.max.u64 [nvd_at+{8 * column}], nvd_n;" in on
    assert on.count("shr.u32 nvr_a, nvr_a, 5;") == 1 and "setp.eq.and.u32 nvp_lane, nvr_a, 0, nvp_lane;" in on
    monkeypatch.setenv(probe.ENV, "0")
    off = _nvrtc_ptx(p.cuda_source() + KERNEL_CU)
    assert "%globaltimer" not in off and off == unmarked


# --- CuTe DSL: a mark is one inline-PTX block --------------------------------------------------

@pytest.fixture(scope="module")
def dsl(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dsl")

    def ptx_of(kernel, *args) -> str:
        fn = cute.compile(kernel, *args, make_fake_stream(), options=f"--gpu-arch sm_90a --keep-ptx --dump-dir {folder}")
        text = fn.artifacts.PTX
        return text if isinstance(text, str) else text.decode()

    return ptx_of, make_fake_compact_tensor


TOY = Probe("toy", ("start", "mid", "exit"))


def _mark(probes, name, **kwargs):
    if probes is not None:
        TOY.mark(probes, name, **kwargs)


def _kernels(cute):
    class Marked:
        def __init__(self, marks):
            self.marks = marks

        @cute.jit
        def __call__(self, x: cute.Tensor, probes: Optional[cute.Tensor], stream):
            self.kernel(x, probes).launch(grid=[4, 1, 1], block=[128, 1, 1], stream=stream)

        @cute.kernel
        def kernel(self, x: cute.Tensor, probes: Optional[cute.Tensor]):
            tidx, _, _ = cute.arch.thread_idx()
            bidx, _, _ = cute.arch.block_idx()
            for name, warp in self.marks[:1]:
                _mark(probes, name, warp=warp)
            x[bidx * 128 + tidx] = x[bidx * 128 + tidx] * cutlass.Float32(2.0)
            for name, warp in self.marks[1:]:
                _mark(probes, name, warp=warp)

    class Unmarked:
        @cute.jit
        def __call__(self, x: cute.Tensor, stream):
            self.kernel(x).launch(grid=[4, 1, 1], block=[128, 1, 1], stream=stream)

        @cute.kernel
        def kernel(self, x: cute.Tensor):
            tidx, _, _ = cute.arch.thread_idx()
            bidx, _, _ = cute.arch.block_idx()
            x[bidx * 128 + tidx] = x[bidx * 128 + tidx] * cutlass.Float32(2.0)

    return Marked, Unmarked


def _normalised(ptx: str) -> str:
    """The PTX with the kernel's mangled name (which spells the argument types) replaced."""
    ptx = ptx[ptx.index(".visible .entry"):]
    name = re.search(r"\.entry (\w+)\(", ptx).group(1)
    return ptx.replace(name, "KERNEL")


MARKS = (("start", 0), ("mid", None), ("exit", None))


def test_dsl_marks_off_compile_to_the_unmarked_kernel(dsl):
    ptx_of, fake = dsl
    Marked, Unmarked = _kernels(cute)
    x = fake(cutlass.Float32, (512,), assumed_align=16)
    off = ptx_of(Marked(MARKS), x, None)
    plain = ptx_of(Unmarked(), x)
    assert "%globaltimer" not in off and _normalised(off) == _normalised(plain)


def test_dsl_marks_on_read_the_timer_and_store_once_each(dsl):
    ptx_of, fake = dsl
    Marked, _ = _kernels(cute)
    x = fake(cutlass.Float32, (512,), assumed_align=16)
    buf = fake(cutlass.Int64, (cute.sym_int(), 3), stride_order=(1, 0), assumed_align=8)
    ptx = ptx_of(Marked(MARKS), x, buf)
    assert ptx.count("%globaltimer") == 3
    # column c of the CTA's row: +8c bytes; CTAs past the rows raise the overflow row's column
    for column in range(3):
        assert f"@nvp_st st.global.b64 [nvd_at+{8 * column}], nvd_t;" in ptx
        assert f"@nvp_over red.global.max.u64 [nvd_at+{8 * column}], nvd_n;" in ptx
    assert ptx.count("mul.wide.u32 nvd_at, nvr_b, 24;") == 3  # rows of 3 int64
    assert ptx.count("shr.u32 nvr_a, nvr_a, 5;") == 1          # only "start" keeps one warp


def test_dsl_mark_misuse_fails_at_compile_time(dsl):
    ptx_of, fake = dsl
    Marked, _ = _kernels(cute)
    x = fake(cutlass.Float32, (512,), assumed_align=16)
    buf = fake(cutlass.Int64, (cute.sym_int(), 3), stride_order=(1, 0), assumed_align=8)
    with pytest.raises(ProbeError, match="has no mark 'frist'"):
        ptx_of(Marked((("frist", None),)), x, buf)
    narrow = fake(cutlass.Int64, (cute.sym_int(), 2), stride_order=(1, 0), assumed_align=8)
    with pytest.raises(ProbeError, match="2 columns passed where the probe has 3 marks"):
        ptx_of(Marked(MARKS), x, narrow)


# --- tests/fixtures/probe_launches.py: a marked kernel launched twice a group --------------------

def _launches_fixture():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).parent / "fixtures" / "probe_launches.py"
    spec = importlib.util.spec_from_file_location("probe_launches", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_launches_fixture_compiles_with_its_marks_and_without(monkeypatch):
    """Its decode kernel through NVRTC: three marks on (the first row peeled, so no mark in a loop),
    none off; its run on a GPU: tests/test_probe_gpu.py."""
    fixture = _launches_fixture()
    monkeypatch.setenv(probe.ENV, "1")
    on = _nvrtc_ptx(fixture.PHASES.cuda_source() + fixture.KERNEL_SOURCE)
    assert on.count("%globaltimer") == 3 and on.count("@nvp_st st.global.b64") == 3
    assert re.findall(r"\.entry (\w+)\(", on) == ["_Z13decode_kernelPKhS0_Pfii11nvgg_probes"]
    monkeypatch.setenv(probe.ENV, "0")
    assert "%globaltimer" not in _nvrtc_ptx(fixture.PHASES.cuda_source() + fixture.KERNEL_SOURCE)


def _e4m3(v: int) -> float:
    """The fixture kernel's e4m3 decode (its `e4m3`), bit for bit in Python."""
    e, m = (v >> 3) & 15, v & 7
    mag = struct.unpack("<f", struct.pack("<I", ((e + 120) << 23) | (m << 20)))[0] if e else m / 512
    return -mag if v & 128 else mag


def test_the_launches_fixture_asks_a_buffer_a_launch_and_is_right(monkeypatch):
    """The host side on the CPU, the kernel stood in for by its arithmetic in torch (e4m3 by its
    bits, the blocked scale offsets of the CUDA source): case 4 (2 groups) asks for 4 buffers, each
    with a row a CTA of its launch, and the output passes the reference."""
    from nvgg import cases, inputs, reference
    fixture = _launches_fixture()
    codes = [v for v in range(256) if v & 127 != 127]  # 0x7f and 0xff are NaN, never a scale
    want = torch.tensor(codes, dtype=torch.uint8).view(torch.float8_e4m3fn).float().tolist()
    assert [_e4m3(v) for v in codes] == want

    def decode(packed, sf, out, rows, k, probes):
        r, i = torch.arange(rows)[:, None], torch.arange(k // 2)[None, :]
        col, blocks = i // 8, k // 64
        offset = ((r // 128) * blocks + col // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + col % 4
        flat = sf.as_strided((sf.untyped_storage().nbytes() - sf.storage_offset(),), (1,), sf.storage_offset())
        table = torch.tensor([_e4m3(v) if v & 127 != 127 else 0.0 for v in range(256)])
        scale = table[flat[offset].long()]
        e2m1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
        out.view(rows, k // 2, 2).copy_(torch.stack((e2m1[(packed & 15).long()], e2m1[(packed >> 4).long()]), -1)
                                         * scale[:, :, None])

    monkeypatch.setattr(fixture, "_build", lambda: type("Extension", (), {"decode_launch": staticmethod(decode)}))
    monkeypatch.setenv(probe.ENV, "1")
    monkeypatch.setattr(probe, "_SESSION", probe.Session(device="cpu"))
    data = inputs.generate(cases.get("4"), "cpu")
    expected = reference.reference(data)
    probe.session().begin()
    got = fixture.custom_kernel(data)
    [launches] = probe.session().calls()
    assert [(l.probe.kernel, tuple(l.tensor.shape)) for l in launches] == [
        ("decode", (fixture.ctas(rows) + 1, 3)) for m, n, _ in cases.get("4").groups for rows in (m, n)]
    assert [fixture.ctas(rows) for m, n, _ in cases.get("4").groups for rows in (m, n)] == [32, 1024, 96, 1024]
    verdict = reference.check(got, expected)
    assert verdict.ok, verdict.message
