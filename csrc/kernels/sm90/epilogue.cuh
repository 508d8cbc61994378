// The Hopper forward's epilogues: normalise a consumer's finished rows, then write either
//   - the output (direct, G = 1): each warp stages its 16 rows in shared memory by stmatrix and
//     stores them with TMA, so the consumer goes on to its next tile instead of issuing D/4
//     narrow global stores per row; where the shared memory has no room for staging (d=96,
//     from d=192), a quad's lanes swap their columns so that each stores 16 bytes at a time;
//   - or this split's fp32 partial and LSE_g (G >= 2), as the portable kernel writes them
//     (write_output_row in kernels/fwd_common.cuh), so the combine kernel is shared;
//   - in the tail kernel, a piece of a tile cut into parts writes its unnormalised partial, and
//     the last part to finish folds every part's (fold_rescale, core/combine_math.h) and writes
//     the output directly.
#pragma once

#include <math.h>

#include <cstdint>

#include "core/combine_math.h"
#include "core/tail_split.h"
#include "kernels/fwd_common.cuh"
#include "kernels/sm90/fwd_params.cuh"
#include "kernels/sm90/hopper_primitives.cuh"
#include "kernels/sm90/kernel_traits.cuh"
#include "kernels/sm90/tile_scheduler.cuh"

namespace flashsplit {
namespace sm90 {

// What a tile's epilogue needs, kept apart from the walk's state: with overlap, the next tile's
// first block is already under way when the epilogue runs.
struct FinishedRows {
  // row0: this thread's rows are row0 and row0 + 8; head: the tile's (kPackHeads: the group's
  // first, row r being head + r % group of query r / group)
  int m0, row0, batch, head, split;
  // The tile's sequence: its queries (rows from sq on are padding), which start at row q_row of
  // q's batch `batch` (0 for a dense call).
  int sq, q_row;
  float row_max[2], row_sum[2];
  int slot;  // the tail kernel's piece (tail_piece_of_slot)
};

template <class Kt>
struct FwdEpilogue {
  using Elem = typename Kt::Elem;
  using Tiles = typename Kt::Tiles;
  static constexpr int kHeadDimV = Kt::kHeadDimV;  // O's columns

  const AttnFwdParams& p;
  const EpilogueParams& ep;
  // The walk's parameters: the tail split, and the GQA group (tiles packing a group's heads:
  // row r is query r / group).
  const SchedulerParams& sp;
  const ConsumerThread th;
  const float scale_log2;
  // Direct epilogue: this consumer's staging slabs and this warp's rows in each slab. Each warp
  // stages and stores its own 16 rows (lane 0 issues the TMA stores; a bulk group is per
  // thread, so it also waits for them), so only the warp synchronises, not the warpgroup (two
  // named barriers per tile fewer).
  unsigned char* const sO_rows;
  const uint32_t warp_rows;

  __device__ __forceinline__ FwdEpilogue(const HopperFwdParams& hp, unsigned char* staging,
                                         const ConsumerThread& thread, float scale_log2_)
      : p(hp.p),
        ep(hp.epilogue),
        sp(hp.scheduler),
        th(thread),
        scale_log2(scale_log2_),
        sO_rows(staging + thread.consumer * Tiles::kSlabs * Tiles::kSlabBytesO),
        warp_rows(thread.warp_in_group * 16 * 128) {}

  // The finished tile's sequence, read where used rather than kept beside O (dense kernels:
  // the call's). Its rows to write end before rows_end: its queries', or, where tiles pack a
  // group's heads, also the last its Q box filled (packed_tile_rows).
  __device__ __forceinline__ int rows_end(const FinishedRows& f) const {
    const int sq = Kt::kSequences ? f.sq : p.sq;
    if constexpr (Kt::kPackHeads) {
      return min(sq * sp.by_group.divisor(), f.m0 + packed_tile_rows(sp.by_group, Tiles::kBlockM));
    } else {
      return sq;
    }
  }
  // Where tile row `row` goes: its query (from the sequence's first row) and head.
  struct RowPlace {
    int query, head;
  };
  __device__ __forceinline__ RowPlace place_of(const FinishedRows& f, int row) const {
    if constexpr (Kt::kPackHeads) {
      const int query = sp.by_group.div(row);
      return RowPlace{query, f.head + sp.by_group.mod(row, query)};
    } else {
      return RowPlace{row, f.head};
    }
  }
  // Its first row in q's layout.
  __device__ __forceinline__ int first_row_of(const FinishedRows& f) const {
    return Kt::kSequences ? f.q_row : 0;
  }

