// The Hopper forward's scores as the softmax reads them: sign-flipped where the softmax scale is
// negative, and -inf at the keys a row may not see (the mask rule of core/key_blocks.h).
#pragma once

#include <math.h>

#include "core/fast_divmod.h"
#include "core/hopper_tiles.h"
#include "core/key_blocks.h"
#include "kernels/attn_params.h"

namespace flashsplit {
namespace sm90 {

// S of one key block in the wgmma accumulator layout: register 4j + 2r + e of a thread holds
// row row0 + 8r, key 8j + 2 quad_col + e of the block.
template <class Kt>
struct ScoreMask {
  static constexpr int kBlockN = Kt::kBlockN;

  const bool negate;  // the scale is negative: the softmax takes -S at |scale|
  const int quad_col;
  // Paged k/v: the rows of a key block's boxes (MainloopParams::page_box_rows), read from the
  // kernel's parameters where needed rather than held in a register.
  const int& box_rows;

  __device__ __forceinline__ ScoreMask(const AttnFwdParams& params, int lane_quad_col,
                                       const int& page_box_rows)
      : negate(params.softmax_scale < 0.f), quad_col(lane_quad_col), box_rows(page_box_rows) {}

  // The query of tile row `row`: the row, or, where tiles pack a group's heads, row / group.
  __device__ __forceinline__ static int query_of(int row, const FastDivmod& by_group) {
    return Kt::kPackHeads ? by_group.div(row) : row;
  }

  // Key block n's scores, of rows row0 and row0 + 8 of rows from first_row on, for a sequence
  // of sq queries (rows placed by query_of; by_group: the GQA group) and sk keys: masked only
  // on blocks that hold a key some of those rows may not see (keys past sk, the causal
  // diagonal). A sequence's last block cut short was loaded
  // through a box ending at its last key (key_box_start): its columns are keys from the box's
  // first on, and those before the block's own first key (earlier blocks') are masked too.
  // Paged, each of the block's boxes (a page's rows) was so loaded (boxed_key).
  __device__ __forceinline__ void apply(float (&s)[kBlockN / 2], int n, int first_row, int row0,
                                        int sq, int sk, const FastDivmod& by_group) const {
    if (negate) {
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) s[i] = -s[i];
    }
    const int n0 = n * kBlockN;
    if (block_needs_mask(n0, kBlockN, query_of(first_row, by_group), sq, sk, Kt::kCausal)) {
      // Paged, each half of the block's columns lies in one box: the key of its first column
      // and the first key of its box (boxed_key); otherwise the block is one box.
      constexpr int kHalf = kHopperMinPageRows;
      const int box0 = Kt::kSequences ? key_box_start(n, kBlockN, sk) : n0;
      const BoxedKey low = Kt::kPaged ? boxed_key(n0, 0, box_rows, sk) : BoxedKey{box0, n0};
      const BoxedKey high =
          Kt::kPaged ? boxed_key(n0, kHalf, box_rows, sk) : BoxedKey{box0 + kHalf, n0};
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) {
        const int column = (i / 4) * 8 + quad_col * 2 + (i % 2);
        const bool in_high = Kt::kPaged && (i / 4) * 8 >= kHalf;  // known once unrolled
        const int key = in_high ? high.key + column - kHalf : low.key + column;
        const int query = query_of(row0 + ((i / 2) % 2) * 8, by_group);
        if (key > last_visible_key(query, sq, sk, Kt::kCausal) ||
            (Kt::kSequences && key < (in_high ? high.first_of_box : low.first_of_box)))
          s[i] = -INFINITY;
      }
    }
  }
};

}  // namespace sm90
}  // namespace flashsplit
