"""The reference backward: gradcheck in fp64 for every feature (and through lse), low-precision
gradients against autograd through plain torch math, determinism and dtypes."""

import pytest
import torch

from flashsplit import flash_attn_func

from accuracy import assert_within_tolerance
from naive_attention import naive_attention


def _qkv(b, sq, sk, h, hk, d, dtype, requires_grad=True):
    return tuple(torch.randn(b, s, n, d, dtype=dtype, requires_grad=requires_grad)
                 for s, n in ((sq, h), (sk, hk), (sk, hk)))


# (name, shape (b, sq, sk, h, hk, d), kwargs). Small: gradcheck builds full Jacobians.
VARIANTS = [
    ("plain", (2, 4, 5, 2, 2, 4), {}),
    ("causal sq<sk", (1, 3, 6, 2, 1, 4), {"causal": True}),
    ("causal sq>sk", (1, 6, 4, 2, 2, 4), {"causal": True}),
    ("gqa", (1, 4, 5, 4, 2, 4), {}),
    ("mqa", (1, 4, 5, 3, 1, 4), {"causal": True}),
    ("softcap", (1, 4, 5, 2, 1, 4), {"softcap": 0.7}),
    ("alibi h", (1, 5, 5, 2, 2, 4), {"alibi_slopes": torch.tensor([0.3, 1.1])}),
    ("alibi bh", (2, 4, 6, 2, 1, 4), {"alibi_slopes": torch.rand(2, 2), "causal": True}),
    ("window", (1, 6, 6, 2, 1, 4), {"window_size": (2, 1)}),
    ("window causal", (1, 5, 7, 2, 2, 4), {"window_size": (2, -1), "causal": True}),
    ("everything", (2, 5, 6, 4, 2, 4),
     {"window_size": (3, -1), "causal": True, "softcap": 1.5, "alibi_slopes": torch.rand(4),
      "softmax_scale": 0.8}),
]


def _has_empty_rows(shape, kwargs):
    _, sq, sk, _, _, _ = shape
    return kwargs.get("causal", False) and sq > sk


@pytest.mark.parametrize("name, shape, kwargs", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_gradcheck_out(name, shape, kwargs):
    b, sq, sk, h, hk, d = shape
    inputs = _qkv(b, sq, sk, h, hk, d, torch.float64)
    assert torch.autograd.gradcheck(lambda q, k, v: flash_attn_func(q, k, v, **kwargs), inputs)


@pytest.mark.parametrize("name, shape, kwargs",
                         [v for v in VARIANTS if not _has_empty_rows(v[1], v[2])],
                         ids=[v[0] for v in VARIANTS if not _has_empty_rows(v[1], v[2])])
def test_gradcheck_out_and_lse(name, shape, kwargs):
    # lse of a row that sees no key is -inf, whose finite differences are NaN: those variants
    # are checked through out only (above).
    b, sq, sk, h, hk, d = shape
    inputs = _qkv(b, sq, sk, h, hk, d, torch.float64)

    def fn(q, k, v):
        out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True, **kwargs)
        return out, lse

    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_with_a_value_head_dim_of_its_own(causal):
    """v of head dim 3 beside q and k of 5: dv takes v's shape, dq and dk q's and k's."""
    q, k, _ = _qkv(1, 4, 6, 2, 1, 5, torch.float64)
    v = torch.randn(1, 6, 1, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)[:2],
        (q, k, v))


def test_gradcheck_lse_only():
    inputs = _qkv(1, 4, 6, 2, 1, 4, torch.float64)
    fn = lambda q, k, v: flash_attn_func(q, k, v, causal=True, return_attn_probs=True)[1]
    assert torch.autograd.gradcheck(fn, inputs)


def test_empty_rows_get_zero_gradient_and_no_nan():
    q, k, v = _qkv(1, 8, 3, 2, 1, 8, torch.float32)
    out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    finite_lse = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    dq, dk, dv = torch.autograd.grad(out.sum() + finite_lse.sum(), (q, k, v))
    assert torch.isfinite(dq).all() and torch.isfinite(dk).all() and torch.isfinite(dv).all()
    assert torch.equal(dq[:, :5], torch.zeros_like(dq[:, :5]))
    assert (dq[:, 5:].abs() > 0).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, hk", [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("sq, sk", [(33, 33), (17, 64), (40, 23)])
@pytest.mark.parametrize("with_lse", [False, True])
def test_low_precision_gradients(dtype, causal, h, hk, sq, sk, with_lse):
    """flash-attn's rule: error vs fp64 autograd <= 2 x error of autograd run in dtype."""
    q, k, v = _qkv(2, sq, sk, h, hk, 32, dtype)
    dout = torch.randn(q.shape, dtype=dtype)
    dlse = torch.randn(2, h, sq, dtype=torch.float32)
    rows = slice(max(0, sq - sk), None) if causal else slice(None)  # rows that see a key

    def loss(out, lse):
        value = (out.float() * dout.float()).sum()
        if with_lse:
            value = value + (lse.float()[..., rows] * dlse[..., rows]).sum()
        return value

    out, lse, _ = flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
    grads = torch.autograd.grad(loss(out, lse), (q, k, v))
    hi_inputs = [t.detach().double().requires_grad_() for t in (q, k, v)]
    grads_hi = torch.autograd.grad(loss(*naive_attention(*hi_inputs, causal=causal)), hi_inputs)
    grads_lo = torch.autograd.grad(loss(*naive_attention(q, k, v, causal=causal)), (q, k, v))
    for name, g, hi, lo, t in zip("qkv", grads, grads_hi, grads_lo, (q, k, v)):
        assert g.dtype == t.dtype and g.shape == t.shape
        assert_within_tolerance(g, hi, lo, dtype, f"d{name}")


@pytest.mark.parametrize("kwargs", [{"softcap": 3.0}, {"window_size": (5, 2)},
                                    {"alibi_slopes": torch.rand(4), "causal": True}])
def test_low_precision_gradients_with_features(kwargs):
    dtype = torch.bfloat16
    q, k, v = _qkv(2, 29, 37, 4, 2, 32, dtype)
    dout = torch.randn(q.shape, dtype=dtype)
    out = flash_attn_func(q, k, v, **kwargs)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    hi_inputs = [t.detach().double().requires_grad_() for t in (q, k, v)]
    grads_hi = torch.autograd.grad(naive_attention(*hi_inputs, **kwargs)[0], hi_inputs,
                                   dout.double())
    grads_lo = torch.autograd.grad(naive_attention(q, k, v, **kwargs)[0], (q, k, v), dout)
    for name, g, hi, lo in zip("qkv", grads, grads_hi, grads_lo):
        assert_within_tolerance(g, hi, lo, dtype, f"d{name}")


def test_backward_is_deterministic():
    q, k, v = _qkv(2, 50, 70, 4, 1, 32, torch.bfloat16)
    dout = torch.randn(q.shape, dtype=torch.bfloat16)
    first = torch.autograd.grad(flash_attn_func(q, k, v, causal=True), (q, k, v), dout)
    again = torch.autograd.grad(flash_attn_func(q, k, v, causal=True, deterministic=True),
                                (q, k, v), dout)
    for a, b in zip(first, again):
        assert torch.equal(a, b)


def test_only_the_inputs_that_need_it_get_gradients():
    q, k, v = _qkv(1, 4, 4, 2, 2, 8, torch.float32)
    k.requires_grad_(False)
    out = flash_attn_func(q, k, v)
    out.sum().backward()
    assert q.grad is not None and v.grad is not None and k.grad is None
