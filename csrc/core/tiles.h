// Tile shapes, as every layer sees them: the plan picks one, the heuristic models it, the
// kernels are instantiated for it.
#pragma once

namespace flashsplit {

struct TileConfig {
  int block_m;        // query rows per thread block (packed rows where packs_heads)
  int block_n;        // keys per key block (one iteration of the tile loop)
  int warps;          // warps (waves on AMD) per thread block
  int blocks_per_sm;  // resident thread blocks per SM (CU) the heuristic assumes
  int m_tiles = 1;    // portable kernel: row tiles of the matrix op per warp
  // Whether a tile's rows pack the h/hk query heads of a group (portable kernels, and Hopper
  // tiles of multi-token decode: hopper_packs_heads) or hold one query head's rows.
  bool packs_heads = true;
  // Hopper (wgmma) tiles: the split heuristic models them per 128 rows and 128 keys.
  bool wgmma = false;
  // Portable narrow tile: warps that walk parts of each key block side by side over the same
  // rows (block_n / key_warps keys each) and merge their softmax states at the end; 1 elsewhere.
  int key_warps = 1;
};

// The portable kernels pack the h/hk query heads that share a k/v head into the rows of one
// tile (row r = query r / group, head r % group of the group), so a k/v tile loaded once serves
// the whole group. A tile therefore holds packed rows, and there are sq * group of them per
// k/v head.
constexpr long long packed_rows(long long sq, long long h, long long hk) { return sq * (h / hk); }

// At most this many packed rows (decode: sq = 1 and a small group) run the narrow tile of one
// warp and 16 rows, so the matrix units do not compute 127 padding rows for every useful one.
constexpr long long kNarrowMaxRows = 16;
constexpr bool use_narrow_tiles(long long sq, long long h, long long hk) {
  return packed_rows(sq, h, hk) <= kNarrowMaxRows;
}

// Tiles of packed rows per (batch, k/v head).
constexpr long long row_tiles(long long sq, long long h, long long hk, long long block_m) {
  return (packed_rows(sq, h, hk) + block_m - 1) / block_m;
}

// Thread blocks (tiles) per split of the forward grid for these tiles.
constexpr long long forward_blocks(long long b, long long sq, long long h, long long hk,
                                   const TileConfig& tiles) {
  return tiles.packs_heads ? b * hk * row_tiles(sq, h, hk, tiles.block_m)
                           : b * h * ((sq + tiles.block_m - 1) / tiles.block_m);
}

constexpr int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace flashsplit
