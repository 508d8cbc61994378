// Hopper forward (sm_90a): TMA loads, wgmma, warp specialisation.
//
// A thread block runs one producer warpgroup and two, three or four consumer warpgroups of 64
// query rows (a tile of 128, 192 or 256 rows of one query head; 128-key blocks, 64 with four
// consumers), and works through tiles = (query tile, split, batch * head): one tile per block,
// or, where tiles are short, one block per SM walking them in snake order (persistent; see
// hopper_persistent in core/hopper_tiles.h).
//
// The producer is one thread issuing TMA loads of each tile's Q and of K and V per key block
// (last first; first to last on causal ping-pong tiles at d=128) into a ring of kStages
// stages; every load completes on a "full" mbarrier, and the producer waits on the stage's
// "empty" mbarrier before refilling it. Consumers compute S = Q K^T with both operands read
// by wgmma straight from shared memory, the online softmax in registers (FFMA + ex2 as in the
// portable kernel), then O += P V with P fed from registers. K and V have
// separate barriers so S can start while V is still landing, and each consumer warp frees a
// stage as soon as it has read it. With two consumers, each overlaps a block's S and softmax
// with the previous block's P V (and, with kCarry, a tile's last P V with the next tile's
// first S); the two take turns issuing GEMMs (ping-pong), so one's softmax runs under the
// other's GEMMs. Three or four consumers work side by side without overlap; each computes only
// the key blocks its own rows can see and lets the others pass (the last tile's padding rows,
// the early rows of a causal tile), which leaves the tensor cores to the others; on causal
// tiles they take turns at the rows that see the most key blocks (kRotate).
//
// Tiles in shared memory are in TMA's 128-byte swizzle: a tile of R rows and D columns is D/64
// "slabs" of R x 64 elements, one TMA box each. The split epilogue (fp32 partials) is the
// portable kernel's (kernels/fwd_common.cuh), so the combine kernel is shared; the direct one
// (G = 1) stages each consumer's 64 rows in shared memory and stores them with TMA, so the
// consumer goes on to its next tile instead of issuing D/4 narrow global stores per row.
//
// An unsplit call without a causal mask whose last round of tiles would leave SMs idle runs
// that round as a second, dependent launch of this kernel (TailPass): its tiles are cut into
// pieces of key blocks spread over every SM (core/tail_split.h), and the last piece of each
// tile to finish folds the pieces' fp32 partials and writes the output.
#pragma once

#include <float.h>
#include <math.h>

#include "core/fast_divmod.h"
#include "core/combine_math.h"
#include "core/key_blocks.h"
#include "core/online_softmax.h"
#include "core/tail_split.h"
#include "core/hopper_tiles.h"
#include "core/tile_order.h"
#include "kernels/attn_params.h"
#include "kernels/sm90/fwd_params.cuh"
#include "kernels/fwd_common.cuh"
#include "kernels/sm90/epilogue.cuh"
#include "kernels/sm90/hopper_primitives.cuh"
#include "kernels/sm90/kernel_traits.cuh"
#include "kernels/sm90/mainloop_load.cuh"
#include "kernels/sm90/mask.cuh"
#include "kernels/sm90/named_barriers.h"
#include "kernels/sm90/softmax.cuh"
#include "kernels/sm90/tile_scheduler.cuh"
#include "kernels/sm90/pipeline.cuh"
#include "kernels/sm90/shared_storage.cuh"

