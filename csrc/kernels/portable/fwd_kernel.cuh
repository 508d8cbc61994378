// The portable split-KV forward: one arch-neutral algorithm over an arch policy.
//
// One thread block owns one (sequence, k/v head, tile of packed rows, split); a sequence is a
// batch of a dense call or one of a varlen or kv-cache call's (sequence.cuh). The h/hk query heads
// that share a k/v head are packed into the tile's rows (packed_rows in core/tiles.h), so each
// K/V block is loaded once for the whole group and decode (sq = 1) fills rows with heads instead
// of padding. The block walks its key blocks from last to first, so masking (keys past sk, the
// causal diagonal; core/key_blocks.h) is needed only on its first iterations, and copies the
// next block while it computes on the current one. Per block: S = Q K^T on the matrix units,
// the mask, the online softmax (core/online_softmax.h), O += P V. The epilogue writes the output
// (G = 1) or the split's fp32 partial and LSE_g for the combine (kernels/fwd_common.cuh).
//
// A policy may split each key block among key warps (the sm80 narrow tile with key warps): the
// warps hold the same rows, each computes on its part of every block the block's threads copy
// together, and at the end they fold their softmax states into the first (merge_key_warps),
// which writes the rows.
//
// The policy owns what the hardware decides: the tile shape, shared memory and the copies into
// it (Policy::Pipeline), the fragments and the matrix op, which rows and keys each thread's
// accumulator registers hold, and the lane reductions over a row. Policies: sm80/policy.cuh
// (mma.sync, warp32) and gfx9/policy.h (MFMA, wave64). What a policy provides:
//   Elem, kHeadDim, kBlockM, kThreads, kMinOccupancy (FS_LAUNCH_BOUNDS), kDynamicSmemBytes,
//   kStageKeys, kKeyWarps, kBlockN
//                          keys per key block, the key warps (the outermost of the block's
//                          threads) that share it, and the keys of one warp's part
//   merge_scratch()        shared memory for the key warps' states (kKeyWarps > 1 only)
//   kPagedSmemBytes        what a paged call's Pipeline adds to the dynamic shared memory
//   Lanes                  this thread's place in the block (from threadIdx)
//   kRows, thread_row      the query rows a thread holds: row i is tile row thread_row(lanes, i)
//   Scores, kScoreRuns, kScoreRun, score(s, i, j, e), lane_key(lanes), run_key(j)
//                          S: row i's run j holds keys lane_key + run_key(j) + [0, kScoreRun)
//                          of the block (run_key a compile-time constant per j)
//   Output, kOutRuns, kOutRun, out(o, i, j, e), lane_col(lanes), run_col(j),
//   writes_row_stats(lanes) O likewise, and which of a row's threads writes its statistics
//   row_max(x), row_sum(x) the max / sum of x over the threads that share a row
//   QFragment, read_q      Q in registers, once per tile (sign-flipped for a negative scale)
//   qk(s, q, pipe, lanes)  S = Q K^T on the current block; pv(o, s, pipe, lanes): O += P V
//   Pipeline<Layout>       prologue / fetch / wait_landed / scores_done (K read for this block) /
//                          values_landed (V may be read) / release around the key-block walk;
//                          k_tile / v_tile of a warp's part
#pragma once

#include <float.h>
#include <math.h>

#include "core/key_blocks.h"
#include "core/online_softmax.h"
#include "core/portable_grid.h"
#include "core/tiles.h"
#include "kernels/attn_params.h"
#include "kernels/fwd_common.cuh"
#include "kernels/sequence.cuh"

