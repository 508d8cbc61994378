"""The packed, varlen and kv-cache entry points on the reference path (CPU): results against
independent per-sequence references, gradients, the cache append, rotary embedding, paging,
errors for bad input, and torch.compile / opcheck of the sequence op."""

import pytest
import torch

import flashsplit
from flashsplit import _native, ops
from flashsplit.sequences import Sequences
from accuracy import assert_within_tolerance, naive_pair
from naive_attention import naive_attention
from sequence_cases import (POISON, assert_varlen_matches, cu_seqlens, randn, rotary_tables,
                            rotate_complex, to_pages, varlen_inputs)

DTYPES = [torch.float32, torch.bfloat16]


def _rand(shape, dtype=torch.float32, seed=0):
    return randn(shape, dtype, "cpu", torch.Generator().manual_seed(seed))


# ---- packed forms -----------------------------------------------------------------------

def test_qkvpacked_is_flash_attn_func_on_the_slices_with_gradients_into_qkv():
    qkv = _rand((2, 37, 3, 4, 32)).requires_grad_()
    out = flashsplit.flash_attn_qkvpacked_func(qkv, causal=True)
    ref = flashsplit.flash_attn_func(*qkv.detach().unbind(2), causal=True)
    assert torch.equal(out, ref)
    out.square().sum().backward()
    q, k, v = (t.detach().clone().requires_grad_() for t in qkv.detach().unbind(2))
    flashsplit.flash_attn_func(q, k, v, causal=True).square().sum().backward()
    assert torch.equal(qkv.grad, torch.stack((q.grad, k.grad, v.grad), dim=2))


def test_kvpacked_returns_lse_like_flash_attn_func():
    q, kv = _rand((2, 5, 8, 32)), _rand((2, 19, 2, 2, 32), seed=1)
    out, lse, probs = flashsplit.flash_attn_kvpacked_func(q, kv, return_attn_probs=True)
    ref_out, ref_lse, _ = flashsplit.flash_attn_func(q, *kv.unbind(2), return_attn_probs=True)
    assert probs is None and torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


# ---- varlen -----------------------------------------------------------------------------

VARLEN_CASES = [
    # q lengths, k lengths, h, hk, causal, window
    ([5, 0, 17, 1], [9, 4, 17, 30], 4, 2, True, (-1, -1)),
    ([3, 8], [3, 8], 6, 1, False, (-1, -1)),
    ([7, 12, 1], [20, 0, 33], 4, 4, False, (4, 2)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("q_lens, k_lens, h, hk, causal, window", VARLEN_CASES)
def test_varlen_matches_each_sequence_alone(q_lens, k_lens, h, hk, causal, window, dtype):
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, h, hk, 32, dtype, "cpu")
    out, lse, _ = flashsplit.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=causal, window_size=window,
        return_attn_probs=True)
    assert out.shape == q.shape and lse.shape == (h, sum(q_lens))
    assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens, "varlen", causal=causal,
                          window_size=window)


def test_varlen_paged_keys_give_the_packed_result():
    q_lens, k_lens = [4, 1, 9], [37, 5, 64]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 4, 2, 32, torch.float32, "cpu")
    gen = torch.Generator().manual_seed(3)
    k_pages, table = to_pages(k, k_lens, 16, gen)
    v_pages, _ = to_pages(v, k_lens, 16, torch.Generator().manual_seed(3))
    paged = flashsplit.flash_attn_varlen_func(q, k_pages, v_pages, cu_q, cu_k, 9, 64,
                                              causal=True, block_table=table)
    packed = flashsplit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 9, 64, causal=True)
    torch.testing.assert_close(paged, packed, rtol=0, atol=1e-6)


def test_varlen_backward_matches_autograd_of_each_sequence():
    q_lens, k_lens = [3, 0, 6], [5, 2, 6]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 4, 2, 16, torch.float64, "cpu")
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out, lse, _ = flashsplit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 6, causal=True,
                                                    return_attn_probs=True)
    weights = _rand(out.shape, torch.float64, seed=5)
    lse_weights = _rand(lse.shape, torch.float64, seed=6)
    ((out * weights).sum() + (lse * lse_weights).sum()).backward()
    q0 = k0 = 0
    for nq, nk in zip(q_lens, k_lens):
        parts = [t.detach()[a:a + n].clone().requires_grad_()
                 for t, a, n in ((q, q0, nq), (k, k0, nk), (v, k0, nk))]
        o, l = naive_attention(*(p[None] for p in parts), causal=True)
        if nq:
            loss = (o[0] * weights[q0:q0 + nq]).sum() + \
                   (l[0].nan_to_num(neginf=0.0) * lse_weights[:, q0:q0 + nq]).sum()
            loss.backward()
            for got, part in ((q.grad[q0:q0 + nq], parts[0]), (k.grad[k0:k0 + nk], parts[1]),
                              (v.grad[k0:k0 + nk], parts[2])):
                torch.testing.assert_close(got, part.grad, rtol=1e-9, atol=1e-9)
        q0, k0 = q0 + nq, k0 + nk


