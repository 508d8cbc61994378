// The Hopper forward's rings of shared-memory buffers between the producer and the consumers.
// Every buffer has a "full" mbarrier (the producer's TMA load completes on it) and an "empty"
// one (each consumer warp arrives once it has read the buffer); the producer waits on "empty"
// before refilling. A fresh barrier counts its (virtual) previous phase, parity 1, as
// completed, so the producer waits on parity phase ^ 1 and the consumers on phase.
#pragma once

#include <cstdint>

#include "kernels/sm90/hopper_primitives.cuh"
#include "kernels/sm90/shared_storage.cuh"

namespace flashsplit {
namespace sm90 {

// A position in the K/V ring of Stages stages: the stage, and the parity of its current use.
// The producer and the consumers each keep one and advance it once per key block. (The phase
// is declared first: in that order ptxas compiled the producer's loads as it did when the two
// were separate variables.)
template <int Stages>
struct RingState {
  uint32_t phase = 0;
  int stage = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == Stages) stage = 0, phase ^= 1;
  }
};

// Rings indexed by a count of uses (the Q buffers, by tiles with work; the tile ring, by tiles
// drawn): the slot of the count-th use, and the parity of that use.
template <int Slots>
__device__ __forceinline__ int ring_slot(uint32_t count) {
  return count % Slots;
}
template <int Slots>
__device__ __forceinline__ uint32_t ring_parity(uint32_t count) {
  return (count / Slots) & 1;
}

// A consumer warp frees a buffer once its reads are complete: one arrival per warp.
__device__ __forceinline__ void warp_release(uint64_t* empty, int lane) {
  __syncwarp();
  if (lane == 0) mbar_arrive(empty);
}

// Tiles packing a group's heads whose group does not divide their rows: the Q boxes fill only
// tile_rows of them, so the rows after those are zeroed once, before any load (the consumers'
// GEMMs read them as padding rows; stale bits there could be NaN, harmless to the other rows
// but not to a clean sanitizer run). Ordered before the TMA loads and wgmma reads (the async
// proxy) by the fence and init_barriers' __syncthreads.
template <class Kt>
__device__ __forceinline__ void clear_q_padding(const SharedView<typename Kt::Tiles>& smem,
                                                int tile_rows) {
  using Tiles = typename Kt::Tiles;
  if (tile_rows == Tiles::kBlockM) return;
  constexpr int kChunksPerRow = Tiles::kSlabRowBytes / 16;
  const int chunks = (Tiles::kBlockM - tile_rows) * kChunksPerRow;
  for (int i = threadIdx.x; i < Tiles::kQStages * Tiles::kSlabs * chunks; i += blockDim.x) {
    const int buffer = i / (Tiles::kSlabs * chunks), rest = i % (Tiles::kSlabs * chunks);
    const int slab = rest / chunks, chunk = rest % chunks;
    unsigned char* const row = smem.q() + buffer * Tiles::kTileBytesQ +
                               slab * Tiles::kSlabBytesQ + tile_rows * Tiles::kSlabRowBytes;
    *reinterpret_cast<uint4*>(row + chunk * 16) = make_uint4(0, 0, 0, 0);
  }
  fence_proxy_async_shared();
}

// Thread 0 initialises every mbarrier before any role touches one: "full" barriers wait for the
// producer's one arrival (and its bytes; K and V copied a row at a time, each producer thread's
// arrival once its copies have landed), "empty" ones for each consumer warp's (every consumer
// warp releases a buffer once it has read it).
template <class Kt>
__device__ __forceinline__ void init_barriers(const SharedView<typename Kt::Tiles>& smem) {
  using Tiles = typename Kt::Tiles;
  if (threadIdx.x == 0) {
    for (int b = 0; b < Tiles::kQStages; ++b) {
      mbar_init(&smem.q_full()[b], 1);
      mbar_init(&smem.q_empty()[b], 4 * Tiles::kConsumers);
    }
    if constexpr (Kt::kDrawsTiles) {
      for (int r = 0; r < Tiles::kTileRing; ++r) {
        mbar_init(&smem.tile_full()[r], 1);
        mbar_init(&smem.tile_empty()[r], 4 * Tiles::kConsumers);
      }
    }
    constexpr int kKvArrivals = Kt::kPageRows ? Kt::kRowCopiers : 1;
    if constexpr (Kt::kRowTable) {
      for (int s = 0; s < Tiles::kStages; ++s) mbar_init(&smem.rows_full()[s], 32);
    }
    for (int s = 0; s < Tiles::kStages; ++s) {
      mbar_init(&smem.k_full()[s], kKvArrivals);
      mbar_init(&smem.v_full()[s], kKvArrivals);
      mbar_init(&smem.k_empty()[s], 4 * Tiles::kConsumers);
      mbar_init(&smem.v_empty()[s], 4 * Tiles::kConsumers);
    }
    fence_barrier_init();
  }
  __syncthreads();
}

}  // namespace sm90
}  // namespace flashsplit