namespace flashsplit {
namespace portable {

// Where packed row r of a k/v head's group lives: its query index and its query head.
struct PackedRow {
  int query, head;
};
__device__ __forceinline__ PackedRow unpack_row(int r, int group, int kv_head) {
  return PackedRow{r / group, kv_head * group + r % group};
}

// The block's work: its (sequence, k/v head), first packed row, queries and key blocks.
struct TileWork {
  bool has_work;  // false for the grid's empty blocks (core/portable_grid.h) and for tiles past
                  // a short sequence's last row
  Sequence seq;
  int kv_head, group, split;
  int m0;           // first packed row of the tile
  int first_query;  // query of the tile's first packed row
  KeyBlockRange range;
};

template <int BlockM, int BlockN, bool Causal, bool Split, KvLayout Layout>
__device__ __forceinline__ TileWork locate_tile(const AttnFwdParams& p) {
  TileWork t;
  // Causal tiles late in the sequence do the most work: start them first.
  const int m_block = Causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const unsigned hk = p.hk;
  const PortableBlock block =
      portable_block(blockIdx.y, blockIdx.z, Split ? p.num_splits : 1u, p.seqs * hk);
  t.has_work = block.has_work;
  if (!t.has_work) return t;
  t.split = block.split;
  t.seq = sequence_of<Layout>(p, block.pair / hk);
  t.kv_head = block.pair % hk;
  t.group = p.h / p.hk;
  t.m0 = m_block * BlockM;
  t.first_query = t.m0 / t.group;
  const int sq = t.seq.sq, sk = t.seq.sk;
  t.has_work = t.first_query < sq;
  const int tile_last_query = (t.m0 + BlockM - 1) / t.group;
  const int last_query = tile_last_query < sq - 1 ? tile_last_query : sq - 1;
  const int n_visible = visible_key_blocks(last_query + 1, sq, sk, BlockN, Causal);
  t.range = Split ? split_key_blocks(n_visible, p.num_splits, t.split)
                  : KeyBlockRange{0, n_visible};
  return t;
}

// The key warp this thread belongs to (0 where a warp walks whole key blocks).
template <class Policy>
__device__ __forceinline__ int key_warp() {
  if constexpr (Policy::kKeyWarps == 1) {
    return 0;
  } else {
    return static_cast<int>(threadIdx.x) / (Policy::kThreads / Policy::kKeyWarps);
  }
}

// -inf at the keys of this warp's part of block n a row may not see (only on parts that hold
// such keys).
template <class Policy, bool Causal>
__device__ __forceinline__ void mask_scores(typename Policy::Scores& s, const Sequence& seq,
                                            const typename Policy::Lanes& lanes,
                                            const int (&queries)[Policy::kRows], int n,
                                            int first_query) {
  const int n0 = n * Policy::kStageKeys + key_warp<Policy>() * Policy::kBlockN;
  if (!block_needs_mask(n0, Policy::kBlockN, first_query, seq.sq, seq.sk, Causal)) return;
  const int lane_key = n0 + Policy::lane_key(lanes);
#pragma unroll
  for (int i = 0; i < Policy::kRows; ++i) {
    const int limit = last_visible_key(queries[i], seq.sq, seq.sk, Causal);
#pragma unroll
    for (int j = 0; j < Policy::kScoreRuns; ++j)
#pragma unroll
      for (int e = 0; e < Policy::kScoreRun; ++e)
        if (lane_key + Policy::run_key(j) + e > limit) Policy::score(s, i, j, e) = -INFINITY;
  }
}

// The online softmax over one block: each row's new running max, the rescale of what it has
// summed, and its probabilities in place of the scores.
template <class Policy>
__device__ __forceinline__ void online_softmax(typename Policy::Scores& s,
                                               typename Policy::Output& o,
                                               float (&row_max)[Policy::kRows],
                                               float (&row_sum)[Policy::kRows], float scale_log2) {
#pragma unroll
  for (int i = 0; i < Policy::kRows; ++i) {
    float block_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < Policy::kScoreRuns; ++j)
#pragma unroll
      for (int e = 0; e < Policy::kScoreRun; ++e)
        block_max = fmaxf(block_max, Policy::score(s, i, j, e));
    const float new_max = fmaxf(row_max[i], Policy::row_max(block_max));
    const float base = softmax_base(new_max, scale_log2);
    const float rescale = fast_exp2(softmax_rescale_exponent(row_max[i], scale_log2, base));
    row_max[i] = new_max;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < Policy::kScoreRuns; ++j)
#pragma unroll
      for (int e = 0; e < Policy::kScoreRun; ++e) {
        float& x = Policy::score(s, i, j, e);
        x = fast_exp2(softmax_exponent(x, scale_log2, base));
        sum += x;
      }
    row_sum[i] = row_sum[i] * rescale + sum;
#pragma unroll
    for (int j = 0; j < Policy::kOutRuns; ++j)
#pragma unroll
      for (int e = 0; e < Policy::kOutRun; ++e) Policy::out(o, i, j, e) *= rescale;
  }
}

// The tile's key blocks, last to first: fetch the next while computing on the current (the
// policy's pipeline decides when each block's K and V are copied).
template <class Policy, bool Causal, KvLayout Layout>
__device__ __forceinline__ void walk_key_blocks(const AttnFwdParams& p, const TileWork& tile,
                                                const typename Policy::Lanes& lanes,
                                                const int (&queries)[Policy::kRows],
                                                typename Policy::Output& o,
                                                float (&row_max)[Policy::kRows],
                                                float (&row_sum)[Policy::kRows],
                                                float scale_log2) {
  typename Policy::template Pipeline<Layout> pipe(p, tile.seq, tile.kv_head);
  pipe.prologue(tile.m0, tile.group, tile.range.end - 1);
  typename Policy::QFragment q;
  for (int n = tile.range.end - 1; n >= tile.range.begin; --n) {
    const bool more = n > tile.range.begin;
    if (more) pipe.fetch(n - 1);
    pipe.wait_landed(more);
    if (n == tile.range.end - 1) Policy::read_q(q, pipe, lanes, p.softmax_scale < 0.f);
    typename Policy::Scores s;
    Policy::qk(s, q, pipe, lanes);
    pipe.scores_done(more);
    mask_scores<Policy, Causal>(s, tile.seq, lanes, queries, n, tile.first_query);
    online_softmax<Policy>(s, o, row_max, row_sum, scale_log2);
    pipe.values_landed(more);
    Policy::pv(o, s, pipe, lanes);
    pipe.release(more);
  }
}

