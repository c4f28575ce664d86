"""A competition-format submission (nvgg/backends/submission.py) runs in a worker process of its
own (rows.py); its failures become results."""

import textwrap

import pytest

from nvgg import cases, rows
from nvgg.backends import submission
from nvgg.errors import NvggError
from nvgg.result import Row

GOOD = """
    import torch
    from task import input_t, output_t

    TABLE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]

    def expand(packed, sf):
        raw = packed[:, :, 0].view(torch.uint8)
        nib = torch.stack((raw & 15, raw >> 4), -1).reshape(raw.shape[0], -1).long()
        return torch.tensor(TABLE)[nib] * sf[:, :, 0].float().repeat_interleave(16, 1)

    def custom_kernel(data: input_t) -> output_t:
        abc, sf, _, sizes = data
        for (a, b, c), (sfa, sfb) in zip(abc, sf):
            c[:, :, 0] = (expand(a, sfa) @ expand(b, sfb).T).half()
        return [c for _, _, c in abc]
"""


def _write(tmp_path, body):
    path = tmp_path / "submission.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def _run(path: str, timeout_s: float):
    return rows.run_many([Row(cases.get("test-1"), submission=path)], timeout_s=timeout_s)[0]


def test_good_submission_is_checked_and_timed(tmp_path):
    res = _run(_write(tmp_path, GOOD), 120)
    assert res.status == "ok", res.message
    assert res.checked_inputs == 1 and res.stats.runs >= 3 and res.strategy == "submission"


@pytest.mark.parametrize("body, words", [
    ("import nonexistent_module_xyz\n", "failed to import: ModuleNotFoundError"),
    ("x = 1\n", "defines no custom_kernel"),
    ("def custom_kernel(data):\n    raise ValueError('boom')\n", "ValueError: boom"),
    ("def custom_kernel(data):\n    return [c.float() for _, _, c in data[0]]\n", "dtype torch.float32"),
    ("def custom_kernel(data):\n    return [c for _, _, c in data[0]]\n", "mismatch"),
    ("import os\ndef custom_kernel(data):\n    os._exit(3)\n", "crashed: the process died (exit code 3)"),
])
def test_broken_submissions_fail_with_their_reason(tmp_path, logs, body, words):
    res = _run(_write(tmp_path, body), 120)
    assert res.status in ("error", "wrong") and words in res.message


def test_hanging_submission_times_out(tmp_path):
    # a row's limit of 8 s (its worker's start is not in it): the import and check of a healthy CPU
    # row, and the timer's budget (NVGG_CPU_BUDGET_S, conftest), end well inside it on a loaded machine
    body = "import time\ndef custom_kernel(data):\n    time.sleep(60)\n"
    res = _run(_write(tmp_path, body), 8)
    assert res.status == "error" and "timed out after 8 s" in res.message


def test_missing_submission_file():
    with pytest.raises(NvggError, match="does not exist"):
        submission.load("/nonexistent/submission.py")
    res = _run("/nonexistent/submission.py", 60)
    assert res.status == "error" and "does not exist" in res.message


# --- a submission's own errors: a few lines in the message, the whole text in a log -------------

def _log_of(message: str) -> tuple[str, str]:
    """The text and path of the log file a failure's message names (its last line)."""
    last = message.splitlines()[-1].strip()
    assert last.startswith("the whole text: "), message
    path = last.removeprefix("the whole text: ")
    return open(path).read(), path


@pytest.fixture
def logs(tmp_path, monkeypatch):
    """The log folder (TMPDIR/nvgg-logs) under this test's own folder, in the workers too."""
    import tempfile
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / "nvgg-logs"


HELPER = """
    import torch

    def check_sizes(sizes):
        for g, (m, n, k, l) in enumerate(sizes):
            if k % 1024:
                raise ValueError(f"group {g}: k={k} is not a multiple of 1024")

    def custom_kernel(data):
        check_sizes(data[3])
        return [c for _, _, c in data[0]]
"""


def test_an_exception_in_a_helper_names_the_users_frames_and_the_log(tmp_path, logs):
    path = _write(tmp_path, HELPER)
    res = _run(path, 120)
    lines = res.message.splitlines()
    assert res.status == "error" and lines[0] == "launch failed: ValueError: group 0: k=256 is not a multiple of 1024"
    # the user's frames, innermost last, then the exception: nvgg's own frames are in the log only
    assert [line.strip() for line in lines[1:-1]] == [
        f'File "{path}", line 10, in custom_kernel', "check_sizes(data[3])",
        f'File "{path}", line 7, in check_sizes', 'raise ValueError(f"group {g}: k={k} is not a multiple of 1024")',
        "ValueError: group 0: k=256 is not a multiple of 1024"]
    text, where = _log_of(res.message)
    assert where.startswith(str(logs)) and "submission-case-test-1-" in where
    assert "Traceback (most recent call last)" in text and "nvgg/datapath.py" in text and text.endswith(
        "ValueError: group 0: k=256 is not a multiple of 1024\n")


def test_an_import_that_raises_in_a_helper_is_shown_the_same_way(tmp_path, logs):
    path = _write(tmp_path, "def setup():\n    return {}['tiles']\n\nTILES = setup()\n")
    with pytest.raises(NvggError) as err:
        submission.load(path, "3")
    message = str(err.value)
    assert message.splitlines()[0] == f"submission {path} failed to import: KeyError: 'tiles'"
    assert f'File "{path}", line 2, in setup' in message and f'File "{path}", line 4, in <module>' in message
    text, where = _log_of(message)
    assert "-case-3-" in where and "KeyError: 'tiles'" in text


