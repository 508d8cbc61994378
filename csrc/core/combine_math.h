// The split-KV combine for one query row: LSE = log sum_g exp(LSE_g), O = sum_g w_g O_g with
// w_g = exp(LSE_g - LSE). Shared by the combine kernel and the host tests.
#pragma once

#include <math.h>

#include "host_device.h"

namespace flashsplit {

// The combine kernel reads a row's splits this many at a time (their loads in flight together),
// so its latency grows per chunk of splits, not per split; the split heuristic charges it so.
constexpr int kCombineSplitsPerChunk = 8;

// log(sum_g exp(lse[g*stride])) computed around the maximum so huge spreads neither overflow
// nor lose the largest term. -inf when every lse is -inf (no split saw a key); NaN when any is.
// No early exit in the first pass, so a GPU thread can have all its loads in flight at once.
FS_HOST_DEVICE inline float combined_lse(const float* lse, int num_splits, long long stride) {
  float max_lse = -INFINITY;
  bool saw_nan = false;
  for (int g = 0; g < num_splits; ++g) {
    const float x = lse[g * stride];
    // fmaxf drops NaN; a split that met a NaN must poison the row as the unsplit kernel does.
    saw_nan |= x != x;
    max_lse = fmaxf(max_lse, x);
  }
  if (saw_nan) return NAN;
  if (max_lse == -INFINITY) return -INFINITY;
  float sum = 0.f;
  for (int g = 0; g < num_splits; ++g) sum += expf(lse[g * stride] - max_lse);
  return max_lse + logf(sum);
}

// Weight of split g in the combined output; 0 for a split that saw no key, and 0 everywhere
// when the whole row saw no key (the row's output is then 0).
FS_HOST_DEVICE inline float split_weight(float lse_g, float lse_total) {
  return (lse_g == -INFINITY || lse_total == -INFINITY) ? 0.f : expf(lse_g - lse_total);
}

// Folds one row: out[c] = sum_g w_g * o[g*o_stride + c] for c < d. Splits with weight 0 are
// skipped, never multiplied, so their unwritten partials cannot inject NaN.
FS_HOST_DEVICE inline float combine_row(const float* lse, long long lse_stride, const float* o,
                                        long long o_stride, int num_splits, int d, float* out) {
  float total = combined_lse(lse, num_splits, lse_stride);
  for (int c = 0; c < d; ++c) out[c] = 0.f;
  for (int g = 0; g < num_splits; ++g) {
    float w = split_weight(lse[g * lse_stride], total);
    if (w == 0.f) continue;
    for (int c = 0; c < d; ++c) out[c] += w * o[g * o_stride + c];
  }
  return total;
}

}  // namespace flashsplit