// Key warps: folds every warp's state into the first's, whose threads then hold the merged rows.
// The warps' threads hold the same rows and columns at the same places, so thread t of each warp
// folds element by element into thread t of the first: each state is rescaled from its warp's
// running max to the rows' overall max, as the combine folds splits (a warp that saw no key of
// a row adds nothing).
template <class Policy>
__device__ __forceinline__ void merge_key_warps(typename Policy::Output& o,
                                                float (&row_max)[Policy::kRows],
                                                float (&row_sum)[Policy::kRows], float scale_log2) {
  constexpr int kRows = Policy::kRows, kRuns = Policy::kOutRuns, kRun = Policy::kOutRun;
  constexpr int kWarpThreads = Policy::kThreads / Policy::kKeyWarps;
  constexpr int kRowValues = 2 + kRuns * kRun;  // per thread and row: max, sum, output
  const int warp = key_warp<Policy>(), t = static_cast<int>(threadIdx.x) % kWarpThreads;
  float* const scratch = Policy::merge_scratch();  // [warp - 1][row][value][thread]
  auto at = [&](int w, int i, int v) -> float& {
    return scratch[(((w - 1) * kRows + i) * kRowValues + v) * kWarpThreads + t];
  };
  __syncthreads();  // every warp is done with the K/V stages the scratch overlays
  if (warp != 0) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      at(warp, i, 0) = row_max[i];
      at(warp, i, 1) = row_sum[i];
#pragma unroll
      for (int j = 0; j < kRuns; ++j)
#pragma unroll
        for (int e = 0; e < kRun; ++e) at(warp, i, 2 + j * kRun + e) = Policy::out(o, i, j, e);
    }
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    float merged_max = row_max[i];
#pragma unroll
    for (int w = 1; w < Policy::kKeyWarps; ++w) merged_max = fmaxf(merged_max, at(w, i, 0));
    const float base = softmax_base(merged_max, scale_log2);
    const float own = fast_exp2(softmax_rescale_exponent(row_max[i], scale_log2, base));
    row_sum[i] *= own;
#pragma unroll
    for (int j = 0; j < kRuns; ++j)
#pragma unroll
      for (int e = 0; e < kRun; ++e) Policy::out(o, i, j, e) *= own;
#pragma unroll
    for (int w = 1; w < Policy::kKeyWarps; ++w) {
      const float f = fast_exp2(softmax_rescale_exponent(at(w, i, 0), scale_log2, base));
      row_sum[i] += at(w, i, 1) * f;
#pragma unroll
      for (int j = 0; j < kRuns; ++j)
#pragma unroll
        for (int e = 0; e < kRun; ++e) Policy::out(o, i, j, e) += at(w, i, 2 + j * kRun + e) * f;
    }
    row_max[i] = merged_max;
  }
}

template <class Policy, bool Causal, bool Split, KvLayout Layout>
__global__ void FS_LAUNCH_BOUNDS(Policy::kThreads, Policy::kMinOccupancy)
    portable_fwd_kernel(const AttnFwdParams p) {
  using Elem = typename Policy::Elem;
  constexpr int kRows = Policy::kRows;
  allow_dependent_launch();  // the split path's combine may now be scheduled
  const TileWork tile = locate_tile<Policy::kBlockM, Policy::kStageKeys, Causal, Split, Layout>(p);
  if (!tile.has_work) return;
  const typename Policy::Lanes lanes;
  // The packed row of this thread's row i.
  auto row_of = [&](int i) {
    return unpack_row(tile.m0 + Policy::thread_row(lanes, i), tile.group, tile.kv_head);
  };
  const float scale_log2 = softmax_scale_log2(p.softmax_scale);
  typename Policy::Output o;
  Policy::zero(o);
  float row_max[kRows], row_sum[kRows];  // row_sum: this thread's part, reduced at the end
#pragma unroll
  for (int i = 0; i < kRows; ++i) row_max[i] = -INFINITY, row_sum[i] = 0.f;
  if (tile.range.begin < tile.range.end) {
    int queries[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) queries[i] = row_of(i).query;
    walk_key_blocks<Policy, Causal, Layout>(p, tile, lanes, queries, o, row_max, row_sum,
                                            scale_log2);
  }
  if constexpr (Policy::kKeyWarps > 1) {
    merge_key_warps<Policy>(o, row_max, row_sum, scale_log2);
    if (key_warp<Policy>() != 0) return;
  }

  // Epilogue: normalise, then write either the output or this split's partial.
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const float sum = Policy::row_sum(row_sum[i]);  // every lane reduces before padding leaves
    const PackedRow row = row_of(i);
    if (row.query >= tile.seq.sq) continue;  // a padding row past the last packed row
    write_row_runs<Elem, Policy::kHeadDim, Split, Policy::kOutRun, Policy::kOutRuns>(
        p, tile.seq.batch, row.head, tile.seq.row0 + row.query, tile.split,
        finished_row_scale(row_max[i], scale_log2, sum), Policy::writes_row_stats(lanes),
        Policy::lane_col(lanes), [](int j) { return Policy::run_col(j); },
        [&](int j, int e) { return Policy::out(o, i, j, e); });
  }
}

}  // namespace portable
}  // namespace flashsplit