def test_varlen_packed_forms_slice_their_inputs():
    lens = [6, 11]
    qkv = _rand((17, 3, 4, 32))
    cu = cu_seqlens(lens, "cpu")
    out = flashsplit.flash_attn_varlen_qkvpacked_func(qkv, cu, 11, causal=True)
    ref = flashsplit.flash_attn_varlen_func(*qkv.unbind(1), cu, cu, 11, 11, causal=True)
    assert torch.equal(out, ref)
    q, kv = _rand((17, 4, 32), seed=2), _rand((17, 2, 2, 32), seed=3)
    out = flashsplit.flash_attn_varlen_kvpacked_func(q, kv, cu, cu, 11, 11)
    assert torch.equal(out, flashsplit.flash_attn_varlen_func(q, *kv.unbind(1), cu, cu, 11, 11))


# ---- kv cache ---------------------------------------------------------------------------

def _cache(b, s, hk, d, lens, dtype=torch.float32, seed=0):
    """A cache whose slots past each sequence's length hold POISON."""
    cache = _rand((b, s, hk, d), dtype, seed)
    for i, n in enumerate(lens):
        cache[i, n:] = POISON
    return cache


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_appends_in_place_and_attends_to_each_sequence(dtype, causal):
    b, s, hk, h, d, sq = 3, 40, 2, 8, 32, 3
    lens = [5, 0, 30]
    k_cache, v_cache = _cache(b, s, hk, d, lens, dtype), _cache(b, s, hk, d, lens, dtype, 1)
    k_new, v_new = _rand((b, sq, hk, d), dtype, 2), _rand((b, sq, hk, d), dtype, 3)
    q = _rand((b, sq, h, d), dtype, 4)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    out, lse = flashsplit.flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, cache_seqlens=seqlens, causal=causal,
        return_softmax_lse=True)
    for i, n in enumerate(lens):
        assert torch.equal(k_cache[i, n:n + sq], k_new[i])
        assert torch.equal(v_cache[i, n:n + sq], v_new[i])
        assert (k_cache[i, n + sq:] == POISON).all() and (v_cache[i, n + sq:] == POISON).all()
        high, low = naive_pair(q[i:i + 1], k_cache[i:i + 1, :n + sq], v_cache[i:i + 1, :n + sq],
                               causal=causal)
        assert_within_tolerance(out[i:i + 1], high[0], low[0], dtype, f"seq {i} out")
        assert_within_tolerance(lse[i:i + 1], high[1], low[1], dtype, f"seq {i} lse")


def test_kvcache_int_seqlens_batch_index_and_pages_agree():
    b, s, hk, h, d = 2, 64, 2, 4, 32
    cache_k, cache_v = _rand((4, s, hk, d)), _rand((4, s, hk, d), seed=1)
    q = _rand((b, 1, h, d), seed=2)
    idx = torch.tensor([3, 1], dtype=torch.int32)
    out = flashsplit.flash_attn_with_kvcache(q, cache_k, cache_v, cache_seqlens=50,
                                             cache_batch_idx=idx)
    for i in range(b):
        high, low = naive_pair(q[i:i + 1], cache_k[idx[i]:idx[i] + 1, :50],
                               cache_v[idx[i]:idx[i] + 1, :50])
        assert_within_tolerance(out[i:i + 1], high[0], low[0], torch.float32, f"seq {i}")
    # The same keys in a paged cache of 16-row pages.
    keys = [cache_k[int(j), :50] for j in idx]
    values = [cache_v[int(j), :50] for j in idx]
    k_pages, table = to_pages(torch.cat(keys), [50, 50], 16, torch.Generator().manual_seed(7))
    v_pages, _ = to_pages(torch.cat(values), [50, 50], 16, torch.Generator().manual_seed(7))
    paged = flashsplit.flash_attn_with_kvcache(q, k_pages, v_pages,
                                               cache_seqlens=torch.tensor([50, 50],
                                                                          dtype=torch.int32),
                                               block_table=table)
    torch.testing.assert_close(paged, out, rtol=0, atol=1e-6)


