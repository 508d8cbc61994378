"""The native kernels on adversarial data: scores rising or falling along the keys (every key
block moves the running max, in one walking order or the other) and attention-sink rows (one
key about 30 above the rest). They must be as accurate as on random data: within flash-attn's
tolerance of a float64 reference, on the Hopper and portable families, unsplit and split."""

import os
import sys

import pytest
import torch

from test_gpu_common import (DTYPE_IDS, DTYPES, assert_native, requires_hopper,  # noqa: F401
                             requires_native, varlen_decision)

from accuracy import assert_within_tolerance, naive_pair  # noqa: E402
from sequence_cases import cu_seqlens, to_pages  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
import _timing as T  # noqa: E402

import flashsplit  # noqa: E402
from flashsplit import _native  # noqa: E402
from flashsplit.sequences import Sequences  # noqa: E402

pytestmark = [pytest.mark.gpu, requires_native]

SHAPES = {  # (b, sq, sk, h, hk)
    "prefill": (2, 700, 700, 4, 2),
    "decode": (2, 1, 5000, 8, 2),
    # 80 (batch, k/v head) blocks: at d=64 and 128 the narrow tile with key warps (num_splits=0
    # on the H100 and the H200), whose warps' states meet with maxima far apart.
    "decode_key_warps": (40, 1, 3000, 8, 2),
    # 144 blocks: the half-size key-warp tile, two blocks an SM.
    "decode_key_warps_two_an_sm": (72, 1, 3000, 8, 2),
}


@pytest.mark.parametrize("kind", ["rising", "falling", "sink"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 96, 128, 192, 256], ids=lambda d: f"d{d}")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_adversarial_scores_are_as_accurate_as_random_ones(dtype, d, causal, shape, kind):
    b, sq, sk, h, hk = SHAPES[shape]
    q, k, v = T.adversarial_qkv(torch, kind, b, h, hk, sq, sk, d, dtype, seed=d + sq)
    high, low = naive_pair(q, k, v, causal=causal)
    for num_splits in (1, 3, 0):
        assert_native(q, k, v, causal, num_splits)
        out, lse, _ = flashsplit.flash_attn_func(q, k, v, causal=causal, num_splits=num_splits,
                                                 return_attn_probs=True, strict=True)
        what = f"{kind} {shape} d={d} causal={causal} G={num_splits}"
        assert_within_tolerance(out, high[0], low[0], dtype, what + " out")
        assert_within_tolerance(lse, high[1], low[1], dtype, what + " lse")


