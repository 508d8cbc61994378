"""Verify stamps: written on a passed `python -m flashsplit.verify`, matched to the GPU (name and
arch) and the build, removed by a failed run; and the verify command without a GPU."""

import json

import pytest

from flashsplit import _stamp, verify


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """A stamp folder of its own and a device identity the test controls."""
    monkeypatch.setenv("FLASHSPLIT_CACHE_DIR", str(tmp_path))
    identity = {"gpu": "AMD Instinct MI300X", "arch": "gfx942"}
    monkeypatch.setattr(_stamp, "device_identity", lambda index: dict(identity))
    monkeypatch.setattr(_stamp, "_build_id", lambda: "build-a")
    _stamp._verified.clear()
    yield identity
    _stamp._verified.clear()


def test_a_passed_run_admits_this_gpu_and_build_only(fake_gpu, monkeypatch):
    assert not _stamp.verified_here(0)
    path = _stamp.record(0, passed=True, cases=504)
    assert _stamp.verified_here(0)
    stamp, = json.load(open(path))["stamps"]
    assert stamp["gpu"] == "AMD Instinct MI300X" and stamp["arch"] == "gfx942"
    assert stamp["build_id"] == "build-a" and stamp["cases"] == 504
    # Another build, or another GPU of another arch, is not admitted by it.
    monkeypatch.setattr(_stamp, "_build_id", lambda: "build-b")
    _stamp._verified.clear()
    assert not _stamp.verified_here(0)
    monkeypatch.setattr(_stamp, "_build_id", lambda: "build-a")
    fake_gpu["arch"] = "gfx950"
    _stamp._verified.clear()
    assert not _stamp.verified_here(0)


def test_a_failed_run_removes_the_stamp_and_keeps_the_others(fake_gpu):
    _stamp.record(0, passed=True, cases=10)
    fake_gpu["gpu"] = "NVIDIA A100-SXM4-80GB"
    fake_gpu["arch"] = "sm_80"
    _stamp.record(0, passed=True, cases=10)
    _stamp.record(0, passed=False, cases=10)
    assert not _stamp.verified_here(0)
    assert [s["arch"] for s in _stamp.read_stamps()] == ["gfx942"]


def test_an_unreadable_stamp_file_admits_nothing(fake_gpu, tmp_path):
    (tmp_path / _stamp.STAMP_FILE).write_text("{not json")
    assert _stamp.read_stamps() == []
    assert not _stamp.verified_here(0)
    (tmp_path / _stamp.STAMP_FILE).write_text(json.dumps({"format": 99, "stamps": []}))
    assert _stamp.read_stamps() == []


def test_verify_without_a_gpu_says_so_and_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(verify.torch.cuda, "is_available", lambda: False)
    assert verify.main([]) == 2
    assert "no GPU" in capsys.readouterr().out
