#!/usr/bin/env python3
"""Small flashsplit forward calls for compute-sanitizer (run by scripts/sanitize.sh).

Each case is tiny (sanitizers slow kernels down 10-100x) but chosen to reach the edges: both
dtypes, every head dim (and v's 128 beside 192), causal with rows that see no key, odd lengths
that end mid-tile, the plain kernel (G = 1), forced and heuristic splits (producers + combine),
GQA/MQA, strided inputs, varlen batches (b sequences of sq - 13 i queries and sk - 29 i
keys) and paged caches (shuffled pages of several sizes). Every case also checks its output
against an fp32 reference, so a case that "passes" the sanitizer while computing garbage still
fails.

    python scripts/sanitize_cases.py               # the memcheck set
    python scripts/sanitize_cases.py --set race    # one small split case for racecheck
    python scripts/sanitize_cases.py --list

Exit codes: 0 ok, 1 a case failed its check, 2 no CUDA device, 3 flashsplit not usable.
"""

import argparse
import math
import os
import sys
import zlib
from collections import namedtuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# block_m: the Hopper tile height the case is for (checked when the Hopper kernel runs, so a
# change of hopper_block_m cannot silently move a case off the tiles it was written for).
# dv: v's head dim where it differs from d.
Case = namedtuple("Case", "name dtype d causal b sq sk h hk num_splits layout block_m dv",
                  defaults=(None, None))

