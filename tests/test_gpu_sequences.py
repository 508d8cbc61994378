"""The varlen and kv-cache entry points on the native kernels: every call runs with strict=True,
so a fallback to the reference path fails instead of passing. Results are checked per
sequence against naive_attention in fp64 (accuracy.py's rule), caches carry poison past each
sequence's keys and in unused pages, and a fixed num_splits must give bitwise the same result
for a sequence whatever its batch-mates are. On the H100 varlen prefill and contiguous kv
caches run the Hopper kernels (checked at every head dim, with NaN in every row past the
sequences' keys), and so do caches in pages of 64 keys or of whole key blocks at d = 64 and
128; the suite's run with FLASHSPLIT_DISABLE_HOPPER=1 gives the same calls to the portable
kernels."""

import math

import pytest
import torch

from test_gpu_common import (  # noqa: F401 (skips off GPU)
    DTYPE_IDS, DTYPES, PORTABLE, hbm_bytes_per_us, hbm_share_over_h100, requires_hopper,
    requires_native, varlen_decision)

import flashsplit  # noqa: E402
from flashsplit import _native  # noqa: E402
from flashsplit.sequences import Sequences  # noqa: E402
from accuracy import assert_within_tolerance, naive_pair  # noqa: E402
from sequence_cases import (  # noqa: E402
    POISON, assert_varlen_matches, cu_seqlens, to_pages, varlen_inputs)

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


@pytest.mark.parametrize("page_size", [1, 8, 16, 24, 48, 64, 256])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_varlen_paged_keys_at_any_page_size(d, page_size):
    # Multi-token rows of up to 80 packed rows (the wide tiles; on the H100 the packed Hopper
    # tiles for pages of 64 and 256) and of up to 32 (two narrow row tiles, or the Hopper ones),
    # and decode rows (the narrow tile). The narrow tile's paged copies take a page per run of
    # 16 rows where the page size is a multiple of 16, else walk the run's pages.
    for q_lens in ([3, 1, 20], [8, 3, 5], [1, 1, 1]):
        k_lens = [700, 1, 129]
        q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 8, 2, d, torch.bfloat16, "cuda",
                                            seed=1)
        gen = torch.Generator().manual_seed(page_size)
        k_pages, table = to_pages(k, k_lens, page_size, gen)
        v_pages, _ = to_pages(v, k_lens, page_size, torch.Generator().manual_seed(page_size))
        for num_splits in SPLITS:
            out, lse = _varlen(q, k_pages, v_pages, cu_q, cu_k, q_lens, k_lens, causal=True,
                               block_table=table, num_splits=num_splits)
            assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens,
                                  f"q_lens={q_lens} page_size={page_size} G={num_splits}",
                                  causal=True)


def _assert_sequences_match(out, lse, q, expected_k, expected_v, lens, dtype, num_splits):
    """Each kv-cache sequence's out and lse against naive_attention (causal) over its keys."""
    for i, n in enumerate(lens):
        high, low = naive_pair(q[i:i + 1], expected_k[i][None], expected_v[i][None], causal=True)
        what = f"seq {i} ({n} cached) G={num_splits}"
        assert_within_tolerance(out[i:i + 1], high[0], low[0], dtype, what + " out")
        assert_within_tolerance(lse[i:i + 1], high[1], low[1], dtype, what + " lse")


def _poisoned_cache(b, s, hk, d, lens, dtype, gen, poison=POISON):
    cache = torch.randn(b, s, hk, d, generator=gen).to("cuda", dtype)
    for i, n in enumerate(lens):
        cache[i, n:] = poison
    return cache


