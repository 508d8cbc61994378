// The gfx9 arch policy of the portable forward (portable/fwd_kernel.cuh): MFMA on wave64, for
// gfx90a, gfx942 and gfx950.
//
// The products run transposed, so that each lane owns query columns (gfx9/mfma_layout.h):
// S^T = K Q^T takes K from LDS as the A operand and Q^T, read once per tile from global memory
// straight into registers, as B; O^T = V^T P^T takes V^T from LDS as A and P^T from S^T's
// accumulator registers, converted to 16 bits, as B. A query's statistics then reduce over a
// lane's own registers and across the lanes that share its column (xor n ... 32).
// Wide tiles run four waves of 32 query columns on 32x32 MFMAs (32x32x8; 32x32x16 on gfx950),
// the narrow decode tile one wave of 16 on 16x16 MFMAs (16x16x16; 16x16x32 on gfx950).
//
// Copies: each key block's K (row-major) and V^T (head dim x keys, keys in the PV MFMA's k
// order) sit in LDS in the swizzled layouts of gfx9/lds_layout.h, whose operand reads are
// bank-conflict-free. The next block's K is loaded from global memory into registers while the
// current block's S runs and its V while softmax and P V run, each then written to LDS: into
// the other of two stages where both fit in 32 KB (the wide tiles), otherwise into the one
// stage once every wave is done with that part (the narrow tile at d=128), so two workgroups
// share a compute unit's 64 KB, and at most half a block is held in registers.
// Contiguous k/v is read through buffer resources; paged k/v (sequence.cuh) through each key
// row's address in its page, the block table's entries read from global memory beside the rows.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "core/fast_divmod.h"
#include "core/portable_tiles.h"
#include "kernels/attn_params.h"
#include "kernels/fwd_common.cuh"
#include "kernels/gfx9/lds_layout.h"
#include "kernels/gfx9/mfma.h"
#include "kernels/gfx9/mfma_layout.h"
#include "kernels/sequence.cuh"

namespace flashsplit {
namespace gfx9 {

// The MFMA of a tile on the target being compiled. (The host pass of a HIP build only reads the
// tile's sizes, which do not depend on it.)
template <bool Narrow>
constexpr Mfma tile_mfma() {
#if defined(__gfx950__)
  return Narrow ? Mfma::k16x16x32 : Mfma::k32x32x16;
#else
  return Narrow ? Mfma::k16x16x16 : Mfma::k32x32x8;
#endif
}

constexpr int target_lds_banks() {
#if defined(__HIP_DEVICE_COMPILE__)
  return lds_banks(kDeviceArch);
#else
  return 32;
#endif
}

// LDS budget of one workgroup: two share a compute unit's 64 KB on gfx90a and gfx942.
constexpr int kLdsBudget = 32 * 1024;

// p as a pointer into global memory, so that loads through it are global loads, not flat ones.
template <class T>
__device__ __forceinline__ const __attribute__((address_space(1))) T* global(const T* p) {
  return (const __attribute__((address_space(1))) T*)p;
}

// The fourth word of a raw buffer resource on gfx9: 32-bit data format, no swizzle.
constexpr uint32_t kBufferFlags = 0x00020000u;

// K and V are read through buffer resources whose base moves along a head in segments of at
// most 2^kSegmentBytesLog2 bytes (Pipeline::rows_from): 1 GiB keeps every offset under 2^31.
// A build with small segments lets a test move the base on small problems.
#ifndef FLASHSPLIT_GFX9_SEGMENT_BYTES_LOG2
#define FLASHSPLIT_GFX9_SEGMENT_BYTES_LOG2 30
#endif
constexpr int kSegmentBytesLog2 = FLASHSPLIT_GFX9_SEGMENT_BYTES_LOG2;

template <class ElemT, int D, bool Narrow>
struct Policy {
  using Elem = ElemT;
  static constexpr TileConfig kConfig = gfx9_tile_config(D, Narrow);
  static constexpr int kHeadDim = D;
  static constexpr int kBlockM = kConfig.block_m;
  static constexpr int kBlockN = kConfig.block_n;
  static constexpr int kKeyWarps = 1, kStageKeys = kBlockN;  // every wave walks the whole block
  static constexpr int kWaves = kConfig.warps;
  static constexpr int kThreads = 64 * kWaves;
  // Waves per SIMD the registers allow: two for wide tiles; the narrow tile's LDS admits two
  // workgroups of one wave per compute unit, so one is enough there.
  static constexpr int kMinOccupancy = Narrow ? 1 : 2;
  static constexpr int kDynamicSmemBytes = 0;  // LDS is static (Pipeline), so its size is known
  static constexpr int kPagedSmemBytes = 0;    // paged k/v reads its table from global memory

