"""Shared pytest set-up: the `gpu` marker's skip, and a clean strict-mode environment."""

import os
import sys

import pytest
import torch

# The helpers beside this file (naive_attention, accuracy) import by plain module name whatever
# pytest's import mode is.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_strict_env_for_cpu_tests(request, monkeypatch):
    # A FLASHSPLIT_STRICT=1 exported for a GPU run must not turn the CPU tests' intended
    # reference fallbacks into errors; GPU tests see the environment as it is.
    if "gpu" not in request.keywords:
        monkeypatch.delenv("FLASHSPLIT_STRICT", raising=False)
