// The split-KV combine: folds num_splits fp32 partials (O_g, LSE_g) into out and lse.
// Portable (no matrix-core code), shared by every target.
#pragma once

#include "kernels/attn_launch.h"

namespace flashsplit {

// Launches the combine with the plan's lanes per row and grid; fills record's combine fields.
void launch_combine(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                    LaunchRecord* record);

}  // namespace flashsplit