MEMCHECK_CASES = [
    Case("bf16-d64-full-G1-odd", "bf16", 64, False, 2, 37, 300, 4, 4, 1, "contiguous"),
    Case("bf16-d64-causal-G3-odd", "bf16", 64, True, 2, 37, 300, 4, 2, 3, "contiguous"),
    Case("fp16-d128-causal-G1", "fp16", 128, True, 1, 65, 129, 4, 4, 1, "contiguous"),
    Case("fp16-d128-full-auto-decode", "fp16", 128, False, 1, 1, 1000, 8, 2, 0, "contiguous"),
    Case("bf16-d128-causal-G2-empty-rows", "bf16", 128, True, 1, 200, 70, 2, 1, 2, "contiguous"),
    Case("fp16-d64-full-G5-mqa", "fp16", 64, False, 1, 17, 513, 4, 1, 5, "contiguous"),
    Case("bf16-d64-causal-auto-strided", "bf16", 64, True, 2, 129, 257, 4, 2, 0, "packed"),
    Case("fp16-d128-full-G7-tail", "fp16", 128, False, 1, 1, 449, 2, 2, 7, "contiguous"),
    Case("bf16-d64-decode-G4-narrow", "bf16", 64, False, 2, 1, 777, 8, 8, 4, "contiguous"),
    # More (batch, k/v head) pairs than a grid's z holds: the pairs past 65535 continue in y
    # (core/portable_grid.h), whose last chunk has blocks past the last pair.
    Case("fp16-d64-decode-G2-pairs-past-grid-z", "fp16", 64, False, 32800, 1, 70, 4, 2, 2,
         "contiguous"),
    # The combine's lanes (a row's splits dealt to several threads, merged by shuffles): 7 rows
    # of 64 threads, two per block, so the last block's second row is past the end; and 40
    # splits over 4 lanes at d=128, two batches of loads per lane.
    Case("fp16-d64-decode-G20-combine-lanes", "fp16", 64, False, 1, 1, 2600, 7, 7, 20,
         "contiguous"),
    Case("bf16-d128-decode-G40-combine-lanes", "bf16", 128, False, 1, 1, 1300, 4, 2, 40,
         "contiguous"),
    # Hopper tiles of 128 rows (d=64 short queries, d=128) and 192 rows (d=64 from 1536 query
    # rows: consumers skip the key blocks their rows cannot see, and the last tile's padding).
    Case("fp16-d64-causal-G3-hopper128", "fp16", 64, True, 1, 500, 700, 2, 1, 3, "contiguous",
         128),
    Case("bf16-d128-full-G1-hopper-gqa", "bf16", 128, False, 2, 130, 260, 4, 2, 1, "packed", 128),
    Case("fp16-d64-causal-G3-hopper192", "fp16", 64, True, 1, 1536, 1600, 2, 1, 3, "contiguous",
         192),
    # An unsplit call runs 192 rows only where that takes fewer waves (hopper_block_m): 12
    # heads of 1600 rows are 156 tiles of 128 (two waves on 132 SMs) or 108 of 192 (one).
    Case("bf16-d64-full-G1-hopper192-padding", "bf16", 64, False, 1, 1600, 300, 12, 12, 1,
         "contiguous", 192),
    # 192 rows (one Q buffer from d=96), unsplit: 264 heads of 384 rows at d=96; with the mask,
    # 12 heads of 1536 rows against 500 keys at d=128 (the first 1036 rows see none).
    Case("bf16-d96-full-G1-hopper192-grid", "bf16", 96, False, 2, 384, 300, 132, 132, 1,
         "contiguous", 192),
    Case("fp16-d128-causal-G1-hopper192", "fp16", 128, True, 1, 1536, 500, 12, 12, 1,
         "contiguous", 192),
    # 256 rows (unsplit d=64 without the mask, four consumers over 64-key blocks) where they
    # take fewer waves: 264 heads of 440 rows (528 tiles; the last tile's fourth consumer is all
    # padding) against 520 keys (a part-masked last block).
    Case("bf16-d64-full-G1-hopper256-padding", "bf16", 64, False, 8, 440, 520, 33, 33, 1,
         "contiguous", 256),
    # Causal tiles of consumers side by side rotate the consumers' row slices from tile to tile
    # (4 tiles per SM on 256 rows below; 2 per SM on 192 rows: 33 heads of 1536 rows, 264
    # tiles of 192 in two rounds against 396 of 128 in three).
    Case("fp16-d64-causal-G1-hopper256-rotating", "fp16", 64, True, 8, 440, 520, 33, 33, 1,
         "contiguous", 256),
    Case("bf16-d128-causal-G1-hopper192-rotating", "bf16", 128, True, 1, 1536, 1536, 33, 33, 1,
         "contiguous", 192),
    # The tail split (unsplit, no mask, more tiles than SMs; on 132 SMs): 133 tiles leave one,
    # cut over 16 SMs; 576 tiles of 192 rows at d=64 leave 48 (up to 3 parts); 360 of 192 rows
    # at d=128 (20 heads of 3456 rows) leave 96 (the fold in passes, for 160-register consumers).
    Case("bf16-d128-full-G1-hopper-tail-split-one", "bf16", 128, False, 1, 128, 8192, 133, 133,
         1, "contiguous", 128),
    Case("fp16-d64-full-G1-hopper192-tail-split", "fp16", 64, False, 2, 1500, 2200, 36, 36, 1,
         "contiguous", 192),
    Case("bf16-d128-full-G1-hopper192-tail-split", "bf16", 128, False, 1, 3456, 4096, 20, 20,
         1, "contiguous", 192),
    # Rounds rotated among the persistent blocks (heads ending in a shorter tile, no tail split):
    # 23 heads of 2048 rows at d=96, 253 tiles of 192 (a full round and one of 121) against 368
    # of 128.
    Case("bf16-d96-full-G1-hopper192-rotated-rounds", "bf16", 96, False, 1, 2048, 300, 23, 23,
         1, "contiguous", 192),
    # Causal ping-pong tiles whose part-full last round runs backwards: 180 tiles of 128 rows,
    # a full round and one of 48.
    Case("fp16-d128-causal-G1-hopper128-backward-last-round", "fp16", 128, True, 3, 512, 512, 15,
         15, 1, "contiguous", 128),
    # Causal ping-pong tiles over more than 32 key blocks: their own instance, which takes
    # probabilities at the running max (hopper_causal_running_max).
    Case("bf16-d128-causal-G1-hopper128-running-max", "bf16", 128, True, 1, 300, 4200, 2, 2, 1,
         "contiguous", 128),
    Case("fp16-d96-causal-G1-hopper128-running-max", "fp16", 96, True, 1, 200, 4200, 2, 1, 1,
         "contiguous", 128),
    Case("bf16-d64-causal-G1-hopper128-running-max", "bf16", 64, True, 1, 130, 4300, 2, 2, 1,
         "contiguous", 128),
    # At d=128 over 5-32 key blocks too, persistent: in static rounds carrying S across tiles
    # (256 tiles), or drawn from the counter where the rounds do not even out (200 tiles).
    Case("bf16-d128-causal-G1-hopper128-running-max-rounds", "bf16", 128, True, 2, 1024, 1024,
         16, 16, 1, "contiguous", 128),
    Case("fp16-d128-causal-G1-hopper128-running-max-drawn-persistent", "fp16", 128, True, 1, 640,
         640, 40, 40, 1, "contiguous", 128),
    # Head dims 96 (32-column slabs, 128- and 192-row tiles), 192 and 256 (112- and 80-key
    # blocks, stores from registers), v's 128 beside 192, and their portable decode tiles.
    Case("bf16-d96-causal-G3-hopper128", "bf16", 96, True, 1, 300, 500, 4, 2, 3, "contiguous",
         128),
    Case("fp16-d96-full-G1-hopper192-padding", "fp16", 96, False, 1, 1600, 700, 12, 12, 1,
         "contiguous", 192),
    Case("bf16-d192-causal-G1-hopper-empty-rows", "bf16", 192, True, 1, 300, 250, 4, 4, 1,
         "contiguous", 128),
    # d=192 from 1024 keys: drawn from the counter (144 tiles, more than the SMs).
    Case("fp16-d192-causal-G1-hopper-drawn", "fp16", 192, True, 1, 1100, 1100, 16, 8, 1,
         "contiguous", 128),
    # d=256 where the static rounds end far after longest first: drawn (384 tiles).
    Case("bf16-d256-causal-G1-hopper-drawn", "bf16", 256, True, 1, 3000, 3000, 16, 8, 1,
         "contiguous", 128),
    Case("fp16-d256-full-G3-hopper", "fp16", 256, False, 1, 130, 700, 4, 1, 3, "contiguous",
         128),
    Case("bf16-d192-v128-causal-G2-hopper", "bf16", 192, True, 1, 200, 333, 4, 2, 2,
         "contiguous", 128, 128),
    Case("bf16-d192-v128-full-G1-hopper-tail-split", "bf16", 192, False, 1, 128, 8192, 133, 133,
         1, "contiguous", 128, 128),
    Case("fp16-d256-decode-G3-narrow", "fp16", 256, False, 2, 1, 777, 8, 2, 3, "contiguous"),
    Case("bf16-d96-decode-auto-narrow", "bf16", 96, False, 1, 1, 2000, 4, 4, 0, "contiguous"),
    # Varlen prefill on the Hopper kernels' sequence instances (128-, 192- and 256-row tiles):
    # last key blocks cut short, sequences ending inside a warp's rows.
    Case("bf16-d128-causal-G1-varlen-hopper", "bf16", 128, True, 3, 200, 300, 4, 2, 1, "varlen",
         128),
    Case("fp16-d64-full-G3-varlen-hopper", "fp16", 64, False, 3, 150, 400, 4, 4, 3, "varlen",
         128),
    Case("bf16-d64-causal-G1-varlen-hopper192", "bf16", 64, True, 2, 1600, 1600, 12, 12, 1,
         "varlen", 192),
    Case("fp16-d64-causal-G1-varlen-hopper256", "fp16", 64, True, 8, 1024, 1024, 16, 16, 1,
         "varlen", 256),
    # Multi-token decode with a GQA group's heads packed into the Hopper tiles' rows (5-D Q box,
    # rows written at their query and head): two tiles, the second part-full; varlen sequences
    # of 30, 17 and 4 queries.
    Case("bf16-d128-causal-G3-hopper-packed", "bf16", 128, True, 2, 40, 500, 8, 2, 3,
         "contiguous", 128),
    Case("fp16-d64-full-G1-varlen-hopper-packed", "fp16", 64, False, 3, 30, 300, 16, 2, 1,
         "varlen", 128),
    # A group of 5: 125 rows of a tile filled, the rest zeroed padding.
    Case("bf16-d128-causal-G1-hopper-packed-g5", "bf16", 128, True, 2, 30, 400, 10, 2, 1,
         "contiguous", 125),
    # Paged caches (layout "paged<page size>", sequences of sk - 29 i keys, shuffled pages,
    # NaN in every slot past a sequence's keys): the narrow tile's copy runs of whole pages
    # (16) and its walk over pages shorter than a run (8), and the wide tile's walk (pages of 7
    # under 48 packed rows; d=96, whose pages the Hopper kernels do not read).
    Case("bf16-d128-decode-G3-paged16", "bf16", 128, False, 3, 1, 300, 8, 2, 3, "paged16"),
    Case("fp16-d64-decode-auto-paged8", "fp16", 64, False, 2, 1, 777, 4, 4, 0, "paged8"),
    Case("bf16-d96-causal-G2-paged7-wide", "bf16", 96, True, 2, 12, 200, 8, 2, 2, "paged7"),
    # The narrow tile with key warps (80 decode blocks left to the heuristic on 132 SMs; pages
    # on the H100 only): a last key block ending inside a warp's part, the warps' merge, paged
    # runs.
    Case("bf16-d64-decode-auto-key-warps", "bf16", 64, False, 80, 1, 777, 4, 1, 0, "contiguous"),
    Case("fp16-d128-decode-auto-key-warps-paged16", "fp16", 128, False, 40, 1, 300, 8, 2, 0,
         "paged16"),
    # Its half-size blocks, two an SM (144 decode blocks on the H100).
    Case("bf16-d64-decode-auto-key-warps-two-an-sm", "bf16", 64, False, 72, 1, 777, 8, 2, 0,
         "contiguous"),
    Case("fp16-d128-decode-auto-key-warps-two-an-sm-paged16", "fp16", 128, False, 36, 1, 300, 8,
         4, 0, "paged16"),
    # ... and both tiles with each key block's K and V copied apart (96 and 160 decode blocks on
    # the H100).
    Case("fp16-d128-decode-auto-key-warps-one-an-sm-staggered", "fp16", 128, False, 24, 1, 777, 8,
         4, 0, "contiguous"),
    Case("bf16-d64-decode-auto-key-warps-staggered", "bf16", 64, False, 40, 1, 777, 8, 4, 0,
         "contiguous"),
    Case("fp16-d128-decode-auto-key-warps-staggered-paged16", "fp16", 128, False, 80, 1, 300, 4,
         2, 0, "paged16"),
    # Paged caches on the Hopper kernels: boxes of a page's 64 rows (a GQA group packed into
    # the rows) and boxes of a block's rows inside pages of 256; rows copied one at a time from
    # pages of 16 (packed) and of 7.
    Case("bf16-d128-causal-G3-hopper-packed-paged64", "bf16", 128, True, 2, 8, 300, 32, 8, 3,
         "paged64", 128),
    Case("fp16-d64-full-G1-hopper-paged256", "fp16", 64, False, 2, 80, 300, 8, 2, 1, "paged256",
         128),
    Case("bf16-d128-full-G3-hopper-packed-paged16", "bf16", 128, False, 2, 8, 300, 32, 8, 3,
         "paged16", 128),
    Case("fp16-d64-causal-G2-hopper-packed-paged16", "fp16", 64, True, 2, 8, 300, 32, 8, 2,
         "paged16", 128),
    Case("fp16-d64-causal-G1-hopper-paged7", "fp16", 64, True, 2, 80, 300, 8, 2, 1, "paged7",
         128),
    # Rows copied by 16-row runs from pages of 48 (blocks from a multiple of 16 keys), and one
    # at a time in each sequence's last block.
    Case("bf16-d128-causal-G1-hopper-paged48", "bf16", 128, True, 2, 80, 300, 8, 2, 1, "paged48",
         128),
    # The 256-row d=64 tiles over pages of whole 64-key blocks (80 heads of one tile).
    Case("fp16-d64-causal-G1-hopper-wide-paged64", "fp16", 64, True, 2, 200, 300, 40, 8, 1,
         "paged64", 256),
    # ... and over pages of 16 and 7, copied from the rows one warp locates (224 causal tiles
    # drawn from a counter; 80 tiles walked in rounds).
    Case("bf16-d64-causal-G1-hopper-wide-paged16", "bf16", 64, True, 2, 200, 300, 112, 8, 1,
         "paged16", 256),
    Case("fp16-d64-full-G1-hopper-wide-paged7", "fp16", 64, False, 2, 200, 300, 40, 8, 1,
         "paged7", 256),
    # Causal sequences over more than 32 key blocks: the running-max tiles over pages as boxes
    # (two of 64 keys a block, one of 256; V one block behind K) and of varlen sequences.
    Case("bf16-d128-causal-G1-hopper-running-max-paged64", "bf16", 128, True, 2, 130, 4200, 2,
         1, 1, "paged64", 128),
    Case("fp16-d64-causal-G1-hopper-running-max-paged256", "fp16", 64, True, 2, 130, 4200, 2, 2,
         1, "paged256", 128),
    Case("fp16-d64-causal-G1-varlen-hopper-running-max", "fp16", 64, True, 2, 130, 4200, 2, 2, 1,
         "varlen", 128),
    # ... and over pages of 16 copied a row at a time (d=128).
    Case("fp16-d128-causal-G1-hopper-running-max-paged16", "fp16", 128, True, 2, 130, 4200, 2,
         1, 1, "paged16", 128),
    # Longer queries than chunks: the running-max tiles drawn from a counter (dense, varlen and
    # over pages of 64), each tile passed through the tile ring.
    Case("bf16-d128-causal-G1-hopper-running-max-drawn", "bf16", 128, True, 1, 1100, 4200, 2, 2,
         1, "contiguous", 128),
    Case("fp16-d64-causal-G1-varlen-hopper-running-max-drawn", "fp16", 64, True, 2, 1300, 4300,
         2, 1, 1, "varlen", 128),
    Case("bf16-d128-causal-G1-hopper-running-max-drawn-paged64", "bf16", 128, True, 2, 1300,
         4300, 2, 1, 1, "paged64", 128),
]
# Shared-memory hazards are per kernel variant: the Hopper kernel (sq >= 64, and a short GQA
# query block packed into its rows), the portable wide tile and the narrow tile (decode).
RACECHECK_CASES = [
    # The narrow tile's page-table slots (cp.async two key blocks ahead) on a paged walk.
    Case("race-bf16-d128-decode-G2-paged8", "bf16", 128, False, 2, 1, 300, 4, 1, 2, "paged8"),
    Case("race-bf16-d64-causal-G2-hopper", "bf16", 64, True, 1, 70, 200, 1, 1, 2, "contiguous"),
    Case("race-bf16-d64-causal-G1-hopper192", "bf16", 64, True, 1, 1536, 256, 12, 12, 1,
         "contiguous", 192),
    Case("race-bf16-d64-full-G1-hopper256", "bf16", 64, False, 1, 512, 256, 48, 48, 1,
         "contiguous", 256),
    # Causal tiles drawn from a counter through the tile ring: 264 tiles of 256 rows, two per SM.
    Case("race-fp16-d64-causal-G1-hopper256-drawn", "fp16", 64, True, 4, 512, 512, 33, 33, 1,
         "contiguous", 256),
    # d=96: the portable wide tile packs the group (the Hopper kernels pack at d = 64 and 128).
    Case("race-fp16-d96-G2-portable-wide", "fp16", 96, False, 1, 20, 300, 6, 1, 2, "contiguous"),
    Case("race-bf16-d128-causal-G2-hopper-packed", "bf16", 128, True, 1, 9, 300, 32, 8, 2,
         "contiguous", 128),
    Case("race-fp16-d128-decode-G2-narrow", "fp16", 128, False, 1, 1, 150, 4, 2, 2,
         "contiguous"),
    # Key warps: the warps' states meet in the K/V stages once the walk is done.
    Case("race-fp16-d128-decode-auto-key-warps", "fp16", 128, False, 80, 1, 300, 2, 1, 0,
         "contiguous"),
    Case("race-bf16-d64-decode-auto-key-warps-two-an-sm", "bf16", 64, False, 144, 1, 300, 2, 1,
         0, "contiguous"),
    # Staggered copies: K and V each overwrite their buffer once every warp is done with it.
    Case("race-bf16-d64-decode-auto-key-warps-one-an-sm-staggered-paged16", "bf16", 64, False, 48,
         1, 300, 4, 2, 0, "paged16"),
    Case("race-bf16-d64-decode-auto-key-warps-staggered", "bf16", 64, False, 160, 1, 300, 2, 1,
         0, "contiguous"),
    Case("race-fp16-d128-decode-auto-key-warps-staggered-paged16", "fp16", 128, False, 80, 1, 300,
         4, 2, 0, "paged16"),
    Case("race-bf16-d96-causal-G1-hopper", "bf16", 96, True, 1, 200, 300, 2, 2, 1, "contiguous"),
    Case("race-fp16-d128-causal-G1-hopper-running-max", "fp16", 128, True, 1, 130, 4200, 1, 1, 1,
         "contiguous", 128),
    # The running-max tiles drawn from a counter through the tile ring: 144 tiles on 132 SMs.
    Case("race-fp16-d128-causal-G1-hopper-running-max-drawn", "fp16", 128, True, 1, 1100, 4200,
         16, 16, 1, "contiguous", 128),
    # Persistent running-max tiles in static rounds, S carried across tiles (256 tiles).
    Case("race-bf16-d128-causal-G1-hopper-running-max-rounds", "bf16", 128, True, 2, 1024, 1024,
         16, 16, 1, "contiguous", 128),
    # d=192 tiles drawn from the counter: 144 tiles on 132 SMs.
    Case("race-bf16-d192-causal-G1-hopper-drawn", "bf16", 192, True, 1, 1100, 1100, 16, 16, 1,
         "contiguous", 128),
    # d=256 tiles drawn from the counter: 144 tiles, their static rounds modelled 10% after
    # longest first.
    Case("race-fp16-d256-causal-G1-hopper-drawn", "fp16", 256, True, 1, 1536, 1536, 12, 12, 1,
         "contiguous", 128),
    Case("race-bf16-d128-causal-G1-hopper-running-max-paged64", "bf16", 128, True, 1, 130, 4200,
         1, 1, 1, "paged64", 128),
    Case("race-bf16-d128-causal-G1-hopper-running-max-paged16", "bf16", 128, True, 1, 130, 4200,
         1, 1, 1, "paged16", 128),
    Case("race-fp16-d256-G2-hopper", "fp16", 256, False, 1, 130, 300, 2, 2, 2, "contiguous"),
    Case("race-bf16-d128-causal-G1-varlen-hopper", "bf16", 128, True, 3, 200, 300, 2, 2, 1,
         "varlen", 128),
    Case("race-bf16-d64-causal-G2-hopper-paged64", "bf16", 64, True, 2, 80, 300, 4, 2, 2,
         "paged64", 128),
    Case("race-fp16-d128-causal-G2-hopper-packed-paged16", "fp16", 128, True, 2, 8, 300, 32, 8,
         2, "paged16", 128),
    Case("race-bf16-d64-causal-G2-hopper-packed-paged16", "bf16", 64, True, 2, 8, 300, 32, 8, 2,
         "paged16", 128),
    Case("race-bf16-d64-full-G1-hopper-wide-paged128", "bf16", 64, False, 1, 200, 300, 72, 8, 1,
         "paged128", 256),
    # The row table of the 256-row tiles (causal tiles drawn from a counter).
    Case("race-fp16-d64-causal-G1-hopper-wide-paged16", "fp16", 64, True, 2, 200, 300, 112, 8, 1,
         "paged16", 256),
]
SETS = {"memcheck": MEMCHECK_CASES, "race": RACECHECK_CASES}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--set", choices=sorted(SETS), default="memcheck")
    p.add_argument("--list", action="store_true", help="print the cases and exit")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the fp32 comparison (keeps torch's own kernels out of racecheck)")
    return p.parse_args(argv)


def import_everything():
    import torch
    if not torch.cuda.is_available():
        print("sanitize_cases: no CUDA device is visible; nothing to sanitize.", file=sys.stderr)
        sys.exit(2)
    try:
        import flashsplit
    except ImportError:
        sys.path.insert(0, os.path.join(REPO, "python"))
        try:
            import flashsplit
        except ImportError as exc:
            print(f"sanitize_cases: cannot import flashsplit ({exc}); build it first.",
                  file=sys.stderr)
            sys.exit(3)
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from naive_attention import naive_attention
    return torch, flashsplit, naive_attention


def make_inputs(torch, case):
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    gen = torch.Generator(device="cuda")
    gen.manual_seed(zlib.crc32(case.name.encode()))
    shape_q = (case.b, case.sq, case.h, case.d)
    shape_kv = (case.b, case.sk, case.hk, case.d)
    shape_v = (case.b, case.sk, case.hk, case.dv or case.d)
    if case.layout == "packed":
        # q from its own (b, sq, 2, h, d) buffer, k/v as slices of one (b, sk, 2, hk, d) buffer.
        qbuf = torch.randn(case.b, case.sq, 2, case.h, case.d, device="cuda", dtype=dtype,
                           generator=gen)
        kv = torch.randn(case.b, case.sk, 2, case.hk, case.d, device="cuda", dtype=dtype,
                         generator=gen)
        return qbuf[:, :, 1], kv[:, :, 0], kv[:, :, 1]
    return (torch.randn(*shape_q, device="cuda", dtype=dtype, generator=gen),
            torch.randn(*shape_kv, device="cuda", dtype=dtype, generator=gen),
            torch.randn(*shape_v, device="cuda", dtype=dtype, generator=gen))


def wrong_tiles(case, decision):
    """Why a call on the Hopper kernels missed the tile height its case is for (None if not)."""
    ran = decision["details"]["block_m"]
    if case.block_m and decision["kernel"] == "hopper_wgmma" and ran != case.block_m:
        return f"ran {ran}-row tiles, the case is for {case.block_m}"
    if case.layout.startswith("paged") and decision["kernel"] == "hopper_wgmma":
        rows = int(case.layout[len("paged"):]) % 64 != 0  # pages too small for TMA boxes
        if decision["details"]["page_rows"] != rows:
            return f"page_rows={decision['details']['page_rows']}, the case is for {rows}"
    return None


def verdict(detail, err, lse_err):
    """(ok, detail) of a case's largest errors against the reference. Loose on purpose (the
    accuracy tests are elsewhere): catches garbage, not rounding."""
    ok = err < 3e-2 and lse_err < 1e-2 and math.isfinite(err)
    return ok, f"{detail} max|out-ref|={err:.2e} max|lse-ref|={lse_err:.2e}"


def varlen_lengths(case):
    """The queries and keys of a varlen case's sequences."""
    return ([max(0, case.sq - 13 * i) for i in range(case.b)],
            [max(1, case.sk - 29 * i) for i in range(case.b)])


def run_varlen_case(torch, flashsplit, naive_attention, case, check):
    from flashsplit import _native
    from flashsplit.sequences import Sequences
    from sequence_cases import cu_seqlens
    q_lens, k_lens = varlen_lengths(case)
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    gen = torch.Generator(device="cuda")
    gen.manual_seed(zlib.crc32(case.name.encode()))
    q = torch.randn(sum(q_lens), case.h, case.d, device="cuda", dtype=dtype, generator=gen)
    k, v = (torch.randn(sum(k_lens), case.hk, case.d, device="cuda", dtype=dtype, generator=gen)
            for _ in range(2))
    cu_q, cu_k = cu_seqlens(q_lens, "cuda"), cu_seqlens(k_lens, "cuda")
    decision = _native.sequence_gate_decision(
        q[None], k[None], v[None], Sequences(cu_q, cu_k, max_seqlen_q=max(q_lens),
                                             max_seqlen_k=max(k_lens)),
        case.causal, case.num_splits)
    out, lse, _ = flashsplit.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=case.causal,
        num_splits=case.num_splits, return_attn_probs=True, strict=True)
    torch.cuda.synchronize()
    detail = (f"{decision['kernel']} G={decision['num_splits']} "
              f"block_m={decision['details']['block_m']}")
    if wrong_tiles(case, decision):
        return False, f"{detail}: {wrong_tiles(case, decision)}"
    if torch.isnan(out).any() or torch.isnan(lse).any():
        return False, detail + ": NaN in the output"
    if not check:
        return True, detail
    err = lse_err = 0.0
    q0 = k0 = 0
    for nq, nk in zip(q_lens, k_lens):
        n_empty = min(nq, max(0, nq - nk)) if case.causal else 0
        ref, ref_lse = naive_attention(q[q0:q0 + nq][None].float(), k[k0:k0 + nk][None].float(),
                                       v[k0:k0 + nk][None].float(), causal=case.causal)
        err = max(err, (out[q0 + n_empty:q0 + nq].float() - ref[0, n_empty:]).abs().max().item())
        lse_err = max(lse_err, (lse[:, q0 + n_empty:q0 + nq] - ref_lse[0, :, n_empty:])
                      .abs().max().item())
        q0, k0 = q0 + nq, k0 + nk
    return verdict(detail, err, lse_err)


