"""benchmarks/micro.py's bad input and missing tools: one line on stderr, exit 2, before any build."""

import os
import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "micro.py"


def _run(*argv, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, env=env)


def test_an_unknown_name_is_refused_with_the_names_there_are():
    done = _run("release_fence", "nope")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "micro.py: no microbenchmark nope; pick from cold_code, decode, load_latency, release_fence"]


def test_without_nvcc_it_says_where_to_run(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))  # a PATH holding neither nvcc nor nvidia-smi
    done = _run("decode", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "micro.py: nvcc is not on PATH: run this on the GPU machine (the CUDA toolkit's bin folder on PATH)"]


def test_every_microbenchmark_source_says_what_it_measures():
    sources = sorted((ROOT / "benchmarks" / "micro").glob("*.cu"))
    assert [p.stem for p in sources] == ["cold_code", "decode", "load_latency", "release_fence"]
    for path in sources:
        assert path.read_text().startswith("// "), path.name


def test_without_a_gpu_it_says_where_to_run(tmp_path):
    fake = tmp_path / "nvcc"  # an nvcc that must never be called: the GPU check comes first
    fake.write_text("#!/bin/sh\necho called >&2\nexit 9\n")
    fake.chmod(0o755)
    done = _run(env=dict(os.environ, PATH=str(tmp_path)))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "micro.py: no GPU found (nvidia-smi lists none): run this on the GPU machine"]
