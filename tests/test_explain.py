"""explain(): the gate's decision for a call, without computing anything."""

import pytest
import torch

import flashsplit
from flashsplit import _native, explain, reference


def _qkv(dtype=torch.bfloat16):
    return (torch.randn(1, 4, 4, 64, dtype=dtype), torch.randn(1, 300, 2, 64, dtype=dtype),
            torch.randn(1, 300, 2, 64, dtype=dtype))


def test_cpu_tensors_take_the_reference_path_and_say_why():
    decision = explain(*_qkv())
    assert set(decision) == {"path", "num_splits", "kernel", "reason", "verification", "details"}
    assert decision["path"] == "reference"
    assert decision["kernel"] == "reference"
    assert decision["num_splits"] == 1
    assert "cpu" in decision["reason"].lower()
    assert decision["details"] == {}, "kernel internals exist only on the native path"
    assert decision["verification"] == "none", "the gate refused before it looked at a GPU"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_every_cpu_dtype_is_explained(dtype):
    decision = explain(*_qkv(dtype), causal=True, num_splits=8)
    assert decision["path"] == "reference" and decision["reason"]


def test_explain_computes_nothing(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("explain must not compute attention")

    monkeypatch.setattr(reference, "attention_forward", boom)
    monkeypatch.setattr(_native, "native_forward", boom)
    assert explain(*_qkv())["path"] == "reference"


def test_explain_passes_the_call_to_the_gate(monkeypatch):
    seen = {}
    real = _native._C.explain

    def record(q, k, v, causal, dropout_p, window_left, window_right, softcap, has_alibi,
               num_splits, arch_verified):
        seen.update(causal=causal, dropout_p=dropout_p, window=(window_left, window_right),
                    softcap=softcap, has_alibi=has_alibi, num_splits=num_splits,
                    verified=arch_verified)
        return real(q, k, v, causal, dropout_p, window_left, window_right, softcap, has_alibi,
                    num_splits, arch_verified)

    monkeypatch.setattr(_native._C, "explain", record)
    q, k, v = _qkv()
    explain(q, k, v, dropout_p=0.25, window_size=(16, 3), softcap=30.0,
            alibi_slopes=torch.rand(4), num_splits=6)
    # CPU tensors: no verify stamp can apply.
    assert seen == dict(causal=False, dropout_p=0.25, window=(16, 3), softcap=30.0,
                        has_alibi=True, num_splits=6, verified=False)

    explain(q, k, v, causal=True, window_size=(16, 5))
    # Causal already bounds the right side, so the gate sees no right window.
    assert seen["causal"] is True and seen["window"] == (16, -1)


def test_explain_with_strict_does_not_raise():
    assert flashsplit.explain(*_qkv(), strict=True)["path"] == "reference"
