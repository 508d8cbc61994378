#pragma once

#include <torch/extension.h>

#include <tuple>

namespace flashsplit {

// Native forward; throws with the gate's reason when the gate refuses the call.
std::tuple<at::Tensor, at::Tensor> native_forward(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, double softmax_scale,
                                                  bool causal, int64_t num_splits);

}  // namespace flashsplit
