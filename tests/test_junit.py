"""JUnit XML (nvgg/output/junit_printer.py; `--junit FILE` on compare and ab): a test suite a case,
a test case a row or a version; failed by a regression, a wrong or suspect result, an error where
the row did not finish, skipped where it cannot run here. Every file is checked against the
format's structure (tests/fixtures/junit.xsd), and like the other result files it is checked
before any row and rewritten as rows finish."""

import math
import random
import shutil
import xml.etree.ElementTree as ET

import pytest
import xmlschema
from conftest import FIXTURES, made_result, submission_path

from nvgg import output
from nvgg.report.results import Results
from nvgg.result import Flag

SCHEMA = xmlschema.XMLSchema(str(FIXTURES / "junit.xsd"))


def _cases(path) -> dict:
    """A JUnit file, valid against the schema (and its counts against its test cases), as
    {(suite, test): (verdict, type, message)}; verdict passed, failure, error or skipped."""
    SCHEMA.validate(str(path))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    found, totals = {}, {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root:
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for case in suite:
            said = [e for e in case if e.tag in ("failure", "error", "skipped")]
            verdict = said[0].tag if said else "passed"
            counts["tests"] += 1
            counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}.get(verdict, "tests")] += \
                verdict != "passed"
            found[(suite.get("name"), case.get("name"))] = (verdict, said[0].get("type") if said else None,
                                                            said[0].get("message") if said else None)
            assert case.get("classname") == f"{root.get('name').replace(' ', '.')}.{suite.get('name')}"
        assert {k: int(suite.get(k)) for k in counts} == counts
        totals = {k: totals[k] + counts[k] for k in totals}
    assert {k: int(root.get(k)) for k in totals} == totals
    return found


def _answers(times: dict, special: dict):
    """A fake row's result: `special[(case, strategy)](row)` where given, else ok at `times[strategy]`."""
    def answer(row):
        key = (row.case.id, row.strategy)
        if key in special:
            return special[key](row)
        r = made_result(row.case.id, row.strategy, "torch", times[row.strategy])
        r.wall_s = 1.25
        return r
    return answer


ALL = ["--case", "3,4", "--strategy", "sequential,graph,persistent,multistream", "--backend", "torch"]


def test_compare_writes_each_case_and_row_a_test_case_failed_with_its_reason(cli, fake_gpu, fake_rows, tmp_path):
    times = {"sequential": 100.0, "graph": 50.0, "persistent": 40.0, "multistream": 70.0}
    unsupported = {("3", "multistream"): lambda row: made_result("3", "multistream", "torch", None, status="unsupported",
                                                                message="the multistream strategy needs streams")}
    fake_rows.answer = _answers(times, unsupported)
    base = tmp_path / "base.json"
    assert cli("compare", *ALL, "--json", str(base)).exit_code == 0
    times["graph"] = 60.0  # +20%
    fake_rows.answer = _answers(times, {
        **unsupported,
        ("3", "persistent"): lambda row: made_result("3", "persistent", "torch", 40.0,
                                                     flags=[Flag("below-sol", "0.1 µs is below the speed of light")]),
        ("4", "sequential"): lambda row: made_result("4", "sequential", "torch", None, status="wrong",
                                                     message="input 2: 40 of 512 elements off"),
        ("4", "persistent"): lambda row: made_result("4", "persistent", "torch", None, status="unsupported",
                                                     message="no kernel takes this shape"),
        ("4", "multistream"): lambda row: made_result("4", "multistream", "torch", None, status="error",
                                                      message="crashed: the process died\x1b[0m\x00\nits last words"),
    })
    xml = tmp_path / "gate.xml"
    out = cli("compare", *ALL, "--baseline", str(base), "--junit", str(xml))
    assert out.exit_code == 1, out.output
    assert "regression: 3 graph/torch: slower +20.0%" in out.stderr and f"wrote {xml}" in out.stderr
    got = _cases(xml)
    assert got == {
        ("case 3", "sequential/torch"): ("passed", None, None),
        ("case 3", "graph/torch"): ("failure", "regression",
                                    "vs baseline: slower +20.0% (noise ±4.0%): beyond the allowed 5%"),
        ("case 3", "persistent/torch"): ("failure", "suspect", "SUSPECT: 0.1 µs is below the speed of light"),
        # not run in the baseline either: nothing to judge
        ("case 3", "multistream/torch"): ("skipped", None, "n/a: the multistream strategy needs streams"),
        ("case 4", "sequential/torch"): ("failure", "wrong", "WRONG: input 2: 40 of 512 elements off; vs baseline: "
                                                             "failed: was ok, now wrong (input 2: 40 of 512 elements off)"),
        ("case 4", "graph/torch"): ("failure", "regression",
                                    "vs baseline: slower +20.0% (noise ±4.0%): beyond the allowed 5%"),
        # the baseline ran it: a row lost is a regression, not a skip
        ("case 4", "persistent/torch"): ("failure", "regression", "vs baseline: failed: was ok, now unsupported (no "
                                                                  "kernel takes this shape)"),
        # a message's first line, what XML cannot hold replaced
        ("case 4", "multistream/torch"): ("error", "error", "ERROR: crashed: the process died\ufffd[0m\ufffd; vs "
                                                           "baseline: failed: was ok, now error (crashed: the process "
                                                           "died\ufffd[0m\ufffd"),
    }
    text = xml.read_text(encoding="utf-8")
    assert "\x1b" not in text and "its last words" in text  # the whole message in the error's text
    root = ET.parse(xml).getroot()
    assert (root.get("name"), root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "nvgg compare", "8", "5", "1", "1")
    passed = root.find("testsuite/testcase[@name='sequential/torch']")
    assert passed.get("time") == "1.250" and passed.find("system-out").text.split("\n") == [
        "time: 100.0 µs a call (± 0.000 µs on a rerun)", "check: ok", "vs baseline: same +0.0% (noise ±4.0%)"]


