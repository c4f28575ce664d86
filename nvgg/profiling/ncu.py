"""Nsight Compute: nvgg re-runs itself under `ncu`, limited by an NVTX range to the kernels of one
call, keeps the .ncu-rep, and parses `ncu --import REP --csv --page raw --print-units base`.

The child (procs.run_once of target.one_call, ncu its wrapper) generates the inputs, runs the
checked call outside the range (compilation and warm-up stay out), then one call inside the range
`nvgg_call`. ncu's clock control `none` is the default: the card's clocks are left as they are.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import procs
from ..kernels import registry
from ..kernels.family import NcuCounters
from ..cases import Case
from ..errors import NvggError
from .target import RANGE, one_call
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis", "WarpStateStats")

# raw metric names every architecture has, first found wins
DURATION = ("gpu__time_duration.sum",)
DRAM_READ = ("dram__bytes_read.sum",)       # requested with --metrics
DRAM_WRITE = ("dram__bytes_write.sum",)
DRAM_RATE = ("dram__bytes.sum.per_second",)  # what the sections report; x duration = bytes
DRAM_PCT = ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed")
ACHIEVED_OCC = ("sm__warps_active.avg.pct_of_peak_sustained_active",)
THEORETICAL_OCC = ("sm__maximum_warps_per_active_cycle_pct",)
REGISTERS = ("launch__registers_per_thread",)
SMEM_STATIC = ("launch__shared_mem_per_block_static",)
SMEM_DYNAMIC = ("launch__shared_mem_per_block_dynamic",)
GRID = ("launch__grid_size",)
BLOCK = ("launch__block_size",)
CC_MAJOR = "device__attribute_compute_capability_major"  # a column of every raw row
# the warp states (WarpStateStats): per reason, the warp cycles spent in it per issued instruction
# (its sum the section's "Warp Cycles Per Issued Instruction"), under either name ncu gives them;
# `selected` is the issue itself
STALLED = (("smsp__average_warp_latency_issue_stalled_", ""),
           ("smsp__average_warps_issue_stalled_", "_per_issue_active"))
ISSUING = ("selected",)
BUSY = ".avg.pct_of_peak_sustained_elapsed"  # a counter's share of its peak over the kernel


@dataclass(frozen=True)
class ArchMetrics(NcuCounters):
    """A family's counters (kernels/family.py `NcuCounters`) with what ncu is asked for and the
    names of the percentages it reports. Names checked against `ncu --query-metrics --chip CHIP`
    (tests/fixtures/ncu, ncu 2025.3.1)."""

    @property
    def tensor_pct(self) -> str:
        return self.tensor_pipe + BUSY

    @property
    def tmem_pct(self) -> str | None:
        return self.tensor_memory + BUSY if self.tensor_memory else None

    @property
    def tmem_pipe_pct(self) -> str | None:
        return self.tmem_pipe + BUSY if self.tmem_pipe else None

    def requested(self) -> tuple[str, ...]:
        """What nvgg asks ncu for by name (--metrics), beside its sections."""
        own = (self.tensor_pct,) + tuple(m for m in (self.tmem_pct, self.tmem_pipe_pct) if m)
        return DRAM_READ + DRAM_WRITE + DRAM_PCT[:1] + ACHIEVED_OCC + own


def arch_metrics(major: int | None) -> ArchMetrics | None:
    """The metric set of an architecture by compute capability major: its kernel family's
    (kernels/registry.py); None for one without a family or without a set."""
    family = registry.for_capability(major) if major is not None else None
    counters = family.ncu if family is not None else None
    return ArchMetrics(**asdict(counters)) if counters is not None else None


def local_major() -> int | None:
    """The compute capability major of the GPU ncu will profile (CUDA's device 0: the first of
    CUDA_VISIBLE_DEVICES where it names one by index), by NVML; None where NVML cannot tell."""
    from ..profiles import nvml_query, visible_index

    index = visible_index(0)
    major = None if index is None else nvml_query(
        lambda nvml, handle: nvml.nvmlDeviceGetCudaComputeCapability(handle)[0], index)
    return None if major is None else int(major)


@dataclass
class KernelMetrics:
    name: str
    duration_us: float
    dram_bytes: float
    dram_pct: float | None
    tensor_pct: float | None  # the MMA pipe of the kernel's architecture (`tensor_pipe`), % busy
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    registers: int | None
    smem_bytes: int | None
    grid: int | None
    block: int | None
    arch: str | None = None  # sm_90, sm_100; None where nvgg has no metric set for it
    tensor_pipe: str | None = None  # the counter tensor_pct comes from
    tensor_label: str | None = None  # what that counter measures, in words ("TC pipe (tcgen05)")
    tmem_pct: float | None = None  # sm_100: tensor memory active, % of the elapsed cycles
    tmem_pipe_pct: float | None = None  # sm_100: the tensor-memory pipe's instructions, % of its peak rate
    # warp cycles per issued instruction in each state (the reason a warp did not issue), largest
    # first; empty where ncu reported none
    stalls: dict = field(default_factory=dict)

    def top_stalls(self, n: int = 3) -> list[tuple[str, float]]:
        """The `n` states warps waited in longest (the issue itself left out), with their share of
        every warp cycle per issued instruction."""
        total = sum(self.stalls.values())
        waits = [(why, c) for why, c in self.stalls.items() if why not in ISSUING and c > 0]
        return [(why, c / total) for why, c in waits[:n]] if total > 0 else []


@dataclass
class NcuReport:
    kernels: list[KernelMetrics]
    report_file: str = ""
    sol_bytes: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def duration_us(self) -> float:
        return sum(k.duration_us for k in self.kernels)

    @property
    def dram_bytes(self) -> float:
        return sum(k.dram_bytes for k in self.kernels)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(duration_us=self.duration_us, dram_bytes=self.dram_bytes,
                   dram_vs_sol=(self.dram_bytes / self.sol_bytes) if self.sol_bytes else None)
        return out


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _pick(row: dict, names: tuple[str, ...]) -> float | None:
    for name in names:
        if name in row:
            value = _number(row[name])
            if value is not None:
                return value
    return None


def parse_raw_csv(text: str) -> list[KernelMetrics]:
    """`ncu --csv --page raw --print-units base`: a header row of metric names, a row of units,
    then one row per profiled kernel. Durations in ns, bytes in bytes."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if len(lines) < 2:
        raise NvggError("ncu produced no kernel rows: was any kernel launched inside the NVTX range?")
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units, data = rows[0], rows[1], rows[2:]
    if not data:
        raise NvggError("ncu produced no kernel rows: was any kernel launched inside the NVTX range?")
    unit_of = dict(zip(header, units))
    out = []
    for values in data:
        row = dict(zip(header, values))
        duration = _pick(row, DURATION) or 0.0
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit_of.get(DURATION[0], "nsecond"), 1e-3)
        smem = [_pick(row, SMEM_STATIC), _pick(row, SMEM_DYNAMIC)]
        # the metric set by the profiled kernel's own architecture, never by whichever name is found
        arch = arch_metrics(_int(_pick(row, (CC_MAJOR,))))
        out.append(KernelMetrics(
            name=row.get("Kernel Name", row.get("Function Name", "?")),
            duration_us=duration * scale,
            dram_bytes=_dram_bytes(row, duration * scale),
            dram_pct=_pick(row, DRAM_PCT), tensor_pct=_pick(row, (arch.tensor_pct,)) if arch else None,
            achieved_occupancy_pct=_pick(row, ACHIEVED_OCC), theoretical_occupancy_pct=_pick(row, THEORETICAL_OCC),
            registers=_int(_pick(row, REGISTERS)),
            smem_bytes=None if all(s is None for s in smem) else int(sum(s or 0 for s in smem)),
            grid=_int(_pick(row, GRID)), block=_int(_pick(row, BLOCK)),
            arch=arch.arch if arch else None, tensor_pipe=arch.tensor_pipe if arch else None,
            tensor_label=arch.tensor_label if arch else None,
            tmem_pct=_pick(row, (arch.tmem_pct,)) if arch and arch.tmem_pct else None,
            tmem_pipe_pct=_pick(row, (arch.tmem_pipe_pct,)) if arch and arch.tmem_pipe_pct else None,
            stalls=_stalls(row),
        ))
    return out


