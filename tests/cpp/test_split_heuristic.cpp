// Properties of the split-count heuristic's cost model: no split when the grid is whole waves or
// many waves, splits on tiny grids with long keys, hard bounds, agreement with the formula
// evaluated independently here, every constant actually used; and resolve_num_splits' semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>

#include "split_heuristic.h"

namespace flashsplit {
namespace {

DeviceInfo nvidia(int sm_count) { return DeviceInfo{Vendor::kNvidia, 90, sm_count, 227 * 1024}; }

AttnProblem shape(int64_t b, int64_t h, int64_t hk, int64_t sq, int64_t sk, int64_t d) {
  AttnProblem p;
  p.b = b; p.h = h; p.hk = hk; p.sq = sq; p.sk = sk; p.d = d;
  return p;
}

AttnProblem shape(int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d) {
  return shape(b, h, h, sq, sk, d);
}

// The tiles the plan runs for this problem (narrow for decode-like packed rows), so every test
// exercises the same tile the kernel would use.
TileConfig tiles_for(const AttnProblem& p) {
  return portable_tile_config(static_cast<int>(p.d),
                              use_narrow_tiles(p.sq, p.h, p.hk));
}

// Blocks of the forward grid: one per (batch, k/v head, tile of packed rows) for the portable
// kernels, one per (batch, query head, tile of that head's rows) for the Hopper kernels.
int64_t grid_blocks(const AttnProblem& p, const TileConfig& t) {
  if (!t.packs_heads) return p.b * p.h * ((p.sq + t.block_m - 1) / t.block_m);
  return p.b * p.hk * ((packed_rows(p.sq, p.h, p.hk) + t.block_m - 1) / t.block_m);
}

int64_t key_blocks(const AttnProblem& p, const TileConfig& t) {
  return (p.sk + t.block_n - 1) / t.block_n;
}

double slots_of(const TileConfig& t, int sm_count, const SplitHeuristicConstants& c) {
  return sm_count * (t.block_m <= kNarrowMaxRows ? c.slots_per_sm_narrow : c.slots_per_sm_wide);
}

std::string describe(const AttnProblem& p, int sm_count) {
  return "b=" + std::to_string(p.b) + " h=" + std::to_string(p.h) + " hk=" +
         std::to_string(p.hk) + " sq=" + std::to_string(p.sq) + " sk=" + std::to_string(p.sk) +
         " d=" + std::to_string(p.d) + " sms=" + std::to_string(sm_count);
}

// Fresh inputs every run; the seed is printed on failure so a run can be replayed.
uint32_t fresh_seed() { return std::random_device{}(); }

// The modelled time written out independently of split_heuristic.cpp, in exact integers: every
// constant the tests use is a multiple of 1/4 (costs), 1/2 (slots per SM) or 1/100 (min gain),
// so scaling by 4, 2 and 100 makes every cost an integer and every tie exact.
struct QuarterConstants {
  int64_t half_slots_per_sm_wide, half_slots_per_sm_narrow;  // slots per SM x 2
  int64_t quarter_block_overhead, quarter_block_overhead_hopper, quarter_split_latency,
      quarter_combine_cost;  // cost x 4
  int64_t min_gain_percent;
  int64_t max_splits, min_key_blocks_per_split;

