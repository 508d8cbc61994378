// What the Hopper forward kernel receives, as one __grid_constant__ parameter (so TMA can read
// the tensor maps from parameter space): the portable params plus one struct per part.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only)

#include "core/fast_divmod.h"
#include "core/tail_split.h"
#include "core/tile_order.h"
#include "kernels/attn_params.h"

namespace flashsplit {
namespace sm90 {

// The producer's loads and the consumers' MMA loops.
struct MainloopParams {
  // dims (d, sq, h, b), box (64, block_m, 1, 1); kPackHeads: dims (d, group, sq, hk, b), box
  // (64, group, block_m / group, 1, 1) (make_group_tile_map)
  CUtensorMap q_map;
  // dims (d, sk, hk, b), box (64, hopper_key_box_rows, 1, 1); paged: dims (d, page_size, hk,
  // pages), box (64, page_box_rows, 1, 1)
  CUtensorMap k_map;
  CUtensorMap v_map;
  // Paged k/v (kPaged): the rows of a key block's boxes (hopper_page_box_rows: the page size, at
  // most a block's keys; a power of two) and the page size as a divisor.
  int page_box_rows = 0;
  FastDivmod by_page{1};
  // Kernels with kCarry: whether this launch carries S across tiles (hopper_carry_across_tiles
  // in core/hopper_tiles.h, by the mask and the key blocks its tiles walk).
  bool carry = true;
  // Always 0, read at run time: the ping-pong consumers merge P's registers into the next P
  // under it, which keeps them P's until the P V reading them has landed (take_next_p in
  // mainloop_mma.cuh).
  uint32_t zero = 0;
};

// The epilogues' destinations beyond the portable params' (out and lse, or the partials).
struct EpilogueParams {
  CUtensorMap o_map;  // dims (d, sq, h, b), box (64, 16, 1, 1): one warp's rows; G = 1 only
  // Sequences: the same with a box of one row, for a sequence's rows where it ends inside a
  // warp's (FwdEpilogue::store_sequence_rows).
  CUtensorMap o_row_map;
  // The tail split's workspace (core/tail_split.h): the pieces' partials and arrival counters.
  float* tail_ws = nullptr;
};

// The tile walk (tile_scheduler.cuh).
struct SchedulerParams {
  // The walk's divisors (the grid, query tiles per head, splits, heads (k/v heads where tiles
  // pack a group's heads), the GQA group), made on the host: multiply-shift instead of six
  // division sequences per tile (measured: the walk took 4-8.5% of a consumer's time at
  // s = 512).
  FastDivmod by_grid{1}, by_m_blocks{1}, by_splits{1}, by_heads{1}, by_group{1};
  // Persistent launches that rotate rounds (LaunchPlan::rotate_rounds; only
  // 192-row kernels read it): the tiles of the last, part-full round (0 where every round is
  // full) and how far it rotates them (its round index mod its tiles: one round, so a constant).
  bool rotate_rounds = false;
  int last_round_tiles = 0, last_round_shift = 0;
  // The last round spread over every SM (core/tail_split.h; G = 1 without a causal mask):
  // inactive unless the caller gave a workspace, whose arrival counters the launcher clears.
  TailSplit tail{};
  // Persistent grouped walks: blocks take their next tile from this counter (cleared by the
  // launcher) instead of walking a static share of them. nullptr = the static walk.
  int* tile_counter = nullptr;
  // The grouped order (kGroupedOrder) takes tiles in groups of units (split, batch, head), the
  // query tiles of a group's units longest first (core/tile_order.h); one unit per group is the
  // head-major order.
  TileGroups groups{};
};

struct HopperFwdParams {
  MainloopParams mainloop;
  EpilogueParams epilogue;
  AttnFwdParams p;
  SchedulerParams scheduler;
};

}  // namespace sm90
}  // namespace flashsplit
