// The split-KV combine for one query row: LSE = log sum_g exp(LSE_g), O = sum_g w_g O_g with
// w_g = exp(LSE_g - LSE). Shared by the combine kernel and the host tests.
//
// The combine folds a row's splits one at a time, as the online softmax folds key blocks: a fold
// keeps m (the largest LSE_g so far), l = sum_g exp(LSE_g - m) and acc = sum_g exp(LSE_g - m) O_g,
// and O = acc / l, LSE = m + log l at the end. Nothing waits for the row's total before a
// partial is read, so the kernel issues a row's LSE and partial loads together (one round trip
// to L2 instead of one for the LSEs and one more per chunk of partials), and several threads
// fold disjoint sets of a row's splits and then merge their folds.
#pragma once

#include <math.h>

#include <vector>

#include "core/host_device.h"

namespace flashsplit {

// The combine kernel has each thread fold this many of its splits per batch of loads (in
// flight together), so its latency grows per batch, not per split; the split heuristic charges
// it so (combine_batches).
constexpr int kCombineSplitsPerChunk = 8;
// Threads per block of the combine kernel. A row's threads are consecutive over the grid
// (combine_kernel.cu), so a row may span blocks and lanes are not bounded by a block.
constexpr int kCombineThreads = 128;
// Most lanes a row's column group spreads its splits over: a power of two whose lanes' folds
// merge by shuffles inside one 32-lane warp.
constexpr int kCombineMaxLanes = 32;
// Threads that share a row's splits (per group of 4 columns): the fewest that keep each
// thread's splits within one batch of loads, up to kCombineMaxLanes. A row's threads (d / 4 *
// lanes) may span blocks, so lanes are bounded by the warp's shuffles, not by a block: decode
// over long caches with few (batch, k/v head) pairs (G of 64-256) folds in one round trip to
// the partials.
FS_HOST_DEVICE inline int combine_lanes(int num_splits) {
  int lanes = 1;
  while (lanes * 2 <= kCombineMaxLanes && lanes * kCombineSplitsPerChunk < num_splits) lanes *= 2;
  return lanes;
}
// Blocks of the combine for `rows` rows: each row takes (d / 4) * lanes consecutive threads.
FS_HOST_DEVICE inline long long combine_blocks(long long rows, int d, int lanes) {
  const long long threads = rows * (d / 4) * lanes;
  return (threads + kCombineThreads - 1) / kCombineThreads;
}
// Batches of loads the slowest thread of a row issues.
FS_HOST_DEVICE inline int combine_batches(int num_splits) {
  const int lanes = combine_lanes(num_splits);
  const int per_lane = (num_splits + lanes - 1) / lanes;
  return (per_lane + kCombineSplitsPerChunk - 1) / kCombineSplitsPerChunk;
}

// A fold's statistics; its sums of O_g live beside it (acc[0..n), one per column).
struct SplitFold {
  float m = -INFINITY;  // largest LSE_g folded so far (-inf: none that saw a key)
  float l = 0.f;        // sum of exp(LSE_g - m)
  bool nan = false;     // a split met a NaN: the row is NaN, as the unsplit kernel makes it
};

// e^x: the combine's LSEs are natural logs.
struct NaturalExp {
  FS_HOST_DEVICE float operator()(float x) const { return expf(x); }
};

// What a fold's sums are multiplied by when its max moves from `from` to `to` (>= from): 0 for
// a fold that holds nothing yet (from = -inf), whose sums are 0. `exp` maps a difference of
// maxima to a factor: e^x for LSEs; a kernel that keeps raw score maxima passes its own.
template <class Exp = NaturalExp>
FS_HOST_DEVICE inline float fold_rescale(float from, float to, Exp exp = Exp{}) {
  return from == -INFINITY ? 0.f : exp(from - to);
}

// Folds split (lse_g, o_g[0..n)) into (f, acc). A split that saw no key (-inf) is skipped, never
// multiplied, so its unwritten partial cannot inject NaN.
FS_HOST_DEVICE inline void fold_split(SplitFold& f, float* acc, float lse_g, const float* o_g,
                                      int n) {
  if (lse_g != lse_g) f.nan = true;
  if (!(lse_g > -INFINITY)) return;  // -inf or NaN
  const float m = fmaxf(f.m, lse_g);
  const float keep = fold_rescale(f.m, m), w = expf(lse_g - m);
  f.l = f.l * keep + w;
  for (int c = 0; c < n; ++c) acc[c] = acc[c] * keep + w * o_g[c];
  f.m = m;
}

// Merges fold (g, acc_g) into (f, acc).
FS_HOST_DEVICE inline void merge_folds(SplitFold& f, float* acc, const SplitFold& g,
                                       const float* acc_g, int n) {
  f.nan = f.nan || g.nan;
  const float m = fmaxf(f.m, g.m);
  const float keep = fold_rescale(f.m, m), take = fold_rescale(g.m, m);
  f.l = f.l * keep + g.l * take;
  for (int c = 0; c < n; ++c) acc[c] = acc[c] * keep + acc_g[c] * take;
  f.m = m;
}

// The row's LSE: NaN if a split met a NaN, -inf if no split saw a key.
FS_HOST_DEVICE inline float folded_lse(const SplitFold& f) {
  if (f.nan) return NAN;
  return f.m == -INFINITY ? -INFINITY : f.m + logf(f.l);
}
// Output column c from the fold's sum: 0 where the row saw no key.
FS_HOST_DEVICE inline float folded_output(const SplitFold& f, float acc_c) {
  if (f.nan) return NAN;
  return f.m == -INFINITY ? 0.f : acc_c / f.l;
}

// Folds one row (host): out[c] for c < d and the returned LSE, with the splits dealt to `lanes`
// folds (split g to fold g % lanes) merged pairwise as the kernel's lanes merge theirs
// (lane j takes lane j ^ 1, then j ^ 2, ...), so the host tests run the kernel's arithmetic.
inline float combine_row(const float* lse, long long lse_stride, const float* o, long long o_stride,
                         int num_splits, int d, float* out, int lanes = 1) {
  std::vector<SplitFold> folds(lanes);
  std::vector<std::vector<float>> acc(lanes, std::vector<float>(d, 0.f));
  for (int g = 0; g < num_splits; ++g)
    fold_split(folds[g % lanes], acc[g % lanes].data(), lse[g * lse_stride], o + g * o_stride, d);
  for (int offset = 1; offset < lanes; offset *= 2) {
    std::vector<SplitFold> merged = folds;
    std::vector<std::vector<float>> merged_acc = acc;
    for (int j = 0; j < lanes; ++j)
      merge_folds(merged[j], merged_acc[j].data(), folds[j ^ offset], acc[j ^ offset].data(), d);
    folds.swap(merged);
    acc.swap(merged_acc);
  }
  for (int c = 0; c < d; ++c) out[c] = folded_output(folds[0], acc[0][c]);
  return folded_lse(folds[0]);
}

}  // namespace flashsplit
