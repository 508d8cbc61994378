// Definition of sm80::launch_attn_fwd: the portable forward over the sm80 policy. Included only
// by the instantiation units.
#pragma once

#include "kernels/portable/fwd_launch.cuh"
#include "kernels/sm80/fwd_launch.h"
#include "kernels/sm80/policy.cuh"

namespace flashsplit {
namespace sm80 {

// The policy's narrow and wide tiles, one warp to a row tile's keys.
template <class Elem, int D, bool Narrow>
using RowTilePolicy = Policy<Elem, D, Narrow>;

template <class KeyWarpPolicy>
void launch_key_warp_tile(const AttnFwdParams& params, const LaunchPlan& plan,
                          gpuStream_t stream, LaunchRecord* record) {
  portable::launch_policy<KeyWarpPolicy>(params, plan, stream, record);
  if (record != nullptr) record->staggered_kv = KeyWarpPolicy::kStaggeredKv;
}

template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                     LaunchRecord* record) {
  if (plan.tiles.key_warps > 1) {
    if constexpr (D == 64 || D == 128) {
      using OneAnSm = Policy<Elem, D, true, kSm80KeyWarps, 1>;
      using TwoAnSm = Policy<Elem, D, true, kSm80KeyWarps, 2>;
      using OneAnSmStaggered = Policy<Elem, D, true, kSm80KeyWarps, 1, true>;
      using TwoAnSmStaggered = Policy<Elem, D, true, kSm80KeyWarps, 2, true>;
      if (plan.tiles.key_warps == kSm80KeyWarps) {
        if (plan.tiles.block_n == OneAnSm::kStageKeys) {
          return plan.staggered_kv
                     ? launch_key_warp_tile<OneAnSmStaggered>(params, plan, stream, record)
                     : launch_key_warp_tile<OneAnSm>(params, plan, stream, record);
        }
        if (plan.tiles.block_n == TwoAnSm::kStageKeys) {
          return plan.staggered_kv
                     ? launch_key_warp_tile<TwoAnSmStaggered>(params, plan, stream, record)
                     : launch_key_warp_tile<TwoAnSm>(params, plan, stream, record);
        }
      }
    }
    throw std::logic_error("flashsplit: no sm80 narrow tile of " +
                           std::to_string(plan.tiles.key_warps) + " key warps over " +
                           std::to_string(plan.tiles.block_n) + " keys at d=" + std::to_string(D));
  }
  portable::launch_attn_fwd<RowTilePolicy, Elem, D>(params, plan, stream, record);
}

}  // namespace sm80
}  // namespace flashsplit
