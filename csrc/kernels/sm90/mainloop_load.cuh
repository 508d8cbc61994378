// The Hopper forward's producer: one thread of the producer warpgroup issues TMA loads of each
// tile's Q (into one of kQStages Q buffers) and of its K and V per key block (into the K/V ring
// of kStages stages), in the order the consumers walk them. K and V have separate barriers, so
// a consumer's S = Q K^T can start while V is still landing. Paged k/v in pages too small for
// TMA boxes (kPageRows): the whole warpgroup walks the tiles and copies K and V a row at a time,
// and its first thread loads Q; on the 256-row tiles (kRowTable) warp 0 walks them and locates
// each key block's rows into a table in shared memory, and warps 1 to 3 copy them.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/hopper_tiles.h"
#include "kernels/sm90/fwd_params.cuh"
#include "kernels/sm90/hopper_primitives.cuh"
#include "kernels/sm90/kernel_traits.cuh"
#include "kernels/sm90/pipeline.cuh"
#include "kernels/sm90/shared_storage.cuh"
#include "kernels/sm90/tile_scheduler.cuh"

namespace flashsplit {
namespace sm90 {

template <class Kt>
struct FwdProducer {
  using Tiles = typename Kt::Tiles;
  static constexpr int kBlockN = Kt::kBlockN;

  const MainloopParams& mp;
  const AttnFwdParams& p;
  const SharedView<Tiles> smem;
  const TileScheduler<Kt> sched;
  // L2 priorities: a tile's Q is read by its block only, a key block's K and V by every query
  // tile of the head (and the GQA group) that runs meanwhile, so Q leaves L2 first and K and V
  // last (where only one tile reads them, as in decode without GQA, at the normal priority);
  // the output (direct epilogue) is written once and leaves first too. Measured +0.5-1.3% at
  // d=128 512-2048 rows, where the calls read HBM hardest; O alone first was 0.5-1% slower
  // with the mask. The policies are made at each copy (one instruction) rather than kept: the
  // producer has 32 registers, and with two 64-bit policies held the causal 192-row split
  // kernels spilled.
  const bool kv_shared;
  RingState<Kt::kStages> ring;
  uint32_t q_round = 0;  // tiles with work so far: picks the Q buffer and its barriers' parity
  WorkTile tile{};       // the tile being loaded

  __device__ __forceinline__ FwdProducer(const HopperFwdParams& hp, const SharedView<Tiles>& view,
                                         const TileScheduler<Kt>& scheduler)
      : mp(hp.mainloop),
        p(hp.p),
        smem(view),
        sched(scheduler),
        kv_shared(scheduler.m_blocks > 1 || (!Kt::kPackHeads && hp.p.h != hp.p.hk)) {}

  __device__ __forceinline__ uint64_t kv_policy() const {
    return kv_shared ? l2_evict_last_policy() : l2_evict_normal_policy();
  }

  // Paged k/v (kPaged): a key block is one box, or two of a page's rows (hopper_page_box_rows).
  static_assert(!Kt::kPaged || kBlockN == 2 * kHopperMinPageRows || kBlockN == kHopperMinPageRows,
                "a paged key block is one box or two");
  struct BlockPages {
    int first, second;  // the pages of its boxes (0 for a box past the keys, or none)
  };

  __device__ __forceinline__ BlockPages read_pages(const WorkTile& t, int n) const {
    const int n0 = n * kBlockN, second = n0 + mp.page_box_rows;
    return BlockPages{
        n0 < t.seq.sk ? t.seq.pages[mp.by_page.div(n0)] : 0,
        second < n0 + kBlockN && second < t.seq.sk ? t.seq.pages[mp.by_page.div(second)] : 0};
  }

