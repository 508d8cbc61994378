// The Hopper forward's online softmax in registers, per consumer thread: the running max and
// sum of its two rows, the probabilities of a key block (FFMA + ex2, core/online_softmax.h), the
// rescale of O where a max moves, and P packed for the P V wgmma.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "core/online_softmax.h"
#include "kernels/fwd_common.cuh"
#include "kernels/sm90/hopper_primitives.cuh"

namespace flashsplit {
namespace sm90 {

// Two packed 16-bit probabilities times a power of two (exact where they stay normal).
template <class Elem>
__device__ __forceinline__ uint32_t scale2(uint32_t packed, float factor) {
  if constexpr (std::is_same<Elem, gpu_bf16_t>::value) {
    __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&packed);
    v = __hmul2(v, __float2bfloat162_rn(factor));
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = *reinterpret_cast<const __half2*>(&packed);
    v = __hmul2(v, __float2half2_rn(factor));
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// The sum of two packed 16-bit probabilities, as P V weighs them.
template <class Elem>
__device__ __forceinline__ float sum2(uint32_t packed) {
  if constexpr (std::is_same<Elem, gpu_bf16_t>::value) {
    return __uint_as_float(packed << 16) + __uint_as_float(packed & 0xffff0000u);
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&packed));
    return f.x + f.y;
  }
}

// Registers 4j + 2r + {0, 1} of S (and of O) belong to the thread's row r (of two).
template <class Kt>
struct OnlineSoftmax {
  using Elem = typename Kt::Elem;
  static constexpr int kBlockN = Kt::kBlockN;
  static constexpr bool kOverlap = Kt::kOverlap;
  // The slack a row's probabilities may have over 1 before the running max must move:
  // 2^kMaxSlackLog2, harmless in fp32 sums and bf16/fp16 P.
  static constexpr float kMaxSlackLog2 = 8.f;
  static constexpr float kMaxSlack = static_cast<float>(1 << static_cast<int>(kMaxSlackLog2));

  const float scale_log2;
  float row_sum[2];  // this thread's partial; quad-reduced at the end
  float row_max[2];  // of the raw scores (sign-flipped if scale < 0)
  float rescale[2];  // what O is multiplied by (rescale_o) after with_max or move_base
  // The largest partial row sum a miss of the probabilities at the running max is repaired
  // from (can_move_base): its probabilities are finite in P's type and the factor that moves
  // them under 2^-kShiftHeadroom stays a normal number (bf16: at least 2^-97; fp16 P reaches
  // 65504 and 2^-14 is its smallest normal power of two).
  static constexpr bool kBf16 = std::is_same<Elem, gpu_bf16_t>::value;
  static constexpr float kShiftableSum = kBf16 ? 0x1p64f : 0x1p13f;
  // How far below 1 a repaired row's largest probability goes, in log2 units: scores that keep
  // rising then pass the bound again only after kShiftHeadroom + kMaxSlackLog2 more (bf16 P
  // keeps 2^-126; fp16 P's range has no room to spare).
  static constexpr int kShiftHeadroom = kBf16 ? 32 : 0;
  static constexpr float kHeadroomFactor = 1.f / static_cast<float>(1ull << kShiftHeadroom);
  // The headroom of a row's first max (with_max; d=64, bf16), in log2 units: the probabilities
  // of keys more than about 60 below the max, under 2^-126, flush to zero, weights far below
  // bf16's precision; a sink up to 72 above the first block's scores stays under the bound.
  static constexpr float kFirstMaxHeadroom = kBf16 && Kt::kHeadDim == 64 ? 64.f : 0.f;
  // The tries of probabilities at the running max that failed in this tile and could not be
  // repaired: after kRunningMaxMisses of them, the tile's later blocks take their max straight
  // away, so scores that jump past kShiftableSum on every block pay for two failed tries per
  // tile instead of one per block. Only the side-by-side tiles count them: theirs cost the most
  // (a second Q K^T on the d=128 tiles); on the ping-pong tiles a miss costs only the
  // exponentials again. Warp-uniform (warpgroup-uniform where the vote counts).
  static constexpr int kRunningMaxMisses = kOverlap ? 1 << 30 : 2;
  int running_max_misses = 0;
  __device__ __forceinline__ bool running_max_pays() const {
    return running_max_misses < kRunningMaxMisses;
  }
  // Whether at_running_max takes the probabilities: the tile still tries, and every row of the
  // warp has a max (-inf: its first block).
  __device__ __forceinline__ bool running_max_usable() const {
    return running_max_pays() &&
           !__any_sync(0xffffffffu, row_max[0] == -INFINITY || row_max[1] == -INFINITY);
  }

