"""Does nvgg predict what the competition's evaluator measures? Runs GPU MODE's own evaluator for
nvfp4_group_gemm (eval_better_bench_grouped_gemm.py, its timing untouched) on submissions, --runs
times a mode, beside `nvgg compare --protocol`'s prediction of it, and prints a table a submission
and mode: each evaluator run's mean, their spread, nvgg's predicted mean and steady state, the
prediction's difference from the runs' mean, and whether it lies inside max(3%, that spread).

The competition's files are not part of nvgg. --competition DIR holds, from gpu-mode/reference-kernels
problems/nvidia: eval_better_bench_grouped_gemm.py; nvfp4_group_gemm's reference.py, task.py and
utils.py (the utils.py its task.yml gives the evaluator), as competition_bits.py takes them; and
in DIR/nvidia/, problems/nvidia/utils.py. Each submission gets a temporary folder with the evaluator
and two changes outside its timing, made here by text substitution: OpError, which CuTe DSL 4.8.1
lacks, falls back to a stand-in class; reference.py becomes a shim over the original (kept as
competition_reference.py) whose ref_kernel (fp4 torch._scaled_mm: B200 only) is nvgg's exact
decode, float64 rounded once to fp16. The submission's own folder is on its path (sibling imports).

    python benchmarks/leaderboard_check.py --competition .device/competition --submission F [--submission F2 ...]
        [--cases 1,2,3,4] [--modes benchmark,leaderboard] [--runs 2[,1]] [--out OUT] [--timeout 600]
        [--protocol-name evaluator-2026-01-29] [--nvgg-command compare|run] [--ours]
    python benchmarks/leaderboard_check.py --competition DIR --self-test     # on a CPU

Writes OUT/table.md, OUT/summary.json and every run's raw output; exit 0 whether or not the
prediction lies inside (the table says), 1 with a one-line reason where something could not run.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from nvgg import cases as casesmod  # noqa: E402
from nvgg.errors import NvggError  # noqa: E402
from nvgg.versions import names  # noqa: E402

EVAL = "eval_better_bench_grouped_gemm.py"
OPERROR = "from cutlass.cute.nvgpu.common import OpError\n"
OPERROR_NEW = ("try:\n    from cutlass.cute.nvgpu.common import OpError\n"
               "except ImportError:  # CuTe DSL 4.8.1 has no OpError: a class nothing raises\n"
               "    class OpError(Exception):\n        pass\n")
SHIM = '''"""The competition's reference.py (competition_reference.py) with ref_kernel, whose fp4
torch._scaled_mm needs a B200, replaced by nvgg's exact decode: float64, rounded once to fp16."""
import inspect

import torch

import competition_reference as _original
from competition_reference import *  # noqa: F401,F403
from nvgg.reference import reference as _exact


def ref_kernel(data):
    return [out.to(torch.float16).reshape(c.shape) for out, (_, _, c) in zip(_exact(data, torch.float64), data[0])]


