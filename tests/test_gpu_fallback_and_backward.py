"""On the GPU: calls the native kernels cannot serve (fp32, head dim 80) take the reference path
and are still right, strict mode turns that fallback into an error that carries the gate's
reason, and the (reference) backward matches autograd through naive fp32 math."""

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashsplit  # noqa: E402
from naive_attention import naive_attention  # noqa: E402
# full_fp32_matmuls is an autouse fixture: importing it makes it apply in this module too.
from test_gpu_common import (  # noqa: E402
    assert_lse_close, assert_native, assert_out_close, fs_forward,
    full_fp32_matmuls, generator_for, max_abs_error, rand_qkv, references,  # noqa: F401
    requires_native)

pytestmark = pytest.mark.gpu

FP32_SLACK = 1e-5  # fp32 results against an fp64 reference: a few fp32 ulps of O(1) values


# ------------------------------------------------------------------------ fallback on the GPU

@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_fp32_takes_the_reference_path_and_is_correct(request, monkeypatch, causal):
    monkeypatch.delenv("FLASHSPLIT_STRICT", raising=False)  # the fallback itself is under test
    q, k, v = rand_qkv(generator_for(request), 2, 67, 301, 4, 2, 64, torch.float32)
    decision = flashsplit.explain(q, k, v, causal=causal)
    assert decision["path"] == "reference", decision
    assert "float32" in decision["reason"], decision
    out, lse = fs_forward(q, k, v, causal)
    assert out.dtype == torch.float32 and out.is_cuda
    out64, lse64 = naive_attention(q.double(), k.double(), v.double(), causal=causal)
    out32, _ = naive_attention(q, k, v, causal=causal)
    err = max_abs_error(out, out64)
    bound = 2 * max_abs_error(out32, out64) + FP32_SLACK
    assert err <= bound, f"fp32 fallback: max error {err:.3e} > {bound:.3e}"
    assert (lse.double() - lse64).abs().max().item() <= 1e-5 + 1e-5 * lse64.abs().max().item()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_head_dim_80_takes_the_reference_path_and_is_correct(request, monkeypatch, causal):
    monkeypatch.delenv("FLASHSPLIT_STRICT", raising=False)  # the fallback itself is under test
    q, k, v = rand_qkv(generator_for(request), 2, 67, 301, 4, 2, 80, torch.bfloat16)
    decision = flashsplit.explain(q, k, v, causal=causal)
    assert decision["path"] == "reference", decision
    assert "80" in decision["reason"], f"the reason should name the head dim: {decision}"
    out, lse = fs_forward(q, k, v, causal)
    ref32, ref_lse, out_lp = references(q, k, v, causal=causal)
    assert_out_close(out, ref32, out_lp, "head dim 80 fallback")
    assert_lse_close(lse.float(), ref_lse, "head dim 80 fallback")


def test_strict_turns_the_fallback_into_an_error_with_the_reason(request, monkeypatch):
    monkeypatch.delenv("FLASHSPLIT_STRICT", raising=False)
    q, k, v = rand_qkv(generator_for(request), 1, 16, 64, 2, 2, 64, torch.float32)
    reason = flashsplit.explain(q, k, v)["reason"]
    assert reason, "fp32 must be refused by the gate"
    with pytest.raises(RuntimeError) as info:
        flashsplit.flash_attn_func(q, k, v, strict=True)
    assert reason in str(info.value), f"error {str(info.value)!r} lacks the reason {reason!r}"
    monkeypatch.setenv("FLASHSPLIT_STRICT", "1")
    with pytest.raises(RuntimeError) as info:
        flashsplit.flash_attn_func(q, k, v)
    assert reason in str(info.value)


@requires_native
def test_strict_does_not_affect_a_native_call(request):
    q, k, v = rand_qkv(generator_for(request), 1, 16, 64, 2, 2, 64, torch.bfloat16)
    assert_native(q, k, v)
    out = flashsplit.flash_attn_func(q, k, v, strict=True)
    assert out.shape == q.shape and not torch.isnan(out).any()


# ------------------------------------------------------------------------ backward

def _grads_through(fn, tensors, dout, dlse=None):
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    out, lse = fn(*leaves)
    loss = (out.float() * dout.float()).sum()
    if dlse is not None:
        loss = loss + (lse.float() * dlse).sum()
    return torch.autograd.grad(loss, leaves)


@requires_native
@pytest.mark.parametrize("through_lse", [False, True], ids=["dout", "dout+dlse"])
@pytest.mark.parametrize("sq,sk", [(37, 91), (91, 37)], ids=["sq37-sk91", "sq91-sk37"])
@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_backward_matches_fp32_autograd(request, d, causal, num_splits, sq, sk, through_lse):
    if through_lse and causal and sq > sk:
        pytest.skip("rows with lse = -inf have no defined lse gradient in the naive reference")
    gen = generator_for(request)
    b, h, hk, dtype = 2, 4, 2, torch.bfloat16
    q, k, v = rand_qkv(gen, b, sq, sk, h, hk, d, dtype)
    dout = torch.randn(b, sq, h, d, device="cuda", dtype=dtype, generator=gen)
    dlse = torch.randn(b, h, sq, device="cuda", generator=gen) if through_lse else None
    assert_native(q, k, v, causal, num_splits)

    got = _grads_through(lambda *t: fs_forward(*t, causal=causal, num_splits=num_splits),
                         (q, k, v), dout, dlse)
    ref = _grads_through(lambda *t: naive_attention(*t, causal=causal),
                         (q.float(), k.float(), v.float()), dout, dlse)
    low = _grads_through(lambda *t: naive_attention(*t, causal=causal), (q, k, v), dout, dlse)
    for name, g, r, lp, t in zip(("dq", "dk", "dv"), got, ref, low, (q, k, v)):
        assert g.shape == t.shape and g.dtype == dtype, f"{name}: {g.shape} {g.dtype}"
        assert_out_close(g, r, lp, f"{name} causal={causal} G={num_splits} sq={sq} sk={sk}")
    if causal and sq > sk:
        assert (got[0][:, : sq - sk] == 0).all(), "dq of rows that see no key must be 0"
