import pytest
import torch


def _capability():
    return torch.cuda.get_device_capability() if torch.cuda.is_available() else None


def pytest_collection_modifyitems(config, items):
    """`gpu` tests need a CUDA GPU, `sm90` tests an H100/H200 (sm_90), `b200` tests a B200
    (sm_100): elsewhere each is skipped with the reason, never run."""
    capability = _capability()
    needs = {
        "gpu": (capability is not None, "needs a CUDA GPU (run with -m gpu on a GPU machine)"),
        "sm90": (capability == (9, 0), "needs an sm_90 GPU (H100/H200)"),
        "b200": (capability == (10, 0), "needs a B200 (sm_100): run with -m b200 there"),
    }
    for item in items:
        for marker, (met, reason) in needs.items():
            if marker in item.keywords and not met:
                item.add_marker(pytest.mark.skip(reason=reason))
                break
