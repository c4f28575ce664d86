"""Files nvgg writes (output.files.write_text, output.Live, the commands' output checks): written
through what the path is. A symbolic link stays a link and its target gets the bytes; a FIFO and a
character device stay what they are and the bytes go through them, once; a regular file is
replaced atomically. Two outputs, or an output and the baseline being read, may not be one file."""

import json
import os
import stat
import threading

import pytest

from nvgg.output import files


def _reader(path, got: list):
    """A reader of a FIFO, in a thread: everything written into it, until the writer closes."""
    def read():
        with open(path) as fh:
            got.append(fh.read())
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _char_device(tmp_path):
    """A character device of the test's own (the null device's numbers), or the system's null device."""
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        return path
    except (PermissionError, OSError):
        if stat.S_ISCHR(os.stat("/dev/null").st_mode):
            return "/dev/null"
    pytest.skip("no character device can be made here and /dev/null is none")


def test_a_link_is_written_through_and_stays_a_link(tmp_path):
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    files.write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_text() == "new"
    dangling = tmp_path / "to-nowhere.json"
    dangling.symlink_to(tmp_path / "made.json")
    files.write_text(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "made.json").read_text() == "made"


def test_a_fifo_and_a_device_are_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    thread = _reader(fifo, got)
    files.write_text(fifo, "through the pipe")
    thread.join(10)
    assert got == ["through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    device = _char_device(tmp_path)
    files.write_text(device, "gone")
    assert stat.S_ISCHR(os.stat(device).st_mode)


def test_a_regular_file_is_replaced_atomically(tmp_path):
    path = tmp_path / "sub" / "out.json"
    files.write_text(path, "one")
    files.write_text(path, "two")
    assert path.read_text() == "two" and [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_the_commands_write_through_links_fifos_and_devices(cli, in_process, tmp_path):
    target, link = tmp_path / "cases.json", tmp_path / "link.json"
    link.symlink_to(target)
    assert cli("cases", "--json", str(link)).exit_code == 0
    assert link.is_symlink() and json.loads(target.read_text())["kind"] == "cases"
    device = _char_device(tmp_path)
    out = cli("sol", "--case", "1", "--json", str(device))
    assert out.exit_code == 0 and stat.S_ISCHR(os.stat(device).st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    thread = _reader(fifo, got)
    # a compare rewrites its files as rows finish; a FIFO gets the whole document once, at the end
    out = cli("compare", "--case", "test-1,test-2", "--strategy", "sequential", "--backend", "torch", "--json", str(fifo))
    thread.join(30)
    assert out.exit_code == 0, out.output
    assert len(got) == 1 and [r["case"] for r in json.loads(got[0])["results"]] == ["test-1", "test-2"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_two_outputs_or_an_output_and_the_baseline_are_never_one_file(cli, in_process, tmp_path):
    base = tmp_path / "base.json"
    assert cli("compare", "--case", "test-1", "--strategy", "sequential", "--backend", "torch", "--json", str(base)).exit_code == 0
    before = base.read_text()
    alias = tmp_path / "alias.json"
    alias.symlink_to(base)
    for args, says in ((["--json", str(base), "--baseline", str(base)], "--json and --baseline name the same file"),
                       (["--json", str(alias), "--baseline", str(base)], "--json and --baseline name the same file"),
                       (["--json", str(tmp_path / "x"), "--markdown", str(tmp_path / "x")],
                        "--json and --markdown name the same file")):
        out = cli("compare", "--case", "test-1", "--strategy", "sequential", "--backend", "torch", *args)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.exit_code == 2 and len(lines) == 1 and says in lines[0], out.output
    assert base.read_text() == before and not (tmp_path / "x").exists()


def test_a_plot_or_a_trace_never_overwrites_another_file_of_the_command(cli, in_process, tmp_path):
    results = tmp_path / "r.json"
    assert cli("compare", "--case", "test-1", "--strategy", "sequential", "--backend", "torch",
               "--json", str(results)).exit_code == 0
    before = results.read_text()
    out = cli("report", str(results), "--plot", str(results))
    assert out.exit_code == 2 and "the result file and --plot name the same file" in out.stderr
    assert results.read_text() == before
    out = cli("profile", "--phases", "--case", "3", "--trace", str(tmp_path / "p.json"), "--json", str(tmp_path / "p.json"))
    assert out.exit_code == 2 and "--trace and --json name the same file" in out.stderr


def test_no_output_overwrites_a_file_the_command_reads(cli, tmp_path):
    """--json (and tune's --out, profile's --trace) naming the submission, the config map or the
    cases file, by any name (a symlink, PATH@REV's working copy): one line, exit 2, the file intact."""
    sub = tmp_path / "submission.py"
    sub.write_text("TUNE = {'work': [1, 2]}\n\ndef custom_kernel(data):\n    return [c for _, _, c in data[0]]\n")
    cfg = tmp_path / "map.json"
    cfg.write_text(json.dumps({"format": 1, "kind": "config", "target": "submission.py", "arch": "",
                               "space": {"work": [1, 2]}, "cases": {"test-1": {"work": 2}}}))
    yml = tmp_path / "cases.yaml"
    yml.write_text("cases: {mine: {m: [64], n: [128], k: [256]}}\n")
    link = tmp_path / "link.py"
    link.symlink_to(sub)
    kept = {p: p.read_text() for p in (sub, cfg, yml)}
    tries = [
        (["run", "--case", "test-1", "--submission", str(sub), "--json", str(link)], "--json and --submission"),
        (["run", "--case", "test-1", "--submission", f"{sub}@HEAD", "--json", str(sub)], "--json and --submission"),
        (["run", "--case", "test-1", "--submission", str(sub), "--config", str(cfg), "--json", str(cfg)],
         "--json and --config"),
        (["compare", "--case", "mine", "--cases", str(yml), "--backend", "torch", "--markdown", str(yml)],
         "--markdown and --cases"),
        (["ab", "--case", "test-1", "--submission", str(sub), "--submission", str(link), "--json", str(sub)],
         "--json and --submission"),
        (["tune", "--case", "test-1", "--submission", str(sub), "--out", str(sub)], "--out and --submission"),
        (["profile", "--cupti", "--case", "mine", "--cases", str(yml), "--json", str(yml)], "--json and --cases"),
        (["compile", "--case", "mine", "--cases", str(yml), "--json", str(yml)], "--json and --cases"),
        (["cases", "--cases", str(yml), "--json", str(yml)], "--json and --cases"),
        (["sol", "--case", "mine", "--cases", str(yml), "--json", str(yml)], "--json and --cases"),
    ]
    for args, says in tries:
        out = cli(*args)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.exit_code == 2 and len(lines) == 1 and says in lines[0] and "name the same file" in lines[0], \
            (args, out.output)
    assert {p: p.read_text() for p in kept} == kept
