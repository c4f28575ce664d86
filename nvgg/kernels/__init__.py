"""Our GPU kernels, one folder per architecture (`sm90/`: Hopper, `sm100/`: Blackwell), and what
both share: the device group table's tensors (`groups.py`), the tile schedules (`schedule.py`),
host-encoded tensor maps (`tensormaps.py`), the phase slots of the instrumented builds
(`phase_slots.py`), inline PTX both use (`asm.py`), the compile cache (`cache.py`) and the launch
paths (`launch.py`). Importing this package imports no GPU toolchain; the kernel modules (and
`asm.py`) import CuTe DSL."""
