// The grouped tile order of causal Hopper launches (core/tile_order.h): every tile once, each
// group's tiles longest first, and the group sizes the launcher picks.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "core/tile_order.h"

namespace flashsplit {
namespace {

TEST(TileOrder, GroupIsTheLargestDivisorUpToSixteen) {
  EXPECT_EQ(causal_tile_group(1024), 16);  // bench_seqlen's grids: powers of two
  EXPECT_EQ(causal_tile_group(96), 16);
  EXPECT_EQ(causal_tile_group(45), 15);
  EXPECT_EQ(causal_tile_group(34), 2);
  EXPECT_EQ(causal_tile_group(33), 11);
  EXPECT_EQ(causal_tile_group(17), 1);  // a prime above 16: the head-major order
  EXPECT_EQ(causal_tile_group(1), 1);
}

TEST(TileOrder, GroupedTilesVisitEveryTileOnceLongestFirstWithinAGroup) {
  for (const auto& [units, m_blocks] : std::vector<std::pair<int, int>>{
           {1024, 2}, {512, 4}, {256, 11}, {128, 22}, {96, 11}, {34, 9}, {17, 5}, {1, 7}}) {
    const int g = causal_tile_group(units);
    const FastDivmod by_group_tiles(g * m_blocks), by_group_units(g);
    std::set<std::pair<int, int>> seen;
    int previous_x = -1, previous_group = -1;
    for (int tile = 0; tile < units * m_blocks; ++tile) {
      const GroupedTile t = grouped_tile(tile, by_group_tiles, by_group_units);
      ASSERT_GE(t.unit, 0);
      ASSERT_LT(t.unit, units);
      ASSERT_GE(t.x, 0);
      ASSERT_LT(t.x, m_blocks);
      ASSERT_TRUE(seen.insert({t.unit, t.x}).second) << "tile " << tile << " repeats";
      // Within a group the query tiles come longest first (x never decreases); a new group
      // starts again at x = 0.
      const int group = t.unit / g;
      if (group == previous_group) {
        ASSERT_GE(t.x, previous_x) << "tile " << tile;
      } else {
        ASSERT_EQ(t.x, 0) << "tile " << tile;
      }
      previous_group = group;
      previous_x = t.x;
    }
    EXPECT_EQ(static_cast<int>(seen.size()), units * m_blocks);
  }
}

TEST(TileOrder, GroupOfOneIsTheHeadMajorOrder) {
  const int m_blocks = 6;
  const FastDivmod by_group_tiles(m_blocks), by_group_units(1);
  for (int tile = 0; tile < 40 * m_blocks; ++tile) {
    const GroupedTile t = grouped_tile(tile, by_group_tiles, by_group_units);
    EXPECT_EQ(t.unit, tile / m_blocks);
    EXPECT_EQ(t.x, tile % m_blocks);
  }
}

}  // namespace
}  // namespace flashsplit