@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("page", [0, 16, 64], ids=["contiguous", "page16", "page64"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_kvcache_decode_appends_and_attends(dtype, d, page, sq):
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
    if page:
        full = [n + sq for n in lens]
        k_cache, table = to_pages(torch.cat(expected_k), full, page,
                                  torch.Generator().manual_seed(2))
        v_cache, _ = to_pages(torch.cat(expected_v), full, page, torch.Generator().manual_seed(2))
        # The pages hold the appended rows already; poison them so the append must write them.
        for i, n in enumerate(lens):
            keys = torch.arange(n, n + sq)
            k_cache[table[i, keys // page].long(), keys % page] = POISON
            v_cache[table[i, keys // page].long(), keys % page] = POISON
    for num_splits in SPLITS:
        kc, vc = k_cache.clone(), v_cache.clone()
        out, lse = flashsplit.flash_attn_with_kvcache(
            q, kc, vc, k_new, v_new, cache_seqlens=seqlens, block_table=table, causal=True,
            num_splits=num_splits, return_softmax_lse=True, strict=True)
        _assert_sequences_match(out, lse, q, expected_k, expected_v, lens, dtype, num_splits)
        if page:
            continue
        for i, n in enumerate(lens):  # the append wrote the new keys and nothing past them
            what = f"seq {i} ({n} cached) G={num_splits}"
            assert torch.equal(kc[i, :n + sq], expected_k[i]), what + ": cache up to the append"
            assert (kc[i, n + sq:] == POISON).all(), what + ": cache past the append"


def _key_warp_blocks_per_sm(blocks, d, sq=1, paged_keys=0, kv_bytes=0):
    """The key-warp tile the plan gives `blocks` unsplit narrow blocks of sq query tokens on this
    GPU, as its blocks an SM (0: none). The rule of core/portable_tiles.h: for one token the
    full tile, one an SM, from the blocks that cover the HBM's peak at 72 GB/s each (at least a
    third of the SMs' count) to the count, the half-size tile, two an SM, from there to 1.5
    times it (twice it where each SM gets more than 1.2 times the H100's share of HBM
    bandwidth, 3.35 TB/s over 132 SMs; paged calls there, over a block table of paged_keys keys,
    take the half-size tile within 1.5 times it only up to 4096 keys, and contiguous caches of
    kv_bytes of K and V a block, past 5 MiB, do not where the one-warp split takes G = 2, which
    the callers passing kv_bytes check); for more tokens the full tile over the same range up
    to the count; where the SM's shared memory holds them with a paged call's table (134 KB for
    one, 2 x 69-70 KB for two, and 1 KB an SM keeps per block)."""
    props = torch.cuda.get_device_properties(0)
    sms, smem = props.multi_processor_count, props.shared_memory_per_block_optin
    wide = hbm_share_over_h100(props) > 1.2
    fewest = max(-(-sms // 3), math.ceil(hbm_bytes_per_us(props) / 72e3))
    most = sms if sq != 1 else 2 * sms if wide else 3 * sms // 2
    if blocks < fewest or blocks > most:
        return 0
    if sq == 1 and blocks > sms:
        if wide and 2 * blocks <= 3 * sms and (paged_keys > 4096 or kv_bytes > 5 << 20):
            return 0
        need = {64: 69_648, 128: 70_672}[d]
        return 2 if 2 * (need + 1024) <= smem + 1024 else 0
    return 1 if smem >= 137_232 else 0


def _key_warps_staggered(blocks, per_sm, sq=1):
    """Whether the key-warp tile copies each key block's K and V apart (sm80_key_warp_staggered):
    for one token, the full tile from two thirds of the SMs' count, the half-size tile past 1.1
    times it, where each SM gets at most 1.2 times the H100's share of HBM bandwidth."""
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    if sq != 1 or per_sm == 0 or hbm_share_over_h100(props) > 1.2:
        return False
    return 3 * blocks >= 2 * sms if per_sm == 1 else 10 * blocks > 11 * sms


@pytest.mark.parametrize("sq", [1, 3])
# Pages of a multiple of a thread's copy run (16 rows on the full tile, 8 on the half-size one),
# of half a run only (8 and 24 on the full tile, 12 on the half-size one: a run's second half
# may start the next page), and of neither (12 on the full tile).
@pytest.mark.parametrize("paged", [None, 8, 12, 16, 24, 64],
                         ids=["contiguous", "page8", "page12", "page16", "page24", "page64"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("b", [18, 24, 36, 40, 60], ids=["b18", "b24", "b36", "b40", "b60"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_kvcache_decode_on_the_key_warp_tile(dtype, b, d, paged, sq):
    """b sequences x 4 k/v heads of 0 to 2047 cached keys (shorter than one warp's part of a
    key block, across parts and blocks) left to the heuristic: on the portable kernels the
    narrow tile with key warps, whose warps merge their softmax states (on the H100 and the
    H200 the full tile at b=18 and b=24, the half-size one at b=36 and b=40, and on the H200 at
    b=60 too, where the H100 splits one-warp blocks; on the H100 with staggered copies at b=24
    and b=40 for sq=1). At b=40 the block table holds 8192 keys' pages (those past the lengths
    poisoned), over which the H200 splits one-warp blocks. num_splits=1 runs the one-warp tile.
    Both against naive_attention, with poison past every sequence's keys."""
    s, h, hk = 2048, 16, 4
    lens = ([0, 1, 5, 31, 33, 63, 64, 65, 127, 129, 255, 257, 700, 1000, 1500, 2047 - sq] * 4)[:b]
    gen = torch.Generator().manual_seed(b + d + sq + (paged or 0))
    k_cache, v_cache = (_poisoned_cache(b, s, hk, d, lens, dtype, gen) for _ in range(2))
    q = torch.randn(b, sq, h, d, generator=gen).to("cuda", dtype)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    expected_k = [k_cache[i, :n] for i, n in enumerate(lens)]
    expected_v = [v_cache[i, :n] for i, n in enumerate(lens)]
    table = None
    if paged:
        width = 8192 // paged if b == 40 else 1
        (k_cache, table), (v_cache, _) = (
            to_pages(torch.cat(rows), lens, paged, torch.Generator().manual_seed(3),
                     min_width=width) for rows in (expected_k, expected_v))
    max_keys = s if table is None else table.shape[1] * paged
    seqs = Sequences(seqused_k=seqlens, block_table=table, max_seqlen_q=sq, max_seqlen_k=max_keys)
    for num_splits in (0, 1):
        decision = _native.sequence_gate_decision(q, k_cache, v_cache, seqs, True, num_splits)
        if decision["kernel"] == PORTABLE and decision["details"]["block_m"] == 16:
            per_sm = _key_warp_blocks_per_sm(b * hk, d, sq, max_keys if paged else 0) \
                if num_splits == 0 else 0
            assert decision["details"]["key_warps"] == (4 if per_sm else 1), decision
            staggered = _key_warps_staggered(b * hk, per_sm, sq)
            assert decision["details"]["staggered_kv"] == staggered, decision
            if per_sm:
                assert decision["details"]["blocks_per_sm"] == per_sm, decision
        out, lse = flashsplit.flash_attn_with_kvcache(
            q, k_cache, v_cache, cache_seqlens=seqlens, block_table=table, causal=True,
            num_splits=num_splits, return_softmax_lse=True, strict=True)
        _assert_sequences_match(out, lse, q, expected_k, expected_v, lens, dtype, num_splits)


@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("b", [24, 36, 44], ids=["b24", "b36", "b44"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dense_decode_on_the_key_warp_tile(dtype, b, d):
    """flash_attn_func decode of b x 4 k/v heads over 3001 keys (a last key block that ends
    inside one of its warps' parts), left to the heuristic and at fixed G."""
    sk, h, hk = 3001, 32, 4
    gen = torch.Generator().manual_seed(b + d)
    q, k, v = (torch.randn(b, n, heads, d, generator=gen).to("cuda", dtype)
               for n, heads in ((1, h), (sk, hk), (sk, hk)))
    decision = flashsplit.explain(q, k, v)
    if decision["kernel"] == PORTABLE:
        per_sm = _key_warp_blocks_per_sm(b * hk, d)
        assert decision["details"]["key_warps"] == (4 if per_sm else 1), decision
        staggered = _key_warps_staggered(b * hk, per_sm)
        assert decision["details"]["staggered_kv"] == staggered, decision
        if per_sm:
            assert decision["details"]["blocks_per_sm"] == per_sm, decision
    _assert_dense_matches(q, k, v, False, dtype, f"decode d={d}")


@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_dense_decode_of_long_caches_past_the_sms(d):
    """160 (batch, k/v head) blocks of decode over 12288 keys: where each SM gets more than 1.2
    times the H100's share of HBM bandwidth, caches of more than 5 MiB of K and V a block (6 MiB
    at d=128; at d=64 they hold 3 MiB) split one-warp blocks in two instead of running the
    half-size key-warp tile (core/portable_tiles.h, sm80_key_warps_walk_cache); elsewhere the
    half-size tile runs them."""
    b, sk, h, hk = 40, 12288, 32, 4
    gen = torch.Generator().manual_seed(d)
    q, k, v = (torch.randn(b, n, heads, d, generator=gen).to("cuda", torch.bfloat16)
               for n, heads in ((1, h), (sk, hk), (sk, hk)))
    decision = flashsplit.explain(q, k, v)
    if decision["kernel"] == PORTABLE:
        per_sm = _key_warp_blocks_per_sm(b * hk, d, kv_bytes=4 * sk * d)
        assert decision["details"]["key_warps"] == (4 if per_sm else 1), decision
        if _key_warp_blocks_per_sm(b * hk, d) and not per_sm:
            assert decision["num_splits"] == 2, decision
    _assert_dense_matches(q, k, v, False, torch.bfloat16, f"decode d={d}")


def _assert_dense_matches(q, k, v, causal, dtype, what):
    """flash_attn_func's out and lse at every G of SPLITS against naive_attention."""
    high, low = naive_pair(q, k, v, causal=causal)
    for num_splits in SPLITS:
        out, lse, _ = flashsplit.flash_attn_func(q, k, v, causal=causal, num_splits=num_splits,
                                                 return_attn_probs=True, strict=True)
        name = f"{what} G={num_splits}"
        assert_within_tolerance(out, high[0], low[0], dtype, name + " out")
        assert_within_tolerance(lse, high[1], low[1], dtype, name + " lse")


@pytest.mark.parametrize("sq", [6, 8])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_multi_token_decode_on_narrow_row_tiles(dtype, d, causal, sq):
    """6 or 8 query tokens of a group of 4 (24 or 32 packed rows): on NVIDIA's portable kernels
    two narrow row tiles per (batch, k/v head), the second one partly padding."""
    b, sk, h, hk = 3, 3000, 32, 8
    gen = torch.Generator().manual_seed(d + sq)
    q, k, v = (torch.randn(b, n, heads, d, generator=gen).to("cuda", dtype)
               for n, heads in ((sq, h), (sk, hk), (sk, hk)))
    decision = flashsplit.explain(q, k, v, causal=causal)
    if decision["kernel"] == "portable_mma":
        assert decision["details"]["block_m"] == 16, decision
    _assert_dense_matches(q, k, v, causal, dtype, f"sq={sq} causal={causal}")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_varlen_on_the_256_row_tiles(dtype, causal):
    """d=64 varlen prefill that the dense call would run on 256-row tiles: on the H100 the
    sequence instances run them too (rows past a sequence's end in a tile, sequences ending
    inside a warp's rows, one shorter than a key block)."""
    q_lens = [1024, 1000, 700, 3, 1024, 1024, 999, 1024]
    k_lens = list(q_lens)
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 16, 16, 64, dtype, "cuda", seed=7)
    decision = varlen_decision(q, k, v, cu_q, cu_k, q_lens, k_lens, causal, 1)
    if decision["kernel"] != PORTABLE:
        assert decision["details"]["block_m"] == 256, decision
    out, lse = _varlen(q, k, v, cu_q, cu_k, q_lens, k_lens, causal=causal, num_splits=1)
    assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens, "256-row tiles", causal=causal)


# (h, hk, sq): a GQA group's heads packed into the Hopper kernel's 128-row tiles, from groups of
# 2 to 16 (MQA): one tile partly filled, two tiles the second partly, and a tile exactly full;
# groups of 5 and 12 fill 125 and 120 of a tile's rows (whole queries of the group), over two
# tiles. Tiles of 64 rows or fewer (18 rows of g2-9, the second tiles of g4-40, g5-30 and
# g12-11, and varlen sequences of fewer queries) leave the second consumer's rows all padding,
# so it lets their key blocks pass.
PACKED_GROUPS = {"g2-9": (16, 8, 9), "g4-40": (32, 8, 40), "g8-16": (32, 4, 16),
                 "mqa16-5": (16, 1, 5), "g5-30": (40, 8, 30), "g12-11": (24, 2, 11)}


@pytest.mark.parametrize("group", list(PACKED_GROUPS))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gqa_group_packed_into_tile_rows(dtype, d, causal, group):
    """Multi-token decode of a GQA group: the group's query heads share a tile's rows (row r:
    query r / group, head r % group). Dense calls, kv caches with poison past each sequence's
    keys and new keys appended, and varlen batches with an empty and odd sequences."""
    h, hk, sq = PACKED_GROUPS[group]
    gen = torch.Generator().manual_seed(d + sq + h)
    b, s = 3, 1500
    q = torch.randn(b, sq, h, d, generator=gen).to("cuda", dtype)
    k, v = (torch.randn(b, s, hk, d, generator=gen).to("cuda", dtype) for _ in range(2))
    decision = flashsplit.explain(q, k, v, causal=causal)
    assert decision["details"]["packs_heads"], decision
    if decision["kernel"] != PORTABLE:
        assert decision["details"]["block_m"] == 128 // (h // hk) * (h // hk), decision
    _assert_dense_matches(q, k, v, causal, dtype, "dense")

    # A kv cache: lengths short of a key block, across blocks, shorter than the queries.
    lens = [3, 700, s - sq]
    k_cache, v_cache = (_poisoned_cache(b, s, hk, d, lens, dtype, gen) for _ in range(2))
    k_new, v_new = (torch.randn(b, sq, hk, d, generator=gen).to("cuda", dtype) for _ in range(2))
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    for num_splits in SPLITS:
        kc, vc = k_cache.clone(), v_cache.clone()
        out, lse = flashsplit.flash_attn_with_kvcache(
            q, kc, vc, k_new, v_new, cache_seqlens=seqlens, causal=causal,
            num_splits=num_splits, return_softmax_lse=True, strict=True)
        for i, n in enumerate(lens):
            keys = torch.cat((k_cache[i, :n], k_new[i]))[None]
            values = torch.cat((v_cache[i, :n], v_new[i]))[None]
            high, low = naive_pair(q[i:i + 1], keys, values, causal=causal)
            what = f"kv cache seq {i} ({n} cached) G={num_splits}"
            assert_within_tolerance(out[i:i + 1], high[0], low[0], dtype, what + " out")
            assert_within_tolerance(lse[i:i + 1], high[1], low[1], dtype, what + " lse")
            assert (kc[i, n + sq:] == POISON).all(), what + ": cache past the append"

    q_lens, k_lens = [sq, 0, sq - 1, 1], [900, 40, sq - 1, 2000]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, h, hk, d, dtype, "cuda", seed=d + sq)
    for num_splits in SPLITS:
        out, lse = _varlen(q, k, v, cu_q, cu_k, q_lens, k_lens, causal=causal,
                           num_splits=num_splits)
        assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens,
                              f"varlen q_lens={q_lens} G={num_splits}", causal=causal)


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


def _with_nan_rows(t, rows):
    """t (total, heads, d) with `rows` more rows of NaN after its last."""
    return torch.cat((t, torch.full((rows,) + tuple(t.shape[1:]), float("nan"), dtype=t.dtype,
                                    device=t.device)))


@requires_hopper
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 96, 128, 192, 256])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_varlen_prefill_runs_the_hopper_kernels(dtype, d, causal, heads):
    """Sequences of every length class around the 128-row tiles and the key blocks (empty, one
    row, a block less one, a block, a block and one, longer), with sq > sk and sq < sk: the
    Hopper kernels' sequence instances. k and v carry NaN rows past the last sequence's keys,
    which no key box may read (a short last block's box ends at the sequence's last key)."""
    h, hk = HEADS[heads]
    q_lens = [0, 1, 127, 128, 129, 300, 64, 5]
    k_lens = [5, 0, 127, 300, 1000, 129, 64, 77]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, h, hk, d, dtype, "cuda", seed=d)
    k_nan, v_nan = _with_nan_rows(k, 200), _with_nan_rows(v, 200)
    for num_splits in SPLITS:
        decision = varlen_decision(q, k_nan, v_nan, cu_q, cu_k, q_lens, k_lens, causal,
                                    num_splits)
        # Split causal calls at d=192 and 256 have no Hopper instance (they spilled).
        hopper = not (causal and d > 128 and decision["num_splits"] > 1)
        assert decision["kernel"] == ("hopper_wgmma" if hopper else PORTABLE), decision
        out, lse = _varlen(q, k_nan, v_nan, cu_q, cu_k, q_lens, k_lens, causal=causal,
                           num_splits=num_splits)
        assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens,
                              f"d={d} G={num_splits}", causal=causal)


@requires_hopper
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 96, 128])
def test_long_unsplit_varlen_prefill_tile_heights(d, causal):
    """Unsplit calls of long sequences run the 192-row tiles at d=64 and with the mask at d=96
    (consumers side by side; with the mask, the grouped walk drawn from a counter), else the
    128-row ones, at d=128 with the mask those at the running max drawn from a counter
    (core/hopper_tiles.h, hopper_block_m)."""
    q_lens = [2000, 1999, 0, 4097]
    k_lens = [2000, 2100, 7, 4097]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 16, 16, d, torch.bfloat16, "cuda",
                                        seed=d)
    k_nan, v_nan = _with_nan_rows(k, 100), _with_nan_rows(v, 100)
    decision = varlen_decision(q, k_nan, v_nan, cu_q, cu_k, q_lens, k_lens, causal, 1)
    assert decision["kernel"] == "hopper_wgmma", decision
    tall = d == 64 or (causal and d == 96)
    assert decision["details"]["block_m"] == (192 if tall else 128), decision
    assert decision["details"]["running_max"] == (causal and d == 128), decision
    out, lse = _varlen(q, k_nan, v_nan, cu_q, cu_k, q_lens, k_lens, causal=causal, num_splits=1)
    assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens, f"d={d}", causal=causal)


@requires_hopper
@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_varlen_of_equal_lengths_walks_as_a_dense_call(d, num_splits):
    """Sequences that are all the longest (packed rows b x max_seqlen) over more than 32 key
    blocks without the mask run one block per SM walking the tiles, as a dense call does; beside
    a shorter sequence of the same max_seqlen_* (a block per tile) a sequence's out and lse stay
    bitwise the same."""
    n, h, hk = 4200, 8, 2
    q, k, v, cu, _ = varlen_inputs([n, n], [n, n], h, hk, d, torch.bfloat16, "cuda", seed=d)
    decision = varlen_decision(q, k, v, cu, cu, [n, n], [n, n], False, num_splits)
    assert decision["kernel"] == "hopper_wgmma", decision
    assert decision["num_splits"] == num_splits, decision
    assert decision["details"]["persistent"], decision
    out, lse = _varlen(q, k, v, cu, cu, [n, n], [n, n], num_splits=num_splits)
    assert_varlen_matches(out, lse, q, k, v, [n, n], [n, n], f"d={d} G={num_splits}")
    lens = [n, 1000]
    cu_beside = cu_seqlens(lens, "cuda")
    q2, k2, v2 = (t[:n + 1000] for t in (q, k, v))
    beside = varlen_decision(q2, k2, v2, cu_beside, cu_beside, lens, lens, False, num_splits)
    assert not beside["details"]["persistent"], beside
    out2, lse2 = _varlen(q2, k2, v2, cu_beside, cu_beside, lens, lens, num_splits=num_splits)
    assert torch.equal(out2[:n], out[:n]) and torch.equal(lse2[:, :n], lse[:, :n]), \
        "the first sequence changed beside a shorter one"


@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_kvcache_prefill_chunk_reads_no_slot_past_the_cache_length(causal, d):
    """A chunk of 200 queries against a contiguous cache whose slots past cache_seqlens hold
    NaN (a cache from torch.empty may): no key box reads them, so out is finite and right.
    With GQA and 200 queries the Hopper kernels serve it on the H100."""
    b, s, h, hk = 3, 1024, 8, 2
    lens = [200, 517, 1024]
    gen = torch.Generator().manual_seed(d)
    k_cache, v_cache = (_poisoned_cache(b, s, hk, d, lens, torch.bfloat16, gen, float("nan"))
                        for _ in range(2))
    q = torch.randn(b, 200, h, d, generator=gen).to("cuda", torch.bfloat16)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    for num_splits in SPLITS:
        out, lse = flashsplit.flash_attn_with_kvcache(
            q, k_cache, v_cache, cache_seqlens=seqlens, causal=causal, num_splits=num_splits,
            return_softmax_lse=True, strict=True)
        for i, n in enumerate(lens):
            high, low = naive_pair(q[i:i + 1], k_cache[i:i + 1, :n], v_cache[i:i + 1, :n],
                                   causal=causal)
            what = f"seq {i} ({n} cached) G={num_splits}"
            assert_within_tolerance(out[i:i + 1], high[0], low[0], torch.bfloat16, what + " out")
            assert_within_tolerance(lse[i:i + 1], high[1], low[1], torch.bfloat16, what + " lse")


# (h, hk, sq): 8 tokens of a group of 4 packed into tile rows; 80 queries of one head a tile;
# 256 queries, whose unsplit calls at d=64 run the 256-row tiles over pages of any size (96
# heads of one tile, where 128-row tiles take two waves).
PAGED_HOPPER_CASES = {"packed": (32, 8, 8), "prefill": (8, 2, 80), "wide": (16, 4, 256)}


@requires_hopper
@pytest.mark.parametrize("page_size", [1, 16, 24, 48, 64, 128, 256])
@pytest.mark.parametrize("case", list(PAGED_HOPPER_CASES))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_paged_cache_on_the_hopper_tiles(dtype, d, causal, case, page_size):
    """The Hopper sequence tiles read pages of any size (PAGED_HOPPER_CASES): pages of 64 keys
    or of whole key blocks as TMA boxes, a box a page or a block, the others copied a row at a
    time: on the 128-row tiles by 16-row runs where pages hold whole runs (16, 48) and a block
    starts at a multiple of 16 keys, on the 256-row ones (64-key blocks) by three warps from
    the rows a fourth locates. Cache lengths end inside
    a page, on a page's end and inside a key block; every slot past a sequence's keys and every
    unused page holds NaN, which no load may read. Against naive_attention."""
    h, hk, sq = PAGED_HOPPER_CASES[case]
    lens = [sq + 1, 100, 129, 256, 1000, 517]
    b, s = len(lens), 1024
    gen = torch.Generator().manual_seed(d + page_size + sq)
    q = torch.randn(b, sq, h, d, generator=gen).to("cuda", dtype)
    k_cache, v_cache = (_poisoned_cache(b, s, hk, d, lens, dtype, gen, float("nan"))
                        for _ in range(2))
    keys = [k_cache[i, :n] for i, n in enumerate(lens)]
    values = [v_cache[i, :n] for i, n in enumerate(lens)]
    k_pages, table = to_pages(torch.cat(keys), lens, page_size, torch.Generator().manual_seed(7),
                              poison=float("nan"))
    v_pages, _ = to_pages(torch.cat(values), lens, page_size, torch.Generator().manual_seed(7),
                          poison=float("nan"))
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    seqs = Sequences(seqused_k=seqlens, block_table=table, max_seqlen_q=sq,
                     max_seqlen_k=table.shape[1] * page_size)
    for num_splits in SPLITS:
        decision = _native.sequence_gate_decision(q, k_pages, v_pages, seqs, causal, num_splits)
        assert decision["kernel"] == "hopper_wgmma", decision
        assert decision["details"]["packs_heads"] == (case == "packed"), decision
        assert decision["details"]["page_rows"] == (page_size % 64 != 0), decision
        wide = case == "wide" and d == 64 and decision["num_splits"] == 1
        assert (decision["details"]["block_m"] == 256) == wide, decision
        out, lse = flashsplit.flash_attn_with_kvcache(
            q, k_pages, v_pages, cache_seqlens=seqlens, block_table=table, causal=causal,
            num_splits=num_splits, return_softmax_lse=True, strict=True)
        for i, n in enumerate(lens):
            high, low = naive_pair(q[i:i + 1], keys[i][None], values[i][None], causal=causal)
            what = f"seq {i} ({n} cached) G={num_splits}"
            assert_within_tolerance(out[i:i + 1], high[0], low[0], dtype, what + " out")
            assert_within_tolerance(lse[i:i + 1], high[1], low[1], dtype, what + " lse")


@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 96, 128])
def test_fixed_num_splits_is_invariant_to_the_number_of_sequences(d, causal, num_splits):
    """A sequence of 2048 tokens gives bitwise the same out and lse alone and beside 39 others
    of its length. On the Hopper kernels an unsplit call's tile height follows the waves of its
    grid, and the heights (128 and 192 rows here) round a row apart: a fixed num_splits takes
    the tiles of a batch that fills the GPU, whatever the call's own batch."""
    n, h, b = 2048, 8, 40
    lens = [n] * b
    q, k, v, cu, _ = varlen_inputs(lens, lens, h, h, d, torch.bfloat16, "cuda", seed=d)
    one = cu_seqlens([n], "cuda")
    alone = varlen_decision(q[:n], k[:n], v[:n], one, one, [n], [n], causal, num_splits)
    batch = varlen_decision(q, k, v, cu, cu, lens, lens, causal, num_splits)
    assert alone["details"]["block_m"] == batch["details"]["block_m"], (alone, batch)
    out1, lse1 = _varlen(q[:n], k[:n], v[:n], one, one, [n], [n], causal=causal,
                         num_splits=num_splits)
    out, lse = _varlen(q, k, v, cu, cu, lens, lens, causal=causal, num_splits=num_splits)
    assert torch.equal(out[:n], out1) and torch.equal(lse[:, :n], lse1), \
        f"the sequence changed beside {b - 1} others (d={d} G={num_splits})"
    assert_varlen_matches(out1, lse1, q[:n], k[:n], v[:n], [n], [n], f"d={d}", causal=causal)