def _sink_qkv(b, sq, sk, h, hk, d, sink, lean, dtype, seed):
    """(q, k, v): key 0 scores about `sink` above every other key for a query row leaning
    along u with weight `lean` (a scalar, or one per query row), the rest random."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    u = torch.randn(d, device="cuda", generator=gen)
    u = u * (d ** 0.5 / u.norm())
    lean = torch.as_tensor(lean, device="cuda").reshape(-1, 1, 1)
    q = 0.25 * torch.randn(b, sq, h, d, device="cuda", generator=gen) + lean * u
    k = 0.25 * torch.randn(b, sk, hk, d, device="cuda", generator=gen)
    k[:, 0] += (sink / d ** 0.5) * u
    v = torch.randn(b, sk, hk, d, device="cuda", generator=gen)
    return tuple(x.to(dtype) for x in (q, k, v))


# 48 heads of 1536 rows fill more waves with 128-row tiles than with 192-row ones, so the plan
# runs the tall tiles at d=128 without the mask.
TALL = (1, 1536, 1536, 48, 48)  # (b, sq, sk, h, hk)


def _assert_tall_d128_accurate(q, k, v, dtype, what):
    decision = flashsplit.explain(q, k, v)
    assert decision["kernel"] == "hopper_wgmma" and decision["details"]["block_m"] == 192, \
        decision
    high, low = naive_pair(q, k, v)
    out, lse, _ = flashsplit.flash_attn_func(q, k, v, return_attn_probs=True, strict=True)
    assert_within_tolerance(out, high[0], low[0], dtype, what + " out")
    assert_within_tolerance(lse, high[1], low[1], dtype, what + " lse")


@requires_hopper
@pytest.mark.parametrize("kind", ["rising", "falling", "sink"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tall_d128_tiles_hold_adversarial_scores_in_place(dtype, kind):
    """The 192-row d=128 tiles without the mask keep their probabilities in fp32 in place
    (OnlineSoftmax::hold_in_place, with the warpgroup's vote and a second Q K^T where a warp's
    cannot be held): the same accuracy on adversarial data."""
    b, sq, sk, h, hk = TALL
    q, k, v = T.adversarial_qkv(torch, kind, b, h, hk, sq, sk, 128, dtype, seed=7)
    _assert_tall_d128_accurate(q, k, v, dtype, f"{kind} tall d=128")


# Causal calls whose 128-row tiles walk more than 32 key blocks take probabilities at the
# running max (hopper_causal_running_max): a chunk of queries against longer keys (its tiles in
# static rounds), a square call on two heads (too few tiles for the 192-row ones) and 576 tiles
# of 1100 queries against 4200 keys on 2 x 32 / 8 heads, both drawn from the counter (the
# latter several to a block, through the tile ring); unsplit, as num_splits=0 would split the
# keys of the few tiles.
LONG_CAUSAL = {"chunk": (1, 640, 4700, 2, 2), "square": (1, 4700, 4700, 2, 2),
               "drawn": (2, 1100, 4200, 32, 8)}


def _unsplit_causal_call(kind, b, sq, sk, h, hk, d, dtype, seed):
    """Adversarial inputs of one causal shape, and the details of their unsplit call's plan."""
    q, k, v = T.adversarial_qkv(torch, kind, b, h, hk, sq, sk, d, dtype, seed=seed)
    details = flashsplit.explain(q, k, v, causal=True, num_splits=1)["details"]
    return (q, k, v), details


def _assert_unsplit_causal_accurate(q, k, v, dtype, what):
    """The unsplit causal call's output and lse within tolerance of the float64 reference."""
    high, low = naive_pair(q, k, v, causal=True)
    out, lse, _ = flashsplit.flash_attn_func(q, k, v, causal=True, num_splits=1,
                                             return_attn_probs=True, strict=True)
    assert_within_tolerance(out, high[0], low[0], dtype, what + " out")
    assert_within_tolerance(lse, high[1], low[1], dtype, what + " lse")


@requires_hopper
@pytest.mark.parametrize("kind", ["random", "rising", "falling", "sink"])
@pytest.mark.parametrize("shape", list(LONG_CAUSAL))
@pytest.mark.parametrize("d", [64, 96, 128], ids=lambda d: f"d{d}")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_long_causal_tiles_at_the_running_max_are_accurate(dtype, d, shape, kind):
    b, sq, sk, h, hk = LONG_CAUSAL[shape]
    qkv, details = _unsplit_causal_call(kind, b, sq, sk, h, hk, d, dtype, seed=5)
    assert details["block_m"] == 128 and details["running_max"], details
    assert details["tile_counter"] == (shape != "chunk"), details
    _assert_unsplit_causal_accurate(*qkv, dtype, f"{kind} {shape} d={d} running max")


# At d=128 the causal 128-row tiles take the running max over 5-32 key blocks too, on
# persistent launches: in static rounds that carry S across tiles where the rounds even out
# (32 heads of 1024 rows), else drawn from the counter (16 heads of 2560 rows: 20 key blocks).
# The tiles and walk depend on the SM count: checked on 132 SMs (H100 and H200 SXM).
PERSISTENT_CAUSAL = {"rounds": (2, 1024, 16, False), "drawn": (1, 2560, 16, True)}


@requires_hopper
@pytest.mark.parametrize("kind", ["random", "rising", "falling", "sink"])
@pytest.mark.parametrize("walk", list(PERSISTENT_CAUSAL))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_persistent_d128_causal_tiles_at_the_running_max_are_accurate(dtype, walk, kind):
    b, s, h, drawn = PERSISTENT_CAUSAL[walk]
    qkv, details = _unsplit_causal_call(kind, b, s, s, h, h, 128, dtype, seed=9)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        assert details["block_m"] == 128 and details["running_max"], details
        assert details["tile_counter"] == drawn and details["carry"] == (not drawn), details
    _assert_unsplit_causal_accurate(*qkv, dtype, f"{kind} {walk} persistent d=128 running max")