def run_paged_case(torch, flashsplit, naive_attention, case, check):
    """flash_attn_with_kvcache over shuffled pages; sequence i holds sk - 29 i keys."""
    from sequence_cases import to_pages
    page = int(case.layout[len("paged"):])
    q, k, v = make_inputs(torch, case)
    lens = varlen_lengths(case)[1]

    def pages_of(cache):
        # The same page order for k and v; NaN in every slot past a sequence's keys.
        gen = torch.Generator().manual_seed(zlib.crc32(case.name.encode()))
        packed = torch.cat([cache[i, :n] for i, n in enumerate(lens)])
        return to_pages(packed, lens, page, gen, poison=float("nan"))

    (k_pages, table), (v_pages, _) = pages_of(k), pages_of(v)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    if case.block_m:  # a case for the Hopper kernels' paged instances
        from flashsplit import _native
        from flashsplit.sequences import Sequences
        seqs = Sequences(seqused_k=seqlens, block_table=table, max_seqlen_q=case.sq,
                         max_seqlen_k=table.shape[1] * page)
        decision = _native.sequence_gate_decision(q, k_pages, v_pages, seqs, case.causal,
                                                  case.num_splits)
        if decision["kernel"] != "hopper_wgmma" or wrong_tiles(case, decision):
            return False, f"ran {decision['kernel']} {decision['details']['block_m']}-row tiles"
    out, lse = flashsplit.flash_attn_with_kvcache(
        q, k_pages, v_pages, cache_seqlens=seqlens, block_table=table,
        causal=case.causal, num_splits=case.num_splits, return_softmax_lse=True)
    torch.cuda.synchronize()
    detail = f"page_size={page}"
    if torch.isnan(out).any() or torch.isnan(lse).any():
        return False, detail + ": NaN in the output"
    if not check:
        return True, detail
    err = lse_err = 0.0
    for i, n in enumerate(lens):
        ref, ref_lse = naive_attention(q[i:i + 1].float(), k[i:i + 1, :n].float(),
                                       v[i:i + 1, :n].float(), causal=case.causal)
        err = max(err, (out[i].float() - ref[0]).abs().max().item())
        lse_err = max(lse_err, (lse[i] - ref_lse[0]).abs().max().item())
    return verdict(detail, err, lse_err)


