"""Kinds of bad input, each a row: the command line, the exit code, and a piece of the one line it
prints (commands/common.py's `command`, cli.py's `run` for the parser's own errors). Where the
shell matters (>>, |, a FIFO, a file size limit, Ctrl-C) the command runs as a process of its own;
the rest through typer's CliRunner. Every refusal is one line, before any row runs."""

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, submission_path

SHAPE = "m: [64]; n: [256]; k: [256]"
TUNABLE, HONEST = submission_path("tunable"), submission_path("honest")


def _terminal_sigint() -> None:
    """In a child about to be interrupted: SIGINT as a terminal's foreground job has it. A test
    run started in the background (`pytest &` in a script) hands its children SIGINT ignored, which
    nvgg rightly leaves ignored, so no interrupt could reach them."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _nvgg(*argv, env=None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nvgg", *argv], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, **(env or {})), timeout=600, **kwargs)


def _map(tmp_path, point: dict, target: str = "tunable.py") -> str:
    """A submission's config map holding `point` for case test-1, as nvgg tune --out writes one."""
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"format": 1, "kind": "config", "target": target, "arch": "",
                                "space": {"work": [2, 1], "split": [1, 2]}, "cases": {"test-1": point}}))
    return str(path)


def _results(tmp_path) -> str:
    """A result file with two timed rows, for `nvgg report`."""
    from nvgg import timing
    from nvgg.report.results import results_document
    from nvgg.result import Result
    rows = [Result(case=c, strategy="graph", backend="torch", status="ok", env={"gpu": "TestGPU"},
                   stats=timing.reduce([t, t * 1.01], batch=15, method="leaderboard", clock="cuda events"))
            for c, t in (("3", 400.0), ("4", 230.0))]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results_document(rows, {"gpu": "TestGPU"}, {"1", "2", "3", "4"}), default=str))
    return str(path)


def _loop(tmp_path) -> str:
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    return str(tmp_path / "loop-a")


def _fifo(tmp_path) -> str:
    os.mkfifo(tmp_path / "pipe")
    return str(tmp_path / "pipe")


def _failing_import(tmp_path) -> str:
    path = tmp_path / "broken.py"
    path.write_text("TUNE = {'work': [1, 2]}\nraise RuntimeError('broken on import')\n\ndef custom_kernel(data):\n"
                    "    return None\n")
    return str(path)


# (command line, exit code, a piece of its one line); {t} the test's folder, {name} made by a helper
TABLE = [
    # options that were accepted and ignored
    (["ab", "--case", "1", "--shape", SHAPE, "--submission", HONEST, "--submission", TUNABLE], 2,
     "give either --case or --shape, not both"),
    (["compare", "--case", "test-1", "--shape", SHAPE], 2, "give either --case or --shape, not both"),
    (["tune", "--case", "1", "--shape", SHAPE, "--submission", TUNABLE], 2, "give either --case or --shape, not both"),
    (["run", "--case", "test-1", "--submission", HONEST, "--config", "{map_for_tunable}"], 2,
     "was made for tunable.py"),
    (["run", "--case", "test-1", "--submission", TUNABLE, "--config", "{map_outside_tune}"], 2,
     "sets work=3, not one of its TUNE's values (2, 1)"),
    (["run", "--case", "test-1", "--submission", TUNABLE, "--config", "{map_unknown_knob}"], 2,
     "sets 'tiles', a knob its TUNE lacks"),
    (["ab", "--case", "test-1", "--submission", TUNABLE, "--submission", TUNABLE + "@HEAD", "--config",
      "{map_missing_knob}"], 2, "leaves out 'split', a knob of its TUNE"),
    (["run", "--case", "test-1", "--submission", TUNABLE, "--config", "{map_empty_point}"], 2,
     "case test-1's point is empty"),
    (["run", "--case", "test-1", "--gpus", "0,0"], 2, "--gpus 0,0: GPU 0 named twice"),
    # exit codes
    (["compare", "--case", "test-1", "--backend", "cute"], 3, "the cute backend needs a CUDA GPU"),
    (["compare", "--case", "test-1,test-2", "--strategy", "graph,multistream"], 3, "strategy needs a CUDA GPU"),
    # words
    (["run", "--case", "test-1", "--submission", "@HEAD"], 2, "submission @HEAD: nothing before @"),
    (["compile", "--arch", " sm_90a", "--case", "4"], 2, "--arch ' sm_90a': choose sm_100a or sm_90a"),
    # output paths
    (["sol", "--case", "1", "--json", "{loop}"], 2, "cannot be written (its symbolic links loop)"),
    (["sol", "--case", "1", "--json", "{fifo}"], 2, "is a FIFO no process reads"),
    (["sol", "--case", "1", "--json", "/dev/full"], 2, "--json /dev/full could not be written (no space left"),
    (["cases", "--json", "{t}/a-file/out.json"], 2, "cannot be written (Not a directory)"),
    (["report", "{results}", "--plot", "{t}/r.xyz"], 2, "r.xyz ends in .xyz"),
]


