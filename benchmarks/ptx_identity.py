"""Every kernel build's PTX, recorded and checked: a change that should leave the kernels alone
(a refactor, a comment, a dropped benchmark switch) proves it did.

    python benchmarks/ptx_identity.py record FILE [--cache DIR]   # digests of every build in a kernel cache
    python benchmarks/ptx_identity.py check FILE                   # rebuild each with today's sources, compare

`record` reads a kernel cache (default `$NVGG_CACHE_DIR` or ~/.cache/nvgg/kernels) after the test
suite filled it: every build the suite compiled, on both archs (sm_90a per-group, expand, persistent
plain/wide/instrumented, both tensor-map modes and readiness waits; sm_100a per-group and persistent,
1- and 2-CTA, both modes, instrumented), each as its config, static shape and the SHA-256 of its PTX.
`check` compiles each recorded build again from the sources in this checkout, in a cache of its own
(CPU only, no GPU), and prints the builds whose PTX differs; exit 1 if any does. A recorded config
field the kernels no longer have is dropped when it held its default, and the build skipped (said
so) when it did not: such a build no longer exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from columns import refuse  # noqa: E402  (this folder is on the path: the script runs from it)
from nvgg.atomic import replace_whole  # noqa: E402


def _cache_dir(given: str | None) -> Path:
    return Path(given or os.environ.get("NVGG_CACHE_DIR") or Path.home() / ".cache" / "nvgg" / "kernels")


def _writable_file(out: Path) -> None:
    """Refuse an output that is not a plain file to (re)write: a folder, a device such as /dev/null, a
    FIFO, a link, or a file in a folder that does not exist or cannot be written."""
    if out.is_symlink() or (out.exists() and not out.is_file()):
        refuse(f"{out} is a link or not a regular file: give the path of a JSON file to write")
    if not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
        refuse(f"{out.parent} does not exist or cannot be written: give a path in a writable folder")


def _recorded(path: Path) -> list[dict]:
    """The builds of a record written by `record`, or a refusal saying what is wrong with the file."""
    if not path.is_file():
        refuse(f"{path} is not a file: give a record written by `ptx_identity.py record`")
    try:
        builds = json.loads(path.read_text())["builds"]
        if not builds or not all({"arch", "name", "config", "shape", "ptx_sha256"} <= set(b) for b in builds):
            raise ValueError
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        refuse(f"{path} is not a record of builds (JSON {{\"builds\": [...]}} from `ptx_identity.py record`)")
    return builds


def record(out: Path, cache: Path) -> int:
    _writable_file(out)
    if not cache.is_dir():
        refuse(f"--cache {cache} is not a folder: give the kernel cache a test run filled (NVGG_CACHE_DIR)")
    builds = []
    for info_path in sorted(cache.glob("*/info.json")):
        info = json.loads(info_path.read_text())
        ptx = info_path.parent / "kernel.ptx"
        if not ptx.is_file() or "arch" not in info or "config" not in info:
            continue  # no PTX, or not one of the kernels' builds (the CuTe DSL example's cache entries)
        builds.append({"arch": info["arch"], "name": info["name"], "config": info["config"], "shape": info["shape"],
                       "ptx_sha256": hashlib.sha256(ptx.read_bytes()).hexdigest()})
    if not builds:
        refuse(f"{cache} holds no kernel build: fill it with a test run first (NVGG_CACHE_DIR); {out} left as it was")
    builds.sort(key=lambda b: (b["arch"], b["name"], json.dumps(b["config"], sort_keys=True)))
    replace_whole(out, (json.dumps({"builds": builds}, indent=1) + "\n").encode())
    print(f"recorded {len(builds)} builds from {cache} in {out}")
    return 0


def _config(cls, raw: dict):
    """The config dataclass of a recorded build, or the name of a field it set that no longer exists."""
    known = {f.name: f for f in fields(cls)}
    kept = {}
    for key, value in raw.items():
        if key in known:
            kept[key] = value
        elif value not in ("", None, False, 0):
            return f"{key}={value!r}"
    return cls(**kept)


def check(path: Path) -> int:
    builds = _recorded(path)
    os.environ["NVGG_CACHE_DIR"] = tempfile.mkdtemp(prefix="nvgg-ptx-identity-")
    from nvgg.kernels.sm90 import config as sm90_config, host as sm90_host
    from nvgg.kernels.sm100 import config as sm100_config, host as sm100_host

    differ, skipped, same = [], [], 0
    for i, b in enumerate(builds, 1):
        if b["arch"] == "sm_90a":
            config = _config(sm90_config.GemmConfig, b["config"])
            shape = tuple(b["shape"]) if b["shape"] else None
            build = (lambda c=config, s=shape: sm90_host.compile_gemm(c, s, "sm_90a", need_callable=False))
        else:
            config = _config(sm100_config.Sm100Config, b["config"])
            build = (lambda c=config, a=b["arch"]: sm100_host.compile_gemm(c, a, need_callable=False))
        if isinstance(config, str):
            skipped.append(f"{b['name']} ({config}: no longer built)")
            continue
        entry = build()
        digest = hashlib.sha256((entry.directory / "kernel.ptx").read_bytes()).hexdigest()
        if digest == b["ptx_sha256"]:
            same += 1
        else:
            differ.append(b["name"])
        print(f"[{i}/{len(builds)}] {b['name']}: {'same' if digest == b['ptx_sha256'] else 'DIFFERS'}", flush=True)
    print(f"{same} builds byte-identical, {len(differ)} differ, {len(skipped)} no longer built")
    for name in skipped:
        print(f"  skipped: {name}")
    for name in differ:
        print(f"  differs: {name}")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("file")
    rec.add_argument("--cache")
    chk = sub.add_parser("check")
    chk.add_argument("file")
    args = parser.parse_args()
    if args.verb == "record":
        return record(Path(args.file), _cache_dir(args.cache))
    return check(Path(args.file))


if __name__ == "__main__":
    sys.exit(main())