  // Normalises O (this thread's o registers) and writes the rows. Rows of a tile with no key
  // block to visit (causal rows before the first key, an empty split) are written as
  // seen-no-key: 0 and lse -inf, without reading O (it may hold another tile).
  __device__ __forceinline__ void write(const FinishedRows& f, bool no_keys,
                                        float (&o)[kHeadDimV / 2]) const {
    if constexpr (Kt::kSplit) {
      write_partial(f, no_keys, o);
    } else {
      float fin_max[2] = {f.row_max[0], f.row_max[1]}, fin_sum[2] = {f.row_sum[0], f.row_sum[1]};
      if constexpr (Kt::kTailPass) {
        const TailPiece piece = tail_piece_of_slot(sp.tail, f.slot);
        if (piece.parts > 1 && !settle_tail_piece(piece, o, fin_max, fin_sum)) return;
      }
      write_direct(f, no_keys, o, fin_max, fin_sum);
    }
  }

  // G >= 2: this split's fp32 partial and LSE_g, this thread's two rows from registers
  // (write_output_row), a column pair per 8-byte store. (Transposed within the quad as
  // write_rows_unstaged does, into two 16-byte stores per block: no faster on multi-token decode,
  // 2-3% slower on split prefill.)
  __device__ __forceinline__ void write_partial(const FinishedRows& f, bool no_keys,
                                                const float (&o)[kHeadDimV / 2]) const {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = no_keys ? 0.f : quad_sum(f.row_sum[r]);
      const int row = f.row0 + 8 * r;
      if (row >= rows_end(f)) continue;  // a padding row
      const RowPlace at = place_of(f, row);
      write_output_row<Elem, kHeadDimV, true>(
          p, f.batch, at.head, first_row_of(f) + at.query, f.split, f.row_max[r], scale_log2,
          sum, th.quad_col, [&](int j) {
            return no_keys ? make_float2(0.f, 0.f)
                           : make_float2(o[4 * j + 2 * r], o[4 * j + 2 * r + 1]);
          });
    }
  }

  // G = 1 without staging (d=96 and from d=192: kStagedOutput): this thread's two rows from
  // registers, a 16-byte store per 8-column block. In the wgmma layout a quad's four lanes hold
  // a row's 8-column block two columns each; four blocks at a time they swap their packed pairs
  // (quad_transpose), so that lane q holds all of block 4g + q. A row then takes D / 32 stores
  // per lane instead of D / 8 of 4 bytes, and as every store instruction touches 8 rows' lines
  // whatever its width, the memory pipe takes a quarter of the requests. The consumers issue
  // them before their next tile's first S = Q K^T: with 4-byte stores these calls ran 2-18%
  // slower from 512 to 4096 keys (the most at 512).
  __device__ __forceinline__ void write_rows_unstaged(const FinishedRows& f, bool no_keys,
                                                      const float (&o)[kHeadDimV / 2],
                                                      const float (&fin_max)[2],
                                                      const float (&fin_sum)[2]) const {
    static_assert(kHeadDimV % 32 == 0, "whole groups of four 8-column blocks");
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = no_keys ? 0.f : quad_sum(fin_sum[r]);
      const FinishedRowScale scale = finished_row_scale(fin_max[r], scale_log2, sum);
      const int row = f.row0 + 8 * r;
      const bool real = row < rows_end(f);  // not a padding row (every lane shuffles)
      const RowPlace at = place_of(f, real ? row : 0);
      const int query = first_row_of(f) + at.query;
      if (real && th.quad_col == 0)
        p.lse[(static_cast<int64_t>(f.batch) * p.h + at.head) * p.sq + query] = scale.lse;
      Elem* const dst = static_cast<Elem*>(p.out) + f.batch * p.o_batch_stride +
                        static_cast<int64_t>(query) * p.o_row_stride +
                        at.head * p.o_head_stride;
#pragma unroll
      for (int g = 0; g < kHeadDimV / 32; ++g) {
        uint32_t pairs[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int block = 4 * g + k;
          pairs[k] = no_keys ? 0u
                             : pack2<Elem>(o[4 * block + 2 * r] * scale.inv,
                                           o[4 * block + 2 * r + 1] * scale.inv);
        }
        quad_transpose(pairs, th.quad_col);
        if (real)
          *reinterpret_cast<uint4*>(dst + (4 * g + th.quad_col) * 8) =
              make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
      }
    }
  }

