"""nvgg: a workbench for NVFP4 block-scaled grouped GEMM kernels."""

__version__ = "0.1.0"