  __device__ __forceinline__ explicit OnlineSoftmax(float softmax_scale)
      : scale_log2(softmax_scale_log2(softmax_scale)) {}

  // A tile's rows start without a max and with nothing summed.
  __device__ __forceinline__ void reset() {
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.f;
    running_max_misses = 0;
  }

  // Prepared scores (mask.cuh) -> probabilities (in s), running max and sum, and rescale[] for
  // O. at_running_max (without overlap): the block's max is not taken, the probabilities are at
  // the running max; returns whether the thread's partial sums of both rows, and so each of
  // its probabilities, stay within kMaxSlack (where not, see hold_in_place).
  __device__ __forceinline__ bool with_max(float (&s)[kBlockN / 2], bool at_running_max = false) {
    bool bounded = true;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The block's max over the quad (the running max itself where at_running_max).
      float block_max = -INFINITY;
      if (!kOverlap && at_running_max) {
        block_max = row_max[r];
      } else {
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
          block_max = fmaxf(block_max, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
        block_max = quad_max(block_max);
      }
      // Without overlap, the running max moves only when a block's max passes it by more than
      // kMaxSlackLog2 (scaled, log2 units): probabilities then reach at most kMaxSlack before
      // the normalisation, and most blocks leave O as it is (rescale_o skips them). The first
      // block with a visible key always moves it (from -inf). With overlap the skip measured
      // 2-6% slower, so the max follows every block.
      float new_max;
      if constexpr (kOverlap) {
        new_max = fmaxf(row_max[r], block_max);
      } else {
        new_max = (block_max - row_max[r]) * scale_log2 > kMaxSlackLog2 ? block_max : row_max[r];
        // A row's first max on the d=64 tiles (bf16) lands kFirstMaxHeadroom log2 units above
        // its first block's, so that scores rising along the walk (falling scores walked last
        // first, a sink met late) pass the bound only that much + kMaxSlackLog2 above it. (On
        // the 192-row d=96 and d=128 tiles the check spilled.)
        if constexpr (kFirstMaxHeadroom > 0) {
          if (row_max[r] == -INFINITY)
            new_max = fminf(new_max + kFirstMaxHeadroom * __frcp_rn(scale_log2), FLT_MAX);
        }
      }
      const float base = softmax_base(new_max, scale_log2);
      rescale[r] = kOverlap || new_max != row_max[r]
                       ? fast_exp2(softmax_rescale_exponent(row_max[r], scale_log2, base))
                       : 1.f;
      row_max[r] = new_max;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        s[4 * j + 2 * r] = fast_exp2(softmax_exponent(s[4 * j + 2 * r], scale_log2, base));
        s[4 * j + 2 * r + 1] = fast_exp2(softmax_exponent(s[4 * j + 2 * r + 1], scale_log2, base));
        sum += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
      }
      row_sum[r] = row_sum[r] * rescale[r] + sum;
      // (NaN fails the test too, and so does a row without a max: its probabilities were not
      // taken at one.)
      bounded = bounded && sum <= kMaxSlack && new_max != -INFINITY;
    }
    return bounded;
  }