def _stalls(row: dict) -> dict:
    """{state: warp cycles per issued instruction} from the row's first STALLED family present (a
    suffix such as `.ratio` dropped), largest first."""
    for prefix, tail in STALLED:
        found = {}
        for name, text in row.items():
            base = name.split(".")[0]
            if base.startswith(prefix) and base.endswith(tail):
                value = _number(text)
                if value is not None:
                    found[base[len(prefix):len(base) - len(tail)]] = value
        if found:
            return dict(sorted(found.items(), key=lambda kv: -kv[1]))
    return {}


def _dram_bytes(row: dict, duration_us: float) -> float:
    read, write = _pick(row, DRAM_READ), _pick(row, DRAM_WRITE)
    if read is not None or write is not None:
        return (read or 0.0) + (write or 0.0)
    return (_pick(row, DRAM_RATE) or 0.0) * duration_us * 1e-6


def _int(x: float | None) -> int | None:
    return None if x is None else int(x)


def find_ncu() -> str:
    path = shutil.which("ncu") or next((str(p) for p in sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"))), None)
    if not path:
        raise NvggError("ncu (Nsight Compute) is not on PATH: install Nsight Compute or add its folder to PATH")
    return path


def profile(case: Case, out_dir: str | Path, *, clock_control: str = "none", timeout_s: float = 600,
            gpu: int | None = None, **target) -> NcuReport:
    """One call of `target` (strategy, backend, tensormaps, or submission: target.one_call's
    arguments) on `case` under ncu, on `gpu` (procs.environment; None: whatever this process
    sees); what it measured. ncu's own output is kept beside the report (.ncu.log)."""
    ncu = find_ncu()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    who = "submission" if target.get("submission") else f"{target.get('strategy')}-{target.get('backend')}"
    base = out_dir / f"nvgg-{case.id}-{who}"
    log = Path(str(base) + ".ncu.log")
    log.unlink(missing_ok=True)
    cmd = [ncu, "--clock-control", clock_control, "--nvtx", "--nvtx-include", f"{RANGE}/", "-f", "-o", str(base)]
    for section in SECTIONS:
        cmd += ["--section", section]
    # by name: the metric set of the GPU's architecture (ncu refuses a name the chip lacks)
    arch = arch_metrics(local_major())
    cmd += ["--metrics", ",".join(arch.requested() if arch else DRAM_READ + DRAM_WRITE)]
    try:
        procs.run_once(one_call, case=case, wrap=tuple(cmd), timeout_s=timeout_s, log_path=log, gpu=gpu, **target)
    except (procs.ChildFailure, procs.ChildError) as exc:
        raise NvggError(f"ncu's target: {exc}") from None
    text = log.read_text(errors="replace") if log.is_file() else ""
    rep = Path(str(base) + ".ncu-rep")
    if "ERR_NVGPUCTRPERM" in text or "permission" in text.lower() and "counters" in text.lower():
        raise NvggError("ncu cannot read the GPU's performance counters here (no permission): run as root or "
                        "enable NVreg_RestrictProfilingToAdminUsers=0")
    if not rep.is_file():
        tail = [line for line in text.strip().splitlines() if line.strip()][-1:] or ["no output"]
        raise NvggError(f"ncu wrote no report: {tail[0]} (its output: {log})")
    raw = subprocess.run([ncu, "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"],
                         capture_output=True, text=True, timeout=timeout_s)
    (out_dir / (base.name + ".raw.csv")).write_text(raw.stdout)
    return NcuReport(kernels=parse_raw_csv(raw.stdout), report_file=str(rep))
