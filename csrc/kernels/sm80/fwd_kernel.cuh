// Portable tensor-core forward (mma.sync m16n8k16; runs on sm_80 and sm_90).
//
// One thread block owns one (batch, k/v head, tile of packed rows, split). The h/hk query heads
// that share a k/v head are packed into the tile's rows (row r: query r / group, head r % group
// of the group; see packed_rows in core/tile_config.h), so each K/V tile is loaded once for the
// whole group and decode (sq = 1) fills rows with heads instead of padding. Each warp owns 16 rows and
// keeps its Q fragments, scores S and output accumulator O in registers. The block walks its key
// blocks from last to first (so causal / length masking is only needed on the first iterations),
// with a two-stage cp.async ring: K[n-1] and V[n-1] stream in while S = Q K[n]^T, softmax and
// O += P V[n] run, so a whole (K, V) pair is in flight per block (split-KV shapes with few
// blocks per SM are bound by how many bytes are in flight). Online softmax tracks the max of the
// raw scores and applies scale and max in one FFMA inside exp2, as FlashAttention-2 does.
//
// Epilogues: Split == false writes O (in the input dtype) and lse straight to the output;
// Split == true writes the split's normalised fp32 partial O_g and LSE_g for the combine kernel.
#pragma once

#include <float.h>
#include <math.h>

#include "core/split_partition.h"
#include "core/tile_config.h"
#include "kernels/attn_params.h"
#include "kernels/fwd_common.cuh"
#include "kernels/sm80/mma_primitives.cuh"

