// The Hopper forward's tile walk: which tile (query tile, split, batch, head) each slot of a
// block's walk runs, and the key blocks it visits.
//
// A block walks the slots blockIdx.x, + gridDim.x, ... of a linear order of its launch's tiles
// (query tile fastest, then split, then batch * head): one tile per block, or, where tiles are
// short, of equal work or drawn from a counter, one block per SM walking them (persistent;
// hopper_persistent in core/hopper_tiles.h), so while the consumers finish one tile's last P V
// and epilogue the producer already loads the next tile's Q, K and V. Three walks:
//   - static rounds: slot k maps to a tile in snake order, or in rotated rounds (static_tile);
//   - the grouped causal order (core/tile_order.h), drawn from a counter where the launch is
//     persistent: the producer draws each tile and passes it to the consumers through the tile
//     ring in shared memory (TileHandoff);
//   - the tail kernel's pieces (core/tail_split.h): its block j takes slots main + j and
//     main + sm_count + j, one piece of key blocks of a tail tile each (piece_tile).
#pragma once

#include "core/key_blocks.h"
#include "core/tail_split.h"
#include "core/tile_order.h"
#include "kernels/sequence.cuh"
#include "kernels/sm90/fwd_params.cuh"
#include "kernels/sm90/hopper_primitives.cuh"
#include "kernels/sm90/kernel_traits.cuh"
#include "kernels/sm90/pipeline.cuh"

namespace flashsplit {
namespace sm90 {

// One tile of the walk, or, in the tail kernel, one piece of a tail tile (its key blocks; which
// part of the tile it is follows from the slot: TileScheduler::piece).
struct WorkTile {
  // First query row; the tile's rows are [m0, m0 + block_m) below its sequence's sq (kPackHeads:
  // [m0, m0 + tile_rows) below its sq x group)
  int m0;
  // batch: the sequence; head: the tile's query head (kPackHeads: the group's first)
  int split, batch, head, kv_head;
  KeyBlockRange range;  // the key blocks it walks; empty where there are none
  // Its sequence's lengths and rows (kSequences only; the dense kernels read the call's).
  Sequence seq;
  __device__ __forceinline__ bool has_work() const { return range.begin < range.end; }
};

// The rows a tile packing a group of by_group.divisor() heads fills: as many whole queries of
// the group as its block_m rows hold (hopper_packed_tile_rows, without a division).
__device__ __forceinline__ int packed_tile_rows(const FastDivmod& by_group, int block_m) {
  return by_group.div(block_m) * by_group.divisor();
}

// The tail kernel's slot: piece `half` of chunk k of the last round (empty where there is
// none). Worked out again from the slot where needed rather than kept in registers across the
// tile: the 192-row d=128 consumers have none to spare.
__device__ __forceinline__ TailPiece tail_piece_of_slot(const TailSplit& tail, int slot) {
  const int k = slot - tail.main_tiles, half = k >= tail.sm_count;
  return tail_piece(tail, k - half * tail.sm_count, half);
}

template <class Kt>
struct TileScheduler {
  static constexpr int kBlockM = Kt::kBlockM, kBlockN = Kt::kBlockN;
  static constexpr bool kCausal = Kt::kCausal;

  const SchedulerParams& sp;
  const AttnFwdParams& p;
  int m_blocks;     // query tiles per head
  int total_tiles;  // of the launch's order (main and tail)
  // The walk's slots: one per tile, up to the tail's main tiles where a tail split follows. The
  // tail kernel's slots come after them, two per SM (the pieces of its chunk of the last
  // round).
  int first_slot, end_slot, slot_stride;
  // Persistent grouped walks draw their tiles from a counter (TileHandoff).
  bool dynamic;

  __device__ __forceinline__ explicit TileScheduler(const HopperFwdParams& hp)
      : sp(hp.scheduler), p(hp.p) {
    const TailSplit& tail = sp.tail;
    // Query tiles per head (kPackHeads: per group): of the longest sequence (a dense call's sq),
    // for every sequence. (The packed tiles' rows in branches of their own here and in locate:
    // written as one expression for both, ptxas spilled the causal 192- and 256-row kernels.)
    if constexpr (Kt::kPackHeads) {
      m_blocks = (rows_of(p.max_seqlen_q) + tile_rows() - 1) / tile_rows();
    } else {
      m_blocks = (p.max_seqlen_q + kBlockM - 1) / kBlockM;
    }
    total_tiles = m_blocks * p.num_splits * p.seqs * (Kt::kPackHeads ? p.hk : p.h);
    first_slot = Kt::kTailPass ? tail.main_tiles + blockIdx.x : blockIdx.x;
    end_slot = Kt::kTailPass ? tail.main_tiles + 2 * tail.sm_count
                             : (tail.active() ? tail.main_tiles : total_tiles);
    slot_stride = Kt::kTailPass ? tail.sm_count : gridDim.x;
    dynamic = Kt::kDrawsTiles && sp.tile_counter != nullptr;
  }

