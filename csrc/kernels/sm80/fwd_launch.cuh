// Definition of sm80::launch_attn_fwd: the portable forward over the sm80 policy. Included only
// by the instantiation units.
#pragma once

#include "kernels/portable/fwd_launch.cuh"
#include "kernels/sm80/fwd_launch.h"
#include "kernels/sm80/policy.cuh"

namespace flashsplit {
namespace sm80 {

template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                     LaunchRecord* record) {
  portable::launch_attn_fwd<Policy, Elem, D>(params, plan, stream, record);
}

}  // namespace sm80
}  // namespace flashsplit
