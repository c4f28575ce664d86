"""What a CuTe DSL compiled host function would launch, found without a GPU: the reference the
sm_100a driver launch (kernels/sm100/params.py) is checked against, byte for byte.

A `cute.compile` result keeps its host module (`fn.ir_module`, LLVM dialect): the code that encodes
the kernel's tensor maps, fills a cudaLaunchConfig_t and calls the DSL runtime's wrappers
(`_cudaLibraryLoadData`, `_cudaLibraryGetKernel`, ..., `_cudaLaunchKernelEx`). `Capture` compiles
that same module a second time in an MLIR ExecutionEngine of its own, with no shared libraries, and
binds every function the module declares but does not define to a recorder (ctypes callbacks,
`raw_register_runtime`, before the first lookup binds the module's symbols), so no call reaches
CUDA. Running the module's `cuda_init` and `cuda_load_to_device` hands it a fake kernel handle and
records the kernel's cubin (embedded in a fatbin); each parameter's size comes from the cubin
(`.nv.info.<kernel>`, EIATTR_KPARAM_INFO). Then the host function runs on arguments converted by
the DSL itself (`generate_execution_args`) and its one launch is recorded: grid, block, dynamic
shared memory, attributes (a cluster shape among them) and every kernel parameter's bytes.

Bytes the host code never writes (stack left-overs, different from call to call in the DSL's own
launches too): words 8-15 of each tensor map, struct padding. Compare what it writes.
"""

from __future__ import annotations

import ctypes
import re
import struct

from .cache import _elf_sections, _nv_info

EIATTR_KPARAM_INFO = 0x17
_FATBIN_MAGIC = 0xBA55ED50
_LIBRARY, _KERNEL = 0x1B0000, 0x4E0000  # fake handles
_OPTIN_SMEM = 232448  # what the fake device reports as its opt-in shared memory (a B200's)
ATTRIBUTE_NAMES = {2: "cooperative", 4: "cluster", 6: "programmatic"}  # cudaLaunchAttributeID


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint32), ("y", ctypes.c_uint32), ("z", ctypes.c_uint32)]


class _Config(ctypes.Structure):
    """cudaLaunchConfig_t (56 bytes): grid, block, dynamic shared memory, stream, attributes."""

    _fields_ = [("grid", _Dim3), ("block", _Dim3), ("smem", ctypes.c_size_t), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("count", ctypes.c_uint32)]


class _Attribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("pad", ctypes.c_uint8 * 4), ("value", ctypes.c_uint32 * 16)]


def param_sizes(cubin: bytes, kernel: str) -> list[int]:
    """Sizes in bytes of the kernel's parameters, in order, from the cubin's KPARAM_INFO records."""
    off, size, _ = _elf_sections(cubin)[".nv.info." + kernel]
    found = {}
    for attr, value in _nv_info(cubin[off:off + size]):
        if attr == EIATTR_KPARAM_INFO:
            _, ordinal, _, flags = struct.unpack_from("<IHHI", value)
            found[ordinal] = (flags >> 18) & 0x3FFF
    return [found[k] for k in sorted(found)]


I32, P, I64 = ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64


