import pytest

from nvgg import cases
from nvgg.errors import NvggError


def test_builtin_ids_and_kinds():
    ids = [c.id for c in cases.builtin()]
    assert ids == ["1", "2", "3", "4"] + [f"test-{i}" for i in range(1, 11)]
    assert [c.id for c in cases.benchmarks()] == ["1", "2", "3", "4"]
    assert all(c.seed == 1111 for c in cases.builtin())


def test_benchmark_shapes_match_the_competition():
    c1 = cases.get("1")
    assert c1.m == (80, 176, 128, 72, 64, 248, 96, 160) and set(c1.n) == {4096} and set(c1.k) == {7168}
    c2 = cases.get("2")
    assert c2.m == (40, 76, 168, 72, 164, 148, 196, 160) and set(c2.n) == {7168} and set(c2.k) == {2048}
    assert cases.get("3").groups == [(192, 3072, 4096), (320, 3072, 4096)]
    assert cases.get("4").groups == [(128, 4096, 1536), (384, 4096, 1536)]
    assert cases.get("test-9").groups == [(40, 512, 256), (56, 384, 256), (384, 256, 256), (512, 128, 256)]


def test_flops_and_bytes_by_hand():
    c = cases.get("3")
    assert c.flops == 2 * (192 + 320) * 3072 * 4096
    # A and B at k/2 bytes a row, scales at k/16 bytes a row, C as fp16
    assert c.bytes == (512 + 2 * 3072) * 2048 + (512 + 2 * 3072) * 256 + 512 * 3072 * 2


def test_parse_shape_competition_line():
    c = cases.parse_shape("m: [64, 128]; n: [256, 256]; k: [512, 512]; g: 2; seed: 7")
    assert c.groups == [(64, 256, 512), (128, 256, 512)] and c.seed == 7 and c.g == 2


@pytest.mark.parametrize("spec, words", [
    ("m: [64, 128]; n: [256]; k: [512, 512]; g: 3", "entries but g is 3"),
    ("m: [64]; n: [256]", "lacks k"),
    ("m = 64", "malformed"),
    ("m: [64]; n: [256]; k: [100]", "not a multiple of 32"),
    ("m: [0]; n: [256]; k: [256]", "positive"),
    ("m: [x]; n: [256]; k: [256]", "list of integers"),
])
def test_parse_shape_errors(spec, words):
    with pytest.raises(NvggError, match=words):
        cases.parse_shape(spec)


def test_unknown_case_lists_known_ids():
    with pytest.raises(NvggError, match="unknown case '9'.*test-10"):
        cases.get("9")


def test_user_case_file(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("cases:\n  tiny: {m: [8, 16], n: 256, k: 512, seed: 3}\n")
    c = cases.get("tiny", f)
    assert c.groups == [(8, 256, 512), (16, 256, 512)] and c.seed == 3 and c.kind == "user"
    assert [x.id for x in cases.select("1,tiny", f)] == ["1", "tiny"]


@pytest.mark.parametrize("text, words", [
    ("cases: [1, 2", "not valid YAML"),
    ("foo: 1", "top-level 'cases:'"),
    ("cases:\n  a: {m: 1, n: 2}\n", "needs m, n and k"),
    ("cases:\n  a: {m: 1, n: 256, k: 256, bogus: 1}\n", "unknown keys"),
    ("cases:\n  '1': {m: 1, n: 256, k: 256}\n", "clashes with a built-in"),
])
def test_bad_case_files(tmp_path, text, words):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(NvggError, match=words):
        cases.all_cases(f)


def test_missing_case_file():
    with pytest.raises(NvggError, match="does not exist"):
        cases.all_cases("/nonexistent/cases.yaml")
