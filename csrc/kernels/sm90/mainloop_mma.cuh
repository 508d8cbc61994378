// The Hopper forward's consumers: each warpgroup owns 64 query rows of a tile and walks its key
// blocks through the K/V ring. Per block: S = Q K^T with both operands read by wgmma straight
// from shared memory, the mask and the online softmax in registers, then O += P V with P fed
// from registers; each consumer warp frees a stage as soon as it has read it.
//   - Side by side (three or four consumers, no overlap): each computes only the key blocks its
//     own rows can see and lets the others pass (the last tile's padding rows, the early rows of
//     a causal tile), which leaves the tensor cores to the others.
//   - Overlapped (two consumers in ping-pong): each overlaps a block's S and softmax with the
//     previous block's P V (and, with kCarry, a tile's last P V with the next tile's first S);
//     the two take turns issuing GEMMs, so one's softmax runs under the other's GEMMs.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/sm90/epilogue.cuh"
#include "kernels/sm90/fwd_params.cuh"
#include "kernels/sm90/hopper_primitives.cuh"
#include "kernels/sm90/kernel_traits.cuh"
#include "kernels/sm90/mask.cuh"
#include "kernels/sm90/named_barriers.h"
#include "kernels/sm90/pipeline.cuh"
#include "kernels/sm90/shared_storage.cuh"
#include "kernels/sm90/softmax.cuh"
#include "kernels/sm90/tile_scheduler.cuh"

namespace flashsplit {
namespace sm90 {

template <class Kt>
struct FwdConsumer {
  using Elem = typename Kt::Elem;
  using Tiles = typename Kt::Tiles;
  static constexpr int kHeadDim = Kt::kHeadDim, kHeadDimV = Kt::kHeadDimV, kBlockN = Kt::kBlockN;
  static_assert(!Kt::kRecomputeScores ||
                    named_barrier_id(FwdNamedBarrier::kRecomputeVote, Tiles::kConsumers) <=
                        kNamedBarrierCount,
                "a recompute vote barrier per consumer");

  // The consumer thread's state, declared in run_consumers: the parts below reach it as a
  // lambda would, through references.
  const MainloopParams& mp;
  const SharedView<Tiles>& smem;
  const TileScheduler<Kt>& sched;
  const ConsumerThread& th;
  const int& tile_row;  // this thread's first row within a tile, without rotation (kRotate)
  int& row0;            // this thread's rows of the current tile: row0 and row0 + 8
  const ScoreMask<Kt>& mask;
  // Registers: O, S of the block being scored, P of the block whose P V is in flight.
  float (&o)[kHeadDimV / 2];
  float (&s)[kBlockN / 2];
  uint32_t (&pa)[kBlockN / 16][4];
  OnlineSoftmax<Kt>& softmax;
  uint32_t& q_desc_low;  // low word of this warpgroup's Q descriptor (made once a tile)
  const uint32_t &k_base, &v_base;
  RingState<Kt::kStages>& ring;
  uint32_t& q_round;  // tiles with work so far, as the producer counts them
  int& qb;            // the current tile's Q buffer
  const FwdEpilogue<Kt>& epilogue;
  TileHandoff<Tiles::kTileRing>& handoff;  // the dynamic walk's tiles drawn
  WorkTile& tile;                          // the current tile

