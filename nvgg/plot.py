"""Pictures of a result file (matplotlib, an optional extra: pip install 'nvgg[plot]', or
matplotlib itself).

Left: each strategy's time on each case beside the case's SOL (log scale). Right: the host-side
setup phases per case and strategy as stacked bars, and, where a result carries device phases
from the instrumented persistent kernel, their median share of kernel time.
"""

from __future__ import annotations

import io
from pathlib import Path

from .errors import NvggError
from .report import label


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise NvggError("plots need matplotlib: pip install matplotlib (or nvgg's extra: pip install 'nvgg[plot]')") from None
    return plt


def image_format(path: str | Path) -> str:
    """The format a picture at `path` is drawn in: its name's extension, png where it has none;
    NvggError for one matplotlib does not write (checked before the result file is read)."""
    _pyplot()
    from matplotlib.backend_bases import FigureCanvasBase
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    known = FigureCanvasBase.get_supported_filetypes()
    if fmt not in known:
        raise NvggError(f"a plot is drawn as {', '.join(sorted(known))}: {Path(path).name} ends in .{fmt}; name the "
                        "file for one of those")
    return fmt


def draw(results, fmt: str = "png") -> bytes:
    """The picture of `results` in `fmt` (image_format), as the file's bytes."""
    plt = _pyplot()
    timed = [r for r in results if r.time_us]
    if not timed:
        raise NvggError("the result file has no timed results to plot")
    cases = list(dict.fromkeys(r.case for r in timed))
    labels = list(dict.fromkeys(label(r) for r in timed))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    width = 0.8 / (len(labels) + 1)
    for j, name in enumerate(labels):
        xs, ys = [], []
        for i, case in enumerate(cases):
            hit = [r for r in timed if r.case == case and label(r) == name]
            if hit:
                xs.append(i + j * width)
                ys.append(hit[0].time_us)
        left.bar(xs, ys, width, label=name)
    sol = {r.case: r.sol.sol_us for r in timed if r.sol}
    if sol:
        left.bar([i + len(labels) * width for i, c in enumerate(cases) if c in sol], [sol[c] for c in cases if c in sol],
                 width, label=f"SOL ({timed[0].sol.profile})", color="black")
    left.set_yscale("log")
    left.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))], [f"case {c}" for c in cases])
    left.set_ylabel("µs per call (log)")
    left.set_title(f"time against SOL — {timed[0].env.get('gpu', '')}")
    left.legend(fontsize=8)

    phases = list(dict.fromkeys(k for r in timed for k in r.setup_us))
    names = [f"{r.case} {label(r)}" for r in timed]
    bottom = [0.0] * len(timed)
    for phase in phases:
        vals = [r.setup_us.get(phase, 0.0) / 1e3 for r in timed]
        right.barh(names, vals, left=bottom, label=phase)
        bottom = [b + v for b, v in zip(bottom, vals)]
    right.set_xlabel("host-side setup, ms")
    right.set_title("setup phases (never timed)")
    right.legend(fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format=fmt, dpi=110)
    plt.close(fig)
    return out.getvalue()