BUILD = '''
    from torch.utils.cpp_extension import load_inline

    SOURCE = """
    int add(int a, int b) {
      return a + b
    }
    """

    def custom_kernel(data):
        extension = load_inline(name="nvgg_test_syntax_error", cpp_sources=SOURCE, functions=["add"],
                                no_implicit_headers=True)
        return extension.add(1, 2)
'''


def test_a_load_inline_build_error_shows_the_compilers_error_not_its_command(tmp_path, logs, monkeypatch):
    """A real build (g++ on the C++ source load_inline writes, no CUDA) of a source without torch's
    headers (no_implicit_headers: parsing them took most of a minute, and the error is the
    source's own either way; the bindings load_inline adds then fail too, so g++ says more than
    one error): the message holds g++'s first error line with its source lines and carets, never
    the command line, and names the log that holds everything ninja printed."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    res = _run(_write(tmp_path, BUILD), 300)
    lines = res.message.splitlines()
    assert res.status == "error" and lines[0] == ("launch failed: the extension 'nvgg_test_syntax_error' did not build: "
                                                  "main.cpp:3:15: error: expected ‘;’ before ‘}’ token")
    assert "  main.cpp:3:15: error: expected ‘;’ before ‘}’ token" in lines and "        |               ^" in lines
    assert not [line for line in lines if "-MMD" in line or "ninja" in line or "FAILED" in line]
    assert len(lines) <= 2 + submission.EXCERPT_LINES
    text, _ = _log_of(res.message)
    assert "c++ -MMD" in text and "ninja: build stopped: subcommand failed." in text and "main.cpp:3:15: error" in text


# what ninja printed for a load_inline build whose CUDA source nvcc refused (an H100 machine, torch
# 2.11 with CUDA 13.0): the error comes between two command lines
NVCC_OUTPUT = """[1/3] /usr/local/cuda/bin/nvcc -MD -MF cuda.cuda.o.d -ccbin /opt/gcc/bin/gcc -DTORCH_EXTENSION_NAME=gt -isystem /usr/local/cuda/include --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a --compiler-options '-fPIC' -std=c++17 -c /root/.cache/torch_extensions/py312_cu130/gt/cuda.cu -o cuda.cuda.o 
FAILED: [code=2] cuda.cuda.o 
/usr/local/cuda/bin/nvcc -MD -MF cuda.cuda.o.d -ccbin /opt/gcc/bin/gcc -DTORCH_EXTENSION_NAME=gt -isystem /usr/local/cuda/include --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a --compiler-options '-fPIC' -std=c++17 -c /root/.cache/torch_extensions/py312_cu130/gt/cuda.cu -o cuda.cuda.o 
/root/.cache/torch_extensions/py312_cu130/gt/cuda.cu(8): error: argument of type "int64_t *" (aka "signed long *") is incompatible with parameter of type "long long *"
  void run(torch::Tensor t,torch::Tensor x,int64_t n){k<<<(int)(t.size(0)/2),256>>>(t.data_ptr<int64_t>(),x.data_ptr<float>(),(int)n);}
                                                                                    ^

1 error detected in the compilation of "/root/.cache/torch_extensions/py312_cu130/gt/cuda.cu".
[2/3] /opt/gcc/bin/g++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=gt -isystem /usr/local/cuda/include -fPIC -std=c++17 -c /root/.cache/torch_extensions/py312_cu130/gt/main.cpp -o main.o 
ninja: build stopped: subcommand failed.
"""


def test_an_nvcc_error_is_cut_to_its_line_and_context(tmp_path, logs):
    assert submission.compiler_errors(NVCC_OUTPUT) == [
        'cuda.cu(8): error: argument of type "int64_t *" (aka "signed long *") is incompatible with parameter of type '
        '"long long *"',
        "  void run(torch::Tensor t,torch::Tensor x,int64_t n){k<<<(int)(t.size(0)/2),256>>>(t.data_ptr<int64_t>(),"
        "x.data_ptr<float>(),(int)n);}",
        " " * 84 + "^"]
    said = submission.failure(RuntimeError("Error building extension 'gt': " + NVCC_OUTPUT), tmp_path / "submission.py", "1")
    assert said.splitlines()[0] == ("the extension 'gt' did not build: cuda.cu(8): error: argument of type \"int64_t *\" "
                                    "(aka \"signed long *\") is incompatible with parameter of type \"long long *\"")
    text, _ = _log_of(said)
    assert NVCC_OUTPUT.strip() in text
    # nothing names an error: the last lines that are no command
    assert submission.compiler_errors("[1/2] c++ -c a.cpp -o a.o\nsomething odd\nninja: build stopped\n") == [
        "something odd"]


def test_a_probe_error_stays_one_line(tmp_path, logs):
    from nvgg.probe import ProbeError
    try:
        raise ProbeError("probe 'gemm' has no mark 'frist': its marks are start, first_mma")
    except ProbeError as exc:
        said = submission.failure(exc, tmp_path / "submission.py", "4")
    assert said == "ProbeError: probe 'gemm' has no mark 'frist': its marks are start, first_mma" and not logs.exists()


def test_a_submission_that_returns_nothing_is_told_what_to_return(tmp_path):
    body = "def custom_kernel(data):\n    for (a, b, c) in data[0]:\n        c.zero_()\n"
    res = _run(_write(tmp_path, body), 120)
    assert res.status == "error" and res.message.startswith("custom_kernel returned None: return the outputs")
