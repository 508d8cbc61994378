#include "kernels/combine_kernel.h"

#include "core/ceil_log2.h"
#include "core/combine_math.h"

namespace flashsplit {
namespace {

// Each thread owns 4 consecutive columns of a row (16-byte loads of the partials, which are the
// dominant traffic) and folds every lanes-th split of it (core/combine_math.h); the row's lanes
// of a column group are adjacent threads of one warp and merge their folds by shuffles. A row
// takes d/4 * lanes consecutive threads of the grid, so a row may span blocks. A decode call has
// few rows (b * h), so the lanes are what spreads its combine over more threads and SMs. A
// thread's split LSEs and partials are loaded together, kCombineSplitsPerChunk splits a batch,
// and its next batch is loaded before it folds the current one.
struct SplitBatch {
  float lse[kCombineSplitsPerChunk];
  float4 part[kCombineSplitsPerChunk];
};

// Splits g0, g0 + lanes, ... of a row's column group (4 columns at col).
template <int D>
__device__ __forceinline__ SplitBatch load_batch(const AttnFwdParams& p, int64_t rows,
                                                 int64_t row, int col, int g0, int lanes,
                                                 int splits) {
  SplitBatch batch;
#pragma unroll
  for (int i = 0; i < kCombineSplitsPerChunk; ++i) {
    const int g = g0 + i * lanes;
    // A split past the last is -inf, so fold_split skips it; the partial of a split that saw
    // no key may be unwritten, and is read but never used.
    batch.lse[i] = g < splits ? p.lse_accum[g * rows + row] : -INFINITY;
    batch.part[i] = g < splits
                        ? *reinterpret_cast<const float4*>(p.o_accum + (g * rows + row) * D + col)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  return batch;
}

template <class Elem, int D>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(const AttnFwdParams p, int lanes_log2) {
  constexpr int kColumnGroups = D / 4;
  constexpr int kChunk = kCombineSplitsPerChunk;
  const int lanes = 1 << lanes_log2;
  const int64_t rows = static_cast<int64_t>(p.b) * p.h * p.sq;
  const int64_t group = (static_cast<int64_t>(blockIdx.x) * kCombineThreads + threadIdx.x) >>
                        lanes_log2;  // (row, column group)
  const int64_t row = group / kColumnGroups;
  const int col = static_cast<int>(group % kColumnGroups) * 4;
  const int lane = threadIdx.x & (lanes - 1);
  // Threads past the last row stay to the end: the shuffles below take every lane of a warp.
  const bool valid = row < rows;
  // Launched while the producers finish (launch_after_prior_grid): their partials are visible
  // only past this point.
  wait_for_prior_grid();

  SplitFold fold;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int splits = valid ? p.num_splits : 0;  // a thread past the last row folds none
  SplitBatch next = load_batch<D>(p, rows, row, col, lane, lanes, splits);
  for (int g0 = lane; g0 < splits; g0 += kChunk * lanes) {
    const SplitBatch batch = next;
    if (g0 + kChunk * lanes < splits) {
      next = load_batch<D>(p, rows, row, col, g0 + kChunk * lanes, lanes, splits);
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float4 part = batch.part[i];
      const float o_g[4] = {part.x, part.y, part.z, part.w};
      fold_split(fold, acc, batch.lse[i], o_g, 4);
    }
  }
  // lanes is a power of two of at most kCombineMaxLanes (combine_lanes) and a column group's
  // lanes are adjacent threads aligned to it, so every exchange below stays inside one group, on
  // a 32-lane warp and a 64-lane wavefront alike: the same arithmetic on both.
  for (int offset = 1; offset < lanes; offset *= 2) {
    SplitFold other;
    other.m = lane_shfl_xor(fold.m, offset);
    other.l = lane_shfl_xor(fold.l, offset);
    other.nan = lane_shfl_xor(static_cast<int>(fold.nan), offset) != 0;
    float other_acc[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) other_acc[c] = lane_shfl_xor(acc[c], offset);
    merge_folds(fold, acc, other, other_acc, 4);
  }
  if (!valid || lane != 0) return;

  // row = (batch * h + head) * sq + query
  const int query = static_cast<int>(row % p.sq);
  const int64_t bh = row / p.sq;
  const int batch = static_cast<int>(bh / p.h), head = static_cast<int>(bh % p.h);
  Elem* dst = static_cast<Elem*>(p.out) + batch * p.o_batch_stride +
              static_cast<int64_t>(query) * p.o_row_stride + head * p.o_head_stride + col;
#pragma unroll
  for (int c = 0; c < 4; ++c) dst[c] = from_float<Elem>(folded_output(fold, acc[c]));
  if (col == 0) p.lse[row] = folded_lse(fold);
}

template <class Elem, int D>
void launch_typed(const AttnFwdParams& p, const LaunchPlan& plan, gpuStream_t stream) {
  const int lanes_log2 = ceil_log2(static_cast<unsigned>(plan.combine_lanes));
  launch_after_prior_grid(plan.dependent_launch, combine_kernel<Elem, D>,
                          dim3(static_cast<unsigned>(plan.combine_grid.x)), dim3(kCombineThreads),
                          0, stream, p, lanes_log2);
}

template <class Elem>
void launch_for_dim(const AttnFwdParams& p, const LaunchPlan& plan, gpuStream_t stream) {
  switch (p.dv) {  // the partials' and the output's columns
    case 64: return launch_typed<Elem, 64>(p, plan, stream);
    case 96: return launch_typed<Elem, 96>(p, plan, stream);
    case 128: return launch_typed<Elem, 128>(p, plan, stream);
    case 192: return launch_typed<Elem, 192>(p, plan, stream);
    case 256: return launch_typed<Elem, 256>(p, plan, stream);
  }
  throw std::runtime_error("flashsplit: combine has no kernel for head dim " +
                           std::to_string(p.dv));
}

}  // namespace

void launch_combine(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                    LaunchRecord* record) {
  if (plan.combine_lanes < 1 || (plan.combine_lanes & (plan.combine_lanes - 1)) != 0) {
    throw std::runtime_error("flashsplit: the combine needs a power-of-two lane count, got " +
                             std::to_string(plan.combine_lanes));
  }
  if (params.elem == ElemType::kBFloat16) {
    launch_for_dim<gpu_bf16_t>(params, plan, stream);
  } else {
    launch_for_dim<gpu_fp16_t>(params, plan, stream);
  }
  if (record != nullptr) {
    record->combine_grid = plan.combine_grid;
    record->combine_lanes = plan.combine_lanes;
  }
}

}  // namespace flashsplit
