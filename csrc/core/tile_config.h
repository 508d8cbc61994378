// Tile shapes of the portable (mma.sync) forward kernel. The kernel instantiations and the
// split heuristic both read them from here, so the heuristic always models the kernel that runs.
#pragma once

#include "core/host_device.h"

namespace flashsplit {

struct TileConfig {
  int block_m;        // packed query rows per thread block (see packed_rows)
  int block_n;        // keys per key block (one iteration of the tile loop)
  int warps;          // warps per thread block
  int blocks_per_sm;  // resident thread blocks per SM the heuristic assumes
  int m_tiles = 1;    // portable kernel: 16-row m-tiles per warp (block_m = 16 * warps * m_tiles)
  // Whether a tile's rows pack the h/hk query heads of a group (portable kernel) or hold one
  // query head's rows (Hopper kernel, whose TMA boxes are rows of one head).
  bool packs_heads = true;
};

// The kernel packs the h/hk query heads that share a k/v head into the rows of one tile
// (row r = query r / group, head r % group of the group), so a k/v tile loaded once serves the
// whole group. A tile therefore holds packed rows, and there are sq * group of them per k/v head.
constexpr long long packed_rows(long long sq, long long h, long long hk) { return sq * (h / hk); }

// At most this many packed rows (decode: sq = 1 and a small group) run the narrow tile: one warp,
// 16 rows, so the tensor cores do not compute 127 padding rows for every useful one. The planner,
// the launcher and the heuristic all ask use_narrow_tiles, so they always agree.
constexpr long long kNarrowMaxRows = 16;
constexpr bool use_narrow_tiles(long long sq, long long h, long long hk) {
  return packed_rows(sq, h, hk) <= kNarrowMaxRows;
}

// Tiles of packed rows per (batch, k/v head): the forward grid has b * hk * row_tiles(...) blocks
// per split.
constexpr long long row_tiles(long long sq, long long h, long long hk, long long block_m) {
  return (packed_rows(sq, h, hk) + block_m - 1) / block_m;
}

// Returns {0,0,0,0} for a head dim that has no kernel. blocks_per_sm follows from registers
// (wide: ~250 regs x 128 threads for d=64, ~215 x 256 for d=128) or shared memory (narrow:
// (16 + 4 * block_n) rows * d * 2 bytes with the two-stage K/V ring: 34 KB at d=64, 36 KB at
// d=128, whose block_n is 32 to keep that variant free of spills).
constexpr TileConfig portable_tile_config(int head_dim, bool narrow = false) {
  return narrow ? (head_dim == 64    ? TileConfig{16, 64, 1, 6}
                   : head_dim == 128 ? TileConfig{16, 32, 1, 6}
                                     : TileConfig{0, 0, 0, 0})
                : (head_dim == 64    ? TileConfig{128, 64, 4, 2, 2}
                   : head_dim == 128 ? TileConfig{128, 64, 8, 1}
                                     : TileConfig{0, 0, 0, 0});
}

// Keys per block of the Hopper kernel, at both head dims.
constexpr int kHopperBlockN = 128;

// Whether the Hopper kernel runs persistent (one block per SM walking the tiles in snake order,
// the next tile's loads overlapping the current tile's epilogue) or one block per tile.
// Measured on the H100 (benchmarks/NOTES.md): persistent wins 8-25% where tiles are short (1024
// keys, causal or not) and is even at 4096; at 16k causal tiles its static assignment drifts out
// of step and K/V of many heads crowd L2 (-30%), so long tiles use the hardware's scheduling.
constexpr int kHopperPersistentMaxKeyBlocks = 32;
constexpr bool hopper_persistent(long long sk) {
  return (sk + kHopperBlockN - 1) / kHopperBlockN <= kHopperPersistentMaxKeyBlocks;
}

// Whether persistent 128-row ping-pong tiles issue a tile's first S = Q K^T together with the
// previous tile's last P V (the kernel's kCarry), by head dim and mask. At d=128 without the
// mask it costs 0.5-1.5% on tiles of 8-16 blocks (1024-2048 keys), where the next tile's Q and
// K must land before the last P V can start (bench_seqlen's timing, both ways alternated in one
// call; benchmarks/NOTES.md step 36); on tiles of up to 4 blocks it paid 0.6-1% until the
// softmax took its probabilities at the running max (step 43), and since then it costs 2.5-3%
// there too (512 keys, step 44). With the mask, since those tiles walk their blocks first to
// last (step 37), it pays at every length measured (+2% at 512 keys, +0.7% at 1024, +0.3% at
// 2048; step 38; +2% at 512 again in step 44). At d=64 it measured +3-6% at 512-4096 rows
// (step 14) and even at 1024-2048 in step 36's A/B, so it stays on there.
constexpr bool hopper_carry_across_tiles(int head_dim, bool causal) {
  return head_dim != 128 || causal;
}

// Rows per block of the Hopper kernel: 128 (two consumer warpgroups, ping-pong) or 192 (three
// consumer warpgroups side by side), which run faster per row (H100, benchmarks/NOTES.md steps
// 16 and 20-23) but fill the SMs in coarser steps; and, for unsplit d=64 calls, 256 (four
// consumers over 64-key blocks, kHopperWideBlockN: with 128-key blocks a consumer needs ~122
// registers and the block has 112; step 29), with the causal mask only below kHopperTallMinSq
// rows (step 33). The constants are on lines of their own because benchmarks/tune_num_splits.py
// reads them.
constexpr int kHopperBaseRows = 128;
constexpr int kHopperTallRows = 192;
constexpr int kHopperWideRows = 256;
constexpr int kHopperWideBlockN = 64;
// Cost of a tall-tile row in % of a base-tile row: d=64 without the causal mask; d=64 with it,
// on persistent tiles (at most kHopperPersistentMaxKeyBlocks key blocks; 0.95 at 2048 and 4096
// rows since causal tiles rotate their consumers' row slices, step 33) and on longer ones
// (0.79-0.86 fitted from forced tiles at 6144-8192 rows, and split calls over 8k-128k keys run
// 9-12% faster on 192 rows at their best G: benchmarks/NOTES.md step 25); and d=128 (0.93
// without the mask; 0.92-0.95 with it from 2048 rows, 1.0 below).
constexpr int kHopperTallPct = 87;
constexpr int kHopperTallPctCausal = 95;
constexpr int kHopperTallPctCausalLong = 88;
constexpr int kHopperTallPctD128 = 93;
// Cost of a wide-tile row (d=64), fitted to forced tiles at 256-8192 rows without the mask: 6-9%
// more than a tall row, so wide tiles win only where they pad less or fill fewer waves (512 and
// 1024 rows: +3-6%; benchmarks/NOTES.md step 29). With the mask, where tall tiles do not run,
// 0.90-0.97 of a base row (512 and 1024 rows: their 64-key blocks compute less of the masked
// diagonal; step 33).
constexpr int kHopperWidePct = 95;
// From this many query rows tall tiles may run with the mask too (below it base tiles win with
// the mask by up to 24% at d=64 and 11% at d=128), and split calls at d=64 run them there.
constexpr int kHopperTallMinSq = 1536;

// A row's cost on tiles of block_m rows over sk keys, in % of a base-tile row (the heuristic's
// time model is per 128 rows, so tall tiles' modelled times are weighted by this to compare
// them).
constexpr int hopper_row_cost_pct(int head_dim, int block_m, bool causal, long long sk) {
  if (block_m == kHopperWideRows) return kHopperWidePct;
  if (block_m != kHopperTallRows) return 100;
  if (head_dim != 64) return kHopperTallPctD128;
  if (!causal) return kHopperTallPct;
  return hopper_persistent(sk) ? kHopperTallPctCausal : kHopperTallPctCausalLong;
}

// The tile height of split calls (G >= 2), which the split heuristic models to choose G: d=64
// from kHopperTallMinSq rows, tall tiles unless their last tile's padding costs more than their
// faster rows save (measured on split grids too: 10-17% faster at the best G); else base tiles.
constexpr int hopper_split_block_m(int head_dim, long long sq, bool causal, long long sk) {
  if (head_dim != 64 || sq < kHopperTallMinSq) return kHopperBaseRows;
  const long long pct = hopper_row_cost_pct(head_dim, kHopperTallRows, causal, sk);
  const long long padded_tall = (sq + kHopperTallRows - 1) / kHopperTallRows * kHopperTallRows;
  const long long padded_base = (sq + kHopperBaseRows - 1) / kHopperBaseRows * kHopperBaseRows;
  return padded_tall * pct < padded_base * 100 ? kHopperTallRows : kHopperBaseRows;
}

// The tile height a call runs with num_splits = G. Split calls: hopper_split_block_m. Unsplit
// calls (G = 1) on a grid of heads = b * h query heads: the height whose waves over sm_count
// SMs, weighted by a row's cost, are fewer (tall waves * 192 * pct < base waves * 128 * 100),
// where tall tiles exist (d=64 and d=128; with the mask from kHopperTallMinSq rows). A
// row-count rule alone cannot do this: tall tiles win 5-15% per row on a full grid
// and lose up to 30% on a grid of one or two waves (2048 rows of 16 heads at d=64: 176 tiles
// of 192 take two rounds, as 256 of 128 do). heads or sm_count 0: the grid is unknown, so
// hopper_split_block_m. Wide tiles (d=64; with the mask below kHopperTallMinSq rows, where
// tall ones do not run) then win where their weighted waves are fewer still.
constexpr int hopper_block_m(int head_dim, long long sq, bool causal, long long sk,
                             long long heads = 0, int sm_count = 0, int num_splits = 2) {
  const bool tall_exists =
      (head_dim == 64 || head_dim == 128) && (!causal || sq >= kHopperTallMinSq);
  const bool wide_exists = head_dim == 64 && (!causal || sq < kHopperTallMinSq);
  if (num_splits != 1 || heads <= 0 || sm_count <= 0 || !(tall_exists || wide_exists))
    return hopper_split_block_m(head_dim, sq, causal, sk);
  const long long pct = hopper_row_cost_pct(head_dim, kHopperTallRows, causal, sk);
  const long long base_tiles = heads * ((sq + kHopperBaseRows - 1) / kHopperBaseRows);
  const long long tall_tiles = heads * ((sq + kHopperTallRows - 1) / kHopperTallRows);
  const long long base_waves = (base_tiles + sm_count - 1) / sm_count;
  const long long tall_waves = (tall_tiles + sm_count - 1) / sm_count;
  const long long base_cost = base_waves * kHopperBaseRows * 100;
  const long long tall_cost = tall_waves * kHopperTallRows * pct;
  const bool tall_wins = tall_exists && tall_cost < base_cost;
  const int narrower = tall_wins ? kHopperTallRows : kHopperBaseRows;
  if (!wide_exists) return narrower;
  const long long wide_tiles = heads * ((sq + kHopperWideRows - 1) / kHopperWideRows);
  const long long wide_waves = (wide_tiles + sm_count - 1) / sm_count;
  const long long wide_cost = wide_waves * kHopperWideRows * kHopperWidePct;
  return wide_cost < (tall_wins ? tall_cost : base_cost) ? kHopperWideRows : narrower;
}

// Whether a persistent unsplit launch without the causal mask rotates each round's tiles among
// its blocks (block j takes the round's tile (j + round) mod its tiles) instead of walking them in
// snake order: on 192-row tiles whose heads end in a shorter query tile (sq not a multiple of
// 192). The snake walk gives a block the same place in a head's query tiles in every round
// whenever the grid is a multiple of a head's tiles (132 blocks = 12 heads of 11 tiles at 2048
// rows), so the short tiles (0.81x a full one at d=128, 0.85x at d=64, measured) all fall to 2 of
// every 11 blocks and the others set the call's length; rotated, every block gets its share.
// Measured in one build, both ways interleaved (benchmarks/NOTES.md step 39): d=128 2048 rows
// +1.3-1.5%, d=64 2048 +0.8%, d=64 4096 +0.5-0.8%; equal tiles (128-row, 256-row, sq a multiple
// of 192) 0.3-0.5% slower, so they keep the snake. Split calls keep it too: the split heuristic's
// times were fitted on it.
constexpr bool hopper_rotate_rounds(bool causal, int num_splits, long long sq, int block_m) {
  return !causal && num_splits == 1 && block_m == kHopperTallRows && sq % block_m != 0;
}

// A persistent launch whose last round is part-full: the blocks that run no tile in that round
// (one tile fewer than the others) start kHopperStaggerNs later. Otherwise every block reaches
// its tile boundaries, and so the loads of its next tile's Q, K and V, at the same moment in
// every round; offset, the two halves of the grid take turns. It costs nothing at the end, as
// the delayed blocks finish a tile earlier. Measured in one build (benchmarks/NOTES.md step 41):
// 2 us gained 0.7-1.0% at d=128 512 rows, 0.8-1.4% with the causal mask, 0.1-0.6% at the other
// short points; 6 us lost 1.3% with the mask. (The grouped causal walk, whose persistent launches
// draw tiles from a counter, does not stagger: there no block knows its tile count.)
constexpr unsigned kHopperStaggerNs = 2000;
FS_HOST_DEVICE constexpr bool hopper_staggered_block(long long tiles, long long grid,
                                                     long long block) {
  return tiles > grid && tiles % grid != 0 && block >= tiles % grid;
}

// Tiles of the Hopper (wgmma) kernel: block_m query rows of one head in consumer warpgroups of
// 64 rows plus a TMA producer warpgroup, 128-key blocks (64 on wide tiles), one block per SM
// (shared memory: 160 KB of Q and K/V stages at d=128; registers: 232 per consumer thread with
// two consumers).
// Without heads, sm_count and num_splits: the split calls' tiles, which the heuristic models.
constexpr TileConfig hopper_tile_config(int head_dim, long long sq = 1 << 20, bool causal = false,
                                        long long sk = 1 << 20, long long heads = 0,
                                        int sm_count = 0, int num_splits = 2) {
  if (head_dim != 64 && head_dim != 128) return TileConfig{0, 0, 0, 0};
  const int block_m = hopper_block_m(head_dim, sq, causal, sk, heads, sm_count, num_splits);
  const int block_n = block_m == kHopperWideRows ? kHopperWideBlockN : kHopperBlockN;
  return TileConfig{block_m, block_n, 4 + block_m / 16, 1, 1, false};
}

// The Hopper kernel does not pack heads, so it wastes rows where the portable kernel would
// fill its tile with a GQA group: it serves a call only when each head brings at least half a
// tile of query rows (or there is no group to pack) and the call is not a narrow-tile decode.
constexpr bool use_hopper_tiles(long long sq, long long h, long long hk) {
  return !use_narrow_tiles(sq, h, hk) && (h == hk || sq >= 64);
}

// Thread blocks per split of the forward grid for these tiles.
constexpr long long forward_blocks(long long b, long long sq, long long h, long long hk,
                                   const TileConfig& tiles) {
  return tiles.packs_heads ? b * hk * row_tiles(sq, h, hk, tiles.block_m)
                           : b * h * ((sq + tiles.block_m - 1) / tiles.block_m);
}

constexpr int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace flashsplit
