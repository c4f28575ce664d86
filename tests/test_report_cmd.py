import json

from typer.testing import CliRunner

from nvgg import report, timing
from nvgg.cli import app
from nvgg.runner import Result


def _doc(tmp_path):
    rs = []
    for case, t in (("3", 400.0), ("4", 230.0)):
        st = timing.reduce([t, t * 1.01], batch=15, method="leaderboard", clock="cuda events")
        rs.append(Result(case=case, strategy="graph", backend="torch", status="ok", stats=st,
                         setup_us={"compile": 50.0, "graph_capture_instantiate": 3000.0}, env={"gpu": "TestGPU"}))
    path = tmp_path / "r.json"
    report.write_json(path, report.document(rs, {"gpu": "TestGPU"}, {"1", "2", "3", "4"}))
    return path


def test_report_prints_tables_and_draws_a_png(tmp_path):
    path = _doc(tmp_path)
    png = tmp_path / "r.png"
    out = CliRunner().invoke(app, ["report", str(path), "--plot", str(png)])
    assert out.exit_code == 0, out.output
    assert "402.0" in out.stdout and "graph_capture_instantiate ms" in out.stdout and "3.000" in out.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_report_of_a_bad_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"nope": 1}))
    out = CliRunner().invoke(app, ["report", str(bad)])
    assert out.exit_code == 2 and "not an nvgg result file" in out.stderr