  // One tensor's boxes of key block n (K's or V's) into `dst`, completing on `full`.
  __device__ __forceinline__ void load_page_boxes(const WorkTile& t, int n,
                                                  const BlockPages& pages, const CUtensorMap* map,
                                                  int slabs, unsigned char* dst,
                                                  uint64_t* full) const {
    const int box_rows = mp.page_box_rows;
    for (int box = 0; box * box_rows < kBlockN; ++box) {
      const int first = n * kBlockN + box * box_rows;
      const int row =
          page_box_row(first, box_rows, mp.by_page.div(first) * mp.by_page.divisor(), t.seq.sk);
      for (int slab = 0; slab < slabs; ++slab)
        tma_load_4d(dst + slab * Tiles::kSlabBytesKV + box * box_rows * Tiles::kSlabRowBytes, map,
                    full, slab * Tiles::kSlabCols, row, t.kv_head,
                    box == 0 ? pages.first : pages.second, kv_policy());
    }
  }

  // Paged k/v in pages too small for boxes (kPageRows): the producer warpgroup's 128 threads
  // copy each key block with cp.async into the layout the boxes' 128-byte swizzle gives. Warp w
  // copies rows 32w .. 32w + 31, lane l the 16-byte chunk l % 8 of each slab of rows
  // 32w + l / 8 + 4i (i < 8): one instruction of a warp copies 4 rows of 128 bytes. Lane j reads
  // where row 32w + j lives (PageRow: thread j of the warpgroup, row j) and the lanes copying
  // that row take it by shuffles. As with a box, the rows are the keys of a block ending by the
  // sequence's last key (key_box_start, so the mask reads them as it reads one box a block),
  // and rows before key 0 are zeros: no slot past the keys is read. On the 256-row tiles
  // (kRowTable) one warp locates the rows into the row table and three copy them
  // (locate_key_block, copy_located_rows).
  struct PageRow {
    int page;  // the block-table entry of the page that holds the row
    int row;   // the row within that page; -1: no key (zero-filled)
  };

  __device__ __forceinline__ PageRow read_page_row(const WorkTile& t, int n, int row) const {
    const int key = key_box_start(n, kBlockN, t.seq.sk) + row;
    if (key < 0) return PageRow{0, -1};
    const int index = mp.by_page.div(key);
    return PageRow{t.seq.pages[index], mp.by_page.mod(key, index)};
  }
  // The same for this thread's row, its page already read: the row within it again.
  __device__ __forceinline__ PageRow page_row_in(const WorkTile& t, int n, int page) const {
    const int key = key_box_start(n, kBlockN, t.seq.sk) + static_cast<int>(threadIdx.x);
    return key < 0 ? PageRow{0, -1} : PageRow{page, mp.by_page.mod(key, mp.by_page.div(key))};
  }

  // Rows a warp copies from one page with one offset (copy_page_rows), where pages hold whole
  // runs of them and key block n starts at a key that is a multiple of them: all but a
  // sequence's last block (which ends at its last key) over pages of a multiple of 16 keys.
  static constexpr int kRunRows = 16;
  __device__ __forceinline__ bool copies_by_runs(const WorkTile& t, int n) const {
    const int start = key_box_start(n, kBlockN, t.seq.sk);
    return start >= 0 && start % kRunRows == 0 && mp.by_page.divisor() % kRunRows == 0;
  }