namespace flashsplit {
namespace sm90 {

// TailPass: the kernel that runs a tail split's pieces (core/tail_split.h), launched behind the
// one that runs the main tiles; a kernel of its own, so the fold's registers cannot change how
// ptxas compiles the main tiles (one kernel with both passes ran 8-15% slower on 192-row tiles,
// d=128 with its wgmma serialized for registers).
template <class Elem, int D, bool Causal, bool Split, class Tiles, bool TailPass = false>
__global__ void __launch_bounds__(Tiles::kThreads, 1)
    hopper_fwd_kernel(const __grid_constant__ HopperFwdParams hp) {
#if FS_HAS_WGMMA
  using Kt = FwdKernelTraits<Elem, D, Causal, Split, Tiles, TailPass>;
  constexpr int BN = Tiles::kBlockN, kStages = Tiles::kStages;
  constexpr bool kCarry = Kt::kCarry;
  constexpr bool kForwardWalk = Kt::kForwardWalk, kRotate = Kt::kRotate;
  constexpr int kWalkStep = Kt::kWalkStep;
  constexpr bool kRecomputeScores = Kt::kRecomputeScores;
  constexpr bool kFastProbabilities = Kt::kFastProbabilities;
  const AttnFwdParams& p = hp.p;
  allow_dependent_launch();  // the split path's combine may now be scheduled

  extern __shared__ unsigned char smem_raw[];
  const SharedView<Tiles> smem(smem_raw);
  unsigned char* sQ = smem.q();
  unsigned char* sK = smem.k();
  unsigned char* sV = smem.v();
  unsigned char* sO = smem.o();
  uint64_t* q_full = smem.q_full();
  uint64_t* q_empty = smem.q_empty();
  uint64_t* k_full = smem.k_full();
  uint64_t* v_full = smem.v_full();
  uint64_t* k_empty = smem.k_empty();
  uint64_t* v_empty = smem.v_empty();
  uint64_t* tile_full = smem.tile_full();
  uint64_t* tile_empty = smem.tile_empty();
  int* tile_ring = smem.tile_ring();

  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;

  const TileScheduler<Kt> scheduler(hp);
  const int first_slot = scheduler.first_slot, end_slot = scheduler.end_slot;
  const int slot_stride = scheduler.slot_stride;
  WorkTile tile{};  // the tile being loaded (producer) or computed (consumers)

  const bool dynamic_walk = scheduler.dynamic;

  init_barriers<Kt>(smem);

  if (warpgroup == 0) {
    run_producer<Kt>(hp, smem, scheduler);  // warpgroup 0: the TMA loads
    return;
  }

  // ---------------- Consumers: 64 query rows per warpgroup.
  claim_registers<Tiles::kConsumerRegs>();
  const int consumer = warpgroup - 1;
  const int warp_in_group = (threadIdx.x / 32) % 4;
  const int quad_row = lane / 4, quad_col = lane % 4;
  // This thread's first row within a 64-row slice of a tile.
  const int slice_row = warp_in_group * 16 + quad_row;
  const int tile_row = consumer * 64 + slice_row;  // without rotation, for every tile
  int row0 = 0;  // this thread's rows of the current tile: row0 and row0 + 8

  const float scale_log2 = softmax_scale_log2(p.softmax_scale);
  const ScoreMask<Kt> mask(p, quad_col);

  float o[D / 2];
  float s[BN / 2];
  uint32_t pa[BN / 16][4];  // P of the block whose P V is in flight
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) s[i] = 0.f;
  OnlineSoftmax<Kt> softmax(p.softmax_scale);  // row_max, row_sum, rescale

  uint32_t q_addr = 0;  // this warpgroup's 64 rows of the current tile's Q buffer
  const uint32_t k_base = smem_u32(sK), v_base = smem_u32(sV);
  // S = Q K^T for the block in `stage`: D/16 k-steps, each 32 B further along a slab's rows.
  auto issue_qk = [&](int stage) {
    const uint32_t k_addr = k_base + stage * Tiles::kTileBytesKV;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t offset = (kk % 4) * 32u;
      wgmma_qk<Elem>(s, desc_k_major(q_addr + (kk / 4) * Tiles::kSlabBytesQ + offset),
                     desc_k_major(k_addr + (kk / 4) * Tiles::kSlabBytesKV + offset), kk > 0);
    }
    wgmma_commit();
  };
  // O += P V for the block in `stage`: 16 keys per k-step = 2048 B of V rows further on.
  auto issue_pv = [&](int stage) {
    const uint32_t v_addr = v_base + stage * Tiles::kTileBytesKV;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wgmma_pv<Elem, D>(o, pa[kk], desc_mn_major(v_addr + kk * 2048, Tiles::kSlabBytesKV), 1);
    wgmma_commit();
  };
  // Every consumer warp frees a stage's K or V once its reads are complete.
  auto release = [&](uint64_t* empty) { warp_release(empty, lane); };
  // Scores of key block n as the softmax reads them (mask.cuh). Rotating consumers know their
  // slice's first row; the ping-pong kernels keep the tile's.
  auto prepare_scores = [&](int n) { mask.apply(s, n, kRotate ? row0 - slice_row : tile.m0, row0); };
  auto softmax_with_max = [&](bool at_running_max = false) {
    return softmax.with_max(s, at_running_max);
  };
  static_assert(!kRecomputeScores ||
                    named_barrier_id(FwdNamedBarrier::kRecomputeVote, Tiles::kConsumers) <=
                        kNamedBarrierCount,
                "a recompute vote barrier per consumer");
  auto softmax_of = [&](int n) {
    prepare_scores(n);
    softmax_with_max();
  };
  // Ping-pong turns: consumer c waits on its turn's barrier before issuing GEMMs and hands the
  // turn to the other consumer after issuing them; consumer 1 hands consumer 0 the first turn.
  auto wait_turn = [&]() {
    if constexpr (Tiles::kPingPong)
      named_barrier_sync(named_barrier_id(FwdNamedBarrier::kPingPongTurn, consumer), 256);
  };
  auto pass_turn = [&]() {
    if constexpr (Tiles::kPingPong)
      named_barrier_arrive(named_barrier_id(FwdNamedBarrier::kPingPongTurn, consumer ^ 1), 256);
  };
  if (consumer == 1) pass_turn();
  int stage = 0;
  uint32_t phase = 0;
  auto advance = [&]() {
    if (++stage == kStages) stage = 0, phase ^= 1;
  };
  uint32_t q_round = 0;  // tiles with work so far, as the producer counts them
  int qb = 0;            // the current tile's Q buffer