namespace flashsplit {
namespace sm80 {

template <int D, bool Narrow>
struct FwdTiles {
  static constexpr TileConfig kConfig = portable_tile_config(D, Narrow);
  static constexpr int kBlockM = kConfig.block_m;
  static constexpr int kBlockN = kConfig.block_n;
  static constexpr int kWarps = kConfig.warps;
  static constexpr int kMTiles = kConfig.m_tiles;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMinBlocksPerSm = kConfig.blocks_per_sm;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  // Q, plus two stages of (K, V): the next pair streams in while the current one is used.
  static constexpr int kSmemBytes = (kBlockM + 4 * kBlockN) * D * 2;
  static_assert(kBlockM == 16 * kWarps * kMTiles, "each warp owns kMTiles tiles of 16 rows");
  static_assert(D % 64 == 0, "the swizzle needs at least 8 chunks per row");
  static_assert(kBlockN % 16 == 0, "key blocks are walked 16 keys at a time");
};

// Shared-memory tiles are row-major with 16-byte chunks XOR-swizzled by (row % 8): the 8 rows one
// ldmatrix phase reads then hit 8 different bank groups, and so do the cp.async writes.
template <int D>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// Copies key rows [row0, row0 + Rows) of a (rows, D) global slice into shared memory; rows at or
// past n_valid are zero-filled.
template <int Rows, int D, int Threads, class Elem>
__device__ __forceinline__ void load_tile(Elem* smem, const Elem* gmem, int64_t row_stride,
                                          int row0, int n_valid) {
  constexpr int kChunks = D / 8;
  static_assert(Threads % kChunks == 0 && Rows % (Threads / kChunks) == 0,
                "threads tile the rows evenly");
  constexpr int kRowStep = Threads / kChunks;
  // Each thread keeps one chunk column and walks rows with one advancing pointer: unrolled
  // copies then cost no address registers each (the narrow tile issues 32 per thread).
  const int chunk = static_cast<int>(threadIdx.x) % kChunks;
  const int first_row = static_cast<int>(threadIdx.x) / kChunks;
  const Elem* src = gmem + static_cast<int64_t>(row0 + first_row) * row_stride + chunk * 8;
#pragma unroll
  for (int i = 0; i < Rows / kRowStep; ++i) {
    const int row = first_row + i * kRowStep;
    const bool valid = row0 + row < n_valid;
    cp_async_16(smem_addr(smem + swizzled<D>(row, chunk)), valid ? src : gmem, valid);
    src += kRowStep * row_stride;
  }
}

// Where packed row r of a k/v head's group lives: its query index and its query head.
struct PackedRow {
  int query, head;
};
__device__ __forceinline__ PackedRow unpack_row(int r, int group, int kv_head) {
  return PackedRow{r / group, kv_head * group + r % group};
}

// Copies packed rows [row0, row0 + Rows) of q into shared memory; rows past sq * group are
// zero-filled. q points at (batch, query 0, head 0).
template <int Rows, int D, int Threads, class Elem>
__device__ __forceinline__ void load_packed_q(Elem* smem, const Elem* q, const AttnFwdParams& p,
                                              int row0, int group, int kv_head) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = Rows * kChunks;
  static_assert(kTotal % Threads == 0, "every thread copies the same number of chunks");
  const int n_valid = p.sq * group;
#pragma unroll
  for (int i = 0; i < kTotal / Threads; ++i) {
    int idx = i * Threads + static_cast<int>(threadIdx.x);
    int row = idx / kChunks, chunk = idx % kChunks;
    bool valid = row0 + row < n_valid;
    PackedRow at = unpack_row(valid ? row0 + row : 0, group, kv_head);
    const Elem* src = q + at.query * p.q_row_stride + at.head * p.q_head_stride + chunk * 8;
    cp_async_16(smem_addr(smem + swizzled<D>(row, chunk)), src, valid);
  }
}

template <class Elem, int D, bool Narrow, bool Causal, bool Split>
__global__ void __launch_bounds__(FwdTiles<D, Narrow>::kThreads, FwdTiles<D, Narrow>::kMinBlocksPerSm)
    attn_fwd_kernel(const AttnFwdParams p) {
  using Tiles = FwdTiles<D, Narrow>;
  constexpr int BM = Tiles::kBlockM, BN = Tiles::kBlockN, kThreads = Tiles::kThreads;
  constexpr int MT = Tiles::kMTiles;  // 16-row m-tiles per warp: each K/V fragment feeds MT MMAs
  constexpr int kNTiles = BN / 8;     // n8 score tiles
  constexpr int kDTiles = D / 8;      // n8 output tiles
  allow_dependent_launch();           // the split path's combine may now be scheduled

  extern __shared__ __align__(128) unsigned char smem_raw[];
  Elem* sQ = reinterpret_cast<Elem*>(smem_raw);
  Elem* sK0 = sQ + BM * D;         // stage s: K at sK0 + s * BN * D
  Elem* sV0 = sK0 + 2 * BN * D;    // stage s: V at sV0 + s * BN * D

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int quad_row = lane / 4, quad_col = lane % 4;
  // Causal tiles late in the sequence do the most work: start them first.
  const int m_block = Causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int split = blockIdx.y;
  const int batch = blockIdx.z / p.hk, kv_head = blockIdx.z % p.hk;
  const int group = p.h / p.hk;
  const int m0 = m_block * BM;  // first packed row of the tile
  const int first_query = m0 / group;
  const int last_query = min((m0 + BM - 1) / group, p.sq - 1);

  const int n_visible = visible_key_blocks(last_query + 1, p.sq, p.sk, BN, Causal);
  const KeyBlockRange range =
      Split ? split_key_blocks(n_visible, p.num_splits, split) : KeyBlockRange{0, n_visible};

  const Elem* q = static_cast<const Elem*>(p.q) + batch * p.q_batch_stride;
  const Elem* k = static_cast<const Elem*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  const Elem* v = static_cast<const Elem*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;

  // The scale is applied as a positive factor: a negative scale flips the sign of Q instead
  // (once per block, below), and a zero scale becomes FLT_MIN so that a masked -inf score
  // still maps to -inf rather than -inf * 0 = NaN (the scores it then scales are ~0 either way).
  const float scale_log2 = fmaxf(fabsf(p.softmax_scale) * static_cast<float>(M_LOG2E), FLT_MIN);
  const bool negate_q = p.softmax_scale < 0.f;
  // The warp's rows are [warp_row0, warp_row0 + 16 * MT) of the tile; this thread holds rows
  // quad_row and quad_row + 8 of each m-tile (index i = 2 * t + half below).
  const int warp_row0 = warp * 16 * MT;
  PackedRow my_rows[2 * MT];
#pragma unroll
  for (int i = 0; i < 2 * MT; ++i)
    my_rows[i] = unpack_row(m0 + warp_row0 + (i / 2) * 16 + (i % 2) * 8 + quad_row, group, kv_head);

  float o[MT][kDTiles][4];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) o[t][j][0] = o[t][j][1] = o[t][j][2] = o[t][j][3] = 0.f;
  float row_max[2 * MT];  // of the raw scores q.k (with Q's sign flipped for a negative scale)
  float row_sum[2 * MT];  // this thread's partial; quad-reduced at the end
#pragma unroll
  for (int i = 0; i < 2 * MT; ++i) row_max[i] = -INFINITY, row_sum[i] = 0.f;

  // Starts the copies of key block n's K and V into ring stage `stage`.
  auto load_kv = [&](int stage, int n) {
    load_tile<BN, D, kThreads>(sK0 + stage * BN * D, k, p.k_row_stride, n * BN, p.sk);
    load_tile<BN, D, kThreads>(sV0 + stage * BN * D, v, p.v_row_stride, n * BN, p.sk);
  };

