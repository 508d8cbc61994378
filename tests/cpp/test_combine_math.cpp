// The split-KV combine of one row against a float64 computation of the same formula, on fresh
// random rows: up to 128 splits, lse spreads up to 1e4, splits that saw no key (-inf, with NaN
// garbage in their unwritten partials), strided layouts like the kernel's accumulators, and the
// splits dealt to 1-8 folds merged pairwise, as the kernel's lanes fold and merge them.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/combine_math.h"

namespace flashsplit {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kEps = FLT_EPSILON;

// A row as the kernel lays it out: lse_g at lse[g * lse_stride], O_g at o[g * o_stride + c].
// Everything between the entries is NaN so a read outside them shows up in the result.
struct Row {
  int num_splits = 1, d = 1, lse_stride = 1;
  long long o_stride = 1;
  std::vector<float> lse, o;
  float lse_at(int g) const { return lse[g * lse_stride]; }
  float o_at(int g, int c) const { return o[g * o_stride + c]; }
};

struct Reference {
  double lse;
  std::vector<double> out;
  std::vector<double> abs_weighted;  // sum_g w_g |O_gc|: the scale of each output's rounding
  std::vector<double> abs_visible;   // sum over splits that saw keys of |O_gc|
};

Reference reference_combine(const Row& row) {
  Reference ref;
  ref.out.assign(row.d, 0.0);
  ref.abs_weighted.assign(row.d, 0.0);
  ref.abs_visible.assign(row.d, 0.0);
  double max_lse = -INFINITY;
  for (int g = 0; g < row.num_splits; ++g) max_lse = std::max(max_lse, double(row.lse_at(g)));
  if (max_lse == -INFINITY) {
    ref.lse = -INFINITY;
    return ref;
  }
  double sum = 0.0;
  for (int g = 0; g < row.num_splits; ++g) sum += std::exp(double(row.lse_at(g)) - max_lse);
  ref.lse = max_lse + std::log(sum);
  for (int g = 0; g < row.num_splits; ++g) {
    if (row.lse_at(g) == -INFINITY) continue;
    double w = std::exp(double(row.lse_at(g)) - ref.lse);
    for (int c = 0; c < row.d; ++c) {
      ref.out[c] += w * row.o_at(g, c);
      ref.abs_weighted[c] += w * std::fabs(row.o_at(g, c));
      ref.abs_visible[c] += std::fabs(row.o_at(g, c));
    }
  }
  return ref;
}

// Float rounding bounds of combine_row: each fold or merge step rounds l twice (its rescale,
// its add), so the sum and the log lose about 2G + 2 log2(lanes) ulps, the final max + log one
// ulp of |lse|. The output inherits the lse error through every
// weight, plus a few ulps per weight and G ulps of accumulation; a split with large
// lse_g - lse rounds that difference, which costs at most eps/2 * |x| e^-x < eps of |O_g|.
double lse_tolerance(const Row& row, double lse_ref) {
  return (2 * row.num_splits + 16) * kEps + 2 * kEps * std::fabs(lse_ref);
}

void check_row(const Row& row, int lanes = 1) {
  SCOPED_TRACE("lanes " + std::to_string(lanes));
  Reference ref = reference_combine(row);
  std::vector<float> out(row.d, kNaN);
  float lse = combine_row(row.lse.data(), row.lse_stride, row.o.data(), row.o_stride,
                          row.num_splits, row.d, out.data(), lanes);
  if (ref.lse == -INFINITY) {
    ASSERT_EQ(lse, -INFINITY);
    for (int c = 0; c < row.d; ++c) ASSERT_EQ(out[c], 0.f) << "c=" << c;
    return;
  }
  ASSERT_TRUE(std::isfinite(lse)) << lse;
  double lse_tol = lse_tolerance(row, ref.lse);
  ASSERT_NEAR(lse, ref.lse, lse_tol);
  for (int c = 0; c < row.d; ++c) {
    double tol = (lse_tol + (row.num_splits + 8) * kEps) * ref.abs_weighted[c] +
                 kEps * ref.abs_visible[c];
    ASSERT_TRUE(std::isfinite(out[c])) << "c=" << c << " out=" << out[c];
    ASSERT_NEAR(out[c], ref.out[c], tol) << "c=" << c;
  }
}

// Random row: lse_g = base + spread * U(-1/2, 1/2), each split blind (-inf) with probability
// p_blind; blind splits' partials are NaN as the kernel leaves them unwritten.
Row random_row(std::mt19937& rng, int num_splits, int d, double base, double spread,
               double p_blind) {
  std::uniform_real_distribution<double> unit(-0.5, 0.5);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::normal_distribution<float> normal(0.f, 1.f);
  Row row;
  row.num_splits = num_splits;
  row.d = d;
  row.lse_stride = 1 + static_cast<int>(rng() % 4);
  row.o_stride = d + static_cast<long long>(rng() % 8);
  row.lse.assign(static_cast<size_t>(num_splits) * row.lse_stride, kNaN);
  row.o.assign(static_cast<size_t>(num_splits) * row.o_stride, kNaN);
  float scale = std::exp2(static_cast<float>(static_cast<int>(rng() % 9) - 4));
  for (int g = 0; g < num_splits; ++g) {
    bool blind = coin(rng) < p_blind;
    row.lse[g * row.lse_stride] = blind ? -INFINITY : static_cast<float>(base + spread * unit(rng));
    for (int c = 0; c < d; ++c) row.o[g * row.o_stride + c] = blind ? kNaN : scale * normal(rng);
  }
  return row;
}

uint32_t fresh_seed() { return std::random_device{}(); }

TEST(CombineMath, RandomRowsMatchFloat64) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const double spreads[] = {0.0, 1.0, 10.0, 100.0, 1e4};
  const double blind_probabilities[] = {0.0, 0.0, 0.3, 0.9};
  for (int i = 0; i < 4000; ++i) {
    int num_splits = 1 + static_cast<int>(rng() % 128);
    int d = 1 + static_cast<int>(rng() % 128);
    double base = std::uniform_real_distribution<double>(-1e4, 1e4)(rng);
    if (i % 2) base /= 1e3;  // half the rows near the usual lse magnitudes
    double spread = spreads[rng() % 5];
    double p_blind = blind_probabilities[rng() % 4];
    Row row = random_row(rng, num_splits, d, base, spread, p_blind);
    SCOPED_TRACE("row " + std::to_string(i) + " G=" + std::to_string(num_splits) +
                 " base=" + std::to_string(base) + " spread=" + std::to_string(spread));
    check_row(row, 1 << (rng() % 4));
    if (HasFatalFailure()) return;
  }
}