def test_the_junit_file_is_checked_before_any_row_and_can_go_to_stdout(cli, fake_gpu, fake_rows, tmp_path):
    (tmp_path / "a-file").write_text("")
    for args, says in ((["--json", str(tmp_path / "x"), "--junit", str(tmp_path / "x")],
                        "--json and --junit name the same file"),
                       (["--junit", str(tmp_path / "a-file" / "gate.xml")], "--junit"),
                       (["--junit", "-", "--json", "-"], "--json - and --junit - would both print on stdout"),
                       (["--junit", str(tmp_path)], f"--junit {tmp_path} is a folder")):
        out = cli("compare", "--case", "3", "--strategy", "graph", "--backend", "torch", *args)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.exit_code == 2 and len(lines) == 1 and says in lines[0], (args, out.output)
    assert not fake_rows.seen and not (tmp_path / "x").exists()
    out = cli("compare", "--case", "3", "--strategy", "graph", "--backend", "torch", "--junit", "-")
    assert out.exit_code == 0 and out.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites ')
    assert "| case" not in out.stdout  # in place of the table
    (tmp_path / "stdout.xml").write_text(out.stdout, encoding="utf-8")
    assert _cases(tmp_path / "stdout.xml") == {("case 3", "graph/torch"): ("passed", None, None)}


def test_an_interrupted_compare_leaves_a_junit_file_of_the_rows_done(cli, fake_gpu, fake_rows, tmp_path):
    xml = tmp_path / "gate.xml"
    answer = _answers({"sequential": 100.0, "graph": 50.0}, {})

    def stop_at_the_third(row):
        if len(fake_rows.seen) == 3:
            assert set(_cases(xml)) == {("case 3", "sequential/torch"), ("case 3", "graph/torch")}
            raise KeyboardInterrupt
        return answer(row)
    fake_rows.answer = stop_at_the_third
    out = cli("compare", "--case", "3,4", "--strategy", "sequential,graph", "--backend", "torch", "--junit", str(xml))
    assert out.exit_code == 130 and "--junit files" in out.stderr
    assert set(_cases(xml)) == {("case 3", "sequential/torch"), ("case 3", "graph/torch")}


def _versions(tmp_path, names=("v1", "v2")) -> list[str]:
    paths = []
    for v in names:
        (tmp_path / v).mkdir()
        shutil.copy(submission_path("honest"), tmp_path / v / "submission.py")
        paths.append(str(tmp_path / v / "submission.py"))
    return paths


