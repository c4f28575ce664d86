import pytest

from nvgg import profiles
from nvgg.errors import NvggError


def test_all_profiles_load_with_limits():
    ps = profiles.all_profiles()
    assert set(ps) == {"b200", "h100", "h200"}
    assert ps["b200"].sm_count == 148 and ps["h100"].sm_count == 132 == ps["h200"].sm_count
    assert ps["b200"].limits.tmem_bytes_per_sm == 256 * 1024
    assert ps["h100"].limits.tmem_bytes_per_sm is None
    for p in ps.values():
        assert p.limits.smem_per_block_bytes == 227 * 1024 and p.limits.registers_per_thread == 255


def test_data_path_is_fp16_on_hopper_fp4_on_blackwell():
    assert profiles.get("b200").data_path == "fp4"
    assert profiles.get("h100").data_path == "fp16" and profiles.get("h200").data_path == "fp16"


def test_unknown_profile_lists_known():
    with pytest.raises(NvggError, match="unknown profile 'a100'.*b200, h100, h200"):
        profiles.get("a100")


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA B200", "b200"), ("Tesla T4", None),
])
def test_nvml_name_mapping(name, expected):
    got = profiles.for_gpu_name(name)
    assert (got.name if got else None) == expected


def test_resolve_without_gpu_asks_for_profile(monkeypatch):
    monkeypatch.setattr(profiles, "gpu_name", lambda: None)
    with pytest.raises(NvggError, match="name one"):
        profiles.resolve(None)
    monkeypatch.setattr(profiles, "gpu_name", lambda: "Quadro X")
    with pytest.raises(NvggError, match="no profile matches the GPU 'Quadro X'"):
        profiles.resolve(None)
