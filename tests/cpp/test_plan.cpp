// The plan: one value holds every launch decision of a call, made from the rules it applies.
// These tests check that the plan's fields are those rules' answers and that its grids count
// exactly the tiles the kernels walk.
#include <gtest/gtest.h>

#include "core/combine_math.h"
#include "core/hopper_tiles.h"
#include "core/plan.h"
#include "core/portable_tiles.h"
#include "core/tile_order.h"

namespace flashsplit {
namespace {

DeviceInfo h100() { return DeviceInfo{Vendor::kNvidia, 90, 132, 227 * 1024}; }
BuildInfo hopper_build() { return BuildInfo{true, {80, 90}, {64, 128}, true}; }

AttnProblem problem(int64_t b, int64_t h, int64_t hk, int64_t sq, int64_t sk, int64_t d,
                    bool causal) {
  AttnProblem p;
  p.b = b; p.h = h; p.hk = hk; p.sq = sq; p.sk = sk; p.d = d; p.causal = causal;
  return p;
}

LaunchPlan plan_of(const AttnProblem& p, long long requested = 0, PlanOptions options = {}) {
  return make_launch_plan(p, h100(), hopper_build(), options, requested);
}

TEST(Plan, RefusedCallsPlanNothing) {
  AttnProblem p = problem(1, 4, 4, 64, 64, 64, false);
  p.on_gpu = false;
  const LaunchPlan plan = plan_of(p);
  EXPECT_FALSE(plan.gate.ok);
  EXPECT_EQ(plan.num_splits, 1);
  EXPECT_EQ(plan.tiles.block_m, 0);
  EXPECT_EQ(plan.forward_grid.x, 0);
  EXPECT_EQ(plan.combine_grid.x, 0);
}

TEST(Plan, HopperFieldsAreTheRulesAnswers) {
  for (bool causal : {false, true}) {
    for (int64_t d : {64, 128}) {
      for (int64_t s : {512, 2048, 4096, 8192}) {
        const AttnProblem p = problem(16384 / s, 2048 / d, 2048 / d, s, s, d, causal);
        for (long long requested : {0LL, 1LL, 3LL}) {
          const LaunchPlan plan = plan_of(p, requested);
          ASSERT_EQ(plan.gate.family, KernelFamily::kHopperWgmma);
          const int g = plan.num_splits;
          EXPECT_EQ(g, resolve_splits_for(plan.gate.family, p, h100(), static_cast<int>(requested)));
          const TileConfig tiles = tiles_for_run(plan.gate.family, p, 132, g);
          EXPECT_EQ(plan.tiles.block_m, tiles.block_m);
          EXPECT_EQ(plan.tiles.block_n, tiles.block_n);
          EXPECT_EQ(plan.persistent, hopper_persistent(p.sk));
          EXPECT_EQ(plan.carry, carry_across_tiles_for_run(plan.gate.family, p, tiles));
          EXPECT_EQ(plan.rotate_rounds, rotates_rounds_for_run(plan.gate.family, p, tiles, g));
          EXPECT_EQ(plan.tile_counter, draws_tiles_from_counter(plan.gate.family, p, tiles));
          const TailSplit tail = tail_split_for_run(plan.gate.family, p, tiles, 132, g);
          EXPECT_EQ(plan.tail.tail_tiles, tail.tail_tiles);
          EXPECT_EQ(plan.tail.main_tiles, tail.main_tiles);
          // The grid: every tile (or, with a tail split, the main ones) once, one block per SM
          // at most when persistent.
          const long long tiles_total = plan.tiles_per_split * g;
          EXPECT_EQ(plan.tiles_per_split, p.b * p.h * ((p.sq + tiles.block_m - 1) / tiles.block_m));
          const long long main_tiles = plan.tail.active() ? plan.tail.main_tiles : tiles_total;
          EXPECT_EQ(plan.forward_grid.x, plan.persistent ? std::min(main_tiles, 132LL) : main_tiles);
          EXPECT_EQ(plan.forward_grid.y * plan.forward_grid.z, 1);
          EXPECT_EQ(plan.tail_grid.x, plan.tail.active() ? plan.tail.chunks : 0);
        }
      }
    }
  }
}

TEST(Plan, TheTailSplitCanBeSwitchedOff) {
  const AttnProblem p = problem(4, 16, 16, 4096, 4096, 128, false);
  ASSERT_TRUE(plan_of(p).tail.active());
  PlanOptions off;
  off.allow_tail_split = false;
  const LaunchPlan plan = plan_of(p, 0, off);
  EXPECT_FALSE(plan.tail.active());
  EXPECT_EQ(plan.forward_grid.x, 132);
  EXPECT_EQ(plan.tail_grid.x, 0);
}

TEST(Plan, CausalTilesSideBySideRunInKvGroups) {
  // 192-row causal tiles: persistent ones drawn from a counter, in groups of heads whose keys and
  // values fit kCausalGroupKvBytes; other tiles keep the head-major order.
  const AttnProblem p = problem(4, 32, 32, 4096, 4096, 64, true);
  const LaunchPlan plan = plan_of(p, 1);
  ASSERT_EQ(plan.tiles.block_m, kHopperTallRows);
  EXPECT_TRUE(plan.tile_counter);
  EXPECT_EQ(plan.tile_group,
            causal_tile_group(4 * 32, causal_unit_kv_bytes(4096, 64, 2, 1, 1)));
  EXPECT_GT(plan.tile_group, 1);
  EXPECT_EQ(plan_of(problem(4, 32, 32, 4096, 4096, 64, false), 1).tile_group, 1);
  const LaunchPlan ping_pong = plan_of(problem(16, 16, 16, 1024, 1024, 128, true), 1);
  ASSERT_EQ(ping_pong.tiles.block_m, kHopperBaseRows);
  EXPECT_EQ(ping_pong.tile_group, 1);
  EXPECT_FALSE(ping_pong.tile_counter);
}

TEST(Plan, PortableGridPacksHeadsAndSplits) {
  // Decode: 4 packed rows per k/v head run the narrow tile; G splits are the grid's y.
  const AttnProblem p = problem(8, 32, 8, 1, 16384, 128, false);
  const LaunchPlan plan = plan_of(p);
  ASSERT_EQ(plan.gate.family, KernelFamily::kPortableMma);
  EXPECT_EQ(plan.tiles.block_m, portable_tile_config(128, true).block_m);
  EXPECT_EQ(plan.forward_grid.x, 1);
  EXPECT_EQ(plan.forward_grid.y, plan.num_splits);
  EXPECT_EQ(plan.forward_grid.z, 8 * 8);
  EXPECT_FALSE(plan.persistent || plan.carry || plan.rotate_rounds || plan.tile_counter);
  EXPECT_FALSE(plan.tail.active());
}

TEST(Plan, CombineRunsOnlyForSplitsWithItsLanes) {
  const AttnProblem p = problem(1, 32, 8, 1, 65536, 128, false);
  const LaunchPlan plan = plan_of(p);
  ASSERT_GE(plan.num_splits, 2);
  EXPECT_EQ(plan.combine_lanes, combine_lanes(plan.num_splits, 128));
  const long long rows_per_block = kCombineThreads / (128 / 4 * plan.combine_lanes);
  EXPECT_EQ(plan.combine_grid.x, (32 + rows_per_block - 1) / rows_per_block);
  const LaunchPlan unsplit = plan_of(p, 1);
  EXPECT_EQ(unsplit.num_splits, 1);
  EXPECT_EQ(unsplit.combine_lanes, 0);
  EXPECT_EQ(unsplit.combine_grid.x, 0);
}

TEST(Plan, RequestedSplitsAreClampedToKeyBlocks) {
  const AttnProblem p = problem(1, 16, 16, 128, 1000, 64, false);  // 8 blocks of 128 keys
  EXPECT_EQ(plan_of(p, 1000000000000LL).num_splits, 8);
  EXPECT_EQ(plan_of(p, 5).num_splits, 5);
  EXPECT_EQ(plan_of(p, 1).num_splits, 1);
}

}  // namespace
}  // namespace flashsplit