# The causal 128-row d=192 and d=256 tiles drawn from the counter (hopper_large_head_draws):
# d=192 over 1024-4096 keys, 16 heads of 1100 rows (144 tiles, more than the SMs, several to a
# block through the tile ring) and two GQA groups of 8 / 2 heads of 2048 rows; d=256 where its
# static rounds end far after longest first, 16 / 8 heads of 4096 rows.
LARGE_HEAD_DRAWN = {"d192-mha": (1, 1100, 16, 16, 192), "d192-gqa": (2, 2048, 8, 2, 192),
                    "d256-gqa": (1, 4096, 16, 8, 256)}


@requires_hopper
@pytest.mark.parametrize("kind", ["random", "rising", "falling", "sink"])
@pytest.mark.parametrize("shape", list(LARGE_HEAD_DRAWN))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_large_head_causal_tiles_drawn_from_the_counter_are_accurate(dtype, shape, kind):
    b, s, h, hk, d = LARGE_HEAD_DRAWN[shape]
    qkv, details = _unsplit_causal_call(kind, b, s, s, h, hk, d, dtype, seed=11)
    assert details["block_m"] == 128 and details["block_n"] == (112 if d == 192 else 80), details
    if torch.cuda.get_device_properties(0).multi_processor_count == 132 or d == 192:
        assert details["tile_counter"] and details["persistent"], details
    _assert_unsplit_causal_accurate(*qkv, dtype, f"{kind} {shape} drawn")


# The same tiles for sequences of their own lengths: a chunk of 640 queries against caches of
# 4700 keys (past 32 key blocks), 2000, and 300 (the chunk's first rows see no key), through
# flash_attn_varlen_func and through the kv cache, contiguous or in pages loaded as boxes (two
# of 64 keys a block, or one of 128 or 256) or copied a row at a time (16 and 24 keys; each
# block's V one block behind its K), every slot past a sequence's keys NaN.
CHUNK_LENS = {"q": 640, "k": [4700, 300, 2000]}
SEQUENCE_LAYOUTS = ["varlen", "cache", "page16", "page24", "page64", "page128", "page256"]


def _long_causal_sequences(layout, q, k, v, k_lens):
    """(out, lse, decision) of the chunk's sequences in `layout`, num_splits=1, strict."""
    b, sq = q.shape[:2]
    seqlens = torch.tensor(k_lens, dtype=torch.int32, device="cuda")
    keys = [k[i, :n] for i, n in enumerate(k_lens)]
    values = [v[i, :n] for i, n in enumerate(k_lens)]
    if layout == "varlen":
        cu_q = cu_seqlens([sq] * b, "cuda")
        cu_k = cu_seqlens(k_lens, "cuda")
        k_packed, v_packed = torch.cat(keys), torch.cat(values)
        decision = varlen_decision(q.flatten(0, 1), k_packed, v_packed, cu_q, cu_k, [sq] * b,
                                   k_lens, True, 1)
        out, lse, _ = flashsplit.flash_attn_varlen_func(
            q.flatten(0, 1), k_packed, v_packed, cu_q, cu_k, sq, max(k_lens), causal=True,
            num_splits=1, return_attn_probs=True, strict=True)
        return out.view(q.shape), lse.view(q.shape[2], b, sq).transpose(0, 1), decision
    table = None
    if layout != "cache":
        page = int(layout[len("page"):])
        k, table = to_pages(torch.cat(keys), k_lens, page, torch.Generator().manual_seed(3),
                            poison=float("nan"))
        v, _ = to_pages(torch.cat(values), k_lens, page, torch.Generator().manual_seed(3),
                        poison=float("nan"))
    width = k.shape[1] * (1 if table is None else table.shape[1])
    seqs = Sequences(seqused_k=seqlens, block_table=table, max_seqlen_q=sq, max_seqlen_k=width)
    decision = _native.sequence_gate_decision(q, k, v, seqs, True, 1)
    out, lse = flashsplit.flash_attn_with_kvcache(
        q, k, v, cache_seqlens=seqlens, block_table=table, causal=True, num_splits=1,
        return_softmax_lse=True, strict=True)
    return out, lse, decision


