// The sm80 arch policy of the portable forward (portable/fwd_kernel.cuh): mma.sync m16n8k16,
// ldmatrix and cp.async, warp32; runs on sm_80 and later.
//
// Each warp owns kMTiles tiles of 16 rows and keeps its Q fragments, scores S and output O in
// registers; a thread holds rows quad_row and quad_row + 8 of each 16-row tile (lane = 4 *
// quad_row + quad_col) and, of each 8-column group, the columns 2 * quad_col and + 1, so a row's
// statistics reduce over the 4 lanes of a quad. K and V stream through a two-stage cp.async
// ring: the next (K, V) pair lands while the current one is used, so a whole pair is in flight
// per block (split-KV shapes with few blocks per SM are bound by bytes in flight).
#pragma once

#include <cstdint>

#include "core/fast_divmod.h"
#include "core/portable_tiles.h"
#include "kernels/attn_params.h"
#include "kernels/fwd_common.cuh"
#include "kernels/sequence.cuh"
#include "kernels/sm80/mma_primitives.cuh"

namespace flashsplit {
namespace sm80 {

// Shared-memory tiles are row-major in 16-byte chunks, XOR-swizzled so that the 8 rows one
// ldmatrix phase reads (and the cp.async copies write) hit 8 different bank groups. Rows of a
// multiple of 64 elements (128 B: every row starts in group 0) swap chunks by row % 8. Rows of
// 64k + 32 elements (96: consecutive rows start 4 groups apart) swap them inside their group
// of 4 by row / 2 % 4, which row % 2 completes to 8 distinct groups.
template <int D>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  static_assert(D % 32 == 0, "rows of whole 64-byte groups of chunks");
  if constexpr (D % 64 == 0) {
    return row * D + ((chunk ^ (row & 7)) << 3);
  } else {
    return row * D + ((chunk ^ ((row >> 1) & 3)) << 3);
  }
}

// The chunk columns of a row one pass of the threads copies: the whole row where the threads
// tile it, else (rows of 12 or 24 chunks: d=96, d=192) its largest power-of-two part, so a
// thread copies the same chunk column of each part. Copies then walk rows Threads / chunks apart
// with one advancing pointer per thread: unrolled, they cost no address registers each (the
// narrow tile issues 32 per thread).
template <int D, int Threads>
constexpr int pass_chunks() {
  constexpr int kChunks = D / 8;
  if (Threads % kChunks == 0) return kChunks;
  int chunks = 1;
  while (kChunks % (2 * chunks) == 0 && Threads % (2 * chunks) == 0) chunks *= 2;
  return chunks;
}

// Copies key rows [row0, row0 + Rows) of a (rows, D) global slice into shared memory; rows at or
// past n_valid, and columns at or past cols (a v narrower than q and k), are zero-filled.
template <int Rows, int D, int Threads, class Elem>
__device__ __forceinline__ void load_tile(Elem* smem, const Elem* gmem, int64_t row_stride,
                                          int row0, int n_valid, int cols = D) {
  constexpr int kPassChunks = pass_chunks<D, Threads>();
  constexpr int kPasses = D / 8 / kPassChunks;
  constexpr int kRowStep = Threads / kPassChunks;
  static_assert(Rows % kRowStep == 0, "threads tile the rows evenly");
  const int chunk = static_cast<int>(threadIdx.x) % kPassChunks;
  const int first_row = static_cast<int>(threadIdx.x) / kPassChunks;
  const Elem* src = gmem + static_cast<int64_t>(row0 + first_row) * row_stride + chunk * 8;
#pragma unroll
  for (int i = 0; i < Rows / kRowStep; ++i) {
    const int row = first_row + i * kRowStep;
    const bool valid = row0 + row < n_valid;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const bool in_cols = valid && (pass * kPassChunks + chunk) * 8 < cols;
      cp_async_16(smem_addr(smem + swizzled<D>(row, pass * kPassChunks + chunk)),
                  in_cols ? src + pass * kPassChunks * 8 : gmem, in_cols);
    }
    src += kRowStep * row_stride;
  }
}

