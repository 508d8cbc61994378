// The Hopper forward's scores as the softmax reads them: sign-flipped where the softmax scale is
// negative, and -inf at the keys a row may not see (the mask rule of core/key_blocks.h).
#pragma once

#include <math.h>

#include "core/key_blocks.h"
#include "kernels/attn_params.h"

namespace flashsplit {
namespace sm90 {

// S of one key block in the wgmma accumulator layout: register 4j + 2r + e of a thread holds
// row row0 + 8r, key 8j + 2 quad_col + e of the block.
template <class Kt>
struct ScoreMask {
  static constexpr int kBlockN = Kt::kBlockN;

  const AttnFwdParams& p;
  const bool negate;  // the scale is negative: the softmax takes -S at |scale|
  const int quad_col;

  __device__ __forceinline__ ScoreMask(const AttnFwdParams& params, int lane_quad_col)
      : p(params), negate(params.softmax_scale < 0.f), quad_col(lane_quad_col) {}

  // Key block n's scores, of rows row0 and row0 + 8 of rows from first_row on: masked only on
  // blocks that hold a key some of those rows may not see (keys past sk, the causal diagonal).
  __device__ __forceinline__ void apply(float (&s)[kBlockN / 2], int n, int first_row,
                                        int row0) const {
    if (negate) {
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) s[i] = -s[i];
    }
    const int n0 = n * kBlockN;
    if (block_needs_mask(n0, kBlockN, first_row, p.sq, p.sk, Kt::kCausal)) {
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) {
        const int key = n0 + (i / 4) * 8 + quad_col * 2 + (i % 2);
        const int query = row0 + ((i / 2) % 2) * 8;
        if (key > last_visible_key(query, p.sq, p.sk, Kt::kCausal)) s[i] = -INFINITY;
      }
    }
  }
};

}  // namespace sm90
}  // namespace flashsplit
