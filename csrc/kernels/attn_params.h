// What the torch layer hands the kernels: raw pointers and element strides, nothing of torch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashsplit {

enum class ElemType { kFloat16, kBFloat16 };

// Which forward kernel runs: the gate's kernel family, as the kernels name it.
enum class FwdKernel { kPortable, kHopper };

struct AttnFwdParams {
  ElemType elem = ElemType::kBFloat16;
  FwdKernel kernel = FwdKernel::kPortable;
  const void* q = nullptr;  // (b, sq, h, d)
  const void* k = nullptr;  // (b, sk, hk, d)
  const void* v = nullptr;  // (b, sk, hk, d)
  void* out = nullptr;      // (b, sq, h, d)
  float* lse = nullptr;     // (b, h, sq), contiguous

  // Strides in elements; the last dim of every tensor is contiguous.
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;

  int b = 0, sq = 0, sk = 0, h = 0, hk = 0, d = 0;
  int sm_count = 0;  // SMs of the device: a persistent launch runs one block per SM
  int cc = 0;        // compute capability (90 = sm_90): 90 and later launch the combine early
  float softmax_scale = 1.f;
  bool causal = false;

  // Split-KV: num_splits == 1 writes out/lse directly. num_splits >= 2 makes the producers
  // write o_accum (num_splits, b, h, sq, d) and lse_accum (num_splits, b, h, sq), both fp32
  // contiguous, and the combine kernel folds them into out and lse.
  int num_splits = 1;
  float* o_accum = nullptr;
  float* lse_accum = nullptr;

  // Unsplit Hopper calls without a causal mask may spread their last round of tiles over every
  // SM (core/tail_split.h); they do so only given this scratch (tail_workspace_bytes of the
  // launch's tail split; the launcher clears what needs it). nullptr = no tail split.
  void* tail_ws = nullptr;
  size_t tail_ws_bytes = 0;

  // Causal Hopper calls on 192- or 256-row tiles that run persistent hand the tiles out through
  // this counter (one int; the launcher clears it), longest first in groups of heads
  // (core/tile_order.h). nullptr = each block walks a static share of the tiles.
  int* tile_counter = nullptr;
};

}  // namespace flashsplit
