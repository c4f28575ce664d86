"""Launching compiled kernels from Python with little host time, for both architectures.

- `PackedLaunch`: the driver's cuLaunchKernelEx on the entry's cubin through ctypes, its
  parameters (packed by the caller, byte for byte) and launch configuration (grid, cluster,
  programmatic serialization) made once: the sm_100a kernels, whose tensor maps and layouts
  kernels/sm100/params.py packs.
- `DirectLaunch`: the same for the sm_90a kernels, whose parameters are plain values and empty
  placeholders it packs itself.
- `DslLaunch`: the DSL's own compiled host function (it builds the kernel's tensor-map parameters
  and launches, with clusters), its arguments converted once and only the stream set per call (the
  sm_100a kernels' `dsl` launch path).

All read the current stream as a raw handle (`current_stream_handle`) at every call, so a launch
runs on whatever stream is current: multistream's pool, a graph capture.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import torch

from . import cache as kcache

# (CUDA context, cubin path) -> (module, function): a module is loaded once per context, and a
# function handle is valid only in the context its module was loaded into (a second GPU, or
# another context on the same one, loads its own)
_FUNCTIONS: dict[tuple[int, str], tuple] = {}


def _function(entry: kcache.Entry):
    """The entry's kernel in the current CUDA context, its module loaded there on first use."""
    import cuda.bindings.driver as cu

    path = str(entry.directory / "kernel.cubin")
    err, context = cu.cuCtxGetCurrent()
    _check(err, "cuCtxGetCurrent")
    if not int(context):
        raise RuntimeError("no current CUDA context to load the kernel into (start CUDA on the device first)")
    key = (int(context), path)
    if key not in _FUNCTIONS:
        name = kcache.kernel_symbol(entry.info)
        err, module = cu.cuModuleLoadData(Path(path).read_bytes())
        _check(err, "cuModuleLoadData")
        err, fn = cu.cuModuleGetFunction(module, name.encode())
        _check(err, "cuModuleGetFunction")
        (err,) = cu.cuFuncSetAttribute(
            fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            entry.info["dynamic_smem_bytes"])
        _check(err, "cuFuncSetAttribute")
        _FUNCTIONS[key] = (module, fn)
    return _FUNCTIONS[key][1]


