#!/usr/bin/env python3
"""Measure every eligible split count G over a grid of shapes and score the split heuristic.

Measure mode (needs a GPU):
    python benchmarks/tune_num_splits.py --budget-seconds 300 --out tune_out
  samples shapes from the grid (b in {1,2,4,8}; (h, hk) in {(16,16), (32,8), (8,1)};
  sq in {1,16,64,128,256,512,1024,4096}; sk in 512..131072; d in {64,128}; causal and not)
  in a seeded random order until the budget is spent, times every candidate G for each
  (interleaved: each repetition runs every G once, so drift during a shape's measurement falls
  on all of its G alike), and appends one CSV row per (shape, G) as it goes (a killed run keeps
  what it measured).

Evaluate mode (any machine):
    python benchmarks/tune_num_splits.py --evaluate tune_out/tune_num_splits_raw.csv
    python benchmarks/tune_num_splits.py --evaluate benchmarks/data/h100_prefill_validation_2.csv
  recomputes the report from a raw CSV for (a) the heuristic G recorded by flashsplit.explain
  at measurement time and (b) a candidate heuristic written in Python below
  (`model_num_splits`): a MODEL of csrc/core/split_heuristic.cpp for offline tuning, to be
  ported back to C++ by hand. Its agreement with the recorded G is printed so a drifting mirror
  is noticed. --search tunes the model's constants by coordinate descent, and --exclude-shapes-in
  scores only shapes another CSV lacks (a held-out check).

benchmarks/data/ holds the H100 datasets the shipped constants were fitted on and checked
against (docs/design.md, "The split heuristic"): h100_iteration_fit.csv (the per-iteration
times; its G were timed one after another, the others interleaved), h100_prefill_fit.csv,
h100_decode_fit.csv, h100_prefill_validation_1.csv and h100_prefill_validation_2.csv.

Each raw row records the kernel family that ran ("kernel": "portable_mma" or "hopper_wgmma",
from explain; CSVs older than the column read as portable_mma) and the decision's tiles:
block_m / block_n, grid_blocks (thread blocks per split) and blocks_per_sm, all from
flashsplit.explain when it reports them (older builds: from the model below). The grid depends
on the family (forward_blocks in csrc/core/tile_config.h): the portable kernel packs the h / hk
query heads of a k/v group into the rows of one tile, so its grid is
b * hk * ceil(sq * (h / hk) / block_m); the Hopper kernel's tiles hold one head's rows, so its
grid is b * h * ceil(sq / block_m), 128-key blocks and one block per SM. The split decision
models the tiles of split calls, block_m = hopper_split_block_m(d, sq, causal, sk) (128; at
d = 64 and sq >= 1536, 192 when ceil(sq / 192) * 192 * w < ceil(sq / 128) * 128 * 100, w = 87
without the causal mask, and with it 97 over at most 32 key blocks (persistent tiles) and 88
over more); an unsplit call then runs the height whose waves weigh less (hopper_block_m: 192-row
waves * 192 * w < 128-row waves * 128 * 100, w as above at d = 64, 93 at d = 128; with the mask
from 1536 rows), and explain reports those tiles. The model
(model_family picks the family as the gate does; --evaluate uses the family recorded in each
row) scores a CSV against the tiles that actually ran.

Report: per shape, regret = time at the heuristic's G / best measured time; the geometric mean
and the worst shapes; and, on grids that already fill the GPU (the row's grid_blocks >=
SMs * the row's blocks_per_sm), how often the heuristic is > 2 % slower than G = 1.

Exit codes: 0 ok, 2 no CUDA device (measure mode), 3 flashsplit not built with GPU kernels.
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import math
import os
import random
import re
import sys
import time
from collections import OrderedDict
import dataclasses
from dataclasses import dataclass

import _timing as T

GRID = OrderedDict(
    b=[1, 2, 4, 8],
    heads=[(16, 16), (32, 8), (8, 1)],
    sq=[1, 16, 64, 128, 256, 512, 1024, 4096],
    sk=[512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072],
    d=[64, 128],
    causal=[False, True],
)
CANDIDATE_SPLITS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64,
                    80, 96, 112, 128]
RAW_FIELDS = ["b", "h", "hk", "sq", "sk", "d", "causal", "dtype", "sms", "kernel", "block_m",
              "block_n", "blocks_per_sm", "key_blocks", "grid_blocks", "heuristic_g",
              "requested_g", "g", "ms", "p10_ms", "p90_ms", "status"]
SLOWER_THAN_G1 = 1.02  # "more than 2 % slower than no split"


# ============================================================================ the model
# MODEL of the C++ heuristic (csrc/core/split_heuristic.cpp + tile_config.h) for offline tuning
# only, mirrored by hand; the report prints how often it agrees with the G that
# flashsplit.explain recorded, so a drifting mirror is noticed. Port changes back by hand.

@dataclass(frozen=True)
class ModelConstants:
    """SplitHeuristicConstants (split_heuristic.h, where each is explained); times in
    microseconds, overheads in key-block iterations of the block's own family."""
    hopper_iteration_us_d64: float = 1.16
    hopper_iteration_us_d128: float = 1.48
    portable_iteration_us_d64: float = 0.97
    portable_iteration_us_d128: float = 1.70
    narrow_iteration_us: float = 0.75
    slots_per_sm_narrow: float = 2.0
    narrow_crowding: float = 0.5
    co_resident_speedup: float = 1.3
    block_overhead: float = 2.0
    block_overhead_hopper: float = 4.0
    narrow_block_overhead: float = 8.0
    dram_bytes_per_us: float = 3.4e6
    one_wave_imbalance: float = 0.03
    partial_wave_penalty: float = 0.1
    split_latency_us: float = 0.4
    combine_us: float = 3.0
    narrow_chunk_latency_us: float = 2.0
    narrow_combine_us: float = 2.0
    min_gain: float = 0.03
    min_gain_multi_wave: float = 0.04
    multi_wave_grid: float = 4.0
    max_splits: int = 128
    min_key_blocks_per_split: int = 1


CONSTANT_FIELDS = tuple(field.name for field in dataclasses.fields(ModelConstants))


