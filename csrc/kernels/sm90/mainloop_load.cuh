// The Hopper forward's producer: one thread of the producer warpgroup issues TMA loads of each
// tile's Q (into one of kQStages Q buffers) and of its K and V per key block (into the K/V ring
// of kStages stages), in the order the consumers walk them. K and V have separate barriers, so
// a consumer's S = Q K^T can start while V is still landing.
#pragma once

#include <cstdint>

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
        smem(view),
        sched(scheduler),
        kv_shared(scheduler.m_blocks > 1 || (!Kt::kPackHeads && hp.p.h != hp.p.hk)) {}

  __device__ __forceinline__ uint64_t kv_policy() const {
    return kv_shared ? l2_evict_last_policy() : l2_evict_normal_policy();
  }

  // Paged k/v (kPaged): a key block is one box, or two of a page's rows (hopper_page_box_rows).
  // The block-table entries of the block loaded next are read one block ahead, so their latency
  // is not on the path from a freed stage to its loads.
  static_assert(!Kt::kPaged || kBlockN == 2 * kHopperMinPageRows,
                "a paged key block is one box or two");
  struct BlockPages {
    int first, second;  // the pages of its boxes (0 for a box past the keys, or none)
  };
  int pages_ahead_block = -1;  // the key block pages_ahead is of (-1: none)
  BlockPages pages_ahead{};

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

  // Paged k/v: key block n of tile t, K's boxes then V's, into the ring's next stage. Each box
  // ends by the sequence's last key (page_box_row in core/key_blocks.h), so none reads a slot
  // past it, and the mask labels each box's rows (boxed_key).
  __device__ __forceinline__ void load_paged_key_block(const WorkTile& t, int n) {
    const BlockPages pages = pages_ahead_block == n ? pages_ahead : read_pages(t, n);
    const int next = n + Kt::kWalkStep;
    pages_ahead_block = (Kt::kForwardWalk ? next < t.range.end : next >= t.range.begin) ? next : -1;
    if (pages_ahead_block >= 0) pages_ahead = read_pages(t, next);
    mbar_wait(&smem.k_empty()[ring.stage], ring.phase ^ 1);
    mbar_arrive_expect_tx(&smem.k_full()[ring.stage], Tiles::kTileBytesKV);
    load_page_boxes(t, n, pages, &mp.k_map, Tiles::kSlabs,
                    smem.k() + ring.stage * Tiles::kTileBytesKV, &smem.k_full()[ring.stage]);
    mbar_wait(&smem.v_empty()[ring.stage], ring.phase ^ 1);
    mbar_arrive_expect_tx(&smem.v_full()[ring.stage], Tiles::kTileBytesV);
    load_page_boxes(t, n, pages, &mp.v_map, Tiles::kSlabsV,
                    smem.v() + ring.stage * Tiles::kTileBytesV, &smem.v_full()[ring.stage]);
    ring.advance();
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
    for (int slab = 0; slab < Tiles::kSlabs; ++slab)
      tma_load_4d(k_dst + slab * Tiles::kSlabBytesKV, &mp.k_map, &smem.k_full()[ring.stage],
                  slab * Tiles::kSlabCols, row, t.kv_head, batch, kv_policy());
    mbar_wait(&smem.v_empty()[ring.stage], ring.phase ^ 1);
    mbar_arrive_expect_tx(&smem.v_full()[ring.stage], Tiles::kTileBytesV);
    for (int slab = 0; slab < Tiles::kSlabsV; ++slab)
      tma_load_4d(v_dst + slab * Tiles::kSlabBytesKV, &mp.v_map, &smem.v_full()[ring.stage],
                  slab * Tiles::kSlabCols, row, t.kv_head, batch, kv_policy());
    ring.advance();
  }

  // Tiles packing a group's heads: Q is the group's heads of block_m / group queries from the
  // tile's first row's query on (a 5-D box, make_group_tile_map), its tile_rows() rows. A
  // function of its own: with its row computed beside the others' in load_tile, the causal
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
    ++q_round;
    for (int n = Kt::kForwardWalk ? t.range.begin : t.range.end - 1;
         Kt::kForwardWalk ? n < t.range.end : n >= t.range.begin; n += Kt::kWalkStep)
      load_key_block(t, n);
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
      handoff.publish(drawn < sched.end_slot ? drawn : sched.end_slot);
      if (drawn >= sched.end_slot) break;
      tile = sched.tile_of(drawn);
      if (tile.has_work()) load_tile(tile);
      drawn = sched.draw_from_counter();
    }
  }
};

// The producer warpgroup: gives its registers to the consumers; one thread walks the tiles.
template <class Kt>
__device__ __forceinline__ void run_producer(const HopperFwdParams& hp,
                                             const SharedView<typename Kt::Tiles>& smem,
                                             const TileScheduler<Kt>& sched) {
  // Blocks without a tile in a part-full last round start later (hopper_staggered_block in
  // core/hopper_tiles.h); the consumers wait for their registers and this tile's Q meanwhile.
  // Not in the grouped walk, whose persistent launches draw their tiles from a counter: there
  // no block knows its tile count (and the split 192-row d=128 kernel spilled with it).
  if constexpr (!Kt::kTailPass && !Kt::kGroupedWalk) {
    if (hopper_staggered_block(sched.end_slot, gridDim.x, blockIdx.x))
      sleep_at_least_ns(kHopperStaggerNs);
  }
  release_registers<Kt::Tiles::kProducerRegs>();
  if (threadIdx.x != 0) return;
  prefetch_tensor_map(&hp.mainloop.q_map);
  prefetch_tensor_map(&hp.mainloop.k_map);
  prefetch_tensor_map(&hp.mainloop.v_map);
  FwdProducer<Kt> producer(hp, smem, sched);
  if (sched.dynamic) {
    producer.walk_counter();
  } else {
    producer.walk_static();
  }
}

}  // namespace sm90
}  // namespace flashsplit
