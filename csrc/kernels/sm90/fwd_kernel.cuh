// Hopper forward (sm_90a): TMA loads, wgmma, warp specialisation.
//
// A thread block runs one producer warpgroup and two, three or four consumer warpgroups of 64
// query rows (a tile of 128, 192 or 256 rows of one query head, or of a GQA group's heads in
// multi-token decode; 128-key blocks, 64 with four consumers), and works through tiles =
// (query tile, split, batch * head, or batch * k/v head where they pack a group): one tile per
// block, or, where tiles are short or of equal work, one block per SM walking them (persistent;
// see hopper_persistent in core/hopper_tiles.h). The parts, as in FlashAttention-3's Hopper
// forward:
//   tile_scheduler.cuh   which tile each slot of a block's walk runs (static rounds, the
//                        grouped causal order drawn from a counter, the tail kernel's pieces)
//   mainloop_load.cuh    the producer: TMA loads of Q, then K and V per key block into a ring
//   mainloop_mma.cuh     the consumers' MMA loops (side by side, or overlapped in ping-pong)
//   mask.cuh, softmax.cuh  the scores as the softmax reads them; the online softmax
//   epilogue.cuh         direct (stmatrix + TMA store), fp32 partial, the tail pieces' fold
//   kernel_traits.cuh    the tile shapes and every compile-time choice made from them
//   shared_storage.cuh, pipeline.cuh, named_barriers.h, fwd_params.cuh  shared memory, the
//                        rings between producer and consumers, barrier ids, the parameters
//
// Sequences of their own lengths (varlen, kv caches, contiguous or paged) run instances of their
// own, whose tiles read their sequence's lengths and rows (kernels/sequence.cuh); multi-token
// decode of a GQA group runs their form whose tiles pack the group's heads into rows.
//
// An unsplit call without a causal mask whose last round of tiles would leave SMs idle runs
// that round as a second, dependent launch of this kernel (TailPass): its tiles are cut into
// pieces of key blocks spread over every SM (core/tail_split.h), and the last piece of each
// tile to finish folds the pieces' fp32 partials and writes the output.
#pragma once

#include "kernels/sm90/fwd_params.cuh"
#include "kernels/sm90/kernel_traits.cuh"
#include "kernels/sm90/mainloop_load.cuh"
#include "kernels/sm90/mainloop_mma.cuh"
#include "kernels/sm90/pipeline.cuh"
#include "kernels/sm90/shared_storage.cuh"
#include "kernels/sm90/tile_scheduler.cuh"

namespace flashsplit {
namespace sm90 {

// TailPass: the kernel that runs a tail split's pieces (core/tail_split.h), launched behind the
// one that runs the main tiles; a kernel of its own, so the fold's registers cannot change how
// ptxas compiles the main tiles (one kernel with both passes ran 8-15% slower on 192-row tiles,
// d=128 with its wgmma serialized for registers).
// Layout: the instances for sequences of their own lengths, over contiguous or paged k/v
// (FwdKernelTraits::kSequences, kPaged); PackHeads: their form whose tiles pack a GQA group's
// heads (FwdKernelTraits::kPackHeads).
template <class Elem, int D, bool Causal, bool Split, class Tiles, bool TailPass = false,
          KvLayout Layout = KvLayout::kDense, bool PackHeads = false>
__global__ void __launch_bounds__(Tiles::kThreads, 1)
    hopper_fwd_kernel(const __grid_constant__ HopperFwdParams hp) {
#if FS_HAS_WGMMA
  using Kt = FwdKernelTraits<Elem, D, Causal, Split, Tiles, TailPass, Layout, PackHeads>;
  allow_dependent_launch();  // the split path's combine may now be scheduled

  extern __shared__ unsigned char smem_raw[];
  const SharedView<Tiles> smem(smem_raw);
  // Read through a shuffle, the compiler knows the warpgroup is the same in every lane of a
  // warp: what derives from it (a consumer's Q slice and turn barriers) goes to uniform
  // registers, and the per-block loops of the consumers get shorter.
  const int warpgroup = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  const int lane = threadIdx.x % 32;
  const TileScheduler<Kt> scheduler(hp);
  WorkTile tile{};  // the tile the consumers compute
  if constexpr (Kt::kPackHeads) clear_q_padding<Kt>(smem, scheduler.tile_rows());
  init_barriers<Kt>(smem);

  if (warpgroup == 0) {
    run_producer<Kt>(hp, smem, scheduler);  // the TMA loads
    return;
  }
  run_consumers<Kt>(hp, smem, scheduler, tile, warpgroup, lane);  // MMA, softmax, epilogue

  // The tail kernel runs beside the main one (launch_after_prior_grid) and shares no data with
  // it, but must not finish before it: whatever follows on the stream waits for the tail kernel
  // only, and reads the main tiles' output too.
  if constexpr (TailPass) wait_for_prior_grid();
#endif  // FS_HAS_WGMMA
}

}  // namespace sm90
}  // namespace flashsplit
