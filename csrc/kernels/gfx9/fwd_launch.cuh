// Definition of gfx9::launch_attn_fwd: the portable forward over the gfx9 policy. Included only
// by the instantiation units.
#pragma once

#include "kernels/gfx9/fwd_launch.h"
#include "kernels/gfx9/policy.h"
#include "kernels/portable/fwd_launch.cuh"

namespace flashsplit {
namespace gfx9 {

template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                     LaunchRecord* record) {
  portable::launch_attn_fwd<Policy, Elem, D>(params, plan, stream, record);
}

}  // namespace gfx9
}  // namespace flashsplit
