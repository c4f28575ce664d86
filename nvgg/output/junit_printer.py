"""The JUnit XML printer: what a command judged (its report's `outcomes()`) as a JUnit test report,
the file CI systems show as test results (GitHub through a publishing action, GitLab's
`artifacts:reports:junit`, Jenkins' `junit` step). A test suite a case, a test case a row of it
(`compare`, `run`) or a version (`ab`):

- `failure` (its `type` the reason's class: regression, wrong, suspect, protocol): the row failed
  nvgg's gate, the reason its `message` and the row's own lines its text;
- `error`: the row could not finish (a crash, a timeout, an exception);
- `skipped`: the row cannot run here (unsupported);
- `system-out`: what a passing row says (its time, check, class against the baseline or base).

The elements and attributes are the ones the format's readers document and agree on (Jenkins'
JUnit plugin, which reads the Ant JUnit task's reports; GitLab's unit test reports):
`testsuites` (name, tests, failures, errors, skipped, time) > `testsuite` (the same, and id) >
`testcase` (name, classname, time) > `failure` / `error` (message, type, text) / `skipped`
(message) / `system-out`. Times are seconds. No timestamp or host name: the file of a run is
the same file whatever machine wrote it down.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..report import Outcome
from .printer import Printer, register

# what XML 1.0 allows in a document: a crash's message can carry a terminal's escapes or a NUL,
# which a reader would refuse the whole file for
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@register
class JunitPrinter(Printer):
    name = "junit"
    kinds = ("results", "ab")
    about = "JUnit XML, the test results CI systems show"

    def render(self, report) -> str:
        outcomes = report.outcomes()
        root = ET.Element("testsuites", name=_text(report.title), **_counts(outcomes))
        groups: dict[str, list[Outcome]] = {}
        for o in outcomes:
            groups.setdefault(o.group, []).append(o)
        prefix = report.title.replace(" ", ".")
        for i, (group, items) in enumerate(groups.items()):
            suite = ET.SubElement(root, "testsuite", name=_text(group), id=str(i), **_counts(items))
            for o in items:
                case = ET.SubElement(suite, "testcase", name=_text(o.name), classname=_text(f"{prefix}.{group}"),
                                     time=_seconds(o.seconds))
                if o.verdict in ("failed", "error"):
                    said = ET.SubElement(case, "failure" if o.verdict == "failed" else "error",
                                         message=_text(o.message), type=_text(o.kind))
                    said.text = _text(o.detail)
                    continue
                if o.verdict == "skipped":
                    ET.SubElement(case, "skipped", message=_text(o.message))
                if o.detail:
                    ET.SubElement(case, "system-out").text = _text(o.detail)
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _counts(outcomes: list[Outcome]) -> dict[str, str]:
    """A suite's attributes: its tests, how many failed, ended in an error or were skipped, and
    their time."""
    def n(verdict: str) -> str:
        return str(sum(o.verdict == verdict for o in outcomes))
    return {"tests": str(len(outcomes)), "failures": n("failed"), "errors": n("error"), "skipped": n("skipped"),
            "time": _seconds(sum(o.seconds for o in outcomes))}


def _seconds(s: float) -> str:
    return f"{s:.3f}"


def _text(text: str) -> str:
    """`text` with what XML cannot hold replaced (U+FFFD)."""
    return _NOT_XML.sub("\ufffd", text or "")