  static constexpr Mfma kOp = tile_mfma<Narrow>();
  static constexpr MfmaShape kShape = mfma_shape(kOp);
  static constexpr int kPerLane = kShape.k_per_lane;
  using Lds = AttnLds<kOp, target_lds_banks(), kBlockM, kBlockN, D>;
  using Operand = MfmaOperand<kOp>;
  using Words = uint32_t __attribute__((ext_vector_type(kPerLane / 2)));
  using Acc = MfmaAcc<kOp>;
  static_assert(kBlockM == kWaves * kShape.n, "each wave owns one MFMA column block of queries");

  struct Lanes {
    int lane = static_cast<int>(threadIdx.x) % 64, wave = static_cast<int>(threadIdx.x) / 64;
  };

  // One query per lane: column lane % n of the wave's block.
  static constexpr int kRows = 1;
  __device__ static int thread_row(const Lanes& l, int) { return l.wave * kShape.n + l.lane % kShape.n; }
  __device__ static float row_max(float x) {
#pragma unroll
    for (int offset = kShape.n; offset < 64; offset *= 2) x = fmaxf(x, lane_shfl_xor(x, offset));
    return x;
  }
  __device__ static float row_sum(float x) {
#pragma unroll
    for (int offset = kShape.n; offset < 64; offset *= 2) x += lane_shfl_xor(x, offset);
    return x;
  }

  // Accumulator tiles of m rows (keys of S^T, head-dim columns of O^T): a lane's registers come
  // in runs of 4 consecutive rows, acc_regs / 4 runs per tile, 8 rows apart, at 4 * (lane / n).
  static constexpr int kRunsPerTile = kShape.acc_regs / 4;
  __device__ static constexpr int run_row(int j) {
    return kShape.m * (j / kRunsPerTile) + 8 * (j % kRunsPerTile);
  }
  __device__ static int lane_row(const Lanes& l) { return 4 * (l.lane / kShape.n); }

  struct Scores {
    float t[kBlockN / kShape.m][kShape.acc_regs];
  };
  static constexpr int kScoreRuns = kBlockN / kShape.m * kRunsPerTile, kScoreRun = 4;
  __device__ static float& score(Scores& s, int, int j, int e) {
    return s.t[j / kRunsPerTile][4 * (j % kRunsPerTile) + e];
  }
  __device__ static int lane_key(const Lanes& l) { return lane_row(l); }
  __device__ static constexpr int run_key(int j) { return run_row(j); }

  struct Output {
    float t[D / kShape.m][kShape.acc_regs];
  };
  static constexpr int kOutRuns = D / kShape.m * kRunsPerTile, kOutRun = 4;
  __device__ static float& out(Output& o, int, int j, int e) {
    return o.t[j / kRunsPerTile][4 * (j % kRunsPerTile) + e];
  }
  __device__ static int lane_col(const Lanes& l) { return lane_row(l); }
  __device__ static constexpr int run_col(int j) { return run_row(j); }
  __device__ static bool writes_row_stats(const Lanes& l) { return l.lane < kShape.n; }
  __device__ static void zero(Output& o) {
#pragma unroll
    for (int t = 0; t < D / kShape.m; ++t)
#pragma unroll
      for (int r = 0; r < kShape.acc_regs; ++r) o.t[t][r] = 0.f;
  }

