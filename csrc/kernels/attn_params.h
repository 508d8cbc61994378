// What the torch layer hands the kernels: raw pointers and element strides, nothing of torch.
// How the call runs (kernel family, tiles, G, walk, grids) comes with it as the LaunchPlan.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashsplit {

enum class ElemType { kFloat16, kBFloat16 };

struct AttnFwdParams {
  ElemType elem = ElemType::kBFloat16;
  const void* q = nullptr;  // (b, sq, h, d)
  const void* k = nullptr;  // (b, sk, hk, d), or pages (see block_table)
  const void* v = nullptr;  // like k, with head dim dv
  void* out = nullptr;      // (b, sq, h, dv)
  float* lse = nullptr;     // (b, h, sq), contiguous

  // Strides in elements; the last dim of every tensor is contiguous.
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;

  // b and sq are the rows of q, out, lse and the partials as laid out; sk is k's key rows (the
  // longest sequence where lengths are per sequence).
  int b = 0, sq = 0, sk = 0, h = 0, hk = 0, d = 0;
  int dv = 0;  // v's and the output's head dim: d, or less (its columns past dv are zeros)

  // Sequences of their own lengths (varlen and kv-cache calls; the portable kernels read them,
  // sequence.cuh). A dense call has seqs == b and leaves every pointer null.
  int seqs = 0;                       // sequences: the grid's batch
  int max_seqlen_q = 0;               // queries of the longest (sq for a dense call)
  int kv_batches = 0;                 // k/v's batch dim as laid out (pages of a paged call)
  const int* cu_seqlens_q = nullptr;  // (seqs + 1): sequence i's queries are rows
                                      // [cu[i], cu[i + 1]) of q and out, whose b is 1
  const int* cu_seqlens_k = nullptr;  // (seqs + 1): its keys are rows [cu[i], cu[i + 1]) of k/v
  const int* seqused_k = nullptr;     // (seqs): the keys it attends to, from its first
  const int* kv_batch_idx = nullptr;  // (seqs): the batch of k/v that holds its keys
  // Paged k/v: k and v are (pages, page_size, hk, d) and key j of sequence i lives in page
  // block_table[i * block_table_stride + j / page_size], row j % page_size (batch strides are
  // page strides).
  const int* block_table = nullptr;
  int64_t block_table_stride = 0;
  int page_size = 0;
  float softmax_scale = 1.f;
  bool causal = false;

  // Split-KV: num_splits == 1 writes out/lse directly. num_splits >= 2 makes the producers
  // write o_accum (num_splits, b, h, sq, dv) and lse_accum (num_splits, b, h, sq), both fp32
  // contiguous, and the combine kernel folds them into out and lse.
  int num_splits = 1;
  float* o_accum = nullptr;
  float* lse_accum = nullptr;

  // The tail split's workspace (tail_workspace_bytes_for(plan); the launcher clears what needs
  // it), where the plan has one.
  void* tail_ws = nullptr;
  size_t tail_ws_bytes = 0;

  // The counter the plan's causal Hopper walks draw their tiles from (one int; the launcher
  // clears it), where the plan asks for one (LaunchPlan::tile_counter).
  int* tile_counter = nullptr;
};

}  // namespace flashsplit