def _check(err, what: str) -> None:
    import cuda.bindings.driver as cu

    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute (cuda.h): the attribute's id, 4 bytes of padding, then the 64-byte value
    union, whose first int is what a flag attribute reads and whose first three a cluster shape."""

    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint * 16)]


# CUlaunchAttributeID (cuda.h). Programmatic stream serialization: the launch may overlap the
# kernel before it in the stream, as far as that kernel allows (PTX griddepcontrol.launch_dependents);
# sm_90 and later. Cluster dimension: the grid runs as clusters of this shape.
ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
ATTRIBUTE_CLUSTER_DIMENSION = 4


def _attributes(programmatic: bool, cluster: tuple[int, int, int]):
    """The launch attributes array and its count: the cluster shape where it is not (1, 1, 1), and
    programmatic serialization where asked."""
    chosen = []
    if tuple(cluster) != (1, 1, 1):
        chosen.append(_LaunchAttribute(ATTRIBUTE_CLUSTER_DIMENSION, b"", (ctypes.c_uint * 16)(*cluster)))
    if programmatic:
        chosen.append(_LaunchAttribute(ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, b"", (ctypes.c_uint * 16)(1)))
    return (_LaunchAttribute * max(len(chosen), 1))(*chosen), len(chosen)


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (CUDA driver API, cuda.h): grid and block sizes, dynamic shared memory, the
    stream, and launch attributes."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


_LIBCUDA = None


def _driver_launch():
    """libcuda's cuLaunchKernelEx through ctypes, the cheapest Python path to a launch: four
    arguments, all ctypes objects made once, so a call converts nothing (cuLaunchKernel's eleven
    cost about a microsecond more of ctypes time)."""
    global _LIBCUDA
    if _LIBCUDA is None:
        fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
        fn.restype = ctypes.c_int
        _LIBCUDA = fn
    return _LIBCUDA


def current_stream_handle(device_index: int) -> int:
    """The raw CUstream of torch's current stream on the device, without building a Stream
    object (torch.cuda.current_stream() costs a few µs of host time a call)."""
    return torch._C._cuda_getCurrentRawStream(device_index)


def entry_params(ptx_text: str) -> list[str]:
    """The declared parameters (".param ..." lines, in order) of the one kernel entry in `ptx_text`."""
    head = ptx_text[ptx_text.index(".entry "):]
    head = head[head.index("(") + 1:head.index(")")]
    return [line.strip().rstrip(",") for line in head.splitlines() if line.strip().startswith(".param")]


class PackedLaunch:
    """cuLaunchKernelEx on the entry's cubin with parameters packed elsewhere (`params`, one bytes
    object a kernel parameter, in order; checked against the sizes the entry's PTX declares, where
    its record has them), a grid, a cluster shape and, where asked, programmatic stream
    serialization (only for a kernel that waits for the kernel before it, griddepcontrol.wait,
    before touching anything that kernel may write). Every argument of cuLaunchKernelEx is a
    ctypes object made once; a call sets the stream and launches. `keep` is what the kernel reads
    through raw pointers; the launch owns it."""

    def __init__(self, entry: kcache.Entry, params: list[bytes], grid: tuple[int, int, int], *,
                 cluster: tuple[int, int, int] = (1, 1, 1), programmatic: bool = False, keep=None,
                 device_index: int = 0):
        sizes = entry.info.get("param_sizes")
        if sizes is not None and [len(p) for p in params] != list(sizes):
            raise RuntimeError(f"{entry.info.get('name')}: packed parameters of {[len(p) for p in params]} bytes, "
                               f"the kernel declares {list(sizes)}")
        if any(g % c for g, c in zip(grid, cluster)):
            raise ValueError(f"grid {grid} is not whole clusters of {cluster}")
        self.keep = keep
        self.grid, self.cluster, self.programmatic = tuple(grid), tuple(cluster), programmatic
        self.smem = entry.info["dynamic_smem_bytes"]
        self.threads = entry.info["threads"]
        self._device = device_index
        # each parameter in 8-byte aligned words of its own (the driver copies the kernel's sizes)
        self._values = [(ctypes.c_uint64 * max(1, -(-len(p) // 8)))() for p in params]
        for value, p in zip(self._values, params):
            ctypes.memmove(value, p, len(p))
        self._params = (ctypes.c_void_p * len(params))(*(ctypes.addressof(v) for v in self._values))
        self._attrs, count = _attributes(programmatic, self.cluster)
        self._config = _LaunchConfig(*self.grid, self.threads, 1, 1, self.smem, None,
                                     ctypes.cast(self._attrs, ctypes.c_void_p) if count else None, count)
        with torch.cuda.device(device_index):  # the kernel as loaded in the launch device's context
            fn = _function(entry)
        self._args = (ctypes.byref(self._config), ctypes.c_void_p(int(fn)), self._params, ctypes.c_void_p(0))
        self._launch = _driver_launch()

    def __call__(self) -> None:
        self._config.hStream = current_stream_handle(self._device)
        err = self._launch(*self._args)
        if err:
            raise RuntimeError(f"cuLaunchKernelEx failed with CUresult {err}")


class DirectLaunch(PackedLaunch):
    """The sm_90a kernels' launch: parameters (table pointer, total tiles, then one empty
    placeholder byte for each static argument the DSL still declares: the tiled MMAs, the
    shared-memory layout), exactly the entry's parameter count, recorded from its PTX when it was
    compiled. `tables` is what the kernel reads through raw pointers (it has `.table`, a device
    tensor, and `.total_tiles`); the launch owns it. `programmatic`: see PackedLaunch."""

    def __init__(self, entry: kcache.Entry, tables, grid: tuple[int, int, int], *, programmatic: bool = False):
        # the GEMM kernels: (table, tiles, placeholders); the expand kernel: (table) alone
        params = entry.info["params"]
        if (not params or not params[0].startswith(".param .align 8 .b8") or params[1:2] and ".u32" not in params[1]
                or any(not p.startswith(".param .align 1 .b8") for p in params[2:])):
            raise RuntimeError(f"unexpected kernel parameters {params}: expected (table pointer[, u32 tiles, "
                               "empty placeholders])")
        values = [struct.pack("<Q", tables.table.data_ptr()), struct.pack("<I", tables.total_tiles)]
        super().__init__(entry, values[:len(params)] + [b"\0"] * len(params[2:]), grid, programmatic=programmatic,
                         keep=tables, device_index=tables.table.device.index or 0)
        self.tables = tables


def max_active_clusters(entry: kcache.Entry, cluster: tuple[int, int, int]) -> int:
    """Clusters of `cluster` CTAs of the entry's kernel the GPU holds at once (the driver's
    cuOccupancyMaxActiveClusters: its shared memory, registers and threads, and where the GPU's
    SMs can pair up). Needs the GPU, with a current context (torch's)."""
    import cuda.bindings.driver as cu

    fn = _function(entry)
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = cluster
    config.blockDimX, config.blockDimY, config.blockDimZ = entry.info["threads"], 1, 1
    config.sharedMemBytes = entry.info["dynamic_smem_bytes"]
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    config.attrs = [attr]
    config.numAttrs = 1
    err, count = cu.cuOccupancyMaxActiveClusters(fn, config)
    _check(err, "cuOccupancyMaxActiveClusters")
    return int(count)


class _StreamArg:
    """The stream argument of a DSL host function, as the one C pointer the DSL passes for it (to
    a slot holding the CUstream handle), so that the handle can change between calls."""

    def __init__(self, slot: ctypes.c_void_p):
        self._slot = slot

    def __c_pointers__(self):
        return [ctypes.c_void_p(ctypes.addressof(self._slot))]


class DslLaunch:
    """A compiled DSL host function (`cute.compile`'s result) called with `args` converted to C
    and packed once; per call only the stream handle is set (torch's current stream; `stream=False`
    for a host function that takes none). The host function builds the kernel's tensor-map
    parameters and launches it, clusters included: the DSL's own, tested launch path without its
    per-call argument conversion. `keep` is what the kernel reads through raw pointers; the launch
    owns it."""

    def __init__(self, fn, args: tuple, keep=None, *, stream: bool = True, device_index: int = 0):
        self._executor = fn.to()
        self._slot = ctypes.c_void_p(0) if stream else None
        self._device = device_index
        # the C pointers the DSL makes point into the argument objects themselves (a pointer
        # argument's address lives in the object), so the objects must outlive every call
        self._argv = (*args, _StreamArg(self._slot)) if stream else tuple(args)
        self._args, self._adapted = self._executor.generate_execution_args(*self._argv)
        self.keep = keep

    def __call__(self) -> None:
        if self._slot is not None:
            self._slot.value = current_stream_handle(self._device)
        self._executor.run_compiled_program(self._args)