  // ---- copies -----------------------------------------------------------------------------
  static constexpr int kStageBytes = Lds::KTile::kBytes + Lds::VtTile::kBytes;
  static constexpr int kStages = 2 * kStageBytes <= kLdsBudget ? 2 : 1;
  static_assert(kStages * kStageBytes <= kLdsBudget, "a key block's K and V^T fit the budget");
  // K moves in operand units (Lds::kUnit bytes), each thread kKUnits of them per block; V in
  // groups of 4 head-dim rows x one V^T unit (kPerLane keys), kVGroups per thread.
  using Unit = uint32_t __attribute__((ext_vector_type(Lds::kUnit / 4)));
  using Word2 = uint32_t __attribute__((ext_vector_type(2)));
  static constexpr int kUnitsPerKRow = Lds::KTile::kUnitsPerRow;
  static constexpr int kKUnits = kBlockN * kUnitsPerKRow / kThreads;
  static_assert(kBlockN * kUnitsPerKRow % kThreads == 0, "threads share K's units evenly");
  static constexpr int kDGroups = D / 4;
  static constexpr int kVGroupsTotal = kDGroups * (kBlockN / kPerLane);
  static constexpr int kVGroups = (kVGroupsTotal + kThreads - 1) / kThreads;

  template <KvLayout Layout>
  struct Pipeline {
    const AttnFwdParams& p;
    const Sequence& seq;
    const Elem *q, *k, *v;
    int kv_head, m0 = 0, group = 1, stage = 0, next = 0;
    FastDivmod page_size{1};  // paged k/v: keys per page ...
    int fetched = 0;          // ... and the block last fetched
    unsigned char* lds;
    Unit k_next[kKUnits];              // the next block's K units ...
    Word2 v_next[kVGroups][kPerLane];  // ... and V rows: 4 head-dim values of kPerLane keys

    __device__ Pipeline(const AttnFwdParams& params, const Sequence& sequence,
                        int kv_head_)
        : p(params), seq(sequence), kv_head(kv_head_) {
      __shared__ __attribute__((aligned(16))) unsigned char storage[kStages * kStageBytes];
      lds = storage;
      q = sequence_queries<Elem>(p, seq);
      k = sequence_keys<Elem>(p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride,
                                        seq, kv_head);
      v = sequence_keys<Elem>(p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride,
                                        seq, kv_head);
      if (paged()) page_size = FastDivmod(p.page_size);
    }
    __device__ static constexpr bool paged() { return Layout == KvLayout::kPaged; }
    // Paged k/v: key `key` of a head lives in page pages[key / page_size], row key % page_size;
    // head points at the head's first element in page 0, row 0. Keys past the last read the
    // last key's row (a valid page), which the stores then write as zeros.
    __device__ const unsigned char* paged_row(const Elem* head, int64_t page_stride,
                                              int64_t row_stride, int key) const {
      const int at = key < seq.sk ? key : seq.sk - 1;
      const int page = page_size.div(at);
      return reinterpret_cast<const unsigned char*>(
          head + static_cast<int64_t>(global(seq.pages)[page]) * page_stride +
          static_cast<int64_t>(page_size.mod(at, page)) * row_stride);
    }
    // A buffer resource over a k/v head's rows from the segment that holds key0: segments are
    // 2^segment_rows_log2 rows of at most 2^kSegmentBytesLog2 bytes, and the resource spans
    // two of them (up to the head's last row), so the key block from key0 lies inside it (the
    // gate bounds the row stride so that a block is no longer than a segment:
    // kMaxAmdKvRowStride). Loads take 32-bit byte offsets from the segment's first row and
    // read zeros past the resource's end. The base moves with the walk, so a head may span any
    // number of bytes.
    struct Rows {
      __amdgpu_buffer_rsrc_t rsrc;
      int first_key;
    };
    __device__ static int segment_rows_log2(int row_stride) {
      const uint32_t row_bytes = 2u * static_cast<uint32_t>(row_stride > 1 ? row_stride : 1);
      return kSegmentBytesLog2 - (32 - __builtin_clz(row_bytes - 1));  // - ceil(log2(row bytes))
    }
    __device__ Rows rows_from(const Elem* head, int row_stride, int key0) const {
      const int log2 = segment_rows_log2(row_stride);
      const int first_key = key0 >> log2 << log2;
      const int rows = seq.sk - first_key < (2 << log2) ? seq.sk - first_key : 2 << log2;
      const uint32_t bytes = 2u * static_cast<uint32_t>((rows - 1) * row_stride + D);
      return Rows{__builtin_amdgcn_make_buffer_rsrc(
                      const_cast<Elem*>(head) + static_cast<int64_t>(first_key) * row_stride, 0,
                      bytes, kBufferFlags),
                  first_key};
    }
    __device__ static Unit load_unit(__amdgpu_buffer_rsrc_t rows, uint32_t offset) {
      if constexpr (Lds::kUnit == 8) {
        return __builtin_amdgcn_raw_buffer_load_b64(rows, static_cast<int>(offset), 0, 0);
      } else {
        return __builtin_amdgcn_raw_buffer_load_b128(rows, static_cast<int>(offset), 0, 0);
      }
    }
    __device__ unsigned char* k_tile(int s) const { return lds + s * kStageBytes; }
    __device__ unsigned char* vt_tile(int s) const { return k_tile(s) + Lds::KTile::kBytes; }

