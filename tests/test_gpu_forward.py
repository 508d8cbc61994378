"""Native forward (plain and split-KV) against the fp32 reference, over the full matrix:
dtype x head dim x causal x MHA/GQA/MQA x (sq, sk) x num_splits.

Cost control: one parametrized case builds its inputs and both references once and then runs
every num_splits on them; the long-key shapes (sk = 65535) use batch 1 and few heads, so the
fp32 reference (the full (b, h, sq, sk) score matrix on the GPU, ~0.3 GB at sq = 128) fits and
is quick. Rows that see no key (causal, sq > sk) must be exactly 0 with lse = -inf.
"""

import pytest
import torch

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

# full_fp32_matmuls is an autouse fixture: importing it makes it apply in this module too.
from test_gpu_common import (  # noqa: E402
    DTYPE_IDS, DTYPES, assert_matches_reference, assert_native, full_fp32_matmuls,  # noqa: F401
    fs_forward, generator_for, key_blocks, rand_qkv, references, requires_native)

# (3000, 2900) runs the Hopper kernel's 192-row tiles at d=64 with and without the mask: the
# last tile's third consumer has only padding rows, the causal tiles' early consumers skip key
# blocks they cannot see, and the first 100 rows see no key at all.
SHAPES = [(1, 1), (1, 65535), (113, 203), (128, 65535), (1023, 1024), (2048, 128), (3000, 2900)]
HEADS = {"mha": (4, 4), "gqa": (8, 2), "mqa": (4, 1)}  # (h, hk): group 1, 4 and h
SPLITS = [0, 1, 2, 3, 7, 16, 128]


def batch_for(sq, sk):
    # Long shapes use batch 1 (the reference's score matrix grows with b * h * sq * sk);
    # short ones use 2 so the batch stride is exercised.
    return 1 if sk >= 16384 or sq >= 2048 else 2


def check_split_count(decision, requested, sk, causal, what):
    """The G explain reports is what must run: 1 for G = 1, the request clamped to the number
    of key blocks for G >= 2, and anything in [1, key blocks] for the heuristic."""
    n_blocks = key_blocks(sk, decision["details"]["split_block_n"])
    g = decision["num_splits"]
    assert 1 <= g <= max(1, n_blocks), f"{what}: G={g} outside [1, {n_blocks} key blocks]"
    if requested == 1:
        assert g == 1, f"{what}: num_splits=1 must run G=1, explain says {g}"
    elif requested >= 2 and not causal:
        assert g == min(requested, n_blocks), \
            f"{what}: num_splits={requested} with {n_blocks} key blocks must run G={min(requested, n_blocks)}, explain says {g}"
    elif requested >= 2:
        assert g <= min(requested, n_blocks), f"{what}: G={g} exceeds the request {requested}"


@requires_native
@pytest.mark.parametrize("sq,sk", SHAPES, ids=[f"sq{a}-sk{b}" for a, b in SHAPES])
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_forward_matches_fp32_reference_for_every_split_count(request, dtype, d, causal, heads,
                                                              sq, sk):
    h, hk = HEADS[heads]
    b = batch_for(sq, sk)
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, dtype)
    refs = references(q, k, v, causal=causal)
    for num_splits in SPLITS:
        what = f"b={b} sq={sq} sk={sk} h={h} hk={hk} d={d} causal={causal} num_splits={num_splits}"
        decision = assert_native(q, k, v, causal, num_splits)
        check_split_count(decision, num_splits, sk, causal, what)
        what += f" (G={decision['num_splits']})"
        out, lse = fs_forward(q, k, v, causal, num_splits)
        assert_matches_reference(out, lse, q, k, refs, causal, what)