  SplitHeuristicConstants to_double() const {
    SplitHeuristicConstants c;
    c.slots_per_sm_wide = half_slots_per_sm_wide / 2.0;
    c.slots_per_sm_narrow = half_slots_per_sm_narrow / 2.0;
    c.block_overhead = quarter_block_overhead / 4.0;
    c.block_overhead_hopper = quarter_block_overhead_hopper / 4.0;
    c.split_latency = quarter_split_latency / 4.0;
    c.combine_cost = quarter_combine_cost / 4.0;
    c.min_gain = min_gain_percent / 100.0;
    c.max_splits = static_cast<int>(max_splits);
    c.min_key_blocks_per_split = static_cast<int>(min_key_blocks_per_split);
    return c;
  }
};

QuarterConstants default_quarter_constants() { return {2, 4, 64, 32, 2, 16, 2, 128, 1}; }

// Tries every G and keeps the cheapest, the first one on ties.
int brute_force_num_splits(const AttnProblem& p, const TileConfig& t, int sm_count,
                           const QuarterConstants& c) {
  const int64_t kb = key_blocks(p, t), grid = grid_blocks(p, t);
  const int64_t half_slots =
      sm_count * (t.block_m <= kNarrowMaxRows ? c.half_slots_per_sm_narrow
                                              : c.half_slots_per_sm_wide);
  if (kb <= 1) return 1;
  const int64_t cap = std::min(c.max_splits, kb / c.min_key_blocks_per_split);
  const int64_t overhead = t.packs_heads ? c.quarter_block_overhead : c.quarter_block_overhead_hopper;
  int best = 1;
  int64_t best_cost = -1, unsplit_cost = 0;
  for (int64_t g = 1; g <= std::max<int64_t>(cap, 1); ++g) {
    const int64_t waves = (2 * grid * g + half_slots - 1) / half_slots;  // ceil(grid*G/slots)
    const int64_t per_split = (kb + g - 1) / g;
    const int64_t quarter_cost = waves * (4 * per_split + overhead) + c.quarter_split_latency * g +
                                 (g > 1 ? c.quarter_combine_cost : 0);
    if (g == 1) unsplit_cost = quarter_cost;
    if (best_cost < 0 || quarter_cost < best_cost) {
      best = static_cast<int>(g);
      best_cost = quarter_cost;
    }
  }
  // A split must gain min_gain over G = 1: best > unsplit * (1 - pct / 100), in integers.
  return 100 * best_cost > (100 - c.min_gain_percent) * unsplit_cost ? 1 : best;
}

TEST(SplitHeuristic, DefaultsAreTheFittedV2Constants) {
  // The brute force below is only an independent check if it starts from the same numbers.
  const SplitHeuristicConstants c, q = default_quarter_constants().to_double();
  EXPECT_EQ(c.slots_per_sm_wide, q.slots_per_sm_wide);
  EXPECT_EQ(c.slots_per_sm_narrow, q.slots_per_sm_narrow);
  EXPECT_EQ(c.block_overhead, q.block_overhead);
  EXPECT_EQ(c.block_overhead_hopper, q.block_overhead_hopper);
  EXPECT_EQ(c.split_latency, q.split_latency);
  EXPECT_EQ(c.combine_cost, q.combine_cost);
  EXPECT_EQ(c.min_gain, q.min_gain);
  EXPECT_EQ(c.max_splits, q.max_splits);
  EXPECT_EQ(c.min_key_blocks_per_split, q.min_key_blocks_per_split);
}

TEST(SplitHeuristic, NoSplitWhenTheGridIsWholeWaves) {
  // With grid = k * slots, G splits make exactly k * G full waves: the same key blocks cost the
  // same or more (ceil), plus G - 1 more block overheads per wave and more combine latency.
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const SplitHeuristicConstants constants;
  int wide = 0, narrow = 0;
  for (int i = 0; i < 4000; ++i) {
    const int64_t d = rng() % 2 ? 64 : 128;
    const int sm_count = 1 + static_cast<int>(rng() % 200);
    const int64_t waves = 1 + rng() % 4;
    const int64_t sk = 1 + rng() % 300000;
    AttnProblem p;
    if (rng() % 2) {
      // Wide tile: one query head per k/v head, sq spanning m row tiles (m whole grids).
      const int64_t m = 1 + rng() % 3;
      const int64_t slots = sm_count * static_cast<int64_t>(constants.slots_per_sm_wide);
      p = shape(1, waves * slots, 128 * (m - 1) + 17 + rng() % 112, sk, d);
    } else {
      // Narrow tile: decode, a GQA group of <= 16 query heads per k/v head.
      const int64_t group = 1 + rng() % 16;
      const int64_t slots = sm_count * static_cast<int64_t>(constants.slots_per_sm_narrow);
      p = shape(1, waves * slots * group, waves * slots, 1, sk, d);
    }
    const TileConfig tiles = tiles_for(p);
    const double slots = slots_of(tiles, sm_count, constants);
    ASSERT_EQ(std::fmod(static_cast<double>(grid_blocks(p, tiles)), slots), 0.0)
        << "whole waves: " << describe(p, sm_count);
    ASSERT_EQ(choose_num_splits(p, nvidia(sm_count), tiles), 1) << describe(p, sm_count);
    (tiles.block_m <= kNarrowMaxRows ? narrow : wide)++;
  }
  EXPECT_GT(wide, 1000);
  EXPECT_GT(narrow, 1000);
}

TEST(SplitHeuristic, NoSplitOnLargeMultiWaveGrids) {
  // Reference shapes that fill the GPU many times over (8192 blocks on 132 SMs, ...).
  const int64_t shapes[][5] = {{8, 16, 8192, 8192, 64},  {8, 16, 8192, 8192, 128},
                               {1, 8, 32768, 32768, 64}, {4, 32, 4096, 4096, 128},
                               {2, 16, 1024, 65536, 128}, {32, 16, 512, 512, 64},
                               {1, 64, 2048, 100000, 64}, {1, 2, 40000, 40000, 64}};
  for (const auto& s : shapes) {
    AttnProblem p = shape(s[0], s[1], s[2], s[3], s[4]);
    EXPECT_EQ(choose_num_splits(p, nvidia(132), tiles_for(p)), 1) << describe(p, 132);
  }
}

TEST(SplitHeuristic, NoSplitOnGridsOfAtLeastEightWavesWithShortTails) {
  // From the formula: G >= 2 splits at least double the blocks, so they add at least
  // block_overhead * (2 * grid / slots - waves(1)) and save at most the idle tail of the last
  // wave, key_blocks * (waves(1) - grid / slots). Whenever the tail cannot pay for the extra
  // overhead the answer must be 1; at >= 8 waves that covers every short or well-filled grid.
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const SplitHeuristicConstants c;
  int checked = 0, tried = 0;
  while (checked < 3000 && ++tried < 1000000) {
    const int64_t d = rng() % 2 ? 64 : 128;
    const int sm_count = 16 + static_cast<int>(rng() % 160);
    AttnProblem p = shape(1 + rng() % 16, 1 + rng() % 64, 1 + rng() % 16384,
                          1 + rng() % 262144, d);
    if (rng() % 2) {  // decode on the narrow tile: a GQA group of <= 16 heads per k/v head
      p.b = 1 + rng() % 64;
      p.hk = 1 + rng() % 64;
      p.h = p.hk * (int64_t{1} << (rng() % 5));
      p.sq = 1;
    }
    const TileConfig tiles = tiles_for(p);
    const double slots = slots_of(tiles, sm_count, c);
    const double fill = static_cast<double>(grid_blocks(p, tiles)) / slots;
    if (fill < 8.0) continue;
    const double waves = std::ceil(fill);
    const double kb = static_cast<double>(key_blocks(p, tiles));
    if (kb * (waves - fill) > c.block_overhead * (2.0 * fill - waves) + c.split_latency) continue;
    ASSERT_EQ(choose_num_splits(p, nvidia(sm_count), tiles), 1) << describe(p, sm_count);
    ++checked;
  }
  EXPECT_EQ(checked, 3000) << "too few grids of >= 8 waves were drawn";
}

TEST(SplitHeuristic, SplitsTinyGridsWithLongKeys) {
  // b=1, h=16, sq=128: 16 blocks on a 132-SM GPU walking 65535 keys each.
  for (int64_t d : {64, 128}) {
    AttnProblem p = shape(1, 16, 128, 65535, d);
    EXPECT_GT(choose_num_splits(p, nvidia(132), tiles_for(p)), 1) << describe(p, 132);
  }
  // GQA decode: 8..64 narrow blocks, 4096 key blocks of 32 keys each.
  for (int64_t b = 1; b <= 8; ++b) {
    AttnProblem p = shape(b, 32, 8, 1, 131072, 128);
    const TileConfig tiles = tiles_for(p);
    ASSERT_LE(tiles.block_m, kNarrowMaxRows) << "decode runs the narrow tile";
    EXPECT_GT(choose_num_splits(p, nvidia(132), tiles), 1) << describe(p, 132);
  }
}

TEST(SplitHeuristic, NeverExceedsKeyBlocksOrMaxSplits) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    const int64_t d = rng() % 2 ? 64 : 128;
    const int sm_count = 1 + static_cast<int>(rng() % 200);
    SplitHeuristicConstants constants;
    constants.max_splits = 1 + static_cast<int>(rng() % 200);
    constants.min_key_blocks_per_split = 1 + static_cast<int>(rng() % 4);
    // Cheap splits push G up against the bounds.
    constants.block_overhead = (rng() % 5) * 4.0;
    constants.split_latency = (rng() % 3) * 0.25;
    AttnProblem p = shape(1 + rng() % 4, 1 + rng() % 32, 1 + rng() % 512, 1 + rng() % 100000, d);
    const TileConfig tiles = tiles_for(p);
    const int g = choose_num_splits(p, nvidia(sm_count), tiles, constants);
    ASSERT_GE(g, 1);
    ASSERT_LE(g, constants.max_splits) << describe(p, sm_count);
    ASSERT_LE(g, key_blocks(p, tiles)) << describe(p, sm_count);
    if (g > 1) {
      ASSERT_GE(key_blocks(p, tiles), static_cast<int64_t>(g) * constants.min_key_blocks_per_split)
          << "every split walks at least min_key_blocks_per_split blocks; " << describe(p, sm_count);
    }
  }
}

