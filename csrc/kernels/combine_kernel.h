// The split-KV combine: folds num_splits fp32 partials (O_g, LSE_g) into out and lse.
// Portable (no matrix-core code), shared by every target.
#pragma once

#include "kernels/attn_params.h"
#include "kernels/platform.h"

namespace flashsplit {

void launch_combine(const AttnFwdParams& params, gpuStream_t stream);

}  // namespace flashsplit
