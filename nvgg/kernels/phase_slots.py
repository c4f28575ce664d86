"""Phase slots: what each column of a phase buffer holds, for nvgg's instrumented kernels and for
a user's probe.

An instrumented build (never the timed one) writes `%globaltimer` readings (ns) into an int64
buffer [ctas, layout.slots], one row a CTA: first the named timestamp slots of its layout, then
SWITCHES (how many groups the CTA's producer prepared maps for: a count, not a time), then the time
each of those groups' maps were ready. A slot a CTA never reached holds 0. `layout.phases` names the
spans the report shows, as (name, from slot, to slot), in kernel order; a tuple of slots means
"the latest of these". nvgg/profiling/phases.py turns a buffer into the report and the trace.
Each architecture's layout lives in its folder (sm90/phase_slots.py, sm100/phase_slots.py), where
its kernel reads the columns, and reaches the rest of nvgg through its family's `phase_layout`.

A user's kernel writes the same kind of buffer through nvgg.probe: its columns are the probe's
marks, its spans run between consecutive marks, and one more row (the overflow row) ends each
buffer (`SlotLayout.for_probe`).
"""

from __future__ import annotations


class SlotLayout:
    """One kernel family's slots: `names` become attributes holding their column (layout.START),
    followed by SWITCHES and FIRST_SWITCH."""

    probe = False  # a user's probe (see for_probe)

    def __init__(self, kernel: str, names: tuple[str, ...], phases: tuple, max_switches: int):
        self.kernel = kernel
        self.names = names
        for column, name in enumerate(names):
            setattr(self, name, column)
        self.SWITCHES = len(names)
        self.FIRST_SWITCH = len(names) + 1
        self.max_switches = max_switches
        self.slots = self.FIRST_SWITCH + max_switches
        self.phases = tuple((label, self._column(a), self._column(b)) for label, a, b in phases)
        self.first_mma = self.names.index("FIRST_MMA") if "FIRST_MMA" in names else None
        missing = {"START", "FIRST_MMA", "EXIT"} - set(names)
        if missing:
            raise ValueError(f"a slot layout needs {sorted(missing)}")

    @classmethod
    def for_probe(cls, kernel: str, marks) -> "SlotLayout":
        """A user's probe (nvgg.probe.Probe): one column a mark, a span between each two
        consecutive marks ("a → b"), no switch slots, and an overflow row after the CTAs' rows.
        Its CTAs' start and end are their earliest and latest readings; `first_mma` is the
        column of a mark named so, if any."""
        layout = cls.__new__(cls)
        layout.kernel, layout.names, layout.probe = kernel, tuple(marks), True
        layout.SWITCHES = layout.FIRST_SWITCH = None
        layout.max_switches, layout.slots = 0, len(layout.names)
        layout.phases = tuple((f"{a} → {b}", i, i + 1) for i, (a, b) in enumerate(zip(marks, marks[1:])))
        layout.first_mma = layout.names.index("first_mma") if "first_mma" in layout.names else None
        return layout

    def _column(self, slot):
        return tuple(getattr(self, s) for s in slot) if isinstance(slot, tuple) else getattr(self, slot)

    def renamed(self, **labels: str) -> "SlotLayout":
        """The same slots with some phases shown under other names (old name=new name, spaces as _)."""
        names = {k.replace("_", " "): v for k, v in labels.items()}
        phases = tuple((names.get(label, label), self.names[a] if isinstance(a, int) else tuple(self.names[x] for x in a),
                        self.names[b]) for label, a, b in self.phases)
        return SlotLayout(self.kernel, self.names, phases, self.max_switches)