  // ---- GEMMs, turns and releases.
  // A stage's K and V descriptors are made once per block and each k-step adds its offset to
  // the start address, as Q's (ptxas otherwise rebuilds each one whole: 7 uniform instructions
  // an HGMMA against 4; up to 1% faster at d=64 to 256). At d=96, whose slabs have 64-byte
  // rows, ptxas laid the kernels out 1-3% slower that way, so they build whole descriptors.
  static constexpr bool kDescriptorOffsets = Tiles::kSlabRowBytes == 128;
  __device__ __forceinline__ uint64_t k_desc(uint32_t k_addr, uint32_t k_low, uint32_t at) const {
    constexpr int kRowBytes = Tiles::kSlabRowBytes;
    return kDescriptorOffsets ? desc_k_major_at<kRowBytes>(k_low, at)
                              : desc_k_major<kRowBytes>(k_addr + at);
  }
  __device__ __forceinline__ uint64_t v_desc(uint32_t v_addr, uint32_t v_low, uint32_t at) const {
    constexpr int kRowBytes = Tiles::kSlabRowBytes;
    return kDescriptorOffsets ? desc_mn_major_at<kRowBytes>(v_low, Tiles::kSlabBytesKV, at)
                              : desc_mn_major<kRowBytes>(v_addr + at, Tiles::kSlabBytesKV);
  }
  // S = Q K^T for the block in `stage`: D/16 k-steps, each 32 B further along a slab's rows.
  __device__ __forceinline__ void issue_qk(int stage) {
    constexpr int kRowBytes = Tiles::kSlabRowBytes, kStepsPerSlab = Tiles::kSlabCols / 16;
    const uint32_t k_addr = k_base + stage * Tiles::kTileBytesKV;
    const uint32_t k_low = desc_k_major_low<kRowBytes>(k_addr);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t offset = (kk % kStepsPerSlab) * 32u;
      const int slab = kk / kStepsPerSlab;
      wgmma_qk<Elem>(s, desc_k_major_at<kRowBytes>(q_desc_low, slab * Tiles::kSlabBytesQ + offset),
                     k_desc(k_addr, k_low, slab * Tiles::kSlabBytesKV + offset), kk > 0);
    }
    wgmma_commit();
  }
  // O += P V for the block in `stage`: 16 keys per k-step = 16 slab rows further on.
  __device__ __forceinline__ void issue_pv(int stage) {
    constexpr int kRowBytes = Tiles::kSlabRowBytes;
    const uint32_t v_addr = v_base + stage * Tiles::kTileBytesV;
    const uint32_t v_low =
        static_cast<uint32_t>(desc_mn_major<kRowBytes>(v_addr, Tiles::kSlabBytesKV));
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      wgmma_pv<Elem, kHeadDimV>(o, pa[kk], v_desc(v_addr, v_low, kk * 16 * kRowBytes), 1);
    wgmma_commit();
  }
  __device__ __forceinline__ void release(uint64_t* empty) { warp_release(empty, th.lane); }
  // Ping-pong turns: consumer c waits for its turn before issuing GEMMs and hands the turn to
  // the other consumer after issuing them; consumer 1 hands consumer 0 the first turn (start).
  __device__ __forceinline__ void wait_turn() {
    if constexpr (Tiles::kPingPong)
      named_barrier_sync(named_barrier_id(FwdNamedBarrier::kPingPongTurn, th.consumer), 256);
  }
  __device__ __forceinline__ void pass_turn() {
    if constexpr (Tiles::kPingPong)
      named_barrier_arrive(named_barrier_id(FwdNamedBarrier::kPingPongTurn, th.consumer ^ 1), 256);
  }
  __device__ __forceinline__ void start() {
    if (th.consumer == 1) pass_turn();
  }

  // ---- The walk.
  // The 64-row slice of the next tile this consumer computes (kRotate), and this thread's first
  // row within the tile in that slice (without rotation always tile_row).
  __device__ __forceinline__ int next_slice() const {
    return Kt::kRotate ? static_cast<int>((th.consumer + q_round) % Tiles::kConsumers)
                       : th.consumer;
  }
  __device__ __forceinline__ int row_in_tile(int slice) const {
    return Kt::kRotate ? slice * 64 + th.slice_row : tile_row;
  }
  // Starts the located tile: this thread's rows, fresh softmax statistics, its Q buffer landed.
  __device__ __forceinline__ void begin_tile() {
    const int slice = next_slice();
    row0 = tile.m0 + row_in_tile(slice);
    softmax.reset();
    qb = ring_slot<Tiles::kQStages>(q_round);
    q_desc_low =
        desc_k_major_low<Tiles::kSlabRowBytes>(smem_u32(smem.q()) + qb * Tiles::kTileBytesQ +
                                               slice * 64 * Tiles::kSlabRowBytes);
    mbar_wait(&smem.q_full()[qb], ring_parity<Tiles::kQStages>(q_round));
    ++q_round;
  }
  __device__ __forceinline__ FinishedRows finished_rows(int slot) const {
    return FinishedRows{tile.m0,
                        row0,
                        sched.q_batch_of(tile),
                        tile.head,
                        tile.split,
                        sched.sq_of(tile),
                        sched.q_row_of(tile),
                        {softmax.row_max[0], softmax.row_max[1]},
                        {softmax.row_sum[0], softmax.row_sum[1]},
                        slot};
  }
  // Moves to the tile of walk slot `slot` (the dynamic walk: to the next tile drawn, `slot`
  // being the tile's index), or the first later one with key blocks to visit (the producer
  // skips the others too), writing the rows of those it passes; returns the slot. In the tail
  // kernel an empty slot has no rows at all (a tail tile's rows are its pieces', none of which
  // is empty).
  __device__ __forceinline__ int next_work(int slot) {
    if (sched.dynamic) slot = handoff.receive(th.lane);
    for (; slot < sched.end_slot;
         slot = sched.dynamic ? handoff.receive(th.lane) : slot + sched.slot_stride) {
      if constexpr (Kt::kTailPass) {
        tile = sched.piece_tile(slot);
      } else if (sched.dynamic) {
        tile = sched.tile_of(slot);
      } else {
        tile = sched.static_tile(slot);
      }
      if (tile.has_work()) break;
      if (Kt::kTailPass) continue;
      epilogue.write(FinishedRows{tile.m0, tile.m0 + row_in_tile(next_slice()),
                                  sched.q_batch_of(tile), tile.head, tile.split, sched.sq_of(tile),
                                  sched.q_row_of(tile), {-INFINITY, -INFINITY}, {0.f, 0.f}, slot},
                     true, o);
    }
    return slot;
  }
  // The tile's first key block in walk order (kForwardWalk).
  __device__ __forceinline__ int first_block() const {
    return Kt::kForwardWalk ? tile.range.begin : tile.range.end - 1;
  }

