// Host entry of the Hopper forward producers, one explicit instantiation per (dtype, head dim)
// in fwd_{bf16,fp16}_d{64,128}.cu.
#pragma once

#include "kernels/attn_launch.h"

namespace flashsplit {
namespace sm90 {

// Runs the plan's producers (and its tail split's pieces) on the tiles the plan names.
template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                     LaunchRecord* record);

}  // namespace sm90
}  // namespace flashsplit
