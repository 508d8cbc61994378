#include "kernels/combine_kernel.h"

#include "core/ceil_log2.h"
#include "core/combine_math.h"

namespace flashsplit {
namespace {

// Each thread owns 4 consecutive columns of a row (16-byte loads of the partials, which are the
// dominant traffic) and folds every lanes-th split of it (core/combine_math.h); the row's lanes
// of a column group are adjacent threads of one warp and merge their folds by shuffles. A row
// takes d/4 * lanes threads, so a block of Threads (combine_block_threads) holds whole rows. A
// decode call has few rows (b * h), so the lanes are what spreads its combine over more threads
// and SMs; a thread's split LSEs and partials are loaded together, kCombineSplitsPerChunk splits
// at a time. An instance per block size: a bound of 256 threads has ptxas keep a 128-thread
// block's threads to fewer registers, and loads in flight.
template <class Elem, int D, int Threads>
__global__ void __launch_bounds__(Threads)
    combine_kernel(const AttnFwdParams p, int lanes_log2) {
  constexpr int kColumnGroups = D / 4;
  constexpr int kChunk = kCombineSplitsPerChunk;
  const int lanes = 1 << lanes_log2;
  const int threads_per_row = kColumnGroups * lanes;
  const int64_t rows = static_cast<int64_t>(p.b) * p.h * p.sq;
  const int rows_per_block = Threads / threads_per_row;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * rows_per_block +
                      threadIdx.x / threads_per_row;
  const int lane = threadIdx.x & (lanes - 1);
  const int col = ((threadIdx.x >> lanes_log2) % kColumnGroups) * 4;
  // Threads past the last row stay to the end: the shuffles below take every lane of a warp.
  // (and so do threads past the block's whole rows: d=96 and 192 leave some)
  const bool valid = row < rows && static_cast<int>(threadIdx.x) < rows_per_block * threads_per_row;
  // Launched while the producers finish (launch_after_prior_grid): their partials are visible
  // only past this point.
  wait_for_prior_grid();

  SplitFold fold;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int splits = valid ? p.num_splits : 0;  // a thread past the last row folds none
  for (int g0 = lane; g0 < splits; g0 += kChunk * lanes) {
    float lse_g[kChunk];
    float4 part[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int g = g0 + i * lanes;
      // A split past the last is -inf, so fold_split skips it; the partial of a split that saw
      // no key may be unwritten, and is read but never used.
      lse_g[i] = g < splits ? p.lse_accum[g * rows + row] : -INFINITY;
      part[i] = g < splits ? *reinterpret_cast<const float4*>(p.o_accum + (g * rows + row) * D + col)
                         : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float o_g[4] = {part[i].x, part[i].y, part[i].z, part[i].w};
      fold_split(fold, acc, lse_g[i], o_g, 4);
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

template <class Elem, int D, int Threads>
void launch_sized(const AttnFwdParams& p, const LaunchPlan& plan, gpuStream_t stream) {
  const int lanes_log2 = ceil_log2(static_cast<unsigned>(plan.combine_lanes));
  launch_after_prior_grid(plan.dependent_launch, combine_kernel<Elem, D, Threads>,
                          dim3(static_cast<unsigned>(plan.combine_grid.x)), dim3(Threads), 0,
                          stream, p, lanes_log2);
}

template <class Elem, int D>
void launch_typed(const AttnFwdParams& p, const LaunchPlan& plan, gpuStream_t stream) {
  if (combine_block_threads(D, plan.combine_lanes) == kCombineMaxThreads) {
    return launch_sized<Elem, D, kCombineMaxThreads>(p, plan, stream);
  }
  launch_sized<Elem, D, kCombineThreads>(p, plan, stream);
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