def run_case(torch, flashsplit, naive_attention, case, check):
    if case.layout == "varlen":
        return run_varlen_case(torch, flashsplit, naive_attention, case, check)
    if case.layout.startswith("paged"):
        return run_paged_case(torch, flashsplit, naive_attention, case, check)
    q, k, v = make_inputs(torch, case)
    decision = flashsplit.explain(q, k, v, causal=case.causal, num_splits=case.num_splits)
    if decision["path"] != "native":
        return False, f"not native: {decision['reason']}"
    out, lse, _ = flashsplit.flash_attn_func(q, k, v, causal=case.causal,
                                             num_splits=case.num_splits, return_attn_probs=True)
    torch.cuda.synchronize()
    detail = f"{decision['kernel']} G={decision['num_splits']} tail={decision['details']['tail_tiles']}"
    if wrong_tiles(case, decision):
        return False, f"{detail}: {wrong_tiles(case, decision)}"
    if "tail-split" in case.name and decision["kernel"] == "hopper_wgmma" and \
            decision["details"]["tail_tiles"] == 0:
        return False, f"{detail}: ran whole tiles, the case is for the tail split"
    n_empty = max(0, case.sq - case.sk) if case.causal else 0
    seen = out[:, n_empty:]
    if torch.isnan(out).any() or torch.isnan(lse).any():
        return False, detail + ": NaN in the output"
    if n_empty and not ((out[:, :n_empty] == 0).all() and
                        torch.isneginf(lse[:, :, :n_empty]).all()):
        return False, detail + ": rows that see no key are not (0, -inf)"
    if not check:
        return True, detail
    ref, ref_lse = naive_attention(q.float(), k.float(), v.float(), causal=case.causal)
    err = (seen.float() - ref[:, n_empty:]).abs().max().item()
    lse_err = (lse[:, :, n_empty:] - ref_lse[:, :, n_empty:]).abs().max().item()
    return verdict(detail, err, lse_err)


def main(argv=None):
    args = parse_args(argv)
    cases = SETS[args.set]
    if args.list:
        for case in cases:
            print(case)
        return 0
    torch, flashsplit, naive_attention = import_everything()
    failures = 0
    for case in cases:
        try:
            ok, detail = run_case(torch, flashsplit, naive_attention, case,
                                  check=not args.no_reference)
        except Exception as exc:  # noqa: BLE001 - report every case, then fail
            ok, detail = False, f"raised {type(exc).__name__}: {exc}"
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {case.name}: {detail}", flush=True)
    print(f"sanitize_cases: {len(cases) - failures}/{len(cases)} cases ok ({args.set})",
          flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