// The block-table entries of the pages a paged walk's key blocks touch, in shared memory: block
// n's entries are copied while block n + 2 is computed (cp.async, in the commit group of that
// step's K/V copies), so they have landed when block n's K/V copies are issued and neither the
// table's latency nor a register waits on it. Four slots, by block number mod 4.
template <int BlockN, int Threads>
struct PageTable {
  static constexpr int kSlots = kPageTableSlots;
  static constexpr int kSlotEntries = BlockN + 1;  // pages BlockN keys can touch
  static constexpr int kSmemBytes = page_table_bytes(BlockN);
  int* slots = nullptr;          // shared: [kSlots][kSlotEntries]
  const int* pages = nullptr;    // the sequence's row of the block table
  FastDivmod page_size{1};
  int sk = 0;

  __device__ int first_page(int n) const { return page_size.div(n * BlockN); }
  __device__ int* slot(int n) const { return slots + (n & (kSlots - 1)) * kSlotEntries; }
  // The entries block n's keys need (none for a block before the first or past the last key).
  __device__ int entries(int n) const {
    const int last_key = min((n + 1) * BlockN, sk) - 1;
    return n < 0 || last_key < n * BlockN ? 0 : page_size.div(last_key) - first_page(n) + 1;
  }
  // A fixed number of predicated copies per thread (one or two): the loop over the entries
  // unrolled as a counted loop would take a hundred instructions at each of the four places the
  // walk copies entries.
  static constexpr int kCopiesPerThread = (kSlotEntries + Threads - 1) / Threads;
  __device__ void copy_async(int n) const {
    const int first = first_page(n), count = entries(n);
#pragma unroll
    for (int i = 0; i < kCopiesPerThread; ++i) {
      const int j = static_cast<int>(threadIdx.x) + i * Threads;
      if (j < count) cp_async_4(smem_addr(slot(n) + j), pages + first + j);
    }
  }
};

// Rows consecutive key rows of one page, from src on, into rows first_row, ... of a stage
// (unrolled: one pointer advanced a row at a time); rows at or past n_valid (key0 is the first
// row's key) are zero-filled, their copies pointed at fallback.
template <int Rows, int D, int PassChunks, class Elem>
__device__ __forceinline__ void load_page_rows(Elem* smem, const Elem* src, const Elem* fallback,
                                               int64_t row_stride, int first_row, int chunk,
                                               int key0, int n_valid) {
  constexpr int kPasses = D / 8 / PassChunks;
#pragma unroll
  for (int i = 0; i < Rows; ++i) {
    const bool valid = key0 + i < n_valid;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      cp_async_16(smem_addr(smem + swizzled<D>(first_row + i, pass * PassChunks + chunk)),
                  valid ? src + pass * PassChunks * 8 : fallback, valid);
    }
    src += row_stride;
  }
}