TEST(SplitHeuristic, MatchesABruteForceOfTheCostFormula) {
  int compared = 0, split = 0;
  for (int sm_count : {1, 8, 78, 108, 114, 132, 170}) {
    for (int64_t d : {64, 128}) {
      for (int64_t b : {1, 2, 4, 8}) {
        for (const auto& heads : {std::pair<int64_t, int64_t>{16, 16}, {32, 8}, {8, 1}}) {
          for (int64_t sq : {1, 2, 16, 64, 128, 129, 256, 1024, 4096}) {
            for (int64_t sk : {1, 63, 64, 65, 200, 512, 2048, 8191, 32768, 65535, 131072}) {
              AttnProblem p = shape(b, heads.first, heads.second, sq, sk, d);
              for (const TileConfig& tiles : {tiles_for(p), hopper_tile_config(static_cast<int>(d), sq)}) {
                const int expected =
                    brute_force_num_splits(p, tiles, sm_count, default_quarter_constants());
                ASSERT_EQ(choose_num_splits(p, nvidia(sm_count), tiles), expected)
                    << describe(p, sm_count) << " packs_heads " << tiles.packs_heads;
                ++compared;
                split += expected > 1;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(split, compared / 10) << "the sweep must exercise splitting, not only G = 1";
}

TEST(SplitHeuristic, MatchesABruteForceWithRandomConstants) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 5000; ++i) {
    QuarterConstants q;
    q.half_slots_per_sm_wide = 1 + rng() % 6;    // 0.5 .. 3
    q.half_slots_per_sm_narrow = 1 + rng() % 12;  // 0.5 .. 6
    q.quarter_block_overhead = rng() % 161;        // 0 .. 40
    q.quarter_block_overhead_hopper = rng() % 161;  // 0 .. 40
    q.quarter_split_latency = rng() % 17;          // 0 .. 4
    q.quarter_combine_cost = rng() % 65;           // 0 .. 16
    q.min_gain_percent = rng() % 21;               // 0 .. 20 %
    q.max_splits = 1 + rng() % 200;
    q.min_key_blocks_per_split = 1 + rng() % 4;
    const int64_t d = rng() % 2 ? 64 : 128;
    const int sm_count = 1 + static_cast<int>(rng() % 200);
    const int64_t group = int64_t{1} << (rng() % 5);
    const int64_t hk = 1 + rng() % 16;
    AttnProblem p = shape(1 + rng() % 8, hk * group, hk, rng() % 3 ? 1 + rng() % 2048 : 1,
                          1 + rng() % 200000, d);
    const TileConfig tiles = rng() % 2 ? tiles_for(p) : hopper_tile_config(static_cast<int>(d), p.sq);
    ASSERT_EQ(choose_num_splits(p, nvidia(sm_count), tiles, q.to_double()),
              brute_force_num_splits(p, tiles, sm_count, q))
        << describe(p, sm_count) << " wide " << q.half_slots_per_sm_wide / 2.0 << " narrow "
        << q.half_slots_per_sm_narrow / 2.0 << " overhead " << q.quarter_block_overhead / 4.0
        << " hopper overhead " << q.quarter_block_overhead_hopper / 4.0 << " latency "
        << q.quarter_split_latency / 4.0 << " combine " << q.quarter_combine_cost / 4.0
        << " min gain " << q.min_gain_percent << "% max " << q.max_splits
        << " min blocks " << q.min_key_blocks_per_split;
  }
}

TEST(SplitHeuristic, HugeSplitLatencyForbidsSplitting) {
  SplitHeuristicConstants c;
  c.split_latency = 1e12;
  for (int64_t d : {64, 128}) {
    AttnProblem p = shape(1, 16, 128, 65535, d);
    ASSERT_GT(choose_num_splits(p, nvidia(132), tiles_for(p)), 1) << "splits by default";
    EXPECT_EQ(choose_num_splits(p, nvidia(132), tiles_for(p), c), 1) << describe(p, 132);
  }
  AttnProblem decode = shape(4, 32, 8, 1, 131072, 128);
  EXPECT_EQ(choose_num_splits(decode, nvidia(132), tiles_for(decode), c), 1);
}

TEST(SplitHeuristic, WithoutOverheadOrLatencyMinimisesWavesTimesBlocksPerSplit) {
  SplitHeuristicConstants c;
  c.block_overhead = 0.0;
  c.split_latency = 0.0;
  c.combine_cost = 0.0;
  c.min_gain = 0.0;
  const AttnProblem problems[] = {shape(1, 16, 128, 65535, 64), shape(1, 3, 100, 20000, 128),
                                  shape(2, 32, 8, 1, 131072, 128), shape(1, 8, 1, 1, 9000, 64)};
  for (const AttnProblem& p : problems) {
    for (int sm_count : {20, 78, 132}) {
      const TileConfig tiles = tiles_for(p);
      const double slots = slots_of(tiles, sm_count, c);
      const int64_t kb = key_blocks(p, tiles), grid = grid_blocks(p, tiles);
      ASSERT_LT(static_cast<double>(grid), slots) << "a tiny grid: " << describe(p, sm_count);
      int64_t best_g = 1;
      double best = -1.0;
      for (int64_t g = 1; g <= std::min<int64_t>(kb, c.max_splits); ++g) {
        const double work =
            std::ceil(static_cast<double>(grid * g) / slots) * static_cast<double>((kb + g - 1) / g);
        if (best < 0 || work < best) best_g = g, best = work;
      }
      EXPECT_EQ(choose_num_splits(p, nvidia(sm_count), tiles, c), best_g) << describe(p, sm_count);
      // With nothing charged for a split, it is worth more than the default's choice.
      EXPECT_GE(best_g, choose_num_splits(p, nvidia(sm_count), tiles)) << describe(p, sm_count);
    }
  }
}

TEST(SplitHeuristic, CombineCostMinGainAndHopperOverheadAreUsed) {
  AttnProblem prefill = shape(1, 16, 128, 65535, 64);
  const TileConfig hopper = hopper_tile_config(64, prefill.sq), portable = tiles_for(prefill);
  ASSERT_GT(choose_num_splits(prefill, nvidia(132), hopper), 1) << "splits by default";
  SplitHeuristicConstants costly_combine, greedy_gain;
  costly_combine.combine_cost = 1e9;
  greedy_gain.min_gain = 0.99;  // a split would have to be 100x faster
  EXPECT_EQ(choose_num_splits(prefill, nvidia(132), hopper, costly_combine), 1);
  EXPECT_EQ(choose_num_splits(prefill, nvidia(132), portable, greedy_gain), 1);
  // The Hopper overhead moves only Hopper tiles (somewhere in a sweep), never portable ones.
  SplitHeuristicConstants light_hopper;
  light_hopper.block_overhead_hopper = 0.0;
  int hopper_moved = 0, portable_moved = 0;
  for (int64_t b : {1, 2, 4, 8}) {
    for (int64_t sq : {64, 128, 256, 1024}) {
      for (int64_t sk : {4096, 16384, 65536}) {
        AttnProblem p = shape(b, 16, sq, sk, 128);
        const TileConfig h = hopper_tile_config(128, sq), t = tiles_for(p);
        hopper_moved += choose_num_splits(p, nvidia(132), h, light_hopper) !=
                        choose_num_splits(p, nvidia(132), h);
        portable_moved += choose_num_splits(p, nvidia(132), t, light_hopper) !=
                          choose_num_splits(p, nvidia(132), t);
      }
    }
  }
  EXPECT_GT(hopper_moved, 0);
  EXPECT_EQ(portable_moved, 0);
}

TEST(SplitHeuristic, SlotsPerSmAndCapsAreUsed) {
  // The narrow slots only move narrow (decode) grids, the wide slots only wide ones.
  AttnProblem decode = shape(8, 32, 8, 1, 131072, 128), prefill = shape(1, 16, 128, 65535, 64);
  SplitHeuristicConstants more_narrow, more_wide;
  more_narrow.slots_per_sm_narrow = 8.0;
  more_wide.slots_per_sm_wide = 4.0;
  const int decode_g = choose_num_splits(decode, nvidia(132), tiles_for(decode));
  const int prefill_g = choose_num_splits(prefill, nvidia(132), tiles_for(prefill));
  EXPECT_GT(choose_num_splits(decode, nvidia(132), tiles_for(decode), more_narrow), decode_g);
  EXPECT_EQ(choose_num_splits(decode, nvidia(132), tiles_for(decode), more_wide), decode_g);
  EXPECT_GT(choose_num_splits(prefill, nvidia(132), tiles_for(prefill), more_wide), prefill_g);
  EXPECT_EQ(choose_num_splits(prefill, nvidia(132), tiles_for(prefill), more_narrow), prefill_g);
  // max_splits and min_key_blocks_per_split bind when they are below the free choice.
  SplitHeuristicConstants capped;
  capped.max_splits = 2;
  EXPECT_EQ(choose_num_splits(prefill, nvidia(132), tiles_for(prefill), capped), 2);
  SplitHeuristicConstants coarse;
  coarse.min_key_blocks_per_split = 512;  // 65535 keys = 1024 blocks of 64: at most 2 splits
  EXPECT_EQ(choose_num_splits(prefill, nvidia(132), tiles_for(prefill), coarse), 2);
}

TEST(SplitHeuristic, DegenerateInputsMeanNoSplit) {
  // No device, no kernel for the head dim, or a single key block.
  AttnProblem p = shape(1, 1, 1, 100000, 64);
  EXPECT_EQ(choose_num_splits(p, nvidia(0), tiles_for(p)), 1);
  p.d = 96;
  EXPECT_EQ(choose_num_splits(p, nvidia(132), tiles_for(p)), 1);
  EXPECT_EQ(choose_num_splits(p, nvidia(132), portable_tile_config(96, true)), 1);
  for (int64_t d : {64, 128}) {
    for (int64_t sq : {1, 128}) {
      AttnProblem q = shape(1, 1, sq, 1, d);
      const TileConfig tiles = tiles_for(q);
      for (int64_t sk : {int64_t{1}, int64_t{tiles.block_n} - 1, int64_t{tiles.block_n}}) {
        q.sk = sk;
        EXPECT_EQ(choose_num_splits(q, nvidia(132), tiles), 1) << describe(q, 132);
      }
      // Two key blocks do not pay for the combine; a long key range on a one-block grid does.
      q.sk = tiles.block_n + 1;
      EXPECT_EQ(choose_num_splits(q, nvidia(132), tiles), 1) << describe(q, 132);
      q.sk = int64_t{tiles.block_n} * 64;
      EXPECT_GT(choose_num_splits(q, nvidia(132), tiles), 1) << describe(q, 132);
    }
  }
}

TEST(ResolveNumSplits, ZeroAsksTheHeuristic) {
  TileConfig tiles = portable_tile_config(64);
  for (int64_t sk : {100, 5000, 65535, 200000}) {
    AttnProblem p = shape(1, 16, 128, sk, 64);
    EXPECT_EQ(resolve_num_splits(0, p, nvidia(132), tiles),
              choose_num_splits(p, nvidia(132), tiles));
  }
  EXPECT_GT(resolve_num_splits(0, shape(1, 16, 128, 65535, 64), nvidia(132), tiles), 1);
}

TEST(ResolveNumSplits, OneMeansNoSplitEvenWhereTheHeuristicWouldSplit) {
  TileConfig tiles = portable_tile_config(64);
  EXPECT_EQ(resolve_num_splits(1, shape(1, 16, 128, 65535, 64), nvidia(132), tiles), 1);
}

TEST(ResolveNumSplits, ForcedCountIsClampedToKeyBlocks) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 5000; ++i) {
    int d = rng() % 2 ? 64 : 128;
    TileConfig tiles = portable_tile_config(d);
    AttnProblem p = shape(1 + rng() % 8, 1 + rng() % 32, 1 + rng() % 8192, 1 + rng() % 20000, d);
    int requested = 2 + static_cast<int>(rng() % 300);
    int64_t expected = std::min<int64_t>(requested, key_blocks(p, tiles));
    // Forcing ignores how full the grid is: it is the caller's explicit choice.
    ASSERT_EQ(resolve_num_splits(requested, p, nvidia(132), tiles), expected)
        << "requested " << requested << " sk=" << p.sk << " d=" << d;
  }
  // A single key block leaves nothing to split.
  EXPECT_EQ(resolve_num_splits(2, shape(1, 1, 1, 1, 64), nvidia(132), portable_tile_config(64)), 1);
}

TEST(ResolveNumSplits, RejectsNegativeCounts) {
  TileConfig tiles = portable_tile_config(64);
  EXPECT_THROW(resolve_num_splits(-1, shape(1, 1, 1, 1000, 64), nvidia(132), tiles),
               std::invalid_argument);
}

}  // namespace
}  // namespace flashsplit
