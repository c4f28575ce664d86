"""What nvgg writes (nvgg/output): the printers found by name, each format one file whose printer
registers itself; a command's files kept up to date as its report grows (output.Live), at a rate
where one is set, a stream written once; `--output FORMAT=FILE` for any format that prints the
command's report, checked before any row."""

import os
import stat
import threading

import pytest
from conftest import made_result

from nvgg import output
from nvgg.errors import NvggError
from nvgg.output import live, printer


@pytest.fixture
def own_registry(monkeypatch):
    """The printers as the package has them, restored after the test (a printer it registers goes)."""
    monkeypatch.setattr(printer, "PRINTERS", dict(printer.registry()))


def test_the_package_printers_are_found_by_name_and_kind():
    assert output.names() == ["json", "junit", "markdown", "table"]
    assert output.names("results") == ["json", "junit", "markdown", "table"]
    assert output.names("ab") == ["json", "junit", "table"]
    assert output.names("tune") == ["json", "table"]
    assert output.names("sol") == ["json"]
    assert output.find("csv") is None


def test_a_format_is_one_file_a_command_writes_as_rows_finish(cli, fake_gpu, fake_rows, tmp_path, own_registry):
    """A printer defined here, in this file alone, is a format `compare --output` writes: rewritten
    after each row (the second row finds the first in it), whole at the end."""
    @output.register
    class RowsTsv(output.Printer):
        name = "rows-tsv"
        kinds = ("results",)
        about = "a row a line, tab-separated"

        def render(self, report) -> str:
            return "".join(f"{r.case}\t{r.strategy}\t{r.time_us:g}\n" for r in report.results)

    path = tmp_path / "rows.tsv"
    seen_then = []

    def answer(row):
        seen_then.append(path.read_text() if path.exists() else None)
        return made_result(row.case.id, row.strategy, "torch", {"sequential": 100.0, "graph": 50.0}[row.strategy])

    fake_rows.answer = answer
    out = cli("compare", "--case", "3", "--strategy", "sequential,graph", "--backend", "torch",
              "--output", f"rows-tsv={path}")
    assert out.exit_code == 0, out.output
    assert seen_then == [None, "3\tsequential\t100\n"]
    assert path.read_text() == "3\tsequential\t100\n3\tgraph\t50\n"
    assert f"wrote {path}" in out.stderr and "| case" in out.stdout  # the table still on stdout
    # in place of the table on stdout
    out = cli("compare", "--case", "3", "--strategy", "graph", "--backend", "torch", "--output", "rows-tsv=-")
    assert out.exit_code == 0 and out.stdout == "3\tgraph\t50\n", out.output
    # a format that does not print an A/B is refused before any row
    fake_rows.seen.clear()
    out = cli("ab", "--case", "3", "--submission", "a.py", "--submission", "b.py", "--output", f"rows-tsv={path}")
    assert out.exit_code == 2 and "the rows-tsv format does not print this command's ab: choose from json, junit, " \
                                  "table" in out.stderr and not fake_rows.seen, out.output


@pytest.mark.parametrize("spec, says", [
    ("junit", "--output 'junit': give FORMAT=FILE, like junit=nvgg.xml (formats here: json, junit, markdown, table)"),
    ("=x.xml", "give FORMAT=FILE"),
    ("junit=", "give FORMAT=FILE"),
    ("csv=x.csv", "--output csv=x.csv: nvgg has no format 'csv': choose from json, junit, markdown, table"),
])
def test_a_bad_output_is_refused_before_any_row(cli, fake_gpu, fake_rows, spec, says):
    out = cli("compare", "--case", "3", "--strategy", "graph", "--output", spec)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1 and says in lines[0] and not fake_rows.seen, out.output


class _Rows:
    """A report of rows for Live: its text the rows so far."""

    unit = "row"

    def __init__(self):
        self.rows = []

    def count(self) -> int:
        return len(self.rows)


class _Lines(output.Printer):
    name, kinds = "lines", ("results",)

    def render(self, report) -> str:
        return "".join(f"{r}\n" for r in report.rows)


def test_live_rewrites_at_its_rate_and_flushes_what_it_held_back(tmp_path, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: now[0])
    report, path = _Rows(), tmp_path / "rows.txt"
    files = output.Live(report, [output.Target("--x", str(path), _Lines())], every_s=2.0)
    report.rows.append("a")
    files.update()  # the first write at once
    assert path.read_text() == "a\n"
    report.rows.append("b")
    now[0] += 1.0
    files.update()  # 1 s after the last: held back
    assert path.read_text() == "a\n"
    now[0] += 1.5
    report.rows.append("c")
    files.update()  # 2.5 s after: written, whole
    assert path.read_text() == "a\nb\nc\n"
    report.rows.append("d")
    files.update()
    files.flush()  # what the last update held back
    assert path.read_text() == "a\nb\nc\nd\n"
    report.rows.append("e")
    files.update(force=True)
    assert path.read_text() == "a\nb\nc\nd\ne\n" and files.written() == [str(path)]
    assert files.finish() is None


def test_live_writes_a_fifo_once_and_hands_stdout_back(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)
    reader.start()
    report = _Rows()
    files = output.Live(report, [output.Target("--x", str(fifo), _Lines()), output.Target("--y", "-", _Lines())])
    for row in ("a", "b", "c"):
        report.rows.append(row)
        files.update()  # a FIFO takes one write: none yet
    assert files.written() == []
    assert files.finish() == "a\nb\nc\n"
    reader.join(10)
    assert got == ["a\nb\nc\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode) and files.written() == [str(fifo)]


def test_a_write_that_fails_says_what_the_file_misses():
    if not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no /dev/full here")
    report = _Rows()
    report.rows += ["a", "b"]
    files = output.Live(report, [output.Target("--x", "/dev/full", _Lines())])
    files.update()  # a device: written once, at the end
    with pytest.raises(NvggError, match=r"^writing /dev/full failed after 2 row\(s\) \(no space left on the device\): "
                                        r"the rows since its last write are not in it$"):
        files.finish()
    once = output.Live(output.Document({"kind": "sol", "format": 1}), [output.Target("--json", "/dev/full",
                                                                                       output.find("json"))])
    with pytest.raises(NvggError, match=r"^--json /dev/full could not be written \(no space left on the device\)"):
        once.finish()


def test_two_printers_of_one_name_are_refused(own_registry):
    with pytest.raises(ValueError, match="two printers are named 'json'"):
        @output.register
        class Other(output.Printer):
            name, kinds = "json", ("results",)
    with pytest.raises(ValueError, match="needs a name"):
        output.register(type("Nameless", (output.Printer,), {}))
