"""On a GPU: the evaluator's protocol run in its own worker (nvgg/leaderboard.py) on fixtures of
each kind, and the first-call warning on the default path."""

import json
import os
import subprocess
import sys
import statistics

import pytest

from conftest import ROOT, submission_path

pytestmark = pytest.mark.gpu


def _compare(*argv) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-m", "nvgg", "compare", "--strategy", "none", *argv, "--json", "-"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900, env=dict(os.environ))
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout), proc


def _row(doc: dict) -> dict:
    (row,) = [r for r in doc["results"] if r["strategy"] == "submission"]
    return row


def test_a_per_tensor_submission_pays_its_first_repetition_and_is_warned_of():
    doc, proc = _compare("--case", "4", "--submission", submission_path("per_tensor"), "--protocol", "evaluator")
    row = _row(doc)
    p = row["protocol"]
    assert proc.returncode == 0 and row["status"] == "ok" and p["status"] == "ok", proc.stderr
    assert doc["protocol"]["name"] == "evaluator-2026-01-29" and doc["protocol"]["mode"] == "benchmark"
    assert p["first_us"] > 3 * p["rest_mean_us"] and p["departs"], p
    assert "first timed repetition" in p["cause"] and "never saw" in p["cause"]
    first = [f for f in row["flags"] if f["kind"] == "first-call"]
    assert first and row["first_sight"]["first_us"] > 2 * row["first_sight"]["seen_us"], row["first_sight"]


def test_the_fresh_clone_proposal_charges_the_per_tensor_work_on_every_call():
    doc, proc = _compare("--case", "4", "--submission", submission_path("per_tensor"), "--protocol", "evaluator-pr501")
    p = _row(doc)["protocol"]
    assert p["status"] == "ok" and p["inputs"] == "fresh-clones", proc.stderr
    assert statistics.median(p["durations_us"]) > 1.5 * p["steady_us"] and "fresh clones" in p["cause"], p


def test_a_submission_without_per_tensor_work_is_predicted_near_its_steady_state():
    """The torch submission (host-bound on case 4): no first-call warning, its first repetition
    like the rest, the prediction within the cause nvgg names (host work the clear hides) or its noise."""
    doc, proc = _compare("--case", "4", "--submission", submission_path("honest"), "--protocol", "evaluator:leaderboard")
    row = _row(doc)
    p = row["protocol"]
    assert p["status"] == "ok" and not [f for f in row["flags"] if f["kind"] == "first-call"], proc.stderr
    assert p["first_us"] < 2 * p["rest_mean_us"], p
    assert not p["departs"] or "host work" in p["cause"], p
