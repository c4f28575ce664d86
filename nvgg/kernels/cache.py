"""Compile cache for our CuTe DSL kernels, in process and on disk, and the resource figures read
from what the compiler wrote.

A kernel is cached under an explicit key: the kernel's name, its configuration (a frozen
dataclass, as a tuple), the static shapes it was specialised for, the target arch, the CuTe DSL
version and a SHA-256 of the kernel's source files. Change any of them and the key changes.

- In process: the compiled callable, so a launcher never compiles twice.
- On disk (`$NVGG_CACHE_DIR`, default `~/.cache/nvgg/kernels/<digest>/`): the PTX and cubin the
  compiler wrote, and `info.json` with the resources read from the cubin and the cold compile
  time (read once a process). `nvgg compile` answers from the disk record without compiling; a launch in a new process
  compiles once (the DSL's callable is not serialised).

Resources come from the cubin itself (ELF), so no CUDA tool is needed: `.nv.info` attribute
EIATTR_REGCOUNT gives registers per thread, EIATTR_FRAME_SIZE the stack frame (spills land there),
EIATTR_MAX_THREADS the block size, and `.nv.shared.<kernel>` the static shared memory.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import struct
import threading
import time
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Callable

from ..atomic import replace_whole

# .nv.info attribute ids (cuobjdump's EIATTR_* names), from the CUDA ELF format as dumped by
# `cuobjdump -elf`; values are stable across CUDA 11-13.
EIATTR_REGCOUNT = 0x2F
EIATTR_FRAME_SIZE = 0x11
EIATTR_MAX_THREADS = 0x10
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4


@functools.lru_cache(maxsize=1)
def dsl_version() -> str:
    """The installed CuTe DSL's version (read once a process: reading package metadata is slow)."""
    try:
        from importlib.metadata import version
        return version("nvidia-cutlass-dsl")
    except Exception:  # the device bundle may carry the package without its metadata
        import cutlass
        return str(getattr(cutlass, "__version__", "unknown"))


def source_fingerprint(*paths: str | Path) -> str:
    """A digest of the files' contents, hashed again only when a file's size or time changes."""
    stats = tuple((str(p), st.st_mtime_ns, st.st_size) for p, st in ((p, os.stat(p)) for p in paths))
    return _fingerprint(stats)


@functools.lru_cache(maxsize=64)
def _fingerprint(stats: tuple) -> str:
    digest = hashlib.sha256()
    for path, _, _ in stats:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class CacheKey:
    kernel: str
    config: tuple
    shape: tuple | None
    arch: str
    dsl: str
    source: str

    @classmethod
    def make(cls, kernel: str, config, shape, arch: str, sources) -> "CacheKey":
        return cls(kernel, astuple(config), tuple(shape) if shape else None, arch, dsl_version(),
                   source_fingerprint(*sources))

    def digest(self) -> str:
        return hashlib.sha256(repr(astuple(self)).encode()).hexdigest()[:24]


@dataclass
class Entry:
    """One cached kernel. `fn` is None when only the disk record was read."""

    key: CacheKey
    fn: object | None
    info: dict
    directory: Path
    compile_s: float  # this lookup: the cold compile, or the warm hit
    hit: str  # "cold", "memory" or "disk"
    extra: dict = field(default_factory=dict)


@dataclass
class Built:
    """What a build function returns: the callable and the compiler's two outputs."""

    fn: object
    ptx: str
    cubin: bytes
    meta: dict


def default_root() -> Path:
    return Path(os.environ.get("NVGG_CACHE_DIR") or Path.home() / ".cache" / "nvgg" / "kernels")