  // G = 1: lse, then the warp's 16 rows staged and stored with TMA (from d=192 and at d=96,
  // without staging: write_rows_unstaged). A box stops only at the end of out, not at a
  // sequence's last row: where a sequence ends inside the warp's rows, the rows it holds are
  // stored one box row each (store_sequence_rows); the tiles packing a group's heads copy their
  // rows out to each row's query and head.
  __device__ __forceinline__ void write_direct(const FinishedRows& f, bool no_keys,
                                               const float (&o)[kHeadDimV / 2],
                                               const float (&fin_max)[2],
                                               const float (&fin_sum)[2]) const {
    if constexpr (!Kt::kStagedOutput) return write_rows_unstaged(f, no_keys, o, fin_max, fin_sum);
    // The warp's previous store must have read its staging rows before they are rewritten.
    if (th.lane == 0) bulk_wait_group_read<0>();
    __syncwarp();
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = no_keys ? 0.f : quad_sum(fin_sum[r]);
      const FinishedRowScale scale =
          finished_row_scale<Tiles::kApproxRowScale>(fin_max[r], scale_log2, sum);
      inv[r] = scale.inv;
      const int row = f.row0 + 8 * r;
      if (th.quad_col == 0 && row < rows_end(f)) {
        const RowPlace at = place_of(f, row);
        p.lse[(static_cast<int64_t>(f.batch) * p.h + at.head) * p.sq + first_row_of(f) +
              at.query] = scale.lse;
      }
    }
    stage_rows(no_keys, o, inv);
    // The warp's first row in the tile's sequence.
    const int warp_row = Kt::kRotate ? f.row0 - th.quad_row
                                     : f.m0 + th.consumer * 64 + th.warp_in_group * 16;
    if constexpr (Kt::kPackHeads) return copy_staged_rows(f, warp_row);
    fence_proxy_async_shared();
    __syncwarp();
    if (th.lane == 0) {
      // Rows at or past the map's rows (a dense call's or a batch's sq) are not written.
      const uint64_t o_policy = l2_evict_first_policy();
      if (Kt::kSequences && warp_row + 16 > f.sq) {
        store_sequence_rows(f, warp_row, o_policy);
      } else {
        for (int slab = 0; slab < Tiles::kSlabs; ++slab)
          tma_store_4d(&ep.o_map, sO_rows + slab * Tiles::kSlabBytesO + warp_rows, slab * 64,
                       first_row_of(f) + warp_row, f.head, f.batch, o_policy);
      }
      bulk_commit_group();
    }
  }

  // The warp's staged rows from warp_row on that its sequence holds, where it ends inside them
  // (the rows after it are the next sequence's in a varlen batch): one TMA store of a box row
  // each (EpilogueParams::o_row_map), from the row's place in the staging. A loop, not
  // unrolled: only a sequence's last warp of rows runs it, and unrolled it took a seventh of a
  // sequences instance's code, which a call pays for starting cold (docs/design.md).
  __device__ __forceinline__ void store_sequence_rows(const FinishedRows& f, int warp_row,
                                                      uint64_t o_policy) const {
#pragma unroll 1
    for (int row = 0; row < f.sq - warp_row; ++row)
      for (int slab = 0; slab < Tiles::kSlabs; ++slab)
        tma_store_4d(&ep.o_row_map, sO_rows + slab * Tiles::kSlabBytesO + warp_rows + row * 128,
                     slab * 64, first_row_of(f) + warp_row + row, f.head, f.batch, o_policy);
  }

  // Tiles packing a group's heads: the warp's staged rows from warp_row on that its sequence
  // holds (those below rows_end), each to its query and head, 16 bytes per lane and store (a
  // row's chunks by consecutive lanes), from the swizzled staging to out.
  __device__ __forceinline__ void copy_staged_rows(const FinishedRows& f, int warp_row) const {
    constexpr int kChunks = Tiles::kSlabs * 8;  // 16-byte chunks per row
    __syncwarp();
    Elem* const sequence = static_cast<Elem*>(p.out) + f.batch * p.o_batch_stride +
                           static_cast<int64_t>(first_row_of(f)) * p.o_row_stride;
    const int end = rows_end(f);
    for (int c = th.lane; c < 16 * kChunks; c += 32) {
      const int row = c / kChunks, slab = c % kChunks / 8, chunk = c % 8;
      if (warp_row + row >= end) break;
      const uint4 v = *reinterpret_cast<const uint4*>(
          sO_rows + slab * Tiles::kSlabBytesO + warp_rows + row * 128 + ((chunk ^ (row % 8)) << 4));
      const RowPlace at = place_of(f, warp_row + row);
      Elem* const dst =
          sequence + at.head * p.o_head_stride + static_cast<int64_t>(at.query) * p.o_row_stride;
      *reinterpret_cast<uint4*>(dst + slab * 64 + chunk * 8) = v;
    }
    __syncwarp();
  }

  // The warp's 16 rows of O * inv into its staging rows by stmatrix, four 8x8 matrices a time:
  // rows 0-7 and 8-15 of column blocks j and j + 1 (8 columns each; registers 4j + 2r (+1) hold
  // row r * 8 + lane / 4 of block j). Lane l gives the address of row l % 8 (+ 8 for the odd
  // matrices) of its matrix: in the slab of 64 columns, 16-byte chunk (block % 8) XOR row % 8
  // (the 128-byte swizzle). One store and one address per four registers instead of one each.
  __device__ __forceinline__ void stage_rows(bool no_keys, const float (&o)[kHeadDimV / 2],
                                             const float (&inv)[2]) const {
    const int matrix = th.lane / 8;
    const int row = th.warp_in_group * 16 + th.lane % 8 + 8 * (matrix % 2);
    const uint32_t row_base = smem_u32(sO_rows) + row * 128;
#pragma unroll
    for (int j = 0; j < kHeadDimV / 8; j += 2) {
      uint32_t packed[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int block = j + m / 2, r = m % 2;
        packed[m] = no_keys ? 0u
                            : pack2<Elem>(o[4 * block + 2 * r] * inv[r],
                                          o[4 * block + 2 * r + 1] * inv[r]);
      }
      const int block = j + matrix / 2;
      stmatrix_x4(row_base + (block / 8) * Tiles::kSlabBytesO + (((block % 8) ^ (row % 8)) << 4),
                  packed[0], packed[1], packed[2], packed[3]);
    }
  }

  // The tail workspace's record of part k of piece f's tile, for this warp: 32 lanes x (D/2 O
  // values + row max and row sum of the lane's two rows), lane-interleaved float4s.
  __device__ __forceinline__ float4* tail_record(const TailPiece& f, int k) const {
    constexpr int kWarps = Tiles::kConsumers * 4;
    constexpr int kRecord = static_cast<int>(tail_record_floats(kHeadDimV) / 4);  // float4s
    const int warp = th.consumer * 4 + (threadIdx.x / 32) % 4;
    float4* const records = reinterpret_cast<float4*>(ep.tail_ws);
    return records +
           ((static_cast<long long>(f.tile) * sp.tail.max_parts + k) * kWarps + warp) *
               kRecord;
  }

  // A piece of a tail tile cut into parts (core/tail_split.h), per consumer warp: write this
  // warp's unnormalised partial (its O registers, row maxima and partial row sums, L2 only),
  // then count its arrival (counters cleared before the launch); the last of the tile's parts
  // to arrive folds all the partials into its O and statistics and writes the output (returns
  // true); the others are done (false). (A compare-and-swap loop here, to tag counts by launch
  // instead of clearing them, made ptxas serialize the 192-row d=128 kernel's wgmma for
  // registers.)
  __device__ __forceinline__ bool settle_tail_piece(const TailPiece& f, float (&o)[kHeadDimV / 2],
                                                    float (&m)[2], float (&l)[2]) const {
    constexpr int kWarps = Tiles::kConsumers * 4;
    const int warp = th.consumer * 4 + (threadIdx.x / 32) % 4;
    float4* const mine = tail_record(f, f.part);
#pragma unroll
    for (int i = 0; i < kHeadDimV / 8; ++i)
      __stcg(mine + i * 32 + th.lane,
             make_float4(o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]));
    __stcg(mine + (kHeadDimV / 8) * 32 + th.lane, make_float4(m[0], m[1], l[0], l[1]));
    __threadfence();
    __syncwarp();
    unsigned int* const counter =
        reinterpret_cast<unsigned int*>(
            reinterpret_cast<unsigned char*>(ep.tail_ws) +
            tail_counters_offset_bytes(sp.tail, Tiles::kBlockM, kHeadDimV)) +
        static_cast<long long>(f.tile) * kWarps + warp;
    int last = 0;
    if (th.lane == 0) last = atomicAdd(counter, 1u) + 1 == static_cast<unsigned int>(f.parts);
    if (!__shfl_sync(0xffffffffu, last, 0)) return false;
    __threadfence();
    fold_tail_parts(f, o, m, l);
    return true;
  }

  // Folds every part's record, this warp's own included, in part order into O and the row
  // sums: the sum's order, and so the output's bits, do not depend on which part came last. A
  // part's weight is fold_rescale's factor from its row max to the tile's (0 for a part whose
  // row saw no key, max -inf).
  __device__ __forceinline__ void fold_tail_parts(const TailPiece& f, float (&o)[kHeadDimV / 2],
                                                  float (&m)[2], float (&l)[2]) const {
    const auto exp = [&](float x) { return exp2f(x * scale_log2); };
    float new_max[2] = {-INFINITY, -INFINITY};
#pragma unroll 1
    for (int k = 0; k < f.parts; ++k) {
      const float4 stats = __ldcg(tail_record(f, k) + (kHeadDimV / 8) * 32 + th.lane);
      new_max[0] = fmaxf(new_max[0], stats.x);
      new_max[1] = fmaxf(new_max[1], stats.y);
    }
#pragma unroll
    for (int i = 0; i < kHeadDimV / 2; ++i) o[i] = 0.f;
    l[0] = l[1] = 0.f;
#pragma unroll 1
    for (int k = 0; k < f.parts; ++k) {
      const float4* const part_record = tail_record(f, k);
      const float4 stats = __ldcg(part_record + (kHeadDimV / 8) * 32 + th.lane);
      const float take0 = fold_rescale(stats.x, new_max[0], exp);
      const float take1 = fold_rescale(stats.y, new_max[1], exp);
      l[0] = fmaf(stats.z, take0, l[0]);
      l[1] = fmaf(stats.w, take1, l[1]);
#pragma unroll
      for (int i = 0; i < kHeadDimV / 8; ++i) {
        const float4 v = __ldcg(part_record + i * 32 + th.lane);
        o[4 * i + 0] = fmaf(v.x, take0, o[4 * i + 0]);
        o[4 * i + 1] = fmaf(v.y, take0, o[4 * i + 1]);
        o[4 * i + 2] = fmaf(v.z, take1, o[4 * i + 2]);
        o[4 * i + 3] = fmaf(v.w, take1, o[4 * i + 3]);
      }
    }
    m[0] = new_max[0];
    m[1] = new_max[1];
  }

  // The staging slabs must outlive the last TMA store's reads of them.
  __device__ __forceinline__ void finish() const {
    if constexpr (!Kt::kSplit) {
      if (th.lane == 0) bulk_wait_group<0>();
    }
  }
};

}  // namespace sm90
}  // namespace flashsplit
