"""Dropout on the reference path: the mask's statistics, determinism, and the backward's reuse
of exactly the forward's mask."""

import math

import pytest
import torch

from flashsplit import flash_attn_func, interface, reference, reference_attention
from naive_attention import naive_attention


def _qkv(b=2, sq=70, sk=90, h=4, hk=2, d=16, dtype=torch.float64, requires_grad=False):
    return tuple(torch.randn(b, s, n, d, dtype=dtype, requires_grad=requires_grad)
                 for s, n in ((sq, h), (sk, hk), (sk, hk)))


def _multipliers(seed, p, b, h, sq, sk, dtype=torch.float64):
    keep = reference.dropout_keep_mask(seed, p, b, h, 0, sq, sk, torch.device("cpu"))
    return keep.to(dtype) / (1.0 - p)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_fraction_is_one_minus_p(p):
    b, h, sq, sk = 2, 4, 200, 300
    keep = reference.dropout_keep_mask(7, p, b, h, 0, sq, sk, torch.device("cpu"))
    n = keep.numel()
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(keep.float().mean().item() - (1 - p)) < 6 * sigma
    # Each head and each 64-row block gets its own random numbers.
    assert not torch.equal(keep[0, 0], keep[0, 1])
    assert not torch.equal(keep[0, 0, :64], keep[0, 0, 64:128])
    assert not torch.equal(keep[0], keep[1])


def test_mask_of_any_row_range_is_a_slice_of_the_whole():
    whole = reference.dropout_keep_mask(3, 0.3, 1, 2, 0, 200, 40, torch.device("cpu"))
    for r0, r1 in [(0, 1), (5, 64), (63, 65), (64, 128), (100, 200), (130, 131)]:
        part = reference.dropout_keep_mask(3, 0.3, 1, 2, r0, r1, 40, torch.device("cpu"))
        assert torch.equal(part, whole[:, :, r0:r1])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, hk", [(4, 4), (4, 2), (4, 1)])
def test_output_is_naive_attention_with_the_same_mask(causal, h, hk):
    p, seed = 0.3, 1234
    q, k, v = _qkv(h=h, hk=hk)
    out, lse = reference_attention(q, k, v, dropout_p=p, causal=causal, dropout_seed=seed)
    mask = _multipliers(seed, p, 2, h, q.shape[1], k.shape[1])
    ref_out, ref_lse = naive_attention(q, k, v, causal=causal, dropout_mask=mask)
    torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
    # Dropout leaves the softmax normaliser alone.
    torch.testing.assert_close(lse, ref_lse, rtol=0, atol=1e-12)
    no_drop, _ = naive_attention(q, k, v, causal=causal)
    assert (out - no_drop).abs().max() > 1e-2


def test_dropout_is_unbiased_over_seeds():
    p, runs = 0.4, 400
    q, k, v = _qkv(b=1, sq=3, sk=20, h=2, hk=1, d=4)
    outs = torch.stack([reference_attention(q, k, v, dropout_p=p, dropout_seed=s)[0]
                        for s in range(runs)])
    expected, _ = naive_attention(q, k, v)
    stderr = outs.std(dim=0) / math.sqrt(runs)
    assert ((outs.mean(dim=0) - expected).abs() <= 6 * stderr + 1e-9).all()


def test_flash_attn_func_dropout_follows_torch_manual_seed():
    q, k, v = _qkv(dtype=torch.float32)
    torch.manual_seed(0)
    first = flash_attn_func(q, k, v, dropout_p=0.2)
    torch.manual_seed(0)
    again = flash_attn_func(q, k, v, dropout_p=0.2)
    different = flash_attn_func(q, k, v, dropout_p=0.2)
    assert torch.equal(first, again)
    assert not torch.equal(first, different)


def test_mask_does_not_depend_on_chunking(monkeypatch):
    q, k, v = _qkv(sq=150, requires_grad=True)

    def run():
        out, lse = torch.ops.flashsplit.fwd(q, k, v, 0.25, True, -1, -1, 0.0, None, 0.3, 99, 0,
                                            False)
        grads = torch.autograd.grad((out * out).sum() + lse.sum(), (q, k, v))
        return (out, lse) + grads

    whole = run()
    # 3 rows per chunk: chunks straddle the 64-row dropout blocks.
    monkeypatch.setattr(reference, "CHUNK_SCORE_ELEMENTS", 3 * 2 * 4 * 90)
    assert reference.chunk_rows(2, 4, 150, 90) == 3
    for a, b in zip(whole, run()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_uses_the_forwards_mask(causal):
    """Gradients of the op with a fixed seed equal autograd through naive math with that mask."""
    p, seed = 0.25, 4321
    q, k, v = _qkv(h=4, hk=2, requires_grad=True)
    out, lse = torch.ops.flashsplit.fwd(q, k, v, 0.25, causal, -1, -1, 0.0, None, p, seed, 0,
                                        False)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    mask = _multipliers(seed, p, 2, 4, q.shape[1], k.shape[1])
    ref_out, _ = naive_attention(q, k, v, 0.25, causal, dropout_mask=mask)
    ref_grads = torch.autograd.grad(ref_out, (q, k, v), dout)
    torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
    for name, g, r in zip("qkv", grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10, msg=f"d{name}")


def test_flash_attn_func_backward_matches_its_forward_mask():
    """End to end: the seed flash_attn_func draws reaches the backward unchanged."""
    p = 0.3
    q, k, v = _qkv(requires_grad=True)
    torch.manual_seed(5)
    out = flash_attn_func(q, k, v, dropout_p=p, causal=True)
    torch.manual_seed(5)
    seed = interface.draw_dropout_seed(p)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    mask = _multipliers(seed, p, 2, 4, q.shape[1], k.shape[1])
    ref_out, _ = naive_attention(q, k, v, causal=True, dropout_mask=mask)
    ref_grads = torch.autograd.grad(ref_out, (q, k, v), dout)
    torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10)


def test_gradcheck_with_dropout():
    q, k, v = _qkv(b=1, sq=5, sk=6, h=2, hk=1, d=4, requires_grad=True)
    fn = lambda q, k, v: torch.ops.flashsplit.fwd(q, k, v, 0.5, False, -1, -1, 0.0, None, 0.3,
                                                  11, 0, False)
    assert torch.autograd.gradcheck(fn, (q, k, v))
