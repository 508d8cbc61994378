// Tile shapes of the portable forward kernel per arch policy (sm80, gfx9). The kernel instantiations and the
// plan both read them from here, so the heuristic always models the kernel that runs.
#pragma once

#include "core/tiles.h"

namespace flashsplit {

// The sm80 policy (mma.sync m16n8k16, warp32). blocks_per_sm follows from registers (wide
// tiles: ~250 registers x 128 threads at d=64, ~215 x 256 at d=128, one block of 256 threads
// from d=96) or shared memory (portable_smem_bytes: narrow tiles hold 34-36 KB at d=64 and
// 128, whose block_n is 32 to keep that variant free of spills; 52, 55 and 74 KB at d=96, 192
// and 256). Wide d=256 tiles walk 32-key blocks so a block's 128 KB fit the 163 KB of an
// sm_80 SM. {0,0,0,0} for a head dim without a kernel.
constexpr TileConfig portable_tile_config(int head_dim, bool narrow = false) {
  if (narrow) {
    switch (head_dim) {
      case 64: return TileConfig{16, 64, 1, 6};
      case 96: return TileConfig{16, 64, 1, 4};
      case 128: return TileConfig{16, 32, 1, 6};
      case 192: return TileConfig{16, 32, 1, 4};
      case 256: return TileConfig{16, 16, 1, 5};
      default: return TileConfig{0, 0, 0, 0};
    }
  }
  switch (head_dim) {
    case 64: return TileConfig{128, 64, 4, 2, 2};
    case 96: return TileConfig{128, 64, 8, 1};
    case 128: return TileConfig{128, 64, 8, 1};
    case 192: return TileConfig{128, 64, 8, 1};
    case 256: return TileConfig{128, 32, 8, 1};
    default: return TileConfig{0, 0, 0, 0};
  }
}

// Whether the sm80 policy runs a problem on its narrow tile. Beyond decode (at most
// kNarrowMaxRows packed rows), up to kSm80NarrowMaxRows packed rows (multi-token decode: 8 query
// tokens of a group of 4) run it too, as two row tiles of a (batch, k/v head) that read its keys
// together: measured 8-13% faster than one 128-row wide tile, most of whose rows are padding (3
// shapes of 32 packed rows, H100), and over paged k/v 5-11% faster (4 shapes of 28-32 packed
// rows). At 64 packed rows the four row tiles ran 1.5x slower than the wide tile.
constexpr long long kSm80NarrowMaxRows = 32;
constexpr bool sm80_uses_narrow_tiles(long long sq, long long h, long long hk) {
  return packed_rows(sq, h, hk) <= kSm80NarrowMaxRows;
}

// Dynamic shared memory of a block of the sm80 policy's tiles: Q and two stages of (K, V), in
// 16-bit elements (the page-table slots of a paged call come on top, a few hundred bytes).
constexpr long long portable_smem_bytes(const TileConfig& tiles, int head_dim) {
  return (static_cast<long long>(tiles.block_m) + 4LL * tiles.block_n) * head_dim * 2;
}

// The sm80 narrow tile with key warps, at d=64 and 128: four warps over the same 16 rows, each
// walking its part of every key block, which merge their softmax states at the end. A (batch,
// k/v head) then streams its keys with four warps' copies in flight and no partials or
// combine, where a one-warp grid has too few blocks for the SMs. Two sizes: the full tile, each
// warp's part the one-warp tile's key block (256-key blocks at d=64, 128 at d=128; 130-132 KB
// of shared memory, one block an SM), and the half-size tile (128 and 64 keys; 66 KB, two
// blocks an SM).
constexpr int kSm80KeyWarps = 4;
constexpr TileConfig sm80_key_warp_tile_config(int head_dim, int blocks_per_sm = 1) {
  const TileConfig one = portable_tile_config(head_dim, true);
  if ((head_dim != 64 && head_dim != 128) || (blocks_per_sm != 1 && blocks_per_sm != 2)) {
    return TileConfig{0, 0, 0, 0};
  }
  return TileConfig{one.block_m, one.block_n * kSm80KeyWarps / blocks_per_sm, kSm80KeyWarps,
                    blocks_per_sm, 1, true, false, kSm80KeyWarps};
}

// The key-warp rules below were measured on the H100 and the H200, whose SMs each get 1.0 and
// 1.44 times the H100's HBM bandwidth (hbm_share_over_h100); a GPU past kHighHbmShare takes
// the H200's (docs/design.md, "A GPU with more HBM bandwidth per SM").
constexpr double kHighHbmShare = 1.2;
constexpr bool high_hbm_share(double hbm_share) { return hbm_share > kHighHbmShare; }

// 1.5 times the SMs' count: the half-size key-warp tile's last block count on the H100
// (sm80_key_warp_max_blocks).
constexpr long long sm80_half_tile_blocks(int sm_count) { return 3LL * sm_count / 2; }

// Whether a key-warp grid of `blocks` blocks of one query token, blocks_per_sm an SM, copies
// each key block's K and V apart (staggered: K once every warp's S = Q K^T of the block before
// is done, V once its P V is, each into one buffer) instead of the next block's pair into the
// other stage before waiting for the current one. The more blocks, the fewer bytes each needs
// in flight: the full tile staggers from two thirds of the SMs' count on, the half-size tile
// past 1.1 times it. There the SMs that hold two blocks set the call's length, and a pair in
// flight per block holds them back (under ncu at 168 blocks their last SM ended 6 K cycles
// after the mean, cuDNN's 2 K); staggered, one key block's K and V are in flight per block at
// most, as in cuDNN's kernel of this shape. Measured on the H100 (decode, bf16, against cuDNN,
// docs/design.md): the half-size tile at 152-196 blocks d=64 0.985-1.009x staggered against
// 0.94-1.00x on two stages (the half-size tile to 168 blocks, the full tile's two waves
// beyond), at 160-184 blocks d=128 1.08-1.12x against 1.02-1.05x, but 0.98-1.00x at 128-136
// blocks against 1.00-1.03x; the full tile at 88-128 blocks 0.995-1.005x at d=128 and
// 1.03-1.16x at d=64 against 0.97-1.00x and 1.03-1.14x on the half-size tile's two stages, but
// 0.99-1.00x at 64 blocks against 1.05-1.06x. Not past high_hbm_share: one buffer each for K
// and V holds fewer bytes in flight than two stages, and on the H200 (1.44) two stages ran
// 0.5-6.5% faster at 88-176 blocks (most at 88 and 160, over long caches) and up to 1% slower
// at 128 and 192 (decode, two alternated runs; docs/design.md).
constexpr bool sm80_key_warp_staggered(long long blocks, int sm_count, int blocks_per_sm,
                                       bool one_query, double hbm_share) {
  if (!one_query || high_hbm_share(hbm_share)) return false;
  return blocks_per_sm == 1 ? blocks * 3 >= 2LL * sm_count : blocks * 10 > 11LL * sm_count;
}

// Page-table slots a paged sm80 walk keeps in shared memory (sm80/policy.cuh, PageTable), each
// with the entries of one key block's pages (block_n + 1: the pages block_n keys can touch),
// and their bytes.
constexpr int kPageTableSlots = 4;
constexpr int page_table_bytes(int block_n) {
  return kPageTableSlots * (block_n + 1) * static_cast<int>(sizeof(int));
}

// Dynamic shared memory of a paged call's sm80 block: portable_smem_bytes and the page table.
constexpr long long portable_paged_smem_bytes(const TileConfig& tiles, int head_dim) {
  return portable_smem_bytes(tiles, head_dim) + page_table_bytes(tiles.block_n);
}

// The shared memory an SM keeps for each resident block besides the block's own (sm_80 to
// sm_90: 1 KB).
constexpr long long kSmemReservedPerBlock = 1024;

// Whether blocks_per_sm blocks of these tiles (paged calls' included) fit on an SM whose blocks
// may take smem_per_block bytes each (the SM has kSmemReservedPerBlock more).
constexpr bool sm80_key_warp_tiles_fit(const TileConfig& tiles, int head_dim,
                                       long long smem_per_block) {
  return tiles.block_m > 0 &&
         tiles.blocks_per_sm * (portable_paged_smem_bytes(tiles, head_dim) +
                                kSmemReservedPerBlock) <= smem_per_block + kSmemReservedPerBlock;
}

// HBM bandwidth one block of the full key-warp tile covers, bytes per microsecond of the HBM's
// peak: the tile starts where its blocks together cover the peak (sm80_key_warp_min_blocks).
// Below that, one-warp blocks split by the heuristic keep more copies in flight. The value fits
// the crossovers measured on both GPUs (decode, d=64 and 128, 8-32k keys, against the
// heuristic's split): between 40 and 48 blocks on the H100 (3.35 TB/s: 47 blocks), at 64-72 on
// the H200 (4.81 TB/s: 67 blocks; at 64 the split ran 3% slower to 8% faster on five shapes, at
// 72 2-6% slower over 8k keys and 1-2% faster over 32k; docs/design.md).
constexpr double kKeyWarpBlockBytesPerUs = 72e3;

// The fewest unsplit blocks the key-warp tile takes: a third of the SMs' count (fewer one-warp
// blocks split fill more SMs) and, where the HBM's peak is known, the blocks that cover it.
constexpr long long sm80_key_warp_min_blocks(int sm_count, double dram_bytes_per_us) {
  const long long third = (static_cast<long long>(sm_count) + 2) / 3;
  const double covering = dram_bytes_per_us / kKeyWarpBlockBytesPerUs;
  long long need = static_cast<long long>(covering);
  if (static_cast<double>(need) < covering) ++need;
  return need > third ? need : third;
}

// The most unsplit blocks of one query token the key-warp tile takes: one wave of the half-size
// tile where one-warp blocks cannot stream the HBM's rate, 1.5 times the SMs' count
// (sm80_half_tile_blocks), and twice it (a full wave) past high_hbm_share. On the H200 (1.44),
// at 200-260 blocks one-warp blocks (one or two an SM, the heuristic's G = 1-3) read
// 0.93-1.00x cuDNN on ten of eleven shapes and the half-size tile 0.97-1.04x, 2-9% faster on
// each of the ten and level on the eleventh (decode, d=64 and 128, 2.7-32k keys, two runs;
// docs/design.md); on the H100 the one-warp tile there is not measured against it.
constexpr long long sm80_key_warp_max_blocks(int sm_count, bool one_query, double hbm_share) {
  if (!one_query) return sm_count;
  return high_hbm_share(hbm_share) ? 2LL * sm_count : sm80_half_tile_blocks(sm_count);
}

// The key-warp tile an sm80 call left to the heuristic (num_splits = 0) runs unsplit on the
// narrow tile, as its blocks an SM (sm80_key_warp_tile_config), or 0 for none. Its unsplit
// grid of `blocks` blocks (a (batch, k/v head) pair's row tiles) takes, for decode of one query
// token,
//   - the full tile, one block an SM, from min_blocks (sm80_key_warp_min_blocks: 47 on the H100,
//     67 on the H200) to the count (from two thirds of it with its copies staggered,
//     sm80_key_warp_staggered),
//   - the half-size tile, two blocks an SM, from there to max_blocks (sm80_key_warp_max_blocks:
//     1.5 times the count, twice it on the H200; one wave; past 1.1 times it staggered),
// and for several query tokens (multi-token decode) the full tile from min_blocks to the count,
// where the SM has the shared memory for them (sm_80 and sm_90 do; sm_86 and sm_89,
// with 99 KB a block, do not). One-warp blocks that few stream below the HBM's rate, so the
// heuristic splits them (G = 2-8) and pays partials and a combine; key-warp blocks keep four
// warps' copies in flight instead. Measured on the H100 (132 SMs; d=64 and 128, 2-16k keys,
// against cuDNN; docs/design.md): decode on the full tile 0-15% faster than the heuristic's G at
// 48-80 blocks, and 3-5% faster there than the half-size one; at 96-128 blocks the half-size
// tile 0.990-1.083x cuDNN, 0.5-4.5% faster than the full one; at 136-168 blocks 0.96-1.06x,
// where the full tile's two waves ran 0.84-1.00x and the one-warp tile unsplit 0.89-1.05x; at
// 176-184 blocks the full tile 0.95-1.04x and the half-size one 0.93-1.02x, and the half-size
// tile with staggered copies 0.985-1.12x at 152-196 blocks. Multi-token decode
// (paged, 4-8 tokens of a group of 4, against the contiguous call) read 1.08-1.38x on the
// half-size tile and 0.97-1.04x on the full one at 96-128 blocks, and 1.26-1.55x on either at
// 144-160 blocks against 1.09-1.12x split into 4. At 32-40 blocks (one-warp splits fill more
// SMs) and 256 (two full waves) the one-warp tile is 1-20% faster. A fixed num_splits keeps the
// one-warp tile, so a sequence's result stays independent of its batch-mates (which the block
// count is not). Paged calls take it as contiguous ones do, but for sm80_key_warps_walk_pages.
constexpr int sm80_key_warp_blocks_per_sm(long long blocks, int sm_count,
                                          long long smem_per_block, int head_dim,
                                          bool one_query, long long min_blocks,
                                          long long max_blocks) {
  if (blocks < min_blocks || blocks > max_blocks) return 0;
  const bool half_size = one_query && blocks > sm_count;
  const int per_sm = half_size ? 2 : 1;
  const TileConfig tiles = sm80_key_warp_tile_config(head_dim, per_sm);
  return sm80_key_warp_tiles_fit(tiles, head_dim, smem_per_block) ? per_sm : 0;
}

// Whether a key-warp tile of blocks_per_sm blocks an SM for `blocks` blocks is the half-size one
// past high_hbm_share within the H100's last block count for it (sm80_half_tile_blocks): where
// the size of the cache decides between it and the one-warp split (the two rules below).
constexpr bool sm80_half_tile_in_h100_range(long long blocks, int sm_count, int blocks_per_sm,
                                            double hbm_share) {
  return blocks_per_sm != 1 && high_hbm_share(hbm_share) &&
         blocks <= sm80_half_tile_blocks(sm_count);
}

// Whether a paged call takes the key-warp tile the contiguous call takes (blocks_per_sm an SM
// for `blocks` blocks, over caches of cache_keys keys: the longest, or the block table's
// capacity): everywhere but in sm80_half_tile_in_h100_range, and there over caches of at most
// kPagedHalfTileMaxKeys. On the H200, paged decode (pages of 16, 64 and 256,
// two runs each; docs/design.md) on the key warps against the one-warp split: the full tile at
// 72-126 blocks 2-10% faster on eleven of thirteen shapes, from 2% faster to 2.5% slower on
// two; the half-size tile at 210-260 blocks 5-11% faster (three shapes; the split's G = 1-3). At
// 144-189 blocks, where the split (G = 2) puts 288-378 one-warp blocks in flight, the half-size
// tile ran 1-9% faster over caches of 2-3k keys (where the split's combine weighs most), within
// 1.5% either way over 4-5k, and 0.5-7% slower from 6k at 144-168 blocks (pages of 16 and 64,
// 16 shapes, two runs; at 189 blocks within 1.5% to 8k).
constexpr long long kPagedHalfTileMaxKeys = 4096;
constexpr bool sm80_key_warps_walk_pages(long long blocks, int sm_count, int blocks_per_sm,
                                         double hbm_share, long long cache_keys) {
  return !sm80_half_tile_in_h100_range(blocks, sm_count, blocks_per_sm, hbm_share) ||
         cache_keys <= kPagedHalfTileMaxKeys;
}

// Whether a contiguous call takes the key-warp tile the plan sized for it (blocks_per_sm an SM
// for `blocks` blocks): everywhere but in sm80_half_tile_in_h100_range, and there where a
// block's K and V hold at most kHalfTileMaxKvBytes or where the one-warp split would not take
// G = 2 (split_g, the heuristic's G for it). On the H200 at 140-198 blocks (decode, d=64 and
// 128, two rounds each alternated with the half-size tile in one process) the split at G = 2
// ran 0.4-4.4% faster over caches of 5.9-37 MiB a block (7 shapes; (18,1,32,8,32768,128): 533
// against 549 us, (33,1,48,6,150000,64) 1634 against 1704) and from 1.2% slower to 1.6% faster
// over 2.2-4.9 MiB (7 shapes); at 134-138 blocks the heuristic's G = 5 ran from even to 2.7%
// slower ((67,1,32,2,10000,128)).
constexpr long long kHalfTileMaxKvBytes = 5LL << 20;
constexpr bool sm80_key_warps_walk_cache(long long blocks, int sm_count, int blocks_per_sm,
                                         double hbm_share, long long kv_bytes_per_block,
                                         int split_g) {
  return !sm80_half_tile_in_h100_range(blocks, sm_count, blocks_per_sm, hbm_share) ||
         kv_bytes_per_block <= kHalfTileMaxKvBytes || split_g != 2;
}

// The gfx9 policy (MFMA, wave64). Wide tiles: four waves of 32 query rows (one 32-column MFMA
// block each), two workgroups per compute unit, each with 32 KB of LDS holding two stages of a
// key block's K and V^T: 64-key blocks at d=64, 32-key blocks at d=128 (whose 64-key blocks
// would need more than the 256 registers two waves per SIMD allow). Narrow (decode) tile: one
// wave of 16 rows (16x16 MFMA) over 64-key blocks.
constexpr TileConfig gfx9_tile_config(int head_dim, bool narrow = false) {
  if (head_dim != 64 && head_dim != 128) return TileConfig{0, 0, 0, 0};
  if (narrow) return TileConfig{16, 64, 1, 2};
  return TileConfig{128, head_dim == 64 ? 64 : 32, 4, 2};
}

}  // namespace flashsplit
