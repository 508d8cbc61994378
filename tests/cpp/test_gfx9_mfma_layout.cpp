// kernels/gfx9/mfma_layout.h against AMD's published operand layouts, written here a second
// time and independently: entries printed by AMD's Matrix Instruction Calculator
// (`matrix_calculator.py -a cdna3 -i v_mfma_f32_32x32x8_bf16 --matrix-entry ...`; the CDNA2
// `*_1k` and f16 forms print the same layout), and the lane distribution constants of CK-Tile's
// warp_gemm_attribute_mfma_impl.hpp for all four shapes. Then an MFMA emulated from registers
// alone equals a plain matmul, and the P^T key permutation is what S^T's accumulators hold.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "gfx9_emulation.h"
#include "kernels/gfx9/mfma_layout.h"

namespace flashsplit {
namespace gfx9 {
namespace {

using testing::emulated_mfma;
using testing::kLanes;
using testing::nan_regs;
using testing::Regs;

std::string name(Mfma op) {
  const MfmaShape s = mfma_shape(op);
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

// CK-Tile's description of a single-block MFMA: A rows spread over kAMLane lanes, k over
// kABKLane lane groups with kABKPerLane contiguous elements each; C rows as
// (kCM0PerLane blocks) x (kCMLane lane groups) x (kCM1PerLane registers), columns over kCNLane.
struct CkDistribution {
  int am_lane, abk_lane, abk_per_lane, cm_lane, cn_lane, cm0_per_lane, cm1_per_lane;
};

CkDistribution ck(Mfma op) {
  switch (op) {
    case Mfma::k32x32x8: return {32, 2, 4, 2, 32, 4, 4};
    case Mfma::k16x16x16: return {16, 4, 4, 4, 16, 1, 4};
    case Mfma::k16x16x32: return {16, 4, 8, 4, 16, 1, 4};
    case Mfma::k32x32x16: return {32, 2, 8, 2, 32, 4, 4};
  }
  return {};
}

// Published A[row][k] of lane, element i.
RowK published_a(Mfma op, int lane, int i) {
  const CkDistribution c = ck(op);
  return {lane % c.am_lane, (lane / c.am_lane) * c.abk_per_lane + i};
}
KCol published_b(Mfma op, int lane, int i) {
  const CkDistribution c = ck(op);
  return {(lane / c.am_lane) * c.abk_per_lane + i, lane % c.am_lane};
}
RowCol published_d(Mfma op, int lane, int reg) {
  const CkDistribution c = ck(op);
  const int block = reg / c.cm1_per_lane, within = reg % c.cm1_per_lane;
  const int group = lane / c.cn_lane;
  return {block * c.cm_lane * c.cm1_per_lane + group * c.cm1_per_lane + within, lane % c.cn_lane};
}

TEST(Gfx9MfmaLayout, ShapesMatchTheInstructions) {
  for (Mfma op : kAllMfma) {
    const MfmaShape s = mfma_shape(op);
    const CkDistribution c = ck(op);
    EXPECT_EQ(s.m, c.am_lane) << name(op);
    EXPECT_EQ(s.k, c.abk_lane * c.abk_per_lane) << name(op);
    EXPECT_EQ(s.k_per_lane, c.abk_per_lane) << name(op);
    EXPECT_EQ(s.acc_regs, c.cm0_per_lane * c.cm1_per_lane) << name(op);
    EXPECT_EQ(s.m * s.k, kLanes * s.k_per_lane) << name(op);
    EXPECT_EQ(s.m * s.n, kLanes * s.acc_regs) << name(op);
  }
}

TEST(Gfx9MfmaLayout, MatchesCalculatorEntries) {
  struct Entry {
    Mfma op;
    char matrix;  // 'A', 'B' (register holds elements 2 * reg and 2 * reg + 1) or 'D'
    int lane, reg, row, col;  // row, col of the register's (first) element
  };
  // v_mfma_f32_32x32x8_bf16 and v_mfma_f32_16x16x16_f16, CDNA3 (calculator output).
  const Entry entries[] = {
      {Mfma::k32x32x8, 'A', 37, 0, 5, 4},    {Mfma::k32x32x8, 'A', 47, 1, 15, 6},
      {Mfma::k32x32x8, 'A', 63, 0, 31, 4},   {Mfma::k32x32x8, 'B', 50, 1, 6, 18},
      {Mfma::k32x32x8, 'B', 13, 1, 2, 13},   {Mfma::k32x32x8, 'D', 37, 5, 13, 5},
      {Mfma::k32x32x8, 'D', 0, 6, 10, 0},    {Mfma::k32x32x8, 'D', 0, 15, 27, 0},
      {Mfma::k32x32x8, 'D', 47, 6, 14, 15},  {Mfma::k32x32x8, 'D', 63, 15, 31, 31},
      {Mfma::k16x16x16, 'A', 37, 0, 5, 8},   {Mfma::k16x16x16, 'A', 31, 1, 15, 6},
      {Mfma::k16x16x16, 'A', 63, 1, 15, 14}, {Mfma::k16x16x16, 'B', 50, 1, 14, 2},
      {Mfma::k16x16x16, 'B', 47, 0, 8, 15},  {Mfma::k16x16x16, 'D', 31, 2, 6, 15},
      {Mfma::k16x16x16, 'D', 32, 3, 11, 0},  {Mfma::k16x16x16, 'D', 63, 3, 15, 15},
  };
  for (const Entry& e : entries) {
    SCOPED_TRACE(name(e.op) + " " + e.matrix + " lane " + std::to_string(e.lane) + " reg " +
                 std::to_string(e.reg));
    if (e.matrix == 'A') {
      for (int half = 0; half < 2; ++half) {
        const RowK a = mfma_a(e.op, e.lane, 2 * e.reg + half);
        EXPECT_EQ(a.row, e.row);
        EXPECT_EQ(a.k, e.col + half);
      }
    } else if (e.matrix == 'B') {
      for (int half = 0; half < 2; ++half) {
        const KCol b = mfma_b(e.op, e.lane, 2 * e.reg + half);
        EXPECT_EQ(b.k, e.row + half);
        EXPECT_EQ(b.col, e.col);
      }
    } else {
      const RowCol d = mfma_acc(e.op, e.lane, e.reg);
      EXPECT_EQ(d.row, e.row);
      EXPECT_EQ(d.col, e.col);
    }
  }
}

TEST(Gfx9MfmaLayout, MatchesPublishedLaneDistribution) {
  for (Mfma op : kAllMfma) {
    const MfmaShape s = mfma_shape(op);
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int i = 0; i < s.k_per_lane; ++i) {
        EXPECT_EQ(mfma_a(op, lane, i).row, published_a(op, lane, i).row) << name(op);
        EXPECT_EQ(mfma_a(op, lane, i).k, published_a(op, lane, i).k) << name(op);
        EXPECT_EQ(mfma_b(op, lane, i).k, published_b(op, lane, i).k) << name(op);
        EXPECT_EQ(mfma_b(op, lane, i).col, published_b(op, lane, i).col) << name(op);
      }
      for (int r = 0; r < s.acc_regs; ++r) {
        EXPECT_EQ(mfma_acc(op, lane, r).row, published_d(op, lane, r).row) << name(op);
        EXPECT_EQ(mfma_acc(op, lane, r).col, published_d(op, lane, r).col) << name(op);
      }
    }
  }
}

// Registers loaded by the published layout, multiplied by the MFMA emulated from the header's
// maps, read back by the published layout: the product of the matrices, for every shape.
TEST(Gfx9MfmaLayout, EmulatedMfmaEqualsMatmul) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-8, 8);
  for (Mfma op : kAllMfma) {
    const MfmaShape s = mfma_shape(op);
    std::vector<double> A(s.m * s.k), B(s.k * s.n), C(s.m * s.n);
    for (double& x : A) x = small(rng);
    for (double& x : B) x = small(rng);
    for (double& x : C) x = small(rng);
    Regs a = nan_regs(), b = nan_regs(), acc = nan_regs();
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int i = 0; i < s.k_per_lane; ++i) {
        const RowK pa = published_a(op, lane, i);
        const KCol pb = published_b(op, lane, i);
        a[lane][i] = A[pa.row * s.k + pa.k];
        b[lane][i] = B[pb.k * s.n + pb.col];
      }
      for (int r = 0; r < s.acc_regs; ++r) {
        const RowCol pd = published_d(op, lane, r);
        acc[lane][r] = C[pd.row * s.n + pd.col];
      }
    }
    int clashes = 0;
    emulated_mfma(op, a, b, acc, &clashes);
    EXPECT_EQ(clashes, 0) << name(op);
    std::vector<int> written(s.m * s.n, 0);
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int r = 0; r < s.acc_regs; ++r) {
        const RowCol pd = published_d(op, lane, r);
        double want = C[pd.row * s.n + pd.col];
        for (int k = 0; k < s.k; ++k) want += A[pd.row * s.k + k] * B[k * s.n + pd.col];
        EXPECT_EQ(acc[lane][r], want) << name(op) << " lane " << lane << " reg " << r;
        ++written[pd.row * s.n + pd.col];
      }
    }
    for (int w : written) EXPECT_EQ(w, 1) << name(op) << ": D has an entry held twice or never";
  }
}

