// The last round of an unsplit call, spread over every SM (a "stream-K" tail).
//
// A call of T equal tiles on P SMs runs R = T / P full rounds, then a round of L = T % P tiles
// in which P - L SMs have nothing to do: at bench_seqlen's 16k tokens 10.4 to 31.03 rounds, so
// the part-empty last round costs up to 3%. Here the last round's
// W = L * nb key blocks (nb per tile) are cut into C <= P contiguous chunks, one per SM: chunk j
// is the key-block units [j W / C, (j + 1) W / C) of the tail tiles taken in order, so an SM
// gets ceil(W / C) units or one fewer instead of nb or none. Since L < P a chunk holds at most
// nb units: the end of one tile and/or the start of the next, i.e. at most two pieces. A tile
// cut over several chunks has several pieces ("parts"); each writes its unnormalised partial
// (O, row max, row sum) and the last to finish folds all of them, in part order, and writes
// the output (kernels/sm90/epilogue.cuh).
//
// Only tiles of equal work (no causal mask) and unsplit calls (G = 1) take it. Header-only:
// the planner sizes the workspace with it and the kernel walks the same chunks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"
#include "core/hopper_tiles.h"

namespace flashsplit {

// The calls that may take a tail split: unsplit, without a causal mask, on any tiles but the
// wide ones (their 64-key blocks, kHopperWideBlockN, run without it). Measured on and off: d=96's
// 144-key blocks +0.8-1.1% at 8k keys, +1-2% at 16k, +2.2-3% at 32k; d=192's 112-key blocks
// +0.5-0.9% at 8k, +1.9-2% at 16k, +2.8-2.9% at 32k; d=256's 80-key blocks even at 8k,
// +1.6-1.9% at 16k, +1.9-3.7% at 32k (H200, alternated). The plan asks this
// (tail_split_for_run).
constexpr bool tail_split_applies(bool causal, bool split, int block_n) {
  return !causal && !split && block_n != kHopperWideBlockN;
}

// What a piece costs beyond its key blocks (a Q load, an epilogue, the partial's write, the
// arrival, the fold), in key blocks: measured against the tail run whole, 1024-16384 keys at
// d=64 and 128 (128-key blocks). The 112- and 80-key blocks of d=192 and 256, whose pieces load
// and write more per key, are charged twice that: at 6, d=192 calls of 4096 keys took the split
// and ran 0.6-1% slower with it.
constexpr int kTailOverheadBlocks = 6;
constexpr int tail_overhead_blocks(int block_n) {
  return block_n >= kHopperBlockN ? kTailOverheadBlocks : 2 * kTailOverheadBlocks;
}
// Chunks hold at least this many key blocks: fewer, shorter pieces where the tail is small.
constexpr int kTailMinChunkBlocks = 4;
// A tail split must shorten the call by at least this share (per mille) of its modelled time.
constexpr int kTailMinGainPerMille = 10;

struct TailSplit {
  int main_tiles = 0;  // R * P: tiles that run whole, before the tail
  int tail_tiles = 0;  // L; 0 = no tail split
  int key_blocks = 0;  // nb, the same for every tile
  int sm_count = 0;    // P: the kernel's walk has two tail slots per SM, one per piece
  int chunks = 0;      // min(P, W / kTailMinChunkBlocks), at least 1: one per SM or fewer
  int max_parts = 0;   // most pieces any tail tile is cut into