  // Tile `tile` of the launch's order (the grouped order in kGroupedOrder, else head-major):
  // the dynamic walk's tiles, `tile` as drawn.
  __device__ __forceinline__ WorkTile tile_of(int tile) const {
    WorkTile w;
    locate(tile, w);
    return w;
  }
  // The tile of static walk slot `slot` (blockIdx.x + i * gridDim.x), in snake order: odd
  // rounds of gridDim.x slots run backwards, so a block that drew a long (causal) tile in one
  // round draws a short one in the next, and every block's total work evens out. The rounds
  // stay contiguous windows of the tile order, so tiles running together still share K/V in L2.
  __device__ __forceinline__ WorkTile static_tile(int slot) const {
    WorkTile w;
    locate_static(slot, w);
    return w;
  }
  // The tail kernel's slot: the tail tile of its piece with the piece's key blocks (no key
  // blocks, and no tile, where the piece is empty).
  __device__ __forceinline__ WorkTile piece_tile(int slot) const {
    WorkTile w{};
    locate_piece(slot, w);
    return w;
  }
  // A slot of the producer's static walk: of the rounds, or the tail kernel's piece.
  __device__ __forceinline__ WorkTile static_work(int slot) const {
    if constexpr (Kt::kTailPass) {
      return piece_tile(slot);
    } else {
      return static_tile(slot);
    }
  }
  __device__ __forceinline__ TailPiece piece(int slot) const {
    return tail_piece_of_slot(sp.tail, slot);
  }

  // ---- Where tile t's sequence lives: its queries and keys, and the batch and first row of q
  // and out that hold them (the producer reads its k/v rows from t.seq). Dense kernels read the
  // call's, sequence = batch.
  __device__ __forceinline__ int sq_of(const WorkTile& t) const {
    return Kt::kSequences ? t.seq.sq : p.sq;
  }
  __device__ __forceinline__ int sk_of(const WorkTile& t) const {
    return Kt::kSequences ? t.seq.sk : p.sk;
  }
  __device__ __forceinline__ int q_batch_of(const WorkTile& t) const {
    return Kt::kSequences ? t.seq.batch : t.batch;
  }
  __device__ __forceinline__ int q_row_of(const WorkTile& t) const {
    return Kt::kSequences ? t.seq.row0 : 0;
  }
  // The tile rows of a sequence of sq queries: one per query, or, where tiles pack a group's
  // heads, one per query and head of the group; and the query of row `row`.
  __device__ __forceinline__ int rows_of(int sq) const {
    return Kt::kPackHeads ? sq * sp.by_group.divisor() : sq;
  }
  __device__ __forceinline__ int query_of(int row) const {
    return Kt::kPackHeads ? sp.by_group.div(row) : row;
  }
  // The rows a tile fills: all of them, or, packing a group's heads, as many whole queries of
  // the group as they hold (hopper_packed_tile_rows); the others are padding.
  __device__ __forceinline__ int tile_rows() const {
    if constexpr (Kt::kPackHeads) {
      return packed_tile_rows(sp.by_group, kBlockM);
    } else {
      return kBlockM;
    }
  }

  // The dynamic walk's next tile index, drawn by the producer once the current tile's loads are
  // issued (the first gridDim.x tiles are the blocks' first, without a draw).
  __device__ __forceinline__ int draw_from_counter() const {
    return gridDim.x + atomicAdd(sp.tile_counter, 1);
  }

 private:
  // The values above are located into a tile field by field, and the static walk locates its
  // tile in each of its branches: so the compiler sees each field as the walk's own variable
  // (located once from a merged index, or returned whole from each branch, ptxas laid the
  // 192-row kernels out differently and some of their loops grew).
  __device__ __forceinline__ void locate(int tile, WorkTile& w) const {
    int rest, x;
    if constexpr (Kt::kGroupedOrder) {
      const GroupedTile t = grouped_tile(tile, sp.groups);
      rest = t.unit;
      x = t.x;
    } else {
      rest = sp.by_m_blocks.div(tile);
      x = sp.by_m_blocks.mod(tile, rest);
    }
    // Causal tiles late in the sequence do the most work: start them first.
    const int m_block = kCausal ? m_blocks - 1 - x : x;
    const int bh = sp.by_splits.div(rest);
    w.split = sp.by_splits.mod(rest, bh);
    w.batch = sp.by_heads.div(bh);
    w.head = sp.by_heads.mod(bh, w.batch);
    w.kv_head = sp.by_group.div(w.head);
    if constexpr (Kt::kPackHeads) {  // by_heads: the k/v heads, each unit a group's heads
      w.kv_head = w.head;
      w.head *= sp.by_group.divisor();
    }
    if constexpr (Kt::kPackHeads) {
      w.m0 = m_block * tile_rows();
    } else {
      w.m0 = m_block * kBlockM;
    }
    if constexpr (Kt::kSequences) w.seq = sequence_of<Kt::kLayout>(p, w.batch);
    const int sq = sq_of(w), sk = sk_of(w);
    // A query tile past its sequence's end has no rows, and so no key blocks to walk.
    int n_visible;
    if constexpr (Kt::kPackHeads) {
      const int rows = rows_of(sq);
      const int last_query = query_of(min(w.m0 + tile_rows(), rows) - 1);
      n_visible =
          w.m0 >= rows ? 0 : visible_key_blocks(last_query + 1, sq, sk, kBlockN, kCausal);
    } else {
      const int last_query = min(w.m0 + kBlockM - 1, sq - 1);
      n_visible = Kt::kSequences && w.m0 >= sq
                      ? 0
                      : visible_key_blocks(last_query + 1, sq, sk, kBlockN, kCausal);
    }
    w.range = Kt::kSplit ? split_key_blocks(n_visible, p.num_splits, w.split)
                         : KeyBlockRange{0, n_visible};
  }