def test_kvcache_paged_append_writes_through_the_block_table():
    hk, d, page = 1, 16, 4
    k_pages, v_pages = _rand((6, page, hk, d)), _rand((6, page, hk, d), seed=1)
    table = torch.tensor([[5, 2, 0], [1, 3, 4]], dtype=torch.int32)
    k_new, v_new = _rand((2, 2, hk, d), seed=2), _rand((2, 2, hk, d), seed=3)
    before = k_pages.clone()
    flashsplit.flash_attn_with_kvcache(_rand((2, 2, 2, d), seed=4), k_pages, v_pages, k_new,
                                       v_new, cache_seqlens=torch.tensor([3, 8], dtype=torch.int32),
                                       block_table=table)
    # Sequence 0's keys 3, 4: page 5 row 3, page 2 row 0; sequence 1's keys 8, 9: page 4 rows 0, 1.
    assert torch.equal(k_pages[5, 3], k_new[0, 0]) and torch.equal(k_pages[2, 0], k_new[0, 1])
    assert torch.equal(k_pages[4, :2], k_new[1]) and torch.equal(v_pages[4, :2], v_new[1])
    written = torch.zeros(6, page, dtype=torch.bool)
    written[5, 3] = written[2, 0] = written[4, 0] = written[4, 1] = True
    assert torch.equal(k_pages[~written], before[~written])


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_rotary_rotates_new_keys_and_queries_at_their_positions(interleaved, causal):
    b, s, hk, h, d, sq, rd = 2, 32, 1, 2, 32, 2, 16
    lens = [4, 9]
    k_cache, v_cache = _cache(b, s, hk, d, lens), _cache(b, s, hk, d, lens, seed=1)
    k_new, v_new, q = _rand((b, sq, hk, d), seed=2), _rand((b, sq, hk, d), seed=3), \
        _rand((b, sq, h, d), seed=4)
    cos, sin = rotary_tables(s, rd, "cpu")
    seqlens = torch.tensor(lens, dtype=torch.int32)
    out = flashsplit.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cos, sin,
                                             cache_seqlens=seqlens, causal=causal,
                                             rotary_interleaved=interleaved)
    pos_k = seqlens[:, None].long() + torch.arange(sq)[None]
    pos_q = pos_k if causal else seqlens[:, None].long().expand(b, sq)
    k_rot = rotate_complex(k_new, cos, sin, pos_k, interleaved)
    q_rot = rotate_complex(q, cos, sin, pos_q, interleaved)
    for i, n in enumerate(lens):
        torch.testing.assert_close(k_cache[i, n:n + sq].double(), k_rot[i], rtol=0, atol=1e-5)
        assert torch.equal(v_cache[i, n:n + sq], v_new[i])
        ref, _ = naive_attention(q_rot[i:i + 1], k_cache[i:i + 1, :n + sq].double(),
                                 v_cache[i:i + 1, :n + sq].double(), causal=causal)
        torch.testing.assert_close(out[i].double(), ref[0], rtol=0, atol=1e-5)


# ---- errors -----------------------------------------------------------------------------

def _varlen_args():
    q, k, v, cu_q, cu_k = varlen_inputs([3, 4], [5, 6], 4, 2, 32, torch.float32, "cpu")
    return dict(q=q, k=k, v=v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=4,
                max_seqlen_k=6)


@pytest.mark.parametrize("change, error, words", [
    (dict(q=torch.zeros(7, 4)), ValueError, "q must have 3 dims"),
    (dict(cu_seqlens_q=torch.tensor([0, 3, 7])), TypeError, "cu_seqlens_q.dtype must be int32"),
    (dict(cu_seqlens_k=torch.tensor([0, 11], dtype=torch.int32)), ValueError,
     "cu_seqlens_k must have 3 entries"),
    (dict(max_seqlen_q=-1), ValueError, "max_seqlen_q must be in"),
    (dict(max_seqlen_k=2.0), TypeError, "max_seqlen_k must be an int"),
    (dict(k=torch.zeros(11, 3, 32), v=torch.zeros(11, 3, 32)), ValueError,
     "multiple of the number of key/value heads"),
    (dict(num_splits=-2), ValueError, "num_splits must be >= 0"),
    (dict(block_table=torch.zeros(2, 1, dtype=torch.int32)), ValueError, "k must have 4 dims"),
])
def test_varlen_bad_input_names_the_argument(change, error, words):
    args = _varlen_args()
    args.update(change)
    with pytest.raises(error, match=words):
        flashsplit.flash_attn_varlen_func(**args)


