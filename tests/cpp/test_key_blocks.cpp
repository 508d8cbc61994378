// The mask rule and the split partition: which keys a row sees, which blocks need masking, and
// which key blocks each split of a query tile walks. Checked against a brute-force walk over
// every (query, key) pair under bottom-right causal masking.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/hopper_tiles.h"
#include "core/key_blocks.h"

namespace flashsplit {
namespace {

struct Shape {
  int sq, sk, block_m, block_n;
  bool causal;
};

std::string describe(const Shape& s) {
  return "sq=" + std::to_string(s.sq) + " sk=" + std::to_string(s.sk) +
         " block_m=" + std::to_string(s.block_m) + " block_n=" + std::to_string(s.block_n) +
         " causal=" + std::to_string(s.causal);
}

// seen[tile][key_block]: whether some row of the tile sees some key of the block.
std::vector<std::vector<bool>> brute_force_seen(const Shape& s) {
  int tiles = (s.sq + s.block_m - 1) / s.block_m;
  int blocks = (s.sk + s.block_n - 1) / s.block_n;
  std::vector<std::vector<bool>> seen(tiles, std::vector<bool>(blocks, false));
  for (int i = 0; i < s.sq; ++i) {
    for (int j = 0; j < s.sk; ++j) {
      bool visible = !s.causal || j <= i + s.sk - s.sq;  // bottom-right aligned
      if (visible) seen[i / s.block_m][j / s.block_n] = true;
    }
  }
  return seen;
}

void check_shape(const Shape& s, const std::vector<int>& split_counts) {
  SCOPED_TRACE(describe(s));
  std::vector<std::vector<bool>> seen = brute_force_seen(s);
  for (int tile = 0; tile < static_cast<int>(seen.size()); ++tile) {
    int m_end = std::min(s.sq, (tile + 1) * s.block_m);
    int visible = visible_key_blocks(m_end, s.sq, s.sk, s.block_n, s.causal);
    // The blocks a tile sees form the prefix [0, visible): masking only cuts from the right.
    int brute_visible = 0;
    for (bool b : seen[tile]) brute_visible += b ? 1 : 0;
    ASSERT_EQ(visible, brute_visible) << "tile " << tile;
    for (int kb = 0; kb < static_cast<int>(seen[tile].size()); ++kb) {
      ASSERT_EQ(seen[tile][kb], kb < visible) << "tile " << tile << " key block " << kb;
    }

    for (int g_count : split_counts) {
      SCOPED_TRACE("tile " + std::to_string(tile) + " G=" + std::to_string(g_count));
      std::vector<int> covered(visible, 0);
      int expected_begin = 0, min_size = visible, max_size = 0;
      for (int g = 0; g < g_count; ++g) {
        KeyBlockRange r = split_key_blocks(visible, g_count, g);
        ASSERT_EQ(r.begin, expected_begin) << "split " << g << " must start where the last ended";
        ASSERT_LE(r.begin, r.end) << "split " << g;
        for (int kb = r.begin; kb < r.end; ++kb) {
          ASSERT_LT(kb, visible) << "split " << g << " walks a block the tile cannot see";
          ++covered[kb];
        }
        int size = r.end - r.begin;
        if (size == 0) {
          ASSERT_LT(visible, g_count) << "split " << g << " is empty";
        }
        min_size = std::min(min_size, size);
        max_size = std::max(max_size, size);
        expected_begin = r.end;
      }
      ASSERT_EQ(expected_begin, visible) << "the splits must end at the last visible block";
      for (int kb = 0; kb < visible; ++kb) ASSERT_EQ(covered[kb], 1) << "key block " << kb;
      ASSERT_LE(max_size - min_size, 1) << "split sizes must be balanced";
    }
  }
}

const std::vector<int> kSplitCounts = {1, 2, 3, 4, 5, 7, 8, 16, 33, 128};

TEST(SplitPartition, CoversVisibleBlocksExactlyOnceOnEdgeShapes) {
  for (int sq : {1, 7, 64, 65, 128, 200, 257}) {
    for (int sk : {1, 5, 63, 64, 129, 300, 513}) {
      for (int block_m : {64, 128}) {
        for (int block_n : {32, 64, 128}) {
          for (bool causal : {false, true}) {
            check_shape(Shape{sq, sk, block_m, block_n, causal}, kSplitCounts);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(SplitPartition, CoversVisibleBlocksExactlyOnceOnRandomShapes) {
  uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 300; ++i) {
    Shape s{1 + static_cast<int>(rng() % 700), 1 + static_cast<int>(rng() % 700),
            16 << (rng() % 4), 16 << (rng() % 4), rng() % 2 == 0};
    std::vector<int> counts = {1 + static_cast<int>(rng() % 4), 1 + static_cast<int>(rng() % 50),
                               1 + static_cast<int>(rng() % 128)};
    check_shape(s, counts);
    if (HasFatalFailure()) return;
  }
}

TEST(SplitPartition, TilesAboveTheCausalDiagonalSeeNothingWhenQueriesOutnumberKeys) {
  // sq > sk, causal: rows i < sq - sk see no key, so whole leading tiles have 0 visible blocks.
  const int sq = 1000, sk = 100, block_m = 128, block_n = 64;
  for (int tile = 0; tile * block_m < sq; ++tile) {
    int m_end = std::min(sq, (tile + 1) * block_m);
    int visible = visible_key_blocks(m_end, sq, sk, block_n, true);
    if (m_end - 1 < sq - sk) {
      EXPECT_EQ(visible, 0) << "tile " << tile;
      for (int g = 0; g < 4; ++g) {
        KeyBlockRange r = split_key_blocks(visible, 4, g);
        EXPECT_EQ(r.begin, r.end) << "a split of a blind tile has no work";
      }
    } else {
      EXPECT_GT(visible, 0) << "tile " << tile;
    }
  }
  EXPECT_EQ(visible_key_blocks(sq, sq, sk, block_n, true), 2);  // the last tile sees all keys
  EXPECT_EQ(visible_key_blocks(sq, sq, sk, block_n, false), 2);
}

// The mask rule against its definition: query i sees key j iff j < sk and, with the mask,
// j <= i + sk - sq.
TEST(MaskRule, LastVisibleKeyIsTheBottomRightDiagonal) {
  for (int sq : {1, 5, 64, 100}) {
    for (int sk : {1, 7, 64, 300}) {
      for (int query = 0; query < sq; ++query) {
        int last_seen = -1;
        for (int key = 0; key < sk; ++key)
          if (key <= query + sk - sq) last_seen = key;
        const int limit = last_visible_key(query, sq, sk, true);
        EXPECT_EQ(limit < 0 ? -1 : limit, last_seen) << sq << " " << sk << " " << query;
        EXPECT_EQ(last_visible_key(query, sq, sk, false), sk - 1);
      }
    }
  }
}

// A block needs its scores masked iff one of its key slots (past sk included) is hidden from
// the tile's first row; later rows see at least as much, so the first row decides for the tile.
TEST(MaskRule, BlocksNeedMaskingWhereAKeyIsHiddenFromTheFirstRow) {
  const int block_n = 16;
  for (bool causal : {false, true}) {
    for (int sq : {8, 40, 77}) {
      for (int sk : {16, 50, 129}) {
        for (int first_query = 0; first_query < sq; ++first_query) {
          EXPECT_GE(last_visible_key(std::min(first_query + 1, sq - 1), sq, sk, causal),
                    last_visible_key(first_query, sq, sk, causal));
          for (int n0 = 0; n0 < sk; n0 += block_n) {
            bool hidden = false;
            for (int key = n0; key < n0 + block_n; ++key)
              hidden = hidden || key > last_visible_key(first_query, sq, sk, causal);
            EXPECT_EQ(block_needs_mask(n0, block_n, first_query, sq, sk, causal), hidden)
                << causal << " " << sq << " " << sk << " " << first_query << " " << n0;
          }
        }
      }
    }
  }
}

// The key boxes of a sequence's blocks: every box ends by the sequence's last key, so no row
// past the sequence is read, and over its blocks' own keys (box rows from n * block_n on,
// below sk) every key of the sequence is visited exactly once.
TEST(KeyBoxes, NoBoxReadsPastTheSequenceAndEveryKeyIsVisitedOnce) {
  for (int block_n : {64, 80, 112, 128}) {
    for (int sk : {1, 5, 63, 64, 65, 79, 80, 81, 127, 128, 129, 300, 513}) {
      std::vector<int> visits(sk, 0);
      const int blocks = (sk + block_n - 1) / block_n;
      for (int n = 0; n < blocks; ++n) {
        const int box = key_box_start(n, block_n, sk);
        EXPECT_LE(box + block_n, sk) << "block_n=" << block_n << " sk=" << sk << " n=" << n;
        EXPECT_LE(box, n * block_n);
        for (int row = 0; row < block_n; ++row) {
          const int key = box + row;
          if (key >= n * block_n && key < sk) ++visits[key];
        }
      }
      for (int key = 0; key < sk; ++key)
        ASSERT_EQ(visits[key], 1) << "block_n=" << block_n << " sk=" << sk << " key " << key;
    }
  }
  EXPECT_EQ(key_box_start(0, 128, 300), 0);
  EXPECT_EQ(key_box_start(2, 128, 300), 172);  // the last block's box ends at key 299
  EXPECT_EQ(key_box_start(0, 128, 5), -123);   // rows before the first key: filled with zeros
}

// Paged k/v on the Hopper kernels: a key block of 128 keys is loaded as boxes of a page's rows
// (or one box inside a page of whole blocks), each from its page at page_box_row. A box row
// inside its page holds the key boxed_key names, and none past the sequence; a row outside it
// (loaded as zeros) is masked; and the unmasked columns visit every key exactly once.
TEST(KeyBoxes, PagedBoxesReadNoSlotPastTheSequenceAndLabelTheirKeys) {
  constexpr int block_n = kHopperBlockN;
  // Boxes of a page's rows (16 and 32 as well: the rule holds for any power of two dividing a
  // block), or of a block's inside pages of whole blocks.
  for (int page : {16, 32, 64, 128, 256, 384}) {
    const int box_rows = page < block_n ? page : block_n;
    for (int sk : {1, 5, 15, 16, 17, 100, 127, 128, 129, 255, 256, 257, 300, 513, 1000}) {
      std::vector<int> visits(sk, 0);
      for (int n = 0; n * block_n < sk; ++n) {
        for (int c = 0; c < block_n; ++c) {
          const int first = n * block_n + c / box_rows * box_rows;
          const int page_start = first / page * page;
          const int row = page_box_row(first, box_rows, page_start, sk) + c % box_rows;
          const BoxedKey k = boxed_key(n * block_n, c, box_rows, sk);
          const std::string where = "page " + std::to_string(page) + " sk " +
                                    std::to_string(sk) + " n " + std::to_string(n) + " c " +
                                    std::to_string(c);
          if (row >= 0 && row < page) {
            EXPECT_LT(page_start + row, sk) << where;  // no slot past the sequence
            EXPECT_EQ(k.key, page_start + row) << where;
          } else {
            EXPECT_LT(k.key, k.first_of_box) << where;  // a zero row: masked
          }
          if (k.key >= k.first_of_box && k.key < sk) ++visits[k.key];
        }
      }
      for (int key = 0; key < sk; ++key)
        ASSERT_EQ(visits[key], 1) << "page " << page << " sk " << sk << " key " << key;
    }
  }
  // Boxes of a whole block label their columns as key_box_start's box does.
  for (int c : {0, 77, 127}) {
    EXPECT_EQ(boxed_key(256, c, 128, 300).key, key_box_start(2, 128, 300) + c);
    EXPECT_EQ(boxed_key(256, c, 128, 300).first_of_box, 256);
  }
  // The pages the Hopper kernels read; the portable kernels read the others.
  for (int page : {1, 8, 16, 24, 32, 48, 96, 200}) {
    EXPECT_EQ(hopper_page_box_rows(page), 0) << page;
  }
  EXPECT_EQ(hopper_page_box_rows(64), 64);
  EXPECT_EQ(hopper_page_box_rows(128), 128);
  EXPECT_EQ(hopper_page_box_rows(512), 128);
  // The wide tiles' 64-key blocks: a box of a block's rows from any multiple of 64 keys.
  for (int page : {64, 128, 192, 256, 4096}) EXPECT_EQ(hopper_page_box_rows(page, 64), 64) << page;
  for (int page : {1, 16, 32, 48, 96, 200}) EXPECT_EQ(hopper_page_box_rows(page, 64), 0) << page;
  // Contiguous k/v loads as boxes too; pages as hopper_page_box_rows says.
  EXPECT_TRUE(hopper_keys_load_as_boxes(0));
  for (int page : {1, 8, 16, 24, 32, 48, 64, 96, 128, 200, 512}) {
    EXPECT_EQ(hopper_keys_load_as_boxes(page), hopper_page_box_rows(page) != 0) << page;
    EXPECT_EQ(hopper_keys_load_as_boxes(page, 64), hopper_page_box_rows(page, 64) != 0) << page;
  }
}

// Contiguous k/v: a key block is one box of its rows, or two of 64 rows on tiles packing a
// GQA group's heads; either way whole boxes of at most 256 rows (TMA's box limit) fill it.
TEST(HopperKeyBoxes, ContiguousBlocksAreOneBoxOrTwoOf64RowsWhenHeadsArePacked) {
  EXPECT_EQ(hopper_key_box_rows(false), kHopperBlockN);
  EXPECT_EQ(hopper_key_box_rows(false, 64), 64);
  EXPECT_EQ(hopper_key_box_rows(true), 64);
  for (bool packed : {false, true}) {
    const int rows = hopper_key_box_rows(packed);
    EXPECT_EQ(kHopperBlockN % rows, 0) << packed;
    EXPECT_LE(rows, 256) << packed;
  }
}

}  // namespace
}  // namespace flashsplit