  FS_HOST_DEVICE bool active() const { return tail_tiles > 0; }
  FS_HOST_DEVICE long long work() const {
    return static_cast<long long>(tail_tiles) * key_blocks;
  }
  // First key-block unit of chunk j (j = chunks gives the end).
  FS_HOST_DEVICE long long chunk_begin(int j) const { return work() * j / chunks; }
  // The chunk holding unit u: the largest j with chunk_begin(j) <= u.
  FS_HOST_DEVICE int chunk_of(long long u) const {
    return static_cast<int>(((u + 1) * chunks - 1) / work());
  }
};

// One piece of a chunk: key blocks [kb_begin, kb_end) of tail tile `tile` (0 = the first tile
// after the main ones), which is cut into `parts` pieces, this one being number `part`.
struct TailPiece {
  int tile = 0, kb_begin = 0, kb_end = 0, part = 0, parts = 0;
  FS_HOST_DEVICE bool empty() const { return kb_begin >= kb_end; }
};

// Piece `half` (0 or 1) of chunk j (j < P); empty where the chunk has fewer pieces.
FS_HOST_DEVICE inline TailPiece tail_piece(const TailSplit& t, int j, int half) {
  TailPiece piece;
  if (j >= t.chunks) return piece;  // an SM without tail work (W < P)
  const long long begin = t.chunk_begin(j), end = t.chunk_begin(j + 1);
  if (begin >= end) return piece;
  const long long nb = t.key_blocks;
  long long tile = begin / nb;
  if (half == 1) {
    ++tile;
    if (tile * nb >= end) return piece;  // the chunk ends inside its first tile
  }
  const long long lo = begin > tile * nb ? begin : tile * nb;
  const long long hi = end < (tile + 1) * nb ? end : (tile + 1) * nb;
  const int first = t.chunk_of(tile * nb), last = t.chunk_of((tile + 1) * nb - 1);
  piece.tile = static_cast<int>(tile);
  piece.kb_begin = static_cast<int>(lo - tile * nb);
  piece.kb_end = static_cast<int>(hi - tile * nb);
  piece.part = j - first;
  piece.parts = last - first + 1;
  return piece;
}

// The tail split of `tiles` tiles of `key_blocks` blocks each on `sm_count` SMs, or an inactive
// one where it does not pay: no full round before it, a full last round, or a modelled gain
// below kTailMinGainPerMille of the R + 1 rounds, the busiest chunk costing its blocks plus
// `overhead` (tail_overhead_blocks).
inline TailSplit plan_tail_split(long long tiles, int key_blocks, int sm_count,
                                 int overhead = kTailOverheadBlocks) {
  TailSplit t;
  if (sm_count <= 0 || key_blocks <= 0 || tiles <= sm_count || tiles >= (1LL << 30)) return t;
  const long long rounds = tiles / sm_count, left = tiles % sm_count;
  if (left == 0) return t;
  const long long work = left * key_blocks;
  // Every chunk non-empty (a tile's parts are then the chunks first..last that hold its units)
  // and at least kTailMinChunkBlocks long where the work allows.
  long long chunks = work / kTailMinChunkBlocks;
  if (chunks > sm_count) chunks = sm_count;
  if (chunks < 1) chunks = 1;
  const long long longest = (work + chunks - 1) / chunks;  // units of the busiest chunk
  // Saved: (nb - longest - overhead) / nb of one round out of rounds + 1.
  if ((key_blocks - longest - overhead) * 1000 <
      kTailMinGainPerMille * key_blocks * (rounds + 1)) {
    return t;
  }
  t.main_tiles = static_cast<int>(rounds * sm_count);
  t.tail_tiles = static_cast<int>(left);
  t.key_blocks = key_blocks;
  t.sm_count = sm_count;
  t.chunks = static_cast<int>(chunks);
  for (int tile = 0; tile < t.tail_tiles; ++tile) {
    const int parts = t.chunk_of((tile + 1LL) * key_blocks - 1) -
                      t.chunk_of(static_cast<long long>(tile) * key_blocks) + 1;
    if (parts > t.max_parts) t.max_parts = parts;
  }
  return t;
}

// The modelled time of a call with tail split t as a share of the same call's time without it:
// R rounds and the busiest chunk (its key blocks plus `overhead`, the tail_overhead_blocks the
// split was planned with) against R + 1 rounds. 1 for an inactive split.
inline double tail_split_time_share(const TailSplit& t, int overhead) {
  if (!t.active()) return 1.0;
  const double rounds = static_cast<double>(t.main_tiles) / t.sm_count;
  const double longest = static_cast<double>((t.work() + t.chunks - 1) / t.chunks);
  return (rounds + (longest + overhead) / t.key_blocks) / (rounds + 1.0);
}

// Workspace of a tail split: per (tail tile, part, consumer warpgroup, warp) one record of
// 32 lanes x (d/2 O values + row max and row sum of the lane's two rows), fp32, lane-interleaved
// float4s; then per (tail tile, consumer warpgroup, warp) a 32-bit arrival counter, cleared by
// the launcher before each launch.
FS_HOST_DEVICE constexpr long long tail_record_floats(int head_dim) {
  return 32LL * (head_dim / 2 + 4);
}
FS_HOST_DEVICE inline long long tail_counters_offset_bytes(const TailSplit& t, int block_m,
                                                          int head_dim) {
  return static_cast<long long>(t.tail_tiles) * t.max_parts * (block_m / 64) * 4 *
         tail_record_floats(head_dim) * 4;
}
inline std::size_t tail_workspace_bytes(const TailSplit& t, int block_m, int head_dim) {
  if (!t.active()) return 0;
  return static_cast<std::size_t>(tail_counters_offset_bytes(t, block_m, head_dim) +
                                  static_cast<long long>(t.tail_tiles) * (block_m / 64) * 4 * 4);
}

}  // namespace flashsplit