@pytest.mark.parametrize("change, error, words", [
    (dict(cache_seqlens=torch.tensor([1, 2])), TypeError, "cache_seqlens.dtype must be int32"),
    (dict(cache_seqlens=-3), ValueError, "cache_seqlens must be in"),
    (dict(k=torch.zeros(2, 1, 2, 32)), ValueError, "k and v are given together"),
    (dict(cache_batch_idx=torch.zeros(3, dtype=torch.int32)), ValueError,
     "cache_batch_idx must have 2 entries"),
    (dict(cache_leftpad=torch.zeros(2, dtype=torch.int32)), NotImplementedError,
     "cache_leftpad"),
    (dict(rotary_cos=torch.zeros(8, 4)), ValueError, "rotary_cos and rotary_sin"),
    (dict(rotary_cos=torch.zeros(8, 40), rotary_sin=torch.zeros(8, 40)), ValueError,
     "rotary_dim"),
    (dict(q=torch.zeros(3, 1, 4, 32)), ValueError, "k_cache has batch 2 but q has batch 3"),
    (dict(causal="yes"), TypeError, "causal must be a bool"),
])
def test_kvcache_bad_input_names_the_argument(change, error, words):
    args = dict(q=torch.zeros(2, 1, 4, 32), k_cache=torch.zeros(2, 8, 2, 32),
                v_cache=torch.zeros(2, 8, 2, 32), cache_seqlens=3)
    args.update(change)
    with pytest.raises(error, match=words):
        flashsplit.flash_attn_with_kvcache(**args)


def test_packed_forms_check_the_packing():
    with pytest.raises(ValueError, match="qkv must have 3 at dim 2"):
        flashsplit.flash_attn_qkvpacked_func(torch.zeros(1, 4, 2, 2, 32))
    with pytest.raises(ValueError, match="kv must have 5 dims"):
        flashsplit.flash_attn_kvpacked_func(torch.zeros(1, 4, 2, 32), torch.zeros(1, 4, 2, 32))


# ---- torch.compile and opcheck -------------------------------------------------------------

def test_compiled_varlen_and_kvcache_match_eager():
    torch._dynamo.reset()
    args = _varlen_args()
    varlen = torch.compile(flashsplit.flash_attn_varlen_func, fullgraph=True)
    assert torch.equal(varlen(**args, causal=True),
                       flashsplit.flash_attn_varlen_func(**args, causal=True))
    q = _rand((2, 2, 4, 32))
    caches = [_rand((2, 16, 2, 32), seed=s) for s in (1, 2, 3, 4)]
    new = _rand((2, 2, 2, 32), seed=5), _rand((2, 2, 2, 32), seed=6)
    seqlens = torch.tensor([3, 9], dtype=torch.int32)
    cos, sin = rotary_tables(16, 16, "cpu")
    kvcache = torch.compile(flashsplit.flash_attn_with_kvcache, fullgraph=True)
    got = kvcache(q, caches[0], caches[1], *new, cos, sin, seqlens, causal=True)
    want = flashsplit.flash_attn_with_kvcache(q, caches[2].copy_(caches[0]),
                                              caches[3].copy_(caches[1]), *new, cos, sin,
                                              seqlens, causal=True)
    assert torch.equal(got, want) and torch.equal(caches[0], caches[2])


def test_opcheck_seq_fwd_and_bwd():
    args = _varlen_args()
    q, k, v = (args[n].unsqueeze(0).requires_grad_() for n in ("q", "k", "v"))
    fwd_args = (q, k, v, args["cu_seqlens_q"], args["cu_seqlens_k"], None, None, None, 4, 6,
                0.2, True, -1, -1, 0.0, None, 0.0, 0, 0, False)
    torch.library.opcheck(ops.seq_fwd, fwd_args)
    out, lse = ops.seq_fwd(*fwd_args)
    bwd_args = (torch.ones_like(out), None, q.detach(), k.detach(), v.detach(), lse.detach(),
                args["cu_seqlens_q"], args["cu_seqlens_k"], None, None, None, 0.2, True, -1,
                -1, 0.0, None, 0.0, 0)
    torch.library.opcheck(ops.seq_bwd, bwd_args)


def test_sequence_plan_explains_itself_on_the_cpu():
    """The plan of a sequence call (what the GPU tests read to see which kernels ran): on CPU
    tensors the reference path, with the gate's reason."""
    q_lens, k_lens = [3, 0, 5], [4, 2, 9]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 4, 2, 64, torch.float32, "cpu")
    decision = _native.sequence_gate_decision(
        q[None], k[None], v[None], Sequences(cu_q, cu_k, max_seqlen_q=5, max_seqlen_k=9),
        causal=True, num_splits=0)
    assert decision["path"] == "reference" and decision["kernel"] == "reference", decision
    assert decision["reason"], decision
    with pytest.raises(RuntimeError, match="cu_seqlens_k"):
        _native.sequence_gate_decision(
            q[None], k[None], v[None], Sequences(cu_q, cu_k[:-1], max_seqlen_q=5,
                                                 max_seqlen_k=9), causal=True, num_splits=0)