// load_tile for paged rows: key j of block n lives in page table.slot(n)[j / page_size -
// first_page(n)], row j % page_size; head points at the head's first element in page 0, row 0. Here
// a thread copies a run of kRun consecutive rows (load_tile's threads take rows kRowStep apart;
// either way each row is read by whole adjacent lanes, so both coalesce alike), as two halves.
// Where the page size is a multiple of half a run (a run is 16 rows on the narrow tile at d=64 and
// 128, where that takes pages of 8, 16, 24, 64, 256, ..., and 8 on the half-size key-warp tile),
// each half stays inside one page, and the run is two unrolled copies that advance one pointer as
// load_tile does, the second half from the next page's table entry where the first ends its page
// (never for page sizes that are a multiple of the run). The narrow tile's paged walk so costs a
// table entry or two and a page offset per block over the contiguous walk (a page found per row
// would double its instructions). Other page sizes walk the run row by row, stepping to the next
// page's entry where a page ends, in a loop that is not unrolled: every paged instance carries both
// paths at the four places the walk copies K or V, and a decode call starts with a cold instruction
// cache (other kernels ran in between), so the instance's code size is its start-up cost (with a
// page found per row, unrolled, the paged code was 2.5x the contiguous one's and its calls 10-20%
// slower cold than warm; see docs/design.md).
template <int Rows, int D, int Threads, class Elem>
__device__ __forceinline__ void load_paged_tile(Elem* smem, const Elem* head,
                                                const PageTable<Rows, Threads>& table,
                                                int64_t page_stride, int64_t row_stride, int n,
                                                int n_valid) {
  constexpr int kPassChunks = pass_chunks<D, Threads>();
  constexpr int kPasses = D / 8 / kPassChunks;
  constexpr int kRun = Rows / (Threads / kPassChunks);
  constexpr int kHalf = kRun / 2;
  static_assert((kRun & (kRun - 1)) == 0, "runs of a power of two of rows");
  const int chunk = static_cast<int>(threadIdx.x) % kPassChunks;
  const int first_row = static_cast<int>(threadIdx.x) / kPassChunks * kRun;
  const int first_page = table.first_page(n);
  const int* entries = table.slot(n);
  const int page_size = table.page_size.divisor();
  const Elem* row0 = head + chunk * 8;
  // The run's first row: its key, page and place in the page.
  const int key0 = n * Rows + first_row;
  int page = table.page_size.div(key0);
  int in_page = table.page_size.mod(key0, page);
  const Elem* src = row0 + static_cast<int64_t>(entries[page - first_page]) * page_stride +
                    static_cast<int64_t>(in_page) * row_stride;
  if constexpr (kRun == 1) {  // a run of one row: always inside its page
    load_page_rows<1, D, kPassChunks>(smem, src, head, row_stride, first_row, chunk, key0,
                                      n_valid);
    return;
  }
  if ((page_size & (kHalf - 1)) == 0) {
    // Each half of the run stays inside a page: the second goes on in the first's page, or
    // starts the next one where the first ends its page.
    const Elem* second = src + kHalf * row_stride;
    if (in_page + kHalf == page_size) {
      second = row0 + static_cast<int64_t>(entries[page + 1 - first_page]) * page_stride;
    }
    load_page_rows<kHalf, D, kPassChunks>(smem, src, head, row_stride, first_row, chunk, key0,
                                          n_valid);
    load_page_rows<kHalf, D, kPassChunks>(smem, second, head, row_stride, first_row + kHalf,
                                          chunk, key0 + kHalf, n_valid);
    return;
  }
  // Other page sizes: the run walks on from its first row's place, taking the next page's
  // entry where a page ends (every row for pages of one key), in a loop that is not unrolled.
  // The next page's entry is read a page ahead of its use (the slot's last entry stands in
  // past the slot), so the copies do not wait on each entry's read.
  constexpr int kLastEntry = PageTable<Rows, Threads>::kSlotEntries - 1;
  int next_entry = entries[min(page + 1 - first_page, kLastEntry)];
#pragma unroll 1
  for (int i = 0; i < kRun; ++i) {
    const bool valid = key0 + i < n_valid;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int at = swizzled<D>(first_row + i, pass * kPassChunks + chunk);
      cp_async_16_unordered(smem_addr(smem + at), valid ? src + pass * kPassChunks * 8 : head,
                            valid);
    }
    src += row_stride;
    if (++in_page == page_size && i + 1 < kRun) {
      in_page = 0;
      ++page;
      src = row0 + static_cast<int64_t>(next_entry) * page_stride;
      next_entry = entries[min(page + 1 - first_page, kLastEntry)];
    }
  }
}

// Copies packed rows [row0, row0 + Rows) of q into shared memory; rows past sq * group are
// zero-filled. q points at the sequence's (query 0, head 0).
template <int Rows, int D, int Threads, class Elem>
__device__ __forceinline__ void load_packed_q(Elem* smem, const Elem* q, const AttnFwdParams& p,
                                              int sq, int row0, int group, int kv_head) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = Rows * kChunks;
  static_assert(kTotal % Threads == 0, "every thread copies the same number of chunks");
  const int n_valid = sq * group;
#pragma unroll
  for (int i = 0; i < kTotal / Threads; ++i) {
    int idx = i * Threads + static_cast<int>(threadIdx.x);
    int row = idx / kChunks, chunk = idx % kChunks;
    bool valid = row0 + row < n_valid;
    const int r = valid ? row0 + row : 0;
    const int query = r / group, head = kv_head * group + r % group;
    const Elem* src = q + static_cast<int64_t>(query) * p.q_row_stride + head * p.q_head_stride +
                      chunk * 8;
    cp_async_16(smem_addr(smem + swizzled<D>(row, chunk)), src, valid);
  }
}