@pytest.mark.parametrize("num_splits", [1, 3])
def test_fixed_num_splits_is_batch_invariant_on_prefill_tiles(num_splits):
    """The prefill form of the invariance check (on the H100 the Hopper kernels' sequence
    instances, whose tiles read past a sequence's rows into its neighbours'): a 300-query
    sequence's out and lse are bitwise the same wherever it sits and whoever sits beside it."""
    h, hk, d, n_q, n_k = 8, 8, 128, 300, 700
    gen = torch.Generator().manual_seed(num_splits)
    mine = [torch.randn(n, h, d, generator=gen).to("cuda", torch.bfloat16)
            for n in (n_q, n_k, n_k)]
    first = None
    for q_lens, k_lens in (([n_q], [n_k]), ([50, n_q, 7], [900, n_k, 3]),
                           ([n_q, 129, 128], [n_k, 64, 2000])):
        at = q_lens.index(n_q)
        q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, h, hk, d, torch.bfloat16, "cuda",
                                            seed=len(q_lens))
        q0, k0 = sum(q_lens[:at]), sum(k_lens[:at])
        q[q0:q0 + n_q], k[k0:k0 + n_k], v[k0:k0 + n_k] = mine
        out, lse = _varlen(q, k, v, cu_q, cu_k, q_lens, k_lens, causal=True,
                           num_splits=num_splits)
        result = out[q0:q0 + n_q], lse[:, q0:q0 + n_q]
        if first is None:
            first = result
        else:
            assert torch.equal(result[0], first[0]) and torch.equal(result[1], first[1]), \
                f"the 300-query sequence changed beside {q_lens}"