class CompileCache:
    def __init__(self, root: str | Path | None = None):
        self._root = Path(root) if root else None
        self._memory: dict[CacheKey, Entry] = {}
        self._records: dict[CacheKey, Entry] = {}  # disk records read without a callable
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        """The folder given, else NVGG_CACHE_DIR's or the default, as the environment says now."""
        return self._root or default_root()

    def directory(self, key: CacheKey) -> Path:
        return self.root / key.digest()

    def _unwritable(self, exc: OSError):
        from ..errors import NvggError
        return NvggError(f"the kernel cache {self.root} cannot be written ({exc.strerror}): set NVGG_CACHE_DIR to a "
                         "folder you can write")

    def get(self, key: CacheKey, build: Callable[[Path], Built], *, need_callable: bool = True) -> Entry:
        """The cached kernel for `key`, building it (into its cache directory) when needed; under
        `cached_only`, NotCached instead of a build. One process builds a key at a time (its
        folder's lock): another asking for it meanwhile waits, then reads the record."""
        t0 = time.perf_counter()
        with self._lock:
            entry = self._memory.get(key)
            if entry is not None:
                return Entry(key, entry.fn, entry.info, entry.directory, time.perf_counter() - t0, "memory")
            folder = self.directory(key)
            record = folder / "info.json"
            known = None if need_callable else self._record(key, record)
            if known is not None:
                return Entry(key, None, known.info, folder, time.perf_counter() - t0, "disk")
            if getattr(_LOOKUP, "only", False):
                raise NotCached(key)
            try:
                folder.mkdir(parents=True, exist_ok=True)
                lock = open(folder / ".lock", "a")
            except OSError as exc:
                raise self._unwritable(exc) from None
            with lock:
                _exclusive(lock)
                known = None if need_callable else self._record(key, record)  # built while this one waited
                if known is not None:
                    return Entry(key, None, known.info, folder, time.perf_counter() - t0, "disk")
                return self._build(key, build, folder, t0)

    def _record(self, key: CacheKey, record: Path) -> Entry | None:
        """The disk record of `key` (read once a process), or None."""
        known = self._records.get(key)
        if known is None and record.is_file():
            known = self._records[key] = Entry(key, None, json.loads(record.read_text()), record.parent, 0.0, "disk")
        return known

    def _build(self, key: CacheKey, build: Callable[[Path], Built], folder: Path, t0: float) -> Entry:
        record = folder / "info.json"
        built = build(folder)
        cold = time.perf_counter() - t0
        info = dict(built.meta)
        info["resources"] = cubin_resources(built.cubin)
        info["cold_compile_s"] = cold
        info["key"] = [repr(x) for x in astuple(key)]
        try:
            # each file whole: read without the lock, by a process that found the record of an
            # earlier build of the key while this one (which needs the callable) builds it again
            replace_whole(folder / "kernel.ptx", built.ptx.encode())
            replace_whole(folder / "kernel.cubin", built.cubin)
            replace_whole(record, json.dumps(info, indent=1, default=str).encode())  # the record last
        except OSError as exc:
            raise self._unwritable(exc) from None
        entry = Entry(key, built.fn, info, folder, cold, "cold")
        self._memory[key] = entry
        return entry


class NotCached(Exception):
    """A lookup under `cached_only` that would build: the kernel's key."""

    def __init__(self, key: CacheKey):
        super().__init__(key.kernel)
        self.key = key


_LOOKUP = threading.local()


@contextlib.contextmanager
def cached_only():
    """Within, on this thread: a kernel neither in memory nor (looked up without its callable) on
    disk raises NotCached instead of being built; how prebuild.py finds what a run lacks."""
    _LOOKUP.only = True
    try:
        yield
    finally:
        _LOOKUP.only = False


def _exclusive(fh) -> None:
    """Lock the open file `fh` against other processes until it is closed (flock): processes that
    compile side by side (prebuild.py, several GPUs' workers) build a shared key once. No lock
    where the OS has no flock."""
    try:
        import fcntl
    except ImportError:
        return
    fcntl.flock(fh, fcntl.LOCK_EX)


_SHARED = CompileCache()