TEST(CombineMath, RowThatSawNoKeyIsZeroWithMinusInfLse) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int num_splits : {1, 2, 17, 128}) {
    Row row = random_row(rng, num_splits, 64, 0.0, 1.0, 1.0);  // every split blind, O all NaN
    for (int lanes : {1, 4}) {
      std::vector<float> out(64, kNaN);
      float lse = combine_row(row.lse.data(), row.lse_stride, row.o.data(), row.o_stride,
                              num_splits, 64, out.data(), lanes);
      EXPECT_EQ(lse, -INFINITY);
      for (float value : out) ASSERT_EQ(value, 0.f);
    }
  }
}

TEST(CombineMath, NaNPartialsOfBlindSplitsDoNotLeak) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 500; ++i) {
    int num_splits = 2 + static_cast<int>(rng() % 127);
    Row row = random_row(rng, num_splits, 32, 5.0, 20.0, 0.5);
    // At least one blind split and one that saw keys, in random positions.
    int blind = static_cast<int>(rng() % num_splits);
    int seeing = (blind + 1 + static_cast<int>(rng() % (num_splits - 1))) % num_splits;
    row.lse[blind * row.lse_stride] = -INFINITY;
    for (int c = 0; c < 32; ++c) row.o[blind * row.o_stride + c] = kNaN;
    row.lse[seeing * row.lse_stride] = 3.0f;
    for (int c = 0; c < 32; ++c) row.o[seeing * row.o_stride + c] = 1.0f + 0.01f * c;
    check_row(row, 1 << (rng() % 4));
    if (HasFatalFailure()) return;
  }
}

TEST(CombineMath, HugeSpreadsNeitherOverflowNorUnderflow) {
  // exp(1e4) overflows and exp(-1e4) underflows in any precision: only the max shift survives.
  for (float base : {-1e4f, -100.f, 88.f, 89.f, 1e4f}) {
    for (int num_splits : {2, 64, 128}) {
      Row row;
      row.num_splits = num_splits;
      row.d = 3;
      row.o_stride = 3;
      for (int g = 0; g < num_splits; ++g) {
        row.lse.push_back(base);
        row.o.insert(row.o.end(), {0.5f + g, -2.0f * g, 1.0f});
      }
      std::vector<float> out(3, kNaN);
      float lse = combine_row(row.lse.data(), 1, row.o.data(), 3, num_splits, 3, out.data());
      // Equal lse: each weight is 1/G, lse = base + log(G).
      double expected_lse = double(base) + std::log(double(num_splits));
      EXPECT_NEAR(lse, expected_lse, lse_tolerance(row, expected_lse)) << base;
      double mean0 = 0.5 + (num_splits - 1) / 2.0, mean1 = -(num_splits - 1.0);
      double rel = 4 * (2 * num_splits + 16) * kEps + 4 * kEps * std::fabs(expected_lse);
      EXPECT_NEAR(out[0], mean0, rel * (mean0 + num_splits)) << base;
      EXPECT_NEAR(out[1], mean1, rel * 2 * num_splits) << base;
      EXPECT_NEAR(out[2], 1.0, rel) << base;
      for (int lanes : {1, 2, 8}) check_row(row, lanes);
    }
  }
  // One split 2e4 above the others takes all the weight; the others vanish without overflow.
  Row row;
  row.num_splits = 3;
  row.d = 2;
  row.o_stride = 2;
  row.lse = {-1e4f, 1e4f, 0.f};
  row.o = {7.f, 7.f, 0.25f, -0.5f, 3.f, 3.f};
  std::vector<float> out(2, kNaN);
  float lse = combine_row(row.lse.data(), 1, row.o.data(), 2, 3, 2, out.data());
  EXPECT_EQ(lse, 1e4f);
  EXPECT_EQ(out[0], 0.25f);
  EXPECT_EQ(out[1], -0.5f);
}