  // One tensor's rows of the key block (K's or V's: `head`, its k/v head's first byte; strides
  // in bytes) into `dst`; the barrier `full` counts this thread's copies landed. Each lane
  // turns its row's place into a byte offset once (-1: no key), which the copying lanes take.
  // Where every run of kRunRows rows of the block lies in one page (`runs`,
  // copies_by_runs), a lane's rows first + 4i lie in two runs, so it takes two offsets and
  // steps through each run by 4 rows.
  // No L2 priority (the copies with kv_policy's measured no faster).
  __device__ __forceinline__ void copy_page_rows(const PageRow& mine, const unsigned char* head,
                                                 int64_t page_stride, int64_t row_stride,
                                                 bool runs, int slabs, unsigned char* dst,
                                                 uint64_t* full) const {
    static_assert(Tiles::kSlabRowBytes == 128, "rows of 128-byte swizzled slabs");
    const int64_t offset = mine.row < 0 ? -1 : mine.page * page_stride + mine.row * row_stride;
    const int lane = threadIdx.x % 32, chunk = lane % 8;
    // Rows first + 4i: the swizzle (16-byte chunk c of row r at c ^ (r % 8)) alternates
    // between two patterns, those of the rows first and first + 4.
    const int first = static_cast<int>(threadIdx.x) - lane + lane / 8;
    const uint32_t even = smem_u32(dst) + swizzled_row_chunk(first, chunk);
    const uint32_t odd = smem_u32(dst) + swizzled_row_chunk(first + 4, chunk);
    if (runs) {
#pragma unroll
      for (int run = 0; run < kBlockN / 4 / kRunRows; ++run) {
        const int64_t from = __shfl_sync(0xffffffffu, offset, lane / 8 + kRunRows * run);
        const unsigned char* src = head + from + chunk * 16;
#pragma unroll
        for (int q = 0; q < kRunRows / 4; ++q) {
          const int i = kRunRows / 4 * run + q;
          const uint32_t at = (i % 2 == 0 ? even : odd) + (i / 2) * 8 * 128;
#pragma unroll
          for (int slab = 0; slab < slabs; ++slab)
            cp_async_16_zfill(at + slab * Tiles::kSlabBytesKV,
                              src + q * 4 * row_stride + slab * 128, true);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kBlockN / 16; ++i) {
        const int64_t from = __shfl_sync(0xffffffffu, offset, lane / 8 + 4 * i);
        const unsigned char* src = head + (from < 0 ? 0 : from) + chunk * 16;
        const uint32_t at = (i % 2 == 0 ? even : odd) + (i / 2) * 8 * 128;
#pragma unroll
        for (int slab = 0; slab < slabs; ++slab)
          cp_async_16_zfill(at + slab * Tiles::kSlabBytesKV, src + slab * 128, from >= 0);
      }
    }
    cp_async_arrive_noinc(full);
  }

  // The pages of the block loaded next are read one block ahead, so their latency is not on the
  // path from a freed stage to its loads: the boxes' pages, or where this thread's row lives.
  // Rows copied with V behind K (kVBehindK) read them at the block instead, the table read
  // under the wait for the stage's K, and keep the page for the block's V, which finds the row
  // within it again (page_row_in): one table read a block, not two (read ahead and again for
  // V, chunks over pages of 16 ran 2.5-4.5% slower), in the 56-register producer (keeping the
  // row too, it spilled).
  using KeyBlockPages = std::conditional_t<Kt::kPageRows, PageRow, BlockPages>;
  int pages_ahead_block = -1;  // the key block pages_ahead is of (-1: none)
  KeyBlockPages pages_ahead{};

  __device__ __forceinline__ KeyBlockPages pages_of(const WorkTile& t, int n) const {
    if constexpr (Kt::kPageRows) {
      return read_page_row(t, n, static_cast<int>(threadIdx.x));
    } else {
      return read_pages(t, n);
    }
  }
  __device__ __forceinline__ KeyBlockPages take_pages(const WorkTile& t, int n) {
    if constexpr (kVBehindK && Kt::kPageRows) return pages_of(t, n);
    const KeyBlockPages pages = pages_ahead_block == n ? pages_ahead : pages_of(t, n);
    const int next = n + Kt::kWalkStep;
    pages_ahead_block = (Kt::kForwardWalk ? next < t.range.end : next >= t.range.begin) ? next : -1;
    if (pages_ahead_block >= 0) pages_ahead = pages_of(t, next);
    return pages;
  }

  // The row table (kRowTable): once the consumers have freed the ring stage's K, the locating
  // warp's lane l writes where rows l + 32j of key block n are read from in k and in v (the
  // copiers only add their lane's chunk) into the table of the stage's use, and publishes it.
  // The copiers copy K at once and V once the stage's V is free too, reading its sources after
  // the next use's table may be written: so the tables alternate by the parity of the use.
  static constexpr int kLocatedPerLane = kBlockN / 32;
  static constexpr int kRowCopyWarps = Kt::kRowCopiers / 32;
  __device__ __forceinline__ void locate_key_block(const WorkTile& t, int n) {
    const int lane = threadIdx.x % 32;
    RowSource* table = publish_row_table(1);
#pragma unroll
    for (int j = 0; j < kLocatedPerLane; ++j) {
      const PageRow at = read_page_row(t, n, lane + 32 * j);
      RowSource& source = table[lane + 32 * j];
      source.k = at.row < 0 ? nullptr
                            : key_head(p.k, p.k_head_stride, t) +
                                  bytes(at.page * p.k_batch_stride + at.row * p.k_row_stride);
      source.v = at.row < 0 ? nullptr
                            : key_head(p.v, p.v_head_stride, t) +
                                  bytes(at.page * p.v_batch_stride + at.row * p.v_row_stride);
    }
    mbar_arrive(&smem.rows_full()[ring.stage]);
    ring.advance();
  }
  // Waits for the ring's next stage's K to be free, writes whether the walk goes on and
  // returns the stage's table, whose rows the lanes write before arriving on rows_full.
  __device__ __forceinline__ RowSource* publish_row_table(int walking) const {
    mbar_wait(&smem.k_empty()[ring.stage], ring.phase ^ 1);
    if (threadIdx.x == 0) smem.row_walking()[ring.stage] = walking;
    return row_table();
  }
  // The end of the walk, for the copiers.
  __device__ __forceinline__ void end_row_table() {
    publish_row_table(0);
    mbar_arrive(&smem.rows_full()[ring.stage]);
  }

  // Copier warp c of the row table (warps 1 to 3 of the producer warpgroup, kRowCopyWarps):
  // each key block's K, then, once the stage's V is free, its V, in groups of 4 rows (one
  // instruction of a warp copies 4 rows of 128 bytes; lane l the 16-byte chunk l % 8 of row
  // l / 8 of the group), warp c the groups c, c + 3, ..., each row from where the table says.
  static_assert(!Kt::kRowTable || kRowCopyWarps == 3, "warps 1 to 3 copy");
  static constexpr int kRowGroups = kBlockN / 4;
  static constexpr int kCopyRounds = (kRowGroups + kRowCopyWarps - 1) / kRowCopyWarps;
  __device__ __forceinline__ void copy_located_rows(int copier) {
    static_assert(Tiles::kSlabRowBytes == 128, "rows of 128-byte swizzled slabs");
    const int lane = threadIdx.x % 32, chunk = lane % 8;
    const int first = 4 * copier + lane / 8;  // this lane's row of its first group
    for (;;) {
      mbar_wait(&smem.rows_full()[ring.stage], ring.phase);
      if (smem.row_walking()[ring.stage] == 0) return;
      const RowSource* table = row_table();
      copy_table_rows<Tiles::kSlabs>(table, &RowSource::k, first, chunk,
                                     smem_u32(smem.k() + ring.stage * Tiles::kTileBytesKV),
                                     &smem.k_full()[ring.stage]);
      mbar_wait(&smem.v_empty()[ring.stage], ring.phase ^ 1);
      copy_table_rows<Tiles::kSlabsV>(table, &RowSource::v, first, chunk,
                                      smem_u32(smem.v() + ring.stage * Tiles::kTileBytesV),
                                      &smem.v_full()[ring.stage]);
      ring.advance();
    }
  }
  // One tensor's rows of a copier's groups (`from`: where the table keeps the tensor's row
  // addresses) into the stage at `dst`; the barrier `full` counts this thread's copies landed.
  template <int Slabs>
  __device__ __forceinline__ void copy_table_rows(const RowSource* table,
                                                  const unsigned char* RowSource::*from,
                                                  int first, int chunk, uint32_t dst,
                                                  uint64_t* full) const {
#pragma unroll
    for (int i = 0; i < kCopyRounds; ++i) {
      const int row = first + 4 * kRowCopyWarps * i;
      if (row >= kBlockN) break;
      const unsigned char* src = table[row].*from;
      const uint32_t at = dst + swizzled_row_chunk(row, chunk);
#pragma unroll
      for (int slab = 0; slab < Slabs; ++slab)
        cp_async_16_zfill(at + slab * Tiles::kSlabBytesKV, src + chunk * 16 + slab * 128,
                          src != nullptr);
    }
    cp_async_arrive_noinc(full);
  }
  // The ring stage's table of its current use.
  __device__ __forceinline__ RowSource* row_table() const {
    return smem.row_sources() + (ring.phase * Tiles::kStages + ring.stage) * kBlockN;
  }
  // The byte offset of 16-byte chunk c of row r in a slab of 128-byte rows in the 128-byte
  // swizzle (chunk c at c ^ (r % 8)).
  __device__ __forceinline__ static uint32_t swizzled_row_chunk(int r, int c) {
    return r * 128 + ((c ^ (r % 8)) << 4);
  }

  // Paged k/v: key block n of tile t, K's then V's, into the ring's next stage: boxes, each
  // ending by the sequence's last key (page_box_row in core/key_blocks.h), so none reads a slot
  // past it, and the mask labels each box's rows (boxed_key); or copied a row at a time.
  __device__ __forceinline__ void load_paged_key_block(const WorkTile& t, int n) {
    if constexpr (Kt::kRowTable) {
      locate_key_block(t, n);
      return;
    }
    const KeyBlockPages pages = take_pages(t, n);
    load_page_k(t, n, pages);
    load_page_v(t, n, pages, ring);
    ring.advance();
  }
  // One tensor of paged k/v, K or V: where its key rows come from (pool, strides, map) and go
  // (its stages' buffers and barriers).
  struct PagedTensor {
    const void* pool;
    int64_t head_stride, batch_stride, row_stride;
    const CUtensorMap* map;
    int slabs, tile_bytes;
    unsigned char* stages;
    uint64_t* empty;
    uint64_t* full;
  };
  __device__ __forceinline__ PagedTensor paged_k() const {
    return {p.k, p.k_head_stride, p.k_batch_stride, p.k_row_stride, &mp.k_map, Tiles::kSlabs,
            Tiles::kTileBytesKV, smem.k(), smem.k_empty(), smem.k_full()};
  }
  __device__ __forceinline__ PagedTensor paged_v() const {
    return {p.v, p.v_head_stride, p.v_batch_stride, p.v_row_stride, &mp.v_map, Tiles::kSlabsV,
            Tiles::kTileBytesV, smem.v(), smem.v_empty(), smem.v_full()};
  }
  __device__ __forceinline__ void load_page_k(const WorkTile& t, int n,
                                              const KeyBlockPages& pages) {
    load_page_tensor(paged_k(), t, n, pages, ring);
  }
  __device__ __forceinline__ void load_page_v(const WorkTile& t, int n,
                                              const KeyBlockPages& pages,
                                              const RingState<Kt::kStages>& at) {
    load_page_tensor(paged_v(), t, n, pages, at);
  }
  // Key block n of tensor x into its stage `at`, once the consumers have freed it there: as
  // boxes, or copied a row at a time.
  __device__ __forceinline__ void load_page_tensor(const PagedTensor& x, const WorkTile& t, int n,
                                                   const KeyBlockPages& pages,
                                                   const RingState<Kt::kStages>& at) {
    mbar_wait(&x.empty[at.stage], at.phase ^ 1);
    unsigned char* dst = x.stages + at.stage * x.tile_bytes;
    uint64_t* full = &x.full[at.stage];
    if constexpr (Kt::kPageRows) {
      copy_page_rows(pages, key_head(x.pool, x.head_stride, t), bytes(x.batch_stride),
                     bytes(x.row_stride), copies_by_runs(t, n), x.slabs, dst, full);
    } else {
      mbar_arrive_expect_tx(full, x.tile_bytes);
      load_page_boxes(t, n, pages, x.map, x.slabs, dst, full);
    }
  }

  // Paged k/v on the 128-row tiles loads each key block's V one block behind its K
  // (kVBehindK): a block's K then waits only for its stage's K to be freed (after S), not for
  // the previous block's V (after the P V issued with the next S) too. Over pages of 64 keys
  // (two boxes a block) the consumers taking probabilities at the running max otherwise waited
  // for K (design.md, "Paged k/v on the Hopper kernels"); rows copied a row at a time take it
  // there too, but not with the block max, where it measured 4-9% slower, except where tiles
  // pack a group's heads (multi-token decode, 0-4% faster over pages of 16 on eight shapes,
  // H200); those tiles load boxes of pages V beside K. Not on the 256-row tiles, whose
  // 32-register producer spilled with it.
  static constexpr bool kVBehindK =
      Kt::kPaged && Tiles::kBlockM == kHopperBaseRows &&
      (Kt::kPageRows ? Tiles::kRunningMax || Kt::kPackHeads : !Kt::kPackHeads);
  // Key block n's K, then the V of the block before it (unless n is the tile's first), whose
  // pages `behind` holds; then n's pages.
  __device__ __forceinline__ void load_key_block_v_behind(const WorkTile& t, int n,
                                                          KeyBlockPages& behind) {
    const KeyBlockPages pages = take_pages(t, n);
    load_page_k(t, n, pages);
    if (n != first_block(t)) load_v_behind(t, n - Kt::kWalkStep, behind, ring);
    ring.advance();
    behind = pages;
  }
  // Key block n's V into the stage before `next` (the stage of the block after it): every key
  // block takes one stage. Rows copied by the warpgroup take the page of their row from `pages`
  // and find the row within it again (page_row_in).
  __device__ __forceinline__ void load_v_behind(const WorkTile& t, int n,
                                                const KeyBlockPages& pages,
                                                RingState<Kt::kStages> next) {
    if (next.stage == 0) {
      next.stage = Kt::kStages;
      next.phase ^= 1;
    }
    --next.stage;
    if constexpr (Kt::kPageRows) {
      load_page_v(t, n, page_row_in(t, n, pages.page), next);
    } else {
      load_page_v(t, n, pages, next);
    }
  }
  __device__ __forceinline__ static int first_block(const WorkTile& t) {
    return Kt::kForwardWalk ? t.range.begin : t.range.end - 1;
  }
  __device__ __forceinline__ static int last_block(const WorkTile& t) {
    return Kt::kForwardWalk ? t.range.end - 1 : t.range.begin;
  }

  // The first byte of tile t's k/v head in a pool of pages, and an element stride in bytes.
  __device__ __forceinline__ static const unsigned char* key_head(const void* pool,
                                                                  int64_t head_stride,
                                                                  const WorkTile& t) {
    return static_cast<const unsigned char*>(pool) + bytes(t.kv_head * head_stride);
  }
  __device__ __forceinline__ static int64_t bytes(int64_t elements) {
    return elements * static_cast<int64_t>(sizeof(typename Kt::Elem));
  }

  // Key block n's K, then its V, into the ring's next stage once the consumers have freed it.
  __device__ __forceinline__ void load_key_block(const WorkTile& t, int n) {
    if constexpr (Kt::kPaged) {
      load_paged_key_block(t, n);
      return;
    }
    unsigned char* k_dst = smem.k() + ring.stage * Tiles::kTileBytesKV;
    unsigned char* v_dst = smem.v() + ring.stage * Tiles::kTileBytesV;
    // The box's first key row (key_box_start for a sequence) and the batch of k and v. Here and
    // for Q below, written out rather than through the scheduler's accessors (q_row_of, ...):
    // through them ptxas left the 32-register producer of the 192-row kernels a register short.
    const int row =
        Kt::kSequences ? t.seq.key0 + key_box_start(n, kBlockN, t.seq.sk) : n * kBlockN;
    const int batch = Kt::kSequences ? t.seq.kv_batch : t.batch;
    mbar_wait(&smem.k_empty()[ring.stage], ring.phase ^ 1);
    mbar_arrive_expect_tx(&smem.k_full()[ring.stage], Tiles::kTileBytesKV);
    load_key_boxes(&mp.k_map, Tiles::kSlabs, k_dst, &smem.k_full()[ring.stage], row, t.kv_head,
                   batch);
    mbar_wait(&smem.v_empty()[ring.stage], ring.phase ^ 1);
    mbar_arrive_expect_tx(&smem.v_full()[ring.stage], Tiles::kTileBytesV);
    load_key_boxes(&mp.v_map, Tiles::kSlabsV, v_dst, &smem.v_full()[ring.stage], row, t.kv_head,
                   batch);
    ring.advance();
  }
  // One tensor's boxes of a key block from `row` (K's or V's) into `dst`, completing on `full`:
  // one box of the block's rows a slab, or two of 64 on tiles packing a group's heads
  // (hopper_key_box_rows).
  static constexpr int kKeyBoxRows = hopper_key_box_rows(Kt::kPackHeads, kBlockN);
  __device__ __forceinline__ void load_key_boxes(const CUtensorMap* map, int slabs,
                                                 unsigned char* dst, uint64_t* full, int row,
                                                 int kv_head, int batch) const {
#pragma unroll
    for (int box = 0; box < kBlockN / kKeyBoxRows; ++box)
      for (int slab = 0; slab < slabs; ++slab)
        tma_load_4d(dst + slab * Tiles::kSlabBytesKV + box * kKeyBoxRows * Tiles::kSlabRowBytes,
                    map, full, slab * Tiles::kSlabCols, row + box * kKeyBoxRows, kv_head, batch,
                    kv_policy());
  }

  // Tiles packing a group's heads: Q is the group's heads of block_m / group queries from the
  // tile's first row's query on (a 5-D box, make_group_tile_map), its tile_rows() rows. A
  // function of its own: with its row computed beside the others' in load_q, the causal
  // 192-row kernels' 32-register producer spilled.
  __device__ __forceinline__ void load_group_q(const WorkTile& t, int qb) {
    const int query = t.seq.row0 + sched.query_of(t.m0);
    for (int slab = 0; slab < Tiles::kSlabs; ++slab)
      tma_load_5d(smem.q() + qb * Tiles::kTileBytesQ + slab * Tiles::kSlabBytesQ, &mp.q_map,
                  &smem.q_full()[qb], slab * Tiles::kSlabCols, 0, query, t.kv_head, t.seq.batch,
                  l2_evict_first_policy());
  }

  // The tile's Q, then its K and V per key block in the order the consumers walk them
  // (kForwardWalk).
  __device__ __forceinline__ void load_tile(const WorkTile& t) {
    if (!Kt::kPageRows || threadIdx.x == 0) load_q(t);
    ++q_round;
    KeyBlockPages behind{};
    for (int n = first_block(t); Kt::kForwardWalk ? n < t.range.end : n >= t.range.begin;
         n += Kt::kWalkStep) {
      if constexpr (kVBehindK) {
        load_key_block_v_behind(t, n, behind);
      } else {
        load_key_block(t, n);
      }
    }
    if constexpr (kVBehindK) load_v_behind(t, last_block(t), behind, ring);
  }

  // Tile t's Q.
  __device__ __forceinline__ void load_q(const WorkTile& t) {
    // Q buffer q_round % kQStages, used for the (q_round / kQStages)-th time: wait until the
    // tile that last used it has done its last S = Q K^T.
    const int qb = ring_slot<Tiles::kQStages>(q_round);
    mbar_wait(&smem.q_empty()[qb], ring_parity<Tiles::kQStages>(q_round) ^ 1);
    // The bytes the Q box brings (tiles packing a group's heads: its tile_rows).
    mbar_arrive_expect_tx(&smem.q_full()[qb],
                          Kt::kPackHeads
                              ? Tiles::kSlabs * sched.tile_rows() * Tiles::kSlabRowBytes
                              : Tiles::kTileBytesQ);
    // Q's first row and batch: a sequence's rows start at row0 of its batch.
    const int row = Kt::kSequences ? t.seq.row0 + t.m0 : t.m0;
    const int batch = Kt::kSequences ? t.seq.batch : t.batch;
    if constexpr (Kt::kPackHeads) {
      load_group_q(t, qb);
    } else {
      for (int slab = 0; slab < Tiles::kSlabs; ++slab)
        tma_load_4d(smem.q() + qb * Tiles::kTileBytesQ + slab * Tiles::kSlabBytesQ, &mp.q_map,
                    &smem.q_full()[qb], slab * Tiles::kSlabCols, row, t.head, batch,
                    l2_evict_first_policy());
    }
  }

  // The static walk: every slot of this block's share (the consumers skip empty tiles too).
  __device__ __forceinline__ void walk_static() {
    for (int slot = sched.first_slot; slot < sched.end_slot; slot += sched.slot_stride) {
      tile = sched.static_work(slot);
      if (tile.has_work()) load_tile(tile);
    }
  }

  // The dynamic walk: each tile drawn goes to the consumers through the tile ring (end_slot
  // marks the end). The next one is drawn once this one's loads are issued: the consumers then
  // still have the ring's blocks of it to compute, under which the counter's round trip runs.
  __device__ __forceinline__ void walk_counter() {
    TileHandoff<Tiles::kTileRing> handoff{smem.tile_full(), smem.tile_empty(), smem.tile_ring()};
    int drawn = blockIdx.x;
    for (;;) {
      if (!Kt::kRowTable || threadIdx.x == 0)
        handoff.publish(drawn < sched.end_slot ? drawn : sched.end_slot);
      if (drawn >= sched.end_slot) break;
      tile = sched.tile_of(drawn);
      if (tile.has_work()) load_tile(tile);
      if constexpr (Kt::kRowTable) {  // the locating warp walks together
        drawn = __shfl_sync(0xffffffffu, threadIdx.x == 0 ? sched.draw_from_counter() : 0, 0);
      } else {
        drawn = sched.draw_from_counter();
      }
    }
  }
};

// The producer warpgroup: gives its registers to the consumers; one thread walks the tiles (all
// of them where they copy pages a row at a time; warp 0 where it locates rows for the others).
template <class Kt>
__device__ __forceinline__ void run_producer(const HopperFwdParams& hp,
                                             const SharedView<typename Kt::Tiles>& smem,
                                             const TileScheduler<Kt>& sched) {
  // Blocks without a tile in a part-full last round start later (hopper_staggered_block in
  // core/hopper_tiles.h); the consumers wait for their registers and this tile's Q meanwhile.
  // Not in the instances whose launches draw their tiles from a counter: there no block knows
  // its tile count (and the split 192-row d=128 kernel spilled with the check compiled in).
  if constexpr (!Kt::kTailPass && !Kt::kDrawsTiles) {
    if (hopper_staggered_block(sched.end_slot, gridDim.x, blockIdx.x))
      sleep_at_least_ns(kHopperStaggerNs);
  }
  release_registers<Kt::kProducerRegs>();
  if constexpr (Kt::kRowTable) {  // warp 0 walks and locates rows, warps 1 to 3 copy them
    const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
    FwdProducer<Kt> producer(hp, smem, sched);
    if (warp == 0) {
      if (threadIdx.x == 0) prefetch_tensor_map(&hp.mainloop.q_map);
      if (sched.dynamic) {
        producer.walk_counter();
      } else {
        producer.walk_static();
      }
      producer.end_row_table();
    } else {
      producer.copy_located_rows(warp - 1);
    }
    return;
  } else if constexpr (Kt::kPageRows) {
    static_assert(!Kt::kDrawsTiles, "the warpgroup walks the static order together");
    if (threadIdx.x == 0) prefetch_tensor_map(&hp.mainloop.q_map);
  } else {
    if (threadIdx.x != 0) return;
    prefetch_tensor_map(&hp.mainloop.q_map);
    prefetch_tensor_map(&hp.mainloop.k_map);
    prefetch_tensor_map(&hp.mainloop.v_map);
  }
  FwdProducer<Kt> producer(hp, smem, sched);
  if (sched.dynamic) {
    producer.walk_counter();
  } else {
    producer.walk_static();
  }
}

}  // namespace sm90
}  // namespace flashsplit
