"""flashsplit._C.heuristic: the plan's split rules bound for Python (the split tuner's model).

The binding must answer what the plan answers: its defaults are the C++ struct's (a call given
no constants runs the core's own default argument, and must agree bit for bit with one given
SplitHeuristicConstants()), every constant reaches the model, and on a GPU its family, tiles and
G equal explain()'s. CPU tensors never reach the gate's native path, so on a CPU-only machine the
gate's refusal is compared instead."""

import copy
import itertools
import os

import pytest
import torch

import flashsplit
from flashsplit import _C

H = _C.heuristic

HOPPER_BUILD = H.BuildInfo(gpu_kernels_built=True, archs=[80, 90], head_dims=[64, 128],
                           hopper_kernels_built=True)
H100 = H.DeviceInfo(vendor="nvidia", cc=90, sm_count=132)
FAMILIES = ("portable_mma", "hopper_wgmma")


def problems():
    """Decode, GQA, prefill and long-key shapes, with and without the mask."""
    for b, (h, hk), sq, sk, d, causal in itertools.product(
            (1, 3, 16), ((16, 16), (32, 8), (8, 1)), (1, 16, 128, 1000, 4096),
            (64, 777, 8192, 131072), (64, 128), (False, True)):
        yield H.AttnProblem(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=causal)


