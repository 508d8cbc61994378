// Turns tensors and options into the core's problem description and asks the core what to run.
#pragma once

#include <torch/extension.h>

#include "core/gate.h"
#include "core/tail_split.h"
#include "core/tile_config.h"

namespace flashsplit {

struct FeatureOptions {
  bool causal = false;
  double dropout_p = 0.0;
  int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  bool has_alibi = false;
};

struct Plan {
  GateDecision gate;
  int num_splits = 1;  // G that runs (1 on the reference path)
  TileConfig tiles{0, 0, 0, 0};
  // Keys per block of this call's tiles with G >= 2 (the tiles the heuristic models), which
  // clamp a requested G; an unsplit call's own tiles may take fewer (wide Hopper tiles).
  int split_block_n = 0;
  DeviceInfo device;  // what the gate and the heuristic saw; the launch uses its SMs and cc
  TailSplit tail;     // the last round spread over every SM (core/tail_split.h), if active
  bool carry = false;  // S carried across tiles (carry_across_tiles_for_run)
  bool rotate_rounds = false;  // rounds' tiles rotated among blocks (rotates_rounds_for_run)
  bool tile_counter = false;  // tiles drawn from a counter (draws_tiles_from_counter)
};

// Shapes, ranks, dtypes, devices and num_splits; throws c10::Error naming the argument.
void check_attention_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t num_splits);

// Never throws for inputs that passed check_attention_inputs.
Plan make_plan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const FeatureOptions& features, int64_t num_splits, bool allow_untested_arch);

// FLASHSPLIT_ALLOW_UNTESTED_ARCH=1 in the environment.
bool untested_arch_allowed_by_env();

// FLASHSPLIT_DISABLE_HOPPER=1 in the environment: the portable kernels serve every call.
bool hopper_disabled_by_env();

// FLASHSPLIT_DISABLE_TAIL_SPLIT=1 in the environment: unsplit calls run their last round of
// tiles whole (for comparisons; core/tail_split.h).
bool tail_split_disabled_by_env();

}  // namespace flashsplit
