// Launchers of the portable forward kernel, one explicit instantiation per (dtype, head dim)
// translation unit so the build compiles them in parallel.
#pragma once

#include "kernels/attn_params.h"
#include "kernels/platform.h"

namespace flashsplit {
namespace sm80 {

// Runs the producers: direct epilogue when params.num_splits == 1, fp32 partials otherwise.
template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, gpuStream_t stream);

}  // namespace sm80
}  // namespace flashsplit
