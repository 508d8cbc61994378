"""The varlen and kv-cache entry points on the native kernels: every call runs with strict=True,
so a fallback to the reference path fails instead of passing. Results are checked per
sequence against naive_attention in fp64 (accuracy.py's rule), caches carry poison past each
sequence's keys and in unused pages, and a fixed num_splits must give bitwise the same result
for a sequence whatever its batch-mates are."""

import pytest
import torch

from test_gpu_common import DTYPE_IDS, DTYPES, requires_native  # noqa: F401 (skips off GPU)

import flashsplit  # noqa: E402
from accuracy import assert_within_tolerance, naive_pair  # noqa: E402
from sequence_cases import POISON, assert_varlen_matches, to_pages, varlen_inputs  # noqa: E402

pytestmark = [pytest.mark.gpu, requires_native]

HEADS = {"mha": (4, 4), "gqa": (8, 2), "mqa": (6, 1)}
SPLITS = [1, 3, 0]


def _varlen(q, k, v, cu_q, cu_k, q_lens, k_lens, **kwargs):
    out, lse, _ = flashsplit.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), return_attn_probs=True, strict=True,
        **kwargs)
    return out, lse


@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_varlen_prefill_and_decode_lengths(dtype, d, causal, heads):
    h, hk = HEADS[heads]
    for q_lens, k_lens in (([1, 0, 37, 130, 7], [1, 5, 37, 300, 1000]),  # odd and empty
                           ([1, 1, 1], [4000, 17, 0])):                   # decode
        q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, h, hk, d, dtype, "cuda", seed=d)
        for num_splits in SPLITS:
            out, lse = _varlen(q, k, v, cu_q, cu_k, q_lens, k_lens, causal=causal,
                               num_splits=num_splits)
            assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens,
                                  f"q_lens={q_lens} k_lens={k_lens} G={num_splits}",
                                  causal=causal)


@pytest.mark.parametrize("page_size", [1, 16, 48, 64, 256])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_varlen_paged_keys_at_any_page_size(d, page_size):
    q_lens, k_lens = [3, 1, 20], [700, 1, 129]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 8, 2, d, torch.bfloat16, "cuda", seed=1)
    gen = torch.Generator().manual_seed(page_size)
    k_pages, table = to_pages(k, k_lens, page_size, gen)
    v_pages, _ = to_pages(v, k_lens, page_size, torch.Generator().manual_seed(page_size))
    for num_splits in SPLITS:
        out, lse = _varlen(q, k_pages, v_pages, cu_q, cu_k, q_lens, k_lens, causal=True,
                           block_table=table, num_splits=num_splits)
        assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens,
                              f"page_size={page_size} G={num_splits}", causal=True)


def _poisoned_cache(b, s, hk, d, lens, dtype, gen):
    cache = torch.randn(b, s, hk, d, generator=gen).to("cuda", dtype)
    for i, n in enumerate(lens):
        cache[i, n:] = POISON
    return cache


