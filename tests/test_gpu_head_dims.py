"""Head dims 96, 192 and 256 on the native kernels, against the fp32 reference: both dtypes,
causal or not, MHA/GQA/MQA, decode (the narrow tile), prefill and long keys (the wide tile and
the Hopper kernels), G 1, 3 and the heuristic's, on both kernel families (the portable one
forced with FLASHSPLIT_DISABLE_HOPPER=1); v of 128 beside q and k of 192 (also through the tail
split, and beside calls of the same shape with v of 192); varlen and paged kv caches."""

import pytest
import torch

from test_gpu_common import (  # noqa: F401 (fixtures: full_fp32_matmuls, autouse; family)
    BUILD_INFO, DTYPE_IDS, DTYPES, PORTABLE, assert_matches_reference, assert_native,
    assert_out_close, family, fs_forward, full_fp32_matmuls, generator_for, rand_qkv,
    references, requires_hopper, requires_native)

import flashsplit  # noqa: E402
from sequence_cases import assert_varlen_matches, to_pages, varlen_inputs  # noqa: E402

pytestmark = [pytest.mark.gpu, requires_native]

HEAD_DIMS = (96, 192, 256)
SHAPES = [(1, 1), (1, 9000), (4, 4000), (113, 203), (700, 900), (2048, 2048), (300, 100)]
HEADS = {"mha": (4, 4), "gqa": (8, 2), "mqa": (4, 1)}
SPLITS = (1, 3, 0)


def test_the_build_has_every_head_dim():
    assert set(HEAD_DIMS) <= set(BUILD_INFO.get("head_dims", [])), BUILD_INFO


@pytest.mark.parametrize("sq,sk", SHAPES, ids=[f"sq{a}-sk{b}" for a, b in SHAPES])
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", HEAD_DIMS, ids=[f"d{d}" for d in HEAD_DIMS])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_head_dim_matches_fp32_reference(request, family, dtype, d, causal, heads, sq, sk):
    h, hk = HEADS[heads]
    b = 1 if sq * sk >= 4_000_000 else 2
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, dtype)
    refs = references(q, k, v, causal=causal)
    for num_splits in SPLITS:
        decision = assert_native(q, k, v, causal, num_splits)
        if family == "portable":
            assert decision["kernel"] == PORTABLE, decision
        what = (f"{family} b={b} sq={sq} sk={sk} h={h} hk={hk} d={d} causal={causal} "
                f"num_splits={num_splits} ({decision['kernel']}, G={decision['num_splits']}, "
                f"tile {decision['details']['block_m']}x{decision['details']['block_n']})")
        out, lse = fs_forward(q, k, v, causal, num_splits)
        assert_matches_reference(out, lse, q, k, refs, causal, what)


@requires_hopper
@pytest.mark.parametrize("d", HEAD_DIMS, ids=[f"d{d}" for d in HEAD_DIMS])
def test_long_prefill_takes_the_hopper_kernels(d):
    q = torch.empty(1, 1024, 8, d, device="cuda", dtype=torch.bfloat16)
    decision = assert_native(q, q, q)
    assert decision["kernel"] == "hopper_wgmma", decision


VALUE_SHAPES = [(1, 5000), (113, 203), (300, 700), (2048, 2048)]


