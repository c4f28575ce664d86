"""CUDA microbenchmarks behind the sm_90a kernel's design (benchmarks/micro/NAME.cu; each file's
first lines say what it measures): compiled with nvcc for the card's architecture and run, their
output passed through with the card's name above it.

    python benchmarks/micro.py [NAME ...]    (default: all of them)

NAME: a source's stem (--help lists them). Needs nvcc and a GPU of sm_90 or later.
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
    if argv in (["-h"], ["--help"]):
        print(__doc__.strip())
        print(f"Names: {', '.join(NAMES)}.")
        return
    names = argv or NAMES
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        fail(f"no microbenchmark {', '.join(repr(n) for n in unknown)}; pick from {', '.join(NAMES)}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        fail(f"{', '.join(twice)} named twice; name each microbenchmark once")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        fail("nvcc is not on PATH: run this on the GPU machine (the CUDA toolkit's bin folder on PATH)")
    smi = shutil.which("nvidia-smi")
    query = [smi, "--query-gpu=name,compute_cap,clocks.max.sm", "--format=csv,noheader"] if smi else None
    listed = subprocess.run(query, capture_output=True, text=True).stdout.strip() if query else ""
    if not listed:
        fail("no GPU found (nvidia-smi lists none): run this on the GPU machine")
    fields = [field.strip() for field in listed.splitlines()[0].split(",")]  # GPU 0
    major, _, minor = fields[1].partition(".") if len(fields) == 3 else ("", "", "")
    if not (major.isdigit() and minor.isdigit()):
        fail(f"nvidia-smi's line {listed.splitlines()[0]!r} names no compute capability: is the driver loaded?")
    if int(major) < 9:
        fail(f"the card is sm_{major}{minor}; these need sm_90 or later (e4m3 conversions)")
    arch = f"sm_{major}{minor}a"
    print(f"# {fields[0]} ({arch}, max {fields[2]})")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            exe = Path(tmp) / name
            built = subprocess.run([nvcc, f"-arch={arch}", "-O3", "-o", str(exe), str(HERE / f"{name}.cu")],
                                   capture_output=True, text=True)
            if built.returncode:
                said = (built.stderr.strip() or f"exit {built.returncode}").splitlines()[-1]
                fail(f"nvcc failed on {name}.cu: {said}")
            print(f"## {name}", flush=True)
            ran = subprocess.run([str(exe)], text=True)
            if ran.returncode:
                fail(f"{name} exited {ran.returncode}")


if __name__ == "__main__":
    main(sys.argv[1:])