    // Starts key block n's K loads into registers; keys past sk read as zeros (a row stride of
    // 0 would read a real row there, hence the select).
    __device__ void fetch_k(int n) {
      if (paged()) return fetch_paged_k(n);
      const int tid = static_cast<int>(threadIdx.x), key0 = n * kBlockN;
      const int stride = static_cast<int>(p.k_row_stride);
      const Rows rows = rows_from(k, stride, key0);
#pragma unroll
      for (int i = 0; i < kKUnits; ++i) {
        const int idx = i * kThreads + tid, row = idx / kUnitsPerKRow, unit = idx % kUnitsPerKRow;
        const int key = key0 + row;
        const Unit x = load_unit(rows.rsrc, 2u * static_cast<uint32_t>((key - rows.first_key) *
                                                                       stride) +
                                                unit * Lds::kUnit);
        k_next[i] = key < seq.sk ? x : Unit{};
      }
    }
    // The same for its V rows.
    __device__ void fetch_v(int n) {
      if (paged()) return fetch_paged_v(n);
      const int tid = static_cast<int>(threadIdx.x), key0 = n * kBlockN;
      const int stride = static_cast<int>(p.v_row_stride);
      const Rows rows = rows_from(v, stride, key0);
#pragma unroll
      for (int i = 0; i < kVGroups; ++i) {
        const int idx = i * kThreads + tid;
        const int d0 = 4 * (idx % kDGroups), unit = idx / kDGroups;
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) {
          const int key = key0 + Lds::vt_key(unit * kPerLane + c);
          const bool valid = idx < kVGroupsTotal && key < seq.sk;
          const Word2 x = __builtin_amdgcn_raw_buffer_load_b64(
              rows.rsrc, 2 * ((key - rows.first_key) * stride + d0), 0, 0);
          v_next[i][c] = valid ? x : Word2{};
        }
      }
    }
    // fetch_k and fetch_v for paged k/v: the same units and rows, each from its key's page.
    // Keys past the last read the last key's row here and are zeroed by the stores, so that no
    // lane mask waits on the loads (the narrow tiles have no scalar registers to spare for it).
    __device__ void fetch_paged_k(int n) {
      fetched = n;
      static_assert(kThreads % kUnitsPerKRow == 0, "a thread's units share their column");
      const int tid = static_cast<int>(threadIdx.x), unit = tid % kUnitsPerKRow;
      const int first_key = n * kBlockN + tid / kUnitsPerKRow;
#pragma unroll
      for (int i = 0; i < kKUnits; ++i) {
        const int key = first_key + i * (kThreads / kUnitsPerKRow);
        k_next[i] = *reinterpret_cast<const Unit*>(
            paged_row(k, p.k_batch_stride, p.k_row_stride, key) + unit * Lds::kUnit);
      }
    }
    __device__ void fetch_paged_v(int n) {
      fetched = n;
      const int tid = static_cast<int>(threadIdx.x), key0 = n * kBlockN;
#pragma unroll
      for (int i = 0; i < kVGroups; ++i) {
        const int idx = i * kThreads + tid;
        const int d0 = 4 * (idx % kDGroups), unit = idx / kDGroups;
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) {
          const int key = key0 + Lds::vt_key(unit * kPerLane + c);
          v_next[i][c] = *reinterpret_cast<const Word2*>(
              paged_row(v, p.v_batch_stride, p.v_row_stride, key) + 2 * d0);
        }
      }
    }
    // Paged k/v: whether row `row` of the fetched block lies past the sequence's last key.
    __device__ bool past_last_key(int row) const {
      return paged() && fetched * kBlockN + row >= seq.sk;
    }
    // Writes the fetched K units into stage s as they are (paged: zeros past the last key).
    __device__ void store_k(int s) const {
      const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
      for (int i = 0; i < kKUnits; ++i) {
        const int idx = i * kThreads + tid, row = idx / kUnitsPerKRow;
        *reinterpret_cast<Unit*>(k_tile(s) + Lds::KTile::unit_offset(row, idx % kUnitsPerKRow)) =
            past_last_key(row) ? Unit{} : k_next[i];
      }
    }
    // Writes the fetched V rows into stage s, transposed into V^T units (likewise).
    __device__ void store_v(int s) const {
      const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
      for (int i = 0; i < kVGroups; ++i) {
        const int idx = i * kThreads + tid;
        if (kVGroupsTotal % kThreads != 0 && idx >= kVGroupsTotal) break;
        const int d0 = 4 * (idx % kDGroups), unit = idx / kDGroups;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t half[kPerLane];  // head-dim row d0 + j of each key, 16 bits each
#pragma unroll
          for (int c = 0; c < kPerLane; ++c) {
            const uint32_t word =
                past_last_key(Lds::vt_key(unit * kPerLane + c)) ? 0u : v_next[i][c][j / 2];
            half[c] = j % 2 == 0 ? word & 0xffffu : word >> 16;
          }
          Unit out;
#pragma unroll
          for (int w = 0; w < kPerLane / 2; ++w) out[w] = half[2 * w] | (half[2 * w + 1] << 16);
          *reinterpret_cast<Unit*>(vt_tile(s) + Lds::VtTile::unit_offset(d0 + j, unit)) = out;
        }
      }
    }
    // The stage the next block goes into: the other one, or the only one once read.
    __device__ int next_stage() const { return kStages == 2 ? stage ^ 1 : stage; }
    // The tile's first key block n, in stage 0 and visible to every wave.
    __device__ void prologue(int tile_m0, int tile_group, int n) {
      m0 = tile_m0;
      group = tile_group;
      fetch_k(n);
      store_k(0);
      fetch_v(n);
      store_v(0);
      __syncthreads();
    }
    // The next block's K is loaded while the current one's S = K Q^T runs ...
    __device__ void fetch(int n) {
      next = n;
      fetch_k(n);
    }
    __device__ void wait_landed(bool) {}  // the last release (or the prologue) published it
    // ... then written once every wave is done with K (with one stage), and its V loaded while
    // softmax and P V run ...
    __device__ void scores_done(bool more) {
      if (!more) return;
      if constexpr (kStages == 1) __syncthreads();
      store_k(next_stage());
      fetch_v(next);
    }
    __device__ void values_landed(bool) {}  // V landed with the block (release / prologue)
    // ... and written once every wave is done with V; the next block becomes the current one.
    __device__ void release(bool more) {
      if constexpr (kStages == 1) __syncthreads();
      if (more) store_v(next_stage());
      if (kStages == 2 || more) __syncthreads();
      stage = next_stage();
    }
  };

  // ---- the products -----------------------------------------------------------------------
  struct QFragment {
    Operand b[D / kShape.k];  // Q^T's B operand, one per MFMA step over the head dim
  };
  // This lane's query row (a packed row: query and head) of the tile, read straight into the
  // B operands; rows past the last are zero, and the sign flips for a negative scale.
  template <class Pipe>
  __device__ static void read_q(QFragment& q, const Pipe& pipe, const Lanes& l, bool negate) {
    const int r = pipe.m0 + thread_row(l, 0);
    const bool valid = r < pipe.seq.sq * pipe.group;
    const int row = valid ? r : 0;
    const Elem* src = pipe.q + static_cast<int64_t>(row / pipe.group) * pipe.p.q_row_stride +
                      static_cast<int64_t>(pipe.kv_head * pipe.group + row % pipe.group) *
                          pipe.p.q_head_stride +
                      kPerLane * (l.lane / kShape.n);
    const uint16_t sign = negate ? 0x8000u : 0u;
#pragma unroll
    for (int s = 0; s < D / kShape.k; ++s) {
      const Operand x = *reinterpret_cast<const Operand*>(src + s * kShape.k);
      q.b[s] = valid ? (x ^ sign) : Operand{};
    }
  }

  // S^T = K Q^T for the block's keys, tile by tile of m keys.
  template <class Pipe>
  __device__ static void qk(Scores& s, const QFragment& q, const Pipe& pipe, const Lanes& l) {
    const unsigned char* k_tile = pipe.k_tile(pipe.stage);
#pragma unroll
    for (int t = 0; t < kBlockN / kShape.m; ++t) {
      Acc acc = {};
#pragma unroll
      for (int st = 0; st < D / kShape.k; ++st) {
        const Operand a =
            *reinterpret_cast<const Operand*>(k_tile + Lds::k_read(l.lane, t * kShape.m, st));
        acc = mfma<kOp, Elem>(a, q.b[st], acc);
      }
#pragma unroll
      for (int r = 0; r < kShape.acc_regs; ++r) s.t[t][r] = acc[r];
    }
  }

  // O^T += V^T P^T: P^T's B operand of each step is S^T's accumulators in order
  // (mfma_layout.h pv_source), 16 bits each; V^T's keys are stored in that order.
  template <class Pipe>
  __device__ static void pv(Output& o, const Scores& s, const Pipe& pipe, const Lanes& l) {
    const unsigned char* vt_tile = pipe.vt_tile(pipe.stage);
#pragma unroll
    for (int st = 0; st < kBlockN / kShape.k; ++st) {
      Words b_words;  // two 16-bit elements per word, low first
#pragma unroll
      for (int w = 0; w < kPerLane / 2; ++w) {
        const AccSlot lo = pv_source(kOp, st, 2 * w), hi = pv_source(kOp, st, 2 * w + 1);
        b_words[w] = pack2<Elem>(s.t[lo.tile][lo.reg], s.t[hi.tile][hi.reg]);
      }
      const Operand b = __builtin_bit_cast(Operand, b_words);
#pragma unroll
      for (int dt = 0; dt < D / kShape.m; ++dt) {
        const Operand a =
            *reinterpret_cast<const Operand*>(vt_tile + Lds::vt_read(l.lane, dt * kShape.m, st));
        Acc acc;
#pragma unroll
        for (int r = 0; r < kShape.acc_regs; ++r) acc[r] = o.t[dt][r];
        acc = mfma<kOp, Elem>(a, b, acc);
#pragma unroll
        for (int r = 0; r < kShape.acc_regs; ++r) o.t[dt][r] = acc[r];
      }
    }
  }
};

}  // namespace gfx9
}  // namespace flashsplit
