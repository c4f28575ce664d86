"""The sm_90a persistent kernel's phase slots (its instrumented build's buffer; the format:
kernels/phase_slots.py)."""

from __future__ import annotations

from ..phase_slots import SlotLayout

# sm_90a persistent kernel (kernels/sm90/nvfp4_gemm.py), the same slots in every build: the
# producer's tensor maps (DESC_READY: replaced, or acquired and prefetched) are ready beside phase
# 0 (PHASE0_DONE: this CTA's share written, by its MMA warps); A_READY is when the producer saw its
# first tile's fp16 A rows written (their readiness counters, or the grid barrier of the "grid"
# build); "to first MMA" runs from the later of A_READY and this CTA's own phase 0. START is read
# as the CTA begins, before its wait for the kernel before it, and stored after: in stream order
# (how the instrumented build runs unless asked) the wait returns at once; launched
# programmatically, the spans from START hold that wait too, and START still says how early the
# CTA began (profiling.phases.behind). The first tile's start, as two chains of loads meet at its
# first MMA: B_ISSUED is when the producer issues the CTA's first copy of B, B_LANDED when the MMA
# warps see that stage landed (they look once their own first stage of A is done, in the chunks
# build: the later of the two), A_FED (chunks build) when they see the first fp16 A slot the
# producer copied (the helpers' first stage for this tile) landed: case 4's main loops ended a
# fixed time after it (lab log).
NAMES = ("START", "DESC_READY", "FIRST_MMA", "MAINLOOP_DONE", "EPILOGUE_DONE", "EXIT", "PHASE0_DONE", "A_READY",
         "B_ISSUED", "B_LANDED", "A_FED")


def _layout(phase0: str, a_ready: tuple[str, str], first_mma_from, fed: bool = False) -> SlotLayout:
    """The layout over NAMES, phase 0's span named `phase0`, A_READY's span `a_ready` (its name
    and the slot it runs from), "to first MMA" from `first_mma_from`; `fed`: the span to the first
    copied A stage too."""
    copied = (("to first copied A stage", "START", "A_FED"),) if fed else ()
    return SlotLayout(
        "nvfp4_grouped_gemm_sm90", NAMES,
        (("tensor maps", "START", "DESC_READY"),
         ("to first B copy", "START", "B_ISSUED"),
         (phase0, "START", "PHASE0_DONE"),
         (a_ready[0], a_ready[1], "A_READY"),
         ("to first B stage seen", "START", "B_LANDED"),
         ("to first MMA", first_mma_from, "FIRST_MMA"),
         *copied,
         ("mainloops", "FIRST_MMA", "MAINLOOP_DONE"),
         ("last epilogue", "MAINLOOP_DONE", "EPILOGUE_DONE"),
         ("exit", "EPILOGUE_DONE", "EXIT")),
        max_switches=56)


SM90 = _layout("phase 0", ("wait for A rows", "DESC_READY"), ("A_READY", "PHASE0_DONE"))
# the "chunks" build (config.READINESS): the same slots, but its helper warps stream A beside the
# main loops, and PHASE0_DONE is when this CTA's helpers finished (they meet at a barrier of their
# own); its MMA warps decode only their first tile's first stage of A into its slots, and A_READY
# is when they have (timed from the CTA's start: it may come before the producer's maps), so "to
# first MMA" runs from A_READY alone
SM90_CHUNKS = _layout("A streamed (beside the MMAs)", ("first stage of A, in the CTA", "START"), "A_READY", fed=True)