@pytest.mark.parametrize("argv, code, says", TABLE, ids=[" ".join(a)[:60] for a, _, _ in TABLE])
def test_a_bad_input_is_one_line_and_its_exit_code(cli, tmp_path, argv, code, says):
    made = {"t": str(tmp_path), "loop": _loop(tmp_path), "fifo": _fifo(tmp_path), "results": _results(tmp_path)}
    (tmp_path / "a-file").write_text("a file, not a folder")
    for name, point in (("map_for_tunable", {"work": 2, "split": 1}), ("map_outside_tune", {"work": 3, "split": 1}),
                        ("map_unknown_knob", {"work": 2, "split": 1, "tiles": 4}), ("map_missing_knob", {"work": 2}),
                        ("map_empty_point", {})):
        folder = tmp_path / name
        folder.mkdir()
        made[name] = _map(folder, point)
    out = cli(*[a.format(**made) for a in argv])
    lines = _lines(out.stderr)
    assert "Traceback" not in out.output and out.exit_code == code, out.output
    assert [line for line in lines if says in line] and len(lines) == 1, out.output


def test_a_submission_that_fails_to_import_exits_1_on_every_command(cli, tmp_path):
    """Its own code failed, as a row that raises: exit 1 on tune as on run, its frames and log
    named under the first line."""
    broken = _failing_import(tmp_path)
    for argv in (["tune", "--case", "test-1", "--submission", broken], ["run", "--case", "test-1", "--submission", broken]):
        out = cli(*argv)
        assert out.exit_code == 1 and "failed to import: RuntimeError: broken on import" in out.output, out.output


def test_a_point_its_file_computes_is_checked_as_the_row_sets_it(tmp_path):
    """A TUNE the file computes is not read from its source: the row that sets a point it lacks
    fails with the reason (exit 1), instead of the submission's KeyError."""
    sub = tmp_path / "tunable.py"
    sub.write_text(Path(TUNABLE).read_text().replace('TUNE = {"work": [2, 1], "split": [1, 2]}',
                                                     'TUNE = dict(work=[2, 1], split=[1, 2])'))
    proc = _nvgg("run", "--case", "test-1", "--submission", str(sub), "--config", _map(tmp_path, {"work": 2}),
                 "--json", "-", env={"PYTHONPATH": str(Path(TUNABLE).parent)})
    row = json.loads(proc.stdout)["results"][0]
    assert proc.returncode == 1 and row["status"] == "error", proc.stderr
    assert "the point work=2 leaves out 'split', a knob of its TUNE" in row["message"]


@pytest.mark.parametrize("argv, says", [
    (["run", "--case", "test-1", "--timeout", "abc"], "Invalid value for '--timeout': 'abc' is not a number"),
    (["ab", "--rounds", "2.5"], "Invalid value for '--rounds': '2.5' is not a whole number"),
    (["run", "--timer", "x"], "Invalid value for '--timer': 'x': choose leaderboard, queue-ahead, per-call or cupti"),
    (["compare", "bogus"], "'bogus': choose strategies or backends"),
    (["run", "--timeout", "0"], "Invalid value for '--timeout': 0: give a number of 1 or more"),
    (["run", "--timeout", "inf"], "Invalid value for '--timeout': inf: give a number of 1 or more"),
    (["ab", "--floor", "100"], "Invalid value for '--floor': 100: give a number from 0.1 to 50"),
])
def test_the_parser_says_it_in_nvggs_words(argv, says):
    proc = _nvgg(*argv)
    lines = _lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr
    assert "Input should be" not in proc.stderr and "Value error" not in proc.stderr


