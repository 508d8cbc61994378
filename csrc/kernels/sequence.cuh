// Where one sequence of a call lives: its lengths and the rows of q, out and k/v that hold it.
// A dense call's sequence i is batch i with the call's sq and sk; a varlen call packs its
// sequences' rows one after another (cu_seqlens); a kv-cache call takes each sequence's key
// count from seqused_k, its k/v batch from kv_batch_idx and its keys from pages where a block
// table is given (kernels/attn_params.h). The portable kernels read it once per thread block,
// the Hopper kernels once per tile (sm90/tile_scheduler.cuh).
#pragma once

#include <cstdint>

#include "kernels/attn_params.h"
#include "kernels/platform.h"

namespace flashsplit {

// What a kernel instance reads of a call's sequences: nothing (dense: sequence i is batch i),
// their lengths and k/v batches (varlen, kv cache), or those and their pages (paged k/v; the
// Hopper kernels load pages as TMA boxes, kPaged, or, pages too small for boxes, a row at a
// time, kPagedRows). Each is its own instance, so the dense and contiguous walks keep the
// registers and instructions the others need.
enum class KvLayout { kDense, kSequences, kPaged, kPagedRows };

// Whether an instance of this layout reads its sequences' keys through a block table.
constexpr bool reads_pages(KvLayout layout) {
  return layout == KvLayout::kPaged || layout == KvLayout::kPagedRows;
}

struct Sequence {
  int sq, sk;        // its queries and the keys they attend to
  int batch;         // the batch of q, out and lse that holds its queries ...
  int row0;          // ... from this query row on
  int kv_batch;      // the batch of k/v that holds its keys (contiguous k/v) ...
  int key0;          // ... from this key row on
  const int* pages;  // its row of the block table (paged k/v), else null
};

// Sequence i of a dense call: batch i.
__device__ __forceinline__ Sequence dense_sequence(const AttnFwdParams& p, int i) {
  return Sequence{p.sq, p.sk, i, 0, i, 0, nullptr};
}

// Sequence i of a call, as an instance of Layout reads it.
template <KvLayout Layout>
__device__ __forceinline__ Sequence sequence_of(const AttnFwdParams& p, int i) {
  Sequence s = dense_sequence(p, i);
  if constexpr (Layout == KvLayout::kDense) return s;
  if (p.cu_seqlens_q != nullptr) {
    s.batch = 0;
    s.row0 = p.cu_seqlens_q[i];
    s.sq = p.cu_seqlens_q[i + 1] - s.row0;
  }
  if (p.cu_seqlens_k != nullptr) {
    s.kv_batch = 0;
    s.key0 = p.cu_seqlens_k[i];
    s.sk = p.cu_seqlens_k[i + 1] - s.key0;
  }
  if (p.seqused_k != nullptr) s.sk = p.seqused_k[i];
  if (p.kv_batch_idx != nullptr) s.kv_batch = p.kv_batch_idx[i];
  if constexpr (reads_pages(Layout)) s.pages = p.block_table + i * p.block_table_stride;
  return s;
}

// The first element of (query row0, head 0) of a q-shaped tensor.
template <class Elem>
__device__ __forceinline__ const Elem* sequence_queries(const AttnFwdParams& p, const Sequence& s) {
  return static_cast<const Elem*>(p.q) + s.batch * p.q_batch_stride +
         static_cast<int64_t>(s.row0) * p.q_row_stride;
}

// The first element of key key0 of k/v head kv_head (contiguous k/v), or of head kv_head of
// the pages' row 0 (paged: rows are found through the pages).
template <class Elem>
__device__ __forceinline__ const Elem* sequence_keys(const void* base, int64_t batch_stride,
                                                     int64_t row_stride, int64_t head_stride,
                                                     const Sequence& s, int kv_head) {
  const Elem* head = static_cast<const Elem*>(base) + kv_head * head_stride;
  if (s.pages != nullptr) return head;
  return head + s.kv_batch * batch_stride + static_cast<int64_t>(s.key0) * row_stride;
}

}  // namespace flashsplit
