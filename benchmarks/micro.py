"""CUDA microbenchmarks behind the sm_90a kernel's design (benchmarks/micro/NAME.cu; each file's
first lines say what it measures): compiled with nvcc for the card's architecture and run, their
output passed through with the card's name above it.

    python benchmarks/micro.py [NAME ...]    (default: all of them)

Names: decode, load_latency, cold_code, release_fence. Needs nvcc and a GPU of sm_90 or later.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "micro"
NAMES = sorted(p.stem for p in HERE.glob("*.cu"))


def fail(message: str) -> None:
    print(f"micro.py: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str]) -> None:
    names = argv or NAMES
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        fail(f"no microbenchmark {', '.join(unknown)}; pick from {', '.join(NAMES)}")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        fail("nvcc is not on PATH: run this on the GPU machine (the CUDA toolkit's bin folder on PATH)")
    smi = shutil.which("nvidia-smi")
    query = [smi, "--query-gpu=name,compute_cap,clocks.max.sm", "--format=csv,noheader"] if smi else None
    card = subprocess.run(query, capture_output=True, text=True).stdout.strip() if query else ""
    if not card:
        fail("no GPU found (nvidia-smi lists none): run this on the GPU machine")
    major, minor = card.split(",")[1].strip().split(".")
    if int(major) < 9:
        fail(f"the card is sm_{major}{minor}; these need sm_90 or later (e4m3 conversions, %globaltimer reads)")
    arch = f"sm_{major}{minor}" + ("a" if int(major) >= 9 else "")
    print(f"# {card.split(',')[0]} ({arch}, max {card.split(',')[2].strip()})")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            exe = Path(tmp) / name
            built = subprocess.run([nvcc, f"-arch={arch}", "-O3", "-o", str(exe), str(HERE / f"{name}.cu")],
                                   capture_output=True, text=True)
            if built.returncode:
                fail(f"nvcc failed on {name}.cu: {built.stderr.strip().splitlines()[-1]}")
            print(f"## {name}", flush=True)
            ran = subprocess.run([str(exe)], text=True)
            if ran.returncode:
                fail(f"{name} exited {ran.returncode}")


if __name__ == "__main__":
    main(sys.argv[1:])
