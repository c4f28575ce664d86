"""The CUDA binary tool nvgg reads its cubins' SASS with: nvdisasm. It comes with the test extra as a
pip package (`nvidia-cuda-nvdisasm`), which puts it under site-packages/nvidia/cu13/bin; a CUDA
toolkit's on PATH, or the path in $NVDISASM, is used first. It is not needed to compile; resource
usage is read from the cubin's ELF (kernels/cache.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..atomic import replace_whole


def find(tool: str) -> str | None:
    """The path of `tool` (e.g. "nvdisasm"), or None where none is installed."""
    named = os.environ.get(tool.upper())
    if named:
        return named
    on_path = shutil.which(tool)
    if on_path:
        return on_path
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for sub in ("cu13/bin", "cu12/bin", f"cuda_{tool}/bin"):
            candidate = Path(root) / sub / tool
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def sass(cubin: Path) -> Path | None:
    """`kernel.sass` beside `cubin` (nvdisasm -c, written once), or None without nvdisasm."""
    out = cubin.with_suffix(".sass")
    if out.is_file() and out.stat().st_mtime >= cubin.stat().st_mtime:
        return out
    tool = find("nvdisasm")
    if tool is None:
        return None
    text = subprocess.run([tool, "-c", str(cubin)], check=True, capture_output=True, text=True).stdout
    replace_whole(out, text.encode())  # whole: another process may read it meanwhile
    return out


def opcodes(sass_text: str) -> list[str]:
    """The instruction mnemonics of nvdisasm output, in order (modifiers kept: UTCOMMA.4X)."""
    import re
    return re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass_text, flags=re.M)
