"""`nvgg report` (nvgg/commands/report.py): a saved result file as tables and a plot."""

import json

from nvgg import timing
from nvgg.output import files
from nvgg.report.results import results_document
from nvgg.result import Result


def _doc(tmp_path):
    rs = []
    for case, t in (("3", 400.0), ("4", 230.0)):
        st = timing.reduce([t, t * 1.01], batch=15, method="leaderboard", clock="cuda events")
        rs.append(Result(case=case, strategy="graph", backend="torch", status="ok", stats=st,
                         setup_us={"compile": 50.0, "graph_capture_instantiate": 3000.0}, env={"gpu": "TestGPU"}))
    path = tmp_path / "r.json"
    files.write_json(path, results_document(rs, {"gpu": "TestGPU"}, {"1", "2", "3", "4"}))
    return path


def test_report_prints_tables_and_draws_a_png(cli, tmp_path):
    path = _doc(tmp_path)
    png = tmp_path / "r.png"
    out = cli("report", str(path), "--plot", str(png))
    assert out.exit_code == 0, out.output
    assert "402.0" in out.stdout and "graph_capture_instantiate ms" in out.stdout and "3.000" in out.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_report_of_a_bad_file(cli, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"nope": 1}))
    out = cli("report", str(bad))
    assert out.exit_code == 2 and "is not an nvgg file" in out.stderr


def test_report_of_a_file_of_another_kind_or_with_no_rows(cli, tmp_path):
    cases = tmp_path / "cases.json"
    assert cli("cases", "--json", str(cases)).exit_code == 0
    out = cli("report", str(cases))
    assert out.exit_code == 2 and "is an nvgg cases file, not results" in out.stderr
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"format": 1, "kind": "results", "env": {}, "results": [], "geomean_us": {}}))
    out = cli("report", str(empty))
    assert out.exit_code == 2 and "holds no rows" in out.stderr