// KeyWarps > 1: the narrow tile with key warps (sm80_key_warp_tile_config), whose warps share
// the rows and each compute on their part of a key block; its full tile runs one block an SM
// (KeyWarpBlocksPerSm = 1), its half-size tile two, each with its copies staggered or not
// (StaggeredKv: sm80_key_warp_staggered).
template <class ElemT, int D, bool Narrow, int KeyWarps = 1, int KeyWarpBlocksPerSm = 1,
          bool StaggeredKv = false>
struct Policy {
  using Elem = ElemT;
  static constexpr TileConfig kConfig = KeyWarps > 1
                                            ? sm80_key_warp_tile_config(D, KeyWarpBlocksPerSm)
                                            : portable_tile_config(D, Narrow);
  static constexpr int kHeadDim = D;
  static constexpr int kBlockM = kConfig.block_m;
  static constexpr int kKeyWarps = kConfig.key_warps;
  static constexpr int kStageKeys = kConfig.block_n;         // keys of a block, all key warps'
  static constexpr int kBlockN = kStageKeys / kKeyWarps;     // keys one warp computes on
  static constexpr int kMTiles = kConfig.m_tiles;  // 16-row tiles per warp: a K/V fragment feeds each
  static constexpr int kThreads = kConfig.warps * 32;
  static constexpr int kMinOccupancy = kConfig.blocks_per_sm;  // blocks per SM
  static constexpr bool kStaggeredKv = StaggeredKv;
  static_assert(!StaggeredKv || KeyWarps > 1, "staggered copies on the key-warp tiles");
  // Q, plus two stages of (K, V) in dynamic shared memory: the next pair streams in while the
  // current one is used (staggered: one stage, whose K and V are copied apart); kernels of
  // paged k/v add their page-table slots (PageTable) behind.
  static constexpr int kStages = kStaggeredKv ? 1 : 2;
  static constexpr int kKvBytes = 2 * kStages * kStageKeys * D * static_cast<int>(sizeof(Elem));
  static constexpr int kDynamicSmemBytes = kBlockM * D * static_cast<int>(sizeof(Elem)) + kKvBytes;
  static_assert(kStaggeredKv || kDynamicSmemBytes == portable_smem_bytes(kConfig, D),
                "two stages take the shared memory the plan counts");
  static constexpr int kPagedSmemBytes = PageTable<kStageKeys, kThreads>::kSmemBytes;
  static_assert(KeyWarps == 1 || (Narrow && KeyWarps == kKeyWarps), "key warps on the narrow tile");
  static_assert(kBlockM * kKeyWarps == 16 * kConfig.warps * kMTiles,
                "each row warp owns kMTiles tiles of 16 rows");
  static_assert(kBlockN % 16 == 0, "key blocks are walked 16 keys at a time");

  // warp: the row warp; key_warp: which part of each key block the warp computes on.
  struct Lanes {
    int lane = static_cast<int>(threadIdx.x) % 32;
    int warp = kKeyWarps > 1 ? 0 : static_cast<int>(threadIdx.x) / 32;
    int key_warp = kKeyWarps > 1 ? static_cast<int>(threadIdx.x) / 32 : 0;
    int quad_row = lane / 4, quad_col = lane % 4;
  };

  // Rows 2t and 2t + 1 of a thread are rows quad_row and quad_row + 8 of its warp's tile t.
  static constexpr int kRows = 2 * kMTiles;
  __device__ static int thread_row(const Lanes& l, int i) {
    return l.warp * 16 * kMTiles + (i / 2) * 16 + (i % 2) * 8 + l.quad_row;
  }
  __device__ static float row_max(float x) { return quad_max(x); }
  __device__ static float row_sum(float x) { return quad_sum(x); }

