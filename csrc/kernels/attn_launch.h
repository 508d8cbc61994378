// Host entry point of the forward kernels. Every launch is checked; failures throw
// std::runtime_error with the GPU runtime's message.
#pragma once

#include "core/plan.h"
#include "kernels/attn_params.h"
#include "kernels/platform.h"

namespace flashsplit {

// Runs the whole forward the plan describes: the forward kernel (direct epilogue for
// plan.num_splits == 1, fp32 partials otherwise), the tail split's pieces and the combine.
// The plan must be admitted (plan.gate.ok) and params must match the problem it was made for.
// record: filled with what ran, where given.
void run_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                  LaunchRecord* record = nullptr);

}  // namespace flashsplit
