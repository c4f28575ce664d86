"""Workloads: the competition's cases, user case files and the competition's one-line format.

A case is G independent GEMMs C_g = A_g · B_gᵀ with per-group (m, n, k), plus the seed the
competition's generator starts from. Cases are data: `cases/competition.yaml` holds the 4
benchmark and 10 test cases of GPU MODE's nvfp4_group_gemm task, exactly as its task.yml lists
them (per-group lists m, n, k; g; seed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from . import data
from .errors import NvggError, read_text

BUILTIN_FILE = "competition.yaml"


@dataclass(frozen=True)
class Case:
    """One workload. `m`, `n`, `k` are per-group tuples of length `g`."""

    id: str
    m: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    seed: int
    kind: str = "user"  # "benchmark", "test" or "user"

    @property
    def g(self) -> int:
        return len(self.m)

    @property
    def groups(self) -> list[tuple[int, int, int]]:
        return list(zip(self.m, self.n, self.k))

    @property
    def flops(self) -> int:
        return sum(2 * m * n * k for m, n, k in self.groups)

    @property
    def bytes(self) -> int:
        """Fewest bytes a kernel must move: A and B packed (k/2 bytes a row), their e4m3 scales
        (k/16 bytes a row), C written once as fp16. The competition's SOL counts exactly these."""
        total = 0
        for m, n, k in self.groups:
            total += (m + n) * (k // 2) + (m + n) * (k // 16) + 2 * m * n
        return total

    def shape_str(self) -> str:
        return f"m: {list(self.m)}; n: {list(self.n)}; k: {list(self.k)}; g: {self.g}; seed: {self.seed}"

    def to_dict(self) -> dict:
        return {"id": self.id, "m": list(self.m), "n": list(self.n), "k": list(self.k),
                "g": self.g, "seed": self.seed, "kind": self.kind}


def make_case(id: str, m, n, k, g: int | None = None, seed: int = 1111, kind: str = "user") -> Case:
    """Validate and build a case. Scalars for n or k are broadcast over the groups."""
    def as_list(name, v):
        if isinstance(v, bool) or v is None:
            raise NvggError(f"case {id!r}: {name} must be an integer or a list of integers, got {v!r}")
        if isinstance(v, int):
            return [v]
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return list(v)
        raise NvggError(f"case {id!r}: {name} must be an integer or a non-empty list of integers, got {v!r}")

    ms, ns, ks = as_list("m", m), as_list("n", n), as_list("k", k)
    count = g if g is not None else max(len(ms), len(ns), len(ks))
    if not isinstance(count, int) or count < 1:
        raise NvggError(f"case {id!r}: g must be a positive integer, got {g!r}")
    ms, ns, ks = ([x[0]] * count if len(x) == 1 and count > 1 else x for x in (ms, ns, ks))
    for name, x in (("m", ms), ("n", ns), ("k", ks)):
        if len(x) != count:
            raise NvggError(f"case {id!r}: {name} has {len(x)} entries but g is {count}; give one per group")
        if any(v < 1 for v in x):
            raise NvggError(f"case {id!r}: every {name} must be positive, got {x}")
    for kk in ks:
        if kk % 32:
            # the generator packs two values a byte and one scale per 16 values; the blocked
            # scale layout groups 4 scales (64 values) but pads, so 32 is the hard floor here
            raise NvggError(f"case {id!r}: k={kk} is not a multiple of 32 (two e2m1 values a byte, one scale per 16)")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise NvggError(f"case {id!r}: seed must be an integer, got {seed!r}")
    return Case(id=str(id), m=tuple(ms), n=tuple(ns), k=tuple(ks), seed=seed, kind=kind)


_FIELD = re.compile(r"^\s*(m|n|k|g|seed)\s*:\s*(.+?)\s*$")


def parse_shape(spec: str, id: str = "shape") -> Case:
    """Parse the competition's one-line format: "m: [64, 128]; n: [256, 256]; k: [512, 512]; g: 2; seed: 7"."""
    fields: dict[str, object] = {}
    for part in spec.split(";"):
        if not part.strip():
            continue
        match = _FIELD.match(part)
        if not match:
            raise NvggError(f"malformed shape spec part {part.strip()!r}: write it like "
                            "\"m: [64, 128]; n: [256, 256]; k: [512, 512]; g: 2; seed: 7\"")
        key, raw = match.groups()
        if key in fields:
            raise NvggError(f"shape spec gives {key} twice: give each of m, n, k, g, seed once")
        try:
            value = _yaml(raw)
        except yaml.YAMLError:
            value = None
        fields[key] = value
    missing = [k for k in ("m", "n", "k") if k not in fields]
    if missing:
        raise NvggError(f"shape spec lacks {', '.join(missing)}: write it like "
                        "\"m: [64, 128]; n: [256, 256]; k: [512, 512]; g: 2; seed: 7\"")
    return make_case(id, fields["m"], fields["n"], fields["k"], fields.get("g"), fields.get("seed", 1111))


def _yaml(text: str):
    """yaml.safe_load through libyaml where PyYAML has it (ten times faster on the cases file, every
    command's first step), else the pure-Python loader: the same safe subset either way."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_file(path: str | Path, kind: str = "user") -> list[Case]:
    """Load a YAML case file: a mapping `cases:` of id -> {m, n, k, g, seed} (or a list with `id`)."""
    path = Path(path)
    text = read_text(path, "case file", "pass an existing YAML file of cases")
    try:
        raw = _yaml(text)
    except yaml.YAMLError as exc:
        raise NvggError(f"case file {path} is not valid YAML ({str(exc).splitlines()[0]}): fix it and retry") from None
    entries = raw.get("cases") if isinstance(raw, dict) else None
    if isinstance(entries, dict):
        for key, val in entries.items():
            if val is not None and not isinstance(val, dict):
                raise NvggError(f"case file {path}, case {key!r}: expected a mapping {{m, n, k, g, seed}}, got {val!r}")
        entries = [{"id": str(key), **(val or {})} for key, val in entries.items()]
    if not isinstance(entries, list):
        raise NvggError(f"case file {path} must have a top-level 'cases:' mapping of id -> {{m, n, k, g, seed}}")
    cases = []
    for entry in entries:
        if not isinstance(entry, dict) or "id" not in entry:
            raise NvggError(f"case file {path}: each case needs an id and m, n, k, got {entry!r}")
        unknown = set(entry) - {"id", "m", "n", "k", "g", "seed", "kind"}
        if unknown:
            raise NvggError(f"case file {path}, case {entry['id']!r}: unknown keys {sorted(unknown)} (allowed: m, n, k, g, seed)")
        if any(key not in entry for key in ("m", "n", "k")):
            raise NvggError(f"case file {path}, case {entry['id']!r}: needs m, n and k")
        cases.append(make_case(str(entry["id"]), entry["m"], entry["n"], entry["k"], entry.get("g"),
                               entry.get("seed", 1111), entry.get("kind", kind)))
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise NvggError(f"case file {path} repeats an id: {sorted({i for i in ids if ids.count(i) > 1})}")
    return cases


@lru_cache(maxsize=1)
def builtin() -> tuple[Case, ...]:
    return tuple(load_file(data.folder("cases") / BUILTIN_FILE, kind="test"))


def all_cases(extra_file: str | Path | None = None) -> list[Case]:
    cases = list(builtin())
    if extra_file is not None:
        known = {c.id for c in cases}
        for case in load_file(extra_file):
            if case.id in known:
                raise NvggError(f"case id {case.id!r} in {extra_file} clashes with a built-in case: rename it")
            cases.append(case)
    return cases


def benchmarks() -> list[Case]:
    return [c for c in builtin() if c.kind == "benchmark"]


def get(id: str, extra_file: str | Path | None = None) -> Case:
    for case in all_cases(extra_file):
        if case.id == str(id):
            return case
    known = ", ".join(c.id for c in all_cases(extra_file))
    raise NvggError(f"unknown case {id!r}: choose one of {known} (or give your own: an inline shape or a cases file)")


def select(spec: str, extra_file: str | Path | None = None) -> list[Case]:
    """'all' (every case), 'benchmarks', 'tests', or a comma list of ids."""
    cases = all_cases(extra_file)
    spec = spec.strip()
    if spec == "all":
        return cases
    if spec in ("benchmarks", "bench"):
        return [c for c in cases if c.kind == "benchmark"]
    if spec == "tests":
        return [c for c in cases if c.kind == "test"]
    ids = [part.strip() for part in spec.split(",")]
    if not all(ids):
        raise NvggError(f"case list {spec!r} has an empty item: ids separated by single commas, like 1,3")
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise NvggError(f"case {twice[0]} is listed twice in {spec!r}: list each case once")
    return [get(i, extra_file) for i in ids]
