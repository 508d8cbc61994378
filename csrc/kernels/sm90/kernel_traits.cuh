// The Hopper forward's compile-time shape (HopperTiles: rows, keys per block, consumers, ring
// stages, register budgets); its shared memory is SharedStorage (shared_storage.cuh).
#pragma once

#include "core/hopper_tiles.h"

namespace flashsplit {
namespace sm90 {

// The shipped shapes come from hopper_tile_config; the other parameters exist so benchmarks of
// alternatives (rows per block, overlap on or off) need no edit here.
template <int D, int BlockM, bool Overlap, bool PingPong, int QStages, bool Carry,
          int BlockN = kHopperBlockN>
struct HopperTiles {
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  // Overlap a block's S = Q K^T and softmax with the previous block's P V (measured: helps with
  // two consumers, hurts with three and with four).
  static constexpr bool kOverlap = Overlap;
  // Two consumer warpgroups take turns issuing their GEMMs (named barriers), so one's softmax
  // runs while the other's GEMMs use the tensor cores.
  static constexpr bool kPingPong = PingPong;
  static_assert(!PingPong || (Overlap && BlockM == 128),
                "ping-pong alternates two overlapped consumers");
  // A tile's last P V carries the next tile's first S = Q K^T and softmax (overlap only).
  static constexpr bool kCarry = Carry;
  static_assert(!Carry || Overlap, "carrying S across tiles extends the overlapped loop");
  // The direct epilogue's row scale with the hardware reciprocal and log2 (finished_row_scale):
  // measured +2-4% on 128-row ping-pong tiles at s <= 1024 and +2% on the 256-row tiles at 512
  // and 1024 rows, but 0.4-3% slower with the 192-row tiles, whose code ptxas then lays out
  // differently.
  static constexpr bool kApproxRowScale = PingPong || BlockM == 256;
  static constexpr int kConsumers = kBlockM / 64;           // warpgroups of 64 rows
  static constexpr int kThreads = 128 * (1 + kConsumers);  // + the producer warpgroup
  // The K/V ring holds as many keys with 64-key blocks as with 128-key ones.
  static constexpr int kStages = (D == 64 ? 3 : 2) * 128 / BlockN;
  static constexpr int kSlabs = D / 64;
  static constexpr int kSlabBytesQ = kBlockM * 128;
  static constexpr int kSlabBytesKV = kBlockN * 128;
  static constexpr int kTileBytesQ = kSlabs * kSlabBytesQ;
  static constexpr int kTileBytesKV = kSlabs * kSlabBytesKV;
  // Output staging (direct epilogue): per consumer, D/64 slabs of 64 rows x 128 B.
  static constexpr int kSlabBytesO = 64 * 128;
  // Q buffers: with two, the producer loads the next tile's Q (and then its K, V) while this
  // tile's Q is still in use, instead of waiting for its last S = Q K^T (measured: +2-3% with
  // 192-row tiles; with 128-row ping-pong tiles, whose last P V carries the next tile's first
  // S, one buffer makes that S wait for Q and costs up to 8% at d=64).
  static constexpr int kQStages = QStages;
  // Tiles handed out through the counter (SchedulerParams::tile_counter) pass from the producer
  // to the consumers through a ring of this many slots (the producer runs up to kQStages tiles
  // ahead, more over tiles without key blocks).
  static constexpr int kTileRing = 4;
  // setmaxnreg budgets: 128 * kProducerRegs + 128 * kConsumers * kConsumerRegs within the
  // block's registers (four consumers: 640 threads of 96 at launch, so 112 each; the producer's
  // 32 fill the rest exactly, and its dynamic causal walk needs them: with 24 it spilled).
  static constexpr int kProducerRegs = kConsumers == 2 ? 40 : 32;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 232 : kConsumers == 3 ? 160 : 112;
  static_assert(kBlockN == 128 || kBlockN == 64, "wgmma_qk has 128- and 64-key blocks");
  static_assert(kBlockM % 64 == 0 && kConsumers >= 1, "consumers own 64 rows each");
  // setmaxnreg moves registers within the block's launch allocation (the launch bound's count,
  // a multiple of 8, per thread); asking for more than it holds waits forever.
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= kThreads * kLaunchRegs,
                "register budget of one block");
};

}  // namespace sm90
}  // namespace flashsplit
