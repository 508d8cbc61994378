"""Bad input is refused before any work, with an error naming the argument and its value."""

import sys
import time

import numpy as np
import pytest
import torch

from flashsplit import explain, flash_attn_func, reference_attention


def _qkv(b=2, sq=5, sk=7, h=4, hk=2, d=8, dtype=torch.float32):
    return (torch.randn(b, sq, h, d, dtype=dtype), torch.randn(b, sk, hk, d, dtype=dtype),
            torch.randn(b, sk, hk, d, dtype=dtype))


@pytest.fixture(params=["flash_attn_func", "explain"])
def entry(request):
    # Both public entry points must validate identically.
    return {"flash_attn_func": flash_attn_func, "explain": explain}[request.param]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_rank_other_than_4_is_refused(entry, which):
    args = list(_qkv())
    name = "qkv"[which]
    args[which] = args[which][0]  # drop the batch dim: rank 3
    with pytest.raises(ValueError, match=rf"{name} must have 4 dims.*got shape \("):
        entry(*args)


def test_non_tensor_is_refused(entry):
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="k must be a torch.Tensor, got list"):
        entry(q, k.tolist(), v)


def test_integer_dtype_is_refused(entry):
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=r"q.dtype must be .*got torch.int64"):
        entry(q.long(), k.long(), v.long())


@pytest.mark.parametrize("which", [1, 2])
def test_dtypes_that_differ_are_refused(entry, which):
    args = list(_qkv())
    args[which] = args[which].double()
    name = "qkv"[which]
    with pytest.raises(TypeError, match=rf"{name}.dtype torch.float64 differs from q.dtype torch.float32"):
        entry(*args)


def test_devices_that_differ_are_refused(entry):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"k is on meta but q is on cpu"):
        entry(q, k.to("meta"), v)


def test_heads_not_a_multiple_of_kv_heads_are_refused(entry):
    q, k, v = _qkv(h=5, hk=2)
    with pytest.raises(ValueError, match=r"query heads \(5\) must be a multiple of .*\(2\)"):
        entry(q, k, v)


def test_batch_mismatch_is_refused(entry):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="k has batch 1 but q has batch 2"):
        entry(q, k[:1], v[:1])


def test_head_dim_mismatch_is_refused(entry):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="k has head dim 4 but q has head dim 8"):
        entry(q, k[..., :4], v[..., :4])


def test_k_v_shape_mismatch_is_refused(entry):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"v must have k's batch, keys and heads, got v \(2, 6, 2, 8\)"):
        entry(q, k, v[:, :6])


def test_v_of_its_own_head_dim_is_accepted_and_sets_the_output_columns(entry):
    """v's head dim may differ from q's and k's, as in FlashAttention-3 (headdim_v)."""
    q, k, v = _qkv()
    v = torch.randn(2, 7, 2, 4)
    result = entry(q, k, v)
    if entry is flash_attn_func:
        assert result.shape == (2, 5, 4, 4)
    with pytest.raises(ValueError, match=r"v's head dim must be positive, got v shape \(2, 7, 2, 0\)"):
        entry(q, k, v[..., :0])


@pytest.mark.parametrize("value, error, text", [
    (-1, ValueError, "num_splits must be >= 0.*got -1"),
    (2.0, TypeError, "num_splits must be an int, got 2.0"),
    (True, TypeError, "num_splits must be an int, got True"),
])
def test_bad_num_splits_is_refused(entry, value, error, text):
    with pytest.raises(error, match=text):
        entry(*_qkv(), num_splits=value)


@pytest.mark.parametrize("value, error, text", [
    (1.0, ValueError, r"dropout_p must be in \[0, 1\), got 1.0"),
    (-0.1, ValueError, r"dropout_p must be in \[0, 1\), got -0.1"),
    ("0.1", TypeError, "dropout_p must be a real number, got '0.1'"),
])
def test_bad_dropout_p_is_refused(entry, value, error, text):
    with pytest.raises(error, match=text):
        entry(*_qkv(), dropout_p=value)


@pytest.mark.parametrize("value, error, text", [
    (-1.0, ValueError, "softcap must be finite and >= 0.*got -1.0"),
    (float("nan"), ValueError, "softcap must be finite and >= 0.*got nan"),
    (None, TypeError, "softcap must be a real number, got None"),
])
def test_bad_softcap_is_refused(entry, value, error, text):
    with pytest.raises(error, match=text):
        entry(*_qkv(), softcap=value)


@pytest.mark.parametrize("value, error, text", [
    ((-2, -1), ValueError, r"window_size values must be >= -1.*got \(-2, -1\)"),
    ((3, -5), ValueError, r"window_size values must be >= -1.*got \(3, -5\)"),
    ((3,), TypeError, r"window_size must be a pair of ints.*got \(3,\)"),
    ((1.5, 2), TypeError, r"window_size must be a pair of ints.*got \(1.5, 2\)"),
])
def test_bad_window_size_is_refused(entry, value, error, text):
    with pytest.raises(error, match=text):
        entry(*_qkv(), window_size=value)


