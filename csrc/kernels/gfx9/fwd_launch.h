// Launchers of the portable forward over the gfx9 policy, one explicit instantiation per
// (dtype, head dim) translation unit.
#pragma once

#include "kernels/attn_launch.h"

namespace flashsplit {
namespace gfx9 {

// Runs the plan's producers: direct epilogue when it has one split, fp32 partials otherwise.
template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                     LaunchRecord* record);

}  // namespace gfx9
}  // namespace flashsplit
