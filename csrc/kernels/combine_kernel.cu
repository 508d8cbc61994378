#include "kernels/combine_kernel.h"

#include "core/combine_math.h"
#include "core/tile_config.h"

namespace flashsplit {
namespace {

constexpr int kCombineThreads = 128;

// D/4 threads per row, each owning 4 consecutive columns (16-byte loads of the partials, which
// are read once: they are the dominant traffic). Each thread recomputes the row's combined lse
// from the G values, which stay in L1 after the first thread reads them.
template <class Elem, int D>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const AttnFwdParams p) {
  constexpr int kThreadsPerRow = D / 4;
  constexpr int kRowsPerBlock = kCombineThreads / kThreadsPerRow;
  const int64_t rows = static_cast<int64_t>(p.b) * p.h * p.sq;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
  if (row >= rows) return;
  const int col = (threadIdx.x % kThreadsPerRow) * 4;
  // Launched while the producers finish (launch_after_prior_grid): their partials are visible
  // only past this point.
  wait_for_prior_grid();

  const float* lse_g = p.lse_accum + row;
  const float total = combined_lse(lse_g, p.num_splits, rows);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  // kChunk splits at a time: their weights, then their partials, each batch of loads issued
  // together (decode rows walk up to 128 splits, and one load at a time is pure latency).
  constexpr int kChunk = kCombineSplitsPerChunk;
  for (int g0 = 0; g0 < p.num_splits; g0 += kChunk) {
    float w[kChunk];
    float4 part[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      w[i] = g0 + i < p.num_splits ? split_weight(lse_g[(g0 + i) * rows], total) : 0.f;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      // A split with weight 0 (saw no key, or past the last) is never read or multiplied.
      part[i] = w[i] != 0.f
                    ? *reinterpret_cast<const float4*>(p.o_accum + ((g0 + i) * rows + row) * D + col)
                    : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      acc.x += w[i] * part[i].x;
      acc.y += w[i] * part[i].y;
      acc.z += w[i] * part[i].z;
      acc.w += w[i] * part[i].w;
    }
  }

  // row = (batch * h + head) * sq + query
  const int query = static_cast<int>(row % p.sq);
  const int64_t bh = row / p.sq;
  const int batch = static_cast<int>(bh / p.h), head = static_cast<int>(bh % p.h);
  Elem* dst = static_cast<Elem*>(p.out) + batch * p.o_batch_stride +
              static_cast<int64_t>(query) * p.o_row_stride + head * p.o_head_stride + col;
  dst[0] = from_float<Elem>(acc.x);
  dst[1] = from_float<Elem>(acc.y);
  dst[2] = from_float<Elem>(acc.z);
  dst[3] = from_float<Elem>(acc.w);
  if (col == 0) p.lse[row] = total;
}

template <class Elem, int D>
void launch_typed(const AttnFwdParams& p, gpuStream_t stream) {
  constexpr int kRowsPerBlock = kCombineThreads / (D / 4);
  const long long rows = static_cast<long long>(p.b) * p.h * p.sq;
  launch_after_prior_grid(p.cc >= 90, combine_kernel<Elem, D>, dim3(ceil_div(rows, kRowsPerBlock)),
                          dim3(kCombineThreads), 0, stream, p);
}

template <class Elem>
void launch_for_dim(const AttnFwdParams& p, gpuStream_t stream) {
  if (p.d == 64) {
    launch_typed<Elem, 64>(p, stream);
  } else if (p.d == 128) {
    launch_typed<Elem, 128>(p, stream);
  } else {
    throw std::runtime_error("flashsplit: combine has no kernel for head dim " + std::to_string(p.d));
  }
}

}  // namespace

void launch_combine(const AttnFwdParams& params, gpuStream_t stream) {
  if (params.elem == ElemType::kBFloat16) {
    launch_for_dim<gpu_bf16_t>(params, stream);
  } else {
    launch_for_dim<gpu_fp16_t>(params, stream);
  }
}

}  // namespace flashsplit
