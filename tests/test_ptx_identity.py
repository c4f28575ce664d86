"""benchmarks/ptx_identity.py's bad input: one line on stderr, exit 2, nothing written, before any
build; and a record taken from a cache holds its kernel builds and nothing else."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "ptx_identity.py"


def _run(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)


def _cache(folder):
    """A kernel cache of one sm_90a build and one entry that is not a kernel build (the CuTe DSL
    example's: no arch, no config)."""
    build = folder / "cache" / "k1"
    build.mkdir(parents=True)
    (build / "info.json").write_text(json.dumps({"arch": "sm_90a", "name": "b", "config": {"tile_m": 128},
                                                 "shape": None}))
    (build / "kernel.ptx").write_text("// ptx\n")
    other = folder / "cache" / "k2"
    other.mkdir()
    (other / "info.json").write_text(json.dumps({"resources": {}, "key": ["example"]}))
    (other / "kernel.ptx").write_text("// example\n")
    return folder / "cache"


def test_record_keeps_the_kernel_builds_only(tmp_path):
    out = tmp_path / "rec.json"
    done = _run("record", str(out), "--cache", str(_cache(tmp_path)))
    assert done.returncode == 0, done.stderr
    builds = json.loads(out.read_text())["builds"]
    assert [(b["arch"], b["name"], b["config"]) for b in builds] == [("sm_90a", "b", {"tile_m": 128})]
    assert len(builds[0]["ptx_sha256"]) == 64


@pytest.mark.parametrize("kind", ["missing cache", "empty cache", "folder out", "device out", "link out", "fifo out",
                                  "no folder", "empty out"])
def test_record_refuses_bad_paths_and_writes_nothing(tmp_path, kind):
    cache = _cache(tmp_path)
    kept = tmp_path / "kept.json"
    kept.write_text("kept\n")
    out = tmp_path / "rec.json"
    if kind == "missing cache":
        cache = tmp_path / "nowhere"
    elif kind == "empty cache":
        cache = tmp_path / "empty"
        cache.mkdir()
    elif kind == "folder out":
        out = tmp_path
    elif kind == "device out":
        out = "/dev/null"
    elif kind == "link out":
        out = tmp_path / "link.json"
        out.symlink_to(kept)
    elif kind == "fifo out":
        out = tmp_path / "fifo.json"
        os.mkfifo(out)
    elif kind == "no folder":
        out = tmp_path / "no" / "rec.json"
    elif kind == "empty out":
        out = ""
    done = _run("record", str(out), "--cache", str(cache))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("ptx_identity.py: ") and "Traceback" not in done.stderr
    assert kept.read_text() == "kept\n" and not (tmp_path / "rec.json").exists()


@pytest.mark.parametrize("content", [None, "", "not json", '{"builds": []}', '{"builds": [{"name": "x"}]}', "[1]"])
def test_check_refuses_what_is_not_a_record(tmp_path, content):
    path = tmp_path / "rec.json"
    if content is not None:
        path.write_text(content)
    done = _run("check", str(path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "ptx_identity.py record" in done.stderr and "Traceback" not in done.stderr