@pytest.mark.parametrize("make, error, text", [
    (lambda: torch.rand(3), ValueError, r"alibi_slopes must have shape \(h,\) = \(4,\) or \(b, h\) = \(2, 4\), got \(3,\)"),
    (lambda: torch.rand(4, 2), ValueError, r"alibi_slopes must have shape .*got \(4, 2\)"),
    (lambda: torch.rand(4, dtype=torch.float64), TypeError, "alibi_slopes.dtype must be float32, got torch.float64"),
    (lambda: torch.rand(4, device="meta"), ValueError, "alibi_slopes is on meta but q is on cpu"),
    (lambda: [0.5] * 4, TypeError, "alibi_slopes must be None or a torch.Tensor, got list"),
])
def test_bad_alibi_slopes_are_refused(entry, make, error, text):
    with pytest.raises(error, match=text):
        entry(*_qkv(), alibi_slopes=make())


@pytest.mark.parametrize("value, error, text", [
    (float("inf"), ValueError, "softmax_scale must be finite, got inf"),
    ("1", TypeError, "softmax_scale must be None or a real number, got '1'"),
])
def test_bad_softmax_scale_is_refused(entry, value, error, text):
    with pytest.raises(error, match=text):
        entry(*_qkv(), softmax_scale=value)


@pytest.mark.parametrize("name", ["causal", "deterministic", "return_attn_probs", "strict"])
@pytest.mark.parametrize("value", [2, 0.5, "yes", None, torch.tensor([True])],
                         ids=["2", "0.5", "str", "None", "1-d tensor"])
def test_non_bool_flags_are_refused(entry, name, value):
    with pytest.raises(TypeError, match=f"{name} must be a bool, got"):
        entry(*_qkv(), **{name: value})


@pytest.mark.parametrize("value", [1, np.bool_(True), torch.tensor(True)],
                         ids=["int 1", "numpy bool", "0-d tensor"])
def test_flags_take_what_flash_attn_takes(value):
    q, k, v = _qkv()
    expected, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    out, lse_got, _ = flash_attn_func(q, k, v, causal=value, deterministic=value,
                                      return_attn_probs=value)
    assert torch.equal(out, expected) and torch.equal(lse_got, lse)
    assert torch.equal(flash_attn_func(q, k, v, causal=0), flash_attn_func(q, k, v))


@pytest.mark.parametrize("value, text", [
    ({"num_splits": 10 ** 30}, "num_splits must fit in int64, got 1000000000000000000000000000000"),
    ({"window_size": (2 ** 64, 0)}, r"window_size values must fit in int64, got \(18446744073709551616, 0\)"),
])
def test_ints_beyond_int64_are_refused(entry, value, text):
    with pytest.raises(ValueError, match=text):
        entry(*_qkv(), **value)


def test_windows_of_2_31_keys_or_more_mean_unbounded():
    q, k, v = _qkv(sq=9, sk=40)
    for window in [(sys.maxsize, 0), (2 ** 31, 3), (-1, sys.maxsize)]:
        expected = flash_attn_func(q, k, v, window_size=tuple(-1 if w >= 2 ** 31 else w
                                                               for w in window))
        out = flash_attn_func(q, k, v, window_size=window)
        assert torch.equal(out, expected), window
    assert explain(q, k, v, window_size=(sys.maxsize, sys.maxsize))["reason"] == \
        explain(q, k, v)["reason"]


def test_an_empty_batch_returns_at_once():
    q, k, v = (torch.randn(0, 32768, 16, 128, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    start = time.perf_counter()
    out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    (out.float().sum() + lse.sum()).backward()
    assert time.perf_counter() - start < 0.5
    assert out.shape == q.shape and lse.shape == (0, 16, 32768)
    assert q.grad.shape == q.shape and k.grad.shape == k.shape and v.grad.shape == v.shape


def test_reference_attention_validates_too():
    q, k, v = _qkv(h=3, hk=2)
    with pytest.raises(ValueError, match="multiple of the number of key/value heads"):
        reference_attention(q, k, v)


def test_non_contiguous_last_dim_is_not_an_error():
    # The native kernels need stride(-1) == 1; the reference fallback does not, so this is valid
    # input: it must run and give the same answer as the contiguous copy.
    q, k, v = (t.transpose(-1, -2).contiguous().transpose(-1, -2) for t in _qkv())
    assert q.stride(-1) != 1
    out = flash_attn_func(q, k, v, causal=True)
    expected = flash_attn_func(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
