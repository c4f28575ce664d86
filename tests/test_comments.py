"""Code comments say why, not when: no comment or docstring in the package, the benchmarks or the
examples holds a date, or names a card on the same line as a time or a percentage it measured. A
measurement lives in NOTES.md (what holds now) or docs/lab-log.md (history), with its card, date and
method; a comment points there. A date that is a version's name (an evaluator protocol's) is
allowed by name in VERSIONS, each checked against the file it names."""

import ast
import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("nvgg", "benchmarks", "examples")

DATE = re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b")
CARD = re.compile(r"\b(?:A100|H100|H200|H800|B100|B200|B300|GB200|GB300|L40S?)\b")
FIGURE = re.compile(r"\d(?:\.\d+)?\s?(?:(?:µs|us|ms|ns|s)\b|%)")
# dates that are versions' names, not measurements: each a protocol file (protocols/NAME.toml)
VERSIONS = ("evaluator-2026-01-29",)


def _text_lines(source: str) -> dict[int, str]:
    """The source's comment and docstring lines by line number: every comment, and every line of a
    string that stands alone as a statement (module, class and function docstrings, and the
    strings that document an attribute)."""
    lines = source.splitlines()
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = out.get(tok.start[0], "") + tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for n in range(node.lineno, node.end_lineno + 1):
                out[n] = lines[n - 1]
    return out


def findings(source: str, name: str) -> list[str]:
    """`name:line: text` for each comment or docstring line holding a date that is not a version's
    name, or a card beside a measured figure."""
    found = []
    for n, text in sorted(_text_lines(source).items()):
        plain = text
        for version in VERSIONS:
            plain = plain.replace(version, "")
        if DATE.search(plain) or (CARD.search(plain) and FIGURE.search(plain)):
            found.append(f"{name}:{n}: {text.strip()}")
    return found


def _scanned_files() -> list[Path]:
    return sorted(p for root in SCANNED for p in (REPO / root).rglob("*.py"))


def test_no_comment_or_docstring_carries_a_date_or_a_cards_measurement():
    files = _scanned_files()
    assert len(files) > 100  # the package, the benchmarks and the examples were found
    found = [f for p in files for f in findings(p.read_text(), str(p.relative_to(REPO)))]
    assert found == [], ("measurements belong in NOTES.md or docs/lab-log.md with their card and date; "
                         "the comment says why and points there:\n" + "\n".join(found))


def test_each_allowed_version_is_a_protocol_and_is_used():
    for version in VERSIONS:
        assert (REPO / "protocols" / f"{version}.toml").is_file(), version
        assert any(version in p.read_text() for p in _scanned_files()), version


MADE_UP = '''"""A module measured on 2026-11-26."""
import time

LIMIT = 4.0  # host maps: 4.1 µs a launch on an H100
RATE = 2  # a launch's host cost (NOTES.md, Host costs)


def f():
    """The evaluator-2026-01-29 protocol's rules; a version, not a measurement.

    Its stages took 15% longer on an H200 once.
    """
    s = "2026-11-26 in a string is data, not a comment"
    # 128 CTAs for 120 tiles: every tile placed in one round (the H100 has 132 SMs)
    return s, time  # 2026-11-27
'''


def test_the_scan_names_each_dated_or_measured_line_and_nothing_else():
    assert findings(MADE_UP, "made_up.py") == [
        'made_up.py:1: """A module measured on 2026-11-26."""',
        "made_up.py:4: # host maps: 4.1 µs a launch on an H100",
        "made_up.py:11: Its stages took 15% longer on an H200 once.",
        "made_up.py:15: # 2026-11-27",
    ]


def test_a_version_name_hides_only_itself():
    assert findings('"""evaluator-2026-01-29, measured 2026-11-28."""\n', "m.py") == [
        'm.py:1: """evaluator-2026-01-29, measured 2026-11-28."""']
    assert findings('"""evaluator-2026-01-29"""\n', "m.py") == []
