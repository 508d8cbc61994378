"""Native forward properties beyond accuracy: every output element written, bitwise
reproducibility, CUDA-graph capture, strided inputs, NaN containment, split-count clamping and
the heuristic's answers on the two shapes that define it."""

import math

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

# full_fp32_matmuls is an autouse fixture: importing it makes it apply in this module too.
from test_gpu_common import (  # noqa: E402
    DTYPE_IDS, DTYPES, assert_lse_close, assert_matches_reference, assert_native,
    assert_out_close, empty_row_count, fs_forward, full_fp32_matmuls,  # noqa: F401
    generator_for, key_blocks, poison_caching_allocator, rand_qkv, references, requires_native)

pytestmark = [pytest.mark.gpu, requires_native]


# ------------------------------------------------------------------------ unwritten outputs

@pytest.mark.parametrize("sq,sk", [(77, 1000), (300, 100), (1, 4097)],
                         ids=["sq77-sk1000", "sq300-sk100", "sq1-sk4097"])
@pytest.mark.parametrize("num_splits", [1, 4, 0])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_every_output_element_is_written_over_poisoned_memory(request, dtype, d, causal,
                                                              num_splits, sq, sk):
    b, h, hk = 2, 4, 2
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, dtype)
    refs = references(q, k, v, causal=causal)
    g = assert_native(q, k, v, causal, num_splits)["num_splits"]
    elem = q.element_size()
    # The op allocates out, lse and (G >= 2) the fp32 partials from the caching allocator:
    # leave NaN-filled free blocks of exactly those sizes behind for it to pick up.
    sizes = [b * sq * h * d * elem, b * h * sq * 4]
    if g > 1:
        sizes += [g * b * h * sq * d * 4, g * b * h * sq * 4]
    poison_caching_allocator(sizes)
    out, lse = fs_forward(q, k, v, causal, num_splits)
    torch.cuda.synchronize()
    what = f"poisoned sq={sq} sk={sk} d={d} causal={causal} G={g}"
    assert not torch.isnan(out).any(), f"{what}: NaN in out: an element was never written"
    assert not torch.isnan(lse).any(), f"{what}: NaN in lse: an element was never written"
    assert_matches_reference(out, lse, q, k, refs, causal, what)


# ------------------------------------------------------------------------ reproducibility

@pytest.mark.parametrize("num_splits", [1, 3, 0])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_same_split_count_is_bitwise_reproducible(request, causal, d, num_splits):
    q, k, v = rand_qkv(generator_for(request), 1, 128, 65535, 4, 2, d, torch.bfloat16)
    assert_native(q, k, v, causal, num_splits)
    out1, lse1 = fs_forward(q, k, v, causal, num_splits)
    out2, lse2 = fs_forward(q, k, v, causal, num_splits)
    assert torch.equal(out1, out2), "out differs between two runs with the same G"
    assert torch.equal(lse1, lse2), "lse differs between two runs with the same G"


# ------------------------------------------------------------------------ CUDA graphs

@pytest.mark.parametrize("num_splits", [1, 4, 0])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_cuda_graph_replay_equals_eager(request, d, causal, num_splits):
    gen = generator_for(request)
    b, sq, sk, h, hk = 2, 64, 3000, 4, 2
    q, k, v = rand_qkv(gen, b, sq, sk, h, hk, d, torch.bfloat16)
    assert_native(q, k, v, causal, num_splits)

    # Warm up on a side stream before capture, as torch.cuda.graphs requires.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fs_forward(q, k, v, causal, num_splits)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out, static_lse = fs_forward(q, k, v, causal, num_splits)
    graph.replay()
    torch.cuda.synchronize()
    first_out = static_out.clone()

    # New contents in the same storage: the replay must read them, not the captured values.
    new_q, new_k, new_v = rand_qkv(gen, b, sq, sk, h, hk, d, torch.bfloat16)
    q.copy_(new_q)
    k.copy_(new_k)
    v.copy_(new_v)
    graph.replay()
    torch.cuda.synchronize()
    eager_out, eager_lse = fs_forward(q, k, v, causal, num_splits)
    assert not torch.equal(static_out, first_out), "replay did not recompute from new inputs"
    assert torch.equal(static_out, eager_out), "graph replay out differs from eager"
    assert torch.equal(static_lse, eager_lse), "graph replay lse differs from eager"
    refs = references(q, k, v, causal=causal)
    assert_matches_reference(static_out, static_lse, q, k, refs, causal, "graph replay")