TEST(CombineMath, SingleSplitIsExactIdentity) {
  uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 200; ++i) {
    Row row = random_row(rng, 1, 1 + static_cast<int>(rng() % 128), 0.0, 2e4, 0.0);
    for (int lanes : {1, 4}) {  // the other lanes' folds are empty
      std::vector<float> out(row.d, kNaN);
      float lse = combine_row(row.lse.data(), row.lse_stride, row.o.data(), row.o_stride, 1,
                              row.d, out.data(), lanes);
      ASSERT_EQ(lse, row.lse[0]);
      for (int c = 0; c < row.d; ++c) ASSERT_EQ(out[c], row.o[c]) << "c=" << c;
    }
  }
}

TEST(CombineMath, FoldRescaleIsZeroForAnEmptyFoldAndOneForAnUnmovedMax) {
  EXPECT_EQ(fold_rescale(-INFINITY, 3.f), 0.f);
  EXPECT_EQ(fold_rescale(-INFINITY, -INFINITY), 0.f);
  EXPECT_EQ(fold_rescale(4.5f, 4.5f), 1.f);
  EXPECT_NEAR(fold_rescale(1.f, 1.f + std::log(4.f)), 0.25f, 2 * kEps);
}

// The kernel's lanes per row and batches of loads: the fewest lanes that leave each at most
// one batch of 8 splits, at most 32 (a warp's shuffles).
TEST(CombineMath, LanesAndBatchesFollowTheSplitCount) {
  EXPECT_EQ(combine_lanes(1), 1);
  EXPECT_EQ(combine_lanes(8), 1);      // one batch of 8 already
  EXPECT_EQ(combine_lanes(9), 2);
  EXPECT_EQ(combine_lanes(32), 4);
  EXPECT_EQ(combine_lanes(33), 8);
  EXPECT_EQ(combine_lanes(256), 32);   // rows of 1024 threads at d=128, over 8 blocks
  EXPECT_EQ(combine_lanes(1024), 32);  // at most kCombineMaxLanes
  EXPECT_EQ(combine_batches(8), 1);
  EXPECT_EQ(combine_batches(33), 1);    // 5 per lane
  EXPECT_EQ(combine_batches(256), 1);   // 8 per lane
  EXPECT_EQ(combine_batches(257), 2);   // 9 per lane
  EXPECT_EQ(combine_batches(1024), 4);  // 32 per lane
  // A row takes d / 4 * lanes consecutive threads of 128-thread blocks.
  EXPECT_EQ(combine_blocks(7, 64, 2), 2);     // 7 rows of 32 threads: 224 threads
  EXPECT_EQ(combine_blocks(16, 128, 16), 64);  // 16 rows of 512 threads
  EXPECT_EQ(combine_blocks(3, 96, 8), 5);     // 3 rows of 192 threads: 576 threads
}

// A split whose scores met a NaN (a NaN query, key or value) reports lse NaN. The unsplit
// kernel returns NaN for that row, so the combine must too, whatever order the splits come in.
TEST(CombineMath, NaNLseOfAnySplitPoisonsTheRow) {
  for (int nan_at : {0, 1, 3}) {
    const int num_splits = 4, d = 8;
    std::vector<float> lse = {0.5f, -1.f, -INFINITY, 2.f};
    std::vector<float> o(num_splits * d, 1.f);
    lse[nan_at] = kNaN;
    std::vector<float> out(d, 0.f);
    for (int lanes : {1, 2, 4}) {
      float total = combine_row(lse.data(), 1, o.data(), d, num_splits, d, out.data(), lanes);
      EXPECT_TRUE(std::isnan(total)) << "nan_at=" << nan_at << " lanes=" << lanes;
      for (int c = 0; c < d; ++c) EXPECT_TRUE(std::isnan(out[c])) << "nan_at=" << nan_at << " c=" << c;
    }
  }
}

}  // namespace
}  // namespace flashsplit