@requires_native
@pytest.mark.parametrize("sq,sk", [(113, 203), (3000, 2900)], ids=["short", "tall-tiles"])
@pytest.mark.parametrize("scale", [-0.3, 0.0, 1.7], ids=["negative", "zero", "large"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
def test_forward_honours_any_finite_softmax_scale(request, d, causal, scale, sq, sk):
    """The kernel applies the scale as a positive factor inside exp2: a negative scale flips Q's
    sign and a zero one must still give the uniform average over the visible keys (and masked
    keys must stay masked rather than become -inf * 0 = NaN). (3000, 2900) runs the Hopper
    kernel's 192-row tiles, whose running max moves only when a key block's scaled max passes
    it by more than a factor 2^8. The Hopper kernel takes most blocks' probabilities at the
    running max without computing the block's max (tiles side by side, unmasked ping-pong
    tiles; on the 192-row d=128 tiles the fallback computes S again); the large scale (scores
    spread over ~20 powers of two) makes many blocks fall back to computing it, between blocks
    that do not, the negative one runs it on flipped scores."""
    b = 1 if sq >= 2048 else 2
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, 8, 2, d, torch.bfloat16)
    refs = references(q, k, v, causal=causal, softmax_scale=scale)
    for num_splits in (1, 5):
        what = f"d={d} causal={causal} softmax_scale={scale} num_splits={num_splits}"
        assert_native(q, k, v, causal, num_splits)
        out, lse = fs_forward(q, k, v, causal, num_splits, softmax_scale=scale)
        assert_matches_reference(out, lse, q, k, refs, causal, what)


# (b, h, sq, sk, d, causal, block_m at G = 1, block_m split) on the Hopper kernel with 132 SMs
# (H100 / H200): an unsplit call takes the tile height whose waves weigh less (hopper_block_m),
# split calls the one the heuristic models. 576 heads of 700 rows at d=64 (3456 tiles of 128, 2304
# of 192), 64 heads of 2304 rows at d=96 and 12 causal heads of 1536 rows against 500 keys at
# d=128 (144 tiles of 128, two rounds, or 96 of 192, one) run 192 rows unsplit; 16 heads of 2048
# rows at d=64 (256 tiles of 128 or 176 of 192: two rounds either way, 128 of 256: one) run 256
# rows unsplit and 192 split. 700 = 3 * 192 + 124: the last tile's third consumer sees only
# padding rows. 256 rows (four consumers, 64-key blocks; d=64 without the mask) also for 256 heads
# of 512 rows (4 rounds of 256 against 6 of 192) and of 1000 rows against 1100 keys (a part-padded
# fourth consumer, a part-masked last key block), and 264 heads of 440 rows (the last tile's
# fourth consumer all padding). 34 causal heads of 1536 rows at d=64 (408 tiles of 128 or 272 of
# 192) run 128 rows over 4096 keys (persistent, by waves: four of 128-row tiles weigh less than
# three of 192-row ones at 95% a row) and 192 over 4224 (longest first: base tiles end only 0.3%
# earlier in causal_longest_first_time, within the 3% they need). Causal tiles whose consumers run
# side by side rotate the consumers' row slices from tile to tile: 256 causal heads of 1000 rows
# at d=64 run 256 rows (8 tiles per SM, a part-padded last tile against 1100 keys), 96 causal
# heads of 2000 rows at d=64 over 2300 keys 192 rows (8 per SM; the last tile's third consumer
# sees only padding), and so do 33 of 1536 rows at d=128 (2 per SM); and with fewer keys than
# rows, so the first 300 / 500 rows see none (whole tiles without key blocks pass through the tile
# ring). Below 1536 rows with the mask, 32 causal heads of 1500 rows at d=96 and 64 (3 rounds or
# 2; at d=64 2 of 256 rows, at 85% a row) run 192 rows unsplit. At d=128 over more than 4 key
# blocks the longest-first model picks the height (hopper_block_m): 256 causal heads of 900 rows
# run 192 rows, 128 of 1152 rows 128 (at the running max).
TILE_GRIDS = {"d64-sq700": (16, 36, 700, 900, 64, False, 192, 128),
              "d96-sq2304": (4, 16, 2304, 2200, 96, False, 192, 128),
              "d128-causal-sq1536": (1, 12, 1536, 500, 128, True, 192, 128),
              "d128-causal-sq900": (8, 32, 900, 900, 128, True, 192, 128),
              "d128-causal-sq1152": (4, 32, 1152, 1152, 128, True, 128, 128),
              "d96-causal-sq1500": (1, 32, 1500, 1500, 96, True, 192, 128),
              "d64-causal-sq1500": (1, 32, 1500, 1500, 64, True, 192, 128),
              "d64-sq2048-small": (1, 16, 2048, 2048, 64, False, 256, 192),
              "d64-sq512-wide": (8, 32, 512, 512, 64, False, 256, 128),
              "d64-sq1000-wide": (8, 32, 1000, 1100, 64, False, 256, 128),
              "d64-sq440-wide-padding": (8, 33, 440, 520, 64, False, 256, 128),
              "d64-causal-sk4096": (2, 17, 1536, 4096, 64, True, 128, 192),
              "d64-causal-sk4224": (2, 17, 1536, 4224, 64, True, 192, 192),
              "d64-causal-sq1000-wide": (8, 32, 1000, 1100, 64, True, 256, 128),
              "d64-causal-sq2000-rotating": (6, 16, 2000, 2300, 64, True, 192, 192),
              "d128-causal-sq1536-rotating": (1, 33, 1536, 1536, 128, True, 192, 128),
              "d64-causal-sq1000-wide-empty-rows": (8, 32, 1000, 700, 64, True, 256, 128),
              "d64-causal-sq2000-rotating-empty-rows": (6, 16, 2000, 1500, 64, True, 192, 192)}


@requires_native
@pytest.mark.parametrize("grid", list(TILE_GRIDS))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_unsplit_calls_pick_tiles_by_waves(request, dtype, grid):
    """explain must report the tile height the grid calls for, on an H100 / H200, and the
    output must match the reference with either height (num_splits 1 and 3)."""
    b, h, sq, sk, d, causal, unsplit_m, split_m = TILE_GRIDS[grid]
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, h, d, dtype)
    refs = references(q, k, v, causal=causal)
    for num_splits, block_m in ((1, unsplit_m), (3, split_m)):
        what = f"b={b} h={h} sq={sq} sk={sk} d={d} causal={causal} num_splits={num_splits}"
        decision = assert_native(q, k, v, causal, num_splits)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        if decision["kernel"] == "hopper_wgmma" and sms == 132:
            assert decision["details"]["block_m"] == block_m, f"{what}: {decision}"
        out, lse = fs_forward(q, k, v, causal, num_splits)
        assert_matches_reference(out, lse, q, k, refs, causal, what)


