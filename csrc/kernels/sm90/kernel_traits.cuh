// The Hopper forward's compile-time shape (HopperTiles: rows, keys per block, consumers, ring
// stages, register budgets; its shared memory is SharedStorage, shared_storage.cuh) and the
// choices one instantiation makes from it with its element type, head dim, mask, split and
// pass (FwdKernelTraits).
#pragma once

#include "core/hopper_tiles.h"
#include "kernels/sequence.cuh"

namespace flashsplit {
namespace sm90 {

// The shipped shapes come from hopper_tile_config; the other parameters exist so benchmarks of
// alternatives (rows per block, overlap on or off) need no edit here.
template <int D, int BlockM, bool Overlap, bool PingPong, int QStages, bool Carry,
          int BlockN = kHopperBlockN, int DV = D, bool RunningMax = false, bool RowTable = false,
          bool Drawn = false>
struct HopperTiles {
  static constexpr int kHeadDimV = DV;  // v's and O's columns (d=192 with v of 128: 128)
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
  // Causal ping-pong tiles over long keys: probabilities at the running max, as without the
  // mask (hopper_causal_running_max; FwdKernelTraits::kFastProbabilities).
  static constexpr bool kRunningMax = RunningMax;
  static_assert(!RunningMax || PingPong, "the ping-pong tiles' instance for long causal calls");
  // Of those, and of the d=192 and d=256 ping-pong tiles (which take the running max with the
  // mask already), the instances whose launches draw their tiles from a counter (LaunchPlan::
  // tile_counter). Chunks walk the static rounds on an instance without the draw: compiled in,
  // it cost their walk 0.7-1.3% (H200, three chunk shapes against FlashAttention-3).
  static constexpr bool kDrawn = Drawn;
  static_assert(!Drawn || RunningMax || (D > 128 && PingPong),
                "the causal ping-pong tiles drawn from a counter: at the running max, or "
                "from d=192");
  // The 256-row tiles' instance over pages copied a row at a time: its shared memory holds the
  // row table (SharedStorage::row_table; FwdKernelTraits::kRowTable), the others' does not.
  static constexpr bool kRowTable = RowTable;
  static_assert(!RowTable || BlockM == kHopperWideRows, "the row table of the 256-row tiles");
  static_assert(!Carry || Overlap, "carrying S across tiles extends the overlapped loop");
  // The direct epilogue's row scale with the hardware reciprocal and log2 (finished_row_scale):
  // measured +2-4% on 128-row ping-pong tiles at s <= 1024 and +2% on the 256-row tiles at 512
  // and 1024 rows, but 0.4-3% slower with the 192-row tiles, whose code ptxas then lays out
  // differently.
  static constexpr bool kApproxRowScale = PingPong || BlockM == 256;
  static constexpr int kConsumers = kBlockM / 64;           // warpgroups of 64 rows
  static constexpr int kThreads = 128 * (1 + kConsumers);  // + the producer warpgroup
  // The K/V ring holds as many keys with 64-key blocks as with 128-key ones (three stages of
  // the 144-key blocks at d=96); from d=192 two stages fit beside Q.
  static constexpr int kStages =
      D <= 128 ? (D <= 96 ? 3 : 2) * 128 / (BlockN < 128 ? BlockN : 128) : 2;
  // Tiles are slabs of kSlabCols columns, one TMA box each: 64 (128-byte rows, the 128-byte
  // swizzle) where the head dim is whole such slabs, else 32 (d=96: 64-byte rows and swizzle).
  static constexpr int kSlabCols = D % 64 == 0 ? 64 : 32;
  static constexpr int kSlabRowBytes = kSlabCols * 2;
  static constexpr int kSlabs = D / kSlabCols;
  static constexpr int kSlabBytesQ = kBlockM * kSlabRowBytes;
  static constexpr int kSlabBytesKV = kBlockN * kSlabRowBytes;
  static constexpr int kTileBytesQ = kSlabs * kSlabBytesQ;
  static constexpr int kTileBytesKV = kSlabs * kSlabBytesKV;
  static constexpr int kSlabsV = DV / kSlabCols;
  static constexpr int kTileBytesV = kSlabsV * kSlabBytesKV;
  // Output staging (direct epilogue): per consumer, D/64 slabs of 64 rows x 128 B. From d=192
  // the shared memory holds no staging beside Q and the ring, and d=96 is not whole slabs: the
  // rows are stored from registers (FwdEpilogue::write_rows_unstaged).
  static constexpr int kSlabBytesO = 64 * 128;
  static constexpr bool kStagedOutput = D <= 128 && DV == D && kSlabCols == 64;
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
  static_assert(kBlockN == 144 || kBlockN == 128 || kBlockN == 112 || kBlockN == 80 ||
                    kBlockN == 64,
                "wgmma_qk has 144-, 128-, 112-, 80- and 64-key blocks");
  static_assert(kBlockM % 64 == 0 && kConsumers >= 1, "consumers own 64 rows each");
  // setmaxnreg moves registers within the block's launch allocation (the launch bound's count,
  // a multiple of 8, per thread); asking for more than it holds waits forever.
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= kThreads * kLaunchRegs,
                "register budget of one block");
};

// One instantiation of hopper_fwd_kernel: its tiles and every compile-time choice the parts
// (tile scheduler, mainloop, softmax, mask, epilogue) make from them.
//
// TailPass: the kernel that runs a tail split's pieces (core/tail_split.h), launched behind the
// one that runs the main tiles; a kernel of its own, so the fold's registers cannot change how
// ptxas compiles the main tiles (one kernel with both passes ran 8-15% slower on 192-row tiles,
// d=128 with its wgmma serialized for registers).
// Layout: how the tiles find their sequences' keys (kernels/sequence.cuh). kSequences: the calls
// whose sequences have lengths of their own (varlen, contiguous kv cache): each tile reads its
// sequence's lengths and rows, loads its last key block through a box that ends at the
// sequence's last key (key_box_start) and stores no row past its sequence's last. kPaged: the
// same over a paged cache, each key block loaded as boxes of a page's rows (at most a block's),
// each read from its page through the block table (FwdProducer::load_paged_key_block).
// kPagedRows: pages too small for boxes, whose key blocks the producer warpgroup copies a row at
// a time (FwdProducer::copy_page_rows; on the 256-row tiles, whose producer keeps its 32
// registers, one warp locates the rows and three copy them: kRowTable). The dense instances are
// compiled without any of them.
// PackHeads: multi-token decode of a GQA group (core/hopper_tiles.h, hopper_packs_heads): a
// tile's rows pack the group's query heads (row r: query r / group, head r % group), its Q is
// one 5-D box (make_group_tile_map), and the mask and the epilogue place each row by its query
// and head. Sequence instances of the 128-row tiles only.
template <class Elem_, int D, bool Causal, bool Split, class Tiles_, bool TailPass,
          KvLayout Layout = KvLayout::kDense, bool PackHeads = false>
struct FwdKernelTraits {
  static_assert(!TailPass || (!Causal && !Split), "tail splits are for unsplit unmasked calls");
  static constexpr KvLayout kLayout = Layout;
  static constexpr bool kSequences = Layout != KvLayout::kDense;
  static constexpr bool kPaged = reads_pages(Layout);
  static constexpr bool kPageRows = Layout == KvLayout::kPagedRows;
  static_assert(!kSequences || !TailPass, "sequences run without a tail split");
  static_assert(!kPaged ||
                    (Tiles_::kBlockM == kHopperBaseRows && Tiles_::kBlockN == kHopperBlockN) ||
                    (Tiles_::kBlockM == kHopperWideRows && !Split),
                "paged k/v runs the 128-row tiles over 128-key blocks and the unsplit 256-row "
                "ones");
  // Pages copied a row at a time on the 256-row tiles: warp 0 of the producer warpgroup walks
  // the tiles and locates each key block's rows (where in the pages each lives) into the
  // shared memory's row table, warps 1 to 3 copy them (FwdProducer::copy_located_rows). Their
  // consumers hold 112 registers (with 104 ptxas serialized their wgmma), which leaves the
  // producer 32: too few for the walk beside the copies (it spilled), enough for either.
  static constexpr bool kRowTable = kPageRows && Tiles_::kBlockM == kHopperWideRows;
  static_assert(kRowTable == Tiles_::kRowTable, "the row-table tiles copy pages a row at a time");
  static_assert(!PackHeads || (kSequences && Tiles_::kBlockM == kHopperBaseRows),
                "packed heads run the 128-row sequence instances");
  using Elem = Elem_;
  using Tiles = Tiles_;
  static constexpr int kHeadDim = D;
  static constexpr int kHeadDimV = Tiles::kHeadDimV;
  static constexpr bool kCausal = Causal;
  static constexpr bool kSplit = Split;
  static constexpr bool kTailPass = TailPass;
  static constexpr bool kPackHeads = PackHeads;
  // The output staged in shared memory and stored with TMA (FwdEpilogue::write_direct).
  static constexpr bool kStagedOutput = Tiles::kStagedOutput;
  static constexpr int kBlockM = Tiles::kBlockM;
  static constexpr int kBlockN = Tiles::kBlockN;
  static constexpr int kStages = Tiles::kStages;
  static constexpr int kConsumers = Tiles::kConsumers;
  static constexpr bool kOverlap = Tiles::kOverlap;
  // setmaxnreg budgets (HopperTiles). A producer warpgroup whose every thread walks the tiles
  // and copies pages a row at a time (the 128-row tiles: kWarpgroupCopies) holds where its rows
  // live and their copies' addresses besides the walk: with the TMA producer's 40 registers it
  // spilled, at d=64 with the mask with 56 too; the consumers give up the difference (d=64
  // needs fewer). The row table's warps keep the TMA producer's budget.
  static constexpr bool kWarpgroupCopies = kPageRows && !kRowTable;
  static constexpr int kProducerRegs =
      !kWarpgroupCopies ? Tiles::kProducerRegs : D == 64 ? 72 : 56;
  static constexpr int kConsumerRegs =
      !kWarpgroupCopies ? Tiles::kConsumerRegs : D == 64 ? 208 : 224;
  // The threads whose copies a key block's K or V waits for (its full barrier's arrivals).
  static constexpr int kRowCopiers = kRowTable ? 96 : 128;
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <=
                    Tiles::kThreads * Tiles::kLaunchRegs,
                "register budget of one block");
  // Packing a group's heads, a consumer whose rows of a tile are all padding lets its key
  // blocks pass (FwdConsumer::padding). Not in the unmasked d=128 instances over pages copied a
  // row at a time: there the consumers' 224 registers do not hold the extra step (the fp16
  // split instance spilled).
  static constexpr bool kPassesPadding = PackHeads && !(kPageRows && D == 128 && !Causal);

