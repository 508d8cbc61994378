// The order in which a causal Hopper launch hands out its tiles.
//
// Causal tiles differ in length: a query tile sees the key blocks up to its diagonal. A static
// walk (each block takes every gridDim-th tile, snake order) evens out pairs of full rounds, but
// its last, partial round holds whole heads' tiles, their longest included, and the blocks that
// draw those finish a long tile after the rest: 7-11% over the average block's work at
// bench_seqlen's causal points on 192- and 256-row tiles, 4-7% on 128-row tiles (simulated;
// benchmarks/NOTES.md step 34). A persistent causal launch therefore hands its tiles out through a
// counter as blocks free up, in an order that lists each group of `causal_tile_group` (split,
// batch, head) units' query tiles longest first across the group's units: the last tiles handed
// out are short, and blocks finish within about one short tile of each other. A group's units
// are few enough that their keys and values stay in L2 while its tiles run.
#pragma once

#include "core/fast_divmod.h"
#include "core/host_device.h"

namespace flashsplit {

constexpr int kCausalTileGroupUnits = 16;

// Units per group: the largest divisor of `units` up to kCausalTileGroupUnits (groups must cover
// the units exactly); 1 gives the head-major order of the static walk.
constexpr int causal_tile_group(long long units) {
  for (int g = kCausalTileGroupUnits; g > 1; --g) {
    if (units % g == 0) return g;
  }
  return 1;
}

// Tile `tile` of the grouped order: query tile x (0 = the longest; the kernel maps it to a
// query block) of unit `unit` (split, batch, head), where
// tile = (unit / G) * G * m_blocks + x * G + unit % G; by_group_tiles divides by G * m_blocks,
// by_group_units by G (G = 1: tile = unit * m_blocks + x, the head-major order).
struct GroupedTile {
  int unit;
  int x;
};
FS_HOST_DEVICE inline GroupedTile grouped_tile(int tile, const FastDivmod& by_group_tiles,
                                               const FastDivmod& by_group_units) {
  const int group = by_group_tiles.div(tile), in_group = by_group_tiles.mod(tile, group);
  const int x = by_group_units.div(in_group);
  return GroupedTile{group * by_group_units.divisor() + by_group_units.mod(in_group, x), x};
}

}  // namespace flashsplit
