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

  const float* lse_g = p.lse_accum + row;
  const float total = combined_lse(lse_g, p.num_splits, rows);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int g = 0; g < p.num_splits; ++g) {
    const float w = split_weight(lse_g[g * rows], total);
    if (w == 0.f) continue;  // a split that saw no key never wrote its partial
    const float4 part = *reinterpret_cast<const float4*>(p.o_accum + (g * rows + row) * D + col);
    acc.x += w * part.x;
    acc.y += w * part.y;
    acc.z += w * part.z;
    acc.w += w * part.w;
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
  combine_kernel<Elem, D><<<ceil_div(rows, kRowsPerBlock), kCombineThreads, 0, stream>>>(p);
  FS_LAUNCH_CHECK("combine_kernel launch");
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
