"""The reference fallback's forward against the independent naive reference, every feature."""

import pytest
import torch

from flashsplit import flash_attn_func, reference_attention

from accuracy import assert_within_tolerance, naive_pair

DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64]
# (sq, sk): equal, odd, sq > sk (causal rows that see nothing), sq < sk (decode-like).
LENGTHS = [(1, 1), (16, 16), (33, 17), (7, 130), (1, 77), (64, 31)]
# (h, hk): MHA, GQA, MQA.
HEADS = [(4, 4), (6, 2), (4, 1)]


def _qkv(b, sq, sk, h, hk, d, dtype):
    return (torch.randn(b, sq, h, d, dtype=dtype), torch.randn(b, sk, hk, d, dtype=dtype),
            torch.randn(b, sk, hk, d, dtype=dtype))


def _check(q, k, v, **kwargs):
    """flash_attn_func's (out, lse) within flash-attn's tolerance of the naive reference."""
    out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True, **kwargs)
    naive_kwargs = {key: kwargs[key] for key in
                    ("softmax_scale", "causal", "window_size", "softcap", "alibi_slopes")
                    if key in kwargs}
    (out_hi, lse_hi), (out_lo, lse_lo) = naive_pair(q, k, v, **naive_kwargs)
    assert_within_tolerance(out, out_hi, out_lo, q.dtype, "out")
    assert_within_tolerance(lse, lse_hi, lse_lo, q.dtype, "lse")
    return out, lse


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sq, sk", LENGTHS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, hk", HEADS)
def test_forward_matches_naive(dtype, sq, sk, causal, h, hk):
    _check(*_qkv(2, sq, sk, h, hk, 32, dtype), causal=causal)


@pytest.mark.parametrize("d", [8, 64, 128, 80])
def test_head_dims_and_explicit_scale(d):
    q, k, v = _qkv(1, 9, 21, 2, 1, d, torch.bfloat16)
    _check(q, k, v, softmax_scale=0.7 / d ** 0.5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d, dv", [(192, 128), (16, 40)])
def test_value_head_dim_of_its_own(d, dv, causal):
    """v narrower or wider than q and k: the output takes v's head dim."""
    q, k, _ = _qkv(2, 11, 23, 4, 2, d, torch.float32)
    v = torch.randn(2, 23, 2, dv)
    out, _ = _check(q, k, v, causal=causal)
    assert out.shape == (2, 11, 4, dv)


@pytest.mark.parametrize("window_size", [(4, -1), (-1, 3), (0, 0), (5, 2), (40, 40)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq, sk", [(19, 19), (23, 11), (6, 50)])
def test_sliding_window(window_size, causal, sq, sk):
    _check(*_qkv(2, sq, sk, 4, 2, 16, torch.bfloat16), causal=causal, window_size=window_size)


@pytest.mark.parametrize("softcap", [0.5, 5.0, 50.0])
@pytest.mark.parametrize("causal", [False, True])
def test_softcap(softcap, causal):
    q, k, v = _qkv(2, 17, 29, 4, 2, 32, torch.bfloat16)
    _check(q * 3, k * 3, v, causal=causal, softcap=softcap)


@pytest.mark.parametrize("slopes_shape", ["h", "bh"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq, sk", [(13, 13), (21, 8), (5, 40)])
def test_alibi(slopes_shape, causal, sq, sk):
    b, h = 2, 6
    q, k, v = _qkv(b, sq, sk, h, 3, 32, torch.bfloat16)
    slopes = torch.rand(h if slopes_shape == "h" else (b, h), dtype=torch.float32)
    _check(q, k, v, causal=causal, alibi_slopes=slopes)


def test_alibi_bh_uses_each_batchs_slopes():
    # (b, h) slopes must differ from using batch 0's slopes everywhere, or the test above could
    # pass with the batch dimension ignored.
    q, k, v = _qkv(2, 8, 8, 2, 2, 16, torch.float64)
    slopes = torch.tensor([[0.1, 0.2], [3.0, 4.0]])
    out = flash_attn_func(q, k, v, alibi_slopes=slopes)
    out_first = flash_attn_func(q, k, v, alibi_slopes=slopes[0])
    assert (out[1] - out_first[1]).abs().max() > 1e-3
    torch.testing.assert_close(out[0], out_first[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_all_features_together(dtype):
    b, h = 2, 8
    q, k, v = _qkv(b, 37, 45, h, 2, 32, dtype)
    _check(q, k, v, causal=True, window_size=(9, -1), softcap=4.0,
           alibi_slopes=torch.rand(b, h), softmax_scale=0.2)


def test_rows_that_see_no_key_give_zero_and_minus_inf():
    # Causal with sq > sk: rows i < sq - sk see no key (bottom-right alignment).
    q, k, v = _qkv(1, 10, 4, 2, 1, 16, torch.float32)
    out, lse = _check(q, k, v, causal=True)
    assert torch.equal(out[:, :6], torch.zeros_like(out[:, :6]))
    assert torch.isneginf(lse[..., :6]).all()
    assert torch.isfinite(lse[..., 6:]).all()
    assert (out[:, 6:].abs() > 0).any()


def test_window_can_empty_a_row():
    # Non-causal window (0, 0) with sq > sk: row i sees only key i + sk - sq, which does not
    # exist for the first sq - sk rows.
    q, k, v = _qkv(1, 7, 3, 1, 1, 8, torch.float64)
    out, lse = _check(q, k, v, window_size=(0, 0))
    assert torch.isneginf(lse[..., :4]).all() and torch.isfinite(lse[..., 4:]).all()
    # Each remaining row sees exactly one key, so its output is that key's value row.
    torch.testing.assert_close(out[0, 4:, 0], v[0, :, 0], rtol=0, atol=1e-12)


def test_empty_key_and_query_lengths():
    q, k, v = _qkv(2, 3, 0, 2, 1, 8, torch.float32)
    out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True)
    assert torch.equal(out, torch.zeros_like(q)) and torch.isneginf(lse).all()
    q, k, v = _qkv(2, 0, 5, 2, 1, 8, torch.float32)
    out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True)
    assert out.shape == (2, 0, 2, 8) and lse.shape == (2, 2, 0)


def test_strided_inputs():
    # Views with free strides in every dim but the last (e.g. slices of a packed qkv tensor).
    qkv = torch.randn(2, 11, 3, 4, 16, dtype=torch.bfloat16)
    q, k, v = qkv.unbind(dim=2)
    assert not q.is_contiguous()
    _check(q, k, v, causal=True)


def test_reference_attention_defaults_are_flash_attns():
    q, k, v = _qkv(1, 5, 6, 2, 2, 16, torch.float64)
    out, lse = reference_attention(q, k, v)
    (out_hi, lse_hi), _ = naive_pair(q, k, v)
    torch.testing.assert_close(out, out_hi, rtol=0, atol=1e-12)
    torch.testing.assert_close(lse, lse_hi, rtol=0, atol=1e-12)
