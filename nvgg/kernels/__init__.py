"""Our GPU kernels, one folder per architecture (`sm90/`: Hopper, `sm100/`: Blackwell), and what
both share: the device group table's tensors (`groups.py`), the tile schedules (`schedule.py`),
host-encoded tensor maps (`tensormaps.py`), the format of the instrumented builds' phase slots
(`phase_slots.py`), inline PTX both use (`asm.py`), the compile cache (`cache.py`) and the launch
paths (`launch.py`). Importing this package imports no GPU toolchain; the kernel modules (and
`asm.py`) import CuTe DSL.

A folder is an architecture when it holds a `family.py`: its kernel family (kernels/family.py),
which carries the architecture's tables and is found by kernels/registry.py. A new architecture
is one more folder; nothing outside it names the architecture."""