  // m16n8 accumulators: register 2 * (i % 2) + e of n8 tile j holds row i, column 8j + 2 * quad_col
  // + e.
  struct Scores {
    float s[kMTiles][kBlockN / 8][4];
  };
  static constexpr int kScoreRuns = kBlockN / 8, kScoreRun = 2;
  __device__ static float& score(Scores& s, int i, int j, int e) {
    return s.s[i / 2][j][(i % 2) * 2 + e];
  }
  __device__ static int lane_key(const Lanes& l) { return l.quad_col * 2; }
  __device__ static constexpr int run_key(int j) { return j * 8; }

  struct Output {
    float o[kMTiles][D / 8][4];
  };
  static constexpr int kOutRuns = D / 8, kOutRun = 2;
  __device__ static float& out(Output& o, int i, int j, int e) {
    return o.o[i / 2][j][(i % 2) * 2 + e];
  }
  __device__ static int lane_col(const Lanes& l) { return l.quad_col * 2; }
  __device__ static constexpr int run_col(int j) { return j * 8; }
  __device__ static bool writes_row_stats(const Lanes& l) { return l.quad_col == 0; }
  __device__ static void zero(Output& o) {
#pragma unroll
    for (int t = 0; t < kMTiles; ++t)
#pragma unroll
      for (int j = 0; j < D / 8; ++j) o.o[t][j][0] = o.o[t][j][1] = o.o[t][j][2] = o.o[t][j][3] = 0.f;
  }

  // Q, then K and V through the two-stage ring (shared memory in dynamic smem). The key-warp
  // tiles may stagger the copies instead (kStaggeredKv, core/portable_tiles.h): each
  // block's K and V go into the one stage, K once every warp's S = Q K^T of the block before is
  // done and V once its P V is, so a block has at most one key block's K and V in flight. Copy
  // groups then alternate K, V, K, ... and each wait lets the other one run on.
  template <KvLayout Layout>
  struct Pipeline {
    const AttnFwdParams& p;
    const Sequence& seq;
    const int kv_head;
    const Elem *q, *k, *v;
    Elem *sQ, *sK0, *sV0;  // stage s: K at sK0 + s * kStageKeys * D, V likewise
    int stage = 0;
    PageTable<kStageKeys, kThreads> table;  // paged k/v only
    int next = 0;  // staggered: the key block copied after this one's S and P V