def test_ab_writes_each_case_and_version_a_test_case_a_slower_one_failed(cli, fake_gpu, fake_rows, tmp_path):
    """v2 is 3% slower than the base on case 3 and the same on case 4: a regression on case 3;
    the file holds case 3 once it is done, before case 4 begins."""
    rng = random.Random(5)
    xml = tmp_path / "ab.xml"
    at_case_4 = []

    def answer(row):
        if row.case.id == "4" and not at_case_4:
            at_case_4.append(_cases(xml))
        drift = 1 + 0.05 * math.sin(len(fake_rows.seen) / 3)
        slower = 1.03 if "v2" in row.source and row.case.id == "3" else 1.0
        return made_result(row.case.id, "submission", "submission", 100.0 * slower * drift * (1 + rng.gauss(0, 0.002)),
                           source=row.source, revision=row.revision)

    fake_rows.answer = answer
    v1, v2 = _versions(tmp_path)
    out = cli("ab", "--case", "3,4", "--submission", v1, "--submission", v2, "--junit", str(xml))
    assert out.exit_code == 0, out.output  # ab measures a change; the file says which way it went
    assert set(at_case_4[0]) == {("case 3", "v1/submission.py"), ("case 3", "v2/submission.py")}
    got = _cases(xml)
    assert got[("case 3", "v1/submission.py")] == ("passed", None, None)
    verdict, kind, message = got[("case 3", "v2/submission.py")]
    assert (verdict, kind) == ("failure", "regression") and message.startswith("slower: 1.03")
    assert message.endswith("the base's time, beyond ±2.0%")
    assert got[("case 4", "v1/submission.py")] == got[("case 4", "v2/submission.py")] == ("passed", None, None)
    root = ET.parse(xml).getroot()
    assert root.get("name") == "nvgg ab"
    same = root.find("testsuite[@name='case 4']/testcase[@name='v2/submission.py']/system-out").text
    assert ": same; floor ±2.0%; the case stopped: decided after" in same


def test_ab_fails_the_version_whose_result_ended_the_case(cli, fake_gpu, fake_rows, tmp_path):
    def answer(row):
        if "v2" in row.source and len(fake_rows.seen) > 4:
            return made_result(row.case.id, "submission", "submission", None, status="wrong", source=row.source,
                               message="input 2: 40 of 512 elements off")
        return made_result(row.case.id, "submission", "submission", 100.0, source=row.source)

    fake_rows.answer = answer
    v1, v2 = _versions(tmp_path)
    xml = tmp_path / "ab.xml"
    out = cli("ab", "--case", "3", "--submission", v1, "--submission", v2, "--junit", str(xml), "--json", "-")
    assert out.exit_code == 1 and "failed: case 3: v2/submission.py: WRONG" in out.stderr
    assert out.stdout.lstrip().startswith("{")  # --json - on stdout, the JUnit file beside it
    assert _cases(xml) == {("case 3", "v1/submission.py"): ("passed", None, None),
                           ("case 3", "v2/submission.py"): ("failure", "wrong",
                                                            "WRONG: input 2: 40 of 512 elements off")}


def test_the_file_of_two_rows_byte_for_byte():
    """The layout a reader sees: suites in the rows' order, the counts, a row's lines in its
    system-out; quotes and ampersands escaped."""
    ok = made_result("1", "graph", "torch", 10.0)
    ok.wall_s = 1.5
    bad = made_result("1", "sequential", "torch", None, status="wrong", message='C[0] & "C[1]" differ')
    bad.wall_s = 0.25
    report = Results("compare", None, set())
    report.results += [ok, bad]
    assert output.find("junit").render(report) == """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nvgg compare" tests="2" failures="1" errors="0" skipped="0" time="1.750">
  <testsuite name="case 1" id="0" tests="2" failures="1" errors="0" skipped="0" time="1.750">
    <testcase name="graph/torch" classname="nvgg.compare.case 1" time="1.500">
      <system-out>time: 10.00 µs a call (± 0.000 µs on a rerun)
check: ok</system-out>
    </testcase>
    <testcase name="sequential/torch" classname="nvgg.compare.case 1" time="0.250">
      <failure message="WRONG: C[0] &amp; &quot;C[1]&quot; differ" type="wrong">check: WRONG: C[0] &amp; "C[1]" differ</failure>
    </testcase>
  </testsuite>
</testsuites>
"""


@pytest.mark.parametrize("bad", ["\x00", "\x1b", "\x0b", "\ufffe", "\ud800"])
def test_what_xml_cannot_hold_is_replaced(bad):
    from nvgg.output.junit_printer import _text
    assert _text(f"a{bad}b") == "a\ufffdb" and _text("tab\there\nµ ±") == "tab\there\nµ ±"
