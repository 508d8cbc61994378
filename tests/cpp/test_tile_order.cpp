// The grouped tile order of causal Hopper launches (core/tile_order.h): every tile once, each
// group's tiles longest first, and the group sizes the launcher picks.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tile_order.h"

namespace flashsplit {
namespace {

TEST(TileOrder, GroupsHoldUpTo32MBOfKeysAndValues) {
  constexpr long long kMB = 1 << 20;
  // bench_seqlen's causal points: d=64 at 1024 keys (256 KB a unit), d=128 at 4096 (2 MB).
  EXPECT_EQ(causal_tile_group(512, 256 * 1024), 128);
  EXPECT_EQ(causal_tile_group(64, 2 * kMB), 16);
  EXPECT_EQ(causal_tile_group(100, 1024), 100) << "at most every unit";
  EXPECT_EQ(causal_tile_group(100, 64 * kMB), 1) << "at least one unit";
  EXPECT_EQ(causal_tile_group(7, 0), 7);
}

TEST(TileOrder, LongestFirstTimeOfCausalTiles) {
  // One unit of 4 query tiles of 128 rows over 512 keys: tiles walk 1, 2, 3 and 4 key blocks of
  // 128 (128 rows each at 100%: 128 per block).
  EXPECT_DOUBLE_EQ(causal_longest_first_time(1, 512, 512, 128, 128, 100, 1), 128.0 * 10);
  EXPECT_DOUBLE_EQ(causal_longest_first_time(1, 512, 512, 128, 128, 100, 4), 128.0 * 4);
  // Two SMs: 4 to the first, 3 to the second, then 2 to the second and 1 to the first.
  EXPECT_DOUBLE_EQ(causal_longest_first_time(1, 512, 512, 128, 128, 100, 2), 128.0 * 5);
  // Bottom-right aligned: 128 queries against 512 keys walk all 4 blocks; rows at 93%.
  EXPECT_DOUBLE_EQ(causal_longest_first_time(3, 128, 512, 128, 128, 93, 2), 2 * 128 * 0.93 * 4);
  // Blocks of 144 keys: 512 keys walk 4 of them (576 keys).
  EXPECT_DOUBLE_EQ(causal_longest_first_time(1, 128, 512, 128, 144, 100, 1), 576.0);
  // Past kCausalModelMaxTiles tiles, the total over the SMs.
  const long long units = kCausalModelMaxTiles;  // x 2 query tiles
  EXPECT_DOUBLE_EQ(causal_longest_first_time(units, 256, 256, 128, 128, 100, 128),
                   units * 128.0 * 3 / 128);
}

TEST(TileOrder, StaticWalkTimeOfCausalTiles) {
  // Two heads of 3 query tiles (3, 2 and 1 key blocks, longest first) on 4 blocks: round 0
  // gives blocks 0-3 the tiles of 3, 2, 1 and 3 blocks, the part-full odd round runs backwards
  // over its two tiles (2 to block 1, 1 to block 0): blocks 0 and 1 do 4 blocks' work, where
  // longest first ends after 3.
  EXPECT_DOUBLE_EQ(causal_static_walk_time(2, 384, 384, 128, 128, 4), 128.0 * 4);
  EXPECT_DOUBLE_EQ(causal_longest_first_time(2, 384, 384, 128, 128, 100, 4), 128.0 * 3);
  // One round: every block one tile, the longest sets the time, as longest first.
  EXPECT_DOUBLE_EQ(causal_static_walk_time(3, 512, 512, 128, 128, 132),
                   causal_longest_first_time(3, 512, 512, 128, 128, 100, 132));
  // On 132 blocks: 128 heads of 16 query tiles end within 4% of longest first; 80 heads of 20
  // (2500 rows) pair long tiles with long ones and 16 heads of 32 give some blocks more long
  // tiles than others, 20-30% after it.
  const auto ratio = [](long long units, long long s) {
    return causal_static_walk_time(units, s, s, 128, 128, 132) /
           causal_longest_first_time(units, s, s, 128, 128, 100, 132);
  };
  EXPECT_LT(ratio(128, 2048), 1.04);
  EXPECT_GT(ratio(80, 2500), 1.2);
  EXPECT_GT(ratio(16, 4096), 1.2);
  EXPECT_LT(ratio(80, 2500), 1.3);
  EXPECT_LT(ratio(16, 4096), 1.3);
}

TEST(TileOrder, GroupsAreAsEvenAsTheyGo) {
  constexpr long long kMB = 1 << 20;
  // 128 units of which 127 fit a group: two groups of 64, not 127 and 1.
  EXPECT_EQ(causal_tile_group(128, 32 * kMB / 127), 64);
  // 32 units of which 15 fit: three groups of 11, 11 and 10.
  EXPECT_EQ(causal_tile_group(32, 32 * kMB / 15), 11);
  EXPECT_EQ(causal_tile_group(5, 32 * kMB / 2), 2);
}

TEST(TileOrder, AUnitsKeysAndValuesAreItsShareOfItsKvHead) {
  // K and V of 1024 keys at d=64 in bf16: 256 KB; at d=128 over 4096 keys: 2 MB.
  EXPECT_EQ(causal_unit_kv_bytes(1024, 64, 2, 1, 1), 256 * 1024);
  EXPECT_EQ(causal_unit_kv_bytes(4096, 128, 2, 1, 1), 2 << 20);
  EXPECT_EQ(causal_unit_kv_bytes(4096, 128, 2, 4, 1), 512 * 1024) << "a split's share";
  EXPECT_EQ(causal_unit_kv_bytes(4096, 128, 2, 1, 8), 256 * 1024) << "shared by a GQA group";
  EXPECT_EQ(causal_tile_group(512, causal_unit_kv_bytes(1024, 64, 2, 1, 1)), 128);
}

TEST(TileOrder, GroupedTilesVisitEveryTileOnceLongestFirstWithinAGroup) {
  // (units, query tiles per unit, units per group): groups that divide the units and groups
  // that leave a smaller last one.
  for (const auto& [units, m_blocks, group] : std::vector<std::tuple<int, int, int>>{
           {1024, 2, 128}, {512, 4, 64}, {256, 11, 32}, {128, 22, 16}, {96, 11, 16},
           {34, 9, 16}, {17, 5, 4}, {5, 3, 8}, {1, 7, 1}, {40, 6, 40}}) {
    const TileGroups groups = make_tile_groups(units, m_blocks, group);
    std::set<std::pair<int, int>> seen;
    int previous_x = -1, previous_group = -1;
    for (int tile = 0; tile < units * m_blocks; ++tile) {
      const GroupedTile t = grouped_tile(tile, groups);
      ASSERT_GE(t.unit, 0);
      ASSERT_LT(t.unit, units) << "tile " << tile << " of " << units << "x" << m_blocks;
      ASSERT_GE(t.x, 0);
      ASSERT_LT(t.x, m_blocks);
      ASSERT_TRUE(seen.insert({t.unit, t.x}).second) << "tile " << tile << " repeats";
      // Within a group the query tiles come longest first (x never decreases); a new group
      // starts again at x = 0.
      const int g = t.unit / group;
      if (g == previous_group) {
        ASSERT_GE(t.x, previous_x) << "tile " << tile;
      } else {
        ASSERT_EQ(t.x, 0) << "tile " << tile;
      }
      previous_group = g;
      previous_x = t.x;
    }
    EXPECT_EQ(static_cast<int>(seen.size()), units * m_blocks);
  }
}

TEST(TileOrder, GroupOfOneIsTheHeadMajorOrder) {
  const int m_blocks = 6;
  const TileGroups groups = make_tile_groups(40, m_blocks, 1);
  for (int tile = 0; tile < 40 * m_blocks; ++tile) {
    const GroupedTile t = grouped_tile(tile, groups);
    EXPECT_EQ(t.unit, tile / m_blocks);
    EXPECT_EQ(t.x, tile % m_blocks);
  }
}

}  // namespace
}  // namespace flashsplit
