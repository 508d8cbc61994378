"""Random calls of the three entry points against the fp64 reference, on both kernel families.

Each case draws an entry point (flash_attn_func, flash_attn_varlen_func,
flash_attn_with_kvcache), a dtype, a head dim (v of 128 beside 192 on dense calls), heads (MHA,
GQA, MQA), lengths (one token to 16k keys, powers of two and their neighbours, zero-length
sequences, caches longer than their keys, in pages of any size), a mask (causal, windows), a
softcap, a scale and num_splits, so that combinations no parametrized test lists meet here.
A case's draw follows from its index and the seed alone, so a failure reruns by itself:
FLASHSPLIT_RANDOM_CALLS sets the number of cases (default 120), FLASHSPLIT_RANDOM_SEED the
draw (default 0). Results pass by flash-attn's tolerance rule (accuracy.py); caches carry
poison past each sequence's keys, and the append must write the new keys and nothing past them.
"""

import os
import random

import pytest
import torch

from test_gpu_common import family, requires_native  # noqa: F401 (family: a fixture)

import flashsplit  # noqa: E402
from accuracy import assert_within_tolerance, naive_pair  # noqa: E402
from sequence_cases import (  # noqa: E402
    POISON, assert_varlen_matches, randn, to_pages, varlen_inputs)

pytestmark = [pytest.mark.gpu, requires_native]

CASES = int(os.environ.get("FLASHSPLIT_RANDOM_CALLS", "120"))
SEED = int(os.environ.get("FLASHSPLIT_RANDOM_SEED", "0"))
HEADS = [(1, 1), (3, 3), (4, 1), (6, 2), (8, 8), (12, 4), (16, 2), (32, 8)]
HEAD_DIMS = [(64, 64), (96, 96), (128, 128), (192, 192), (256, 256), (192, 128)]
SPLITS = [0, 0, 0, 1, 1, 2, 3, 5, 16]
PAGE_SIZES = [0, 0, 1, 8, 16, 24, 64, 100, 128, 256]  # 0: a contiguous cache
# The largest (batch x heads x queries x keys) a dense case draws: the fp64 reference holds
# a few score matrices of that many entries.
MOST_SCORES = 2e8


def draw_length(rng, most):
    r = rng.random()
    if r < 0.1:
        return rng.randint(1, 8)
    if r < 0.2:
        return min(most, rng.choice([128, 256, 512, 1024, 2048, 4096]))
    if r < 0.3:
        return min(most, rng.choice([127, 129, 255, 257, 1023, 1025]))
    return rng.randint(1, most)


def draw_options(rng, softcap=True):
    """flash-attn keyword options: mask, softcap, scale and num_splits."""
    options = {"causal": rng.random() < 0.5, "num_splits": rng.choice(SPLITS)}
    if rng.random() < 0.15:
        options["window_size"] = (rng.randint(0, 300), rng.choice([-1, 0, rng.randint(0, 100)]))
    if softcap and rng.random() < 0.1:
        options["softcap"] = rng.choice([5.0, 30.0])
    if rng.random() < 0.1:
        options["softmax_scale"] = rng.uniform(0.02, 0.3)
    return options


def reference_options(options):
    return {k: v for k, v in options.items() if k != "num_splits"}


def dense_call(rng, gen, dtype, d, dv, h, hk):
    b, sq, sk = rng.randint(1, 3), draw_length(rng, 1500), draw_length(rng, 3000)
    if rng.random() < 0.25:
        b, sq, sk = 1, draw_length(rng, 8192), draw_length(rng, 16384)
    if rng.random() < 0.3:
        sq = sk
    while b * h * sq * sk > MOST_SCORES:
        sq, sk = max(1, sq // 2), max(1, sk * 3 // 4)
    options = draw_options(rng)
    q = randn((b, sq, h, d), dtype, "cuda", gen)
    k = randn((b, sk, hk, d), dtype, "cuda", gen)
    v = randn((b, sk, hk, dv), dtype, "cuda", gen)
    what = f"flash_attn_func b={b} sq={sq} sk={sk} h={h}/{hk} d={d} dv={dv} {dtype} {options}"
    out, lse, _ = flashsplit.flash_attn_func(q, k, v, return_attn_probs=True, **options)
    high, low = naive_pair(q, k, v, **reference_options(options))
    assert_within_tolerance(out, high[0], low[0], dtype, what + " out")
    assert_within_tolerance(lse, high[1], low[1], dtype, what + " lse")


def varlen_call(rng, dtype, d, h, hk):
    b = rng.randint(1, 6)
    q_lens = [0 if rng.random() < 0.15 else draw_length(rng, 1200) for _ in range(b)]
    k_lens = [0 if rng.random() < 0.1 else draw_length(rng, 2500) for _ in range(b)]
    if rng.random() < 0.4:
        k_lens = list(q_lens)
    options = draw_options(rng)
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, h, hk, d, dtype, "cuda",
                                        seed=rng.randint(0, 2**31))
    what = f"flash_attn_varlen_func q {q_lens} k {k_lens} h={h}/{hk} d={d} {dtype} {options}"
    out, lse, _ = flashsplit.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), return_attn_probs=True, **options)
    assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens, what, **reference_options(options))