def key_blocks(problem, tiles):
    return -(-problem.sk // tiles.block_n)


def test_defaults_are_the_cpp_structs():
    defaults = H.SplitHeuristicConstants()
    assert defaults == H.SplitHeuristicConstants(**defaults.as_dict())
    assert list(defaults.as_dict()) == H.SplitHeuristicConstants.fields()
    for problem in itertools.islice(problems(), 0, None, 7):
        for family in FAMILIES:
            tiles = H.tiles_for(family, problem)
            for g in (1, 2, 5, 64):
                assert H.modelled_split_us(problem, H100, tiles, g) == \
                    H.modelled_split_us(problem, H100, tiles, g, defaults)
            assert H.choose_num_splits(problem, H100, tiles) == \
                H.choose_num_splits(problem, H100, tiles, defaults)
            for requested in (0, 1, 3):
                assert H.resolve_splits_for(family, problem, H100, requested) == \
                    H.resolve_splits_for(family, problem, H100, requested, defaults)
                assert H.resolve_num_splits(requested, problem, H100, tiles) == \
                    H.resolve_num_splits(requested, problem, H100, tiles, defaults)


def test_every_constant_reads_and_writes():
    defaults = H.SplitHeuristicConstants()
    for field in H.SplitHeuristicConstants.fields():
        value = getattr(defaults, field)
        changed = value + 3 if isinstance(value, int) else value * 1.5 + 0.25
        c = H.SplitHeuristicConstants()
        setattr(c, field, changed)
        assert getattr(c, field) == changed
        assert c != defaults
        assert c == defaults.replace(**{field: changed}) == H.SplitHeuristicConstants(
            **{field: changed})
        assert getattr(defaults, field) == value, "replace() changed the original"
        assert copy.deepcopy(c) == c
        assert eval(repr(c), {"SplitHeuristicConstants": H.SplitHeuristicConstants}) == c
    with pytest.raises(TypeError):
        H.SplitHeuristicConstants(max_splits=2.5)
    with pytest.raises(TypeError):
        H.SplitHeuristicConstants(no_such_constant=1.0)
    with pytest.raises(TypeError):
        defaults.replace(combine_us="3")


def test_every_constant_reaches_the_model():
    """Changing any one constant changes a modelled time or a G on some shape and device."""
    shapes = list(problems())
    devices = [H100, H.DeviceInfo(cc=90, sm_count=20)]
    # Values that change the model where the defaults sit on a boundary of its rules; the
    # multi-wave threshold only shows where the gain it switches to differs enough.
    special = dict(max_splits=2, min_key_blocks_per_split=64, min_gain=0.5,
                   min_gain_multi_wave=0.5, multi_wave_grid=1.0)
    # The packed tiles' wave model runs only with all three of its constants set (the H200's).
    packed = dict(packed_dram_bytes_per_us=4.6e6, packed_sm_bytes_per_us=45e3,
                  packed_wave_latency_us=8.0, packed_one_wave_split_penalty=0.15)
    for field in H.SplitHeuristicConstants.fields():
        base = H.SplitHeuristicConstants()
        if field == "multi_wave_grid":
            base.min_gain_multi_wave = 0.9
        if field in packed:
            base = base.replace(**{k: v for k, v in packed.items() if k != field})
        value = getattr(base, field)
        changed = base.replace(**{field: special.get(field, value * 2 + 1)})

        def differs(problem, device, family):
            tiles = H.tiles_for(family, problem)
            return any(H.modelled_split_us(problem, device, tiles, g, base) !=
                       H.modelled_split_us(problem, device, tiles, g, changed)
                       for g in (1, 2, 8)) or \
                H.resolve_splits_for(family, problem, device, 0, base) != \
                H.resolve_splits_for(family, problem, device, 0, changed)
        assert any(differs(p, dev, fam) for p in shapes for dev in devices for fam in FAMILIES), \
            field


def test_modelled_times_are_positive_and_g_within_the_key_blocks():
    for problem in problems():
        for family, sms in itertools.product(FAMILIES, (132, 108, 16)):
            device = H.DeviceInfo(cc=90, sm_count=sms)
            tiles = H.tiles_for(family, problem)
            blocks = key_blocks(problem, tiles)
            for g in sorted({1, 2, 3, blocks}):
                assert H.modelled_split_us(problem, device, tiles, g) > 0, (problem, family, g)
            g = H.resolve_splits_for(family, problem, device)
            assert 1 <= g <= min(blocks, H.SplitHeuristicConstants().max_splits), \
                (problem, family, g)
            if H.takes_key_warps_for_run(family, problem, device, 0):
                assert g == 1  # the narrow tile with key warps runs unsplit
            elif family == "portable_mma":
                assert g == H.choose_num_splits(problem, device, tiles)
            else:  # the Hopper weighing can only fall back to an unsplit call
                assert g in (1, H.choose_num_splits(problem, device, tiles))
            assert H.resolve_splits_for(family, problem, device, 1) == 1
            assert H.resolve_splits_for(family, problem, device, 10 ** 6) == blocks


def test_tiles_and_grid():
    decode = H.AttnProblem(b=2, h=32, hk=8, sq=1, sk=4096, d=128)
    assert H.use_narrow_tiles(decode)
    narrow = H.tiles_for("portable_mma", decode)
    assert narrow.packs_heads and narrow.block_m <= 16
    assert H.forward_blocks(decode, narrow) == 2 * 8  # one tile of 4 packed rows per k/v head
    # Multi-token decode of 32 packed rows: the sm80 policy's narrow tile, two row tiles each;
    # 64 packed rows: the wide tile.
    spec = H.AttnProblem(b=2, h=32, hk=8, sq=8, sk=4096, d=128)
    assert H.sm80_uses_narrow_tiles(spec) and not H.use_narrow_tiles(spec)
    assert H.forward_blocks(spec, H.tiles_for("portable_mma", spec)) == 2 * 8 * 2
    assert not H.sm80_uses_narrow_tiles(H.AttnProblem(b=2, h=32, hk=8, sq=16, sk=4096, d=128))
    # On the Hopper kernels the same call packs the group into 128-row tiles: one per k/v head.
    packed = H.tiles_for("hopper_wgmma", spec)
    assert packed.packs_heads and packed.wgmma and packed.block_m == 128
    assert H.forward_blocks(spec, packed) == 2 * 8
    assert H.tiles_for_run("hopper_wgmma", spec, 132, 1) == packed
    prefill = H.AttnProblem(b=2, h=8, hk=2, sq=300, sk=4096, d=128)
    hopper = H.tiles_for("hopper_wgmma", prefill)
    assert not hopper.packs_heads and hopper.wgmma
    assert H.forward_blocks(prefill, hopper) == 2 * 8 * -(-300 // hopper.block_m)
    assert H.tiles_for_run("portable_mma", prefill, 132, 1) == H.tiles_for("portable_mma",
                                                                           prefill)
    assert H.tiles_for("none", prefill).block_m == 0
    assert H.forward_blocks(prefill, H.tiles_for("none", prefill)) == 0
    explicit = H.TileConfig(block_m=128, block_n=64, warps=4, blocks_per_sm=2, m_tiles=2)
    assert explicit == H.tiles_for("portable_mma", H.AttnProblem(b=1, h=4, hk=4, sq=512,
                                                                 sk=512, d=64))


def test_gate_family():
    prefill = H.AttnProblem(b=1, h=16, hk=16, sq=512, sk=512, d=128)
    decode = H.AttnProblem(b=1, h=16, hk=16, sq=1, sk=8192, d=128)
    assert H.check_native(prefill, H100, HOPPER_BUILD).family == "hopper_wgmma"
    assert H.check_native(decode, H100, HOPPER_BUILD).family == "portable_mma"
    assert H.check_native(prefill, H100, HOPPER_BUILD, allow_hopper=False).family == \
        "portable_mma"
    fp32 = H.AttnProblem(b=1, h=16, hk=16, sq=512, sk=512, d=128, dtype="float32")
    refused = H.check_native(fp32, H100, HOPPER_BUILD)
    assert not refused.ok and refused.family == "none" and "float32" in refused.reason
    a100 = H.DeviceInfo(cc=80, sm_count=108)
    assert not H.check_native(prefill, a100, HOPPER_BUILD).ok
    assert H.check_native(prefill, a100, HOPPER_BUILD, allow_untested_arch=True).family == \
        "portable_mma"
    assert "built without GPU kernels" in H.check_native(prefill, H100, H.BuildInfo()).reason


def test_the_hbms_bandwidth_moves_the_key_warp_range_and_the_decode_splits():
    """An H200 (4.81 TB/s over 132 SMs) starts the key-warp tile at 67 blocks where the H100
    (3.35 TB/s) starts it at 47, and gives the one-warp decode tile more splits."""
    h100 = H.DeviceInfo(cc=90, sm_count=132, smem_per_block_optin=232448,
                        dram_bytes_per_us=2619e3 * 5120 / 4e3)
    h200 = H.DeviceInfo(cc=90, sm_count=132, smem_per_block_optin=232448,
                        dram_bytes_per_us=3201e3 * 6016 / 4e3)
    assert h200.dram_bytes_per_us == pytest.approx(4.814e6, rel=1e-3)
    assert "dram_bytes_per_us=4814" in repr(h200)
    for b, on_h100, on_h200 in ((11, 0, 0), (12, 1, 0), (16, 1, 0), (17, 1, 1), (33, 1, 1)):
        problem = H.AttnProblem(b=b, h=32, hk=4, sq=1, sk=8192, d=128)
        assert H.key_warp_blocks_per_sm_for_run("portable_mma", problem, h100, 0) == on_h100, b
        assert H.key_warp_blocks_per_sm_for_run("portable_mma", problem, h200, 0) == on_h200, b
    decode = H.AttnProblem(b=16, h=32, hk=4, sq=1, sk=8192, d=128)
    assert H.constants_for("portable_mma", h200).slots_per_sm_narrow == 3
    assert H.constants_for("portable_mma", h100) == H.constants_for("portable_mma", H100)
    # The Hopper tiles keep the H100's fit there; on the H200 the packed tiles' wave model runs
    # at its HBM's rate.
    assert H.constants_for("hopper_wgmma", h100) == H.constants_for("portable_mma", h100)
    hopper = H.constants_for("hopper_wgmma", h200)
    assert hopper.packed_dram_bytes_per_us == pytest.approx(h200.dram_bytes_per_us * 3.2 / 3.35)
    assert hopper.packed_sm_bytes_per_us > 0 and hopper.packed_wave_latency_us > 0
    assert hopper.dram_bytes_per_us == H.constants_for("portable_mma", h200).dram_bytes_per_us
    assert H.resolve_splits_for("portable_mma", decode, h200, 0) > \
        H.choose_num_splits(decode, h100, H.tiles_for("portable_mma", decode))


def test_cpu_call_is_refused_as_explain_says():
    q = torch.zeros(1, 16, 4, 64, dtype=torch.bfloat16)
    k = v = torch.zeros(1, 64, 4, 64, dtype=torch.bfloat16)
    explained = flashsplit.explain(q, k, v)
    problem = H.AttnProblem(b=1, h=4, hk=4, sq=16, sk=64, d=64, on_gpu=False)
    decision = H.check_native(problem, H.DeviceInfo(vendor="none", cc=0, sm_count=0),
                              H.this_build())
    assert not decision.ok
    assert explained["path"] == "reference" and explained["num_splits"] == 1
    assert decision.reason == explained["reason"]


def test_this_build_is_build_info():
    build, info = H.this_build(), _C.build_info()
    assert build.gpu_kernels_built == info["gpu_kernels_built"]
    assert build.archs == info["archs"] and build.head_dims == info["head_dims"]
    assert build.hopper_kernels_built == info["hopper_kernels_built"]


def test_bad_descriptions_are_refused():
    with pytest.raises(ValueError, match="multiple of hk"):
        H.AttnProblem(b=1, h=6, hk=4, sq=1, sk=1, d=64)
    with pytest.raises(ValueError, match=">= 1"):
        H.AttnProblem(b=1, h=4, hk=4, sq=0, sk=1, d=64)
    with pytest.raises(ValueError, match="dtype"):
        H.AttnProblem(b=1, h=4, hk=4, sq=1, sk=1, d=64, dtype="int8")
    with pytest.raises(ValueError, match="vendor"):
        H.DeviceInfo(vendor="intel", cc=90, sm_count=132)
    for bandwidth in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="dram_bytes_per_us"):
            H.DeviceInfo(cc=90, sm_count=132, dram_bytes_per_us=bandwidth)
    problem = H.AttnProblem(b=1, h=4, hk=4, sq=1, sk=1000, d=64)
    with pytest.raises(ValueError, match="family"):
        H.tiles_for("sm90", problem)
    with pytest.raises(ValueError, match="num_splits"):
        H.resolve_splits_for("portable_mma", problem, H100, -1)
    with pytest.raises(ValueError, match="num_splits"):
        H.resolve_num_splits(-1, problem, H100, H.tiles_for("portable_mma", problem))


# (b, h, hk, sq, sk, d, causal)
GPU_SHAPES = [
    (1, 16, 16, 128, 65535, 64, False),
    (2, 16, 16, 2048, 2048, 128, False),
    (32, 32, 32, 512, 512, 64, False),
    (2, 8, 8, 1536, 16384, 128, False),
    (1, 8, 8, 2048, 4096, 64, True),
    (8, 32, 8, 1, 16384, 128, False),
    (2, 32, 8, 100, 3000, 64, True),
    (1, 8, 1, 1, 131072, 64, False),
    (18, 32, 8, 1, 4096, 64, False),  # 144 decode blocks: two key-warp blocks an SM on the H100
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=[str(s) for s in GPU_SHAPES])
@pytest.mark.parametrize("requested", [0, 1, 3])
def test_binding_answers_what_explain_reports(shape, requested):
    b, h, hk, sq, sk, d, causal = shape
    q = torch.zeros(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
    k = v = torch.zeros(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
    explained = flashsplit.explain(q, k, v, causal=causal, num_splits=requested)
    props = torch.cuda.get_device_properties(q.device)
    device = H.DeviceInfo(vendor="nvidia", cc=props.major * 10 + props.minor,
                          sm_count=props.multi_processor_count,
                          smem_per_block_optin=props.shared_memory_per_block_optin,
                          dram_bytes_per_us=props.memory_clock_rate * props.memory_bus_width / 4e3)
    problem = H.AttnProblem(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=causal)
    decision = H.check_native(
        problem, device, H.this_build(),
        allow_untested_arch=os.environ.get("FLASHSPLIT_ALLOW_UNTESTED_ARCH") == "1",
        allow_hopper=os.environ.get("FLASHSPLIT_DISABLE_HOPPER") != "1")
    if explained["path"] != "native":
        assert not decision.ok and decision.reason == explained["reason"]
        return
    assert decision.family == explained["kernel"]
    g = H.resolve_splits_for(decision.family, problem, device, requested)
    assert g == explained["num_splits"]
    details = explained["details"]
    per_sm = H.key_warp_blocks_per_sm_for_run(decision.family, problem, device, requested)
    assert H.takes_key_warps_for_run(decision.family, problem, device, requested) == (per_sm > 0)
    if per_sm:
        tiles = H.key_warp_tiles(d, per_sm)
        assert g == 1 and tiles.key_warps == details["key_warps"] > 1
    else:
        tiles = H.tiles_for_run(decision.family, problem, device.sm_count, g)
        assert details["key_warps"] == (0 if tiles.wgmma else 1)
    assert (tiles.block_m, tiles.block_n, tiles.blocks_per_sm) == \
        (details["block_m"], details["block_n"], details["blocks_per_sm"])
    assert H.forward_blocks(problem, tiles) == details["grid_blocks"]
    assert H.tiles_for(decision.family, problem).block_n == details["split_block_n"]