// The key each P^T element holds, computed from S^T's accumulator rows, is pv_key in every PV
// step; over a column's lane groups the keys of a step are each key once; pv_slot inverts it.
TEST(Gfx9MfmaLayout, PvKeyIsWhatTheAccumulatorsHold) {
  for (Mfma op : kAllMfma) {
    const MfmaShape s = mfma_shape(op);
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int step = 0; step < 8; ++step) {
        for (int i = 0; i < s.k_per_lane; ++i) {
          const AccSlot src = pv_source(op, step, i);
          ASSERT_LT(src.reg, s.acc_regs);
          // S^T tile `tile` covers keys [tile * m, tile * m + m); the register's row is its key.
          const int key = src.tile * s.m + published_d(op, lane, src.reg).row;
          EXPECT_EQ(key - step * s.k, pv_key(op, lane, i)) << name(op);
          // The accumulator's column is the lane's query: P^T's column, as B needs.
          EXPECT_EQ(published_d(op, lane, src.reg).col, published_b(op, lane, i).col) << name(op);
        }
      }
    }
    for (int col = 0; col < s.n; ++col) {
      std::set<int> keys;
      for (int g = 0; g < kLanes / s.n; ++g)
        for (int i = 0; i < s.k_per_lane; ++i) keys.insert(pv_key(op, g * s.n + col, i));
      EXPECT_EQ(static_cast<int>(keys.size()), s.k) << name(op);
      EXPECT_EQ(*keys.begin(), 0) << name(op);
      EXPECT_EQ(*keys.rbegin(), s.k - 1) << name(op);
    }
    for (int key = 0; key < s.k; ++key) {
      const int slot = pv_slot(op, key);
      EXPECT_EQ(pv_key(op, slot / s.k_per_lane * s.m, slot % s.k_per_lane), key) << name(op);
    }
  }
  // Written out: the 4-element forms need no permutation; the 8-element forms interleave
  // runs of 4 keys from the accumulator's 4-row groups.
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < 8; ++i) {
      if (i < 4) {
        EXPECT_EQ(pv_key(Mfma::k32x32x8, lane, i), 4 * (lane / 32) + i);
        EXPECT_EQ(pv_key(Mfma::k16x16x16, lane, i), 4 * (lane / 16) + i);
      }
      EXPECT_EQ(pv_key(Mfma::k16x16x32, lane, i), 16 * (i / 4) + 4 * (lane / 16) + i % 4);
      EXPECT_EQ(pv_key(Mfma::k32x32x16, lane, i), 8 * (i / 4) + 4 * (lane / 32) + i % 4);
    }
  }
}

// A query's statistics reduce over the lanes of its column: l ^ n, l ^ 2n, ..., l ^ 32.
TEST(Gfx9MfmaLayout, QueryLaneGroupsShareAColumn) {
  for (Mfma op : kAllMfma) {
    const MfmaShape s = mfma_shape(op);
    for (int lane = 0; lane < kLanes; ++lane) {
      std::set<int> reached = {lane};
      for (int offset = s.n; offset < kLanes; offset *= 2) {
        std::set<int> next = reached;
        for (int l : reached) next.insert(l ^ offset);
        reached = next;
      }
      EXPECT_EQ(static_cast<int>(reached.size()), query_lane_groups(op)) << name(op);
      for (int l : reached) EXPECT_EQ(lane_col(op, l), lane_col(op, lane)) << name(op);
    }
  }
}

}  // namespace
}  // namespace gfx9
}  // namespace flashsplit
