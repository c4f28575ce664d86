"""On a GPU: a CUDA fault and a GPU hang cost one row each, between healthy rows of our kernels
and a submission's; the timed calls are checked; escaping work is flagged; clocks are sampled."""

import json
import time
from pathlib import Path

import pytest
from conftest import submission_path as _sub

from nvgg import cases, rows
from nvgg.result import Row

pytestmark = pytest.mark.gpu


def _rows(path: Path) -> dict:
    return {(r["case"], r["source"] or r["strategy"]): r for r in json.loads(path.read_text())["results"]}


def test_a_fault_and_a_hang_cost_one_row_each(cli, tmp_path):
    doc = tmp_path / "c.json"
    t0 = time.monotonic()
    out = cli("compare", "--case", "test-1,test-4,test-2", "--strategy", "sequential,graph",
              "--backend", "torch", "--submission", _sub("illegal_address"), "--submission", _sub("hang"),
              "--timeout", "30", "--json", str(doc))
    wall = time.monotonic() - t0
    assert out.exit_code == 1, out.output
    found = _rows(doc)
    assert len(found) == 12
    fault, hang = found[("test-4", "illegal_address.py")], found[("test-4", "hang.py")]
    assert fault["status"] == "error" and fault["message"].startswith(
        "crashed: CUDA error: an illegal memory access was encountered"), fault["message"]
    assert hang["status"] == "error" and hang["message"].startswith("timed out after 30 s"), hang["message"]
    healthy = [r for key, r in found.items() if key not in (("test-4", "illegal_address.py"), ("test-4", "hang.py"))]
    assert all(r["status"] == "ok" and r["stats"]["runs"] >= 3 for r in healthy), [r["message"] for r in healthy]
    assert wall < 30 + 90, wall


def test_kept_results_fail_and_escaping_work_is_flagged():
    # case 1: our kernel on a side stream leaves most of a batch running after the end event
    # (on case 3 only a little past the escape check's floor: lab log)
    kept, side, ours = rows.run_many([Row(cases.get("1"), submission=_sub(n), device="cuda")
                                        for n in ("kept", "side_stream", "ours")])
    assert kept.status == "wrong" and "right when checked, wrong when timed" in kept.message, kept.message
    kinds = [f.kind for f in side.flags]
    assert side.status == "ok" and side.suspect and "escaped" in kinds, (side.stats, side.flags)
    assert side.verdict.kind == "escaped"
    assert ours.status == "ok" and not ours.suspect, (ours.stats, ours.flags)
    assert ours.stats.escaped_us is not None and ours.clocks["samples"] >= 2 and ours.clocks["sm_mhz"][0] > 0


def test_our_kernels_are_right_when_timed_on_new_inputs():
    todo = [Row(cases.get(c), s, "cute", device="cuda") for c in ("test-4", "3")
            for s in ("persistent", "graph", "sequential", "multistream")]
    for res in rows.run_many(todo):
        assert res.status == "ok" and not res.suspect, (res.case, res.strategy, res.message, res.flags)
