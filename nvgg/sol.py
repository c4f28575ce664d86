"""Speed of light: the floor no kernel beats, from bytes moved and FLOPs done.

bytes = Σ_g A and B packed (k/2 bytes a row) + SFA and SFB (k/16 bytes a row) + C once as fp16;
FLOPs = Σ_g 2·m·n·k; time = max(bytes / DRAM bandwidth, FLOPs / tensor peak of the data path).
On B200 the data path is the fp4 tensor core; on Hopper there is none, so the operands are
expanded in-kernel and multiplied in fp16: the compute term uses the fp16 dense peak.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .cases import Case
from .profiles import Profile


@dataclass(frozen=True)
class Sol:
    case: str
    profile: str
    data_path: str
    bytes: int
    flops: int
    memory_us: float
    compute_us: float
    sol_us: float
    bound: str

    def to_dict(self) -> dict:
        return asdict(self)


def sol(case: Case, profile: Profile, data_path: str | None = None) -> Sol:
    path = data_path or profile.data_path
    peak_tflops = profile.tensor_tflops[path]
    memory_us = case.bytes / (profile.dram_bandwidth_gbs * 1e9) * 1e6
    compute_us = case.flops / (peak_tflops * 1e12) * 1e6
    bound = "memory" if memory_us >= compute_us else "compute"
    return Sol(case=case.id, profile=profile.name, data_path=path, bytes=case.bytes, flops=case.flops,
               memory_us=memory_us, compute_us=compute_us, sol_us=max(memory_us, compute_us), bound=bound)


def gap(measured_us: float, floor: Sol) -> float:
    """How many times the floor a measurement is (1.0 = at the speed of light)."""
    return measured_us / floor.sol_us
