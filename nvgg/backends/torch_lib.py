"""Backend `torch`: library kernels, one GEMM per group.

- sm_100 (B200): `torch._scaled_mm` on the NVFP4 operands with the blocked scales, as the
  competition's reference does.
- other CUDA GPUs: no FP4 tensor core (Hopper has none, and `_scaled_mm` with FP4 fails there
  with CUBLAS_STATUS_NOT_SUPPORTED), so each call expands A and B to fp16 with the scales applied
  (exact: every e2m1 x e4m3 product is an fp16 value) and calls cuBLAS with fp32 accumulation.
- CPU: the same expansion in fp32 and a float32 matmul, rounded once to fp16.
The expansion is part of every call, so it is timed: this is the plain PyTorch pipeline.
"""

from __future__ import annotations

import torch

from ..cases import Case
from ..errors import NvggError
from ..inputs import SF_VEC, from_blocked
from ..reference import E2M1_VALUES
from .base import Backend, Launch


def _is_sm100(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 10


class TorchBackend(Backend):
    name = "torch"
    supports_grouped = False

    def check(self, case: Case, device: torch.device) -> None:
        for m, n, k in case.groups:
            if k % SF_VEC:
                raise NvggError(f"the torch backend needs k a multiple of {SF_VEC} (one scale per 16), got k={k}")

    def group_launcher(self, data, g: int) -> Launch:
        (a, b, c), (sfa_r, sfb_r), (m, n, k, _) = data[0][g], data[2][g], data[3][g]
        device = c.device
        out = c[:, :, 0]
        if _is_sm100(device):
            # the blocked view's storage, flattened, is cuBLAS's block-scaling layout
            sa = sfa_r.permute(5, 2, 4, 0, 1, 3).reshape(-1)
            sb = sfb_r.permute(5, 2, 4, 0, 1, 3).reshape(-1)
            a2, b2 = a[:, :, 0], b[:, :, 0]

            def launch() -> None:
                out.copy_(torch._scaled_mm(a2, b2.transpose(0, 1), sa, sb, out_dtype=torch.float16))
            return launch

        dtype = torch.float16 if device.type == "cuda" else torch.float32
        table = torch.tensor(E2M1_VALUES, dtype=dtype, device=device)
        a8, b8 = a[:, :, 0].view(torch.uint8), b[:, :, 0].view(torch.uint8)
        sa_blocked, sb_blocked = sfa_r, sfb_r

        def expand(packed: torch.Tensor, blocked: torch.Tensor, rows: int) -> torch.Tensor:
            nib = torch.stack((packed & 0x0F, packed >> 4), dim=-1).reshape(rows, k)
            sf = from_blocked(blocked, rows, k).to(dtype).repeat_interleave(SF_VEC, dim=1)
            return table[nib.long()] * sf

        if device.type == "cuda":
            def launch() -> None:
                # cuBLAS accumulates fp16 GEMMs in fp32 (reduced-precision reduction is off,
                # set when the backend is prepared); the result is rounded once to fp16
                torch.mm(expand(a8, sa_blocked, m), expand(b8, sb_blocked, n).T, out=out)
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            return launch

        def launch_cpu() -> None:
            out.copy_(expand(a8, sa_blocked, m) @ expand(b8, sb_blocked, n).T)
        return launch_cpu
