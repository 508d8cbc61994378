#pragma once

#include <torch/extension.h>

#include <tuple>

#include "core/plan.h"
#include "plan.h"

namespace flashsplit {

// Runs a plan the gate admitted (throws with the gate's reason for one it refused): (out, lse)
// in q's layout. seqs: the sequences of a varlen or kv-cache call, null for a dense one.
std::tuple<at::Tensor, at::Tensor> run_admitted(const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const SequenceArgs* seqs,
                                                const LaunchPlan& plan, double softmax_scale,
                                                bool causal, LaunchRecord* record = nullptr);

// Native forward: (out, lse). Throws with the gate's reason when the gate refuses the call.
// record: where given, filled with what the launchers ran (kernels/attn_launch.h), and plan with
// the plan they were given.
std::tuple<at::Tensor, at::Tensor> native_forward(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, double softmax_scale,
                                                  bool causal, int64_t num_splits,
                                                  bool arch_verified,
                                                  LaunchPlan* plan_out = nullptr,
                                                  LaunchRecord* record = nullptr);

}  // namespace flashsplit
