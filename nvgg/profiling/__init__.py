"""Observers of a run: CUPTI kernel records (through torch.profiler), Nsight Compute, phases."""