  // The tail kernel's pieces are a few blocks each, so it does not carry S across them (with
  // carry, ptxas spilled the d=128 ping-pong tail kernel).
  static constexpr bool kCarry = Tiles::kCarry && !TailPass;
  // Causal tiles are located in the grouped order of core/tile_order.h: units (split, batch,
  // head) in groups, each group's query tiles longest first (one unit per group: head-major).
  // Launches of a block per tile hand them to the SMs in that order, as blocks free up.
  static constexpr bool kGroupedOrder = Causal && !TailPass;
  // Those of consumers side by side (192 and 256 rows) are drawn from a counter by a persistent
  // launch, at any length (measured +7-12% at 2048-4096 rows), and so are the long ping-pong
  // tiles at the running max of calls that are not chunks, in instances of their own
  // (HopperTiles::kDrawn) whose producer is one thread. The other persistent ping-pong kernels
  // keep the head-major static walk: there the counter measured even to 2.5% slower. The plan
  // decides whether a launch draws (LaunchPlan::tile_counter).
  static constexpr bool kDrawsTiles = kGroupedOrder && (!Tiles::kOverlap || Tiles::kDrawn);
  static_assert(!(Tiles::kDrawn && kWarpgroupCopies), "the copying warpgroup walks together");
  // The order a tile's key blocks are walked in: last first, so masking (the keys past sk, the
  // causal diagonal) is needed only early, except on causal ping-pong tiles from d=128, which
  // walk them first to last. Walking back from its own diagonal, each of a head's query tiles
  // running side by side asks for a different block of the head's keys and values; walking
  // forward they ask for the same block together. Measured +0.4-3% at d=128 (causal 512 and
  // 1024 rows, small grids, long keys), up to +8% at d=192 and 256, but 0.7-2% slower at d=64.
  static constexpr bool kForwardWalk = Causal && Tiles::kOverlap && D >= 128;
  static constexpr int kWalkStep = kForwardWalk ? 1 : -1;
  // On causal tiles whose consumers run side by side (192 and 256 rows), a later 64-row slice
  // sees more key blocks than an earlier one (up to one more per 64 rows on 192-row tiles, three
  // on 256-row tiles of 64 keys), so with slice = consumer the last consumer would have the most
  // work in every tile and the others would wait for it at the K/V ring. Rotating the slices
  // from tile to tile gives each consumer every slice in turn (every consumer counts the same
  // Q rounds, so a tile's slices stay a permutation of its consumers).
  static constexpr bool kRotate = Causal && !Tiles::kOverlap;
  // Probabilities at the running max (OnlineSoftmax::at_running_max): on the d=64 tiles side
  // by side, the unmasked ping-pong tiles and the masked ones from d=192 (measured 2-6% faster
  // with the mask from 2k keys, where blocks are 112 and 80 keys), and the masked ones up to
  // d=128 of long causal calls (Tiles::kRunningMax). On the 192-row d=128 tiles the scores
  // kept beside P and O spilled their 160 registers: there OnlineSoftmax::with_max
  // takes the probabilities at the running max in place, and where a warp's could pass the
  // bound even after OnlineSoftmax::move_base the warpgroup computes S again
  // (kRecomputeScores, the side-by-side loop). Only without the mask, where every block after a
  // consumer's first gives each row a max, and not in the split form (split calls at d=128 run
  // 128-row tiles) nor the tail kernel (both spilled).
  static constexpr bool kRecomputeScores = !Tiles::kOverlap && D == 128 && !Causal && !Split &&
                                           !TailPass;
  static constexpr bool kFastProbabilities =
      Tiles::kOverlap ? !Causal || D > 128 || Tiles::kRunningMax : D == 64 || kRecomputeScores;
  // Overlapped consumers take those probabilities into P itself, half before the wait for the
  // P V in flight and half after it, instead of into registers of their own moved to P after
  // the wait (OnlineSoftmax::at_running_max_landing): on the long causal tiles drawn from the
  // counter, where it measured 1.1-1.5% faster at d=128 (even at d=64); without the mask 1-2%
  // slower, and not faster on chunks.
  static constexpr bool kLandsInP = kFastProbabilities && Tiles::kDrawn;
};

// A consumer thread's place in the block: its consumer warpgroup (64 query rows each), its warp
// and lane, and its quad (lane / 4: the row, lane % 4: the column pair) in the wgmma layout.
struct ConsumerThread {
  int consumer;       // 0 .. consumers - 1 (warpgroup 0 is the producer)
  int lane;
  int warp_in_group;  // 0 .. 3, 16 rows each
  int quad_row, quad_col;
  int slice_row;      // this thread's first row within a 64-row slice of a tile

  __device__ __forceinline__ ConsumerThread(int warpgroup, int lane_)
      : consumer(warpgroup - 1),
        lane(lane_),
        warp_in_group((threadIdx.x / 32) % 4),
        quad_row(lane / 4),
        quad_col(lane % 4),
        slice_row(warp_in_group * 16 + quad_row) {}
};

}  // namespace sm90
}  // namespace flashsplit
