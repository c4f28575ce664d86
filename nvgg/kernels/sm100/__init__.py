"""Blackwell (sm_100a) kernels written in CuTe DSL.

- `nvfp4_gemm.py`: the native NVFP4 block-scaled GEMM (tcgen05, tensor memory), per-group and
  persistent grouped, and its config; also the host encoder of one group's tensor maps.
- `host.py`: compiling without a GPU, the tile choice (a model), the persistent launch's plan and
  device tables, the host-encoded map table, the launches.
"""
