// The plan: every decision about how a call runs, made once, here, from the problem and the
// device. The torch layer asks for it, sizes the scratch from it and hands it to the launchers,
// which only dispatch on it; explain() returns it. Plain C++17: no torch, no GPU headers.
#pragma once

#include "core/gate.h"
#include "core/problem.h"
#include "core/split_heuristic.h"
#include "core/tail_split.h"
#include "core/tiles.h"

namespace flashsplit {

// What the environment or the caller allows; the torch layer fills it.
struct PlanOptions {
  GateOptions gate;
  bool allow_tail_split = true;  // FLASHSPLIT_DISABLE_TAIL_SPLIT=1 clears it
};

// A kernel launch's grid, in blocks.
struct LaunchGrid {
  long long x = 0, y = 1, z = 1;
  long long blocks() const { return x * y * z; }
};

struct LaunchPlan {
  GateDecision gate;   // admitted or not, the kernel family, and why not
  int num_splits = 1;  // G that runs (1 on the reference path)
  TileConfig tiles{0, 0, 0, 0};  // the tiles this call runs
  // Sequences of their own lengths, and paged k/v among them: the kernel instances that read
  // the sequences' indices and pages (kernels/sequence.cuh).
  bool sequences = false, paged = false;
  // Paged k/v the Hopper kernels copy a row at a time: pages too small for TMA boxes
  // (hopper_page_box_rows).
  bool page_rows = false;
  // Keys per block of the tiles calls with G >= 2 run (the tiles the heuristic models), which
  // clamp a requested G; an unsplit call's own tiles may take fewer (wide Hopper tiles).
  int split_block_n = 0;
  long long tiles_per_split = 0;  // forward_blocks: the tiles of one split
  // The Hopper kernel's walk over its tiles.
  bool persistent = false;     // one block per SM walks the tiles (hopper_persistent)
  bool carry = false;          // S carried across tiles (hopper_carry_across_tiles)
  bool rotate_rounds = false;  // rounds' tiles rotated among blocks (hopper_rotate_rounds)
  bool tile_counter = false;   // tiles drawn from a counter the caller provides (tile_order.h)
  int tile_group = 0;          // units (split, batch, head) per group of the tile order (Hopper)
  // Causal ping-pong tiles take probabilities at the running max (hopper_causal_running_max).
  bool running_max = false;
  // Key-warp tiles copy each key block's K and V apart, K after S = Q K^T and V after P V
  // (sm80_key_warp_staggered).
  bool staggered_kv = false;
  TailSplit tail;              // the last round spread over every SM (tail_split.h), if active
  // Launches: the forward kernel (its main tiles where a tail split follows), the tail split's
  // pieces, and the combine (G >= 2) with its lanes per row (combine_math.h).
  LaunchGrid forward_grid, tail_grid, combine_grid;
  int combine_lanes = 0;
  // Launches after the first start while the kernel before them finishes (programmatic
  // dependent launch, sm_90 and later), so their launch latency hides behind its tail.
  bool dependent_launch = false;
};

// What the launchers ran (kernels/attn_launch.h fills it where asked), from the kernels' own
// compile-time tile shapes and the arguments of each launch, so that a test can compare it with
// the plan that asked for it.
struct LaunchRecord {
  KernelFamily family = KernelFamily::kNone;
  int block_m = 0, block_n = 0, num_splits = 0;
  int key_warps = 0;         // the portable tile's key warps (0: a Hopper launch)
  bool packs_heads = false;  // the Hopper instance whose tiles pack a GQA group's heads
  bool page_rows = false;    // the Hopper instance that copies pages a row at a time
  bool carry = false, rotate_rounds = false, tile_counter = false, running_max = false;
  bool staggered_kv = false;
  int tile_group = 0, tail_tiles = 0, tail_parts = 0;
  LaunchGrid forward_grid, tail_grid, combine_grid;
  int combine_lanes = 0;
};

// The plan of a call. Never throws for a problem the torch layer could describe; requested is
// num_splits as given (>= 0: 0 = the heuristic, 1 = off, G >= 2 = forced, clamped).
LaunchPlan make_launch_plan(const AttnProblem& problem, const DeviceInfo& device,
                            const BuildInfo& build, const PlanOptions& options, long long requested);

// Bytes of scratch the plan needs beyond out and lse: the split partials are sized by the torch
// layer from num_splits; these are the tail split's workspace and the tile counter.
std::size_t tail_workspace_bytes_for(const LaunchPlan& plan, int head_dim);

// ---- The rules make_launch_plan applies, each exposed for its tests.

// The tiles the split heuristic models for this problem (zeros for kNone): those of split calls.
TileConfig tiles_for(KernelFamily family, const AttnProblem& problem);

// The tiles a call of num_splits splits runs on a device of sm_count SMs: the same, except
// that an unsplit Hopper call weighs its grid's waves for the tile height (hopper_block_m).
TileConfig tiles_for_run(KernelFamily family, const AttnProblem& problem, int sm_count,
                         int num_splits);

// The heuristic's constants for a kernel family on a device: hopper_constants for the Hopper
// kernels, nvidia_constants for the portable ones, gfx9_constants for the MFMA kernels.
SplitHeuristicConstants constants_for(KernelFamily family, const DeviceInfo& device);

// The G a call runs for a requested num_splits (0: the heuristic, on the tiles of tiles_for).
// Where the heuristic splits but an unsplit call would run other tiles (tiles_for_run at
// G = 1) or a tail split (tail_split_for_run), G = 1 wins if its modelled time on those tiles,
// weighted by their row cost (hopper_row_cost_pct) and cut to the tail split's share
// (tail_split_time_share), is no more than the split's on its own tiles. On the Hopper tiles
// the plan declines the heuristic's splits of prefill grids that fill a quarter of the SMs
// (hopper_prefill_declines_split), and at d=64 and 128 chooses the G of dense prefill itself
// where the heuristic's stays 1 or is declined (hopper_prefill_splits), and runs causal grids of
// as many tiles as SMs unsplit where the wait for their longest tile does not pay a split
// (hopper_prefill_split_pays). Every modelled time, the heuristic's and this comparison's, uses
// `constants` (the tuner varies them).
int resolve_splits_for(KernelFamily family, const AttnProblem& problem, const DeviceInfo& device,
                       int requested,
                       const SplitHeuristicConstants& constants = SplitHeuristicConstants{});

// The tail split of a call of num_splits splits on `tiles`: only for an unsplit Hopper call
// without a causal mask, where plan_tail_split says it pays.
TailSplit tail_split_for_run(KernelFamily family, const AttnProblem& problem,
                             const TileConfig& tiles, int sm_count, int num_splits);

// The key-warp tile a portable_mma call runs, as its blocks an SM (sm80_key_warp_blocks_per_sm:
// 1 or 2), or 0 where it runs without key warps: only where num_splits is left to the heuristic
// (requested = 0); it then runs unsplit (G = 1 from resolve_splits_for).
int key_warp_blocks_per_sm_for_run(KernelFamily family, const AttnProblem& problem,
                                   const DeviceInfo& device, int requested);
bool takes_key_warps_for_run(KernelFamily family, const AttnProblem& problem,
                             const DeviceInfo& device, int requested);

// Whether a call on `tiles` carries S across tiles: only persistent Hopper launches of 128-row
// ping-pong tiles carry at all, and not where they draw their tiles from the counter
// (tile_counter: drawn with the carry, the persistent d=128 causal tiles at the running max
// ran 0.3-4% slower than without it).
bool carry_across_tiles_for_run(KernelFamily family, const AttnProblem& problem,
                                const TileConfig& tiles, bool tile_counter);

// Whether a Hopper call's causal 128-row tiles take probabilities at the running max: unsplit
// calls over long keys (dense calls at d=128 over more than 4 key blocks;
// hopper_causal_running_max), dense or of sequences of their own lengths, not packing a
// group's heads, whose key blocks load as TMA boxes (contiguous k/v, pages of 64
// keys or of whole blocks) or are copied a row at a time (at d=128,
// hopper_running_max_copies_rows). Over pages the producer loads each block's V one block
// behind its K (FwdProducer::kVBehindK): without it the running max measured slower than the
// block max first (chunks of 512 and 2048 queries against 8k and 16k keys at d=128, H200:
// pages of 64 1.5-4%, of 16 2-5%), with it 8% faster over pages of 64 and 5-6% over pages of
// 16 (design.md, "Paged k/v on the Hopper kernels").
bool takes_running_max_for_run(KernelFamily family, const AttnProblem& problem,
                               const TileConfig& tiles, int num_splits);

// Whether a call of num_splits splits on `tiles` rotates each round's tiles among its blocks:
// only persistent Hopper launches walk rounds at all.
bool rotates_rounds_for_run(KernelFamily family, const AttnProblem& problem,
                            const TileConfig& tiles, int num_splits);

// Whether a call of num_splits splits on `tiles` hands its tiles out through a counter
// (tile_order.h): persistent causal Hopper launches of tiles whose consumers run side by side
// (192 and 256 rows), and of the 128-row tiles at the running max whose keys load as TMA
// boxes, but for chunks (hopper_persistent_chunk) and for persistent calls whose static rounds
// on sm_count SMs end close to longest first (hopper_causal_walk_static); and persistent unsplit
// dense d=192 launches from 1024 keys, and d=256 ones whose rounds end far after longest first
// (hopper_large_head_draws).
bool draws_tiles_from_counter(KernelFamily family, const AttnProblem& problem,
                              const TileConfig& tiles, int num_splits, int sm_count);

}  // namespace flashsplit
