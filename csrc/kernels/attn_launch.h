// Host entry points of the forward kernels. Every launch is checked; failures throw
// std::runtime_error with the GPU runtime's message.
#pragma once

#include "attn_params.h"
#include "platform.h"

namespace flashsplit {

// Runs the whole forward: plain kernel for num_splits == 1, producers + combine otherwise.
// Requires d in {64, 128}; the caller (gate) has checked everything else.
void run_attn_fwd(const AttnFwdParams& params, gpuStream_t stream);

}  // namespace flashsplit
