// The plan cache gives make_launch_plan's plan for every call, from the cache or not.
#include "core/plan_cache.h"

#include <gtest/gtest.h>

#include "test_devices.h"

namespace flashsplit {
namespace {

using testing::h100;
using testing::hopper_build;
using testing::hopper_build_every_head_dim;

AttnProblem decode(int64_t b, int64_t sk) {
  AttnProblem p;
  p.b = b, p.sq = 1, p.sk = sk, p.h = 32, p.hk = 8, p.d = 128;
  return p;
}

void expect_same_plan(const LaunchPlan& got, const LaunchPlan& want) {
  EXPECT_EQ(got.gate.ok, want.gate.ok);
  EXPECT_EQ(got.gate.family, want.gate.family);
  EXPECT_EQ(got.gate.reason, want.gate.reason);
  EXPECT_EQ(got.num_splits, want.num_splits);
  EXPECT_EQ(got.tiles.block_m, want.tiles.block_m);
  EXPECT_EQ(got.tiles.block_n, want.tiles.block_n);
  EXPECT_EQ(got.sequences, want.sequences);
  EXPECT_EQ(got.paged, want.paged);
  EXPECT_EQ(got.forward_grid.blocks(), want.forward_grid.blocks());
  EXPECT_EQ(got.combine_grid.blocks(), want.combine_grid.blocks());
  EXPECT_EQ(got.combine_lanes, want.combine_lanes);
}

TEST(PlanCache, HitsAndMissesGiveTheFreshPlan) {
  PlanCache cache(hopper_build());
  PlanOptions options;
  for (int round = 0; round < 2; ++round) {  // the second round is served from the cache
    for (int64_t sk : {512, 8192, 131072}) {
      for (long long requested : {0LL, 1LL, 5LL}) {
        const AttnProblem p = decode(4, sk);
        expect_same_plan(cache.plan(p, h100(), 0, options, requested),
                         make_launch_plan(p, h100(), hopper_build(), options, requested));
      }
    }
  }
  EXPECT_EQ(cache.size(), 9u);
}

TEST(PlanCache, EveryInputOfThePlanIsPartOfItsKey) {
  PlanCache cache(hopper_build());
  PlanOptions options;
  const AttnProblem base = decode(1, 65536);
  const LaunchPlan first = cache.plan(base, h100(), 0, options, 0);
  AttnProblem causal = base;
  causal.causal = true, causal.sq = 4096;
  AttnProblem paged = base;
  paged.page_size = 16;
  AttnProblem on_cpu = base;
  on_cpu.on_gpu = false;
  AttnProblem dropout = base;
  dropout.dropout_p = 0.1;
  for (const AttnProblem& p : {causal, paged, on_cpu, dropout}) {
    expect_same_plan(cache.plan(p, h100(), 0, options, 0),
                     make_launch_plan(p, h100(), hopper_build(), options, 0));
  }
  PlanOptions no_hopper;
  no_hopper.gate.allow_hopper = false;
  expect_same_plan(cache.plan(causal, h100(), 0, no_hopper, 0),
                   make_launch_plan(causal, h100(), hopper_build(), no_hopper, 0));
  EXPECT_EQ(cache.size(), 6u);
  expect_same_plan(cache.plan(base, h100(), 0, options, 0), first);
  EXPECT_EQ(cache.size(), 6u);
}

TEST(PlanCache, VHeadDimIsPartOfTheKey) {
  const BuildInfo build = hopper_build_every_head_dim();
  PlanCache cache(build);
  AttnProblem p = decode(1, 8192);
  p.sq = 8192, p.h = p.hk = 8, p.d = 192;
  const LaunchPlan same_v = cache.plan(p, h100(), 0, PlanOptions{}, 1);
  p.dv = 128;  // v of 128: tiles of their own
  const LaunchPlan narrow_v = cache.plan(p, h100(), 0, PlanOptions{}, 1);
  EXPECT_EQ(same_v.tiles.block_n, 112);
  EXPECT_EQ(narrow_v.tiles.block_n, 128);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(PlanCache, StartsOverWhenFull) {
  PlanCache cache(hopper_build(), 4);
  for (int64_t b = 1; b <= 9; ++b) cache.plan(decode(b, 4096), h100(), 0, PlanOptions{}, 0);
  EXPECT_LE(cache.size(), 4u);
  EXPECT_GE(cache.size(), 1u);
}

}  // namespace
}  // namespace flashsplit
