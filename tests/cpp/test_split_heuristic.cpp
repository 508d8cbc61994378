// Properties of the split-count heuristic: no split on grids that fill the GPU, more splits as
// the key length grows on a tiny grid, hard bounds, and resolve_num_splits' semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>

#include "split_heuristic.h"

namespace flashsplit {
namespace {

DeviceInfo nvidia(int sm_count) { return DeviceInfo{Vendor::kNvidia, 90, sm_count, 227 * 1024}; }

AttnProblem shape(int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d) {
  AttnProblem p;
  p.b = b; p.h = h; p.hk = h; p.sq = sq; p.sk = sk; p.d = d;
  return p;
}

// Blocks of the forward grid: one per (batch, k/v head, tile of packed rows).
int64_t grid_blocks(const AttnProblem& p, const TileConfig& t) {
  return p.b * p.hk * ((packed_rows(p.sq, p.h, p.hk) + t.block_m - 1) / t.block_m);
}

int64_t key_blocks(const AttnProblem& p, const TileConfig& t) {
  return (p.sk + t.block_n - 1) / t.block_n;
}

// Fresh inputs every run; the seed is printed on failure so a run can be replayed.
uint32_t fresh_seed() { return std::random_device{}(); }

TEST(SplitHeuristic, NoSplitOnReferenceShapesThatFillTheGpu) {
  const int64_t shapes[][5] = {{1, 2, 40000, 40000, 64},   {1, 8, 32768, 32768, 64},
                               {8, 16, 8192, 8192, 64},    {8, 32, 1, 131072, 128},
                               {4, 32, 4096, 4096, 128},   {2, 16, 1024, 65536, 128},
                               {32, 16, 512, 512, 64},     {1, 64, 2048, 100000, 64}};
  for (const auto& s : shapes) {
    AttnProblem p = shape(s[0], s[1], s[2], s[3], s[4]);
    EXPECT_EQ(choose_num_splits(p, nvidia(132), portable_tile_config(static_cast<int>(p.d))), 1)
        << "b=" << s[0] << " h=" << s[1] << " sq=" << s[2] << " sk=" << s[3] << " d=" << s[4];
  }
}

TEST(SplitHeuristic, NoSplitOnRandomSaturatedGrids) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const SplitHeuristicConstants constants;
  int checked = 0;
  while (checked < 2000) {
    int d = rng() % 2 ? 64 : 128;
    TileConfig tiles = portable_tile_config(d);
    int sm_count = 16 + static_cast<int>(rng() % 160);
    AttnProblem p = shape(1 + rng() % 16, 1 + rng() % 64, 1 + rng() % 16384,
                          1 + rng() % 262144, d);
    double slots = static_cast<double>(sm_count) * tiles.blocks_per_sm;
    if (static_cast<double>(grid_blocks(p, tiles)) < constants.fill_fraction * slots) continue;
    ASSERT_EQ(choose_num_splits(p, nvidia(sm_count), tiles), 1)
        << "b=" << p.b << " h=" << p.h << " sq=" << p.sq << " sk=" << p.sk << " d=" << d
        << " sms=" << sm_count;
    ++checked;
  }
}

TEST(SplitHeuristic, SplitsTheLongKeyDecodeShapeFromTheDesign) {
  // b=1, h=16, sq=128: a handful of blocks on a 132-SM GPU walking 65535 keys each.
  for (int d : {64, 128}) {
    AttnProblem p = shape(1, 16, 128, 65535, d);
    TileConfig tiles = portable_tile_config(d);
    int g = choose_num_splits(p, nvidia(132), tiles);
    EXPECT_GT(g, 1) << "d=" << d;
    // The split grid then fills at least 85% of whole waves of the GPU's slots.
    const int64_t slots = 132 * tiles.blocks_per_sm, work = grid_blocks(p, tiles) * g;
    const int64_t waves = (work + slots - 1) / slots;
    EXPECT_GE(static_cast<double>(work), 0.85 * static_cast<double>(waves * slots)) << "d=" << d;
  }
}

TEST(SplitHeuristic, GrowsWithKeyLengthOnTinyGrids) {
  for (int d : {64, 128}) {
    TileConfig tiles = portable_tile_config(d);
    for (int sm_count : {8, 78, 108, 132}) {
      for (int64_t heads : {1, 4, 16}) {
        for (int64_t sq : {1, 100, 128}) {
          int previous = 1;
          for (int64_t sk = 1; sk <= 300000; sk += 1 + sk / 16) {
            AttnProblem p = shape(1, heads, sq, sk, d);
            int g = choose_num_splits(p, nvidia(sm_count), tiles);
            ASSERT_GE(g, previous) << "d=" << d << " sms=" << sm_count << " h=" << heads
                                   << " sq=" << sq << " sk=" << sk;
            previous = g;
          }
          if (grid_blocks(shape(1, heads, sq, 1, d), tiles) * 2 <=
              static_cast<int64_t>(sm_count) * tiles.blocks_per_sm) {
            EXPECT_GT(previous, 1) << "a grid below half a wave must split at sk=300000";
          }
        }
      }
    }
  }
}

TEST(SplitHeuristic, NeverExceedsItsBounds) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    int d = rng() % 2 ? 64 : 128;
    TileConfig tiles = portable_tile_config(d);
    int sm_count = 1 + static_cast<int>(rng() % 200);
    SplitHeuristicConstants constants;
    constants.max_splits = 1 + static_cast<int>(rng() % 200);
    constants.min_key_blocks_per_split = 1 + static_cast<int>(rng() % 4);
    AttnProblem p = shape(1 + rng() % 4, 1 + rng() % 32, 1 + rng() % 512, 1 + rng() % 100000, d);
    int g = choose_num_splits(p, nvidia(sm_count), tiles, constants);
    ASSERT_GE(g, 1);
    ASSERT_LE(g, constants.max_splits);
    ASSERT_LE(g, key_blocks(p, tiles));
    ASSERT_LE(g, static_cast<int64_t>(sm_count) * tiles.blocks_per_sm);
    if (g > 1) {
      ASSERT_GE(key_blocks(p, tiles), static_cast<int64_t>(g) * constants.min_key_blocks_per_split)
          << "every split walks at least min_key_blocks_per_split blocks";
    }
  }
}

TEST(SplitHeuristic, NoSplitWhenTheKeysFitInTooFewBlocks) {
  for (int d : {64, 128}) {
    TileConfig tiles = portable_tile_config(d);
    const int64_t n = tiles.block_n;
    for (int64_t sk : {int64_t{1}, n - 1, n, n + 1, 2 * n - 1, 2 * n}) {  // 1 or 2 key blocks
      EXPECT_EQ(choose_num_splits(shape(1, 1, 1, sk, d), nvidia(132), tiles), 1) << sk;
    }
    EXPECT_GT(choose_num_splits(shape(1, 1, 1, 4 * n, d), nvidia(132), tiles), 1);
  }
}

TEST(SplitHeuristic, NoKernelOrNoDeviceMeansNoSplit) {
  AttnProblem p = shape(1, 1, 1, 100000, 96);
  EXPECT_EQ(choose_num_splits(p, nvidia(132), portable_tile_config(96)), 1);
  p.d = 64;
  EXPECT_EQ(choose_num_splits(p, nvidia(0), portable_tile_config(64)), 1);
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