  // ---- A scored block.
  __device__ __forceinline__ void zero_o() {
#pragma unroll
    for (int i = 0; i < kHeadDimV / 2; ++i) o[i] = 0.f;
  }
  // Key block n's K has been read for the last time (and Q too after the tile's last block
  // walked): free them.
  __device__ __forceinline__ void free_scored_operands(int n) {
    release(&smem.k_empty()[ring.stage]);
    if (n == (Kt::kForwardWalk ? tile.range.end - 1 : tile.range.begin))
      release(&smem.q_empty()[qb]);
  }
  // Once S of key block n (in the ring's stage) has landed: free its K (and Q after the tile's
  // last block walked).
  __device__ __forceinline__ void block_landed(int n) {
    fence_accumulators(s);
    free_scored_operands(n);
  }
  // Scores of key block n as the softmax reads them (mask.cuh). Rotating consumers know their
  // slice's first row; the ping-pong kernels keep the tile's.
  __device__ __forceinline__ void prepare_scores(int n) {
    mask.apply(s, n, Kt::kRotate ? row0 - th.slice_row : tile.m0, row0, sched.sq_of(tile),
               sched.sk_of(tile), sched.sp.by_group);
  }
  // ... then softmax, leaving P in s.
  __device__ __forceinline__ void block_scored(int n) {
    block_landed(n);
    prepare_scores(n);
    softmax.with_max(s);
  }

