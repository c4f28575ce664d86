"""The app as a user meets it (nvgg/cli.py, commands/): JSON documents, one-line errors and exit
codes for every kind of bad input, the parser's own errors."""

import json

import pytest


def test_cases_lists_all_fourteen(cli):
    out = cli("cases", "--json", "-")
    assert out.exit_code == 0
    doc = json.loads(out.stdout)
    assert (doc["format"], doc["kind"]) == (1, "cases")
    assert len(doc["cases"]) == 14 and doc["cases"][2]["id"] == "3" and doc["cases"][2]["bytes"] == 18_481_152


def test_sol_json_has_the_contract_keys(cli):
    out = cli("sol", "--case", "1,2,3,4", "--profile", "h200", "--json", "-")
    assert out.exit_code == 0
    rows = json.loads(out.stdout)["sol"]
    assert {"case", "profile", "bytes", "flops", "memory_us", "compute_us", "sol_us", "bound"} <= set(rows[0])
    b200 = {r["case"]: r["sol_us"] for r in rows if r["profile"] == "b200"}
    assert round(b200["1"], 3) == 18.833 and round(b200["4"], 3) == 1.525
    assert {r["profile"] for r in rows} == {"h200", "b200"}


@pytest.mark.parametrize("argv, words", [
    (["run", "--case", "9"], "unknown case '9'"),
    (["run", "--shape", "m: [64]; n: [256]"], "lacks k"),
    (["sol", "--case", "1", "--profile", "a100"], "unknown profile 'a100'"),
    (["run", "--case", "3", "--strategy", "fast"], "unknown strategy 'fast'"),
    (["run", "--case", "3", "--submission", "/nope/submission.py"], "does not exist"),
    (["run", "--case", "3", "--cases", "/nope.yaml"], "does not exist"),
    (["compare", "--strategy", "bogus"], "unknown strategy 'bogus'"),
    (["compare", "--max-regression", "5"], "--max-regression is the slowdown --baseline allows"),
    (["compare", "--submission", "tests"], "submission tests is a folder"),
    (["compare", "--baseline", "README.md"], "baseline README.md is not JSON"),
    (["compare", "--markdown", "/"], "--markdown / is a folder"),
    (["compare", "--json", "/proc/nvgg/out.json"], "--json /proc/nvgg/out.json cannot be written"),
    (["run", "--case", "test-1", "--json", "/proc/out.json"], "--json /proc/out.json cannot be written"),
    (["compare", "--submission", "tests/fixtures/submissions/honest.py", "--submission", "README.md/honest.py"],
     "submission README.md/honest.py does not exist"),
    (["compare", "--submission", "tests/fixtures/submissions/honest.py", "--submission", "examples/honest.py"],
     "submission examples/honest.py does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(cli, argv, words):
    out = cli(*argv)
    assert out.exit_code == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in out.output, out.output


@pytest.mark.parametrize("argv, words", [
    (["run", "--shape", ""], "--shape is empty"),
    (["sol", "--profile", " "], "--profile is empty"),
    (["compare", "--json", ""], "--json is empty"),
    (["report", ""], "the path argument is empty"),
    (["compare", "--submission", ""], "--submission is empty"),
    (["run", "--case", "test-1,test-1"], "case test-1 is listed twice"),
    (["compare", "--case", "1,,2"], "has an empty item"),
    (["compare", "--strategy", "graph,graph"], "strategy graph is listed twice"),
    (["compare", "--tensormaps", "host,host", "--strategy", "persistent"], "tensor-map mode host is listed twice"),
    (["run", "--shape", "m: [64]; m: [64]; n: [256]; k: [256]"], "shape spec gives m twice"),
    (["run", "--case", "test-1", "--submission", "README.md"], "is not a Python file (.py)"),
    (["run", "--case", "test-1", "--profile", "nope"], "unknown profile 'nope'"),
])
def test_kinds_of_empty_repeated_and_wrong_values(cli, argv, words):
    out = cli(*argv)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1 and words in lines[0], out.output


@pytest.mark.parametrize("argv, words", [
    (["run", "--case", "3", "--strategy", "graph"], "the graph strategy needs a CUDA GPU"),
    (["run", "--case", "3", "--backend", "cute"], "the cute backend needs a CUDA GPU"),
    (["run", "--case", "test-1", "--timer", "per-call"], "--timer per-call times CUDA launches and no GPU is visible"),
    (["compare", "--case", "test-1", "--timer", "cupti"], "--timer cupti times CUDA launches"),
    (["profile", "--cupti", "--case", "3"], "profiling needs a CUDA GPU"),
])
def test_a_missing_gpu_has_its_own_exit_code(cli, argv, words):
    """Exit 3 (errors.NO_GPU): the command would run on a machine with a GPU; 2 is for bad input."""
    out = cli(*argv)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 3 and len(lines) == 1 and words in lines[0], out.output


def test_files_that_are_not_regular_are_refused_before_they_are_read(cli, tmp_path):
    import os
    fifo = tmp_path / "cases.yaml"
    os.mkfifo(fifo)  # no writer: reading it would wait for ever
    out = cli("cases", "--cases", str(fifo))
    assert out.exit_code == 2 and "is not a regular file" in out.stderr
    out = cli("compare", "--case", "test-1", "--baseline", str(fifo))
    assert out.exit_code == 2 and "is not a regular file" in out.stderr
    sub = tmp_path / "submission.py"
    os.mkfifo(sub)
    out = cli("run", "--case", "test-1", "--submission", str(sub))
    assert out.exit_code == 2 and "is not a regular file" in out.stderr


@pytest.mark.parametrize("args, says", [
    (["run", "--case", "3", "--strategy", "graph", "--backend", "cute", "--tensormaps", "host"],
     "the graph strategy launches one kernel per group"),
    (["run", "--case", "3", "--strategy", "persistent", "--backend", "torch", "--tensormaps", "host"],
     "the torch backend has none"),
    (["compile", "--arch", "sm_100a", "--case", "3", "--strategy", "sequential", "--tensormaps", "device"],
     "the sequential strategy launches one kernel per group"),
])
def test_tensor_map_mode_refusals_are_one_line_exit_2(cli, args, says):
    """Refused before any input is generated or kernel compiled, by the one check (selection.py)."""
    out = cli(*args)
    assert out.exit_code == 2, (args, out.output)
    assert says in out.output and out.output.count("\n") == 1, out.output


# --- kinds of bad input: files of the wrong shape, sizes that cannot fit, paths that cannot be written ----

def _bad_files(tmp_path):
    files = {
        "list.yaml": "cases:\n  - 1\n  - 2\n",
        "strings.yaml": 'cases:\n  mine: "m: 64"\n',
        "nested.yaml": "cases:\n  mine: {m: [[64]], n: 256, k: 256}\n",
        "binary.yaml": b"\xff\xfe\x00\x01",
        "status.json": json.dumps({"results": [{"case": "1", "status": "weird", "strategy": "s", "backend": "b"}]}),
        "rows.json": json.dumps({"results": "none"}),
        "flags.json": json.dumps({"results": [{"case": "1", "status": "ok", "flags": ["x"]}]}),
        "clocks.json": json.dumps({"results": [{"case": "1", "status": "ok", "clocks": ["x"]}]}),
        "binary.json": b"\xff\xfe\x00\x01",
    }
    for name, body in files.items():
        (tmp_path / name).write_bytes(body if isinstance(body, bytes) else body.encode())
    (tmp_path / "folder.yaml").mkdir()
    return tmp_path


@pytest.mark.parametrize("argv, words", [
    (["cases", "--cases", "{d}/list.yaml"], "each case needs an id"),
    (["cases", "--cases", "{d}/strings.yaml"], "expected a mapping"),
    (["cases", "--cases", "{d}/nested.yaml"], "must be an integer or a non-empty list of integers"),
    (["cases", "--cases", "{d}/binary.yaml"], "is not UTF-8 text"),
    (["cases", "--cases", "{d}/folder.yaml"], "is a folder"),
    (["report", "{d}/status.json"], "has rows nvgg cannot read back"),
    (["report", "{d}/rows.json"], "is not an nvgg file"),
    (["report", "{d}/flags.json"], "has rows nvgg cannot read back"),
    (["compare", "--case", "test-1", "--baseline", "{d}/clocks.json"], "has rows nvgg cannot read back"),
    (["report", "{d}/binary.json"], "is not UTF-8 text"),
    (["report", "{d}"], "is a folder"),
    (["compare", "--case", "test-1", "--baseline", "{d}/status.json"], "baseline"),
    (["run", "--shape", "m: [1000000000]; n: [4096]; k: [7168]"], "needs about"),
    (["compare", "--shape", "m: [1000000000]; n: [4096]; k: [7168]", "--strategy", "sequential"], None),
    (["sol", "--case", "3", "--json", "/proc/nvgg/sol.json"], "--json /proc/nvgg/sol.json cannot be written"),
    (["cases", "--json", "{d}"], "is a folder"),
    (["profile", "--phases", "--case", "3", "--trace", "-"], "--trace writes a file"),
    (["report", "{d}/status.json", "--plot", "-"], "--plot writes a file"),
    (["compare", "--json", "-", "--markdown", "-"], "would both print on stdout"),
    (["compile", "--arch", "sm_90a", "--case", "3", "--backend", "torch"], "the torch backend runs library kernels"),
    (["profile", "--cupti", "--out", "{d}"], "--clock-control and --out are Nsight Compute's"),
    (["profile", "--ncu", "--clock-control", "max"], "choose none or base"),
    (["profile", "--ncu", "--out", "/proc/nvgg"], "--out /proc/nvgg cannot be written"),
    (["profile", "--ncu", "--out", "{d}/list.yaml"], "is a file: pass a folder"),
])
def test_kinds_of_bad_input_are_one_line_exit_2(cli, tmp_path, argv, words):
    d = _bad_files(tmp_path)
    out = cli(*[a.format(d=d) for a in argv])
    assert "Traceback" not in out.output and (out.exception is None or isinstance(out.exception, SystemExit)), out.output
    if words is None:  # a compare keeps the row: n/a with the size it needs; nothing was measured: exit 1
        assert "needs about" in out.stdout and out.exit_code == 1 and "nothing was measured" in out.stderr, out.output
        return
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1 and words in lines[0], out.output


@pytest.mark.parametrize("argv, words", [
    (["run", "--case", "test-1", "--timer", "bogus"], "Invalid value for '--timer'"),
    (["run", "--bogus"], "No such option: --bogus"),
    (["compare", "strategies", "extra"], "unexpected extra argument"),
    (["sol", "--json"], "requires an argument"),
    (["sol", "--case", "1", "--case", "2"], "--case given twice: give it once"),
    (["run", "--case=1", "--json", "a.json", "--json=b.json"], "--json given twice"),
    (["run", "--case", "3", "--timeout", "-1"], "Invalid value for '--timeout'"),
    (["profile", "--cupti", "--timeout", "0"], "Invalid value for '--timeout'"),
    (["compare", "--max-regression", "-5"], "Invalid value for '--max-regression'"),
])
def test_usage_errors_are_one_line_from_the_command(argv, words):
    """The parser's own errors, as the installed command prints them (not through CliRunner)."""
    import subprocess
    import sys
    from pathlib import Path
    proc = subprocess.run([sys.executable, "-m", "nvgg", *argv], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr


@pytest.mark.parametrize("argv", [["run", "--case", "3", "--timeout", "-1"], ["compare", "--help"], ["ab", "--floor", "100"]])
def test_the_command_line_is_read_before_torch_is_imported(argv):
    """A usage error or --help answers at once: the app and its commands' options import no torch,
    nor CuTe DSL (nvgg/commands/__init__.py); a command imports them once its line is read."""
    import subprocess
    import sys
    from pathlib import Path
    code = ("import sys\n"
            f"sys.argv = ['nvgg', *{argv!r}]\n"
            "from nvgg.cli import run\n"
            "try:\n"
            "    run()\n"
            "except SystemExit as exc:\n"
            "    print(exc.code, sorted(m for m in ('torch', 'numpy', 'cutlass') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent.parent,
                          timeout=120)
    assert proc.stdout.strip().splitlines()[-1] in ("2 []", "0 []"), (proc.stdout, proc.stderr)


def _nvgg(*argv, env=None, **kwargs):
    import os
    import subprocess
    import sys
    from pathlib import Path
    return subprocess.run([sys.executable, "-m", "nvgg", *argv], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent, env=dict(os.environ, **(env or {})), **kwargs)


def test_a_kernel_cache_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for cache in (blocker, blocker / "kernels"):
        proc = _nvgg("compile", "--arch", "sm_90a", "--case", "4", env={"NVGG_CACHE_DIR": str(cache)})
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert f"the kernel cache {cache} cannot be written" in lines[0] and "set NVGG_CACHE_DIR" in lines[0]


def test_a_bad_isolation_setting_is_one_line(tmp_path):
    proc = _nvgg("run", "--case", "test-1", env={"NVGG_ISOLATION": "garbage"})
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and lines == ["nvgg: NVGG_ISOLATION='garbage': set it to on (rows in worker processes) "
                                              "or off (in nvgg's own process)"]


def test_ctrl_c_while_nvgg_starts_is_one_line():
    """Ctrl-C while nvgg imports torch (its first second): one line and exit 130. The interrupt is
    raised where it would land, at the import of torch, so the test does not race a timer."""
    import subprocess
    import sys
    from pathlib import Path
    code = ("import builtins, sys\n"
            "real = builtins.__import__\n"
            "def interrupted(name, *args, **kwargs):\n"
            "    if name == 'torch':\n"
            "        raise KeyboardInterrupt\n"
            "    return real(name, *args, **kwargs)\n"
            "builtins.__import__ = interrupted\n"
            "sys.argv = ['nvgg', 'run', '--case', 'test-1']\n"
            "from nvgg.__main__ import main\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent.parent, capture_output=True, text=True,
                          timeout=120)
    assert (proc.returncode, proc.stderr.strip()) == (130, "nvgg: interrupted"), proc.stderr


def test_a_submission_that_prints_leaves_json_on_stdout_whole(tmp_path):
    """In-process rows (NVGG_ISOLATION=off): what the submission prints, from Python or C, goes to stderr."""
    import json
    proc = _nvgg("run", "--case", "test-1", "--submission", "tests/fixtures/submissions/printer.py", "--json", "-",
                 env={"NVGG_ISOLATION": "off"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["status"] == "ok"
    assert "hello from the submission" in proc.stderr and "raw hello" in proc.stderr


def test_nvgg_leaves_without_teardown_but_with_its_exit_handlers_and_output():
    """`leave` ends the process without the interpreter's teardown, yet as `sys.exit` would for
    what anyone sees: the exit handlers run, buffered output reaches a pipe whole, the code is
    kept; a message as the code is printed with exit 1; a thread not marked daemon still running
    is waited for (the usual exit)."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).parent.parent

    def leaving(body: str) -> subprocess.CompletedProcess:
        code = "import atexit, sys, threading, time\nfrom nvgg.__main__ import leave\n" + body
        return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)

    proc = leaving("atexit.register(lambda: print('handler ran'))\nsys.stdout.write('x' * 200000)\nleave(3)\n")
    assert proc.returncode == 3
    assert proc.stdout == "x" * 200000 + "handler ran\n"
    proc = leaving("leave('nvgg: a message as the code')\n")
    assert (proc.returncode, proc.stderr.strip()) == (1, "nvgg: a message as the code")
    proc = leaving("def late():\n    time.sleep(0.3)\n    print('thread done', flush=True)\n"
                   "threading.Thread(target=late).start()\nleave(None)\n")
    assert (proc.returncode, proc.stdout) == (0, "thread done\n")