  if (range.begin < range.end) {
    load_packed_q<BM, D, kThreads>(sQ, q, p, m0, group, kv_head);
    load_kv(0, range.end - 1);
    cp_async_commit();

    uint32_t q_frag[MT][D / 16][4];
    int stage = 0;
    for (int n = range.end - 1; n >= range.begin; --n) {
      // Prefetch the next pair into the other stage; every warp left it at the end of the last
      // iteration's barrier.
      if (n > range.begin) {
        load_kv(stage ^ 1, n - 1);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();  // this stage's K[n], V[n] (and Q) landed for every thread's copies
      const Elem* sK = sK0 + stage * BN * D;
      const Elem* sV = sV0 + stage * BN * D;
      if (n == range.end - 1) {
#pragma unroll
        for (int t = 0; t < MT; ++t)
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk)
            ldmatrix_x4(smem_addr(sQ + swizzled<D>(warp_row0 + t * 16 + lane % 16, kk * 2 + lane / 16)),
                        q_frag[t][kk]);
        if (negate_q) {
#pragma unroll
          for (int t = 0; t < MT; ++t)
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
              for (int r = 0; r < 4; ++r) q_frag[t][kk][r] ^= 0x80008000u;  // both halves' signs
        }
      }

      // S = Q K^T for this warp's rows and the block's BN keys.
      float s[MT][kNTiles][4];
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) s[t][j][0] = s[t][j][1] = s[t][j][2] = s[t][j][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int nn = 0; nn < BN / 16; ++nn) {
          uint32_t b[4];
          ldmatrix_x4(smem_addr(sK + swizzled<D>(nn * 16 + lane % 8 + (lane / 16) * 8,
                                                 kk * 2 + (lane / 8) % 2)),
                      b);
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            mma_16816<Elem>(s[t][2 * nn], q_frag[t][kk], b[0], b[1]);
            mma_16816<Elem>(s[t][2 * nn + 1], q_frag[t][kk], b[2], b[3]);
          }
        }
      }

      // Mask keys past sk and, if causal, keys a row may not see (only blocks that need it).
      const int n0 = n * BN;
      const bool needs_mask = n0 + BN > p.sk || (Causal && n0 + BN - 1 > first_query + p.sk - p.sq);
      if (needs_mask) {
#pragma unroll
        for (int t = 0; t < MT; ++t)
#pragma unroll
          for (int j = 0; j < kNTiles; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              int key = n0 + j * 8 + quad_col * 2 + (e & 1);
              int query = my_rows[2 * t + (e >> 1)].query;
              int limit = Causal ? min(p.sk - 1, query + p.sk - p.sq) : p.sk - 1;
              if (key > limit) s[t][j][e] = -INFINITY;
            }
      }

      // Online softmax: new running max, rescale what was accumulated, exponentiate.
#pragma unroll
      for (int i = 0; i < 2 * MT; ++i) {
        const int t = i / 2, c = (i % 2) * 2;  // m-tile and accumulator column pair of row i
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) tile_max = fmaxf(tile_max, fmaxf(s[t][j][c], s[t][j][c + 1]));
        float new_max = fmaxf(row_max[i], quad_max(tile_max));
        // In log2 units. A row that has seen only masked keys keeps max -inf; subtracting 0
        // keeps exp2 at 0 instead of exp2(-inf - -inf) = NaN.
        float base = new_max == -INFINITY ? 0.f : new_max * scale_log2;
        float rescale = fast_exp2(row_max[i] * scale_log2 - base);
        row_max[i] = new_max;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          s[t][j][c] = fast_exp2(fmaf(s[t][j][c], scale_log2, -base));
          s[t][j][c + 1] = fast_exp2(fmaf(s[t][j][c + 1], scale_log2, -base));
          sum += s[t][j][c] + s[t][j][c + 1];
        }
        row_sum[i] = row_sum[i] * rescale + sum;
#pragma unroll
        for (int j = 0; j < kDTiles; ++j) {
          o[t][j][c] *= rescale;
          o[t][j][c + 1] *= rescale;
        }
      }


      // O += P V: P comes straight from the score registers (the m16n8 accumulator layout of
      // two adjacent n8 tiles is the m16k16 A-operand layout).
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t a[MT][4];
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          a[t][0] = pack2<Elem>(s[t][2 * kk][0], s[t][2 * kk][1]);
          a[t][1] = pack2<Elem>(s[t][2 * kk][2], s[t][2 * kk][3]);
          a[t][2] = pack2<Elem>(s[t][2 * kk + 1][0], s[t][2 * kk + 1][1]);
          a[t][3] = pack2<Elem>(s[t][2 * kk + 1][2], s[t][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dd = 0; dd < D / 16; ++dd) {
          uint32_t b[4];
          ldmatrix_x4_trans(smem_addr(sV + swizzled<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8,
                                                       dd * 2 + lane / 16)),
                            b);
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            mma_16816<Elem>(o[t][2 * dd], a[t], b[0], b[1]);
            mma_16816<Elem>(o[t][2 * dd + 1], a[t], b[2], b[3]);
          }
        }
      }
      __syncthreads();  // every warp is done with this stage before the next prefetch reuses it
      stage ^= 1;
    }
  }

  // Epilogue: normalise, then write either the output or this split's partial.
#pragma unroll
  for (int i = 0; i < 2 * MT; ++i) {
    const int t = i / 2, c = (i % 2) * 2;
    const float sum = quad_sum(row_sum[i]);  // every lane shuffles before padding rows leave
    if (my_rows[i].query >= p.sq) continue;  // a padding row past the last packed row
    write_output_row<Elem, D, Split>(p, batch, my_rows[i].head, my_rows[i].query, split,
                                     row_max[i], scale_log2, sum, quad_col, [&](int j) {
                                       return make_float2(o[t][j][c], o[t][j][c + 1]);
                                     });
  }
}

}  // namespace sm80
}  // namespace flashsplit