  // The 64-row slice of the next tile this consumer computes (kRotate above), and this thread's
  // first row within the tile in that slice (without rotation always tile_row).
  auto next_slice = [&]() {
    return kRotate ? static_cast<int>((consumer + q_round) % Tiles::kConsumers) : consumer;
  };
  auto row_in_tile = [&](int slice) { return kRotate ? slice * 64 + slice_row : tile_row; };

  // Starts the located tile: this thread's rows, fresh softmax statistics, its Q buffer landed.
  auto begin_tile = [&]() {
    const int slice = next_slice();
    row0 = tile.m0 + row_in_tile(slice);
    softmax.reset();
    qb = ring_slot<Tiles::kQStages>(q_round);
    q_addr = smem_u32(sQ) + qb * Tiles::kTileBytesQ + slice * 64 * 128;
    mbar_wait(&q_full[qb], ring_parity<Tiles::kQStages>(q_round));
    ++q_round;
  };
  auto finished_rows = [&](int slot) {
    return FinishedRows{tile.m0,    row0,  tile.batch, tile.head, tile.split, {softmax.row_max[0], softmax.row_max[1]},
                        {softmax.row_sum[0], softmax.row_sum[1]}, slot};
  };
  const FwdEpilogue<Kt> epilogue(hp, sO, ConsumerThread(warpgroup, lane), scale_log2);
  auto write_rows = [&](const FinishedRows& f, bool no_keys) { epilogue.write(f, no_keys, o); };
  uint32_t tiles_drawn = 0;  // dynamic walk: tiles read from the tile ring so far
  // The dynamic walk's next tile: the one the producer drew (end_slot at the end).
  auto draw_tile = [&]() {
    const int r = ring_slot<Tiles::kTileRing>(tiles_drawn);
    mbar_wait(&tile_full[r], ring_parity<Tiles::kTileRing>(tiles_drawn));
    // (through a shuffle: the compiler then knows every lane holds the same tile)
    const int tile = __shfl_sync(0xffffffffu, tile_ring[r], 0);
    ++tiles_drawn;
    release(&tile_empty[r]);
    return tile;
  };
  // Moves to the tile of walk slot `slot` (the dynamic walk: to the next tile drawn, `slot`
  // being the tile's index), or the first later one with key blocks to visit (the producer
  // skips the others too), writing the rows of those it passes; returns the slot.
  // In the tail kernel an empty slot has no rows at all (a tail tile's rows are its pieces',
  // none of which is empty).
  auto next_work = [&](int slot) {
    if (dynamic_walk) slot = draw_tile();
    for (; slot < end_slot; slot = dynamic_walk ? draw_tile() : slot + slot_stride) {
      if constexpr (TailPass) {
        scheduler.locate_piece(slot, tile);
      } else if (dynamic_walk) {
        scheduler.locate(slot, tile);
      } else {
        scheduler.locate_static(slot, tile);
      }
      if (tile.has_work()) break;
      if (TailPass) continue;
      write_rows(FinishedRows{tile.m0, tile.m0 + row_in_tile(next_slice()), tile.batch, tile.head, tile.split,
                              {-INFINITY, -INFINITY},
                              {0.f, 0.f}, slot},
                 true);
    }
    return slot;
  };
  auto zero_o = [&]() {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  };
  // Key block n's K has been read for the last time (and Q too after the tile's last block
  // walked): free them.
  auto free_scored_operands = [&](int n) {
    release(&k_empty[stage]);
    if (n == (kForwardWalk ? tile.range.end - 1 : tile.range.begin)) release(&q_empty[qb]);
  };
  // Once S of key block n (in `stage`) has landed: free its K (and Q after the tile's last
  // block walked).
  auto block_landed = [&](int n) {
    fence_accumulators(s);
    free_scored_operands(n);
  };
  // ... then softmax, leaving P in s.
  auto block_scored = [&](int n) {
    block_landed(n);
    softmax_of(n);
  };