  // ---- Side by side (no overlap).
  __device__ __forceinline__ void run_side_by_side() {
    for (int slot = next_work(sched.first_slot); slot < sched.end_slot;
         slot = next_work(slot + sched.slot_stride)) {
      zero_o();
      begin_tile();
      const int visible_end = visible_end_block();
      for (int n = tile.range.end - 1; n >= visible_end; --n) pass_block(n);
      for (int n = visible_end - 1; n >= tile.range.begin; --n) compute_block(n, visible_end);
      epilogue.write(finished_rows(slot), false, o);
    }
  }
  // Key blocks this consumer's rows see end before the returned one: none where they are all
  // past sq (the last tile's padding), fewer than the tile's where a causal mask hides the last
  // ones from them. The blocks are walked last first, so those it cannot see come first: it
  // lets them pass (pass_block) without computing on them. (Read through a shuffle, so the
  // compiler sees a bound the same in every lane of the warp and keeps the loops free of
  // divergence handling: measured 4-10% slower without.)
  __device__ __forceinline__ int visible_end_block() const {
    const int sq = sched.sq_of(tile), sk = sched.sk_of(tile);
    const int first_row = Kt::kRotate ? row0 - th.slice_row : tile.m0 + th.consumer * 64;
    return __shfl_sync(
        0xffffffffu,
        first_row >= sq ? tile.range.begin
                        : max(tile.range.begin,
                              min(tile.range.end, visible_key_blocks(min(first_row + 64, sq), sq,
                                                                     sk, kBlockN, Kt::kCausal))),
        0);
  }
  // A block this consumer's rows cannot see: freed once it has landed.
  __device__ __forceinline__ void pass_block(int n) {
    mbar_wait(&smem.k_full()[ring.stage], ring.phase);
    release(&smem.k_empty()[ring.stage]);
    if (n == tile.range.begin) release(&smem.q_empty()[qb]);
    mbar_wait(&smem.v_full()[ring.stage], ring.phase);
    release(&smem.v_empty()[ring.stage]);
    ring.advance();
  }
  __device__ __forceinline__ void compute_block(int n, int visible_end) {
    mbar_wait(&smem.k_full()[ring.stage], ring.phase);
    wgmma_fence();
    issue_qk(ring.stage);
    wgmma_wait<0>();
    if constexpr (Kt::kRecomputeScores) {
      softmax_with_vote(n, visible_end);
    } else {
      block_landed(n);
      prepare_scores(n);
      float sum[2];
      if (Kt::kFastProbabilities && softmax.at_running_max(s, pa, sum)) {
        softmax.add_to_row_sums(sum);
      } else if (Kt::kFastProbabilities && softmax.hold_in_p(pa, sum)) {
        softmax.add_to_row_sums(sum);
        softmax.rescale_o(o);
      } else {
        softmax.with_max(s);
        softmax.rescale_o(o);
        pack_p<Elem, kBlockN>(s, pa);
      }
    }
    mbar_wait(&smem.v_full()[ring.stage], ring.phase);
    wgmma_fence();
    issue_pv(ring.stage);
    wgmma_wait<0>();
    fence_accumulators(o);
    release(&smem.v_empty()[ring.stage]);
    ring.advance();
  }
  // kRecomputeScores: after this consumer's first block of the tile, the probabilities at the
  // running max. Where a warp's could pass the bound it moves its base in place
  // (OnlineSoftmax::hold_in_place); where a warp's cannot be held even so, the warpgroup
  // computes S again (K and Q are freed only after the votes) and takes the block's max, from
  // the sums kept before the block and O, both brought to the warp's base (rescale[] is 1 where
  // it stayed). One call site of the softmax for both, so ptxas lays out S, P and O as for the
  // plain softmax (with two, or with at_running_max's P beside the scores, it spilled).
  __device__ __forceinline__ void softmax_with_vote(int n, int visible_end) {
    fence_accumulators(s);
    prepare_scores(n);
    const float kept_sum[2] = {softmax.row_sum[0], softmax.row_sum[1]};
    const int vote = named_barrier_id(FwdNamedBarrier::kRecomputeVote, th.consumer);
    for (bool at_running_max = n != visible_end - 1 && softmax.running_max_pays();;
         at_running_max = false) {
      const bool bounded = softmax.with_max(s, at_running_max);
      if (!at_running_max || !named_barrier_any(vote, 128, !bounded) ||
          !named_barrier_any(vote, 128, !softmax.hold_in_place(s, bounded)))
        break;
      ++softmax.running_max_misses;
      softmax.row_sum[0] = kept_sum[0] * softmax.rescale[0];
      softmax.row_sum[1] = kept_sum[1] * softmax.rescale[1];
      softmax.rescale_o(o);
      wgmma_fence();
      issue_qk(ring.stage);
      wgmma_wait<0>();
      fence_accumulators(s);
      prepare_scores(n);
    }
    free_scored_operands(n);
    softmax.rescale_o(o);
    pack_p<Elem, kBlockN>(s, pa);
  }

