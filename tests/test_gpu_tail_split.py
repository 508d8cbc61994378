"""The tail split (core/tail_split.h): an unsplit Hopper call without a causal mask cuts the
tiles of its last, part-empty round into key-block chunks, one per SM, and the last piece of
each tile to finish folds the others' fp32 partials in. The grids here are sized from the GPU's
SM count so that the split is on, and explain() must say so: a test that ran whole tiles would
pass without testing anything.
"""

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

# full_fp32_matmuls is an autouse fixture: importing it makes it apply in this module too.
from test_gpu_common import (  # noqa: E402
    BUILD_INFO, DEVICE_CC, DTYPE_IDS, DTYPES, HOPPER_FORCED_OFF, assert_matches_reference,
    assert_native, fs_forward, full_fp32_matmuls,  # noqa: F401
    generator_for, poison_caching_allocator, rand_qkv, references, requires_native)

pytestmark = [pytest.mark.gpu, requires_native]

if DEVICE_CC != 90 or HOPPER_FORCED_OFF or not BUILD_INFO.get("hopper_kernels_built"):
    pytest.skip("the tail split is part of the Hopper kernels, which this run does not use "
                f"(cc {DEVICE_CC}, FLASHSPLIT_DISABLE_HOPPER={int(HOPPER_FORCED_OFF)})",
                allow_module_level=True)

SMS = torch.cuda.get_device_properties(0).multi_processor_count