def kvcache_call(rng, gen, dtype, d, h, hk):
    b, s = rng.randint(1, 5), rng.choice([256, 1000, 2048, 4096, 16384])
    sq = rng.choice([1, 1, 2, 4, 7, 16, 64, 200])
    new = rng.choice([0, sq])
    lens = [rng.randint(0, s - new) for _ in range(b)]
    page = rng.choice(PAGE_SIZES)
    options = draw_options(rng, softcap=False)
    q = randn((b, sq, h, d), dtype, "cuda", gen)
    k_new, v_new = (randn((b, new, hk, d), dtype, "cuda", gen) if new else None
                    for _ in range(2))
    keys = [randn((n + new, hk, d), dtype, "cuda", gen) for n in lens]
    values = [randn((n + new, hk, d), dtype, "cuda", gen) for n in lens]
    if new:
        for i, n in enumerate(lens):
            keys[i][n:], values[i][n:] = k_new[i], v_new[i]
    caches, table, order = [], None, rng.randint(0, 2**31)
    for rows in (keys, values):
        if page:  # both in the same page order, of one block table
            cache, table = to_pages(torch.cat(rows), [n + new for n in lens], page,
                                    torch.Generator().manual_seed(order))
            cache_table = table.long()
            for i, n in enumerate(lens):  # the append must write these
                at = torch.arange(n, n + new)
                cache[cache_table[i, at // page], at % page] = POISON
        else:
            cache = torch.full((b, s, hk, d), POISON, dtype=dtype, device="cuda")
            for i, n in enumerate(lens):
                cache[i, :n] = rows[i][:n]
        caches.append(cache)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    what = (f"flash_attn_with_kvcache b={b} s={s} sq={sq} new={new} cached {lens} page={page} "
            f"h={h}/{hk} d={d} {dtype} {options}")
    out, lse = flashsplit.flash_attn_with_kvcache(
        q, caches[0], caches[1], k_new, v_new, cache_seqlens=seqlens, block_table=table,
        return_softmax_lse=True, **options)
    for i in range(b):
        high, low = naive_pair(q[i:i + 1], keys[i][None], values[i][None],
                               **reference_options(options))
        assert_within_tolerance(out[i:i + 1], high[0], low[0], dtype, f"{what} seq {i} out")
        assert_within_tolerance(lse[i:i + 1], high[1], low[1], dtype, f"{what} seq {i} lse")
        if not page:
            for cache, rows in zip(caches, (keys, values)):
                assert torch.equal(cache[i, :lens[i] + new], rows[i]), f"{what} seq {i} append"
                assert (cache[i, lens[i] + new:] == POISON).all(), f"{what} seq {i} past it"


@pytest.mark.parametrize("case", range(CASES), ids=[f"case{i}" for i in range(CASES)])
def test_random_call_matches_the_reference(family, case):
    rng = random.Random(f"{SEED}-{case}")
    gen = torch.Generator().manual_seed(rng.randint(0, 2**31))
    dtype = rng.choice([torch.bfloat16, torch.float16])
    d, dv = rng.choice(HEAD_DIMS)
    h, hk = rng.choice(HEADS)
    kind = rng.choice(["dense", "dense", "varlen", "kvcache"]) if d == dv else "dense"
    if kind == "dense":
        dense_call(rng, gen, dtype, d, dv, h, hk)
    elif kind == "varlen":
        varlen_call(rng, dtype, d, h, hk)
    else:
        kvcache_call(rng, gen, dtype, d, h, hk)
