// The plan: one value holds every launch decision of a call, made from the rules it applies.
// These tests check that the plan's fields are those rules' answers and that its grids count
// exactly the tiles the kernels walk.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/combine_math.h"
#include "core/hopper_tiles.h"
#include "core/plan.h"
#include "core/portable_grid.h"
#include "core/portable_tiles.h"
#include "core/tile_order.h"
#include "test_devices.h"

namespace flashsplit {
namespace {

using testing::amd_build;
using testing::h100;
using testing::h200;
using testing::hopper_build;
using testing::hopper_build_every_head_dim;
using testing::mi300x;

AttnProblem problem(int64_t b, int64_t h, int64_t hk, int64_t sq, int64_t sk, int64_t d,
                    bool causal) {
  AttnProblem p;
  p.b = b; p.h = h; p.hk = hk; p.sq = sq; p.sk = sk; p.d = d; p.causal = causal;
  return p;
}

LaunchPlan plan_of(const AttnProblem& p, long long requested = 0, PlanOptions options = {}) {
  return make_launch_plan(p, h100(), hopper_build(), options, requested);
}

// The plan with the kernels of every head dim built (plan_of's build has d=64 and 128).
LaunchPlan plan_every_head_dim(const AttnProblem& p, long long requested = 0) {
  return make_launch_plan(p, h100(), hopper_build_every_head_dim(), {}, requested);
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
          const bool drawn = draws_tiles_from_counter(plan.gate.family, p, tiles, g, 132);
          EXPECT_EQ(plan.tile_counter, drawn);
          EXPECT_EQ(plan.persistent, hopper_persistent(p.sk) ||
                                         hopper_persistent_unmasked(p.causal, g, tiles.block_m,
                                                                    false) ||
                                         drawn);
          EXPECT_EQ(plan.carry, carry_across_tiles_for_run(plan.gate.family, p, tiles, drawn));
          EXPECT_EQ(plan.rotate_rounds, rotates_rounds_for_run(plan.gate.family, p, tiles, g));
          EXPECT_EQ(plan.running_max,
                    takes_running_max_for_run(plan.gate.family, p, tiles, g));
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

TEST(Plan, TallD96TilesWalk144KeyBlocksAndTheirTailSplitsToo) {
  // d=96's 192-row tiles walk 144-key blocks, and the pieces of their tail split are of those
  // blocks: 2 x 21 heads of 8192 rows are 1806 tiles, 13 rounds on 132 SMs and 90 tiles of 57
  // key blocks, which go to every SM. At 4096 rows the 1848 tiles are 14 whole rounds. Its
  // 128-row tiles keep 128-key blocks.
  const LaunchPlan tall = plan_every_head_dim(problem(2, 21, 21, 8192, 8192, 96, false), 1);
  ASSERT_EQ(tall.tiles.block_m, kHopperTallRows) << tall.gate.reason;
  EXPECT_EQ(tall.tiles.block_n, 144);
  ASSERT_TRUE(tall.tail.active());
  EXPECT_EQ(tall.tail.key_blocks, 57);
  EXPECT_EQ(tall.tail.tail_tiles, 90);
  EXPECT_EQ(tall.tail.main_tiles, 13 * 132);
  EXPECT_EQ(tall.tail_grid.x, 132);
  EXPECT_FALSE(plan_every_head_dim(problem(4, 21, 21, 4096, 4096, 96, false), 1).tail.active());
  const LaunchPlan split = plan_every_head_dim(problem(1, 4, 4, 4096, 4096, 96, false), 4);
  ASSERT_EQ(split.tiles.block_m, kHopperBaseRows);
  EXPECT_EQ(split.tiles.block_n, kHopperBlockN);
}

TEST(Plan, LargeHeadDimTilesTakeTheTailSplitWhereItPaysForTheirPieces) {
  // d=192's 128-row tiles of 112-key blocks: 2 x 10 heads of 8192 rows leave 92 of 1280 tiles
  // after 9 rounds, which go to every SM; at 4096 rows the chunks save too little for the
  // pieces. d=256's 80-key blocks from 16k rows.
  const LaunchPlan d192 = plan_every_head_dim(problem(2, 10, 10, 8192, 8192, 192, false), 1);
  ASSERT_EQ(d192.gate.family, KernelFamily::kHopperWgmma) << d192.gate.reason;
  ASSERT_EQ(d192.tiles.block_n, 112);
  EXPECT_TRUE(d192.tail.active());
  EXPECT_EQ(d192.tail.tail_tiles, 92);
  EXPECT_FALSE(plan_every_head_dim(problem(4, 10, 10, 4096, 4096, 192, false), 1).tail.active());
  const LaunchPlan d256 = plan_every_head_dim(problem(1, 8, 8, 16384, 16384, 256, false), 1);
  ASSERT_EQ(d256.tiles.block_n, 80);
  EXPECT_TRUE(d256.tail.active());
  EXPECT_FALSE(plan_every_head_dim(problem(1, 8, 8, 16384, 16384, 256, true), 1).tail.active())
      << "causal";
}

TEST(Plan, LongCausalCallsChooseTheirHeightByTheirLongestFirstTime) {
  // 21 heads of 16384 rows at d=96: handed out longest first, tall tiles, which cost less per
  // row, end 4.5% earlier in the model, more than base tiles' 3% margin.
  const AttnProblem d96 = problem(1, 21, 21, 16384, 16384, 96, true);
  ASSERT_FALSE(hopper_persistent(d96.sk));
  EXPECT_EQ(plan_every_head_dim(d96, 1).tiles.block_m, kHopperTallRows);
  // At d=128 base tiles may end up to 8% later in the model: 32 heads of 4097 rows (1056 base
  // tiles, 704 tall ones) and 16 heads of 16384 rows run base tiles, which the model has 4.5%
  // and 4.9% later; 4 heads of 12000 rows run tall ones: a head's 63 tall tiles fill two waves
  // of 132 SMs where its 94 base tiles leave a third (base modelled 15% later).
  EXPECT_EQ(hopper_causal_base_margin_pct(128, 4097), -8);
  EXPECT_EQ(plan_of(problem(1, 32, 8, 4097, 4097, 128, true), 1).tiles.block_m,
            kHopperBaseRows);
  EXPECT_EQ(plan_of(problem(1, 16, 16, 16384, 16384, 128, true), 1).tiles.block_m,
            kHopperBaseRows);
  const double base12k = causal_longest_first_time(4, 12000, 12000, kHopperBaseRows, 128, 100, 132);
  const double tall12k = causal_longest_first_time(4, 12000, 12000, kHopperTallRows, 128,
                                                   kHopperTallPctD128, 132);
  EXPECT_GT(base12k * 100, tall12k * (100 - hopper_causal_base_margin_pct(128, 12000)));
  EXPECT_EQ(plan_of(problem(1, 4, 4, 12000, 12000, 128, true), 1).tiles.block_m,
            kHopperTallRows);
  // 4 heads of 8192 rows: a head's longest tall tile (64 key blocks of 192 rows) outlasts the
  // rest of the grid, so base tiles end first; so do chunks of equal tiles that fill whole waves
  // of base tiles (1024 base tiles in 7.8 rounds against 704 tall ones in 5.3).
  EXPECT_EQ(plan_of(problem(1, 4, 4, 8192, 8192, 128, true), 1).tiles.block_m, kHopperBaseRows);
  EXPECT_EQ(plan_of(problem(1, 64, 8, 2048, 16384, 128, true), 1).tiles.block_m,
            kHopperBaseRows);
  // 34 heads of 1536 rows against 4224 keys at d=64: base tiles end 0.3% earlier in the model,
  // within their 3% margin, so the tall ones run.
  const AttnProblem close = problem(2, 17, 17, 1536, 4224, 64, true);
  const double base = causal_longest_first_time(34, 1536, 4224, kHopperBaseRows, 128, 100, 132);
  const double tall = causal_longest_first_time(34, 1536, 4224, kHopperTallRows, 128,
                                                kHopperTallPctCausalLong, 132);
  EXPECT_LT(base, tall);
  EXPECT_GT(base * 100, tall * (100 - hopper_causal_base_margin_pct(64, 4224)));
  EXPECT_EQ(plan_of(close, 1).tiles.block_m, kHopperTallRows);
}

TEST(Plan, ChunkedPrefillRunsPersistentAtAnyLength) {
  // A chunk of 1024 queries against 6000 keys (47 key blocks) runs its 128-row tiles
  // persistent, in the static walk.
  const LaunchPlan chunk = plan_of(problem(4, 40, 8, 1024, 6000, 128, true), 1);
  ASSERT_EQ(chunk.tiles.block_m, kHopperBaseRows);
  EXPECT_TRUE(chunk.persistent);
  EXPECT_FALSE(chunk.tile_counter);
  EXPECT_EQ(chunk.forward_grid.x, 132);
  EXPECT_FALSE(chunk.carry);
}

TEST(Plan, CallsWithoutTheMaskRunPersistentAtAnyLength) {
  // Tiles of equal work over more than 32 key blocks: one block per SM walks them, also where
  // a tail split takes their last round, and a split's pieces on 128-row tiles. d=64's split
  // pieces on 192-row tiles and sequences of their own lengths launch a block per tile, and long
  // causal calls do where they do not draw from the counter.
  for (int d : {64, 96, 128, 192, 256}) {
    SCOPED_TRACE("d=" + std::to_string(d));
    const AttnProblem p = problem(2, 2048 / d, 2048 / d, 8192, 8192, d, false);
    const LaunchPlan plan = plan_every_head_dim(p, 1);
    ASSERT_EQ(plan.gate.family, KernelFamily::kHopperWgmma) << plan.gate.reason;
    ASSERT_FALSE(hopper_persistent(p.sk));
    EXPECT_TRUE(plan.persistent);
    EXPECT_EQ(plan.forward_grid.x, 132);
  }
  const LaunchPlan tail = plan_of(problem(2, 16, 16, 8192, 8192, 128, false), 1);
  ASSERT_TRUE(tail.tail.active());
  EXPECT_TRUE(tail.persistent);
  EXPECT_EQ(tail.forward_grid.x, 132);
  EXPECT_EQ(tail.tail_grid.x, tail.tail.chunks);
  const LaunchPlan split = plan_of(problem(1, 3, 3, 6000, 12000, 128, false), 4);
  ASSERT_EQ(split.tiles.block_m, kHopperBaseRows);
  EXPECT_TRUE(split.persistent);
  EXPECT_EQ(split.forward_grid.x, 132);
  const LaunchPlan tall_split = plan_of(problem(1, 2, 2, 8192, 16384, 64, false), 3);
  ASSERT_EQ(tall_split.tiles.block_m, kHopperTallRows);
  EXPECT_FALSE(tall_split.persistent);
  EXPECT_EQ(tall_split.forward_grid.x, 3 * 2 * 43);
  for (int d : {64, 96, 128}) {
    const LaunchPlan causal = plan_of(problem(2, 2048 / d, 2048 / d, 8192, 8192, d, true), 1);
    EXPECT_EQ(causal.persistent, causal.tile_counter) << "d=" << d;
  }
  EXPECT_FALSE(hopper_persistent_unmasked(false, 1, kHopperBaseRows, true)) << "sequences";
}

TEST(Plan, VarlenCallsOfEqualLengthsWalkAsDenseOnes) {
  // Sequences of their own lengths launch a block per tile past 32 key blocks without the mask;
  // equal lengths run persistent, unsplit and split on 128-row tiles, by the dense calls' rule
  // (d=64's sequences split on 128-row tiles where dense calls take 192-row ones). They take no
  // tail split: it would make a sequence's result depend on its batch-mates. A GQA group packed
  // into the rows keeps a block a tile.
  for (int d : {64, 128}) {
    for (long long requested : {1LL, 3LL}) {
      SCOPED_TRACE("d=" + std::to_string(d) + " G=" + std::to_string(requested));
      AttnProblem varlen = problem(2, 2048 / d, 2048 / d, 8192, 8192, d, false);
      varlen.per_sequence = true;
      const LaunchPlan unequal = plan_of(varlen, requested);
      varlen.equal_lengths = true;
      const LaunchPlan equal = plan_of(varlen, requested);
      ASSERT_TRUE(equal.sequences);
      ASSERT_EQ(equal.num_splits, requested);
      EXPECT_EQ(equal.tiles.block_m, unequal.tiles.block_m);
      EXPECT_EQ(equal.persistent, requested == 1 || equal.tiles.block_m == kHopperBaseRows);
      EXPECT_FALSE(unequal.persistent);
      EXPECT_EQ(unequal.forward_grid.x, unequal.tiles_per_split * unequal.num_splits);
      EXPECT_FALSE(equal.tail.active());
    }
  }
  AttnProblem decode = problem(8, 32, 8, 8, 16384, 128, false);
  decode.per_sequence = decode.equal_lengths = true;
  const LaunchPlan packed = plan_of(decode, 1);
  ASSERT_TRUE(packed.tiles.packs_heads);
  EXPECT_FALSE(packed.persistent);
}

TEST(Plan, SequenceCallsOfAFixedSplitCountTileAlikeAtAnyBatchSize) {
  // Batch invariance: with a fixed num_splits a sequence call runs the same tiles (height, keys
  // per block, running max, kernel family) whatever the number of its sequences: those of a
  // batch that fills the GPU. The unsplit tiles for the waves of a call's own grid would
  // differ on some of these.
  int flips = 0;
  for (int d : {64, 96, 128}) {
    for (bool causal : {false, true}) {
      for (long long n : {1000LL, 2048LL, 6000LL}) {
        for (auto [h, hk] : {std::pair<int, int>{8, 8}, {32, 8}}) {
          AttnProblem one = problem(1, h, hk, n, n, d, causal);
          one.per_sequence = true;
          for (long long requested : {1LL, 3LL}) {
            const LaunchPlan alone = plan_every_head_dim(one, requested);
            ASSERT_TRUE(alone.gate.ok);
            for (long long b : {2LL, 8LL, 40LL, 256LL}) {
              SCOPED_TRACE("d=" + std::to_string(d) + " causal=" + std::to_string(causal) +
                           " n=" + std::to_string(n) + " h=" + std::to_string(h) +
                           " b=" + std::to_string(b) + " G=" + std::to_string(requested));
              AttnProblem many = one;
              many.b = b;
              const LaunchPlan batch = plan_every_head_dim(many, requested);
              EXPECT_EQ(batch.gate.family, alone.gate.family);
              EXPECT_EQ(batch.num_splits, alone.num_splits);
              EXPECT_EQ(batch.tiles.block_m, alone.tiles.block_m);
              EXPECT_EQ(batch.tiles.block_n, alone.tiles.block_n);
              EXPECT_EQ(batch.running_max, alone.running_max);
              flips += tiles_for_run(KernelFamily::kHopperWgmma, many, h100().sm_count, 1)
                           .block_m != alone.tiles.block_m;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(flips, 0);
}

TEST(Plan, CausalTilesSideBySideRunInKvGroups) {
  // 192-row causal tiles: drawn from a counter by one block per SM, in groups of heads whose
  // keys and values fit kCausalGroupKvBytes; other tiles keep the head-major order.
  const AttnProblem p = problem(4, 32, 32, 4096, 4096, 64, true);
  const LaunchPlan plan = plan_of(p, 1);
  ASSERT_EQ(plan.tiles.block_m, kHopperTallRows);
  EXPECT_TRUE(plan.tile_counter);
  // So are longer ones (94 key blocks), which are persistent only for the counter's sake.
  const LaunchPlan longer = plan_of(problem(1, 4, 4, 12000, 12000, 128, true), 1);
  ASSERT_EQ(longer.tiles.block_m, kHopperTallRows);
  ASSERT_FALSE(hopper_persistent(12000));
  EXPECT_TRUE(longer.tile_counter);
  EXPECT_TRUE(longer.persistent);
  EXPECT_EQ(longer.forward_grid.x, 132);
  EXPECT_EQ(plan.tile_group,
            causal_tile_group(4 * 32, causal_unit_kv_bytes(4096, 64, 2, 1, 1)));
  EXPECT_GT(plan.tile_group, 1);
  EXPECT_EQ(plan_of(problem(4, 32, 32, 4096, 4096, 64, false), 1).tile_group, 1);
  const LaunchPlan ping_pong = plan_of(problem(16, 16, 16, 1024, 1024, 128, true), 1);
  ASSERT_EQ(ping_pong.tiles.block_m, kHopperBaseRows);
  EXPECT_EQ(ping_pong.tile_group, 1);
  EXPECT_FALSE(ping_pong.tile_counter);
}

TEST(Plan, PersistentD192CausalTilesAreDrawnFromACounterFrom1024Keys) {
  // Unsplit causal d=192 calls of dense k/v over 1024-4096 keys: one block per SM draws the
  // 128-row tiles longest first, in the grouped order; shorter tiles walk the static rounds and
  // longer ones run a block each.
  const LaunchPlan drawn = plan_every_head_dim(problem(16, 10, 10, 1024, 1024, 192, true), 1);
  ASSERT_EQ(drawn.tiles.block_m, kHopperBaseRows) << drawn.gate.reason;
  EXPECT_EQ(drawn.tiles.block_n, hopper_large_head_block_n(192));
  EXPECT_TRUE(drawn.tile_counter);
  EXPECT_TRUE(drawn.persistent);
  EXPECT_FALSE(drawn.running_max || drawn.carry);
  EXPECT_EQ(drawn.forward_grid.x, 132);
  EXPECT_EQ(drawn.tile_group,
            causal_tile_group(16 * 10, causal_unit_kv_bytes(1024, 192, 2, 1, 1)));
  EXPECT_TRUE(plan_every_head_dim(problem(1, 32, 8, 4096, 4096, 192, true), 1).tile_counter);
  const LaunchPlan short_tiles = plan_every_head_dim(problem(32, 10, 10, 1023, 1023, 192, true), 1);
  EXPECT_FALSE(short_tiles.tile_counter);
  EXPECT_TRUE(short_tiles.persistent);
  EXPECT_EQ(short_tiles.tile_group, 1);
  const LaunchPlan long_tiles = plan_every_head_dim(problem(2, 10, 10, 4097, 4097, 192, true), 1);
  EXPECT_FALSE(long_tiles.tile_counter || long_tiles.persistent);
  EXPECT_FALSE(plan_every_head_dim(problem(16, 10, 10, 1024, 1024, 192, false), 1).tile_counter);
  EXPECT_FALSE(plan_every_head_dim(problem(16, 10, 10, 1024, 1024, 192, true), 2).tile_counter);
  EXPECT_FALSE(plan_every_head_dim(problem(4, 10, 10, 1024, 4096, 192, true), 1).tile_counter)
      << "a chunk";
  AttnProblem narrow_v = problem(16, 10, 10, 1024, 1024, 192, true);
  narrow_v.dv = 128;
  EXPECT_FALSE(plan_every_head_dim(narrow_v, 1).tile_counter);
  AttnProblem sequences = problem(16, 10, 10, 1024, 1024, 192, true);
  sequences.per_sequence = true;
  EXPECT_FALSE(plan_every_head_dim(sequences, 1).tile_counter);
  EXPECT_FALSE(plan_every_head_dim(problem(8, 8, 8, 2048, 2048, 256, true), 1).tile_counter);
}

TEST(Plan, PersistentD256CausalTilesAreDrawnWhereTheRoundsEndFarAfterLongestFirst) {
  // d=256's 80-key blocks make the hand-off dearer: its tiles draw only where the static rounds
  // end more than kHopperD256DrawnSlackPct after longest first in the model.
  const auto plan_d256 = [](int64_t b, int64_t h, int64_t hk, int64_t s) {
    return plan_every_head_dim(problem(b, h, hk, s, s, 256, true), 1);
  };
  const auto modelled_pct = [](long long units, long long s) {
    const int block_n = hopper_large_head_block_n(256);
    return 100 * causal_static_walk_time(units, s, s, kHopperBaseRows, block_n, 132) /
           causal_longest_first_time(units, s, s, kHopperBaseRows, block_n, 100, 132);
  };
  ASSERT_GT(modelled_pct(16, 4096), 100 + kHopperD256DrawnSlackPct);
  const LaunchPlan drawn = plan_d256(1, 16, 8, 4096);
  ASSERT_EQ(drawn.tiles.block_m, kHopperBaseRows) << drawn.gate.reason;
  EXPECT_EQ(drawn.tiles.block_n, hopper_large_head_block_n(256));
  EXPECT_TRUE(drawn.tile_counter);
  EXPECT_TRUE(drawn.persistent);
  EXPECT_EQ(drawn.forward_grid.x, 132);
  for (const auto& [b, h, s] : {std::tuple{16, 8, 1024}, {8, 8, 2048}, {4, 8, 4096}}) {
    ASSERT_LE(modelled_pct(b * h, s), 100 + kHopperD256DrawnSlackPct);
    const LaunchPlan rounds = plan_d256(b, h, h, s);
    EXPECT_FALSE(rounds.tile_counter) << b << " x " << h << " heads of " << s;
    EXPECT_TRUE(rounds.persistent);
  }
  EXPECT_FALSE(plan_d256(1, 16, 8, 4097).tile_counter);  // a block per tile
}

TEST(Plan, PrefillGridsFillingAQuarterOfTheSmsAreNotSplitAutomatically) {
  const auto splits = [](int64_t h, int64_t hk, int64_t sq, int64_t sk, int64_t d, bool causal,
                         int requested) {
    return plan_every_head_dim(problem(1, h, hk, sq, sk, d, causal), requested).num_splits;
  };
  // 160 causal d=128 tiles and 160 d=256 ones: the model splits them, the plan does not.
  EXPECT_TRUE(hopper_prefill_declines_split(5, 4096, 4096, 128, 128, 132));
  EXPECT_EQ(splits(5, 1, 4096, 4096, 128, true, 0), 1);
  EXPECT_EQ(splits(8, 8, 2560, 2560, 256, true, 0), 1);
  EXPECT_EQ(splits(4, 4, 2048, 2048, 128, false, 0), 1);
  EXPECT_EQ(splits(5, 1, 4096, 4096, 128, true, 2), 2);  // a requested G stands
  // A quarter of the SMs or fewer: split.
  EXPECT_GT(splits(2, 2, 2048, 2048, 128, true, 0), 1);
  EXPECT_GT(splits(1, 1, 2048, 2048, 192, false, 0), 1);
  // Chunks against four times as many keys or more, and longer keys, keep the model's G.
  EXPECT_FALSE(hopper_prefill_declines_split(16, 384, 4096, 128, 128, 132));
  EXPECT_GT(splits(16, 2, 384, 4096, 64, true, 0), 1);
  EXPECT_FALSE(hopper_prefill_declines_split(5, 4096, 8192, 128, 128, 132));
}

TEST(Plan, FewHeadPrefillSplitsWhereTheLongestTileLeavesSmsWaiting) {
  // One unit of 47 causal tiles: the longest (47 key blocks) ends 38.5 blocks after the SMs'
  // even share (8.5), so its key blocks part in five.
  EXPECT_EQ(hopper_prefill_splits(1, 6000, 6000, true, 128, 132), 5);
  EXPECT_EQ(hopper_prefill_splits(2, 4096, 4096, true, 128, 132), 4);
  EXPECT_EQ(hopper_prefill_splits(2, 4096, 4096, true, 64, 132), 4);
  EXPECT_EQ(hopper_prefill_splits(4, 2048, 2048, true, 64, 132), 3);
  // Without the mask one wave of 64 tiles of 32 blocks against a share of 15.5.
  EXPECT_EQ(hopper_prefill_splits(2, 4096, 4096, false, 64, 132), 2);
  // Waits under the slack: 16.7 blocks (d=128), 14.9 (d=128), 9.8 (d=64).
  EXPECT_EQ(hopper_prefill_splits(3, 8192, 8192, true, 128, 132), 1);
  EXPECT_EQ(hopper_prefill_splits(4, 3000, 3000, true, 128, 132), 1);
  EXPECT_EQ(hopper_prefill_splits(6, 2048, 2048, true, 64, 132), 1);
  // Long causal tiles of several waves even out drawn longest first: a wait of 70 blocks, but
  // 1.15x the share. One wave and ten tiles more: 38 blocks, 1.33x, though G stays 1 there.
  EXPECT_FALSE(hopper_prefill_split_pays(hopper_prefill_wait(8, 7000, 21000, true, 132), 128));
  EXPECT_TRUE(hopper_prefill_split_pays(hopper_prefill_wait(2, 9000, 18000, true, 132), 64));
  EXPECT_EQ(hopper_prefill_splits(2, 9000, 18000, true, 64, 132), 1);
  // The plan: the model's G = 2 of 192 causal tiles gives way to 1, its declined or unsplit
  // choices to hopper_prefill_splits; a requested G, d=96 and fewer tiles keep theirs.
  const auto splits = [](int64_t h, int64_t sq, int64_t d, bool causal, int requested) {
    return plan_every_head_dim(problem(1, h, h, sq, sq, d, causal), requested).num_splits;
  };
  EXPECT_EQ(splits(3, 8192, 128, true, 0), 1);
  EXPECT_EQ(splits(3, 8192, 128, true, 2), 2);
  EXPECT_EQ(splits(2, 4096, 128, true, 0), 4);
  EXPECT_EQ(splits(1, 6000, 128, true, 0), 5);
  EXPECT_EQ(splits(2, 4096, 96, true, 0), 1);
  // 142 causal tiles whose split pays keep the model's G.
  EXPECT_GT(plan_every_head_dim(problem(2, 1, 1, 9000, 18000, 64, true)).num_splits, 1);
  EXPECT_EQ(splits(1, 2048, 128, true, 0),
            resolve_num_splits(0, problem(1, 1, 1, 2048, 2048, 128, true), h100(),
                               tiles_for(KernelFamily::kHopperWgmma,
                                         problem(1, 1, 1, 2048, 2048, 128, true)),
                               nvidia_constants(h100())));
}

TEST(Plan, CausalGroupsCountAGqaGroupsKeysAndValuesOnce) {
  // 32 query heads read 8 k/v heads of 4097 keys: a group of units holds the keys and values of
  // 4 units once (524 KB), so all 32 units fit one 32 MB group; counted per query head (2 MB
  // each) the group would hold 15.
  const LaunchPlan plan = plan_of(problem(1, 32, 8, 4097, 4097, 128, true), 1);
  ASSERT_TRUE(plan.tile_counter);
  EXPECT_EQ(plan.tile_group, causal_tile_group(32, causal_unit_kv_bytes(4097, 128, 2, 1, 4)));
  EXPECT_EQ(plan.tile_group, 32);
}

TEST(Plan, LongCausalPingPongTilesAreDrawnFromACounterInKvGroups) {
  // 1400 causal queries against 5000 keys on few heads run 128-row tiles at the running max,
  // drawn from a counter by one block per SM in the grouped order: every head's longest tiles
  // first, not head after head.
  const LaunchPlan plan = plan_of(problem(1, 8, 1, 1400, 5000, 128, true), 1);
  ASSERT_EQ(plan.tiles.block_m, kHopperBaseRows);
  ASSERT_TRUE(plan.running_max);
  EXPECT_TRUE(plan.tile_counter);
  EXPECT_TRUE(plan.persistent);
  EXPECT_EQ(plan.forward_grid.x, 8 * 11);  // fewer tiles than SMs: one block each
  EXPECT_EQ(plan.tile_group, causal_tile_group(8, causal_unit_kv_bytes(5000, 128, 2, 1, 8)));
  EXPECT_EQ(plan.tile_group, 8);
  const LaunchPlan more = plan_of(problem(1, 8, 8, 8192, 8192, 128, true), 1);
  ASSERT_TRUE(more.running_max);
  EXPECT_TRUE(more.tile_counter);
  EXPECT_EQ(more.forward_grid.x, 132);
  // Split, they launch a block per tile, still in the grouped order.
  const LaunchPlan split = plan_of(problem(1, 8, 1, 1400, 5000, 128, true), 2);
  ASSERT_EQ(split.tiles.block_m, kHopperBaseRows);
  ASSERT_FALSE(split.running_max);
  EXPECT_FALSE(split.tile_counter || split.persistent);
  EXPECT_EQ(split.forward_grid.x, 2 * 8 * 11);
  EXPECT_EQ(split.tile_group,
            causal_tile_group(2 * 8, causal_unit_kv_bytes(5000, 128, 2, 2, 8)));
  EXPECT_GT(split.tile_group, 1);
  // Chunks and persistent ping-pong launches whose static rounds even out keep the head-major
  // order their static walk is tuned to, and carry S across tiles.
  const LaunchPlan chunk = plan_of(problem(4, 40, 8, 1024, 6000, 128, true), 1);
  ASSERT_TRUE(chunk.running_max && chunk.persistent);
  EXPECT_FALSE(chunk.tile_counter);
  EXPECT_EQ(chunk.tile_group, 1);
  const LaunchPlan even = plan_of(problem(8, 16, 16, 2048, 2048, 128, true), 1);
  ASSERT_EQ(even.tiles.block_m, kHopperBaseRows);
  ASSERT_TRUE(even.running_max && even.persistent);
  EXPECT_FALSE(even.tile_counter);
  EXPECT_TRUE(even.carry);
  EXPECT_EQ(even.tile_group, 1);
  // Over more than 16 key blocks, or where the rounds do not even out, they draw from the
  // counter in groups, without the carry.
  for (const AttnProblem& p : {problem(1, 8, 1, 4096, 4096, 128, true),
                               problem(4, 32, 8, 1152, 1152, 128, true),
                               problem(2, 40, 8, 2500, 2500, 128, true)}) {
    const LaunchPlan drawn = plan_of(p, 1);
    ASSERT_EQ(drawn.tiles.block_m, kHopperBaseRows) << p.b << "x" << p.h << "x" << p.sq;
    ASSERT_TRUE(drawn.running_max && drawn.persistent);
    EXPECT_TRUE(drawn.tile_counter) << p.b << "x" << p.h << "x" << p.sq;
    EXPECT_FALSE(drawn.carry);
  }
}

TEST(Plan, LongCausalSequencesAreDrawnFromACounterWhereTheirKeysLoadAsBoxes) {
  // Sequences of their own lengths draw as the dense call does, contiguous or over pages loaded
  // as boxes; over pages copied a row at a time the producer warpgroup walks a static order, so
  // they launch a block per tile (in the grouped order too).
  AttnProblem p = problem(1, 8, 8, 8192, 8192, 128, true);
  p.per_sequence = true;
  for (int64_t page : {0, 16, 64, 256}) {
    p.page_size = page;
    const LaunchPlan plan = plan_of(p, 1);
    ASSERT_TRUE(plan.running_max) << page;
    EXPECT_EQ(plan.page_rows, page == 16) << page;
    EXPECT_EQ(plan.tile_counter, page != 16) << page;
    EXPECT_EQ(plan.persistent, page != 16) << page;
    EXPECT_EQ(plan.tile_group, causal_tile_group(8, causal_unit_kv_bytes(8192, 128, 2, 1, 1)))
        << page;
  }
}

TEST(Plan, LongCausalPingPongTilesTakeProbabilitiesAtTheRunningMax) {
  // d=128 causal tiles of 128 rows over more than 32 key blocks, unsplit: the ping-pong
  // instance that takes probabilities at the running max.
  const LaunchPlan chunk = plan_of(problem(1, 64, 8, 2048, 16384, 128, true));
  ASSERT_EQ(chunk.tiles.block_m, kHopperBaseRows);
  ASSERT_EQ(chunk.num_splits, 1);
  EXPECT_TRUE(chunk.running_max);
  const LaunchPlan few_heads = plan_of(problem(1, 8, 8, 8192, 8192, 128, true));
  ASSERT_EQ(few_heads.tiles.block_m, kHopperBaseRows);
  EXPECT_TRUE(few_heads.running_max);
  // The shapes of tests/test_gpu_adversarial.py's LONG_CAUSAL, unsplit (the heuristic splits
  // the keys of so few tiles).
  for (int64_t sq : {640, 4700}) {
    const LaunchPlan two_heads = plan_of(problem(1, 2, 2, sq, 4700, 128, true), 1);
    EXPECT_EQ(two_heads.tiles.block_m, kHopperBaseRows);
    EXPECT_TRUE(two_heads.running_max);
  }
  // At d=64 and 96 too (a build with every head dim).
  for (int64_t d : {64, 96}) {
    const LaunchPlan few = plan_every_head_dim(problem(1, 4, 4, 8192, 8192, d, true));
    ASSERT_EQ(few.tiles.block_m, kHopperBaseRows);
    EXPECT_TRUE(few.running_max);
  }
  // Not over 4 key blocks or fewer (at d=64 and 96 over 32 or fewer), without the mask, split,
  // from d=192 or on 192-row tiles.
  EXPECT_FALSE(plan_of(problem(32, 16, 16, 512, 512, 128, true)).running_max);
  for (int64_t d : {64, 96}) {
    EXPECT_FALSE(plan_every_head_dim(problem(2, 16, 16, 4096, 4096, d, true), 1).running_max);
  }
  EXPECT_FALSE(plan_of(problem(1, 8, 8, 8192, 8192, 128, false)).running_max);
  EXPECT_FALSE(plan_of(problem(1, 8, 8, 8192, 8192, 128, true), 3).running_max);
  EXPECT_FALSE(plan_every_head_dim(problem(1, 8, 8, 8192, 8192, 192, true)).running_max);
  const LaunchPlan tall = plan_of(problem(1, 4, 4, 12000, 12000, 128, true));
  ASSERT_EQ(tall.tiles.block_m, kHopperTallRows);
  EXPECT_FALSE(tall.running_max);
}

TEST(Plan, LongCausalSequencesTakeProbabilitiesAtTheRunningMax) {
  // Chunked prefill through the kv cache (sequences of their own lengths), contiguous, over
  // pages loaded as boxes (64 keys, whole blocks) and at d=128 over pages copied a row at a
  // time, runs the same running-max tiles as the dense call.
  AttnProblem chunk = problem(4, 32, 8, 512, 8192, 128, true);
  const LaunchPlan dense = plan_of(chunk);
  ASSERT_EQ(dense.tiles.block_m, kHopperBaseRows);
  ASSERT_TRUE(dense.running_max);
  chunk.per_sequence = true;
  for (int64_t page : {0, 16, 24, 64, 128, 256, 384}) {
    chunk.page_size = page;
    const LaunchPlan plan = plan_of(chunk);
    ASSERT_TRUE(plan.sequences && plan.paged == (page > 0)) << page;
    EXPECT_EQ(plan.tiles.block_m, kHopperBaseRows) << page;
    EXPECT_EQ(plan.num_splits, 1) << page;
    EXPECT_EQ(plan.page_rows, page == 16 || page == 24) << page;
    EXPECT_TRUE(plan.running_max) << page;
  }
  // At d=64 (unsplit) pages copied a row at a time take each block's max first.
  AttnProblem narrow = problem(1, 2, 2, 640, 4700, 64, true);
  narrow.per_sequence = true;
  for (int64_t page : {16, 64}) {
    narrow.page_size = page;
    const LaunchPlan plan = plan_of(narrow, 1);
    ASSERT_EQ(plan.tiles.block_m, kHopperBaseRows) << page;
    EXPECT_EQ(plan.page_rows, page == 16) << page;
    EXPECT_EQ(plan.running_max, page == 64) << page;
  }
  // Not where the tiles pack a group's heads (multi-token decode) nor split.
  AttnProblem decode = problem(8, 32, 8, 8, 16384, 128, true);
  decode.per_sequence = true;
  const LaunchPlan packed = plan_of(decode);
  ASSERT_TRUE(packed.tiles.packs_heads);
  EXPECT_FALSE(packed.running_max);
  chunk.page_size = 0;
  EXPECT_FALSE(plan_of(chunk, 2).running_max);
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

TEST(Plan, UnsplitNarrowGridsThatCoverTheHbmToOneAndAHalfSmCountsRunKeyWarps) {
  // The H100's 132 SMs: 47 to 198 (batch, k/v head) blocks of decode take the key-warp tile,
  // unsplit, where the heuristic is asked: from the blocks that cover its HBM's 3.35 TB/s at
  // 72 GB/s each, the full tile to 132, its copies staggered from 88 (two thirds of 132), and
  // the half-size tile, two blocks an SM, from 133 to 198 (1.5 x 132), staggered past 145
  // (1.1 x 132); fewer or more blocks keep the one-warp tile.
  for (int64_t d : {64, 128}) {
    for (int64_t b : {10, 11, 12, 21, 22, 30, 33, 34, 36, 37, 42, 43, 49, 50}) {
      const AttnProblem p = problem(b, 32, 4, 1, 8192, d, false);
      const long long blocks = b * 4;
      const int per_sm = blocks < 47 || blocks > 198 ? 0 : blocks > 132 ? 2 : 1;
      EXPECT_EQ(key_warp_blocks_per_sm_for_run(KernelFamily::kPortableMma, p, h100(), 0), per_sm)
          << blocks;
      EXPECT_EQ(takes_key_warps_for_run(KernelFamily::kPortableMma, p, h100(), 0), per_sm > 0);
      const LaunchPlan plan = plan_of(p);
      ASSERT_EQ(plan.gate.family, KernelFamily::kPortableMma);
      EXPECT_EQ(plan.tiles.key_warps, per_sm > 0 ? kSm80KeyWarps : 1) << blocks << " d=" << d;
      EXPECT_EQ(plan.staggered_kv,
                (blocks >= 88 && blocks <= 132) || (blocks >= 146 && blocks <= 198))
          << blocks << " d=" << d;
      if (per_sm == 0) continue;
      const TileConfig tiles = sm80_key_warp_tile_config(static_cast<int>(d), per_sm);
      EXPECT_EQ(plan.tiles.block_n, tiles.block_n);
      EXPECT_EQ(plan.tiles.blocks_per_sm, per_sm);
      EXPECT_EQ(tiles.block_n, portable_tile_config(static_cast<int>(d), true).block_n * 4 / per_sm);
      EXPECT_EQ(plan.num_splits, 1);
      EXPECT_EQ(plan.forward_grid.x, 1);
      EXPECT_EQ(plan.forward_grid.y, 1);
      EXPECT_EQ(plan.forward_grid.z, blocks);
      EXPECT_EQ(plan.combine_grid.x, 0);
      // A fixed num_splits keeps the one-warp tile (batch invariance).
      for (long long requested : {1LL, 3LL}) {
        const LaunchPlan fixed = plan_of(p, requested);
        EXPECT_EQ(fixed.tiles.key_warps, 1);
        EXPECT_FALSE(fixed.staggered_kv);
        EXPECT_EQ(fixed.num_splits, requested);
      }
    }
  }
  // Multi-token decode (4 tokens of a group of 4: one 16-row tile a pair) takes the full tile
  // from 47 blocks to 132, none beyond.
  for (int64_t b : {10, 11, 12, 30, 33, 34, 49}) {
    const AttnProblem p = problem(b, 16, 4, 4, 8192, 128, true);
    const long long blocks = b * 4;
    const int per_sm = blocks >= 47 && blocks <= 132 ? 1 : 0;
    EXPECT_EQ(key_warp_blocks_per_sm_for_run(KernelFamily::kPortableMma, p, h100(), 0), per_sm)
        << blocks;
    EXPECT_FALSE(plan_of(p).staggered_kv) << blocks;  // measured for one query token only
  }
  // Head dims without the tile, the wide tile, GPUs whose blocks take less shared memory than
  // the tile's (99 KB: sm_86 / sm_89, which have 84 SMs here) and the gfx9 policy keep one warp
  // a block's keys.
  const AttnProblem decode = problem(16, 32, 4, 1, 8192, 128, false);
  EXPECT_FALSE(takes_key_warps_for_run(KernelFamily::kPortableMma,
                                       problem(16, 32, 4, 1, 8192, 96, false), h100(), 0));
  EXPECT_FALSE(takes_key_warps_for_run(KernelFamily::kPortableMma,
                                       problem(16, 32, 4, 64, 8192, 128, false), h100(), 0));
  EXPECT_TRUE(takes_key_warps_for_run(KernelFamily::kPortableMma, decode,
                                      DeviceInfo{Vendor::kNvidia, 80, 108, 163 * 1024}, 0));
  EXPECT_FALSE(takes_key_warps_for_run(KernelFamily::kPortableMma, decode,
                                       DeviceInfo{Vendor::kNvidia, 89, 84, 99 * 1024}, 0));
  EXPECT_FALSE(takes_key_warps_for_run(KernelFamily::kPortableMma,
                                       problem(24, 32, 4, 1, 8192, 128, false),  // 96 / 84 SMs
                                       DeviceInfo{Vendor::kNvidia, 89, 84, 99 * 1024}, 0));
  EXPECT_FALSE(takes_key_warps_for_run(KernelFamily::kPortableMfma, decode, mi300x(), 0));
  EXPECT_EQ(make_launch_plan(problem(30, 32, 4, 1, 8192, 128, false), mi300x(), amd_build(),
                             PlanOptions{}, 0)
                .tiles.key_warps,
            1);
}

TEST(Plan, KeyWarpTilesFitTheirBlocksAnSmWhereTheSharedMemoryHoldsThem) {
  for (int d : {64, 128}) {
    const TileConfig one = sm80_key_warp_tile_config(d, 1), two = sm80_key_warp_tile_config(d, 2);
    EXPECT_EQ(two.block_n * 2, one.block_n);
    EXPECT_EQ(two.blocks_per_sm, 2);
    // 130-132 KB and 66 KB of Q and K/V stages, and their page tables.
    EXPECT_GT(portable_paged_smem_bytes(one, d), 130 * 1024);
    EXPECT_LT(portable_paged_smem_bytes(one, d), 135 * 1024);
    EXPECT_LT(portable_paged_smem_bytes(two, d), 70 * 1024);
    for (const TileConfig& tiles : {one, two}) {
      EXPECT_TRUE(sm80_key_warp_tiles_fit(tiles, d, 227 * 1024));  // sm_90
      EXPECT_TRUE(sm80_key_warp_tiles_fit(tiles, d, 163 * 1024));  // sm_80
      EXPECT_FALSE(sm80_key_warp_tiles_fit(tiles, d, 99 * 1024));  // sm_86, sm_89
    }
    // The A100's 108 SMs: decode of 36-108 blocks takes one an SM (a third of them: its 1.56
    // TB/s need 22 blocks), staggered from 72 blocks, and 109-162 two an SM, staggered from
    // 119; several query tokens take the full tile up to 108 blocks and none beyond.
    EXPECT_EQ(sm80_key_warp_min_blocks(108, 1215e3 * 5120 / 4000), 36);
    const long long a100_most = sm80_key_warp_max_blocks(108, true, 0.57);
    const long long a100_most_tokens = sm80_key_warp_max_blocks(108, false, 0.57);
    EXPECT_EQ(a100_most, 162);
    EXPECT_EQ(a100_most_tokens, 108);
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(162, 108, 163 * 1024, d, true, 36, a100_most), 2);
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(109, 108, 163 * 1024, d, true, 36, a100_most), 2);
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(108, 108, 163 * 1024, d, true, 36, a100_most), 1);
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(72, 108, 163 * 1024, d, true, 36, a100_most), 1);
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(163, 108, 163 * 1024, d, true, 36, a100_most), 0);
    const DeviceInfo a100{Vendor::kNvidia, 80, 108, 163 * 1024, "", 1215e3 * 5120 / 4000};
    const double a100_share = hbm_share_over_h100(a100);  // 0.57
    EXPECT_FALSE(sm80_key_warp_staggered(71, 108, 1, true, a100_share));
    EXPECT_TRUE(sm80_key_warp_staggered(72, 108, 1, true, a100_share));
    EXPECT_FALSE(sm80_key_warp_staggered(72, 108, 1, false, a100_share));
    EXPECT_FALSE(sm80_key_warp_staggered(118, 108, 2, true, a100_share));
    EXPECT_TRUE(sm80_key_warp_staggered(119, 108, 2, true, a100_share));
    EXPECT_TRUE(sm80_key_warp_staggered(162, 108, 2, true, a100_share));
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(100, 108, 163 * 1024, d, false, 36, a100_most_tokens), 1);
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(108, 108, 163 * 1024, d, false, 36, a100_most_tokens), 1);
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(109, 108, 163 * 1024, d, false, 36, a100_most_tokens), 0);
    EXPECT_EQ(sm80_key_warp_blocks_per_sm(35, 108, 163 * 1024, d, false, 36, a100_most_tokens), 0);
  }
  EXPECT_EQ(sm80_key_warp_tile_config(64, 3).block_m, 0);
  EXPECT_EQ(sm80_key_warp_tile_config(96, 1).block_m, 0);
}

TEST(Plan, KeyWarpsAndDecodeSlotsFollowTheHbmsBandwidth) {
  // The full key-warp tile starts where its blocks cover the HBM's peak at 72 GB/s each: 47
  // blocks on the H100, 67 on the H200, a third of the SMs where the bandwidth is unknown.
  EXPECT_EQ(sm80_key_warp_min_blocks(132, h100().dram_bytes_per_us), 47);
  EXPECT_EQ(sm80_key_warp_min_blocks(132, h200().dram_bytes_per_us), 67);
  EXPECT_EQ(sm80_key_warp_min_blocks(132, 0.0), 44);
  EXPECT_NEAR(hbm_share_over_h100(h100()), 1.0, 1e-12);
  EXPECT_NEAR(hbm_share_over_h100(h200()), 1.436, 1e-3);
  EXPECT_EQ(hbm_share_over_h100(DeviceInfo{Vendor::kNvidia, 90, 132}), 1.0);
  const auto per_sm = [](const AttnProblem& p, const DeviceInfo& device) {
    return key_warp_blocks_per_sm_for_run(KernelFamily::kPortableMma, p, device, 0);
  };
  for (int64_t d : {64, 128}) {
    // 64 blocks: key warps on the H100; split one-warp blocks on the H200, whose narrow slots
    // (three an SM) let the heuristic give them more splits than on the H100.
    const AttnProblem at64 = problem(16, 32, 4, 1, 8192, d, false);
    EXPECT_EQ(per_sm(at64, h100()), 1);
    EXPECT_EQ(per_sm(at64, h200()), 0);
    EXPECT_EQ(per_sm(problem(17, 32, 4, 1, 8192, d, false), h200()), 1);  // 68 blocks
    const LaunchPlan h200_plan = make_launch_plan(at64, h200(), hopper_build(), PlanOptions{}, 0);
    EXPECT_EQ(h200_plan.tiles.key_warps, 1);
    EXPECT_GT(h200_plan.num_splits, choose_num_splits(at64, h100(), tiles_for(
                                                          KernelFamily::kPortableMma, at64)));
    // Pages take key warps as contiguous calls do on the H100; on the H200 all but the
    // half-size tile within 1.5 times the SMs over caches past 4096 keys, where the one-warp
    // split walks them.
    AttnProblem paged = problem(24, 32, 4, 1, 8192, d, false);  // 96 blocks
    paged.per_sequence = true;
    paged.page_size = 16;
    EXPECT_EQ(per_sm(paged, h100()), 1);
    EXPECT_EQ(per_sm(paged, h200()), 1);
    paged.b = 40;  // 160 blocks
    EXPECT_EQ(per_sm(paged, h100()), 2);
    EXPECT_EQ(per_sm(paged, h200()), 0);
    // Contiguous caches there keep it up to kHalfTileMaxKvBytes of K and V a block (12288 keys
    // are 3 MiB at d=64, 6 MiB at d=128), and past it where the split would take G = 2.
    const AttnProblem contiguous = problem(40, 32, 4, 1, 12288, d, false);
    EXPECT_EQ(per_sm(contiguous, h100()), 2);
    EXPECT_EQ(per_sm(contiguous, h200()), d == 64 ? 2 : 0);
    if (d == 128) {
      EXPECT_EQ(make_launch_plan(contiguous, h200(), hopper_build(), PlanOptions{}, 0).num_splits,
                2);
    }
    EXPECT_TRUE(sm80_key_warps_walk_pages(198, 132, 2, 1.0, 8192));
    EXPECT_FALSE(sm80_key_warps_walk_pages(198, 132, 2, 1.44, 8192));
    EXPECT_TRUE(sm80_key_warps_walk_pages(199, 132, 2, 1.44, 8192));
    EXPECT_TRUE(sm80_key_warps_walk_pages(132, 132, 1, 1.44, 8192));
    EXPECT_TRUE(sm80_key_warps_walk_cache(198, 132, 2, 1.44, kHalfTileMaxKvBytes, 2));
    EXPECT_FALSE(sm80_key_warps_walk_cache(198, 132, 2, 1.44, kHalfTileMaxKvBytes + 1, 2));
    EXPECT_TRUE(sm80_key_warps_walk_cache(198, 132, 2, 1.44, kHalfTileMaxKvBytes + 1, 3));
    EXPECT_TRUE(sm80_key_warps_walk_cache(199, 132, 2, 1.44, kHalfTileMaxKvBytes + 1, 2));
    EXPECT_TRUE(sm80_key_warps_walk_cache(198, 132, 2, 1.0, kHalfTileMaxKvBytes + 1, 2));
    EXPECT_TRUE(sm80_key_warps_walk_cache(132, 132, 1, 1.44, kHalfTileMaxKvBytes + 1, 2));
    // Within 1.5 times the SMs the half-size tile walks short caches' pages.
    EXPECT_TRUE(sm80_key_warps_walk_pages(198, 132, 2, 1.44, kPagedHalfTileMaxKeys));
    EXPECT_FALSE(sm80_key_warps_walk_pages(198, 132, 2, 1.44, kPagedHalfTileMaxKeys + 1));
    paged.sk = 4096;
    EXPECT_EQ(per_sm(paged, h200()), 2);
    paged.sk = 8192;
    // The half-size tile's one wave: to 1.5 times the SMs on the H100, to twice them on the
    // H200 (one-warp blocks, one or two an SM, leave its bandwidth unused).
    EXPECT_EQ(sm80_key_warp_max_blocks(132, true, 1.0), 198);
    EXPECT_EQ(sm80_key_warp_max_blocks(132, true, hbm_share_over_h100(h200())), 264);
    EXPECT_EQ(sm80_key_warp_max_blocks(132, false, hbm_share_over_h100(h200())), 132);
    for (int64_t b : {50, 66}) {  // 200 and 264 blocks
      const AttnProblem p = problem(b, 32, 4, 1, 8192, d, false);
      EXPECT_EQ(per_sm(p, h100()), 0);
      EXPECT_EQ(per_sm(p, h200()), 2);
      paged.b = b;
      EXPECT_EQ(per_sm(paged, h200()), 2);
    }
    EXPECT_EQ(per_sm(problem(67, 32, 4, 1, 8192, d, false), h200()), 0);  // 268 blocks
    // Staggered copies (96 blocks of the full tile, 160 of the half-size one) on the H100 only.
    for (int64_t b : {24, 40}) {
      const AttnProblem p = problem(b, 32, 4, 1, 4096, d, false);
      EXPECT_TRUE(make_launch_plan(p, h100(), hopper_build(), PlanOptions{}, 0).staggered_kv);
      const LaunchPlan on_h200 = make_launch_plan(p, h200(), hopper_build(), PlanOptions{}, 0);
      EXPECT_GT(on_h200.tiles.key_warps, 1);
      EXPECT_FALSE(on_h200.staggered_kv);
    }
  }
  // The heuristic's narrow slots scale with the share, rounded to whole blocks, where that is
  // more than the H100's two.
  const double h100_slots = SplitHeuristicConstants{}.slots_per_sm_narrow;
  EXPECT_EQ(nvidia_constants(h100()).slots_per_sm_narrow, h100_slots);
  const DeviceInfo a100{Vendor::kNvidia, 80, 108, 163 * 1024, "", 1215e3 * 5120 / 4000};
  EXPECT_EQ(nvidia_constants(a100).slots_per_sm_narrow, h100_slots);
  EXPECT_EQ(nvidia_constants(h200()).slots_per_sm_narrow, 3.0);  // 2 x 1.44, rounded
  EXPECT_EQ(constants_for(KernelFamily::kPortableMma, h200()).slots_per_sm_narrow,
            nvidia_constants(h200()).slots_per_sm_narrow);
  EXPECT_EQ(nvidia_constants(h200()).dram_bytes_per_us,
            SplitHeuristicConstants{}.dram_bytes_per_us);
}

TEST(Plan, PackedHopperDecodeSplitsByWavesOfTheHbmsRate) {
  // The H100 keeps its fit; on the H200 the Hopper tiles packing a group's heads take the wave
  // model at its HBM's rate (a wave's blocks stream at most packed_sm_bytes_per_us each and pay
  // packed_wave_latency_us), the other tiles the H100's fit.
  const SplitHeuristicConstants h100_fit = hopper_constants(h100());
  EXPECT_EQ(h100_fit.packed_dram_bytes_per_us, 0.0);
  EXPECT_EQ(h100_fit.packed_sm_bytes_per_us, 0.0);
  const SplitHeuristicConstants h200_fit = constants_for(KernelFamily::kHopperWgmma, h200());
  EXPECT_EQ(h200_fit.dram_bytes_per_us, SplitHeuristicConstants{}.dram_bytes_per_us);
  EXPECT_NEAR(h200_fit.packed_dram_bytes_per_us, h200().dram_bytes_per_us * 3.2 / 3.35, 1.0);
  EXPECT_GT(h200_fit.packed_sm_bytes_per_us, 0.0);
  EXPECT_GT(h200_fit.packed_wave_latency_us, 0.0);
  EXPECT_EQ(h200_fit.slots_per_sm_narrow, nvidia_constants(h200()).slots_per_sm_narrow);
  const auto packed_g = [](const DeviceInfo& device, long long b, long long sq, long long h,
                            long long hk, long long sk) {
    AttnProblem p = problem(b, h, hk, sq, sk, 128, sq > 1);
    p.per_sequence = true;
    const LaunchPlan plan = make_launch_plan(p, device, hopper_build(), {}, 0);
    EXPECT_TRUE(plan.tiles.packs_heads);
    return plan.num_splits;
  };
  // 192 packed tiles: unsplit, the second wave's 60 blocks stream below the HBM's rate; split
  // in two, three waves stream at it.
  EXPECT_EQ(packed_g(h200(), 96, 1, 64, 2, 5000), 2);
  EXPECT_EQ(packed_g(h100(), 96, 1, 64, 2, 5000), 1);
  // 96 tiles stream at nearly the HBM's rate in one wave: more waves only add their latency.
  EXPECT_EQ(packed_g(h200(), 12, 8, 32, 8, 16384), 1);
  // 64 tiles at d=128 split over two waves, not into one wave of 128 blocks
  // (packed_one_wave_split_penalty).
  EXPECT_EQ(packed_g(h200(), 8, 8, 32, 8, 16384), 4);
  // The model's time grows by a wave's latency with each wave of equal blocks.
  AttnProblem p = problem(132, 64, 2, 1, 8192, 128, false);
  p.per_sequence = true;
  const TileConfig tiles = tiles_for(KernelFamily::kHopperWgmma, p);
  ASSERT_TRUE(tiles.packs_heads);
  SplitHeuristicConstants memory_bound = h200_fit;
  memory_bound.hopper_iteration_us_d128 = 1e-6;
  const double two_waves = modelled_split_us(p, h200(), tiles, 1, memory_bound);
  memory_bound.packed_wave_latency_us += 1.0;
  EXPECT_NEAR(modelled_split_us(p, h200(), tiles, 1, memory_bound) - two_waves, 2.0, 1e-6);
}

TEST(Plan, MultiTokenDecodeOfUpTo32PackedRowsRunsTheNarrowTile) {
  // The portable kernels (Hopper's off): 8 query tokens of a group of 4 are 32 packed rows,
  // two narrow row tiles per k/v head.
  PlanOptions portable;
  portable.gate.allow_hopper = false;
  AttnProblem p = problem(8, 32, 8, 8, 16384, 128, false);
  const LaunchPlan contiguous = plan_of(p, 0, portable);
  ASSERT_EQ(contiguous.gate.family, KernelFamily::kPortableMma);
  EXPECT_EQ(contiguous.tiles.block_m, portable_tile_config(128, true).block_m);
  EXPECT_EQ(contiguous.forward_grid.x, 2);
  // 64 packed rows: the wide tile.
  EXPECT_EQ(plan_of(problem(8, 32, 8, 16, 16384, 128, false), 0, portable).tiles.block_m,
            portable_tile_config(128).block_m);
  // The same 32 over pages, off the Hopper kernels: the narrow tile too.
  p.per_sequence = true;
  p.page_size = 24;
  const LaunchPlan paged = plan_of(p, 0, portable);
  ASSERT_TRUE(paged.gate.ok && paged.paged);
  EXPECT_EQ(paged.gate.family, KernelFamily::kPortableMma);
  EXPECT_EQ(paged.tiles.block_m, portable_tile_config(128, true).block_m);
  EXPECT_EQ(paged.forward_grid.x, 2);
}

TEST(Plan, PagedMultiTokenDecodeOnHopperPacksTheGroupAsTheContiguousOne) {
  // Any page size: the packed 128-row sequence tiles, the contiguous call's split count and
  // grid; pages of 64 keys or of whole blocks are TMA boxes, the others copied a row at a time.
  AttnProblem p = problem(8, 32, 8, 8, 16384, 128, true);
  p.per_sequence = true;
  const LaunchPlan contiguous = plan_of(p);
  ASSERT_EQ(contiguous.gate.family, KernelFamily::kHopperWgmma);
  EXPECT_FALSE(contiguous.page_rows);
  for (int page : {1, 16, 32, 48, 64, 200, 256, 512}) {
    p.page_size = page;
    const LaunchPlan paged = plan_of(p);
    ASSERT_TRUE(paged.gate.ok && paged.paged && paged.sequences) << page;
    EXPECT_EQ(paged.gate.family, KernelFamily::kHopperWgmma);
    EXPECT_EQ(paged.page_rows, page != 64 && page % kHopperBlockN != 0) << page;
    EXPECT_TRUE(paged.tiles.packs_heads);
    EXPECT_EQ(paged.tiles.block_m, contiguous.tiles.block_m);
    EXPECT_EQ(paged.tiles.block_n, kHopperBlockN);
    EXPECT_EQ(paged.num_splits, contiguous.num_splits);
    EXPECT_EQ(paged.forward_grid.x, contiguous.forward_grid.x);
  }
}

TEST(Plan, PagesCopiedARowAtATimeSplitAcrossTheSmsAGridLeavesIdle) {
  // (1,16,32,8,32768,128): 8 packed tiles; the contiguous call's G = 10 fills 80 of 132 SMs, so
  // over pages of 16 (copied a row at a time) the call splits into 16 (128 blocks); pages of 64
  // (TMA boxes) and a requested G keep theirs, as does a grid that fills the SMs.
  AttnProblem p = problem(1, 32, 8, 16, 32768, 128, true);
  p.per_sequence = true;
  const LaunchPlan contiguous = plan_of(p);
  ASSERT_EQ(contiguous.gate.family, KernelFamily::kHopperWgmma);
  ASSERT_EQ(contiguous.tiles_per_split, 8);
  ASSERT_LT(4 * contiguous.forward_grid.x, 3 * h100().sm_count);
  p.page_size = 16;
  const LaunchPlan rows = plan_of(p);
  EXPECT_TRUE(rows.page_rows);
  EXPECT_EQ(rows.num_splits, 16);
  EXPECT_EQ(rows.forward_grid.x, 128);
  EXPECT_EQ(plan_of(p, contiguous.num_splits).num_splits, contiguous.num_splits);
  p.page_size = 64;
  EXPECT_EQ(plan_of(p).num_splits, contiguous.num_splits);
  AttnProblem full = problem(2, 64, 8, 6, 32768, 128, true);
  full.per_sequence = true;
  const int splits = plan_of(full).num_splits;
  full.page_size = 16;
  EXPECT_EQ(plan_of(full).num_splits, splits);
  // The rule alone: unsplit calls stay so, and no more splits than key blocks.
  EXPECT_EQ(hopper_page_rows_splits(1, 8, 132, 256), 1);
  EXPECT_EQ(hopper_page_rows_splits(2, 8, 132, 5), 5);
  EXPECT_EQ(hopper_page_rows_splits(13, 8, 132, 256), 13);  // 104 blocks: past three quarters
}

TEST(Plan, MultiTokenDecodeOnHopperPacksTheGroupIntoSequenceTiles) {
  // 8 query tokens of a group of 4 over contiguous k/v, dense or a kv cache: one 128-row tile
  // per (batch, k/v head) of the sequence instances, no tail split, split over the keys.
  for (bool per_sequence : {false, true}) {
    AttnProblem p = problem(8, 32, 8, 8, 16384, 128, false);
    p.per_sequence = per_sequence;
    const LaunchPlan plan = plan_of(p);
    ASSERT_EQ(plan.gate.family, KernelFamily::kHopperWgmma);
    EXPECT_TRUE(plan.tiles.packs_heads);
    EXPECT_TRUE(plan.sequences);
    EXPECT_FALSE(plan.paged);
    EXPECT_EQ(plan.tiles.block_m, 128);
    EXPECT_EQ(plan.tiles_per_split, 8 * 8);
    EXPECT_FALSE(plan.tail.active());
    EXPECT_GE(plan.num_splits, 2);
    EXPECT_FALSE(plan.persistent);  // 128 key blocks: a block per tile
    EXPECT_EQ(plan.forward_grid.x, 64LL * plan.num_splits);
    // Unsplit too: the sequence instances keep a block per tile without the mask.
    const LaunchPlan unsplit = plan_of(p, 1);
    ASSERT_TRUE(unsplit.sequences && unsplit.tiles.packs_heads);
    EXPECT_FALSE(unsplit.persistent);
  }
}

TEST(Plan, PortableGridFoldsPairsPastTheGridLimitIntoY) {
  // 8192 sequences x 8 k/v heads = 65536 (batch, k/v head) pairs: one more than z holds.
  const AttnProblem p = problem(8192, 32, 8, 1, 300, 128, false);
  for (long long requested : {1LL, 2LL, 0LL}) {
    const LaunchPlan plan = plan_of(p, requested);
    ASSERT_EQ(plan.gate.family, KernelFamily::kPortableMma);
    EXPECT_EQ(plan.forward_grid.z, kMaxGridYZ);
    EXPECT_EQ(plan.forward_grid.y, (1 << ceil_log2(plan.num_splits)) + plan.num_splits);
  }
}

TEST(Plan, PortableBlocksCoverEveryPairAndSplitOnce) {
  for (long long pairs : {1LL, 64LL, 65535LL, 65536LL, 200000LL}) {
    for (int splits : {1, 3, 4}) {
      const PortableGridYZ yz = portable_grid_yz(pairs, splits);
      ASSERT_LE(yz.y, kMaxGridYZ);
      ASSERT_LE(yz.z, kMaxGridYZ);
      std::vector<int> seen(static_cast<size_t>(pairs) * splits, 0);
      for (long long y = 0; y < yz.y; ++y)
        for (long long z = 0; z < yz.z; ++z) {
          const PortableBlock block =
              portable_block(static_cast<unsigned>(y), static_cast<unsigned>(z), splits,
                             static_cast<unsigned>(pairs));
          if (!block.has_work) continue;
          ++seen[static_cast<size_t>(block.pair) * splits + block.split];
        }
      for (int count : seen) ASSERT_EQ(count, 1) << pairs << " pairs, " << splits << " splits";
    }
  }
  EXPECT_EQ(max_portable_splits(65535), kMaxGridYZ);
  EXPECT_EQ(max_portable_splits(65536), 32767);  // 2^15 + G <= 65535, G in (2^14, 2^15]
  for (long long pairs : {65536LL, 200000LL, 3000000LL}) {
    const int g = max_portable_splits(pairs);
    EXPECT_LE(portable_grid_yz(pairs, g).y, kMaxGridYZ) << pairs;
    EXPECT_GT(portable_grid_yz(pairs, g + 1).y, kMaxGridYZ) << pairs;
  }
}

TEST(Plan, CombineRunsOnlyForSplitsWithItsLanes) {
  const AttnProblem p = problem(1, 32, 8, 1, 65536, 128, false);
  const LaunchPlan plan = plan_of(p);
  ASSERT_GE(plan.num_splits, 2);
  EXPECT_EQ(plan.combine_lanes, combine_lanes(plan.num_splits));
  const long long threads = 32LL * (128 / 4) * plan.combine_lanes;  // 32 rows
  EXPECT_EQ(plan.combine_grid.x, (threads + kCombineThreads - 1) / kCombineThreads);
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

namespace flashsplit {
namespace {

LaunchPlan mi300x_plan(const AttnProblem& p, long long requested = 0) {
  PlanOptions options;
  options.gate.arch_verified_here = true;
  return make_launch_plan(p, mi300x(), amd_build(), options, requested);
}

// The reference design's shapes (aiter's split-KV forward on MI300X, d=64 bf16): split on the
// first two, keep one split on the fourth, with the gfx9 constants derived from MI300X's
// published figures.
TEST(PlanAmd, Mi300xSplitsWhereTheReferenceDesignDoes) {
  const LaunchPlan small_grid = mi300x_plan(problem(1, 2, 2, 40000, 40000, 64, false));
  ASSERT_EQ(small_grid.gate.family, KernelFamily::kPortableMfma) << small_grid.gate.reason;
  EXPECT_GE(small_grid.num_splits, 2);
  EXPECT_GE(mi300x_plan(problem(1, 16, 16, 128, 65535, 64, false)).num_splits, 2);
  EXPECT_EQ(mi300x_plan(problem(8, 16, 16, 8192, 8192, 64, false)).num_splits, 1);
}

TEST(PlanAmd, MfmaPlansRunThePortableGridOnGfx9Tiles) {
  const LaunchPlan decode = mi300x_plan(problem(8, 32, 8, 1, 16384, 128, false));
  ASSERT_EQ(decode.gate.family, KernelFamily::kPortableMfma);
  EXPECT_EQ(decode.tiles.block_m, gfx9_tile_config(128, true).block_m);
  EXPECT_EQ(decode.forward_grid.y, decode.num_splits);
  EXPECT_EQ(decode.forward_grid.z, 8 * 8);
  EXPECT_FALSE(decode.dependent_launch);
  const LaunchPlan prefill = mi300x_plan(problem(2, 32, 8, 1000, 1000, 64, true), 1);
  EXPECT_EQ(prefill.tiles.block_m, gfx9_tile_config(64).block_m);
  EXPECT_EQ(prefill.forward_grid.x, (1000 * 4 + 127) / 128);
  EXPECT_FALSE(prefill.persistent || prefill.tail.active() || prefill.tile_counter);
}

TEST(PlanAmd, Gfx9ConstantsComeFromEachTargetsFacts) {
  const SplitHeuristicConstants mi300 = gfx9_constants(mi300x());
  // 4 * 128 * 64 * 64 flops at 592 TFLOPS over 304 compute units.
  EXPECT_NEAR(mi300.portable_iteration_us_d64, 4.0 * 128 * 64 * 64 / (592e6 / 304), 1e-9);
  // d=128 tiles walk 32-key blocks: the same flops per block as d=64's 64-key blocks.
  EXPECT_NEAR(mi300.portable_iteration_us_d128, mi300.portable_iteration_us_d64, 1e-9);
  EXPECT_NEAR(mi300.dram_bytes_per_us, 5.3e6 * 3.2 / 3.35, 1e-3);
  DeviceInfo mi355 = mi300x();
  mi355.arch = "gfx950";
  EXPECT_LT(gfx9_constants(mi355).portable_iteration_us_d64, mi300.portable_iteration_us_d64);
  EXPECT_GT(gfx9_constants(mi355).dram_bytes_per_us, mi300.dram_bytes_per_us);
  DeviceInfo unknown = mi300x();
  unknown.arch = "gfx9xx";
  EXPECT_EQ(gfx9_constants(unknown).dram_bytes_per_us, mi300.dram_bytes_per_us);
  // The NVIDIA families keep the H100 fit.
  EXPECT_EQ(constants_for(KernelFamily::kHopperWgmma, h100()).dram_bytes_per_us,
            SplitHeuristicConstants{}.dram_bytes_per_us);
}

TEST(Plan, PagedDecodeSplitsAsTheContiguousOne) {
  // The narrow tile's paged walk reads a table entry per run of rows and runs within a few
  // percent of the contiguous walk, so the heuristic gives paged decode the contiguous G.
  AttnProblem p;
  p.b = 8, p.sq = 1, p.h = 32, p.hk = 8, p.sk = 8192, p.d = 128;
  p.per_sequence = true;
  const LaunchPlan contiguous = make_launch_plan(p, h100(), hopper_build(), PlanOptions{}, 0);
  p.page_size = 64;
  const LaunchPlan paged = make_launch_plan(p, h100(), hopper_build(), PlanOptions{}, 0);
  EXPECT_TRUE(contiguous.gate.ok && paged.gate.ok);
  EXPECT_TRUE(paged.paged && !contiguous.paged);
  EXPECT_EQ(paged.num_splits, contiguous.num_splits);
  EXPECT_EQ(paged.tiles.block_m, contiguous.tiles.block_m);
}

TEST(Plan, ContiguousSequencesRunHopperTilesOfTheirOwnWithoutATailSplit) {
  // Varlen prefill: the Hopper kernels' sequence instances, never with a tail split (it
  // assumes tiles of equal length); split calls on 128-row ping-pong tiles, unsplit ones on the
  // tiles the dense call would weigh (the 128-row ones without the mask from d=96).
  const BuildInfo build = hopper_build_every_head_dim();
  int tall_plans = 0;
  for (int d : build.head_dims) {
    for (bool causal : {false, true}) {
      for (int splits : {1, 3}) {
        AttnProblem p;
        p.b = 3, p.sq = 4096, p.sk = 4096, p.h = 16, p.hk = 16, p.d = d, p.causal = causal;
        p.per_sequence = true;
        const LaunchPlan plan = make_launch_plan(p, h100(), build, PlanOptions{}, splits);
        SCOPED_TRACE("d=" + std::to_string(d) + " causal=" + std::to_string(causal) +
                     " G=" + std::to_string(splits));
        ASSERT_TRUE(plan.gate.ok) << plan.gate.reason;
        if (splits > 1 && !hopper_sequence_splits_built(d, causal)) {
          // No such Hopper instance: the portable kernels run the call, with the G asked for.
          EXPECT_EQ(plan.gate.family, KernelFamily::kPortableMma);
          EXPECT_EQ(plan.num_splits, splits);
          continue;
        }
        EXPECT_EQ(plan.gate.family, KernelFamily::kHopperWgmma);
        EXPECT_TRUE(plan.sequences && !plan.paged);
        EXPECT_FALSE(plan.tail.active());
        p.per_sequence = false;
        const LaunchPlan dense = make_launch_plan(p, h100(), build, PlanOptions{}, splits);
        if (splits > 1 || d > 128 || (!causal && d != 64)) {
          EXPECT_EQ(plan.tiles.block_m, kHopperBaseRows);
        } else if (causal && d == 128) {
          // Sequences weigh heights by waves at the block max (a fixed G: those of a batch
          // filling the GPU, where 192-row tiles cost less a row), the dense call longest first
          // at the running max.
          EXPECT_EQ(plan.tiles.block_m, kHopperTallRows);
          EXPECT_FALSE(plan.running_max);
          EXPECT_EQ(dense.tiles.block_m, kHopperBaseRows);
          EXPECT_TRUE(dense.running_max);
        } else {
          EXPECT_EQ(plan.tiles.block_m, dense.tiles.block_m);
        }
        EXPECT_EQ(plan.tiles.block_n,
                  d > 128                                   ? hopper_large_head_block_n(d)
                  : plan.tiles.block_m == kHopperTallRows ? hopper_tall_block_n(d)
                                                            : kHopperBlockN);
        tall_plans += plan.tiles.block_m == kHopperTallRows;
      }
    }
  }
  EXPECT_GE(tall_plans, 3);  // d=64 both ways, d=96 and 128 with the mask
  // 8 sequences of 1024 rows at d=64: the 256-row tiles, as the dense call.
  AttnProblem wide;
  wide.b = 8, wide.sq = 1024, wide.sk = 1024, wide.h = 16, wide.hk = 16, wide.d = 64;
  wide.causal = true;
  wide.per_sequence = true;
  const LaunchPlan wide_plan = make_launch_plan(wide, h100(), hopper_build(), PlanOptions{}, 1);
  EXPECT_EQ(wide_plan.tiles.block_m, kHopperWideRows);
  EXPECT_TRUE(wide_plan.sequences);
  EXPECT_TRUE(wide_plan.tile_counter);  // causal 256-row tiles drawn from a counter
  // Paged k/v runs the 128-row tiles, unsplit too where the contiguous call would weigh the
  // 192-row ones (which read no pages), pages of 24 keys copied a row at a time; decode stays
  // on the portable kernels.
  AttnProblem p;
  p.b = 4, p.sq = 2048, p.sk = 2048, p.h = 16, p.hk = 16, p.d = 64, p.causal = true;
  p.per_sequence = true;
  p.page_size = 64;
  for (int splits : {0, 1, 3}) {
    const LaunchPlan paged = make_launch_plan(p, h100(), hopper_build(), PlanOptions{}, splits);
    EXPECT_EQ(paged.gate.family, KernelFamily::kHopperWgmma);
    EXPECT_TRUE(paged.paged && paged.sequences);
    EXPECT_EQ(paged.tiles.block_m, kHopperBaseRows) << "G=" << splits;
    EXPECT_EQ(paged.tiles.block_n, kHopperBlockN);
  }
  p.page_size = 24;
  const LaunchPlan rows = make_launch_plan(p, h100(), hopper_build(), PlanOptions{}, 0);
  EXPECT_EQ(rows.gate.family, KernelFamily::kHopperWgmma);
  EXPECT_TRUE(rows.page_rows);
  EXPECT_EQ(rows.tiles.block_m, kHopperBaseRows);
  p.page_size = 0, p.sq = 1, p.h = 32, p.hk = 8, p.d = 128, p.causal = false;
  EXPECT_EQ(make_launch_plan(p, h100(), hopper_build(), PlanOptions{}, 0).gate.family,
            KernelFamily::kPortableMma);
}

TEST(Plan, PagedChunksAtD64RunTheWideTilesOverAnyPages) {
  // (8,256,16,16,4096,64), causal: 128 heads of one 256-row tile, one wave, where 128-row tiles
  // take two. Over pages of any multiple of 64 keys the same wide tiles, each 64-key block one
  // TMA box; over smaller pages or others the wide tiles copying a row at a time; split, the
  // 128-row ones.
  AttnProblem p = problem(8, 16, 16, 256, 4096, 64, true);
  p.per_sequence = true;
  const LaunchPlan contiguous = plan_of(p);
  ASSERT_EQ(contiguous.gate.family, KernelFamily::kHopperWgmma);
  ASSERT_EQ(contiguous.tiles.block_m, kHopperWideRows);
  for (int page : {64, 192, 256}) {
    p.page_size = page;
    const LaunchPlan paged = plan_of(p);
    ASSERT_TRUE(paged.gate.ok && paged.paged && paged.sequences) << page;
    EXPECT_EQ(paged.tiles.block_m, kHopperWideRows) << page;
    EXPECT_EQ(paged.tiles.block_n, kHopperWideBlockN) << page;
    EXPECT_FALSE(paged.page_rows) << page;
    EXPECT_EQ(paged.num_splits, 1) << page;
    EXPECT_EQ(paged.forward_grid.x, contiguous.forward_grid.x) << page;
    EXPECT_EQ(plan_of(p, 3).tiles.block_m, kHopperBaseRows) << page;
  }
  for (int page : {1, 16, 48, 96}) {
    p.page_size = page;
    const LaunchPlan rows = plan_of(p);
    EXPECT_EQ(rows.tiles.block_m, kHopperWideRows) << page;
    EXPECT_EQ(rows.tiles.block_n, kHopperWideBlockN) << page;
    EXPECT_TRUE(rows.page_rows) << page;
    EXPECT_EQ(rows.num_splits, 1) << page;
    EXPECT_EQ(rows.forward_grid.x, contiguous.forward_grid.x) << page;
    EXPECT_TRUE(rows.tile_counter) << page;  // the causal wide tiles' walk, as contiguous
    const LaunchPlan split = plan_of(p, 3);
    EXPECT_EQ(split.tiles.block_m, kHopperBaseRows) << page;
    EXPECT_TRUE(split.page_rows) << page;
  }
}

}  // namespace
}  // namespace flashsplit