def test_help_reads_without_types_braces_or_ranges(cli):
    for command in ("run", "compare", "ab", "tune", "compile", "profile", "report", "sol", "cases"):
        text = cli(command, "--help").stdout
        assert not any(mark in text for mark in ("<", "{path}", "x>=", "<=x", "[x")), (command, text)
    assert "report [OPTIONS] FILE\n" in cli("report", "--help").stdout
    import re
    assert re.search(r"--timeout SECONDS\s+Seconds a row may take \(1 or more;", cli("ab", "--help").stdout)


def test_an_unwritable_timeline_is_refused_before_any_work(tmp_path):
    proc = _nvgg("run", "--case", "test-1", env={"NVGG_TIMELINE": str(tmp_path / "none" / "t.txt")})
    lines = _lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and "NVGG_TIMELINE=" in lines[0], proc.stderr
    assert "cannot be appended to" in lines[0]


def test_a_quick_run_has_no_rerun_column(cli):
    out = cli("run", "--case", "test-1", "--quick")
    assert out.exit_code == 0 and "time µs" in out.stdout and "± rerun" not in out.stdout, out.output


def test_the_compile_table_fits_120_columns(cli, monkeypatch):
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_100a")
    out = cli("compile", "--arch", "sm_100a", "--case", "1,test-10")
    assert out.exit_code == 0, out.output
    assert max(len(line) for line in out.stdout.splitlines()) <= 120, out.stdout
    assert "[1] nvfp4_grouped_gemm_sm100[" in out.stdout


# --- output paths, as the shell hands them over ------------------------------------------------