  if constexpr (!Tiles::kOverlap) {
    for (int slot = next_work(first_slot); slot < end_slot;
         slot = next_work(slot + slot_stride)) {
      zero_o();
      begin_tile();
      // Key blocks this consumer's rows see: none where they are all past sq (the last tile's
      // padding), fewer than the tile's where a causal mask hides the last ones from them. The
      // blocks are walked last first, so those it cannot see come first: it lets them pass
      // (frees each once it has landed) without computing on them.
      // (Read through a shuffle, so the compiler sees a bound the same in every lane of the warp
      // and keeps the loops free of divergence handling: measured 4-10% slower without.)
      const int first_row = kRotate ? row0 - slice_row : tile.m0 + consumer * 64;
      const int visible_end = __shfl_sync(
          0xffffffffu,
          first_row >= p.sq
              ? tile.range.begin
              : max(tile.range.begin, min(tile.range.end, visible_key_blocks(min(first_row + 64, p.sq),
                                                                   p.sq, p.sk, BN, Causal))),
          0);
      for (int n = tile.range.end - 1; n >= visible_end; --n) {
        mbar_wait(&k_full[stage], phase);
        release(&k_empty[stage]);
        if (n == tile.range.begin) release(&q_empty[qb]);
        mbar_wait(&v_full[stage], phase);
        release(&v_empty[stage]);
        advance();
      }
      for (int n = visible_end - 1; n >= tile.range.begin; --n) {
        mbar_wait(&k_full[stage], phase);
        wgmma_fence();
        issue_qk(stage);
        wgmma_wait<0>();
        if constexpr (kRecomputeScores) {
          fence_accumulators(s);
          prepare_scores(n);
          // After this consumer's first block of the tile, at the running max; where a warp's
          // probabilities could pass the bound, the warpgroup computes S again (K and Q are
          // freed only after the vote) and takes the block's max. One call site of the softmax
          // for both, so ptxas lays out S, P and O as for the plain softmax (with two, or with
          // probabilities_at_running_max's P beside the scores, it spilled).
          const float kept_sum[2] = {softmax.row_sum[0], softmax.row_sum[1]};
          for (bool at_running_max = n != visible_end - 1;; at_running_max = false) {
            const bool bounded = softmax_with_max(at_running_max);
            if (!at_running_max || !named_barrier_any(named_barrier_id(FwdNamedBarrier::kRecomputeVote, consumer),
                                                     128, !bounded))
              break;
            softmax.row_sum[0] = kept_sum[0];
            softmax.row_sum[1] = kept_sum[1];
            wgmma_fence();
            issue_qk(stage);
            wgmma_wait<0>();
            fence_accumulators(s);
            prepare_scores(n);
          }
          free_scored_operands(n);
          softmax.rescale_o(o);
          pack_p<Elem, BN>(s, pa);
        } else {
          block_landed(n);
          prepare_scores(n);
          float sum[2];
          if (kFastProbabilities && softmax.at_running_max(s, pa, sum)) {
            softmax.add_to_row_sums(sum);
          } else {
            softmax_with_max();
            softmax.rescale_o(o);
            pack_p<Elem, BN>(s, pa);
          }
        }
        mbar_wait(&v_full[stage], phase);
        wgmma_fence();
        issue_pv(stage);
        wgmma_wait<0>();
        fence_accumulators(o);
        release(&v_empty[stage]);
        advance();
      }
      write_rows(finished_rows(slot), false);
    }
  } else {
    // S of the block in `stage` together with P V of the previous block (in pv_stage), in this
    // consumer's turn; returns once S has landed (groups complete in order), P V may still run.
    auto issue_s_with_pv = [&](int pv_stage, uint32_t pv_phase) {
      mbar_wait(&k_full[stage], phase);
      mbar_wait(&v_full[pv_stage], pv_phase);
      wait_turn();
      wgmma_fence();
      issue_qk(stage);
      issue_pv(pv_stage);
      pass_turn();
      wgmma_wait<1>();
    };
    // The P V issued with it has landed: free its V.
    auto pv_landed = [&](int pv_stage) {
      wgmma_wait<0>();
      fence_accumulators(o);
      release(&v_empty[pv_stage]);
    };
    // A tile's first block with nothing beside it: S alone, then softmax and P.
    auto start_alone = [&]() {
      begin_tile();
      mbar_wait(&k_full[stage], phase);
      wait_turn();
      wgmma_fence();
      issue_qk(stage);
      pass_turn();
      wgmma_wait<0>();
      block_scored(kForwardWalk ? tile.range.begin : tile.range.end - 1);  // the tile's first block
      zero_o();
      pack_p<Elem, BN>(s, pa);
    };
    int slot = next_work(first_slot);
    if (slot < end_slot) start_alone();
    while (slot < end_slot) {
      // Each further block overlaps its S = Q K^T and softmax with the previous block's
      // O += P V on the tensor cores; O is rescaled once that P V has landed.
      for (int n = kForwardWalk ? tile.range.begin + 1 : tile.range.end - 2;
           kForwardWalk ? n < tile.range.end : n >= tile.range.begin; n += kWalkStep) {
        const int prev_stage = stage;
        const uint32_t prev_phase = phase;
        advance();
        issue_s_with_pv(prev_stage, prev_phase);
        // P cannot go to pa yet (the P V in flight reads it): to p_next, moved once it landed.
        block_landed(n);
        prepare_scores(n);
        uint32_t p_next[BN / 16][4];
        float sum[2];
        const bool at_running_max =
            kFastProbabilities && softmax.at_running_max(s, p_next, sum);
        if (at_running_max)
          softmax.add_to_row_sums(sum);
        else
          softmax_with_max();
        pv_landed(prev_stage);
        if (at_running_max) {
#pragma unroll
          for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
            for (int e = 0; e < 4; ++e) pa[kk][e] = p_next[kk][e];
        } else {
          softmax.rescale_o(o);
          pack_p<Elem, BN>(s, pa);
        }
      }
      // The tile's last P V. With kCarry (and the launch's carry) it carries the next tile's
      // first S = Q K^T and softmax, so no GEMM of a tile boundary runs with nothing beside
      // it; the epilogue follows once P V has landed. Both consumers decide alike (the same
      // tiles, the same flag), so their ping-pong turns stay paired.
      const FinishedRows done = finished_rows(slot);
      const int last_stage = stage;
      const uint32_t last_phase = phase;
      advance();
      slot = next_work(slot + slot_stride);
      if (kCarry && hp.mainloop.carry && slot < end_slot) {
        begin_tile();
        issue_s_with_pv(last_stage, last_phase);
        block_scored(kForwardWalk ? tile.range.begin : tile.range.end - 1);
        pv_landed(last_stage);
        write_rows(done, false);
        zero_o();
        pack_p<Elem, BN>(s, pa);
      } else {
        mbar_wait(&v_full[last_stage], last_phase);
        wait_turn();
        wgmma_fence();
        issue_pv(last_stage);
        pass_turn();
        pv_landed(last_stage);
        write_rows(done, false);
        if (slot < end_slot) start_alone();
      }
    }
  }
  epilogue.finish();
  // The tail kernel runs beside the main one (launch_after_prior_grid) and shares no data with
  // it, but must not finish before it: whatever follows on the stream waits for the tail kernel
  // only, and reads the main tiles' output too.
  if constexpr (TailPass) wait_for_prior_grid();
#endif  // FS_HAS_WGMMA
}

}  // namespace sm90
}  // namespace flashsplit
