"""The plan a launch executes is the plan explain() returns: over prefill, decode, split, tail and
both kernel families, the native forward reports the plan it was given and the launchers record
what they ran (tile shapes from the kernels' own constants, the grids they launched); both must
equal explain()'s answer for the same call."""

import os

import pytest
import torch

from test_gpu_common import (DEVICE_CC, PORTABLE, generator_for, hbm_share_over_h100, rand_qkv,
                             requires_native)

pytestmark = pytest.mark.gpu

import flashsplit  # noqa: E402
from flashsplit import _native  # noqa: E402

# (b, h, hk, sq, sk, d, causal, num_splits, what the shape exercises)
SHAPES = [
    (5, 16, 16, 2048, 2048, 96, False, 0, "192-row tiles, rotated rounds"),
    (4, 16, 16, 4096, 4096, 128, False, 0, "tail split"),
    (2, 21, 21, 8192, 8192, 96, False, 1, "long 144-key tiles persistent, tail split"),
    (32, 32, 32, 512, 512, 64, False, 1, "256-row tiles"),
    (16, 16, 16, 1024, 1024, 128, True, 0, "ping-pong tiles carrying S"),
    (4, 32, 32, 4096, 4096, 64, True, 1, "causal tiles drawn from a counter in groups"),
    (1, 8, 8, 8192, 8192, 128, True, 0, "running max, tiles drawn from a counter"),
    (1, 8, 1, 1400, 5000, 128, True, 2, "one block per tile in the grouped order, split"),
    (1, 16, 16, 128, 65535, 64, False, 0, "split prefill and the combine"),
    (8, 32, 8, 1, 16384, 128, False, 3, "decode on the narrow portable tile, forced split"),
    (10, 8, 8, 1, 2048, 64, False, 0, "decode on the narrow tile with key warps"),
    (18, 32, 8, 1, 4096, 128, False, 0, "decode on the key-warp tile of two blocks an SM"),
    (22, 32, 8, 1, 4096, 64, False, 0, "decode on the key-warp tile, copies staggered"),
    (2, 32, 8, 40, 3000, 64, True, 3, "GQA rows packed in Hopper tiles, forced split"),
    (2, 24, 4, 40, 3000, 96, True, 3, "GQA rows of d=96 packed in portable tiles, forced split"),
    (2, 40, 8, 30, 3000, 128, True, 0, "a group of 5 packed in 125 Hopper tile rows"),
    (8, 32, 8, 8, 16384, 128, False, 0, "multi-token decode packing a GQA group"),
]
IDS = [s[-1].replace(" ", "-") for s in SHAPES]


def _check_plan_is_what_ran(request, b, h, hk, sq, sk, d, causal, num_splits):
    gen = generator_for(request)
    q, k, v = rand_qkv(gen, b, sq, sk, h, hk, d, torch.bfloat16)
    explained = flashsplit.explain(q, k, v, causal=causal, num_splits=num_splits)
    assert explained["path"] == "native", explained
    out, lse, planned, record = _native.native_forward_recorded(
        q, k, v, d ** -0.5, causal, num_splits)
    torch.cuda.synchronize()
    assert planned == explained, (planned, explained)
    assert record["kernel"] == explained["kernel"]
    assert record["num_splits"] == explained["num_splits"]
    details = explained["details"]
    ran = {key: value for key, value in record.items() if key not in ("kernel", "num_splits")}
    assert ran == {key: details[key] for key in ran}, (ran, details)
    assert torch.isfinite(out).all() and not torch.isnan(lse).any()
    return explained


@requires_native
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_launch_runs_the_plan_explain_returns(request, shape):
    *dims, _ = shape
    _check_plan_is_what_ran(request, *dims)


@requires_native
@pytest.mark.parametrize("shape", SHAPES[:4] + SHAPES[6:], ids=IDS[:4] + IDS[6:])
def test_the_portable_launch_runs_the_plan_explain_returns(request, monkeypatch, shape):
    monkeypatch.setenv("FLASHSPLIT_DISABLE_HOPPER", "1")
    *dims, _ = shape
    explained = _check_plan_is_what_ran(request, *dims)
    assert explained["kernel"] == PORTABLE


@requires_native
def test_the_shapes_cover_every_walk(request):
    """The matrix above reaches each decision it claims to on the H100, so the equality is
    tested where the plans differ."""
    if DEVICE_CC != 90:
        pytest.skip("the matrix is drawn for the H100's Hopper walks; this GPU is not cc 9.0")
    if os.environ.get("FLASHSPLIT_DISABLE_HOPPER") == "1":
        pytest.skip("FLASHSPLIT_DISABLE_HOPPER=1: the Hopper walks the matrix is drawn for are off")
    seen = set()
    for b, h, hk, sq, sk, d, causal, num_splits, _ in SHAPES:
        q = torch.empty(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
        kv = torch.empty(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
        plan = flashsplit.explain(q, kv, kv, causal=causal, num_splits=num_splits)
        details = plan["details"]
        seen.add((plan["kernel"], details["block_m"]))
        if details["packs_heads"]:
            seen.add(("packs_heads", plan["kernel"]))
        for key in ("carry", "rotate_rounds", "tile_counter", "persistent", "running_max",
                    "staggered_kv"):
            if details[key]:
                seen.add(key)
        if details["tail_tiles"]:
            seen.add("tail")
        if plan["num_splits"] > 1:
            seen.add(("split", plan["kernel"]))
        if details["key_warps"] > 1:
            seen.add(("key_warps", details["blocks_per_sm"]))
        if not details["persistent"] and plan["kernel"] == "hopper_wgmma":
            seen.add("one block per tile")
    expected = {("hopper_wgmma", 128), ("hopper_wgmma", 192), ("hopper_wgmma", 256),
                ("portable_mma", 16), ("portable_mma", 128), "carry", "rotate_rounds",
                "tile_counter", "persistent", "running_max", "staggered_kv", "tail",
                ("key_warps", 1),
                ("key_warps", 2),
                ("split", "hopper_wgmma"),
                ("split", "portable_mma"), "one block per tile", ("packs_heads", "hopper_wgmma"),
                ("packs_heads", "portable_mma")}
    if hbm_share_over_h100(torch.cuda.get_device_properties(0)) > 1.2:
        expected.discard("staggered_kv")  # two stages only, where each SM gets more bandwidth
    assert expected <= seen, expected - seen