# ------------------------------------------------------------------------ strided inputs

def _packed_qkv(gen, b, s, h, d, dtype):
    """q, k, v as slices of one (b, s, 3, h, d) tensor: row stride 3*h*d, not h*d."""
    qkv = torch.randn(b, s, 3, h, d, device="cuda", dtype=dtype, generator=gen)
    return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]


def _transposed_sliced(gen, b, s, heads, d, dtype, skip=3):
    """(b, heads, s + skip, d) storage seen as (b, s, heads, d): row stride d, head stride
    (s + skip) * d, starting `skip` rows in. Last dim contiguous, everything else unusual."""
    base = torch.randn(b, heads, s + skip, d, device="cuda", dtype=dtype, generator=gen)
    return base.transpose(1, 2)[:, skip:]


@pytest.mark.parametrize("num_splits", [1, 5])
@pytest.mark.parametrize("layout", ["packed_qkv", "transposed_sliced"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_strided_inputs_match_contiguous_and_reference(request, dtype, d, layout, num_splits):
    gen = generator_for(request)
    b, s, h = 2, 517, 4
    if layout == "packed_qkv":
        q, k, v = _packed_qkv(gen, b, s, h, d, dtype)
    else:
        q = _transposed_sliced(gen, b, s, h, d, dtype)
        k = _transposed_sliced(gen, b, s, h, d, dtype, skip=5)
        v = _transposed_sliced(gen, b, s, h, d, dtype, skip=1)
    assert not q.is_contiguous() and not k.is_contiguous() and not v.is_contiguous()
    for causal in (False, True):
        assert_native(q, k, v, causal, num_splits)
        out, lse = fs_forward(q, k, v, causal, num_splits)
        # The kernels' arithmetic does not depend on strides: same G, same bits.
        out_c, lse_c = fs_forward(q.contiguous(), k.contiguous(), v.contiguous(), causal,
                                  num_splits)
        assert torch.equal(out, out_c), f"{layout} causal={causal}: out differs from contiguous"
        assert torch.equal(lse, lse_c), f"{layout} causal={causal}: lse differs from contiguous"
        refs = references(q, k, v, causal=causal)
        assert_matches_reference(out, lse, q, k, refs, causal, f"{layout} causal={causal}")


@pytest.mark.parametrize("num_splits", [1, 5, 0])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_batch_with_mixed_strides(request, d, num_splits):
    gen = generator_for(request)
    b, sq, sk, h, hk, dtype = 3, 45, 1200, 8, 2, torch.float16
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dtype, generator=gen)  # contiguous
    kv = torch.randn(b, sk, 2, hk, d, device="cuda", dtype=dtype, generator=gen)
    k = kv[:, :, 0]                                                          # packed kv
    v = _transposed_sliced(gen, b, sk, hk, d, dtype, skip=7)                  # head-major
    for causal in (False, True):
        assert_native(q, k, v, causal, num_splits)
        out, lse = fs_forward(q, k, v, causal, num_splits)
        refs = references(q, k, v, causal=causal)
        assert_matches_reference(out, lse, q, k, refs, causal, f"mixed strides causal={causal}")


# ------------------------------------------------------------------------ NaN containment

@pytest.mark.parametrize("num_splits", [1, 4])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_nan_in_one_query_row_stays_in_that_row(request, dtype, causal, num_splits):
    b, sq, sk, h, hk, d = 2, 33, 700, 4, 2, 64
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, dtype)
    bad_b, bad_row, bad_head = 1, 5, 2
    q[bad_b, bad_row, bad_head, 7] = float("nan")
    ref32, ref_lse, out_lp = references(q, k, v, causal=causal)
    assert torch.isnan(ref32[bad_b, bad_row, bad_head]).all()  # what "as in the reference" means
    assert_native(q, k, v, causal, num_splits)
    out, lse = fs_forward(q, k, v, causal, num_splits)
    what = f"NaN row, causal={causal} num_splits={num_splits}"
    assert torch.isnan(out[bad_b, bad_row, bad_head]).all(), \
        f"{what}: the row whose q holds NaN must be NaN in every column, got " \
        f"{out[bad_b, bad_row, bad_head, :8].tolist()}"
    assert torch.isnan(lse[bad_b, bad_head, bad_row]), \
        f"{what}: lse of the NaN row must be NaN, got {lse[bad_b, bad_head, bad_row].item()}"
    clean = torch.ones(b, sq, h, dtype=torch.bool, device="cuda")
    clean[bad_b, bad_row, bad_head] = False
    assert not torch.isnan(out[clean]).any(), f"{what}: NaN leaked into other rows"
    # Compare everything else with the reference: zero the poisoned row in all three.
    keep = clean[..., None]
    assert_out_close(torch.where(keep, out, 0), torch.where(keep, ref32, 0),
                     torch.where(keep, out_lp, 0), what)
    keep_lse = clean.permute(0, 2, 1)
    assert_lse_close(torch.where(keep_lse, lse, 0), torch.where(keep_lse, ref_lse, 0), what)


