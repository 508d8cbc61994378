// Turns tensors and options into the core's problem description and asks the core for the plan.
#pragma once

#include <torch/extension.h>

#include "core/plan.h"

namespace flashsplit {

struct FeatureOptions {
  bool causal = false;
  double dropout_p = 0.0;
  int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  bool has_alibi = false;
};

// Shapes, ranks, dtypes, devices and num_splits; throws c10::Error naming the argument.
void check_attention_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t num_splits);

// The call's plan (core/plan.h) from the tensors, the device and the environment's switches.
// Never throws for inputs that passed check_attention_inputs. arch_verified: a verify stamp
// for this GPU and build exists (the Python layer reads it). Environment switches it reads:
// FLASHSPLIT_ALLOW_UNTESTED_ARCH=1 (admit an unverified GPU),
// FLASHSPLIT_DISABLE_HOPPER=1 (the portable kernels serve every call) and
// FLASHSPLIT_DISABLE_TAIL_SPLIT=1 (unsplit calls run their last round of tiles whole).
LaunchPlan make_plan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const FeatureOptions& features, int64_t num_splits, bool arch_verified);

}  // namespace flashsplit