def test_json_to_stdout_appended_to_a_file_keeps_what_was_there(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("kept line\n")
    proc = subprocess.run(f"{sys.executable} -m nvgg sol --case 1 --json /dev/stdout >> {out}", shell=True,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    text = out.read_text()
    assert proc.returncode == 0, proc.stderr
    assert text.startswith("kept line\n{") and '"kind": "sol"' in text and "| case" in text  # the JSON, then the table
    doc = json.loads(text[len("kept line\n"):text.index("\n}\n") + 2])
    assert doc["kind"] == "sol"


def test_json_to_stdout_through_a_pipe(tmp_path):
    proc = subprocess.run(f"{sys.executable} -m nvgg run --case test-1 --quick --json /dev/stdout | cat", shell=True,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "No such file" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout[:proc.stdout.index("\n}\n") + 2])
    assert doc["results"][0]["case"] == "test-1" and "card: " in proc.stdout


def test_a_file_written_again_keeps_its_mode(cli, tmp_path):
    path = tmp_path / "cases.json"
    path.write_text("{}")
    path.chmod(0o640)
    assert cli("cases", "--json", str(path)).exit_code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and json.loads(path.read_text())["kind"] == "cases"


def test_a_fifo_read_after_the_check_gets_the_whole_document(tmp_path):
    """The FIFO is opened once a reader comes and held until the end: a reader that saw it opened
    and closed by the check would have taken that as the end."""
    fifo = _fifo(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "nvgg", "compare", "--case", "test-1,test-2", "--strategy",
                             "sequential", "--backend", "torch", "--json", fifo], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with open(fifo) as reader:  # opened while nvgg waits for it
        got = reader.read()
    proc.communicate(timeout=300)
    assert proc.returncode == 0 and [r["case"] for r in json.loads(got)["results"]] == ["test-1", "test-2"]


def test_a_write_that_fails_after_the_work_is_one_line(tmp_path):
    """The file size limit makes the write itself fail (EFBIG), as a disk that fills up does: the
    picture drawn, its file refused in one line, no half file nor temporary one left."""
    import resource
    results = _results(tmp_path)

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
    proc = _nvgg("report", results, "--plot", str(tmp_path / "plot.png"), preexec_fn=limit)
    said = [line for line in _lines(proc.stderr) if line.startswith("nvgg:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(said) == 1 and "--plot" in said[0] and "could not be written (File too large)" in said[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_tunes_out_that_cannot_be_written_after_the_sweep_is_one_line(cli, fake_gpu, fake_rows, in_process, tmp_path):
    if not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no /dev/full here")
    out = cli("tune", "--submission", TUNABLE, "--case", "3", "--rounds", "5", "--out", "/dev/full")
    lines = _lines(out.stderr)
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "--out /dev/full could not be written (no space left on the device)" in lines[-1]


def test_a_plot_goes_to_the_name_given_in_its_extensions_format(cli, tmp_path):
    results = _results(tmp_path)
    for name, magic in (("deep/folders/plot.png", b"\x89PNG"), ("plain", b"\x89PNG"), ("plot.svg", b"<?xml")):
        out = cli("report", results, "--plot", str(tmp_path / name))
        assert out.exit_code == 0 and f"wrote {tmp_path / name}" in out.stderr, out.output
        assert (tmp_path / name).read_bytes().startswith(magic)
    assert not (tmp_path / "plain.png").exists()


# --- Ctrl-C, wherever it lands ------------------------------------------------------------------

def test_ctrl_c_while_torch_imports_numpy_ends_the_command():
    """The interrupt sent at the moment torch's C extension imports numpy (where what is raised
    used to be dropped, and the command ran to its end): one line and exit 130."""
    code = ("import builtins, os, signal, sys\n"
            "real, sent = builtins.__import__, []\n"
            "def interrupted(name, *args, **kwargs):\n"
            "    if name == 'numpy' and 'torch' in sys.modules and not sent:  # once, from torch._C's start\n"
            "        sent.append(name)\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "    return real(name, *args, **kwargs)\n"
            "builtins.__import__ = interrupted\n"
            "sys.argv = ['nvgg', 'run', '--case', 'test-1']\n"
            "from nvgg.__main__ import main\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          preexec_fn=_terminal_sigint)
    assert (proc.returncode, proc.stderr.strip()) == (130, "nvgg: interrupted"), proc.stderr


@pytest.mark.parametrize("how", ["raised", "exit code"])
def test_an_interrupted_command_ends_at_once_with_a_thread_still_running(how, tmp_path):
    """A Ctrl-C that reaches main() as a KeyboardInterrupt, or a command that ended with 130, leaves
    through nvgg's own exit (the exit handlers, then os._exit), not the interpreter's: that one
    waits for every thread not marked daemon (here one sleeping 60 s), and after an interrupt that
    went through code the interpreter evaluated itself it ends the process by SIGINT (-2)."""
    ended = tmp_path / "handlers ran"
    raise_it = ("def run():\n    raise KeyboardInterrupt\n" if how == "raised"
                else "def run():\n    print('nvgg: interrupted', file=sys.stderr)\n    sys.exit(130)\n")
    code = ("import atexit, sys, threading, time\n"
            f"atexit.register(lambda: open({str(ended)!r}, 'w').close())\n"
            "threading.Thread(target=time.sleep, args=(60,)).start()  # not a daemon\n"
            "import nvgg.cli\n" + raise_it + "nvgg.cli.run = run\n"
            "sys.argv = ['nvgg', 'cases']\n"
            "from nvgg.__main__ import main\n"
            "main()\n")
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr.strip()) == (130, "nvgg: interrupted"), proc.stderr
    assert time.monotonic() - began < 30, "the exit waited for the thread"
    assert ended.exists(), "the exit handlers did not run"


@pytest.mark.parametrize("delay_s", [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.2, 1.5, 3.0])
def test_ctrl_c_at_any_moment_ends_the_command(delay_s, tmp_path):
    """A run that would never end on its own (a submission that sleeps on test-4) interrupted
    `delay_s` after nvgg's own code began (its timeline's first mark: before it, the interpreter
    itself is starting, and an interrupt there is Python's to report), while it imports, starts its
    worker or runs: exit 130 within seconds, no traceback, whatever the moment."""
    timeline = tmp_path / "timeline"
    proc = subprocess.Popen([sys.executable, "-m", "nvgg", "run", "--case", "test-4", "--submission",
                             submission_path("hang")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, NVGG_TIMELINE=str(timeline)), preexec_fn=_terminal_sigint)
    try:
        began = time.monotonic()
        while not (timeline.exists() and "nvgg started" in timeline.read_text()):
            assert proc.poll() is None and time.monotonic() - began < 120, "nvgg never began"
            time.sleep(0.01)
        time.sleep(delay_s)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert time.monotonic() - sent < 30
    assert proc.returncode == 130 and "Traceback" not in err, (proc.returncode, err)