# Kernel families, named as flashsplit.explain reports them (kernel_family_name in gate.cpp).
PORTABLE = "portable_mma"
HOPPER = "hopper_wgmma"

# Tile table and narrow-tile threshold as last mirrored by hand; load_cpp_tables() refreshes
# them from csrc/core/tile_config.h so the model follows the kernels without edits here.
# TILES mirrors portable_tile_config: (head_dim, narrow) -> (block_m, block_n, blocks_per_sm).
TILES = {(64, True): (16, 64, 6), (128, True): (16, 32, 6),
         (64, False): (128, 64, 2), (128, False): (128, 64, 1)}
NARROW_MAX_ROWS = 16
# kCombineSplitsPerChunk (core/combine_math.h): a combine thread folds up to 8 splits per batch.
COMBINE_SPLITS_PER_CHUNK = 8


def combine_batches(g: int, d: int) -> int:
    """combine_batches (core/combine_math.h): batches of loads of a row's busiest combine
    thread, the row's splits dealt to the fewest of 1, 2, 4, ... 128 / (d / 4) lanes that leave
    each lane at most COMBINE_SPLITS_PER_CHUNK."""
    most = 128 // max(d // 4, 1)
    lanes = 1
    while lanes < most and lanes * COMBINE_SPLITS_PER_CHUNK < g:
        lanes *= 2
    per_lane = -(-g // lanes)
    return -(-per_lane // COMBINE_SPLITS_PER_CHUNK)
# HOPPER_TILES mirrors hopper_split_block_m, hopper_block_m and hopper_tile_config
# (tile_config.h): head dims with a Hopper kernel; base_m / tall_m, the rows per block; tall_pct
# (tall_pct_causal / tall_pct_causal_long with the causal mask over at most / more than
# persistent_max_key_blocks key blocks, tall_pct_d128 at d=128), the cost of a tall row in % of
# a base row; tall_min_sq, from where tall tiles may run with the mask and d=64 split calls
# take them (where unless padded: ceil(sq / tall_m) * tall_m * pct < ceil(sq / base_m) *
# base_m * 100); wide_m / wide_pct / wide_block_n, the wide tiles unsplit d=64 calls may take
# (with the mask below tall_min_sq rows); block_n and blocks_per_sm. Its tiles hold one query
# head's rows (packs_heads = false).
HOPPER_TILES = dict(head_dims=(64, 128), tall_min_sq=1536, base_m=128, tall_m=192, tall_pct=87,
                    tall_pct_causal=95, tall_pct_causal_long=88, tall_pct_d128=93,
                    wide_m=256, wide_pct=95, wide_block_n=64,
                    persistent_max_key_blocks=32, block_n=128, blocks_per_sm=1)
# tile_config.h's constants behind HOPPER_TILES' keys.
HOPPER_CONSTANTS = dict(base_m="kHopperBaseRows", tall_m="kHopperTallRows",
                        tall_pct="kHopperTallPct", tall_pct_causal="kHopperTallPctCausal",
                        tall_pct_causal_long="kHopperTallPctCausalLong",
                        tall_pct_d128="kHopperTallPctD128", tall_min_sq="kHopperTallMinSq",
                        wide_m="kHopperWideRows", wide_pct="kHopperWidePct",
                        wide_block_n="kHopperWideBlockN", block_n="kHopperBlockN",
                        persistent_max_key_blocks="kHopperPersistentMaxKeyBlocks")
TABLE_SOURCE = "built-in copy"
DEFAULT_CONSTANTS = ModelConstants()


def _cpp_function(text, signature):
    """The body of the constexpr function whose declaration starts with signature."""
    body = text[text.index(signature):]
    return body[:body.index("\n}")]


def _groups(pattern, text, where, flags=0):
    """re.search(pattern, text).groups(), or a ValueError naming the C++ function (where)."""
    match = re.search(pattern, text, flags)
    if match is None:
        raise ValueError(f"{where} no longer has the mirrored form /{pattern}/")
    return match.groups()


def _parse_hopper_tiles(text):
    """HOPPER_TILES' values from tile_config.h's kHopper* constants and hopper_tile_config;
    ValueError (or IndexError) when their shape is no longer the one mirrored here."""
    values = {}
    for key, name in HOPPER_CONSTANTS.items():
        (value,) = _groups(rf"^constexpr int {name} = (\d+);", text, name, re.MULTILINE)
        values[key] = int(value)
    # The rules' form: the padding test of split calls, the wave test of unsplit ones.
    split_body = _cpp_function(text, "constexpr int hopper_split_block_m(int head_dim")
    block_m_body = _cpp_function(text, "constexpr int hopper_block_m(int head_dim")
    for body, needle in (
            (split_body, "if (head_dim != 64 || sq < kHopperTallMinSq) return kHopperBaseRows;"),
            (split_body, "pct = hopper_row_cost_pct(head_dim, kHopperTallRows, causal, sk);"),
            (split_body, "padded_tall * pct < padded_base * 100"),
            (block_m_body, "(head_dim == 64 || head_dim == 128) && (!causal || sq >= "
                           "kHopperTallMinSq);"),
            (block_m_body, "wide_exists = head_dim == 64 && (!causal || sq < kHopperTallMinSq);"),
            (block_m_body, "if (num_splits != 1 || heads <= 0 || sm_count <= 0 || !(tall_exists || "
                           "wide_exists))"),
            (block_m_body, "pct = hopper_row_cost_pct(head_dim, kHopperTallRows, causal, sk);"),
            (_cpp_function(text, "constexpr int hopper_row_cost_pct(int head_dim"),
             "if (block_m == kHopperWideRows) return kHopperWidePct;\n  if (block_m != "
             "kHopperTallRows) return 100;\n  if (head_dim != 64) return kHopperTallPctD128;\n"
             "  if (!causal) return kHopperTallPct;\n  return hopper_persistent(sk) ? "
             "kHopperTallPctCausal : kHopperTallPctCausalLong;"),
            (_cpp_function(text, "constexpr bool hopper_persistent(long long sk"),
             "(sk + kHopperBlockN - 1) / kHopperBlockN <= kHopperPersistentMaxKeyBlocks;"),
            (block_m_body, "base_cost = base_waves * kHopperBaseRows * 100;"),
            (block_m_body, "tall_cost = tall_waves * kHopperTallRows * pct;"),
            (block_m_body, "tall_wins = tall_exists && tall_cost < base_cost;"),
            (block_m_body, "if (!wide_exists) return narrower;"),
            (block_m_body, "wide_cost = wide_waves * kHopperWideRows * kHopperWidePct;"),
            (block_m_body, "return wide_cost < (tall_wins ? tall_cost : base_cost) ? "
                           "kHopperWideRows : narrower;")):
        if needle not in body:
            raise ValueError(f"tile_config.h's Hopper tile rule no longer has the mirrored form "
                             f"({needle})")
    config_body = _cpp_function(text, "constexpr TileConfig hopper_tile_config(int head_dim")
    head_dims = tuple(int(x) for x in re.findall(
        r"head_dim != (\d+)", config_body.split("return", 1)[0]))
    if "block_m = hopper_block_m(head_dim, sq, causal, sk, heads, sm_count, num_splits);" not in \
            config_body:
        raise ValueError("hopper_tile_config no longer takes its rows from hopper_block_m")
    if "block_n = block_m == kHopperWideRows ? kHopperWideBlockN : kHopperBlockN;" not in \
            config_body:
        raise ValueError("hopper_tile_config no longer gives wide tiles kHopperWideBlockN keys")
    blocks_per_sm, _m_tiles, packs = _groups(
        r"TileConfig\{block_m, block_n, 4 \+ block_m / 16, (\d+), (\d+), (true|false)\}",
        config_body, "hopper_tile_config")
    if not head_dims or packs != "false":
        raise ValueError(f"hopper_tile_config: head dims {head_dims}, packs_heads {packs}")
    return dict(values, head_dims=head_dims, blocks_per_sm=int(blocks_per_sm))


def load_cpp_tables(repo=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))):
    """Reads portable_tile_config's TileConfig{block_m, block_n, warps, blocks_per_sm} entries,
    kNarrowMaxRows and the Hopper tiles (hopper_block_m, hopper_tile_config) from
    tile_config.h, the combine's splits per chunk from combine_math.h and the constants'
    defaults from split_heuristic.h. Keeps the built-in
    values (and says so in the report) when the headers do not parse."""
    global NARROW_MAX_ROWS, COMBINE_SPLITS_PER_CHUNK, TABLE_SOURCE, DEFAULT_CONSTANTS
    try:
        with open(os.path.join(repo, "csrc", "core", "tile_config.h")) as fh:
            text = fh.read()
        body = _cpp_function(text, "portable_tile_config(int head_dim")
        narrow_part, wide_part = body.split("\n                : (", 1) if \
            "\n                : (" in body else body.split(": (head_dim", 1)
        tiles = {}
        for part, narrow in ((narrow_part, True), (wide_part, False)):
            for d, fields in re.findall(r"head_dim == (\d+)\s*\?\s*TileConfig\{([^}]*)\}", part):
                values = [int(x) for x in fields.split(",")]
                tiles[(int(d), narrow)] = (values[0], values[1], values[3])
        if len(tiles) != 4:
            raise ValueError(f"found {len(tiles)} TileConfig entries, expected 4")
        max_rows = int(re.search(r"kNarrowMaxRows\s*=\s*(\d+)", text).group(1))
        with open(os.path.join(repo, "csrc", "core", "combine_math.h")) as fh:
            chunk = int(re.search(r"kCombineSplitsPerChunk\s*=\s*(\d+)", fh.read()).group(1))
        hopper = _parse_hopper_tiles(text)
        with open(os.path.join(repo, "csrc", "core", "split_heuristic.h")) as fh:
            heur = fh.read()
        body = heur[heur.index("struct SplitHeuristicConstants"):]
        body = body[:body.index("\n};")]
        # Every member must be found: a renamed or new constant means the mirror is stale.
        members = dict(re.findall(r"^\s*(?:double|int)\s+(\w+)\s*=\s*([-+0-9.eE]+)\s*;", body,
                                  re.MULTILINE))
        if set(members) != set(CONSTANT_FIELDS):
            raise ValueError(f"SplitHeuristicConstants members {sorted(members)} are not the "
                             f"model's {list(CONSTANT_FIELDS)}")
        defaults = {field: type(getattr(ModelConstants(), field))(float(members[field]))
                    for field in CONSTANT_FIELDS}
    except (OSError, ValueError, AttributeError, IndexError) as exc:
        TABLE_SOURCE = f"built-in copy (could not read the C++ headers: {exc})"
        return
    TILES.update(tiles)
    HOPPER_TILES.update(hopper)
    NARROW_MAX_ROWS = max_rows
    COMBINE_SPLITS_PER_CHUNK = chunk
    DEFAULT_CONSTANTS = ModelConstants(**defaults)
    TABLE_SOURCE = "csrc/core/tile_config.h + combine_math.h + split_heuristic.h"


