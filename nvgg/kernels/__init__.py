"""Our GPU kernels, one folder per architecture (`sm90/`: Hopper), and the compile cache they share
(`cache.py`). Importing this package imports no GPU toolchain; the kernel modules import CuTe DSL."""
