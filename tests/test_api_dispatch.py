"""Dispatch: return forms, the reference fallback, strict mode, and the native path's wiring."""

import importlib.metadata
import re

import pytest
import torch

import flashsplit
from flashsplit import _native, explain, flash_attn_func, ops, reference_attention

from accuracy import assert_within_tolerance, naive_pair
from naive_attention import naive_attention


def _qkv(b=2, sq=6, sk=9, h=4, hk=2, d=16, dtype=torch.bfloat16, requires_grad=False):
    return tuple(torch.randn(b, s, n, d, dtype=dtype, requires_grad=requires_grad)
                 for s, n in ((sq, h), (sk, hk), (sk, hk)))


def test_public_names_and_version():
    assert callable(flashsplit.flash_attn_func)
    assert callable(flashsplit.explain)
    assert callable(flashsplit.reference_attention)
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", flashsplit.__version__)


def test_version_matches_installed_metadata():
    try:
        installed = importlib.metadata.version("flashsplit")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("flashsplit is imported from a source tree, not an installed distribution")
    assert installed == flashsplit.__version__


def test_build_info_describes_the_extension():
    info = _native.build_info()
    assert set(info) >= {"gpu_kernels_built", "archs", "head_dims", "tested_archs"}
    assert isinstance(info["gpu_kernels_built"], bool)
    assert all(isinstance(x, int) for x in info["archs"] + info["head_dims"])


@pytest.mark.parametrize("dtype, lse_dtype", [
    (torch.bfloat16, torch.float32), (torch.float16, torch.float32),
    (torch.float32, torch.float32), (torch.float64, torch.float64)])
def test_return_forms(dtype, lse_dtype):
    q, k, v = _qkv(dtype=dtype)
    out = flash_attn_func(q, k, v)
    assert isinstance(out, torch.Tensor)
    assert out.shape == q.shape and out.dtype == dtype
    triple = flash_attn_func(q, k, v, return_attn_probs=True)
    assert isinstance(triple, tuple) and len(triple) == 3
    out2, lse, probs = triple
    assert probs is None
    assert lse.shape == (2, 4, 6) and lse.dtype == lse_dtype
    assert torch.equal(out, out2)


def test_cpu_call_falls_back_and_is_right():
    q, k, v = _qkv()
    out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    (out_hi, lse_hi), (out_lo, lse_lo) = naive_pair(q, k, v, causal=True)
    assert_within_tolerance(out, out_hi, out_lo, q.dtype, "out")
    assert_within_tolerance(lse, lse_hi, lse_lo, q.dtype, "lse")


def test_reference_attention_matches_flash_attn_func_on_cpu():
    q, k, v = _qkv(dtype=torch.float32)
    out, lse, _ = flash_attn_func(q, k, v, causal=True, softcap=5.0, return_attn_probs=True)
    ref_out, ref_lse = reference_attention(q, k, v, causal=True, softcap=5.0)
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


def test_strict_raises_with_the_gates_reason():
    q, k, v = _qkv()
    reason = explain(q, k, v)["reason"]
    assert "cpu" in reason.lower()
    with pytest.raises(RuntimeError, match=re.escape(reason)):
        flash_attn_func(q, k, v, strict=True)


@pytest.mark.parametrize("value", ["1", "true", "ON"])
def test_strict_env_var_raises(monkeypatch, value):
    q, k, v = _qkv()
    monkeypatch.setenv("FLASHSPLIT_STRICT", value)
    with pytest.raises(RuntimeError, match="cpu|CPU"):
        flash_attn_func(q, k, v)


@pytest.mark.parametrize("value", ["0", "", "no"])
def test_strict_env_var_off_values_fall_back(monkeypatch, value):
    q, k, v = _qkv()
    monkeypatch.setenv("FLASHSPLIT_STRICT", value)
    out = flash_attn_func(q, k, v)
    assert torch.isfinite(out).all()


def test_deterministic_is_accepted_and_changes_nothing():
    q, k, v = _qkv()
    assert torch.equal(flash_attn_func(q, k, v, deterministic=True), flash_attn_func(q, k, v))


class _FakeNative:
    """Stands in for the gate and kernels to check the native branch's wiring on a CPU machine."""

    def __init__(self):
        self.run_args = None

    def run(self, q, k, v, softmax_scale, causal, dropout_p, window_left, window_right, softcap,
            has_alibi, num_splits):
        self.run_args = (softmax_scale, causal, num_splits)
        # What a kernel returns: out like q, lse rounded to fp32; computed by the naive reference.
        out, lse = naive_attention(q, k, v, softmax_scale, causal)
        return out, lse.float()


def test_native_branch_calls_forward_and_backward_uses_its_lse(monkeypatch):
    fake = _FakeNative()
    monkeypatch.setattr(_native, "run", fake.run)
    q, k, v = _qkv(dtype=torch.float64, requires_grad=True)
    out = flash_attn_func(q, k, v, causal=True, softmax_scale=0.3, num_splits=4, strict=True)
    assert fake.run_args == (0.3, True, 4)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))

    monkeypatch.undo()
    ref = flash_attn_func(q, k, v, causal=True, softmax_scale=0.3)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    ref_grads = torch.autograd.grad(ref, (q, k, v), torch.ones_like(ref))
    for g, r in zip(grads, ref_grads):
        # The backward recomputes P from the fp32-rounded native lse: errors ~1e-7 (at most
        # 6e-7 relative to |grad| + 1 over 200 random draws), so 1e-5 leaves a 10x margin.
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5)


def test_eager_inference_skips_the_dispatcher_and_gives_the_same_result(monkeypatch):
    q, k, v = _qkv()
    through_op = flash_attn_func(q, k, v, causal=True)
    direct = []
    impl = ops.attn_fwd_impl
    monkeypatch.setattr(ops, "attn_fwd_impl", lambda *a: direct.append(1) or impl(*a))
    assert torch.equal(flash_attn_func(q, k, v, causal=True), through_op)
    assert direct == [1]


@pytest.mark.parametrize("context", ["grad", "fake_mode", "profiler", "vmap"])
def test_the_dispatcher_is_kept_where_it_has_work(monkeypatch, context):
    from torch._subclasses.fake_tensor import FakeTensorMode
    direct = []
    impl = ops.attn_fwd_impl
    monkeypatch.setattr(ops, "attn_fwd_impl", lambda *a: direct.append(1) or impl(*a))
    q, k, v = _qkv()
    if context == "grad":
        flash_attn_func(q.requires_grad_(), k, v).sum().backward()
        assert q.grad is not None
    elif context == "fake_mode":
        with FakeTensorMode() as mode:
            fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
            assert flash_attn_func(fq, fk, fv).shape == q.shape
    elif context == "profiler":
        with torch.profiler.profile() as prof:
            flash_attn_func(q, k, v)
        assert any("flashsplit::fwd" in e.name for e in prof.events())
    else:
        out = torch.vmap(lambda x: flash_attn_func(x, k, v))(q[None].expand(3, *q.shape))
        assert out.shape == (3,) + q.shape
    assert direct == [], f"{context}: the call skipped the dispatcher"
