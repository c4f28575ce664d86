"""Hopper (sm_90a) kernels written in CuTe DSL.

- `config.py`: the kernels' configuration, table columns and tile arithmetic in plain Python (no
  DSL import).
- `nvfp4_gemm.py`: the NVFP4 GEMM kernels (per-group, persistent grouped, and the expand kernel).
- `ptx.py`: the inline PTX it needs (decode, shared loads and stores, bulk copies, in-kernel
  tensor-map retargeting and fences, the global timer).
- `host.py`: compiling without a GPU, tensor maps, the device group table, launch closures.
- `dequant_ref.py`: a PyTorch model of the decode, for checking it on every input.
- `phase_slots.py`: the columns the persistent kernel's instrumented build writes.
- `family.py`: the kernel family (which build a case runs, the launches) and the architecture's
  tables (compute capability, cards, ncu counters), what the cute backend and the rest of nvgg use.
"""
