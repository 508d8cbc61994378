// The tail split must cover every key block of the last round exactly once, cut no tile into
// more parts than it reports, give no SM more than ceil(W / P) blocks, and stay off where it
// cannot pay.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/tail_split.h"

namespace flashsplit {
namespace {

// Walks every chunk's two pieces and checks them against the tiles they cut.
void expect_exact_cover(const TailSplit& t) {
  ASSERT_TRUE(t.active());
  const int nb = t.key_blocks;
  std::vector<int> covered(static_cast<size_t>(t.tail_tiles) * nb, 0);
  std::vector<int> parts_of(t.tail_tiles, -1);
  std::vector<std::vector<int>> part_seen(t.tail_tiles);
  long long longest = 0;
  ASSERT_LE(t.chunks, t.work());
  for (int j = 0; j < t.chunks + 3; ++j) {  // chunks past the last are empty
    long long units = 0;
    int previous_tile = -1;
    for (int half = 0; half < 2; ++half) {
      const TailPiece piece = tail_piece(t, j, half);
      if (piece.empty()) continue;
      ASSERT_LT(piece.tile, t.tail_tiles);
      ASSERT_GT(piece.tile, previous_tile) << "a chunk's pieces run in tile order";
      previous_tile = piece.tile;
      ASSERT_GE(piece.kb_begin, 0);
      ASSERT_LE(piece.kb_end, nb);
      ASSERT_GE(piece.parts, 1);
      ASSERT_LE(piece.parts, t.max_parts);
      ASSERT_LT(piece.part, piece.parts);
      if (parts_of[piece.tile] < 0) parts_of[piece.tile] = piece.parts;
      ASSERT_EQ(parts_of[piece.tile], piece.parts) << "tile " << piece.tile;
      part_seen[piece.tile].push_back(piece.part);
      for (int kb = piece.kb_begin; kb < piece.kb_end; ++kb)
        ++covered[static_cast<size_t>(piece.tile) * nb + kb];
      units += piece.kb_end - piece.kb_begin;
    }
    longest = std::max(longest, units);
  }
  for (size_t u = 0; u < covered.size(); ++u) ASSERT_EQ(covered[u], 1) << "unit " << u;
  int max_parts = 0;
  for (int tile = 0; tile < t.tail_tiles; ++tile) {
    std::vector<int> seen = part_seen[tile];
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(static_cast<int>(seen.size()), parts_of[tile]);
    for (int k = 0; k < static_cast<int>(seen.size()); ++k) ASSERT_EQ(seen[k], k);
    max_parts = std::max(max_parts, parts_of[tile]);
  }
  EXPECT_EQ(max_parts, t.max_parts);
  EXPECT_EQ(longest, (t.work() + t.chunks - 1) / t.chunks);
  for (int half = 0; half < 2; ++half) EXPECT_TRUE(tail_piece(t, t.chunks, half).empty());
}

TEST(TailSplit, BenchSeqlenGrids) {
  // 16k tokens on 132 SMs: 192-row tiles at d=128 (1408 tiles from 2048 to 4096 rows, 1376 from
  // 8192) and at d=64 (2816 at 2048 and 4096 rows).
  for (int nb : {32, 64, 128}) {
    const TailSplit t = plan_tail_split(nb == 32 ? 1408 : 1376, nb, 132);
    EXPECT_EQ(t.main_tiles, 10 * 132);
    EXPECT_EQ(t.tail_tiles, nb == 32 ? 88 : 56);
    EXPECT_EQ(t.chunks, 132);
    expect_exact_cover(t);
  }
  expect_exact_cover(plan_tail_split(2816, 16, 132));
  expect_exact_cover(plan_tail_split(2816, 32, 132));
  // Too little to gain once a piece's overhead is counted: 1408 tiles of 16 blocks (a chunk of
  // 11 + 6 against 16) and 3072 tiles of 8 (3 + 6 against 8).
  EXPECT_FALSE(plan_tail_split(1408, 16, 132).active());
  EXPECT_FALSE(plan_tail_split(3072, 8, 132).active());
}

TEST(TailSplit, CoversEveryUnitOverManyShapes) {
  int active = 0;
  for (int sms : {1, 2, 7, 78, 132, 144}) {
    for (long long tiles = sms + 1; tiles < 4LL * sms + 3; tiles += 1 + sms / 13) {
      for (int nb : {8, 9, 13, 31, 64, 257}) {
        const TailSplit t = plan_tail_split(tiles, nb, sms);
        if (t.active()) expect_exact_cover(t), ++active;
      }
    }
  }
  EXPECT_GT(active, 300) << "the cover check must have run on many splits";
}

TEST(TailSplit, FewTailTilesAreCutIntoManyParts) {
  // One tile left over on 132 SMs: its 64 blocks go to 16 chunks of kTailMinChunkBlocks.
  const TailSplit t = plan_tail_split(133, 64, 132);
  ASSERT_TRUE(t.active());
  EXPECT_EQ(t.chunks, 64 / kTailMinChunkBlocks);
  EXPECT_EQ(t.max_parts, 64 / kTailMinChunkBlocks);
  expect_exact_cover(t);
  EXPECT_FALSE(plan_tail_split(133, 8, 132).active()) << "8 blocks: 4 + 6 against 8";
}

TEST(TailSplit, AppliesToUnsplitUnmaskedCallsOnAllButTheWideTiles) {
  for (int block_n : {128, 144, 112, 80}) {
    EXPECT_TRUE(tail_split_applies(false, false, block_n)) << block_n;
    EXPECT_FALSE(tail_split_applies(true, false, block_n)) << "tiles of unequal work";
    EXPECT_FALSE(tail_split_applies(false, true, block_n)) << "split calls";
  }
  EXPECT_FALSE(tail_split_applies(false, false, kHopperWideBlockN)) << "the wide tiles";
}

TEST(TailSplit, PiecesOfTheLargeHeadDimsBlocksCostTwiceTheOverhead) {
  EXPECT_EQ(tail_overhead_blocks(128), kTailOverheadBlocks);
  EXPECT_EQ(tail_overhead_blocks(144), kTailOverheadBlocks);
  EXPECT_EQ(tail_overhead_blocks(112), 2 * kTailOverheadBlocks);
  EXPECT_EQ(tail_overhead_blocks(80), 2 * kTailOverheadBlocks);
  // d=192 at 4096 keys: 1280 tiles of 37 blocks of 112 keys, 9 rounds and 92 tiles in chunks
  // of 26 blocks: 11 blocks saved pays for 6 of overhead, not for 12.
  EXPECT_TRUE(plan_tail_split(1280, 37, 132).active());
  EXPECT_FALSE(plan_tail_split(1280, 37, 132, tail_overhead_blocks(112)).active());
  EXPECT_TRUE(plan_tail_split(1280, 74, 132, tail_overhead_blocks(112)).active()) << "8192 keys";
  const TailSplit t = plan_tail_split(1280, 74, 132, 12);
  EXPECT_NEAR(tail_split_time_share(t, 12), (9.0 + (52.0 + 12.0) / 74.0) / 10.0, 1e-12);
}

TEST(TailSplit, StaysOffWhereItCannotPay) {
  EXPECT_FALSE(plan_tail_split(2048, kTailOverheadBlocks + 1, 132).active());  // short tiles
  EXPECT_FALSE(plan_tail_split(132 * 15, 64, 132).active());  // a full last round
  EXPECT_FALSE(plan_tail_split(100, 64, 132).active());       // no full round
  EXPECT_FALSE(plan_tail_split(132, 64, 132).active());
  EXPECT_FALSE(plan_tail_split(2048, 64, 0).active());  // no SM count
  EXPECT_FALSE(plan_tail_split(2048, 0, 132).active());
  // The last round nearly full: 131 of 132 tiles, a chunk of 64 units or 63.
  EXPECT_FALSE(plan_tail_split(2 * 132 + 131, 64, 132).active());
  // A gain below 1% of many rounds: 200 rounds and a tail of 60 / 132 tiles.
  EXPECT_FALSE(plan_tail_split(200LL * 132 + 60, 64, 132).active());
  EXPECT_TRUE(plan_tail_split(2LL * 132 + 60, 64, 132).active());
}

TEST(TailSplit, TimeShareCountsTheBusiestChunkInPlaceOfTheLastRound) {
  // 288 tiles of 256 key blocks on 132 SMs: 2 rounds, then 24 tiles (6144 units) in 132 chunks
  // of at most 47 units, each with a piece's overhead, against a third round.
  const TailSplit t = plan_tail_split(288, 256, 132);
  ASSERT_TRUE(t.active());
  EXPECT_NEAR(tail_split_time_share(t, kTailOverheadBlocks),
              (2.0 + (47.0 + kTailOverheadBlocks) / 256.0) / 3.0, 1e-12);
  EXPECT_LT(tail_split_time_share(t, kTailOverheadBlocks), 0.75);
  EXPECT_EQ(tail_split_time_share(TailSplit{}, kTailOverheadBlocks), 1.0)
      << "no tail split, no share";
}

TEST(TailSplit, WorkspaceHoldsOneRecordPerPieceAndWarp) {
  const TailSplit t = plan_tail_split(2048, 64, 132);
  ASSERT_TRUE(t.active());
  const long long records = static_cast<long long>(t.tail_tiles) * t.max_parts * 2 * 4;
  EXPECT_EQ(tail_counters_offset_bytes(t, 128, 128), records * 32 * (64 + 4) * 4);
  EXPECT_EQ(tail_workspace_bytes(t, 128, 128),
            static_cast<size_t>(records * 32 * 68 * 4 + t.tail_tiles * 2 * 4 * 4));
  EXPECT_EQ(tail_workspace_bytes(TailSplit{}, 128, 128), 0u);
}

}  // namespace
}  // namespace flashsplit
