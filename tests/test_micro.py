"""benchmarks/micro.py's bad input and missing tools: one line on stderr, exit 2, before any build."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "micro.py"


def _run(*argv, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, env=env)


def test_an_unknown_name_is_refused_with_the_names_there_are():
    done = _run("release_fence", "nope")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "micro.py: no microbenchmark 'nope'; pick from cold_code, decode, hot_lines, load_latency, release_fence, stage_copies"]


def test_without_nvcc_it_says_where_to_run(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))  # a PATH holding neither nvcc nor nvidia-smi
    done = _run("decode", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "micro.py: nvcc is not on PATH: run this on the GPU machine (the CUDA toolkit's bin folder on PATH)"]


def test_every_microbenchmark_source_says_what_it_measures():
    sources = sorted((ROOT / "benchmarks" / "micro").glob("*.cu"))
    assert [p.stem for p in sources] == ["cold_code", "decode", "hot_lines", "load_latency", "release_fence", "stage_copies"]
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


def test_an_empty_name_and_a_name_given_twice_are_refused():
    empty = _run("")
    assert (empty.returncode, empty.stdout) == (2, "")
    assert empty.stderr.strip().splitlines() == [
        "micro.py: no microbenchmark ''; pick from cold_code, decode, hot_lines, load_latency, release_fence, stage_copies"]
    twice = _run("decode", "cold_code", "decode")
    assert (twice.returncode, twice.stdout) == (2, "")
    assert twice.stderr.strip().splitlines() == ["micro.py: decode named twice; name each microbenchmark once"]


def _fake(folder, name, text):
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + text)
    tool.chmod(0o755)


def test_a_card_before_sm_90_or_an_unreadable_listing_is_refused_before_any_build(tmp_path):
    _fake(tmp_path, "nvcc", "echo called >&2\nexit 9\n")  # must never be called
    env = dict(os.environ, PATH=str(tmp_path))
    _fake(tmp_path, "nvidia-smi", "echo 'Tesla V100, 7.0, 1530 MHz'\n")
    old = _run("decode", env=env)
    assert (old.returncode, old.stdout) == (2, "")
    assert old.stderr.strip().splitlines() == ["micro.py: the card is sm_70; these need sm_90 or later (e4m3 conversions)"]
    _fake(tmp_path, "nvidia-smi", "echo 'NVIDIA H200, [N/A], 1980 MHz'\n")
    odd = _run("decode", env=env)
    assert (odd.returncode, odd.stdout) == (2, "")
    assert odd.stderr.strip().splitlines() == [
        "micro.py: nvidia-smi's line 'NVIDIA H200, [N/A], 1980 MHz' names no compute capability: is the driver loaded?"]


def test_help_prints_the_usage():
    done = _run("--help")
    assert done.returncode == 0 and "python benchmarks/micro.py [NAME ...]" in done.stdout and done.stderr == ""


def test_a_failing_nvcc_is_one_line_even_when_it_says_nothing(tmp_path):
    _fake(tmp_path, "nvidia-smi", "echo 'NVIDIA H200, 9.0, 1980 MHz'\n")
    _fake(tmp_path, "nvcc", "exit 9\n")
    done = _run("decode", env=dict(os.environ, PATH=str(tmp_path)))
    assert done.returncode == 2
    assert done.stdout.strip().splitlines() == ["# NVIDIA H200 (sm_90a, max 1980 MHz)"]
    assert done.stderr.strip().splitlines() == ["micro.py: nvcc failed on decode.cu: exit 9"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit) on PATH")
def test_every_microbenchmark_builds_for_sm_90a(tmp_path):
    """Built as micro.py builds them (but to a cubin, not linked), without a GPU: a source that no
    longer compiles fails here, not on the GPU machine's clock."""
    for path in sorted((ROOT / "benchmarks" / "micro").glob("*.cu")):
        built = subprocess.run(["nvcc", "-arch=sm_90a", "-O3", "-cubin", "-o", str(tmp_path / f"{path.stem}.cubin"),
                                str(path)], capture_output=True, text=True, timeout=120)
        assert built.returncode == 0, (path.name, built.stderr[-500:])
        assert (tmp_path / f"{path.stem}.cubin").stat().st_size > 0