  __device__ __forceinline__ void locate_static(int slot, WorkTile& w) const {
    const int round = sp.by_grid.div(slot), within = sp.by_grid.mod(slot, round);
    // Rotated rounds: block j takes the round's tile (j + round) mod its tiles, so the short
    // last query tiles of heads spread over every block (a full round rotates over the grid,
    // the last one over its own tiles, which the blocks below their count run).
    if constexpr (!kCausal && kBlockM == kHopperTallRows) {
      if (sp.rotate_rounds) {
        const int first = round * gridDim.x;
        int pos;
        if (first + static_cast<int>(gridDim.x) <= end_slot) {
          pos = within + sp.by_grid.mod(round, sp.by_grid.div(round));
          if (pos >= static_cast<int>(gridDim.x)) pos -= gridDim.x;
        } else {
          pos = within + sp.last_round_shift;
          if (pos >= sp.last_round_tiles) pos -= sp.last_round_tiles;
        }
        locate(first + pos, w);
        return;
      }
    }
    // Causal ping-pong tiles: a part-full last round after a forward one runs backwards over
    // its own tiles too, so its short tiles go to the blocks whose previous round was long
    // (running it forwards, at 512 rows the blocks that had drawn the most key blocks also drew
    // the last round's longest tiles, 43 blocks' work against 38.8 on average; measured +3% at
    // d=128 512 and 1024 rows). Without the mask the tiles are alike, and the last round keeps
    // its order; causal tiles of consumers side by side are drawn from a counter where
    // persistent (with the change, ptxas spilled the split 192-row d=128 kernel).
    if constexpr (kCausal && Kt::kOverlap) {
      const int first = round * gridDim.x;
      const int in_round = min(static_cast<int>(gridDim.x), total_tiles - first);
      locate((round & 1) ? first + in_round - 1 - within : slot, w);
      return;
    }
    const bool backwards = (round & 1) && (round + 1) * gridDim.x <= total_tiles;
    locate(backwards ? round * gridDim.x + gridDim.x - 1 - within : slot, w);
  }

  __device__ __forceinline__ void locate_piece(int slot, WorkTile& w) const {
    const TailPiece t = piece(slot);
    if (t.empty()) {
      w.range = KeyBlockRange{0, 0};
      return;
    }
    locate(sp.tail.main_tiles + t.tile, w);
    w.range = KeyBlockRange{t.kb_begin, t.kb_end};
  }
};

// The dynamic walk's hand-off of drawn tiles from the producer to the consumers: a ring of
// Slots slots in shared memory, each with a full and an empty mbarrier; end_slot marks the end
// of the walk. Each side counts the tiles it has passed.
template <int Slots>
struct TileHandoff {
  uint64_t* full;
  uint64_t* empty;
  int* slots;
  uint32_t count = 0;

  // Producer: waits for the slot's previous tile to be read, then publishes `tile`.
  __device__ __forceinline__ void publish(int tile) {
    const int r = ring_slot<Slots>(count);
    mbar_wait(&empty[r], ring_parity<Slots>(count) ^ 1);
    slots[r] = tile;
    mbar_arrive(&full[r]);
    ++count;
  }

  // Consumer warp: the next tile published, read by lane 0 and passed on by a shuffle (the
  // compiler then knows every lane holds the same tile); every warp frees the slot once it has
  // read it. Lane 0 both reads the slot and frees it, so the read precedes the release in its
  // own program order (read by every lane and ordered only through __syncwarp, racecheck
  // reported it as a potential WAR hazard with the producer's next write to the slot).
  __device__ __forceinline__ int receive(int lane) {
    const int r = ring_slot<Slots>(count);
    mbar_wait(&full[r], ring_parity<Slots>(count));
    const int tile = __shfl_sync(0xffffffffu, lane == 0 ? slots[r] : 0, 0);
    ++count;
    warp_release(&empty[r], lane);
    return tile;
  }
};

}  // namespace sm90
}  // namespace flashsplit
