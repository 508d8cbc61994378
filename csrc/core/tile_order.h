// The order in which a causal Hopper launch hands out its tiles.
//
// Causal tiles differ in length: a query tile sees the key blocks up to its diagonal. A static
// walk (each block takes every gridDim-th tile, snake order) evens out pairs of full rounds, but
// its last, partial round holds whole heads' tiles, their longest included, and the blocks that
// draw those finish a long tile after the rest: 7-11% over the average block's work at
// bench_seqlen's causal points on 192- and 256-row tiles, 4-7% on 128-row tiles (simulated).
// A persistent causal launch therefore hands its tiles out through a counter as blocks free
// up, in an order that lists each group of units (split, batch, head) longest query tile first
// across the group's units: the last tiles handed out are short, and blocks finish within
// about one short tile of each other. The larger a group the closer this
// comes to longest-first over the whole call, but a group's keys and values must stay in L2
// while its tiles run: groups hold up to kCausalGroupKvBytes of them (measured best at 16-32 MB
// on the H100's 50 MB L2; 64 MB ran 4-24% slower).
#pragma once

#include "core/fast_divmod.h"
#include "core/host_device.h"
#include "core/key_blocks.h"

namespace flashsplit {

constexpr long long kCausalGroupKvBytes = 32LL << 20;

// A unit's keys and values: its split's share of its k/v head's (sk keys of d elements each, K
// and V), which the group_heads = h / hk query heads of a GQA group share.
constexpr long long causal_unit_kv_bytes(long long sk, int d, int elem_bytes, int num_splits,
                                         int group_heads) {
  return 2LL * sk * d * elem_bytes / (static_cast<long long>(num_splits) * group_heads);
}

// Units per group: the groups of at most kCausalGroupKvBytes of keys and values
// (kv_bytes_per_unit each) the units need, made as even as they go (at least 1 unit, at most
// all of them). A last group of a few units runs its longest tiles last: 128 units in groups
// of 127 and 1 ran at 510 TFLOPS, in two of 64 at 573 ((4, 32 / 8, 2049) d=128).
constexpr int causal_tile_group(long long units, long long kv_bytes_per_unit) {
  if (units < 1) return 1;
  const long long fit = kv_bytes_per_unit > 0 ? kCausalGroupKvBytes / kv_bytes_per_unit : units;
  const long long most = fit < 1 ? 1 : fit > units ? units : fit;
  const long long groups = (units + most - 1) / most;
  return static_cast<int>((units + groups - 1) / groups);
}

// The time a long causal launch takes in the model of its grouped order, which hands each SM the
// longest tile left as it frees up: `units` of ceil(sq / block_m) query tiles, bottom-right
// aligned against sk keys, a tile costing its rows x row_pct x the keys it walks (blocks of
// block_n), on sm_count SMs; in units of a row over 128 keys at 100%. Longest first, a grid of
// few tiles ends with its longest ones: on 4 heads of 8192 rows at d=128 the 43 tall tiles of
// a head finish 30% after its 64 base tiles, though tall tiles cost less per row. Beyond
// kCausalModelMaxTiles tiles (or kCausalModelMaxSms SMs) the total over the SMs stands for it:
// longest first ends within one short tile of that.
constexpr long long kCausalModelMaxTiles = 16384;
constexpr int kCausalModelMaxSms = 1024;
// Query tile m's cost in those units (its rows over the key blocks they see): non-decreasing
// in m.
constexpr double causal_tile_cost(long long m, long long sq, long long sk, int block_m,
                                  int block_n, int row_pct) {
  const long long rows_end = m * block_m + block_m < sq ? m * block_m + block_m : sq;
  const int blocks = visible_key_blocks(static_cast<int>(rows_end), static_cast<int>(sq),
                                        static_cast<int>(sk), block_n, true);
  return static_cast<double>(block_m) * row_pct / 100.0 * blocks * block_n / 128.0;
}
// The SMs' even share of those tiles' cost: the total over the SMs.
constexpr double causal_even_share_time(long long units, long long sq, long long sk,
                                        int block_m, int block_n, int row_pct, int sm_count) {
  const long long m_blocks = (sq + block_m - 1) / block_m;
  if (units <= 0 || sm_count <= 0) return 0.0;
  double total = 0.0;
  for (long long m = 0; m < m_blocks; ++m)
    total += causal_tile_cost(m, sq, sk, block_m, block_n, row_pct) * static_cast<double>(units);
  return total / sm_count;
}
constexpr double causal_longest_first_time(long long units, long long sq, long long sk,
                                           int block_m, int block_n, int row_pct,
                                           int sm_count) {
  const long long m_blocks = (sq + block_m - 1) / block_m;
  const auto cost = [&](long long m) {
    return causal_tile_cost(m, sq, sk, block_m, block_n, row_pct);
  };
  if (units <= 0 || sm_count <= 0) return 0.0;
  if (units * m_blocks > kCausalModelMaxTiles || sm_count > kCausalModelMaxSms) {
    return causal_even_share_time(units, sq, sk, block_m, block_n, row_pct, sm_count);
  }
  // The SMs' finishing times as a min-heap; each tile, longest first, goes to the first free.
  double ends[kCausalModelMaxSms] = {};
  for (long long m = m_blocks - 1; m >= 0; --m) {
    const double c = cost(m);
    for (long long u = 0; u < units; ++u) {
      ends[0] += c;
      int i = 0;
      for (;;) {  // sift the root down
        const int l = 2 * i + 1, r = l + 1;
        int least = i;
        if (l < sm_count && ends[l] < ends[least]) least = l;
        if (r < sm_count && ends[r] < ends[least]) least = r;
        if (least == i) break;
        const double t = ends[i];
        ends[i] = ends[least];
        ends[least] = t;
        i = least;
      }
    }
  }
  double last = 0.0;
  for (int s = 0; s < sm_count; ++s) last = ends[s] > last ? ends[s] : last;
  return last;
}

// The same launch walked in static snake rounds, as the persistent causal ping-pong tiles walk
// without a counter (TileScheduler::locate_static): the head-major order (each unit's query tiles
// longest first) in rounds of grid = min(tiles, sm_count) tiles, odd rounds backwards over their
// own tiles; in the same units, the most work any block is given. Whether the rounds even out
// depends on how a unit's tiles fall into them: on 132 blocks, 40 heads of 20 query tiles pair a
// block's long tiles with long ones (modelled 23% after longest first) and 16 heads of 32 give
// some blocks more long tiles than others (26%), while 16-128 heads of 8-16 query tiles end
// within 2-3.1% of it. Beyond kCausalModelMaxTiles tiles (or kCausalModelMaxSms SMs) longest
// first stands for it: rounds of that many tiles even out.
constexpr double causal_static_walk_time(long long units, long long sq, long long sk,
                                         int block_m, int block_n, int sm_count) {
  const long long m_blocks = (sq + block_m - 1) / block_m;
  const long long tiles = units * m_blocks;
  if (units <= 0 || sm_count <= 0) return 0.0;
  if (tiles > kCausalModelMaxTiles || sm_count > kCausalModelMaxSms) {
    return causal_longest_first_time(units, sq, sk, block_m, block_n, 100, sm_count);
  }
  const long long grid = tiles < sm_count ? tiles : sm_count;
  double work[kCausalModelMaxSms] = {};
  for (long long t = 0; t < tiles; ++t) {
    const long long round = t / grid, j = t % grid;
    const long long in_round = tiles - round * grid < grid ? tiles - round * grid : grid;
    const long long block = round % 2 ? in_round - 1 - j : j;
    work[block] += causal_tile_cost(m_blocks - 1 - t % m_blocks, sq, sk, block_m, block_n, 100);
  }
  double last = 0.0;
  for (long long b = 0; b < grid; ++b) last = work[b] > last ? work[b] : last;
  return last;
}

// The grouped order of units * m_blocks tiles in groups of G units, the last group holding the
// rest (units % G) where G does not divide units:
// tile = (unit / G) * G * m_blocks + x * g + unit % G, g = the units of unit's group.
// G = 1 gives the head-major order (tile = unit * m_blocks + x).
struct TileGroups {
  FastDivmod by_group_tiles{1};  // G * m_blocks
  FastDivmod by_group_units{1};  // G
  FastDivmod by_last_units{1};   // the last group's units
  int last_group_tile = 0;       // its first tile
};
inline TileGroups make_tile_groups(int units, int m_blocks, int group) {
  TileGroups t;
  const int full = units / group, rest = units - full * group;
  t.by_group_tiles = FastDivmod(group * m_blocks);
  t.by_group_units = FastDivmod(group);
  t.by_last_units = FastDivmod(rest > 0 ? rest : group);
  t.last_group_tile = (rest > 0 ? full : full - 1) * group * m_blocks;
  return t;
}

// Tile `tile` of the grouped order: query tile x (0 = the longest; the kernel maps it to a
// query block) of unit `unit`.
struct GroupedTile {
  int unit;
  int x;
};
FS_HOST_DEVICE inline GroupedTile grouped_tile(int tile, const TileGroups& t) {
  const int group = t.by_group_tiles.div(tile), in_group = t.by_group_tiles.mod(tile, group);
  const FastDivmod& by_units = tile >= t.last_group_tile ? t.by_last_units : t.by_group_units;
  const int x = by_units.div(in_group);
  return GroupedTile{group * t.by_group_units.divisor() + by_units.mod(in_group, x), x};
}

}  // namespace flashsplit