  // ---- Overlapped (ping-pong).
  __device__ __forceinline__ void run_overlapped() {
    int slot = next_work(sched.first_slot);
    if (slot < sched.end_slot) start_alone();
    while (slot < sched.end_slot) {
      // Each further block overlaps its S = Q K^T and softmax with the previous block's
      // O += P V on the tensor cores; O is rescaled once that P V has landed.
      for (int n = Kt::kForwardWalk ? tile.range.begin + 1 : tile.range.end - 2;
           Kt::kForwardWalk ? n < tile.range.end : n >= tile.range.begin; n += Kt::kWalkStep)
        overlapped_block(n);
      slot = end_tile(slot);
    }
  }
  // S of the block in the ring's stage together with P V of the previous block (in pv_stage),
  // in this consumer's turn; returns once S has landed (groups complete in order), P V may
  // still run. V's wait comes between the two, so S is on the tensor cores while it is checked
  // (measured 0.9-1.5% faster on long causal d=128 calls than waiting for K and V first).
  __device__ __forceinline__ void issue_s_with_pv(int pv_stage, uint32_t pv_phase) {
    mbar_wait(&smem.k_full()[ring.stage], ring.phase);
    wait_turn();
    wgmma_fence();
    issue_qk(ring.stage);
    mbar_wait(&smem.v_full()[pv_stage], pv_phase);
    wgmma_fence();  // again after the wait's loop (else ptxas injects one: C7519)
    issue_pv(pv_stage);
    pass_turn();
    wgmma_wait<1>();
  }
  // The P V issued with it has landed: free its V.
  __device__ __forceinline__ void pv_landed(int pv_stage) {
    wgmma_wait<0>();
    fence_accumulators(o);
    release(&smem.v_empty()[pv_stage]);
  }
  // A tile's first block with nothing beside it: S alone, then softmax and P.
  __device__ __forceinline__ void start_alone() {
    begin_tile();
    mbar_wait(&smem.k_full()[ring.stage], ring.phase);
    wait_turn();
    wgmma_fence();
    issue_qk(ring.stage);
    pass_turn();
    wgmma_wait<0>();
    block_scored(first_block());
    zero_o();
    pack_p<Elem, kBlockN>(s, pa);
  }
  __device__ __forceinline__ void overlapped_block(int n) {
    const RingState<Kt::kStages> prev = ring;
    ring.advance();
    if (padding()) return pass_padding_block(n, prev);
    issue_s_with_pv(prev.stage, prev.phase);
    block_landed(n);
    prepare_scores(n);
    float sum[2];
    if constexpr (Kt::kLandsInP) {
      const bool at_running_max = softmax.at_running_max_landing(
          s, pa, sum, mp.zero, [&] { pv_landed(prev.stage); });
      if (at_running_max || softmax.hold_in_p(pa, sum)) {
        softmax.add_to_row_sums(sum);
        if (!at_running_max) softmax.rescale_o(o);
      } else {
        softmax.with_max(s);
        softmax.rescale_o(o);
        pack_p<Elem, kBlockN>(s, pa);
      }
      return;
    }
    // P cannot go to pa yet (the P V in flight reads it): to p_next, moved once it landed.
    uint32_t p_next[kBlockN / 16][4];
    const bool at_running_max =
        Kt::kFastProbabilities && softmax.at_running_max(s, p_next, sum);
    const bool held = at_running_max || (Kt::kFastProbabilities && softmax.hold_in_p(p_next, sum));
    if (held)
      softmax.add_to_row_sums(sum);
    else
      softmax.with_max(s);
    pv_landed(prev.stage);
    if (held) {
      if (!at_running_max) softmax.rescale_o(o);
      take_next_p(p_next);
    } else {
      softmax.rescale_o(o);
      pack_p<Elem, kBlockN>(s, pa);
    }
  }
  // Tiles packing a group's heads fill their rows from the first: a few queries of a small
  // group (32 rows: 4 queries x 8 heads) leave the second consumer's 64 rows all padding, past
  // the sequence's last query (a tile's own rows end later: hopper_packed_tile_rows >= 64).
  // Such a consumer lets the blocks after a tile's first pass (pass_padding_block): no GEMM, no
  // softmax, so the other's GEMMs have the tensor cores to themselves (Kt::kPassesPadding). Its
  // first block's S and last P V still run as they do for rows with keys, and the answer is
  // found again from the tile where asked: skipping those GEMMs too, or keeping the answer in a
  // register per tile, spilled registers of the d=128 instances over row-copied pages.
  __device__ __forceinline__ bool padding() const {
    if constexpr (Kt::kPassesPadding) {
      return tile.m0 + th.consumer * 64 >= sched.rows_of(sched.sq_of(tile));
    } else {
      return false;
    }
  }
  // Key block n (in the ring's stage) and the previous block's V (in prev) as the overlapped
  // step takes them, without GEMMs: once both have landed, this consumer takes its turn and
  // passes it on, and frees them.
  __device__ __forceinline__ void pass_padding_block(int n, const RingState<Kt::kStages>& prev) {
    mbar_wait(&smem.k_full()[ring.stage], ring.phase);
    mbar_wait(&smem.v_full()[prev.stage], prev.phase);
    wait_turn();
    pass_turn();
    free_scored_operands(n);
    release(&smem.v_empty()[prev.stage]);
  }
  // P of the next block, computed while the P V in flight still reads pa, moves into pa once
  // that P V has landed. A wgmma's A fragment must not change before its wait, but the compilers
  // see it as read at issue: left alone they give p_next pa's registers, and the P V in flight
  // reads the next block's P. So the move merges pa's old value in under a mask of zeros known
  // only at run time (MainloopParams::zero), which keeps pa live until after the wait.
  // (Called after pv_landed: the fence orders the reads of pa after its wait.)
  __device__ __forceinline__ void take_next_p(const uint32_t (&p_next)[kBlockN / 16][4]) {
    fence_operands(pa);
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) pa[kk][e] = p_next[kk][e] | (pa[kk][e] & mp.zero);
  }
  // The tile's last P V, then its epilogue; moves to the next tile of the walk and returns its
  // slot. With kCarry (and the launch's carry) the last P V carries the next tile's first
  // S = Q K^T and softmax, so no GEMM of a tile boundary runs with nothing beside it; the
  // epilogue follows once P V has landed. Both consumers decide alike (the same tiles, the same
  // flag), so their ping-pong turns stay paired.
  __device__ __forceinline__ int end_tile(int slot) {
    const FinishedRows done = finished_rows(slot);
    const RingState<Kt::kStages> last = ring;
    ring.advance();
    slot = next_work(slot + sched.slot_stride);
    if (Kt::kCarry && mp.carry && slot < sched.end_slot) {
      begin_tile();
      issue_s_with_pv(last.stage, last.phase);
      block_scored(first_block());
      pv_landed(last.stage);
      epilogue.write(done, false, o);
      zero_o();
      pack_p<Elem, kBlockN>(s, pa);
    } else {
      mbar_wait(&smem.v_full()[last.stage], last.phase);
      wait_turn();
      wgmma_fence();
      issue_pv(last.stage);
      pass_turn();
      pv_landed(last.stage);
      epilogue.write(done, false, o);
      if (slot < sched.end_slot) start_alone();
    }
    return slot;
  }
};