# ------------------------------------------------------------------------ split counts

@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_num_splits_beyond_key_blocks_is_clamped(request, d):
    b, sq, sk, h, hk = 2, 40, 300, 4, 4
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, torch.bfloat16)
    block_n = assert_native(q, k, v)["details"]["split_block_n"]
    n_blocks = key_blocks(sk, block_n)
    exact_out, exact_lse = fs_forward(q, k, v, False, n_blocks)
    refs = references(q, k, v)
    for requested in (n_blocks + 1, 1000, 1 << 20):
        decision = assert_native(q, k, v, False, requested)
        assert decision["num_splits"] == n_blocks, \
            f"num_splits={requested} with {n_blocks} key blocks: explain says G={decision['num_splits']}"
        out, lse = fs_forward(q, k, v, False, requested)
        assert torch.equal(out, exact_out) and torch.equal(lse, exact_lse), \
            f"num_splits={requested} must run exactly like num_splits={n_blocks}"
        assert_matches_reference(out, lse, q, k, refs, False, f"clamped num_splits={requested}")


def _empty_qkv(b, h, hk, sq, sk, d):
    q = torch.empty(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
    kv = torch.empty(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
    return q, kv, kv


def test_heuristic_splits_few_queries_over_long_keys():
    # 16 query tiles on a 132-SM GPU: most of the chip idles without split-KV.
    decision = assert_native(*_empty_qkv(1, 16, 16, 128, 65535, 64))
    assert decision["num_splits"] > 1, f"(1,16,16,128,65535,64) should split: {decision}"


def test_heuristic_does_not_split_a_grid_that_fills_the_gpu():
    # 8 * 16 * 64 = 8192 query tiles: splitting would only add traffic.
    decision = assert_native(*_empty_qkv(8, 16, 16, 8192, 8192, 64))
    assert decision["num_splits"] == 1, f"(8,16,16,8192,8192,64) must not split: {decision}"


def test_empty_row_count_matches_the_bottom_right_rule():
    # The helper the other tests rely on, checked against the rule itself.
    for sq, sk in [(5, 3), (3, 5), (4, 4), (2048, 128)]:
        rows = [i for i in range(sq) if not any(j <= i + sk - sq for j in range(sk))]
        assert empty_row_count(sq, sk, True) == len(rows) and rows == list(range(len(rows)))
    assert math.isclose(empty_row_count(7, 2, False), 0)