def kernel_symbol(info: dict) -> str:
    """The one kernel entry of a compiled record (the cubin's functions with a register count;
    sm_100a cubins also hold the tcgen05 guardrail traps, internal functions without one)."""
    kernels = [name for name, res in info["resources"].items() if "registers" in res and not name.startswith("$")]
    if len(kernels) != 1:
        raise RuntimeError(f"expected one kernel in the cubin, found {kernels}")
    return kernels[0]


def resources(entry: Entry) -> dict:
    """registers (a thread, at launch), smem_bytes (static + dynamic), frame_bytes of the entry's
    one kernel, and setmaxnreg: the register counts its warpgroups move to after launch
    ({"inc": n, "dec": n}; empty where it has none)."""
    res = entry.info["resources"][kernel_symbol(entry.info)]
    return {"registers": res.get("registers", 0), "frame_bytes": res.get("frame_bytes", 0),
            "smem_bytes": res.get("static_smem_bytes", 0) + entry.info["dynamic_smem_bytes"],
            "setmaxnreg": entry.info.get("setmaxnreg", {})}


def shared() -> CompileCache:
    return _SHARED


def _elf_sections(data: bytes) -> dict[str, tuple[int, int, int]]:
    """name -> (offset, size, info) of every section of a 64-bit little-endian ELF."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]

    def name(offset: int) -> str:
        end = data.index(b"\0", strtab + offset)
        return data[strtab + offset:end].decode()

    return {name(h[0]): (h[4], h[5], h[7]) for h in headers}


def _nv_info(blob: bytes):
    """(attribute, value) pairs of a .nv.info section; SVAL values are bytes. Every record is a
    format byte, an attribute byte and two more: a value (BVAL, HVAL), nothing (NVAL), or the
    size of the SVAL payload that follows (read so, every section of nvgg's cubins ends exactly
    at its last record)."""
    i = 0
    while i + 4 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        if fmt == _EIFMT_SVAL:
            size = struct.unpack_from("<H", blob, i + 2)[0]
            yield attr, blob[i + 4:i + 4 + size]
            i += 4 + size
        elif fmt in (_EIFMT_HVAL, _EIFMT_BVAL):
            yield attr, struct.unpack_from("<H", blob, i + 2)[0]
            i += 4
        elif fmt == _EIFMT_NVAL:
            yield attr, None
            i += 4
        else:
            raise ValueError(f"unknown .nv.info record format {fmt:#x}")


def cubin_resources(cubin: bytes) -> dict[str, dict]:
    """Per kernel in the cubin: registers, frame bytes, static shared bytes, max threads."""
    sections = _elf_sections(cubin)
    symtab_off, symtab_size, _ = sections.get(".symtab", (0, 0, 0))
    strtab_off = sections.get(".strtab", (0, 0, 0))[0]
    symbols = []
    for i in range(symtab_size // 24):
        st_name = struct.unpack_from("<I", cubin, symtab_off + 24 * i)[0]
        end = cubin.index(b"\0", strtab_off + st_name)
        symbols.append(cubin[strtab_off + st_name:end].decode())
    out: dict[str, dict] = {}
    for section, (off, size, _) in sections.items():
        blob = cubin[off:off + size]
        if section == ".nv.info":  # per-function entries keyed by symbol index
            for attr, val in _nv_info(blob):
                if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and isinstance(val, bytes) and len(val) == 8:
                    sym, value = struct.unpack("<II", val)
                    key = "registers" if attr == EIATTR_REGCOUNT else "frame_bytes"
                    out.setdefault(symbols[sym] if sym < len(symbols) else str(sym), {})[key] = value
        elif section.startswith(".nv.info."):
            kernel = section[len(".nv.info."):]
            for attr, val in _nv_info(blob):
                if attr == EIATTR_MAX_THREADS and isinstance(val, bytes) and len(val) == 12:
                    out.setdefault(kernel, {})["max_threads"] = list(struct.unpack("<III", val))
        elif section.startswith(".nv.shared.") and not section.startswith(".nv.shared.reserved"):
            out.setdefault(section[len(".nv.shared."):], {})["static_smem_bytes"] = size
    return out
