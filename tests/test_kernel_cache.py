"""The compile cache's lookups without the compiler (nvgg/kernels/cache.py): a lookup that may not
build (`cached_only`), and a key another process is building, waited for and read, not built
again. The builds here are stand-ins that write a minimal ELF; the DSL's own are in
test_kernels_sm90.py."""

import fcntl
import json
import struct
import threading
import time

import pytest

from nvgg.kernels import cache as kcache


def _elf() -> bytes:
    """A 64-bit little-endian ELF with a section-name table and no kernel: what cubin_resources
    reads as no resources."""
    names = b"\0.shstrtab\0"
    header = bytearray(64)
    header[:7] = b"\x7fELF\x02\x01\x01"
    struct.pack_into("<Q", header, 0x28, 80)  # the section headers after the names, aligned
    struct.pack_into("<HHH", header, 0x3A, 64, 2, 1)
    null = bytes(64)
    shstrtab = struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, 64, len(names), 0, 0, 1, 0)
    return bytes(header) + names + bytes(80 - 64 - len(names)) + null + shstrtab


KEY = kcache.CacheKey("k", (1,), (8, 128, 256), "sm_90a", "4.8.1", "0" * 16)


class Build:
    """A stand-in build: counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, folder):
        self.calls += 1
        return kcache.Built(fn=object(), ptx="// ptx", cubin=_elf(), meta={"name": "k"})


def test_cached_only_raises_for_what_would_build_and_answers_what_is_on_disk(tmp_path):
    build = Build()
    store = kcache.CompileCache(tmp_path)
    with kcache.cached_only(), pytest.raises(kcache.NotCached) as raised:
        store.get(KEY, build, need_callable=False)
    assert raised.value.key == KEY and build.calls == 0 and not store.directory(KEY).exists()
    assert store.get(KEY, build, need_callable=False).hit == "cold" and build.calls == 1
    folder = store.directory(KEY)
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "info.json", "kernel.cubin", "kernel.ptx"]
    assert json.loads((folder / "info.json").read_text())["name"] == "k"
    fresh = kcache.CompileCache(tmp_path)  # a new process's cache: the record on disk, no callable
    with kcache.cached_only():
        assert fresh.get(KEY, build, need_callable=False).hit == "disk"
        with pytest.raises(kcache.NotCached):  # the callable would need a build
            fresh.get(KEY, build)
    assert fresh.get(KEY, build).hit == "cold" and build.calls == 2  # outside, it builds as before
    assert not getattr(kcache._LOOKUP, "only", False)


def test_a_key_another_process_builds_is_waited_for_and_read_not_built_again(tmp_path):
    build = Build()
    store = kcache.CompileCache(tmp_path)
    folder = store.directory(KEY)
    folder.mkdir(parents=True)
    other = open(folder / ".lock", "a")  # held as the other process's build holds it
    fcntl.flock(other, fcntl.LOCK_EX)
    got = []
    waiter = threading.Thread(target=lambda: got.append(store.get(KEY, build, need_callable=False)))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive() and not got  # waiting on the lock, not building
    (folder / "info.json").write_text(json.dumps({"name": "k", "cold_compile_s": 4.2}))  # the other's record
    other.close()  # its build done: the lock goes
    waiter.join(10)
    assert got[0].hit == "disk" and got[0].info["cold_compile_s"] == 4.2 and build.calls == 0


def test_a_rebuild_that_needs_the_callable_never_shows_a_reader_half_a_file(tmp_path):
    """A process that found the record reads kernel.ptx and kernel.cubin without the lock, while
    another (which needs the callable the disk does not keep) builds the key again and rewrites
    them: every read is one build's file whole. The files are large so that a write in place would
    be caught half done."""
    sizes = iter(range(1, 100))

    def build(folder):
        n = next(sizes)
        return kcache.Built(fn=object(), ptx=f"// build {n:02d}\n" + "x" * (8 << 20), cubin=_elf() + bytes([n]) * (8 << 20),
                            meta={"name": "k"})

    store = kcache.CompileCache(tmp_path)
    store.get(KEY, build)
    folder, seen, stop = store.directory(KEY), set(), threading.Event()

    def read():
        while not stop.is_set():
            ptx, cubin = (folder / "kernel.ptx").read_text(), (folder / "kernel.cubin").read_bytes()
            seen.add((len(ptx), ptx.endswith("x"), len(cubin), cubin[-1] == cubin[len(_elf())]))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(20):
            kcache.CompileCache(tmp_path).get(KEY, build)  # a new process's cache: it builds again
    finally:
        stop.set()
        reader.join(30)
    whole = (len("// build 01\n") + (8 << 20), True, len(_elf()) + (8 << 20), True)
    assert seen == {whole}
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "info.json", "kernel.cubin", "kernel.ptx"]
