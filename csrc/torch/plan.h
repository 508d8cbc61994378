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

// A call of sequences of their own lengths, in the layout the kernels read (attn_params.h):
// q (b, sq, h, d), or (1, total_q, h, d) with cu_seqlens_q; k/v (b_k, s_k, hk, d),
// (1, total_k, hk, d) with cu_seqlens_k, or pages (pages, page_size, hk, d) with block_table.
// The index tensors are int32 on q's device; an undefined one is absent.
struct SequenceArgs {
  at::Tensor cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_idx, block_table;
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;  // the longest sequence's queries and keys
  int64_t count(const at::Tensor& q) const;     // sequences
  bool paged() const { return block_table.defined(); }
};

// Shapes, ranks, dtypes, devices and num_splits; throws c10::Error naming the argument.
// same_batch: k's batch must be q's (dense calls; a sequence call's k is laid out apart).
void check_attention_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t num_splits, bool same_batch = true);

// The call's plan (core/plan.h) from the tensors, the device and the environment's switches.
// Never throws for inputs that passed check_attention_inputs. arch_verified: a verify stamp
// for this GPU and build exists (the Python layer reads it). Environment switches it reads:
// FLASHSPLIT_ALLOW_UNTESTED_ARCH=1 (admit an unverified GPU),
// FLASHSPLIT_DISABLE_HOPPER=1 (the portable kernels serve every call) and
// FLASHSPLIT_DISABLE_TAIL_SPLIT=1 (unsplit calls run their last round of tiles whole).
LaunchPlan make_plan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const FeatureOptions& features, int64_t num_splits, bool arch_verified);

// The index tensors of a sequence call against q and k: ranks, dtypes, devices, sizes.
void check_sequence_inputs(const at::Tensor& q, const at::Tensor& k, const SequenceArgs& seqs);

// The plan of a sequence call: b sequences of at most max_seqlen_q queries and max_seqlen_k keys.
LaunchPlan make_sequence_plan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const SequenceArgs& seqs, const FeatureOptions& features,
                              int64_t num_splits, bool arch_verified);

}  // namespace flashsplit
