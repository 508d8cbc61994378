// Tile shapes of the portable forward kernel per arch policy (sm80, gfx9). The kernel instantiations and the
// plan both read them from here, so the heuristic always models the kernel that runs.
#pragma once

#include "core/tiles.h"

namespace flashsplit {

// The sm80 policy (mma.sync m16n8k16, warp32). blocks_per_sm follows from registers (wide
// tiles: ~250 registers x 128 threads at d=64, ~215 x 256 at d=128) or shared memory (narrow
// tiles: (16 + 4 * block_n) rows * d * 2 bytes with the two-stage K/V ring, 34 KB at d=64 and
// 36 KB at d=128, whose block_n is 32 to keep that variant free of spills). {0,0,0,0} for a
// head dim without a kernel.
constexpr TileConfig portable_tile_config(int head_dim, bool narrow = false) {
  return narrow ? (head_dim == 64    ? TileConfig{16, 64, 1, 6}
                   : head_dim == 128 ? TileConfig{16, 32, 1, 6}
                                     : TileConfig{0, 0, 0, 0})
                : (head_dim == 64    ? TileConfig{128, 64, 4, 2, 2}
                   : head_dim == 128 ? TileConfig{128, 64, 8, 1}
                                     : TileConfig{0, 0, 0, 0});
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