// The consumer warpgroups: take the registers the producer gave back, walk the tiles.
template <class Kt>
__device__ __forceinline__ void run_consumers(const HopperFwdParams& hp,
                                              const SharedView<typename Kt::Tiles>& smem,
                                              const TileScheduler<Kt>& sched, WorkTile& tile,
                                              int warpgroup, int lane) {
  using Tiles = typename Kt::Tiles;
  claim_registers<Kt::kConsumerRegs>();
  const ConsumerThread th(warpgroup, lane);
  const int tile_row = th.consumer * 64 + th.slice_row;
  int row0 = 0;
  const ScoreMask<Kt> mask(hp.p, th.quad_col, hp.mainloop.page_box_rows);
  float o[Kt::kHeadDimV / 2];
  float s[Kt::kBlockN / 2];
  uint32_t pa[Kt::kBlockN / 16][4];
#pragma unroll
  for (int i = 0; i < Kt::kBlockN / 2; ++i) s[i] = 0.f;
  OnlineSoftmax<Kt> softmax(hp.p.softmax_scale);
  uint32_t q_desc_low = 0;
  const uint32_t k_base = smem_u32(smem.k()), v_base = smem_u32(smem.v());
  RingState<Kt::kStages> ring;
  uint32_t q_round = 0;
  int qb = 0;
  const FwdEpilogue<Kt> epilogue(hp, smem.o(), th, softmax.scale_log2);
  TileHandoff<Tiles::kTileRing> handoff{smem.tile_full(), smem.tile_empty(), smem.tile_ring()};
  // The ping-pong consumers address shared memory from a pinned view (SharedView::pinned).
  const SharedView<Tiles> view = Tiles::kPingPong ? smem.pinned() : smem;
  FwdConsumer<Kt> consumer{hp.mainloop, view,    sched, th,       tile_row, row0,
                           mask,        o,       s,     pa,       softmax,  q_desc_low,
                           k_base,      v_base,  ring,  q_round,  qb,       epilogue,
                           handoff,     tile};
  consumer.start();
  if constexpr (Kt::kOverlap) {
    consumer.run_overlapped();
  } else {
    consumer.run_side_by_side();
  }
  epilogue.finish();
}

}  // namespace sm90
}  // namespace flashsplit