def packed_rows(sq, h, hk):
    """The portable kernel packs the h / hk query heads sharing a k/v head into one tile."""
    return sq * (h // hk)


def use_narrow_tiles(sq, h, hk):
    """Mirror of use_narrow_tiles: decode-sized calls run the portable kernel's narrow tile."""
    return packed_rows(sq, h, hk) <= NARROW_MAX_ROWS


def use_hopper_tiles(sq, h, hk):
    """Mirror of use_hopper_tiles: the Hopper kernel does not pack heads, so it serves a call
    only when it is not a narrow-tile decode and there is no group to pack or each head brings
    sq >= 64 rows (half a tile)."""
    return not use_narrow_tiles(sq, h, hk) and (h == hk or sq >= 64)


def model_family(sq, h, hk, cc=90, hopper_built=True):
    """Mirror of check_native's family choice for a call the gate admits: the Hopper kernel on
    compute capability 9.0 when the build has it and use_hopper_tiles holds. Assumes what the
    model cannot see: inputs are TMA-describable (no expanded dims) and FLASHSPLIT_DISABLE_HOPPER
    is unset (pass hopper_built=False to model either)."""
    return HOPPER if cc == 90 and hopper_built and use_hopper_tiles(sq, h, hk) else PORTABLE


def model_tiles(d, narrow=False):
    """Mirror of portable_tile_config: (block_m, block_n, blocks_per_sm)."""
    return TILES.get((d, narrow), (0, 0, 0))


def hopper_split_block_m(d, sq, causal, sk):
    """Mirror of hopper_split_block_m: the tiles of split calls, which the heuristic models."""
    t = HOPPER_TILES
    if d != 64 or sq < t["tall_min_sq"]:
        return t["base_m"]
    pct = hopper_row_cost_pct(d, t["tall_m"], causal, sk)
    padded_tall = -(-sq // t["tall_m"]) * t["tall_m"]
    padded_base = -(-sq // t["base_m"]) * t["base_m"]
    return t["tall_m"] if padded_tall * pct < padded_base * 100 else t["base_m"]


def hopper_persistent(sk):
    """Mirror of hopper_persistent: whether tiles over sk keys run persistent."""
    t = HOPPER_TILES
    return -(-sk // t["block_n"]) <= t["persistent_max_key_blocks"]


def hopper_row_cost_pct(d, block_m, causal, sk):
    """Mirror of hopper_row_cost_pct: a row's cost on these tiles in % of a base-tile row."""
    t = HOPPER_TILES
    if block_m == t["wide_m"]:
        return t["wide_pct"]
    if block_m != t["tall_m"]:
        return 100
    if d != 64:
        return t["tall_pct_d128"]
    if not causal:
        return t["tall_pct"]
    return t["tall_pct_causal"] if hopper_persistent(sk) else t["tall_pct_causal_long"]


def hopper_block_m(d, sq, causal, sk, heads=0, sms=0, num_splits=2):
    """Mirror of hopper_block_m: the tiles a call of num_splits splits runs; an unsplit call on
    a grid of heads = b * h takes the height whose weighted waves are fewer (wide tiles only at
    d=64, with the mask only below tall_min_sq rows)."""
    t = HOPPER_TILES
    tall_exists = d in (64, 128) and (not causal or sq >= t["tall_min_sq"])
    wide_exists = d == 64 and (not causal or sq < t["tall_min_sq"])
    if num_splits != 1 or heads <= 0 or sms <= 0 or not (tall_exists or wide_exists):
        return hopper_split_block_m(d, sq, causal, sk)
    pct = hopper_row_cost_pct(d, t["tall_m"], causal, sk)
    base_waves = -(-heads * -(-sq // t["base_m"]) // sms)
    tall_waves = -(-heads * -(-sq // t["tall_m"]) // sms)
    base_cost = base_waves * t["base_m"] * 100
    tall_cost = tall_waves * t["tall_m"] * pct
    tall_wins = tall_exists and tall_cost < base_cost
    narrower = t["tall_m"] if tall_wins else t["base_m"]
    if not wide_exists:
        return narrower
    wide_waves = -(-heads * -(-sq // t["wide_m"]) // sms)
    wide_cost = wide_waves * t["wide_m"] * t["wide_pct"]
    return t["wide_m"] if wide_cost < (tall_cost if tall_wins else base_cost) else narrower


def hopper_block_n(block_m):
    """Mirror of hopper_tile_config's keys per block for tiles of block_m rows."""
    t = HOPPER_TILES
    return t["wide_block_n"] if block_m == t["wide_m"] else t["block_n"]


def hopper_tiles(d, sq, causal, sk):
    """Mirror of hopper_tile_config without the grid: the tiles the heuristic models
    (block_m, block_n, blocks_per_sm)."""
    t = HOPPER_TILES
    if d not in t["head_dims"]:
        return (0, 0, 0)
    return (hopper_split_block_m(d, sq, causal, sk), t["block_n"], t["blocks_per_sm"])


def model_tiles_for(sq, h, hk, d, kernel=PORTABLE, causal=False, sk=0):
    """Mirror of tiles_for(family, problem): (block_m, block_n, blocks_per_sm) of the tiles the
    heuristic models for the kernel family that runs (default the portable kernel, as before
    the Hopper family existed)."""
    if kernel == HOPPER:
        return hopper_tiles(d, sq, causal, sk)
    return model_tiles(d, narrow=use_narrow_tiles(sq, h, hk))


def grid_blocks(b, h, hk, sq, block_m, kernel=PORTABLE):
    """Mirror of forward_blocks: thread blocks per split. The portable kernel runs one block per
    (batch, k/v head, tile of packed rows); the Hopper kernel (packs_heads = false) one per
    (batch, query head, tile of that head's rows)."""
    if block_m <= 0:
        return 0
    if kernel == HOPPER:
        return b * h * -(-sq // block_m)
    return b * hk * -(-packed_rows(sq, h, hk) // block_m)


load_cpp_tables()


def model_num_splits(b, h, hk, sq, sk, d, sms, constants=None, tiles=None, kernel=PORTABLE,
                     causal=False):
    """Mirror of resolve_splits_for(family, problem, device, 0): choose_num_splits on the
    modelled tiles (block_m, block_n, blocks_per_sm; default the family's, model_tiles_for),
    then, for the Hopper family, G = 1 where an unsplit call's own tiles (hopper_block_m at
    G = 1) model no slower, each time weighted by its tiles' row cost."""
    constants = constants or DEFAULT_CONSTANTS
    block_m, block_n, per_sm = tiles or model_tiles_for(sq, h, hk, d, kernel, causal, sk)
    if block_m <= 0 or block_n <= 0 or sms <= 0:
        return 1
    grid = grid_blocks(b, h, hk, sq, block_m, kernel)
    n_blocks = -(-sk // block_n)
    if grid <= 0 or n_blocks <= 1:
        return 1
    split = ModelProblem(b, h, hk, sq, sk, d, sms, block_m, per_sm, kernel, grid, n_blocks,
                         block_n)
    g = _cheapest_split(split, constants)
    if kernel != HOPPER or g <= 1:
        return g
    unsplit_m = hopper_block_m(d, sq, causal, sk, b * h, sms, 1)
    if unsplit_m == block_m:
        return g
    unsplit_n = hopper_block_n(unsplit_m)
    unsplit = dataclasses.replace(split, block_m=unsplit_m,
                                  grid=grid_blocks(b, h, hk, sq, unsplit_m, kernel),
                                  block_n=unsplit_n, n_blocks=-(-sk // unsplit_n))
    split_us = modelled_split_us(split, g, constants) * \
        hopper_row_cost_pct(d, block_m, causal, sk)
    unsplit_us = modelled_split_us(unsplit, 1, constants) * \
        hopper_row_cost_pct(d, unsplit_m, causal, sk)
    return 1 if 0 <= unsplit_us <= split_us else g


@dataclass(frozen=True)
class ModelProblem:
    b: int
    h: int
    hk: int
    sq: int
    sk: int
    d: int
    sms: int
    block_m: int
    blocks_per_sm: int
    kernel: str
    grid: int
    n_blocks: int
    block_n: int = 128  # keys per block: the Hopper model's iteration is per 128 keys


def slots_for(p, c):
    """Mirror of slots_for: blocks that run at once, one per SM for wide tiles,
    slots_per_sm_narrow per SM for narrow ones."""
    return p.sms * (c.slots_per_sm_narrow if p.block_m <= NARROW_MAX_ROWS else 1.0)


def modelled_split_us(p, g, c):
    """Mirror of modelled_split_us (split_heuristic.cpp), the same float operations in the same
    order so ties break the same way."""
    narrow = p.block_m <= NARROW_MAX_ROWS
    if p.kernel == HOPPER:
        per_128 = c.hopper_iteration_us_d64 if p.d <= 64 else c.hopper_iteration_us_d128
        iteration = per_128 * p.block_m / 128.0 * p.block_n / HOPPER_TILES["block_n"]
    elif narrow:
        iteration = c.narrow_iteration_us
    else:
        iteration = c.portable_iteration_us_d64 if p.d <= 64 else c.portable_iteration_us_d128
    slots = slots_for(p, c)
    blocks = float(p.grid) * g
    waves = math.ceil(blocks / slots)
    overhead = c.narrow_block_overhead if narrow else \
        c.block_overhead_hopper if p.kernel == HOPPER else c.block_overhead
    block_us = (float(-(-p.n_blocks // g)) + overhead) * iteration
    co_resident = not narrow and p.blocks_per_sm >= 2 and waves >= 2
    compute_us = waves * block_us / (c.co_resident_speedup if co_resident else 1.0)
    if narrow:
        # Blocks on one SM share it, so the busiest SM, with ceil(blocks / SMs) of them, sets
        # the pace: compute grows by that over the average blocks / SMs, to the power set.
        per_sm = blocks / p.sms
        if per_sm > 1.0:
            compute_us *= (math.ceil(per_sm) / per_sm) ** c.narrow_crowding
    d = float(p.d)
    kv_bytes = 2.0 * p.b * p.hk * p.sk * d * 2.0
    qo_bytes = 2.0 * p.b * p.h * p.sq * d * 2.0
    partial_bytes = float(p.b) * p.h * p.sq * (d + 1.0) * 4.0 * g
    split_bytes = partial_bytes if g > 1 else 0.0
    imbalance = 0.0 if narrow else c.one_wave_imbalance
    memory_us = (kv_bytes + qo_bytes + split_bytes) / c.dram_bytes_per_us * \
        (1.0 + imbalance / waves) * \
        (1.0 + c.partial_wave_penalty * (waves / (blocks / slots) - 1.0))
    split_us = c.narrow_chunk_latency_us * combine_batches(g, p.d) if narrow else \
        c.split_latency_us * g
    combine_us = c.narrow_combine_us if narrow else c.combine_us
    return max(compute_us, memory_us) + split_us + \
        (combine_us + partial_bytes / c.dram_bytes_per_us if g > 1 else 0.0)


@functools.lru_cache(maxsize=1 << 20)
def _cheapest_split(problem, constants):
    """argmin over G in [1, cap] of modelled_split_us; the smallest G on ties, and 1 unless it
    gains min_gain (min_gain_multi_wave on grids of multi_wave_grid waves or more) over G = 1.
    Cached: --search revisits the same shapes."""
    cap = min(constants.max_splits,
              problem.n_blocks // max(constants.min_key_blocks_per_split, 1))
    unsplit = modelled_split_us(problem, 1, constants)
    best_g, best = 1, unsplit
    for g in range(2, cap + 1):
        cost = modelled_split_us(problem, g, constants)
        if cost < best:
            best_g, best = g, cost
    multi_wave = problem.grid / slots_for(problem, constants) >= constants.multi_wave_grid
    min_gain = constants.min_gain_multi_wave if multi_wave else constants.min_gain
    return 1 if best > unsplit * (1.0 - min_gain) else best_g


# ============================================================================ measuring

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--evaluate", metavar="RAW_CSV", default=None,
                   help="no measuring: report from an existing raw CSV")
    p.add_argument("--exclude-shapes-in", metavar="RAW_CSV", action="append", default=[],
                   help="with --evaluate: score only the shapes this other raw CSV lacks "
                        "(a held-out check of constants tuned on it); may be repeated")
    p.add_argument("--search", action="store_true",
                   help="with --evaluate: tune the model constants (coordinate descent over SEARCH_GRID)")
    p.add_argument("--budget-seconds", type=float, default=300.0)
    p.add_argument("--max-shapes", type=int, default=None, help="stop after this many shapes")
    p.add_argument("--tiles", choices=("all", "narrow", "wide"), default="all",
                   help="measure only shapes that run the narrow (decode) tile, or only the others "
                        "(to re-measure one regime after a change to it)")
    p.add_argument("--seed", type=int, default=0, help="order in which shapes are sampled")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--splits", default=None,
                   help="comma list of G to try (default " +
                        ",".join(map(str, CANDIDATE_SPLITS)) + ")")
    p.add_argument("--max-call-ms", type=float, default=20.0,
                   help="skip shapes whose G=1 FLOPs would take longer than this at 400 TFLOPS")
    p.add_argument("--max-scratch-gb", type=float, default=8.0,
                   help="skip G whose fp32 partials exceed this")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--max-spread", type=float, default=1.2,
                   help="with --evaluate: leave out timings whose median exceeds this multiple "
                        "of their p10 (0 keeps every timing)")
    p.add_argument("--blocks-per-sm", type=int, default=None,
                   help="resident blocks per SM for the 'fills the GPU' test (default: each "
                        "row's recorded blocks_per_sm)")
    # The model's constants (defaults read from csrc/core/split_heuristic.h).
    for field in CONSTANT_FIELDS:
        default = getattr(DEFAULT_CONSTANTS, field)
        p.add_argument("--" + field.replace("_", "-"), type=type(default), default=default)
    p.add_argument("--out", default="tune_out")
    args = p.parse_args(argv)
    args.split_list = T.parse_int_list(args.splits) if args.splits else CANDIDATE_SPLITS
    return args


def grid_shapes(seed):
    shapes = [dict(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=causal)
              for b, (h, hk), sq, sk, d, causal in itertools.product(*GRID.values())]
    random.Random(seed).shuffle(shapes)
    return shapes


def measure(args):
    torch = T.require_cuda("tune_num_splits")
    flashsplit = T.import_flashsplit("tune_num_splits")
    dtype = T.parse_dtype(torch, args.dtype)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    os.makedirs(args.out, exist_ok=True)
    raw_path = os.path.join(args.out, "tune_num_splits_raw.csv")
    began = time.perf_counter()
    shapes_done = 0
    with open(raw_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RAW_FIELDS)
        writer.writeheader()
        for shape in grid_shapes(args.seed):
            if time.perf_counter() - began > args.budget_seconds:
                break
            if args.max_shapes is not None and shapes_done >= args.max_shapes:
                break
            b, h, hk, sq, sk, d, causal = (shape[k] for k in ("b", "h", "hk", "sq", "sk", "d",
                                                              "causal"))
            if args.tiles != "all" and use_narrow_tiles(sq, h, hk) != (args.tiles == "narrow"):
                continue
            flops = T.attention_flops(b, h, sq, sk, d, causal)
            if flops / 400e12 * 1e3 > args.max_call_ms:
                continue
            sets = T.make_input_sets(torch, b, h, hk, sq, sk, d, dtype, max_sets=4)
            q, k, v = sets[0]
            auto = T.explain(flashsplit, q, k, v, causal, 0)
            if auto.get("path") != "native":
                T.progress(f"skip {shape}: reference path ({auto.get('reason')})")
                continue
            block_m, block_n = int(auto["block_m"]), int(auto["block_n"])
            kernel = auto.get("kernel") or PORTABLE
            n_blocks = math.ceil(sk / block_n)
            heuristic_g = int(auto["num_splits"])
            gs = sorted({g for g in args.split_list if g <= n_blocks} | {1, heuristic_g})
            # The decision's grid and residency as explain reports them; builds whose explain
            # predates those keys get the model's (forward_blocks / the family's tile table).
            grid = auto.get("grid_blocks")
            grid = int(grid) if grid is not None else grid_blocks(b, h, hk, sq, block_m, kernel)
            per_sm = auto.get("blocks_per_sm")
            per_sm = int(per_sm) if per_sm is not None else \
                model_tiles_for(sq, h, hk, d, kernel)[2]
            common = dict(shape, dtype=args.dtype, sms=sms, kernel=kernel, block_m=block_m,
                          block_n=block_n, blocks_per_sm=per_sm, key_blocks=n_blocks,
                          grid_blocks=grid, heuristic_g=heuristic_g)
            rows, runners = {}, {}
            for g in gs:
                row = dict(common, requested_g=g, g=None, ms=None, p10_ms=None, p90_ms=None,
                           status="ok")
                rows[g] = row
                if g * b * h * sq * (d + 1) * 4 > args.max_scratch_gb * 2**30:
                    row["status"] = "skipped_scratch"
                    continue
                row["g"] = int(T.explain(flashsplit, q, k, v, causal, g)["num_splits"])
                runner = T.flashsplit_runner(flashsplit, causal, g)
                try:
                    runner(q, k, v)  # a G that fails is reported alone, not with the others
                    runners[g] = runner
                except Exception as exc:  # noqa: BLE001
                    row["status"] = "error: " + T.short_reason(str(exc), 60)
            # All G of the shape in one interleaved measurement (see T.time_cuda_interleaved).
            T.time_rows_interleaved(torch, [(rows[g], runner) for g, runner in runners.items()],
                                    sets, args.warmup, args.reps,
                                    max_seconds=2.0 * len(runners))
            for row in rows.values():
                writer.writerow({k: T.csv_value(row.get(k)) for k in RAW_FIELDS})
            line = [f"{g}:{rows[g]['ms']:.3g}" for g in runners]
            fh.flush()
            shapes_done += 1
            T.progress(f"[{shapes_done} {time.perf_counter() - began:5.0f}s] b={b} h={h}/{hk} "
                       f"sq={sq} sk={sk} d={d} causal={causal} {kernel} heurG={heuristic_g} "
                       f"ms {' '.join(line)}")
            del sets, q, k, v
            torch.cuda.empty_cache()
    T.progress(f"measured {shapes_done} shapes in {time.perf_counter() - began:.0f}s -> {raw_path}")
    return raw_path


# ============================================================================ evaluating

def unstable(row, max_spread):
    """A median more than max_spread times its own p10 means most repetitions were disturbed,
    so it measured the machine rather than the kernel: on an H100 one G of a shape sometimes
    reads 1.2-1.8x its value in other runs, with p10 near the usual time. 1.1% of the rows of
    benchmarks/data/h100_iteration_fit.csv exceed 1.2, under 0.2% of the other datasets'."""
    if not max_spread or not row.get("p10_ms"):
        return False
    return float(row["ms"]) > max_spread * float(row["p10_ms"])


def load_raw(path, max_spread=None, dropped=None):
    """Shapes of a raw CSV with their time per G. Timings failing `unstable` are left out (the
    G counts as unmeasured) and appended to `dropped` when given."""
    shapes = OrderedDict()
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            # A CSV without the kernel column holds rows of the portable kernels.
            row["kernel"] = row.get("kernel") or PORTABLE
            key = tuple(row[k] for k in ("b", "h", "hk", "sq", "sk", "d", "causal", "dtype"))
            entry = shapes.setdefault(key, {"info": row, "times": {}})
            if row["status"] == "ok" and row["ms"] and unstable(row, max_spread):
                g = int(row["g"] or row["requested_g"])
                entry.setdefault("unstable", set()).add(g)
                if dropped is not None:
                    dropped.append((key, g))
            elif row["status"] == "ok" and row["ms"]:
                # Keyed by the G that ran (explain's clamp), the thing the time belongs to.
                g = int(row["g"] or row["requested_g"])
                ms = float(row["ms"])
                entry["times"][g] = min(ms, entry["times"].get(g, math.inf))
            elif row["status"] != "ok":
                entry.setdefault("incomplete", True)
    return shapes


def pick_time(times, g, n_blocks, unstable=()):
    """Time for G; a G never measured but equivalent to a measured one (same key blocks per
    split) borrows its time; otherwise None, as for a G whose timing was left out."""
    if g in times:
        return times[g]
    if g in unstable:
        return None
    per_split = math.ceil(n_blocks / g)
    same = [t for h, t in times.items() if math.ceil(n_blocks / h) == per_split]
    return min(same) if same else None


def score(shapes, choose, blocks_per_sm=None):
    """choose(info) -> G. Returns the report numbers for that chooser."""
    regrets, worst, filled, filled_slow, unmeasured = [], [], 0, [], 0
    for key, entry in shapes.items():
        info, times = entry["info"], entry["times"]
        if 1 not in times or entry.get("incomplete"):
            continue
        n_blocks = int(info["key_blocks"])
        g = choose(info)
        t = pick_time(times, g, n_blocks, entry.get("unstable", ()))
        if t is None:
            unmeasured += 1
            continue
        best_g, best = min(times.items(), key=lambda kv: kv[1])
        regret = t / best
        regrets.append(regret)
        worst.append((regret, key, g, best_g, t, best, times[1]))
        # The grid and residency the row recorded (explain's, for the family that ran); the
        # model's tile table only where a row lacks blocks_per_sm.
        per_sm = blocks_per_sm or int(info.get("blocks_per_sm") or 0) or \
            model_tiles_for(*(int(info[k]) for k in ("sq", "h", "hk", "d")), info["kernel"])[2]
        if int(info["grid_blocks"]) >= int(info["sms"]) * per_sm:
            filled += 1
            if t > SLOWER_THAN_G1 * times[1]:
                filled_slow.append((t / times[1], key, g))
    worst.sort(reverse=True)
    gm = math.exp(sum(map(math.log, regrets)) / len(regrets)) if regrets else None
    return dict(n=len(regrets), geomean=gm, worst=worst, filled=filled,
                filled_slow=filled_slow, unmeasured=unmeasured)


def shape_text(key):
    b, h, hk, sq, sk, d, causal, dtype = key
    return f"b={b} h={h}/{hk} sq={sq} sk={sk} d={d} causal={causal} {dtype}"


def report_text(name, result, top=8):
    lines = [f"== {name}"]
    if not result["n"]:
        lines.append("  no complete shapes")
        return lines
    lines.append(f"  shapes {result['n']}  regret geomean {result['geomean']:.4f}  "
                 f"worst {result['worst'][0][0]:.3f}  (unmeasured choices skipped: "
                 f"{result['unmeasured']})")
    slow = result["filled_slow"]
    frac = len(slow) / result["filled"] if result["filled"] else 0.0
    lines.append(f"  grids that fill the GPU: {result['filled']}; heuristic > 2% slower than "
                 f"G=1 on {len(slow)} ({100 * frac:.1f}%)")
    for regret, key, g, best_g, t, best, t1 in result["worst"][:top]:
        lines.append(f"    regret {regret:.3f}  {shape_text(key)}  chose G={g} {t:.4g} ms, "
                     f"best G={best_g} {best:.4g} ms, G=1 {t1:.4g} ms")
    for ratio, key, g in sorted(slow, reverse=True)[:top]:
        lines.append(f"    filled grid slower than G=1 by x{ratio:.3f}: {shape_text(key)} G={g}")
    return lines


def model_chooser(constants):
    def choose(info):
        b, h, hk, sq, sk, d = (int(info[k]) for k in ("b", "h", "hk", "sq", "sk", "d"))
        # The family that ran (recorded per row; portable for CSVs older than the column).
        kernel = info["kernel"]
        block_m, block_n, per_sm = model_tiles_for(sq, h, hk, d, kernel,
                                                   str(info["causal"]) == "True", sk)
        # The measured tiles (explain's block_m / block_n) win over the model's table, except
        # on a Hopper row: explain reports the tiles that ran, and an unsplit call may run
        # other tiles than the split calls' ones the heuristic models (wide tiles: other rows
        # and 64-key blocks).
        measured_m = int(info["block_m"]) if kernel != HOPPER else 0
        measured_n = int(info["block_n"]) if kernel != HOPPER else 0
        tiles = (measured_m or block_m, measured_n or block_n, per_sm)
        return model_num_splits(b, h, hk, sq, sk, d, int(info["sms"]), constants, tiles, kernel,
                                str(info["causal"]) == "True")
    return choose


def constants_text(c):
    return " ".join(f"{field}={getattr(c, field)}" for field in CONSTANT_FIELDS)


# --search: the values each constant may take (the wide tiles' iteration times stay as measured;
# the narrow one is fitted with the other narrow terms).
SEARCH_GRID = OrderedDict(
    slots_per_sm_narrow=(1.0, 1.25, 1.5, 2.0, 2.5, 3.0),
    narrow_crowding=(0.0, 0.25, 0.5, 0.75, 1.0),
    co_resident_speedup=(1.1, 1.2, 1.3, 1.4, 1.5),
    block_overhead=(2.0, 4.0, 6.0, 8.0, 12.0, 16.0),
    block_overhead_hopper=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0),
    dram_bytes_per_us=(2.6e6, 2.8e6, 3.0e6, 3.2e6, 3.4e6),
    one_wave_imbalance=(0.0, 0.03, 0.05, 0.08, 0.1, 0.15),
    partial_wave_penalty=(0.0, 0.05, 0.1, 0.15, 0.2, 0.3),
    split_latency_us=(0.2, 0.3, 0.4, 0.5, 0.6, 0.8),
    combine_us=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0),
    narrow_iteration_us=(0.5, 0.6, 0.75, 0.9, 1.0, 1.2),
    narrow_block_overhead=(2.0, 4.0, 6.0, 8.0, 10.0, 12.0),
    narrow_chunk_latency_us=(1.0, 2.0, 3.0, 4.0),
    narrow_combine_us=(2.0, 3.0, 4.0, 6.0),
    min_gain=(0.0, 0.01, 0.02, 0.03, 0.04),
    min_gain_multi_wave=(0.02, 0.03, 0.04, 0.06),
)
SEARCH_ROUNDS = 4


def search_objective(result):
    """What --search minimises: the geometric-mean regret first (x10), then the worst and the
    99th-percentile regret, and 0.05 per filled grid made > 2 % slower than G = 1."""
    regrets = sorted(r[0] for r in result["worst"])
    p99 = regrets[int(0.99 * (len(regrets) - 1))]
    return (10 * math.log(result["geomean"]) + math.log(regrets[-1]) + math.log(p99) +
            0.05 * len(result["filled_slow"]))


def evaluate(args, raw_path):
    dropped = []
    shapes = load_raw(raw_path, args.max_spread, dropped)
    held_out_note = None
    if getattr(args, "exclude_shapes_in", None):
        seen = set()
        for path in args.exclude_shapes_in:
            seen.update(load_raw(path))
        before = len(shapes)
        shapes = OrderedDict((key, e) for key, e in shapes.items() if key not in seen)
        held_out_note = (f"held out: {len(shapes)} of {before} shapes, those not in "
                         f"{' or '.join(args.exclude_shapes_in)}")
    constants = ModelConstants(**{field: getattr(args, field) for field in CONSTANT_FIELDS})
    recorded = score(shapes, lambda info: int(info["heuristic_g"]), args.blocks_per_sm)
    model = score(shapes, model_chooser(constants), args.blocks_per_sm)
    g1 = score(shapes, lambda info: 1, args.blocks_per_sm)
    choose = model_chooser(DEFAULT_CONSTANTS)
    disagree = [(key, choose(e["info"]), int(e["info"]["heuristic_g"]))
                for key, e in shapes.items() if choose(e["info"]) != int(e["info"]["heuristic_g"])]
    agree = len(shapes) - len(disagree)
    families = OrderedDict()
    for entry in shapes.values():
        families[entry["info"]["kernel"]] = families.get(entry["info"]["kernel"], 0) + 1
    lines = [f"tune_num_splits report from {raw_path}: {len(shapes)} shapes (kernel: " +
             ", ".join(f"{name} {count}" for name, count in families.items()) + ")"]
    if held_out_note:
        lines.append(held_out_note)
    if args.max_spread:
        lines.append(f"left out {len(dropped)} unstable timings (median > {args.max_spread} x p10; "
                     f"--max-spread 0 keeps them); a choice whose time was left out is skipped")
    lines += report_text("flashsplit heuristic (G recorded by explain)", recorded)
    lines += report_text(f"Python MODEL with {constants_text(constants)}", model)
    lines += report_text("always G=1 (no split)", g1)
    lines.append(f"model tiles from {TABLE_SOURCE}: {PORTABLE} {TILES}, narrow up to "
                 f"{NARROW_MAX_ROWS} rows; {HOPPER} {HOPPER_TILES}")
    lines.append(f"model with default constants agrees with the recorded C++ G on "
                 f"{agree}/{len(shapes)} shapes")
    if disagree:
        # Expected for a CSV measured before the C++ heuristic last changed (it records the G
        # of the heuristic of its day); on a fresh CSV it means the mirror drifted.
        lines.append("  disagreements are expected if this CSV predates the current C++ "
                     "heuristic; on a fresh CSV, update the model before tuning with it. First:")
        for key, model_g, cpp_g in disagree[:5]:
            lines.append(f"    {shape_text(key)}: model G={model_g}, recorded G={cpp_g}")
    if args.search:
        lines += search_text(shapes, args)
    return lines


def search_text(shapes, args):
    """Coordinate descent from the constants given on the command line: each round tries every
    value of SEARCH_GRID for one constant at a time and keeps any that lowers
    search_objective."""
    lines = [f"== constant search (model, coordinate descent, {SEARCH_ROUNDS} rounds over "
             f"{', '.join(SEARCH_GRID)}; objective: 10 log geomean + log worst + log p99 + "
             f"0.05 per filled-slow)"]
    best = ModelConstants(**{field: getattr(args, field) for field in CONSTANT_FIELDS})
    result = score(shapes, model_chooser(best), args.blocks_per_sm)
    if not result["n"]:
        return lines + ["  no complete shapes"]
    best_objective = search_objective(result)
    for round_no in range(SEARCH_ROUNDS):
        for field, values in SEARCH_GRID.items():
            for value in values:
                candidate = dataclasses.replace(best, **{field: value})
                objective = search_objective(
                    score(shapes, model_chooser(candidate), args.blocks_per_sm))
                if objective < best_objective - 1e-9:
                    best, best_objective = candidate, objective
        r = score(shapes, model_chooser(best), args.blocks_per_sm)
        lines.append(f"  round {round_no + 1}: geomean {r['geomean']:.4f} worst "
                     f"{r['worst'][0][0]:.3f} filled-slow {len(r['filled_slow'])}  "
                     f"{constants_text(best)}")
    return lines


def main(argv=None):
    args = parse_args(argv)
    if args.evaluate:
        if not os.path.exists(args.evaluate):
            print(f"tune_num_splits: --evaluate {args.evaluate!r}: no such file", file=sys.stderr)
            return 1
        print("\n".join(evaluate(args, args.evaluate)))
        return 0
    try:
        raw_path = measure(args)
    except KeyboardInterrupt:
        # Rows are flushed per shape, so what was measured is already in the CSV.
        raw_path = os.path.join(args.out, "tune_num_splits_raw.csv")
        T.progress("interrupted; evaluating the shapes measured so far")
    lines = evaluate(args, raw_path)
    with open(os.path.join(args.out, "tune_num_splits_report.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