  // After with_max(s, at_running_max) missed the bound in some warp of the warpgroup (bounded:
  // this thread's verdict): a warp whose probabilities passed it moves its rows' base in
  // place, as a repaired at_running_max does (move_base). The fp32 probabilities are at hand,
  // so each row whose largest one (quad-reduced) passed 1 takes it to 2^-kShiftHeadroom,
  // which P holds exactly, as the block's max would have at 1: a key that outweighs all others
  // (an attention sink) then weighs the same in P as in the sum. row_sum holds the block's sum
  // already and scales with it. Returns whether the warp's probabilities hold (false only where
  // can_move_base refuses: the caller computes the scores again). Warp-uniform.
  __device__ __forceinline__ bool hold_in_place(float (&s)[kBlockN / 2], bool bounded) {
    if (__all_sync(0xffffffffu, bounded)) return true;
    float largest[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      largest[r] = 0.f;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j)
        largest[r] = fmaxf(largest[r], fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
      largest[r] = quad_max(largest[r]);
    }
    if (!can_move_base(largest)) return false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float factor = largest[r] > 1.f ? __fdividef(kHeadroomFactor, largest[r]) : 1.f;
      move_base(r, factor);
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        s[4 * j + 2 * r] *= factor;
        s[4 * j + 2 * r + 1] *= factor;
      }
    }
    return true;
  }

  // After a row's first block its max rarely moves by much, so the block's max, its reduction
  // across the quad and the max's update are mostly work done for nothing: here the
  // probabilities are taken at the running max instead, straight into P (dst), the scores kept,
  // and a thread's partial row sums bound each of its probabilities. Returns false where one
  // could pass kMaxSlack (the caller tries hold_in_p, then with_max), or a row of the warp has
  // no max yet (-inf: its first block). Without overlap that is with_max's own slack rule (the
  // same bits wherever the max stays); with overlap the max now lags by up to kMaxSlackLog2
  // too, and O needs no rescale where it does. Measured +9-12% on the d=64 tiles side by side
  // and +6% on d=128 ping-pong tiles of 8 key blocks, even at 4. Not on causal ping-pong tiles
  // (3-4% slower at 512 rows, even at 1024: most of their blocks are a tile's first, or
  // masked). The caller adds `sum` to the row sums where it returns true.
  __device__ __forceinline__ bool at_running_max(const float (&s)[kBlockN / 2],
                                                 uint32_t (&dst)[kBlockN / 16][4],
                                                 float (&sum)[2]) {
    if (!running_max_usable()) return false;
    const float base[2] = {softmax_base_seen(row_max[0], scale_log2),
                           softmax_base_seen(row_max[1], scale_log2)};
    sum[0] = sum[1] = 0.f;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
      for (int r = 0; r < 2; ++r) dst[j / 2][2 * (j % 2) + r] = group_at(s, j, r, base, sum);
    }
    return within_slack(sum);
  }
  // (NaN fails the test too; hold_in_p does not take it: with_max handles it as before.)
  __device__ __forceinline__ static bool within_slack(const float (&sum)[2]) {
    return !__any_sync(0xffffffffu, !(sum[0] <= kMaxSlack && sum[1] <= kMaxSlack));
  }
  // Probabilities of column group j (keys 8j + 2 quad_col + {0, 1}) of row r at base[r],
  // packed for P; their sum is added to sum[r].
  __device__ __forceinline__ uint32_t group_at(const float (&s)[kBlockN / 2], int j, int r,
                                               const float (&base)[2], float (&sum)[2]) const {
    const float p0 = fast_exp2(softmax_exponent(s[4 * j + 2 * r], scale_log2, base[r]));
    const float p1 = fast_exp2(softmax_exponent(s[4 * j + 2 * r + 1], scale_log2, base[r]));
    sum[r] += p0 + p1;
    return pack2<Elem>(p0, p1);
  }
  // at_running_max for the overlapped consumers (FwdKernelTraits::kLandsInP), into P itself,
  // which the previous block's P V may still read: the first half of the column groups go to
  // registers of their own, then landed() waits for that P V (called exactly once, also where
  // the max is not usable), and the second half go into P, the first after them, the moves
  // among the exponentials. Each write merges P's old value in under `zero` (0, read at run
  // time), which keeps P's registers until the wait (FwdConsumer::take_next_p).
  static constexpr int kEarlyGroups = kBlockN / 16;
  template <class Landed>
  __device__ __forceinline__ bool at_running_max_landing(const float (&s)[kBlockN / 2],
                                                         uint32_t (&pa)[kBlockN / 16][4],
                                                         float (&sum)[2], uint32_t zero,
                                                         Landed&& landed) {
    if (!running_max_usable()) {
      landed();
      return false;
    }
    const float base[2] = {softmax_base_seen(row_max[0], scale_log2),
                           softmax_base_seen(row_max[1], scale_log2)};
    sum[0] = sum[1] = 0.f;
    uint32_t early[kEarlyGroups][2];
#pragma unroll
    for (int j = 0; j < kEarlyGroups; ++j)
#pragma unroll
      for (int r = 0; r < 2; ++r) early[j][r] = group_at(s, j, r, base, sum);
    landed();
    fence_operands(pa);
#pragma unroll
    for (int j = kEarlyGroups; j < kBlockN / 8; ++j)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        uint32_t& p = pa[j / 2][2 * (j % 2) + r];
        p = group_at(s, j, r, base, sum) | (p & zero);
      }
