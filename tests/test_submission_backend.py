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
def test_broken_submissions_fail_with_their_reason(tmp_path, body, words):
    res = _run(_write(tmp_path, body), 120)
    assert res.status in ("error", "wrong") and words in res.message


def test_hanging_submission_times_out(tmp_path):
    body = "import time\ndef custom_kernel(data):\n    time.sleep(60)\n"
    res = _run(_write(tmp_path, body), 15)
    assert res.status == "error" and "timed out after 15 s" in res.message


def test_missing_submission_file():
    with pytest.raises(NvggError, match="does not exist"):
        submission.load("/nonexistent/submission.py")
    res = _run("/nonexistent/submission.py", 60)
    assert res.status == "error" and "does not exist" in res.message