@requires_hopper
@pytest.mark.parametrize("kind", ["random", "rising", "sink"])
@pytest.mark.parametrize("layout", SEQUENCE_LAYOUTS)
@pytest.mark.parametrize("d", [64, 96, 128], ids=lambda d: f"d{d}")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_long_causal_sequences_at_the_running_max_are_accurate(dtype, d, layout, kind):
    if d == 96 and layout.startswith("page"):
        pytest.skip("paged k/v at d=96 runs the portable kernels (hopper_reads_pages)")
    k_lens, sq = CHUNK_LENS["k"], CHUNK_LENS["q"]
    q, k, v = T.adversarial_qkv(torch, kind, len(k_lens), 2, 2, sq, max(k_lens), d, dtype,
                                seed=9)
    for i, n in enumerate(k_lens):
        k[i, n:] = float("nan")
        v[i, n:] = float("nan")
    out, lse, decision = _long_causal_sequences(layout, q, k, v, k_lens)
    details = decision["details"]
    assert decision["kernel"] == "hopper_wgmma", decision
    # Pages copied a row at a time (16, 24) take the running max at d=128 only.
    rows = layout in ("page16", "page24")
    assert details["block_m"] == 128 and details["page_rows"] == rows, decision
    assert details["running_max"] == (d == 128 or not rows), decision
    for i, n in enumerate(k_lens):
        high, low = naive_pair(q[i:i + 1], k[i:i + 1, :n], v[i:i + 1, :n], causal=True)
        what = f"{kind} {layout} d={d} seq {i} ({n} keys) running max"
        assert_within_tolerance(out[i:i + 1], high[0], low[0], dtype, what + " out")
        assert_within_tolerance(lse[i:i + 1], high[1], low[1], dtype, what + " lse")


@requires_hopper
def test_tall_d128_tiles_recompute_where_some_warps_cannot_hold():
    """fp16 sink rows of two strengths, alternating every 16 rows (one warp's rows): the weak
    sinks pass the bound but can be held by moving the base (hold_in_place), the strong ones
    cannot (their sums pass fp16 P's range), so in one warpgroup some warps have moved their
    base when the vote asks for Q K^T again. The kept sums and O must follow each warp's base."""
    b, sq, sk, h, hk = TALL
    lean = torch.where((torch.arange(sq) // 16) % 2 == 0, 1.0, 0.25)
    q, k, v = _sink_qkv(b, sq, sk, h, hk, 128, 30.0, lean, torch.float16, seed=11)
    _assert_tall_d128_accurate(q, k, v, torch.float16, "mixed sinks")


@pytest.mark.parametrize("sink", [40.0, 66.0, 100.0], ids=lambda s: f"sink{s:g}")
@pytest.mark.parametrize("d", [64, 128, 256], ids=lambda d: f"d{d}")
def test_sinks_far_above_the_running_max(d, sink):
    """bf16 sinks 58, 95 and 144 log2 units above every other key: the first moves the base of
    P, the others pass what a move may take (their factor would leave the normal range, or
    their probabilities fp32's) and take the block's max instead."""
    b, sq, sk, h, hk = SHAPES["prefill"]
    q, k, v = _sink_qkv(b, sq, sk, h, hk, d, sink, 1.0, torch.bfloat16, seed=int(sink) + d)
    high, low = naive_pair(q, k, v)
    assert_native(q, k, v)
    out, lse, _ = flashsplit.flash_attn_func(q, k, v, return_attn_probs=True, strict=True)
    what = f"sink {sink} d={d}"
    assert_within_tolerance(out, high[0], low[0], torch.bfloat16, what + " out")
    assert_within_tolerance(lse, high[1], low[1], torch.bfloat16, what + " lse")