def grid(name):
    """(b, h, hk, sq, sk, d) with more tiles than SMs and a last round the tail split takes;
    sk sets the key blocks per tile (the main kernel, unmasked and unsplit, is persistent at any
    length). Most use 128-row query tiles of sq = 128, one per head."""
    cases = {
        # One tile left: its 64 key blocks go to 16 SMs, 4 each (16 parts).
        "one-left-d128": (1, SMS + 1, SMS + 1, 128, 8192, 128),
        # 9 tiles left over 17 key blocks (the last one part-masked), 38 chunks of 4-5.
        "few-left-d64": (1, SMS + 9, SMS + 9, 128, 2100, 64),
        # About half a round left, 65 key blocks per tile.
        "half-left-long-d128": (1, SMS + SMS // 2 + 3, SMS + SMS // 2 + 3, 128, 8200, 128),
        # GQA: two query heads per k/v head, 1.7 rounds of tiles.
        "gqa-d64": (1, 2 * (SMS // 3 + 1) + 2 * SMS // 2, (SMS // 3 + 1) + SMS // 2, 128, 4000,
                    64),
        # 192-row tiles at d=64 (three consumers), the last one part-padded (700 = 3 * 192 + 124).
        "tall-d64": (4, 36, 36, 700, 2200, 64),
        # 192-row tiles at d=128 (three consumers of 160 registers: the fold goes in passes).
        "tall-d128": (1, 16, 16, 2304, 2200, 128),
        # 192-row tiles at d=96 over 144-key blocks, the last query tile part-padded and the last
        # key block part-masked (2200 = 15 * 144 + 40).
        "tall-d96": (4, 36, 36, 700, 2200, 96),
        # The same over 35 key blocks a tile.
        "tall-long-d96": (1, 16, 16, 2304, 5000, 96),
        # d=192's ping-pong tiles of 112-key blocks (5000 = 44 * 112 + 72), 2.2 rounds.
        "d192": (1, 16, 16, 2304, 5000, 192),
        # d=256's of 80-key blocks (4030 = 50 * 80 + 30), the last query tile part-padded; one
        # round and 12 tiles in 11 parts each.
        "d256": (1, 12, 12, 1500, 4030, 256),
    }
    return cases[name]


CASES = ["one-left-d128", "few-left-d64", "half-left-long-d128", "gqa-d64", "tall-d64",
         "tall-d128", "tall-d96", "tall-long-d96", "d192", "d256"]


def assert_tail_on(q, k, v, what):
    decision = assert_native(q, k, v, False, 1)
    assert decision["kernel"] == "hopper_wgmma", f"{what}: {decision}"
    assert decision["details"]["tail_tiles"] > 0 and decision["details"]["tail_parts"] >= 2, \
        f"{what}: the tail split should be on: {decision}"
    return decision


@pytest.mark.parametrize("scale", [None, -0.3], ids=["default-scale", "negative-scale"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tail_split_matches_reference_over_poisoned_memory(request, dtype, case, scale):
    b, h, hk, sq, sk, d = grid(case)
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, dtype)
    what = f"{case} b={b} h={h} hk={hk} sq={sq} sk={sk} d={d} scale={scale}"
    decision = assert_tail_on(q, k, v, what)
    if case == "one-left-d128":
        details = decision["details"]
        assert details["tail_tiles"] == 1 and details["tail_parts"] == 16, decision
    refs = references(q, k, v, softmax_scale=scale)
    # Only the workspace's arrival counters are cleared before a launch: leave 0xFF-filled free
    # blocks for it (and for out and lse) to land on.
    poison_caching_allocator([b * sq * h * d * q.element_size(), b * h * sq * 4,
                              1 << 20, 4 << 20, 16 << 20, 64 << 20], copies=2)
    out, lse = fs_forward(q, k, v, False, 1, softmax_scale=scale)
    assert_matches_reference(out, lse, q, k, refs, False, what)


@pytest.mark.parametrize("case", ["one-left-d128", "half-left-long-d128", "tall-d64", "tall-d128",
                                  "tall-d96", "d192", "d256"])
def test_tail_split_is_bitwise_reproducible(request, case):
    """The last piece folds the parts in part order, so the bits do not depend on which piece
    finished last."""
    b, h, hk, sq, sk, d = grid(case)
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, torch.bfloat16)
    assert_tail_on(q, k, v, case)
    out1, lse1 = fs_forward(q, k, v, False, 1)
    for _ in range(4):
        out2, lse2 = fs_forward(q, k, v, False, 1)
        assert torch.equal(out1, out2), f"{case}: out differs between runs"
        assert torch.equal(lse1, lse2), f"{case}: lse differs between runs"


@pytest.mark.parametrize("case", ["few-left-d64", "half-left-long-d128"])
def test_tail_split_off_by_env_and_for_causal_calls(request, monkeypatch, case):
    b, h, hk, sq, sk, d = grid(case)
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, torch.bfloat16)
    assert_tail_on(q, k, v, case)
    refs = references(q, k, v)
    out_on, lse_on = fs_forward(q, k, v, False, 1)
    assert_matches_reference(out_on, lse_on, q, k, refs, False, f"{case} tail on")
    monkeypatch.setenv("FLASHSPLIT_DISABLE_TAIL_SPLIT", "1")
    decision = assert_native(q, k, v, False, 1)
    assert decision["details"]["tail_tiles"] == 0, decision
    out_off, lse_off = fs_forward(q, k, v, False, 1)
    assert_matches_reference(out_off, lse_off, q, k, refs, False, f"{case} tail off")
    monkeypatch.delenv("FLASHSPLIT_DISABLE_TAIL_SPLIT")
    # Tiles of unequal work (causal) and split calls keep whole tiles.
    assert assert_native(q, k, v, True, 1)["details"]["tail_tiles"] == 0
    assert assert_native(q, k, v, False, 2)["details"]["tail_tiles"] == 0


def test_tail_split_replays_in_a_cuda_graph(request):
    """A replay reuses the captured workspace: its arrival counters must be cleared again by
    each replay (a captured memset), or the second replay would fold partials that were never
    written."""
    gen = generator_for(request)
    b, h, hk, sq, sk, d = grid("few-left-d64")
    q, k, v = rand_qkv(gen, b, sq, sk, h, hk, d, torch.bfloat16)
    assert_tail_on(q, k, v, "graph")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fs_forward(q, k, v, False, 1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out, static_lse = fs_forward(q, k, v, False, 1)
    for replay in range(3):
        new_q, new_k, new_v = rand_qkv(gen, b, sq, sk, h, hk, d, torch.bfloat16)
        q.copy_(new_q)
        k.copy_(new_k)
        v.copy_(new_v)
        static_out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        eager_out, eager_lse = fs_forward(q, k, v, False, 1)
        assert torch.equal(static_out, eager_out), f"replay {replay}: out differs from eager"
        assert torch.equal(static_lse, eager_lse), f"replay {replay}: lse differs from eager"
        assert_matches_reference(static_out, static_lse, q, k, references(q, k, v), False,
                                 f"graph replay {replay}")
