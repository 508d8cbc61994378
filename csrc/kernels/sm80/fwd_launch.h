// Launchers of the portable forward kernel, one explicit instantiation per (dtype, head dim)
// translation unit so the build compiles them in parallel.
#pragma once

#include "kernels/attn_launch.h"

namespace flashsplit {
namespace sm80 {

// Runs the plan's producers: direct epilogue when it has one split, fp32 partials otherwise.
template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                     LaunchRecord* record);

}  // namespace sm80
}  // namespace flashsplit
