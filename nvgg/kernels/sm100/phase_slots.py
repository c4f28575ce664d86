"""The sm_100a persistent kernel's phase slots (its instrumented build's buffer; the format:
kernels/phase_slots.py)."""

from __future__ import annotations

from ..phase_slots import SlotLayout

# sm_100a persistent kernel (kernels/sm100/nvfp4_gemm.py), which warp writes each slot:
#   START, BARRIERS_READY (pipeline barriers initialised and published), TMEM_READY (tensor memory
#   allocated), EPILOGUE_DONE (last tile's stores issued), EXIT: epilogue warp 0;
#   MAPS_READY (the first tile's maps prefetched and fenced, or replaced), FIRST_TMA_ISSUED: TMA warp;
#   FIRST_TMA_LANDED (the first stage's full barrier passed), FIRST_MMA (first MMA issued),
#   MAINLOOP_DONE: the MMA warp of the CTA that issues the MMAs (a pair's leader).
SM100 = SlotLayout(
    "nvfp4_grouped_gemm_sm100",
    ("START", "BARRIERS_READY", "TMEM_READY", "MAPS_READY", "FIRST_TMA_ISSUED", "FIRST_TMA_LANDED", "FIRST_MMA",
     "MAINLOOP_DONE", "EPILOGUE_DONE", "EXIT"),
    (("barrier init", "START", "BARRIERS_READY"),
     ("tensor-memory alloc", "BARRIERS_READY", "TMEM_READY"),
     ("tensor maps", "BARRIERS_READY", "MAPS_READY"),
     ("first TMA landing", "FIRST_TMA_ISSUED", "FIRST_TMA_LANDED"),
     ("to first MMA", "START", "FIRST_MMA"),
     ("main loops", "FIRST_MMA", "MAINLOOP_DONE"),
     ("last epilogue", "MAINLOOP_DONE", "EPILOGUE_DONE"),
     ("exit", "EPILOGUE_DONE", "EXIT")),
    max_switches=32)


def sm100_for(tensormaps: str) -> SlotLayout:
    """SM100's slots with the maps phase named for what the mode does there."""
    return SM100.renamed(tensor_maps="map prefetch" if tensormaps == "host" else "map replace")
