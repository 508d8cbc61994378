// Tile shapes of the portable (mma.sync) forward kernel. The kernel instantiations and the
// split heuristic both read them from here, so the heuristic always models the kernel that runs.
#pragma once

namespace flashsplit {

struct TileConfig {
  int block_m;        // packed query rows per thread block (see packed_rows)
  int block_n;        // keys per key block (one iteration of the tile loop)
  int warps;          // warps per thread block (16 query rows each)
  int blocks_per_sm;  // resident thread blocks per SM the heuristic assumes
};

// The kernel packs the h/hk query heads that share a k/v head into the rows of one tile
// (row r = query r / group, head r % group of the group), so a k/v tile loaded once serves the
// whole group. A tile therefore holds packed rows, and there are sq * group of them per k/v head.
constexpr long long packed_rows(long long sq, long long h, long long hk) { return sq * (h / hk); }

// At most this many packed rows (decode: sq = 1 and a small group) run the narrow tile: one warp,
// 16 rows, so the tensor cores do not compute 127 padding rows for every useful one.
constexpr long long kNarrowMaxRows = 16;
constexpr bool use_narrow_tiles(long long rows) { return rows <= kNarrowMaxRows; }

// Returns {0,0,0,0} for a head dim that has no kernel. blocks_per_sm follows from the register
// cap (wide d=64: 128 regs x 256 threads) or shared memory (wide d=128 at ~215 regs; narrow:
// (16 + 2 * 64) rows * d * 2 bytes each).
constexpr TileConfig portable_tile_config(int head_dim, bool narrow = false) {
  return narrow ? (head_dim == 64    ? TileConfig{16, 64, 1, 8}
                   : head_dim == 128 ? TileConfig{16, 64, 1, 6}
                                     : TileConfig{0, 0, 0, 0})
                : (head_dim == 64    ? TileConfig{128, 64, 8, 2}
                   : head_dim == 128 ? TileConfig{128, 64, 8, 1}
                                     : TileConfig{0, 0, 0, 0});
}

constexpr int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace flashsplit