#pragma unroll
    for (int j = 0; j < kEarlyGroups; ++j)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        uint32_t& p = pa[j / 2][2 * (j % 2) + r];
        p = early[j][r] | (p & zero);
      }
    return within_slack(sum);
  }

  // After at_running_max returned false: where it took the probabilities and a row's passed
  // the bound, each such row scales its P by the power of two that brings them under
  // 2^-kShiftHeadroom, exactly (move_base: O must take rescale[] once no P V reads it), and
  // sums them again as P holds them (rounded to Elem): its new max is no longer a probability
  // of exactly 1, and where one key outweighs all others (an attention sink) the output is that
  // key's value only if the sum counts the same rounded weight as P does. Returns whether P
  // holds (the caller adds `sum` to the row sums); where not, the scores are intact and the
  // caller runs with_max. Warp-uniform.
  __device__ __forceinline__ bool hold_in_p(uint32_t (&dst)[kBlockN / 16][4], float (&sum)[2]) {
    if (!running_max_usable()) return false;
    const float bound[2] = {quad_max(sum[0]), quad_max(sum[1])};
    if (!can_move_base(bound)) {
      if constexpr (!kOverlap) ++running_max_misses;
      return false;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // 2^-k, k = floor(log2(bound)) + 1 + kShiftHeadroom from the exponent bits.
      const int k = (__float_as_int(bound[r]) >> 23) - 126 + kShiftHeadroom;
      const float factor = bound[r] > kMaxSlack ? __int_as_float((127 - k) << 23) : 1.f;
      move_base(r, factor);
      sum[r] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        dst[kk][r] = scale2<Elem>(dst[kk][r], factor);
        dst[kk][2 + r] = scale2<Elem>(dst[kk][2 + r], factor);
        sum[r] += sum2<Elem>(dst[kk][r]) + sum2<Elem>(dst[kk][2 + r]);
      }
    }
    return true;
  }

  // A miss of the probabilities at the running max (a row's could pass kMaxSlack), repaired
  // without taking them again: the row's base moves up, so that its probabilities, what it has
  // summed and O (rescale[]) are multiplied by a factor that brings them under
  // 2^-kShiftHeadroom (hold_in_p, hold_in_place). Scores rising along the walk, which move the
  // max on every block, then cost a few multiplies per move instead of the probabilities
  // again (or a second Q K^T). Possible unless a row of the warp has no max yet or its bound
  // (quad-reduced: the block's partial sums, or its largest probability) passes kShiftableSum
  // (or is NaN). Warp-uniform.
  __device__ __forceinline__ bool can_move_base(const float (&bound)[2]) const {
    return __all_sync(0xffffffffu, bound[0] <= kShiftableSum && bound[1] <= kShiftableSum &&
                                       row_max[0] != -INFINITY && row_max[1] != -INFINITY);
  }
  // Row r's base moves up by log2(1 / factor): its sum and O (rescale_o) take the factor.
  __device__ __forceinline__ void move_base(int r, float factor) {
    row_max[r] -= __fdividef(approx_log2(factor), scale_log2);
    row_sum[r] *= factor;
    rescale[r] = factor;
  }

  __device__ __forceinline__ void add_to_row_sums(const float (&sum)[2]) {
    row_sum[0] += sum[0];
    row_sum[1] += sum[1];
  }

  // O changes only where a row's max moved (with_max), which without overlap is rare after the
  // first blocks: the warp then skips the D/2 multiplies unless one of its rows moved.
  __device__ __forceinline__ void rescale_o(float (&o)[Kt::kHeadDimV / 2]) const {
    if (!kOverlap && !__any_sync(0xffffffffu, rescale[0] != 1.f || rescale[1] != 1.f)) return;
#pragma unroll
    for (int j = 0; j < Kt::kHeadDimV / 8; ++j) {
      o[4 * j + 0] *= rescale[0];
      o[4 * j + 1] *= rescale[0];
      o[4 * j + 2] *= rescale[1];
      o[4 * j + 3] *= rescale[1];
    }
  }
};

// P in the register-A layout of the P V wgmma: two adjacent n8 score tiles are one m64k16 A
// fragment.
template <class Elem, int BlockN>
__device__ __forceinline__ void pack_p(const float (&s)[BlockN / 2],
                                       uint32_t (&pa)[BlockN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BlockN / 16; ++kk) {
    pa[kk][0] = pack2<Elem>(s[8 * kk + 0], s[8 * kk + 1]);
    pa[kk][1] = pack2<Elem>(s[8 * kk + 2], s[8 * kk + 3]);
    pa[kk][2] = pack2<Elem>(s[8 * kk + 4], s[8 * kk + 5]);
    pa[kk][3] = pack2<Elem>(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

}  // namespace sm90
}  // namespace flashsplit
