// The portable forward's launcher, for any arch policy: included by the policies' instantiation
// units. It dispatches on the plan (its tiles and G) and launches; it decides nothing.
#pragma once

#include <stdexcept>
#include <string>

#include "kernels/attn_launch.h"
#include "kernels/portable/fwd_kernel.cuh"

namespace flashsplit {
namespace portable {

template <class Policy, bool Causal, bool Split, KvLayout Layout>
void launch_variant(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                    LaunchRecord* record) {
  auto kernel = portable_fwd_kernel<Policy, Causal, Split, Layout>;
  constexpr int kSmem =
      Policy::kDynamicSmemBytes + (Layout == KvLayout::kPaged ? Policy::kPagedSmemBytes : 0);
  // Above 48 KB a block must opt in to its dynamic shared memory.
  if constexpr (kSmem > 0) {
    allow_dynamic_smem<portable_fwd_kernel<Policy, Causal, Split, Layout>>(kSmem);
  }
  const dim3 grid(static_cast<unsigned>(plan.forward_grid.x),
                  static_cast<unsigned>(plan.forward_grid.y),
                  static_cast<unsigned>(plan.forward_grid.z));
  launch_kernel(kernel, grid, dim3(Policy::kThreads), kSmem, stream, params);
  FS_LAUNCH_CHECK("portable_fwd_kernel launch");
  if (record != nullptr) {
    record->block_m = Policy::kBlockM;
    record->block_n = Policy::kStageKeys;
    record->key_warps = Policy::kKeyWarps;
    record->packs_heads = true;  // every portable tile packs a GQA group's heads
    record->forward_grid = LaunchGrid{grid.x, grid.y, grid.z};
  }
}

template <class Policy, KvLayout Layout>
void launch_masking(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                    LaunchRecord* record) {
  const bool split = plan.num_splits > 1;
  // The plan runs key warps unsplit only: their tiles have no split instances.
  constexpr bool kSplits = Policy::kKeyWarps == 1;
  if (split && !kSplits) throw std::logic_error("flashsplit: the key-warp tile runs unsplit");
  if (params.causal) {
    split ? launch_variant<Policy, true, kSplits, Layout>(params, plan, stream, record)
          : launch_variant<Policy, true, false, Layout>(params, plan, stream, record);
  } else {
    split ? launch_variant<Policy, false, kSplits, Layout>(params, plan, stream, record)
          : launch_variant<Policy, false, false, Layout>(params, plan, stream, record);
  }
}

// The instance for the call's k/v layout (sequence.cuh).
template <class Policy>
void launch_policy(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                   LaunchRecord* record) {
  if (!plan.sequences) return launch_masking<Policy, KvLayout::kDense>(params, plan, stream, record);
  if (!plan.paged) {
    return launch_masking<Policy, KvLayout::kSequences>(params, plan, stream, record);
  }
  launch_masking<Policy, KvLayout::kPaged>(params, plan, stream, record);
}

// The plan's tiles are one of a policy's two shapes: the narrow decode tile or the wide one.
template <template <class, int, bool> class Policy, class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                     LaunchRecord* record) {
  using Narrow = Policy<Elem, D, true>;
  using Wide = Policy<Elem, D, false>;
  if (plan.tiles.block_m == Narrow::kBlockM && plan.tiles.block_n == Narrow::kBlockN) {
    launch_policy<Narrow>(params, plan, stream, record);
  } else if (plan.tiles.block_m == Wide::kBlockM && plan.tiles.block_n == Wide::kBlockN) {
    launch_policy<Wide>(params, plan, stream, record);
  } else {
    throw std::logic_error("flashsplit: no portable tile of " + std::to_string(plan.tiles.block_m) +
                           " x " + std::to_string(plan.tiles.block_n));
  }
}

}  // namespace portable
}  // namespace flashsplit
