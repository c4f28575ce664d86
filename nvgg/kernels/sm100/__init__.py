"""Blackwell (sm_100a) kernels written in CuTe DSL.

- `config.py`: the kernel's configuration and resource arithmetic in plain Python (no DSL import).
- `nvfp4_gemm.py`: the native NVFP4 block-scaled GEMM (tcgen05, tensor memory), per-group and
  persistent grouped; also the DSL's host encoder of one group's tensor maps.
- `host.py`: compiling without a GPU (recording each build's map templates), the tile choice (a
  model), the persistent launch's plan and device tables, the launches (driver or DSL).
- `params.py`: the driver launch's tensor maps and kernel parameters, packed without the DSL.
- `phase_slots.py`: the columns the persistent kernel's instrumented build writes.
- `family.py`: the kernel family (which build a case runs, the launches) and the architecture's
  tables (compute capability, cards, ncu counters, compile's columns), what the cute backend and
  the rest of nvgg use.
"""
