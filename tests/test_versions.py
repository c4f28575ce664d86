"""Versions of a submission as rows (nvgg/versions.py): the names that tell same-named files apart,
PATH@REV checked out from git with its folder, and the bad inputs, on `run` and `compare` with the
rows faked (conftest: fake_gpu, fake_rows)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import made_result, submission_path

from nvgg import versions
from nvgg.commands.common import check_submission
from nvgg.errors import NvggError


@pytest.mark.parametrize("paths, want", [
    (["/w/v1/submission.py", "/w/v2/submission.py"], ["v1/submission.py", "v2/submission.py"]),
    (["/x/a/s.py", "/y/a/s.py", "/z/b/s.py"], ["x/a/s.py", "y/a/s.py", "b/s.py"]),
    (["/w/mine.py", "/w/theirs.py"], ["mine.py", "theirs.py"]),
    (["/w/s.py@HEAD", "/w/s.py"], ["s.py@HEAD", "s.py"]),
    (["/w/s.py"], ["s.py"]),
])
def test_names_are_the_shortest_ends_that_differ(paths, want):
    assert versions.names(paths) == want


def test_a_version_becomes_a_row_in_one_place_for_every_command(cli, fake_gpu, fake_rows, tmp_path):
    """A submission's file at a revision with its CONFIG's point, or our kernels at a build's, the
    same row whichever command asks: run, profile and tune hand their workers what versions.row makes."""
    from nvgg import cases
    from nvgg.result import Row
    case = cases.get("3")
    mine = versions.Version("/w/v1/s.py", "v1/s.py", "a" * 40)
    row = versions.row(case, mine, point=(("work", 2),), timer="cupti")
    assert row == Row(case, submission="/w/v1/s.py", source="v1/s.py", revision="a" * 40, point=(("work", 2),),
                      timer="cupti")
    assert row.name == "3 submission[v1/s.py]" and row.key == "submission:/w/v1/s.py"
    ours = versions.row(case, strategy="persistent", backend="cute", point=(("stages", 3),), energy=False)
    assert ours == Row(case, "persistent", "cute", point=(("stages", 3),), energy=False)
    path = submission_path("tunable")
    asked = {"run": ["run"], "profile": ["profile", "--cupti"], "tune": ["tune", "--budget", "0.1"]}
    seen = {}
    for verb, argv in asked.items():
        fake_rows.seen.clear()
        out = cli(*argv, "--submission", path, "--case", "3")
        assert out.exit_code in (0, 1), out.output
        seen[verb] = fake_rows.seen[0]
    made = versions.Version(str(Path(path).resolve()), "tunable.py")
    assert seen["run"] == versions.row(case, made, device="cuda", profile=None, timer="leaderboard", l2="nvgg")
    assert seen["profile"] == versions.row(case, made, timer="cupti")
    assert seen["tune"] == versions.row(case, made, point=(("work", 2), ("split", 1)), energy=False, span=False)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A git repository with sub/submission.py importing its neighbour helper.py, committed once
    (tag v1), then the working copy changed and a file added after the commit."""
    if shutil.which("git") is None:
        pytest.fail("these tests need git, which CI has")
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "sub" / "helper.py").write_text("WHICH = 'committed'\n")
    (root / "sub" / "submission.py").write_text("from helper import WHICH\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "one")
    _git(root, "tag", "v1")
    (root / "sub" / "helper.py").write_text("WHICH = 'working copy'\n")
    (root / "sub" / "later.py").write_text("")
    return root


def test_a_revision_is_its_folder_at_that_commit_in_a_folder_of_its_own(repo):
    file = repo / "sub" / "submission.py"
    with versions.Versions([f"{file}@v1", str(file)], check_submission) as got:
        old, new = got.items
        assert (old.name, new.name) == ("submission.py@v1", "submission.py")
        assert old.revision == _git(repo, "rev-parse", "HEAD") and len(old.revision) == 40 and new.revision == ""
        assert Path(new.path) == file.resolve() and Path(old.path) != file.resolve()
        assert (Path(old.path).parent / "helper.py").read_text() == "WHICH = 'committed'\n"  # its imports come along
        checkout = Path(old.path).parent
    assert not checkout.exists()  # gone with the command


@pytest.mark.parametrize("specs, words", [
    (["{file}@nope"], "no revision 'nope' in the git repository"),
    (["{later}@v1"], "sub/later.py does not exist at v1"),
    (["{file}@HEAD", "{file}@v1"], "again: give each file and revision once"),
    (["{file}", "{file}"], "again: give each file and revision once"),
    (["{file}@"], "nothing after @"),
    (["{outside}@HEAD"], "is not in a git repository"),
    (["{text}@HEAD"], "notes.txt is not a Python file"),
    (["{folder}@HEAD"], "sub is a folder"),
])
def test_bad_versions_are_refused_before_any_work(repo, tmp_path, specs, words):
    outside = tmp_path / "loose" / "submission.py"
    outside.parent.mkdir()
    outside.write_text("")
    (repo / "sub" / "notes.txt").write_text("")
    paths = dict(file=repo / "sub" / "submission.py", later=repo / "sub" / "later.py", outside=outside,
                 text=repo / "sub" / "notes.txt", folder=repo / "sub")
    with pytest.raises(NvggError, match=words.replace("(", r"\(")):
        versions.Versions([s.format(**paths) for s in specs], check_submission)


def test_compare_runs_two_files_of_one_name_told_apart(cli, fake_gpu, fake_rows, tmp_path):
    for v in ("v1", "v2"):
        (tmp_path / v).mkdir()
        shutil.copy(submission_path("honest"), tmp_path / v / "submission.py")

    def answer(row):
        if not row.submission:  # compare's own rows beside them
            return made_result(row.case.id, row.strategy, row.backend, 30.0)
        return made_result(row.case.id, "submission", "submission", 40.0 if "v1" in row.submission else 50.0,
                           source=row.source, revision=row.revision)

    fake_rows.answer = answer
    doc = tmp_path / "r.json"
    out = cli("compare", "--case", "3", "--submission", str(tmp_path / "v1" / "submission.py"),
              "--submission", str(tmp_path / "v2" / "submission.py"), "--json", str(doc))
    assert out.exit_code == 0, out.output
    assert [r.source for r in fake_rows.seen if r.submission] == ["v1/submission.py", "v2/submission.py"]
    assert "submission[v1/submission.py]" in out.stdout and "submission[v2/submission.py]" in out.stdout
    rows = [r for r in json.loads(doc.read_text())["results"] if r["strategy"] == "submission"]
    assert [(r["source"], r["time_us"]) for r in rows] == [("v1/submission.py", 40.0), ("v2/submission.py", 50.0)]


def test_run_takes_a_revision_beside_the_working_copy(cli, fake_gpu, fake_rows, repo, tmp_path):
    file = repo / "sub" / "submission.py"
    seen = []

    def answer(row):
        seen.append((row.source, row.revision, Path(row.submission).parent.joinpath("helper.py").read_text()))
        return made_result(row.case.id, "submission", "submission", 40.0, source=row.source, revision=row.revision)

    fake_rows.answer = answer
    doc = tmp_path / "r.json"
    out = cli("run", "--case", "3", "--submission", f"{file}@HEAD", "--submission", str(file), "--json", str(doc))
    assert out.exit_code == 0, out.output
    head = _git(repo, "rev-parse", "HEAD")
    assert seen == [("submission.py@HEAD", head, "WHICH = 'committed'\n"), ("submission.py", "", "WHICH = 'working copy'\n")]
    assert [r["revision"] for r in json.loads(doc.read_text())["results"]] == [head, ""]


def test_profile_takes_versions_each_under_its_name(cli, fake_gpu, fake_rows, repo, tmp_path):
    """Profile's CUPTI rows of a revision and the working copy, each row named by its version, the
    tables under each version's name, the JSON one results file with the versions' findings."""
    import jsonschema

    from nvgg.result import SCHEMA
    file = repo / "sub" / "submission.py"

    def answer(row):
        return made_result(row.case.id, "submission", "submission", 40.0 if row.revision else 50.0, source=row.source,
                           revision=row.revision, cupti={"calls": 15, "activities": 1, "kernel_us": 36.0, "sum_us": 36.0,
                                                          "span_us": 36.0, "gaps_us": 0.0, "event_us": 40.0,
                                                          "host_overhead_us": 4.0, "gaps_shown": True, "gaps_note": "",
                                                          "kernels": [{"name": "k", "per_call": 1, "mean_us": 36.0}]})

    fake_rows.answer = answer
    doc = tmp_path / "p.json"
    out = cli("profile", "--cupti", "--case", "3,4", "--submission", f"{file}@v1", "--submission", str(file),
              "--json", str(doc))
    assert out.exit_code == 0, out.output
    assert [(r.case.id, r.source, r.timer) for r in fake_rows.seen] == [
        ("3", "submission.py@v1", "cupti"), ("4", "submission.py@v1", "cupti"), ("3", "submission.py", "cupti"),
        ("4", "submission.py", "cupti")]
    raw = json.loads(doc.read_text())
    jsonschema.validate(raw, json.loads(SCHEMA.read_text()))
    head = _git(repo, "rev-parse", "HEAD")
    assert [(r["source"], r["revision"], r["time_us"]) for r in raw["results"]] == [
        ("submission.py@v1", head, 40.0), ("submission.py@v1", head, 40.0), ("submission.py", "", 50.0),
        ("submission.py", "", 50.0)]
    assert raw["versions"] == {"submission.py@v1": {"revision": head}, "submission.py": {"revision": ""}}
    out = cli("profile", "--cupti", "--case", "3", "--submission", f"{file}@v1", "--submission", str(file))
    assert out.stdout.index("== submission.py@v1 at " + head[:12]) < out.stdout.index("== submission.py\n")
    out = cli("profile", "--phases", "--case", "3", "--submission", f"{file}@v1", "--submission", str(file),
              "--trace", str(tmp_path / "t.json"))
    assert out.exit_code == 2 and "--trace holds one version's phases" in out.stderr
    out = cli("profile", "--cupti", "--case", "3", "--submission", f"{file}@nope")
    assert out.exit_code == 2 and "no revision 'nope'" in out.stderr


def test_a_bad_revision_on_the_command_line_is_one_line_and_exit_2(cli, fake_gpu, fake_rows, repo):
    out = cli("compare", "--case", "3", "--submission", f"{repo / 'sub' / 'submission.py'}@nope")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1 and "no revision 'nope'" in lines[0], out.output
    assert fake_rows.seen == []


def test_several_versions_need_their_own_processes(cli, fake_gpu, fake_rows, repo, monkeypatch):
    monkeypatch.setenv("NVGG_ISOLATION", "off")
    file = repo / "sub" / "submission.py"
    out = cli("run", "--case", "3", "--submission", f"{file}@HEAD", "--submission", str(file))
    assert out.exit_code == 2 and "imports would mix" in out.stderr and fake_rows.seen == []


def test_two_copies_of_one_name_measured_for_real_on_the_cpu(cli, tmp_path):
    for v in ("v1", "v2"):
        (tmp_path / v).mkdir()
        shutil.copy(submission_path("honest"), tmp_path / v / "submission.py")
        shutil.copy(submission_path("slowdown"), tmp_path / v / "slowdown.py")  # its own import
    doc = tmp_path / "r.json"
    out = cli("compare", "--case", "test-1", "--strategy", "sequential", "--backend", "torch", "--json", str(doc),
              "--submission", str(tmp_path / "v1" / "submission.py"), "--submission", str(tmp_path / "v2" / "submission.py"))
    assert out.exit_code == 0, out.output
    rows = json.loads(doc.read_text())["results"]
    assert [(r["strategy"], r["source"], r["status"]) for r in rows] == [
        ("sequential", "", "ok"), ("submission", "v1/submission.py", "ok"), ("submission", "v2/submission.py", "ok")]
