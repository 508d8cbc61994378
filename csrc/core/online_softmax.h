// The online softmax's rules, once for every kernel family. A row keeps m, the running max of
// its raw scores q.k, and folds each key block's probabilities exp2(s * scale_log2 - base) in
// log2 units with base = m * scale_log2: one FFMA and one exp2 per score, as FlashAttention-2
// does. Where m moves, what the row has summed (its denominator and output) is multiplied by
// exp2(m_old * scale_log2 - base). Header-only, usable on host and device.
#pragma once

#include <float.h>
#include <math.h>

#include "core/host_device.h"

namespace flashsplit {

// The scale in log2 units, applied as a positive factor: a negative softmax_scale flips the
// sign of the scores instead (the kernels negate Q or S), and a zero scale becomes FLT_MIN so
// that a masked -inf score still maps to -inf rather than -inf * 0 = NaN.
FS_HOST_DEVICE inline float softmax_scale_log2(float softmax_scale) {
  return fmaxf(fabsf(softmax_scale) * static_cast<float>(M_LOG2E), FLT_MIN);
}

// The exponent offset of a row whose running max is finite (the row has seen a key).
FS_HOST_DEVICE inline float softmax_base_seen(float row_max, float scale_log2) {
  return row_max * scale_log2;
}

// The exponent offset of a row whose running max is row_max. A row that has seen only masked
// keys keeps max -inf; offsetting by 0 keeps its probabilities exp2(-inf) = 0 instead of
// exp2(-inf - -inf) = NaN.
FS_HOST_DEVICE inline float softmax_base(float row_max, float scale_log2) {
  return row_max == -INFINITY ? 0.f : softmax_base_seen(row_max, scale_log2);
}

// The exponent of score s's probability, exp2 of which is the probability.
FS_HOST_DEVICE inline float softmax_exponent(float s, float scale_log2, float base) {
  return fmaf(s, scale_log2, -base);
}

// The exponent of the factor a row's sums take when its max moves to the one of `base`.
FS_HOST_DEVICE inline float softmax_rescale_exponent(float old_max, float scale_log2, float base) {
  return old_max * scale_log2 - base;
}

}  // namespace flashsplit