@pytest.mark.parametrize("sq,sk", VALUE_SHAPES, ids=[f"sq{a}-sk{b}" for a, b in VALUE_SHAPES])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_value_head_dim_128_beside_192(request, family, dtype, causal, sq, sk):
    """q and k of head dim 192 with v of 128 (multi-head latent attention prefill): the output
    has v's 128 columns, on both families, unsplit and split (the combine folds 128 columns)."""
    gen = generator_for(request)
    q, k, _ = rand_qkv(gen, 1, sq, sk, 8, 2, 192, dtype)
    v = torch.randn(1, sk, 2, 128, device="cuda", dtype=dtype, generator=gen)
    refs = references(q, k, v, causal=causal)
    for num_splits in SPLITS:
        decision = assert_native(q, k, v, causal, num_splits)
        if family == "portable":
            assert decision["kernel"] == PORTABLE, decision
        out, lse = fs_forward(q, k, v, causal, num_splits)
        assert_matches_reference(out, lse, q, k, refs, causal,
                                 f"{family} dv=128 sq={sq} sk={sk} causal={causal} "
                                 f"num_splits={num_splits} ({decision['kernel']})")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_value_head_dim_beside_the_same_shape_with_v_like_k(request, causal):
    """Calls of one shape but v's head dim are planned apart (the plan cache's key has it): d=192
    with v of 192, then of 128, then of 192 again, each right."""
    gen = generator_for(request)
    q, k, v192 = rand_qkv(gen, 2, 700, 900, 4, 2, 192, torch.bfloat16)
    v128 = torch.randn(2, 900, 2, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
    for v in (v192, v128, v192):
        out = flashsplit.flash_attn_func(q, k, v, causal=causal, strict=True)
        ref32, _, out_lp = references(q, k, v, causal=causal)
        assert out.shape == ref32.shape, f"v of {v.shape[-1]}: out {tuple(out.shape)}"
        assert_out_close(out, ref32, out_lp, f"v of {v.shape[-1]}")


@requires_hopper
def test_value_head_dim_128_through_the_tail_split(request):
    """133 heads of one 128-row tile over 8192 keys leave one tile past a full round of 132 SMs:
    the Hopper kernel cuts it into pieces whose partial records are v's 128 columns wide."""
    gen = generator_for(request)
    q, k, _ = rand_qkv(gen, 1, 128, 8192, 133, 133, 192, torch.bfloat16)
    v = torch.randn(1, 8192, 133, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
    decision = assert_native(q, k, v, False, 1)
    assert decision["kernel"] == "hopper_wgmma" and decision["details"]["tail_tiles"] > 0, decision
    out, lse = fs_forward(q, k, v, False, 1)
    assert_matches_reference(out, lse, q, k, references(q, k, v), False, "dv=128 tail split")


@pytest.mark.parametrize("d", HEAD_DIMS, ids=[f"d{d}" for d in HEAD_DIMS])
def test_head_dim_varlen_and_paged_kv_cache(d):
    q_lens, k_lens = [3, 0, 130, 1], [700, 5, 300, 2000]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 8, 2, d, torch.bfloat16, "cuda", seed=d)
    for num_splits in SPLITS:
        out, lse, _ = flashsplit.flash_attn_varlen_func(
            q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=True, return_attn_probs=True,
            strict=True, num_splits=num_splits)
        assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens, f"varlen d={d} G={num_splits}",
                              causal=True)
        k_pages, table = to_pages(k, k_lens, 16, torch.Generator().manual_seed(d))
        v_pages, _ = to_pages(v, k_lens, 16, torch.Generator().manual_seed(d))
        out, lse, _ = flashsplit.flash_attn_varlen_func(
            q, k_pages, v_pages, cu_q, cu_k, max(q_lens), max(k_lens), causal=True,
            block_table=table, return_attn_probs=True, strict=True, num_splits=num_splits)
        assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens, f"paged d={d} G={num_splits}",
                              causal=True)


@pytest.mark.parametrize("page_size", [16, 24])
@pytest.mark.parametrize("d", HEAD_DIMS, ids=[f"d{d}" for d in HEAD_DIMS])
def test_head_dim_paged_decode(d, page_size):
    # Decode runs the narrow tile, whose paged copies take one page per run of a thread's rows
    # where the page size is a multiple of the run (8 or 16 rows by head dim), else one per row.
    q_lens, k_lens = [1, 1, 1, 1], [700, 5, 300, 2000]
    q, k, v, cu_q, cu_k = varlen_inputs(q_lens, k_lens, 8, 2, d, torch.bfloat16, "cuda", seed=d)
    k_pages, table = to_pages(k, k_lens, page_size, torch.Generator().manual_seed(d))
    v_pages, _ = to_pages(v, k_lens, page_size, torch.Generator().manual_seed(d))
    for num_splits in SPLITS:
        out, lse, _ = flashsplit.flash_attn_varlen_func(
            q, k_pages, v_pages, cu_q, cu_k, 1, max(k_lens), causal=True, block_table=table,
            return_attn_probs=True, strict=True, num_splits=num_splits)
        assert_varlen_matches(out, lse, q, k, v, q_lens, k_lens,
                              f"paged decode d={d} page_size={page_size} G={num_splits}",
                              causal=True)