def check_hopper_call(q, k, v, causal, num_splits, what, block_m, **flags):
    """On an H100 / H200 (132 SMs) explain must report Hopper tiles of block_m rows and each of
    `flags` (a key of explain's details and the bool it must be); everywhere the output and lse must match
    the reference."""
    decision = assert_native(q, k, v, causal, num_splits)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if decision["kernel"] == "hopper_wgmma" and sms == 132:
        assert decision["details"]["block_m"] == block_m, f"{what}: {decision}"
        for key, value in flags.items():
            assert decision["details"][key] is value, f"{what}: {key}: {decision}"
    out, lse = fs_forward(q, k, v, causal, num_splits)
    assert_matches_reference(out, lse, q, k, references(q, k, v, causal=causal), causal, what)


def check_ping_pong_call(q, k, v, causal, num_splits, carry, what):
    """check_hopper_call on 128-row tiles with the given carry."""
    check_hopper_call(q, k, v, causal, num_splits, what, 128, carry=carry)


# Persistent 128-row ping-pong tiles issue a tile's first S = Q K^T with the previous tile's
# last P V at d=64 and, at d=128, with the causal mask only (hopper_carry_across_tiles): 160
# heads of 512 or 1024 rows (640 or 1280 tiles, 5-10 per SM), split or not (where persistent:
# test_causal_ping_pong_tiles_walk_keys_forward has causal tiles over more keys, one block per
# tile, which carry nothing).
CARRY_CASES = {"d128-sk512": (512, 128, 1, False),
               "d128-sk1024": (1024, 128, 1, False),
               "d128-sk1024-2-splits": (1024, 128, 2, False),
               "d64-sk1024": (1024, 64, 2, True)}


@requires_native
@pytest.mark.parametrize("case", list(CARRY_CASES))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_ping_pong_tiles_with_and_without_carry(request, dtype, causal, case):
    """explain reports whether S is carried across tiles, and the output matches the reference
    either way, with many tiles per SM."""
    s, d, num_splits, carry = CARRY_CASES[case]
    b, h = 8, 20
    q, k, v = rand_qkv(generator_for(request), b, s, s, h, h, d, dtype)
    what = f"b={b} h={h} s={s} d={d} causal={causal} num_splits={num_splits}"
    check_ping_pong_call(q, k, v, causal, num_splits, carry or causal, what)