class Capture:
    """A second JIT of `fn`'s host module with its CUDA calls recorded; `run(args)` captures one call."""

    def __init__(self, fn):
        from cutlass._mlir import execution_engine

        self.fn = fn
        self.kernels: dict[int, str] = {}
        self.sizes: dict[str, list[int]] = {}
        self.cubin = b""
        self.launches: list[dict] = []
        self.unexpected: list[str] = []
        self.engine = execution_engine.ExecutionEngine(fn.ir_module, opt_level=2, shared_libs=[])
        handlers = {
            "_cudaLibraryLoadData": (ctypes.CFUNCTYPE(I32, P, P, P, P, I32, P, P, I32), self._load),
            "_cudaLibraryGetKernel": (ctypes.CFUNCTYPE(I32, P, P, P), self._get_kernel),
            "_cudaGetDevice": (ctypes.CFUNCTYPE(I32, P), lambda out: self._store_int(out, 0)),
            "_cudaDeviceGetAttribute": (ctypes.CFUNCTYPE(I32, P, I32, I32),
                                        lambda out, attr, dev: self._store_int(out, _OPTIN_SMEM if attr == 97 else 0)),
            "_cuKernelGetAttribute": (ctypes.CFUNCTYPE(I32, P, I32, P, I32), lambda out, *_: self._store_int(out, 0)),
            "_cudaKernelSetAttributeForDevice": (ctypes.CFUNCTYPE(I32, P, I32, I32, I32), lambda *_: 0),
            "_cudaFuncSetAttribute": (ctypes.CFUNCTYPE(I32, P, I32, I32), lambda *_: 0),
            "_cudaLaunchKernelEx": (ctypes.CFUNCTYPE(I32, P, P, P), self._launch),
        }
        self._keep = []
        for name in self._declared(str(fn.ir_module)):
            if name in ("printf", "puts", "abort", "malloc", "free", "memcpy", "memset", "fprintf"):
                continue  # libc: resolved from the process, harmless
            proto, handler = handlers.get(name, (ctypes.CFUNCTYPE(I32), lambda n=name: self._unexpected(n)))
            callback = proto(handler)
            self._keep.append(callback)
            self.engine.raw_register_runtime(name, ctypes.cast(callback, ctypes.c_void_p))
        library = ctypes.c_void_p()
        self._packed("cuda_init", [ctypes.pointer(ctypes.pointer(library))])
        self._packed("cuda_load_to_device", [ctypes.pointer(ctypes.pointer(library)), ctypes.pointer(ctypes.c_int32(0))])
        for name in self.kernels.values():
            self.sizes[name] = param_sizes(self.cubin, name)
        entry = self.engine.raw_lookup("_mlir_ciface_" + fn.function_name)
        if not entry:
            raise RuntimeError(f"no host entry _mlir_ciface_{fn.function_name}")
        self._entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(entry)

    @staticmethod
    def _declared(ir_text: str) -> list[str]:
        """The functions the module declares without a body."""
        names = []
        for line in ir_text.splitlines():
            m = re.match(r"\s*llvm\.func (?:\w+ )*@([\w$.]+)\(.*\)(?: -> [^{]*)?$", line)
            if m and not line.rstrip().endswith("{"):
                names.append(m.group(1))
        return names

    @staticmethod
    def _store_int(out, value: int) -> int:
        ctypes.c_int.from_address(out).value = value
        return 0

    def _unexpected(self, name: str) -> int:
        self.unexpected.append(name)
        return 700  # an error code: the host code stops there

    def _load(self, out, code, *_):
        magic, _, header, size = struct.unpack("<IHHQ", ctypes.string_at(code, 16))
        blob = ctypes.string_at(code, header + size) if magic == _FATBIN_MAGIC else b""
        start = blob.find(b"\x7fELF")
        if start < 0:
            return 1
        elf = blob[start:]
        shoff = struct.unpack_from("<Q", elf, 0x28)[0]
        shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
        self.cubin = elf[:shoff + shentsize * shnum]
        ctypes.c_void_p.from_address(out).value = _LIBRARY
        return 0

    def _get_kernel(self, out, library, name):
        handle = _KERNEL + 16 * len(self.kernels)
        self.kernels[handle] = ctypes.string_at(name).decode()
        ctypes.c_void_p.from_address(out).value = handle
        return 0

    def _launch(self, config, kernel, args):
        try:
            cfg = _Config.from_address(config)
            name = self.kernels[kernel]
            argv = ctypes.cast(args, ctypes.POINTER(ctypes.c_void_p))
            attrs = {}
            for i in range(cfg.count):
                a = _Attribute.from_address(cfg.attrs + i * ctypes.sizeof(_Attribute))
                attrs[ATTRIBUTE_NAMES.get(a.id, a.id)] = tuple(a.value[:3]) if a.id == 4 else a.value[0]
            self.launches.append({
                "kernel": name, "grid": (cfg.grid.x, cfg.grid.y, cfg.grid.z),
                "block": (cfg.block.x, cfg.block.y, cfg.block.z), "smem": cfg.smem, "attrs": attrs,
                "params": [ctypes.string_at(argv[i], n) for i, n in enumerate(self.sizes[name])]})
            return 0
        except Exception:  # never unwind a Python exception through JIT-compiled frames
            return 999

    def _packed(self, name: str, pointers) -> None:
        fn = self.engine.raw_lookup(name)
        err = ctypes.c_int32(0)
        items = [*pointers, ctypes.pointer(err)]
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fn)((ctypes.c_void_p * len(items))(
            *[ctypes.cast(p, ctypes.c_void_p) for p in items]))
        if err.value:
            raise RuntimeError(f"{name} returned {err.value} (unexpected calls: {self.unexpected})")

    def run(self, args) -> dict:
        """The launch the host function makes for `args` (as it takes them, the stream last)."""
        exe_args, adapted = self.fn.generate_execution_args(*args)
        result = ctypes.c_int32(-1)
        values = [a.value if isinstance(a, ctypes.c_void_p) else a for a in exe_args]
        self.launches.clear()
        self._entry((ctypes.c_void_p * (len(values) + 1))(*values, ctypes.addressof(result)))
        del adapted
        if result.value != 0 or len(self.launches) != 1:
            raise RuntimeError(f"the host function returned {result.value} after {len(self.launches)} launches "
                               f"(unexpected calls: {self.unexpected})")
        return self.launches[0]
