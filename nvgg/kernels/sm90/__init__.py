"""Hopper (sm_90a) kernels written in CuTe DSL.

- `nvfp4_gemm.py`: the NVFP4 GEMM kernel family (per-group and persistent grouped) and its config.
- `ptx.py`: the inline PTX it needs (decode, shared loads and stores, bulk copies, in-kernel
  tensor-map retargeting and fences, the global timer).
- `host.py`: compiling without a GPU, tensor maps, the device group table, launch closures.
- `dequant_ref.py`: a PyTorch model of the decode, for checking it on every input.
"""
