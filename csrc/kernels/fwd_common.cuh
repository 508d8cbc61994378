// Device helpers both forward kernels (sm80/ portable, sm90/ Hopper) share: the row statistics
// of the online softmax, 16-bit packing, and the epilogue that writes a finished query row
// either to the output (direct, G = 1) or to its split's fp32 partial for the combine kernel.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "core/head_dims.h"
#include "kernels/attn_params.h"
#include "kernels/half_bits.h"
#include "kernels/platform.h"

namespace flashsplit {

// Max and sum over the 4 lanes of a quad, which hold one accumulator row between them in the
// m16n8 / wgmma fragment layouts.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, lane_shfl_xor(x, 1));
  return fmaxf(x, lane_shfl_xor(x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += lane_shfl_xor(x, 1);
  return x + lane_shfl_xor(x, 2);
}

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
// 2^x in one v_exp_f32 (denormal results flush to 0, which for softmax weights below 2^-126 of
// the row's largest is what the rounding would give anyway).
__device__ __forceinline__ float fast_exp2(float x) { return __builtin_amdgcn_exp2f(x); }
__device__ __forceinline__ float approx_rcp(float x) { return __builtin_amdgcn_rcpf(x); }
__device__ __forceinline__ float approx_log2(float x) { return __builtin_amdgcn_logf(x); }

// Round to nearest even; a NaN stays a (quiet) NaN.
__device__ __forceinline__ uint32_t bf16_bits(float x) {
  const uint32_t u = __builtin_bit_cast(uint32_t, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
__device__ __forceinline__ uint32_t fp16_bits(float x) {
#if defined(FLASHSPLIT_EMULATOR_BUILD)
  return half_bits_rne(__builtin_bit_cast(uint32_t, x));  // see half_bits.h
#else
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(x));
#endif
}

// Two floats -> one register of two 16-bit values (low half first), round to nearest.
template <class Elem>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<Elem, gpu_bf16_t>::value) {
    return bf16_bits(lo) | (bf16_bits(hi) << 16);
  } else {
    return fp16_bits(lo) | (fp16_bits(hi) << 16);
  }
}
#else
// 2^x in one MUFU op. ftz: a denormal result is 0, which for softmax weights below 2^-126 of
// the row's largest is what the rounding would give anyway; exp2f without ftz adds range fix-ups.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float approx_rcp(float x) { return __fdividef(1.f, x); }
__device__ __forceinline__ float approx_log2(float x) { return __log2f(x); }

// Two floats -> one register of two 16-bit values (low half first), round to nearest.
template <class Elem>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<Elem, gpu_bf16_t>::value) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}
#endif

// A finished row's normaliser and log-sum-exp from the quad-reduced softmax denominator `sum`
// and the running max of the raw scores (in the units scale_log2 turns into log2). A row that
// saw no key gets 0 and -inf; a NaN sum stays NaN in both.
struct FinishedRowScale {
  float inv, lse;
};
// Approx: the hardware reciprocal and log2 (2 ulp; sum >= 1 here, as the row's largest
// probability is at least 1) instead of the exact library versions, a few dozen instructions per
// row in an epilogue on the critical path of short tiles.
template <bool Approx = false>
__device__ __forceinline__ FinishedRowScale finished_row_scale(float row_max, float scale_log2,
                                                               float sum) {
  const float inv = Approx ? approx_rcp(sum) : 1.f / sum;
  const float log2_sum = Approx ? approx_log2(sum) : log2f(sum);
  return {sum == 0.f ? 0.f : inv,
          sum == 0.f ? -INFINITY : (row_max * scale_log2 + log2_sum) * static_cast<float>(M_LN2)};
}

// Writes one finished query row from the Runs runs of Run (2 or 4) consecutive output columns
// this thread holds: run j starts at column lane_col + run_col(j) (run_col a compile-time
// constant per j, so the stores take immediate offsets), and value_of(j, e) is its e-th
// unnormalised value. Either to the output in the input dtype and lse
// (direct, G = 1) or to the split's fp32 partial and LSE_g; writes_lse picks the one thread of
// the row's holders that writes the log-sum-exp. Only columns below dv are written (runs lie
// within 8-column groups and dv is a multiple of 8, so a run is all below it or all past it).
template <class Elem, int D, bool Split, int Run, int Runs, class RunCol, class ValueOf>
__device__ __forceinline__ void write_row_runs(const AttnFwdParams& p, int batch, int head,
                                               int query, int split,
                                               const FinishedRowScale& scale, bool writes_lse,
                                               int lane_col, RunCol run_col, ValueOf value_of) {
  static_assert(Run == 2 || Run == 4, "runs of 2 or 4 columns: 8- or 16-byte stores");
  const int dv = may_narrow_value(D) ? p.dv : D;
  const float inv = scale.inv;
  const int64_t bh = static_cast<int64_t>(batch) * p.h + head;
  if constexpr (Split) {
    const int64_t partial_row = (split * static_cast<int64_t>(p.b) * p.h + bh) * p.sq + query;
    float* dst = p.o_accum + partial_row * dv + lane_col;
#pragma unroll
    for (int j = 0; j < Runs; ++j) {
      if (lane_col + run_col(j) >= dv) continue;
      if constexpr (Run == 2) {
        *reinterpret_cast<float2*>(dst + run_col(j)) =
            make_float2(value_of(j, 0) * inv, value_of(j, 1) * inv);
      } else {
        *reinterpret_cast<float4*>(dst + run_col(j)) = make_float4(
            value_of(j, 0) * inv, value_of(j, 1) * inv, value_of(j, 2) * inv, value_of(j, 3) * inv);
      }
    }
    if (writes_lse) p.lse_accum[partial_row] = scale.lse;
  } else {
    Elem* dst = static_cast<Elem*>(p.out) + batch * p.o_batch_stride +
                static_cast<int64_t>(query) * p.o_row_stride + head * p.o_head_stride + lane_col;
#pragma unroll
    for (int j = 0; j < Runs; ++j) {
      if (lane_col + run_col(j) >= dv) continue;
      const uint32_t lo = pack2<Elem>(value_of(j, 0) * inv, value_of(j, 1) * inv);
      if constexpr (Run == 2) {
        *reinterpret_cast<uint32_t*>(dst + run_col(j)) = lo;
      } else {
        const uint32_t hi = pack2<Elem>(value_of(j, 2) * inv, value_of(j, 3) * inv);
        *reinterpret_cast<uint2*>(dst + run_col(j)) = make_uint2(lo, hi);
      }
    }
    if (writes_lse) p.lse[bh * p.sq + query] = scale.lse;
  }
}

// Writes one finished query row (finished_row_scale's inputs) held in the m16n8 / wgmma
// accumulator layout: pair(j) returns the unnormalised output columns (8j + 2 * quad_col, + 1)
// this lane holds, j < D / 8.
template <class Elem, int D, bool Split, class Pair>
__device__ __forceinline__ void write_output_row(const AttnFwdParams& p, int batch, int head,
                                                 int query, int split, float row_max,
                                                 float scale_log2, float sum, int quad_col,
                                                 Pair pair) {
  write_row_runs<Elem, D, Split, 2, D / 8>(
      p, batch, head, query, split, finished_row_scale(row_max, scale_log2, sum), quad_col == 0,
      quad_col * 2, [](int j) { return j * 8; },
      [&](int j, int e) {
        const float2 v = pair(j);
        return e == 0 ? v.x : v.y;
      });
}

}  // namespace flashsplit