_closure = inspect.getclosurevars(_original.check_implementation).nonlocals
assert _closure["reference"] is _original.ref_kernel, "check_implementation no longer wraps ref_kernel"
check_implementation = _original.make_match_reference(ref_kernel, **_closure["kwargs"])
_original.ref_kernel, _original.check_implementation = ref_kernel, check_implementation
'''
MODES = ("benchmark", "leaderboard")
FLOOR_PCT = 3.0


def build(comp: Path, submission: Path, cases: list, folder: Path) -> None:
    """The evaluator's folder for one submission: its files as they are but for the two changes.
    utils.py is the task's (as its task.yml has it), which must define what the evaluator imports
    from utils as problems/nvidia/utils.py does."""
    defs = [{n.name: ast.unparse(n) for n in ast.parse(f.read_text()).body if isinstance(n, ast.FunctionDef)
             and n.name in ("set_seed", "clear_l2_cache_large")} for f in (comp / "nvidia/utils.py", comp / "utils.py")]
    if defs[0] != defs[1] or len(defs[1]) != 2:
        raise SystemExit(f"{comp}: the two utils.py differ in set_seed or clear_l2_cache_large: which one matters")
    text = (comp / EVAL).read_text()
    if text.count(OPERROR) != 1:
        raise SystemExit(f"{comp / EVAL}: the line {OPERROR.strip()!r} is not there once: the evaluator changed")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / EVAL).write_text(text.replace(OPERROR, OPERROR_NEW))
    for name in ("utils.py", "task.py"):
        shutil.copyfile(comp / name, folder / name)
    shutil.copyfile(comp / "reference.py", folder / "competition_reference.py")
    (folder / "reference.py").write_text(SHIM)
    shutil.copyfile(submission, folder / "submission.py")
    (folder / "cases.txt").write_text("".join(c.shape_str() + "\n" for c in cases))


def _call(cmd: list[str], log: Path, timeout: float, **kw) -> int | None:
    """Run `cmd` in its own process group, stdout and stderr to log.stdout/.stderr; its return code,
    None where it ran past `timeout` (the group killed: the evaluator's worker with it)."""
    with open(f"{log}.stdout", "w") as out, open(f"{log}.stderr", "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True, **kw)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:  # the group killed whatever it left (a worker), before the next run
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def _path(*first: str) -> str:
    return os.pathsep.join(list(first) + [p for p in [os.environ.get("PYTHONPATH")] if p])


def _tail(path: str) -> str:
    lines = [x for x in Path(path).read_text(errors="replace").splitlines() if x.strip()] if Path(path).exists() else []
    return lines[-1].strip()[:200] if lines else "nothing on stderr"


def parse(text: str) -> dict:
    """The evaluator's POPCORN_FD output: {"check": ..., "cases": {index: {field: value}}}, times in ns."""
    out: dict = {"check": None, "cases": {}}
    key = None
    for line in text.splitlines():
        head, sep, value = line.partition(": ")
        parts = head.split(".")
        if (not sep or " " in head) and key:  # a value's further lines (an error's text)
            out["cases"][key[0]][key[1]] += "\n" + line
        elif len(parts) == 3 and parts[0] == "benchmark" and parts[1].isdigit():
            key = (int(parts[1]), parts[2])
            number = key[1] in ("mean", "std", "err", "best", "worst", "runs")
            out["cases"].setdefault(key[0], {})[key[1]] = float(value) if number else value
        elif head == "check":
            out["check"], key = value.strip(), None
    return out


def run_evaluator(folder: Path, mode: str, log: Path, timeout: float, pythonpath: list[str]) -> tuple[dict | None, str]:
    """One evaluator run as the competition starts it; (its parsed output, "") or (None, why not)."""
    env = {k: v for k, v in os.environ.items() if k != "POPCORN_SEED"}  # no secret seed: the case seeds
    env["PYTHONPATH"] = _path(*pythonpath)
    with open(f"{log}.out.txt", "w") as fd:
        env["POPCORN_FD"] = str(fd.fileno())
        started = time.monotonic()
        rc = _call([sys.executable, EVAL, mode, "cases.txt"], log, timeout, cwd=folder, env=env, pass_fds=(fd.fileno(),))
    print(f"  {log.name}: rc {rc}, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if rc is None:
        return None, f"{log.parent.name}/{log.name}: the evaluator ran past {timeout:.0f} s"
    parsed = parse(Path(f"{log}.out.txt").read_text())
    if parsed["check"] is None:
        return None, f"{log.parent.name}/{log.name}: the evaluator ended {rc} without a check line " \
                     f"({_tail(f'{log}.stderr')})"
    return parsed, ""


def run_nvgg(command: str, submissions: list[Path], case_ids: str, protocol: str, log: Path,
             timeout: float, ours: bool = False) -> tuple[dict | None, str]:
    """nvgg's prediction of one mode for every submission at once (`ours`: beside our persistent
    kernel's); (its JSON document, "") or (None, why not)."""
    env = {**os.environ, "PYTHONPATH": _path(str(ROOT))}
    strategy = ["--strategy", "persistent" if ours else "none"] if command == "compare" else []
    cmd = [sys.executable, "-m", "nvgg", command, *strategy,
           *[a for sub in submissions for a in ("--submission", str(sub))], "--case", case_ids,
           "--protocol", protocol, "--json", f"{log}.json"]
    rc = _call(cmd, log, timeout, cwd=ROOT, env=env)
    if rc is None:
        return None, f"{log.parent.name}/{log.name}: nvgg {command} ran past {timeout:.0f} s"
    try:
        return json.loads(Path(f"{log}.json").read_text()), ""
    except (OSError, ValueError):
        return None, f"{log.parent.name}/{log.name}: nvgg {command} ended {rc} without its JSON " \
                     f"({_tail(f'{log}.stderr')})"


def _geomean(values: list) -> float | None:
    ok = values and all(isinstance(v, float) and v > 0 for v in values)
    return math.exp(sum(map(math.log, values)) / len(values)) if ok else None


def _row(name: str, runs: list, predicted, steady) -> dict:
    mean = sum(runs) / len(runs) if all(isinstance(x, float) for x in runs) else None
    spread = 100 * (max(runs) - min(runs)) / mean if mean else None
    diff = 100 * (predicted - mean) / mean if mean and isinstance(predicted, float) else None
    allowed = max(FLOOR_PCT, spread) if spread is not None else None
    return {"case": name, "evaluator_us": runs, "evaluator_mean_us": mean, "spread_pct": spread,
            "predicted_us": predicted, "steady_us": steady, "difference_pct": diff, "allowed_pct": allowed,
            "inside": None if diff is None else abs(diff) <= allowed}


def compose(case_ids: list[str], evals: list[dict | None], doc: dict | None, name: str | None = None) -> dict:
    """One submission (named `name` in nvgg's rows; None: the only one) and mode: a row a case,
    the geometric mean's row, and nvgg's causes."""
    doc = doc or {}
    results = {r["case"]: r for r in doc.get("results", [])
               if r.get("strategy") == "submission" and name in (None, r.get("source"))}
    rows, causes = [], []
    for i, cid in enumerate(case_ids):
        got = [(ev or {}).get("cases", {}).get(i, {}) for ev in evals]
        runs = [x["mean"] / 1e3 if "mean" in x else x.get("status", "not-run") for x in got]
        r = results.get(cid, {})
        p = r.get("protocol") or {}
        predicted = float(p["mean_us"]) if p.get("status") == "ok" else p.get("status", "not-run")
        steady = (r.get("stats") or {}).get("mean_us")
        rows.append(_row(cid, runs, predicted, float(steady) if isinstance(steady, (int, float)) else None))
        # the slowest repetition of each evaluator run (its first, where the first pays) and its count,
        # beside nvgg's first repetition and count: where a difference comes from
        rows[-1]["evaluator_worst_us"] = [x["worst"] / 1e3 if "worst" in x else None for x in got]
        rows[-1]["evaluator_runs"] = [int(x["runs"]) if "runs" in x else None for x in got]
        rows[-1]["predicted_first_us"] = p.get("first_us")
        rows[-1]["predicted_runs"] = p.get("runs")
        if p.get("cause") or p.get("status") not in (None, "ok"):
            causes.append(f"case {cid}: {p.get('cause') or p.get('status') + ': ' + p.get('message', '')}")
    runs = [_geomean([row["evaluator_us"][j] for row in rows]) or "missing" for j in range(len(evals))]
    labels = {f"submission[{r.get('source')}]" for r in results.values()}
    means = [float(v) for k, v in (doc.get("protocol_geomean_us") or {}).items() if k in labels]
    predicted = means[0] if len(means) == 1 else _geomean([row["predicted_us"] for row in rows])
    geo = _row("geomean", runs, predicted, _geomean([row["steady_us"] for row in rows]))
    return {"rows": rows, "geomean": geo, "causes": causes, "protocol": doc.get("protocol")}


def _fmt(x, spec=".2f", unit="") -> str:
    return "—" if x is None else (f"{x:{spec}}{unit}" if isinstance(x, float) else str(x))


def render(title: str, part: dict) -> str:
    n = len(part["geomean"]["evaluator_us"])
    headers = ["case"] + [f"evaluator run {j + 1} µs" for j in range(n)] + [
        "spread", "nvgg predicted µs", "nvgg steady µs", "difference", "allowed", "inside",
        "worst µs: evaluator / nvgg", "runs: evaluator / nvgg"]

    def both(row, theirs, ours_, spec):
        return " / ".join(_fmt(x, spec) for x in (row.get(theirs) or []) + [row.get(ours_)]) if theirs in row else ""
    body = [[row["case"]] + [_fmt(x) for x in row["evaluator_us"]] + [
        _fmt(row["spread_pct"], ".1f", "%"), _fmt(row["predicted_us"]), _fmt(row["steady_us"]),
        _fmt(row["difference_pct"], "+.1f", "%"), _fmt(row["allowed_pct"], ".1f", "%"),
        {True: "yes", False: "NO", None: "—"}[row["inside"]],
        both(row, "evaluator_worst_us", "predicted_first_us", ".0f"),
        both(row, "evaluator_runs", "predicted_runs", "d")] for row in part["rows"] + [part["geomean"]]]
    proto = part.get("protocol") or {}
    note = f"nvgg protocol {proto.get('name')} ({proto.get('mode')}, order {proto.get('order')})" if proto \
        else "no nvgg prediction"
    table = tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)
    return f"### {title}\n\n{note}\n\n{table}\n" + "".join(f"\n- {c}" for c in part["causes"]) + "\n"


def ours(doc: dict | None) -> str:
    """Our persistent kernel's rows in nvgg's document: its predicted mean against its steady state."""
    body = []
    for r in (doc or {}).get("results", []):
        if r.get("strategy") == "persistent":
            p = r.get("protocol") or {}
            steady = (r.get("stats") or {}).get("mean_us")
            pred = p.get("mean_us") if p.get("status") == "ok" else None
            body.append([r["case"], f"persistent[{r.get('tensormaps')}]/{r.get('backend')}", _fmt(pred), _fmt(steady),
                         _fmt(100 * (pred - steady) / steady if pred and steady else None, "+.1f", "%"),
                         p.get("cause") or p.get("message") or ""])
    if not body:
        return ""
    return "\n" + tabulate(body, headers=["case", "our kernel", "nvgg predicted µs", "nvgg steady µs", "difference",
                                          "cause"], tablefmt="github", disable_numparse=True) + "\n"


def card() -> str:
    """The card's name (nvidia-smi: this process stays off the GPU the evaluator times)."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=60).stdout.split("\n")[0].strip() or "unknown card"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown card ({exc})"


def _failures(got: dict | None, case_ids: list[str]) -> list[str]:
    """The cases an evaluator run did not time: failed (its error) or never reached."""
    return [f"case {cid}: {got['cases'].get(i, {}).get('error', 'not reached').strip()[:150]}"
            for i, cid in enumerate(case_ids) if got and "mean" not in got["cases"].get(i, {})]


def check(args) -> int:
    subs = [Path(s).resolve() for s in args.submission]
    missing = [str(s) for s in subs if not s.is_file()]
    modes = [m.strip() for m in args.modes.split(",")]
    if missing or not set(modes) <= set(MODES):
        raise SystemExit(f"no submission {missing[0]}" if missing else f"--modes takes {' and '.join(MODES)}")
    cases = casesmod.select(args.cases)
    ids = [c.id for c in cases]
    out = Path(args.out or f"leaderboard-check-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    head = (f"card: {card()}; date: {time.strftime('%Y-%m-%d %H:%M')}; evaluator: {args.competition}; "
            f"runs a mode: {args.runs}")
    print(head, file=sys.stderr, flush=True)
    legend = ("spread: (max - min) / mean of the evaluator runs' means; difference: nvgg's predicted mean against "
              f"that mean; allowed: max({FLOOR_PCT:.0f}%, spread); geomean: over the cases, run by run")
    tables, problems, text = [], [], [f"# leaderboard check\n\n{head}\n\n{legend}\n"]
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a timeout's TERM: the tables done so far stay
    runs = [int(x) for x in str(args.runs).split(",")]  # a submission's runs a mode (the last count for the rest)
    try:
        for mode in modes:
            out.mkdir(parents=True, exist_ok=True)
            doc, why = run_nvgg(args.nvgg_command, subs, args.cases, f"{args.protocol_name}:{mode}",
                                out / f"nvgg-{mode}", args.nvgg_timeout, args.ours)
            problems += [why] if why else []
            for i, (sub, name) in enumerate(zip(subs, names([str(s) for s in subs]))):
                logs = out / name.replace("/", "_")
                logs.mkdir(parents=True, exist_ok=True)
                evals = []
                with tempfile.TemporaryDirectory(prefix="nvgg-evaluator-") as tmp:
                    build(Path(args.competition).resolve(), sub, cases, Path(tmp))
                    for j in range(runs[min(i, len(runs) - 1)]):
                        got, why = run_evaluator(Path(tmp), mode, logs / f"{mode}-run{j + 1}", args.timeout,
                                                 [tmp, str(sub.parent), str(ROOT)])
                        evals.append(got)
                        problems += [why] if why else [f"{name} {mode} run {j + 1}: {x}"
                                                       for x in _failures(got, ids)][:1]
                part = compose(ids, evals, doc, name)
                bad = [r["case"] for r in part["rows"] if not isinstance(r["predicted_us"], float)]
                problems += [f"{name} {mode}: nvgg predicted no mean for case {b}" for b in bad][:1]
                tables.append({"submission": str(sub), "name": name, "mode": mode, **part})
                text.append(render(f"{name}, {mode}", part))
                print(text[-1], flush=True)
                (out / "table.md").write_text("\n".join(text))
                (out / "summary.json").write_text(json.dumps({"head": head, "cases": ids, "tables": tables,
                                                              "problems": problems}, indent=1))
            if args.ours:
                text.append(f"### nvgg's own persistent kernel, {mode}\n" + ours(doc))
                print(text[-1], flush=True)
                (out / "table.md").write_text("\n".join(text))
    except KeyboardInterrupt:
        problems.append(f"stopped after {len(tables)} of {len(subs) * len(modes)} tables")
    print(f"written: {out}: table.md, summary.json and every run's raw output", file=sys.stderr)
    if problems:
        more = f" (and {len(problems) - 1} more: summary.json)" if len(problems) > 1 else ""
        print(f"could not run: {problems[0]}{more}", file=sys.stderr)
        return 1
    return 0


CANNED = """benchmark-count: 2
benchmark.0.spec: m: [192, 320]; n: [3072, 3072]; k: [4096, 4096]; g: 2; seed: 1111
benchmark.0.mean: 100000.0
benchmark.1.spec: m: [128, 384]; n: [4096, 4096]; k: [1536, 1536]; g: 2; seed: 1111
benchmark.1.runs: 57
benchmark.1.mean: 50000.0
benchmark.1.std: 400.0
benchmark.1.err: 52.98
benchmark.1.best: 49000.0
benchmark.1.worst: 51000.0
check: pass
"""
PROBE = r"""
import json, torch
import eval_better_bench_grouped_gemm as ev, reference, competition_reference as original
assert ev.check_implementation is reference.check_implementation is original.check_implementation
assert original.ref_kernel is reference.ref_kernel and issubclass(ev.OpError, Exception)
m, n, k = 128, 256, 256  # A all 1.0 (0x22), B alternating 1.0, 2.0 (0x42), scales 1 and 2: C = 3k
a, b = torch.full((m, k // 2, 1), 0x22, dtype=torch.uint8), torch.full((n, k // 2, 1), 0x42, dtype=torch.uint8)
sfa, sfb = (torch.full((r, k // 16, 1), v, dtype=torch.int8).to(torch.float8_e4m3fn) for r, v in ((m, 1), (n, 2)))
data = ([(a, b, torch.zeros(m, n, 1, dtype=torch.float16))], [(sfa, sfb)], [None], [(m, n, k, 1)])
got = reference.ref_kernel(data)
assert got[0].shape == (m, n, 1) and got[0].dtype == torch.float16 and bool((got[0] == 3 * k).all())
print(json.dumps({"same": ev.check_implementation(data, got), "off": ev.check_implementation(data, [got[0] + 1]),
                  "cases": [t.args for t in ev.get_test_cases("cases.txt", None)]}))
"""


def self_test(comp: Path) -> None:
    """On a CPU: the evaluator's folder built and imported, a canned output parsed, a table composed."""
    cases = casesmod.select("1,2,3,4")
    with tempfile.TemporaryDirectory(prefix="nvgg-selftest-") as tmp:
        folder, sub = Path(tmp) / "eval", Path(tmp) / "s.py"
        sub.write_text("def custom_kernel(data):\n    return None\n")
        build(comp, sub, cases, folder)
        diff = [x for x in difflib.unified_diff((comp / EVAL).read_text().splitlines(True),
                                                (folder / EVAL).read_text().splitlines(True), n=0)
                if x[:1] in "+-" and x[:3] not in ("---", "+++")]
        assert diff == ["-" + OPERROR] + ["+" + x for x in OPERROR_NEW.splitlines(True)], diff
        assert (folder / "competition_reference.py").read_text() == (comp / "reference.py").read_text()
        assert "from competition_reference import *" in (folder / "reference.py").read_text()
        assert (folder / "submission.py").read_text() == sub.read_text()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
        probe = subprocess.run([sys.executable, "-c", PROBE], cwd=folder, env=env, capture_output=True, text=True,
                               timeout=300)
        assert probe.returncode == 0, probe.stderr[-2000:]
        got = json.loads(probe.stdout.splitlines()[-1])
    assert got["same"] == [True, ""] and got["off"][0] is False, got
    assert got["cases"] == [{"m": list(c.m), "n": list(c.n), "k": list(c.k), "g": c.g, "seed": c.seed} for c in cases]
    run1, run2 = parse(CANNED), parse(CANNED.replace("mean: 100000.0", "mean: 102000.0"))
    assert run1["check"] == "pass" and run1["cases"][1] == {
        "spec": "m: [128, 384]; n: [4096, 4096]; k: [1536, 1536]; g: 2; seed: 1111", "runs": 57.0, "mean": 50000.0,
        "std": 400.0, "err": 52.98, "best": 49000.0, "worst": 51000.0}
    failed = parse(CANNED.split("benchmark.1.runs")[0] + "benchmark.1.status: fail\nbenchmark.1.error: mismatch found!"
                   "\n  at (0, 1)\ncheck: fail\n")
    assert failed["check"] == "fail" and _failures(failed, ["3", "4"]) == ["case 4: mismatch found!\n  at (0, 1)"]
    rows = [{"case": "3", "strategy": "persistent", "backend": "cute", "stats": {"mean_us": 9.0},
             "protocol": {"status": "ok", "mean_us": 9.0}}]
    rows += [{"case": c, "strategy": "submission", "backend": "submission", "source": "s.py", "stats": {"mean_us": st},
              "protocol": {"status": "ok", "mean_us": pr, "cause": cause}}
             for c, st, pr, cause in (("3", 99.0, 103.0, ""), ("4", 50.0, 53.0, "outlying repetitions"))]
    doc = {"protocol": {"name": "evaluator-2026-01-29", "mode": "benchmark", "order": ["3", "4"]},
           "protocol_geomean_us": {"persistent/cute": 9.0, "submission[s.py]": 74.0}, "results": rows}
    part = compose(["3", "4"], [run1, run2], doc)
    close = lambda x, y: abs(x - y) < 1e-9 * max(1.0, abs(y))  # noqa: E731
    first, second, geo = part["rows"][0], part["rows"][1], part["geomean"]
    assert first["evaluator_us"] == [100.0, 102.0] and close(first["spread_pct"], 200 / 101)
    assert close(first["difference_pct"], 200 / 101) and first["allowed_pct"] == 3.0 and first["inside"] is True
    assert close(second["difference_pct"], 6.0) and second["inside"] is False and second["steady_us"] == 50.0
    g1, g2 = math.sqrt(100 * 50), math.sqrt(102 * 50)
    assert close(geo["evaluator_mean_us"], (g1 + g2) / 2) and close(geo["spread_pct"], 100 * (g2 - g1) / ((g1 + g2) / 2))
    assert close(geo["difference_pct"], 100 * (74 - (g1 + g2) / 2) / ((g1 + g2) / 2)) and geo["inside"] is False
    assert close(geo["steady_us"], math.sqrt(99 * 50)) and part["causes"] == ["case 4: outlying repetitions"]
    broken = compose(["3", "4"], [run1, failed], None)
    assert broken["rows"][1]["evaluator_us"] == [50.0, "fail"] and broken["rows"][1]["inside"] is None
    assert broken["geomean"]["evaluator_us"][1] == "missing" and broken["rows"][0]["predicted_us"] == "not-run"
    print(render("s.py, benchmark (canned)", part))
    print(render("s.py, benchmark (canned, a failed run, no prediction)", broken))
    print("self-test passed: evaluator folder built and imported, output parsed, tables composed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--competition", required=True, help="the competition's files (see above)")
    parser.add_argument("--submission", action="append", default=[], help="a submission.py (repeat for several)")
    parser.add_argument("--cases", default="1,2,3,4", help="nvgg case ids, in the evaluator's order")
    parser.add_argument("--modes", default="benchmark,leaderboard")
    parser.add_argument("--runs", default="2", help="evaluator runs a mode, for each submission in order (2,1: two for the first, one for the rest)")
    parser.add_argument("--out", help="folder for tables and raw outputs (default leaderboard-check-DATE)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds an evaluator run may take")
    parser.add_argument("--ours", action="store_true", help="also predict nvgg's own persistent kernel (its steady "
                        "state against its prediction: no evaluator run of it)")
    parser.add_argument("--nvgg-timeout", type=float, default=600.0, help="seconds nvgg's prediction may take")
    parser.add_argument("--protocol-name", default="evaluator-2026-01-29", help="the protocol nvgg predicts with")
    parser.add_argument("--nvgg-command", choices=("compare", "run"), default="compare",
                        help="run: the submission's rows alone, without nvgg's strategies beside them")
    parser.add_argument("--self-test", action="store_true", help="check the build, parser and tables on a CPU")
    args = parser.parse_args()
    if args.self_test:
        self_test(Path(args.competition).resolve())
        return 0
    if not args.submission or not all(x.strip().isdigit() and int(x) >= 1 for x in str(args.runs).split(",")):
        parser.error("give --submission FILE at least once, and --runs 1 or more (a comma list: a count a submission)")
    try:
        return check(args)
    except NvggError as exc:
        raise SystemExit(str(exc)) from None


if __name__ == "__main__":
    sys.exit(main())