    __device__ Pipeline(const AttnFwdParams& params, const Sequence& sequence,
                        int kv_head_)
        : p(params), seq(sequence), kv_head(kv_head_) {
      extern __shared__ __align__(128) unsigned char smem_raw[];
      sQ = reinterpret_cast<Elem*>(smem_raw);
      sK0 = sQ + kBlockM * D;
      sV0 = sK0 + kStages * kStageKeys * D;
      q = sequence_queries<Elem>(p, seq);
      k = sequence_keys<Elem>(p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride,
                                        seq, kv_head);
      v = sequence_keys<Elem>(p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride,
                                        seq, kv_head);
      if (paged()) {
        table.slots = reinterpret_cast<int*>(smem_raw + kDynamicSmemBytes);
        table.pages = seq.pages;
        table.page_size = FastDivmod(p.page_size);
        table.sk = seq.sk;
      }
    }
    __device__ static constexpr bool paged() { return Layout == KvLayout::kPaged; }
    __device__ void load_k(int to_stage, int n) {
      Elem* sK = sK0 + to_stage * kStageKeys * D;
      if (paged()) {
        load_paged_tile<kStageKeys, D, kThreads>(sK, k, table, p.k_batch_stride,
                                                 p.k_row_stride, n, seq.sk);
      } else {
        load_tile<kStageKeys, D, kThreads>(sK, k, p.k_row_stride, n * kStageKeys, seq.sk);
      }
    }
    __device__ void load_v(int to_stage, int n) {
      Elem* sV = sV0 + to_stage * kStageKeys * D;
      if (paged()) {
        load_paged_tile<kStageKeys, D, kThreads>(sV, v, table, p.v_batch_stride,
                                                 p.v_row_stride, n, seq.sk);
      } else {
        // Elsewhere than d=192 v's columns are D, a constant (may_narrow_value).
        load_tile<kStageKeys, D, kThreads>(sV, v, p.v_row_stride, n * kStageKeys, seq.sk,
                                           may_narrow_value(D) ? p.dv : D);
      }
    }
    __device__ void load_kv(int to_stage, int n) {
      load_k(to_stage, n);
      load_v(to_stage, n);
    }
    // The tile's Q and its first key block n. Paged k/v: the page-table entries of blocks n
    // and n - 1 first, in one round trip with Q's copies issued behind them (only the entries'
    // group is waited for), then those of n - 2 start beside the K/V copies (staggered: beside
    // block n - 1's K, in scores_done).
    __device__ void prologue(int m0, int group, int n) {
      if (paged()) {
        table.copy_async(n);
        table.copy_async(n - 1);
        cp_async_commit();
      }
      load_packed_q<kBlockM, D, kThreads>(sQ, q, p, seq.sq, m0, group, kv_head);
      if (paged()) {
        cp_async_wait<0>();  // the entries' group; Q's copies are not committed yet
        __syncthreads();
      }
      if constexpr (kStaggeredKv) {
        load_k(0, n);
        cp_async_commit();
        load_v(0, n);
        cp_async_commit();
        return;
      }
      load_kv(0, n);
      if (paged()) table.copy_async(n - 2);
      cp_async_commit();
    }
    // Starts key block n into the other stage, which every warp left at the last release
    // (paged k/v: and the page-table entries of block n - 2). Staggered: notes block n, whose
    // K and V scores_done and release start.
    __device__ void fetch(int n) {
      if constexpr (kStaggeredKv) {
        next = n;
        return;
      }
      load_kv(stage ^ 1, n);
      if (paged()) table.copy_async(n - 2);
      cp_async_commit();
    }
    // The current stage (and Q) landed for every thread's copies (staggered: its K, with its V
    // still in flight).
    __device__ void wait_landed(bool more) {
      if (more || kStaggeredKv) {
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
    }
    // Staggered: every warp is done with K, so the next block's K (paged: and the entries of
    // the block after it) starts into its place.
    __device__ void scores_done(bool more) {
      if (!kStaggeredKv || !more) return;
      __syncthreads();
      load_k(0, next);
      if (paged()) table.copy_async(next - 1);
      cp_async_commit();
    }
    // Staggered: the current block's V landed for every thread's copies (the next K runs on).
    // Otherwise it landed with K.
    __device__ void values_landed(bool more) {
      if (!kStaggeredKv) return;
      if (more) {
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
    }
    // Every warp is done with the current stage before the next fetch reuses it (staggered:
    // with V, so the next block's V starts into its place).
    __device__ void release(bool more) {
      if constexpr (kStaggeredKv) {
        if (!more) return;
        __syncthreads();
        load_v(0, next);
        cp_async_commit();
        return;
      }
      __syncthreads();
      stage ^= 1;
    }
    // The current stage's keys this warp computes on (a key warp's part: its rows are a whole
    // number of swizzle periods on, so the part is swizzled as a block of its own).
    __device__ const Elem* k_tile(const Lanes& l) const {
      return sK0 + (stage * kStageKeys + l.key_warp * kBlockN) * D;
    }
    __device__ const Elem* v_tile(const Lanes& l) const {
      return sV0 + (stage * kStageKeys + l.key_warp * kBlockN) * D;
    }
  };

  // Where the key warps' softmax states meet after the walk (merge_key_warps): the K/V stages,
  // free once every warp has left the last block.
  static_assert(KeyWarps == 1 || (KeyWarps - 1) * kRows * (2 + kOutRuns * kOutRun) *
                                         (kThreads / KeyWarps) * sizeof(float) <= kKvBytes,
                "the key warps' states fit in the K/V stages");
  __device__ static float* merge_scratch() {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    return reinterpret_cast<float*>(smem_raw + kBlockM * D * sizeof(Elem));
  }

  // Q's A fragments stay in registers for the tile up to d=128; from d=192 (96 and more
  // registers of O beside them) each k-step reads its fragment from shared memory again.
  static constexpr bool kQInRegisters = D <= 128;
  struct QFragment {
    uint32_t r[kQInRegisters ? kMTiles : 1][kQInRegisters ? D / 16 : 1][4];
    uint32_t sign;  // XORed into fragments read at each k-step: flips Q for a negative scale
  };
  template <class Pipe>
  __device__ static void ldmatrix_q(uint32_t (&a)[4], const Pipe& pipe, const Lanes& l, int t,
                                    int kk) {
    const int warp_row0 = l.warp * 16 * kMTiles;
    ldmatrix_x4(smem_addr(pipe.sQ + swizzled<D>(warp_row0 + t * 16 + l.lane % 16,
                                                kk * 2 + l.lane / 16)),
                a);
  }
  template <class Pipe>
  __device__ static void read_q(QFragment& q, const Pipe& pipe, const Lanes& l, bool negate) {
    q.sign = negate ? 0x80008000u : 0u;  // both halves' signs
    if constexpr (kQInRegisters) {
#pragma unroll
      for (int t = 0; t < kMTiles; ++t)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          ldmatrix_q(q.r[t][kk], pipe, l, t, kk);
#pragma unroll
          for (int r = 0; r < 4; ++r) q.r[t][kk][r] ^= q.sign;
        }
    }
  }
  // Q's A fragment of row tile t at k-step kk.
  template <class Pipe>
  __device__ static void q_operand(uint32_t (&a)[4], const QFragment& q, const Pipe& pipe,
                                   const Lanes& l, int t, int kk) {
    if constexpr (kQInRegisters) {
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = q.r[t][kk][r];
    } else {
      ldmatrix_q(a, pipe, l, t, kk);
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] ^= q.sign;
    }
  }