@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_kvcache_decode_appends_and_attends(dtype, d, paged, sq):
    b, s, h, hk = 4, 2048, 16, 2
    lens = [0, 5, 1000, 2040]
    gen = torch.Generator().manual_seed(d + sq)
    k_cache, v_cache = (_poisoned_cache(b, s, hk, d, lens, dtype, gen) for _ in range(2))
    k_new, v_new, q = (torch.randn(b, sq, n, d, generator=gen).to("cuda", dtype)
                       for n in (hk, hk, h))
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    expected_k = [torch.cat((k_cache[i, :n], k_new[i])) for i, n in enumerate(lens)]
    expected_v = [torch.cat((v_cache[i, :n], v_new[i])) for i, n in enumerate(lens)]
    table = None
    if paged:
        full = [n + sq for n in lens]
        k_cache, table = to_pages(torch.cat(expected_k), full, 64, torch.Generator().manual_seed(2))
        v_cache, _ = to_pages(torch.cat(expected_v), full, 64, torch.Generator().manual_seed(2))
        # The pages hold the appended rows already; poison them so the append must write them.
        for i, n in enumerate(lens):
            keys = torch.arange(n, n + sq)
            k_cache[table[i, keys // 64].long(), keys % 64] = POISON
            v_cache[table[i, keys // 64].long(), keys % 64] = POISON
    for num_splits in SPLITS:
        kc, vc = k_cache.clone(), v_cache.clone()
        out, lse = flashsplit.flash_attn_with_kvcache(
            q, kc, vc, k_new, v_new, cache_seqlens=seqlens, block_table=table, causal=True,
            num_splits=num_splits, return_softmax_lse=True, strict=True)
        for i in range(b):
            high, low = naive_pair(q[i:i + 1], expected_k[i][None], expected_v[i][None],
                                   causal=True)
            what = f"seq {i} ({lens[i]} cached) G={num_splits}"
            assert_within_tolerance(out[i:i + 1], high[0], low[0], dtype, what + " out")
            assert_within_tolerance(lse[i:i + 1], high[1], low[1], dtype, what + " lse")
            if not paged:
                assert torch.equal(kc[i, :lens[i] + sq], expected_k[i])
                assert (kc[i, lens[i] + sq:] == POISON).all(), what + ": cache past the append"


def test_kvcache_cache_batch_index_picks_rows():
    b, s, h, hk, d = 3, 512, 8, 8, 128
    gen = torch.Generator().manual_seed(5)
    k_cache, v_cache = (torch.randn(6, s, hk, d, generator=gen).to("cuda", torch.bfloat16)
                        for _ in range(2))
    q = torch.randn(b, 1, h, d, generator=gen).to("cuda", torch.bfloat16)
    idx = torch.tensor([5, 0, 5], dtype=torch.int32, device="cuda")
    lens = [300, 512, 17]
    out = flashsplit.flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=torch.tensor(lens, dtype=torch.int32, device="cuda"),
        cache_batch_idx=idx, strict=True)
    for i in range(b):
        row = int(idx[i])
        high, low = naive_pair(q[i:i + 1], k_cache[row:row + 1, :lens[i]],
                               v_cache[row:row + 1, :lens[i]])
        assert_within_tolerance(out[i:i + 1], high[0], low[0], torch.bfloat16, f"seq {i}")


@pytest.mark.parametrize("num_splits", [1, 4])
def test_fixed_num_splits_is_batch_invariant(num_splits):
    """A sequence's out and lse do not depend on the other sequences of its batch."""
    gen = torch.Generator().manual_seed(num_splits)
    s, h, hk, d = 4096, 32, 8, 128
    k_cache, v_cache = (torch.randn(5, s, hk, d, generator=gen).to("cuda", torch.bfloat16)
                        for _ in range(2))
    q = torch.randn(5, 2, h, d, generator=gen).to("cuda", torch.bfloat16)

    def decode(rows, lens):
        idx = torch.tensor(rows, dtype=torch.int32, device="cuda")
        return flashsplit.flash_attn_with_kvcache(
            q[rows], k_cache, v_cache, cache_seqlens=torch.tensor(lens, dtype=torch.int32,
                                                                  device="cuda"),
            cache_batch_idx=idx, causal=True, num_splits=num_splits, return_softmax_lse=True,
            strict=True)

    alone = decode([0], [1500])
    for rows, lens in (([0, 1], [1500, 4000]), ([2, 0, 3, 4], [7, 1500, 64, 3333])):
        out, lse = decode(rows, lens)
        at = rows.index(0)
        assert torch.equal(out[at], alone[0][0]) and torch.equal(lse[at], alone[1][0]), \
            f"kv cache: sequence 0 changed beside {rows}"

    q_lens_sets = ([5, 9], [9, 1, 2], [3, 9, 9, 9])
    for q_lens in q_lens_sets:
        k_lens = [300 + 100 * n for n in q_lens]
        k_lens[q_lens.index(9)] = 2500
        q_v, k_v, v_v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, h, hk, d, torch.bfloat16,
                                                  "cuda", seed=len(q_lens))
        seq = q_lens.index(9)
        q0, k0 = sum(q_lens[:seq]), sum(k_lens[:seq])
        ref_q, ref_k, ref_v = q_v[q0:q0 + 9], k_v[k0:k0 + 2500], v_v[k0:k0 + 2500]
        if q_lens is q_lens_sets[0]:
            reference = ref_q, ref_k, ref_v
        else:
            # The same sequence's rows, wherever they sit in the batch.
            q_v[q0:q0 + 9], k_v[k0:k0 + 2500], v_v[k0:k0 + 2500] = reference
        out, lse, _ = flashsplit.flash_attn_varlen_func(
            q_v, k_v, v_v, cu_q, cu_k, 9, 4096, causal=True, num_splits=num_splits,
            return_attn_probs=True, strict=True)
        result = out[q0:q0 + 9], lse[:, q0:q0 + 9]
        if q_lens is q_lens_sets[0]:
            first = result
        else:
            assert torch.equal(result[0], first[0]) and torch.equal(result[1], first[1]), \
                f"varlen: the 9-query sequence changed beside {q_lens}"