# Unsplit 192-row tiles without the mask whose heads end in a shorter tile rotate each round's
# tiles among the persistent blocks (hopper_rotate_rounds): 880 tiles, six full rounds and a
# last one of 88 (2048 rows: 11 tiles per head, the last of 128 rows; 2000 rows at d=64: the last
# of 80 rows; 1152 rows: equal tiles, the snake walk), and the output must match either way.
ROTATE_CASES = {"d96-sq2048": (5, 16, 2048, 2048, 96, True),
                "d64-sq2000": (5, 16, 2000, 2100, 64, True),
                "d96-sq1152-equal-tiles": (8, 16, 1152, 1152, 96, False)}


@requires_native
@pytest.mark.parametrize("case", list(ROTATE_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tall_tiles_rotate_rounds_where_heads_end_short(request, dtype, case):
    """explain reports the rotated walk on 192-row tiles (on an H100 / H200), and the output and
    lse match the reference with many rounds per block."""
    b, h, sq, sk, d, rotate = ROTATE_CASES[case]
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, h, d, dtype)
    what = f"b={b} h={h} sq={sq} sk={sk} d={d}"
    check_hopper_call(q, k, v, False, 1, what, 192, rotate_rounds=rotate)


# Causal 128-row ping-pong tiles at d=128 walk their key blocks first to last (the other
# kernels last first; sm90/kernel_traits.cuh, kForwardWalk), so the causal diagonal block comes
# last and a tile's Q is freed after its last key block: more rows than keys (the first 400 rows
# see none), more keys than rows (bottom-right alignment), a split call whose splits cut the
# diagonal's tiles, persistent tiles carrying S across tiles (512 rows, 4 blocks a tile), the
# same with a part-full second round, which runs backwards over its 48 tiles
# (sm90/tile_scheduler.cuh, static_tile), and one block per tile over 36 key blocks (not
# persistent: no carry).
FORWARD_WALK_CASES = {"sq700-sk300": (4, 20, 700, 300, 1),
                      "sq300-sk500": (8, 20, 300, 500, 1),
                      "sq256-sk4500": (2, 20, 256, 4500, 1),
                      "sq1000-3-splits": (2, 20, 1000, 1000, 3),
                      "sq512-carry": (8, 20, 512, 512, 1),
                      "sq512-backward-last-round": (3, 15, 512, 512, 1)}


@requires_native
@pytest.mark.parametrize("case", list(FORWARD_WALK_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_causal_ping_pong_tiles_walk_keys_forward(request, dtype, case):
    """The output and lse match the reference where the causal d=128 ping-pong tiles walk
    their key blocks from the first, including rows that see no key and split calls."""
    b, h, sq, sk, num_splits = FORWARD_WALK_CASES[case]
    d = 128
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, h, d, dtype)
    what = f"b={b} h={h} sq={sq} sk={sk} d={d} causal=True num_splits={num_splits}"
    # Causal d=128 ping-pong tiles carry S across tiles wherever the launch is persistent (up to
    # 32 key blocks of 128) and walks static rounds (none of these draws from the counter).
    check_ping_pong_call(q, k, v, True, num_splits, sk <= 4096, what)


def assert_wide_tiles_on_h100(decision, what):
    """Where the grid is sized for it (the Hopper kernel on 132 SMs), the call runs the 256-row
    tiles over 64-key blocks."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if decision["kernel"] == "hopper_wgmma" and sms == 132:
        assert (decision["details"]["block_m"], decision["details"]["block_n"]) == (256, 64), f"{what}: {decision}"


@requires_native
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_wide_tiles_with_grouped_kv_heads_and_negative_scale(request, dtype):
    """256-row tiles (four consumers, 64-key blocks) read each K/V head for its group of four
    query heads, and keep the sign of a negative softmax scale: 256 heads of 512 rows against
    600 keys (a part-masked last key block) run them on 132 SMs."""
    b, h, hk, sq, sk, d = 8, 32, 8, 512, 600, 64
    q, k, v = rand_qkv(generator_for(request), b, sq, sk, h, hk, d, dtype)
    assert_wide_tiles_on_h100(assert_native(q, k, v, False, 1), f"b={b} h={h}/{hk} sq={sq}")
    for scale in (None, -0.1):
        what = f"b={b} h={h}/{hk} sq={sq} sk={sk} scale={scale}"
        refs = references(q, k, v, causal=False, softmax_scale=scale)
        out, lse = fs_forward(q, k, v, False, 1, softmax_scale=scale)
        assert_matches_reference(out, lse, q, k, refs, False, what)


# (b, h, sq, sk, d, block_m on 132 SMs): 256-row tiles at d=64 (as in the test above), and 48
# heads of 1536 rows at d=128, which run 192-row tiles (3 waves of them weigh less than 5 of
# 128-row tiles at 105% a row).
JUMPING_MAX_CASES = {"d64-wide": (8, 32, 512, 600, 64, 256),
                     "d128-tall": (1, 48, 1536, 1536, 128, 192)}


@requires_native
@pytest.mark.parametrize("case", list(JUMPING_MAX_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tiles_side_by_side_follow_a_jumping_row_max(request, dtype, case):
    """The running max of tiles whose consumers run side by side (no overlap) moves only when a
    block's max passes it by more than 2^8, and O and the row sum are then rescaled. Their
    softmax takes a block's probabilities at the running max and falls back where one could
    pass 2^8; on the 192-row d=128 tiles the fallback computes S again for the whole warpgroup
    where any of its warps needs it. Keys 5 and 300 (walked after the later key blocks) score
    far above the rest: the jump varies per query row (some rows below 2^8, some above, within
    one warp), and per key head it is none, moderate (2^8 to 2^60) or huge (past 2^128, where
    exp2 of the unmoved max would overflow)."""
    b, h, sq, sk, d, block_m = JUMPING_MAX_CASES[case]
    hk = 8
    gen = generator_for(request)
    q, k, v = rand_qkv(gen, b, sq, sk, h, hk, d, dtype)
    direction = torch.full((d,), d ** -0.5, device="cuda")  # unit length
    # The rows' weights on `direction` run from 0 to 8, so the jump differs from row to row.
    weight = 8 * torch.rand(b, sq, h, 1, device="cuda", generator=gen)
    q = (q.float() + weight * direction).to(dtype)
    # Key heads 0-1 unchanged, 2-4 moderate, 5-7 huge (score = weight * size / sqrt(d)).
    sizes = torch.tensor([0, 0, 10, 40, 80, 1000, 2000, 3000], device="cuda").view(1, 1, hk, 1)
    k = k.float()
    k[:, 5:6] += sizes * direction
    k[:, 300:301] += 0.5 * sizes * direction
    k = k.to(dtype)
    check_hopper_call(q, k, v, False, 1, f"b={b} h={h}/{hk} sq={sq} sk={sk} d={d}", block_m)


@requires_native
@pytest.mark.parametrize("d", [64, 128], ids=["d64", "d128"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_combine_lanes_over_odd_row_counts(request, dtype, d):
    """The combine deals a row's splits to up to 32 threads (lanes) that merge their folds by
    warp shuffles; a row takes d / 4 * lanes consecutive threads of the grid, so blocks hold
    several rows where the lanes are few and a row spans blocks where they are many: 7 decode
    rows (at d=64 and G = 20, two rows of 64 threads per block, the last block's second row past
    the end), 39 rows of a short GQA query, and 5 rows over 20000 keys, at G from 9 (two lanes)
    to 300 (32 lanes, rows of 512 and 1024 threads), clamped to the key blocks."""
    gen = generator_for(request)
    for b, sq, h, hk, sk in ((1, 1, 7, 7, 2600), (1, 13, 3, 1, 4100), (1, 1, 5, 5, 20000)):
        q, k, v = rand_qkv(gen, b, sq, sk, h, hk, d, dtype)
        refs = references(q, k, v, causal=False)
        for num_splits in (9, 20, 40, 128, 300):
            what = f"b={b} sq={sq} h={h}/{hk} sk={sk} d={d} num_splits={num_splits}"
            decision = assert_native(q, k, v, False, num_splits)
            expected = min(num_splits, key_blocks(sk, decision["details"]["split_block_n"]))
            assert decision["num_splits"] == expected, f"{what}: {decision}"
            out, lse = fs_forward(q, k, v, False, num_splits)
            assert_matches_reference(out, lse, q, k, refs, False, what)