  // S = Q K^T for this warp's rows and the block's keys.
  template <class Pipe>
  __device__ static void qk(Scores& s, const QFragment& q, const Pipe& pipe, const Lanes& l) {
#pragma unroll
    for (int t = 0; t < kMTiles; ++t)
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) s.s[t][j][0] = s.s[t][j][1] = s.s[t][j][2] = s.s[t][j][3] = 0.f;
    const Elem* sK = pipe.k_tile(l);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int t = 0; t < kMTiles; ++t) q_operand(a[t], q, pipe, l, t, kk);
#pragma unroll
      for (int nn = 0; nn < kBlockN / 16; ++nn) {
        uint32_t b[4];
        ldmatrix_x4(smem_addr(sK + swizzled<D>(nn * 16 + l.lane % 8 + (l.lane / 16) * 8,
                                               kk * 2 + (l.lane / 8) % 2)),
                    b);
#pragma unroll
        for (int t = 0; t < kMTiles; ++t) {
          mma_16816<Elem>(s.s[t][2 * nn], a[t], b[0], b[1]);
          mma_16816<Elem>(s.s[t][2 * nn + 1], a[t], b[2], b[3]);
        }
      }
    }
  }

  // O += P V: P comes straight from the score registers (the m16n8 accumulator layout of two
  // adjacent n8 tiles is the m16k16 A-operand layout).
  template <class Pipe>
  __device__ static void pv(Output& o, const Scores& s, const Pipe& pipe, const Lanes& l) {
    const Elem* sV = pipe.v_tile(l);
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int t = 0; t < kMTiles; ++t) {
        a[t][0] = pack2<Elem>(s.s[t][2 * kk][0], s.s[t][2 * kk][1]);
        a[t][1] = pack2<Elem>(s.s[t][2 * kk][2], s.s[t][2 * kk][3]);
        a[t][2] = pack2<Elem>(s.s[t][2 * kk + 1][0], s.s[t][2 * kk + 1][1]);
        a[t][3] = pack2<Elem>(s.s[t][2 * kk + 1][2], s.s[t][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        uint32_t b[4];
        ldmatrix_x4_trans(smem_addr(sV + swizzled<D>(kk * 16 + l.lane % 8 + ((l.lane / 8) % 2) * 8,
                                                     dd * 2 + l.lane / 16)),
                          b);
#pragma unroll
        for (int t = 0; t < kMTiles; ++t) {
          mma_16816<Elem>(o.o[t][2 * dd], a[t], b[0], b[1]);
          mma_16816<Elem>(o.o[t][2 * dd + 1], a[t], b[2], b[3]);
        }
      }
    }
  }
};

}  // namespace sm80
}  // namespace flashsplit
