// Tile shapes of the portable (mma.sync) forward kernel. The kernel instantiations and the
// split heuristic both read them from here, so the heuristic always models the kernel that runs.
#pragma once

namespace flashsplit {

struct TileConfig {
  int block_m;        // query rows per thread block
  int block_n;        // keys per key block (one iteration of the tile loop)
  int warps;          // warps per thread block (16 query rows each)
  int blocks_per_sm;  // resident thread blocks per SM the heuristic assumes
};

// Returns {0,0,0,0} for a head dim that has no kernel.
constexpr TileConfig portable_tile_config(int head_dim) {
  return head_dim == 64    ? TileConfig{128, 64, 8, 2}
         : head_dim == 128 ? TileConfig{128, 64, 8, 1}
                           : TileConfig{0, 0, 0, 0};
}

constexpr int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace flashsplit
