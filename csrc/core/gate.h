// The capability gate: can the native kernels serve this call, and if not, why not.
#pragma once

#include <string>
#include <vector>

#include "problem.h"
#include "tail_split.h"
#include "tile_config.h"

namespace flashsplit {

// kPortableMma: mma.sync kernels (sm_80 and later). kHopperWgmma: TMA + wgmma kernels (sm_90a).
enum class KernelFamily { kNone, kPortableMma, kHopperWgmma };

// "none", "portable_mma", "hopper_wgmma"
const char* kernel_family_name(KernelFamily family);

struct GateDecision {
  bool ok = false;
  KernelFamily family = KernelFamily::kNone;
  std::string reason;  // empty when ok; otherwise one human-readable sentence
};

// Compute capabilities whose kernels were run and tested on real hardware.
// The gate admits only these unless allow_untested_arch is set.
bool arch_tested(int cc);

// The same table as a list (ascending), for build_info() and messages.
std::vector<int> tested_archs();

// Whether the build holds a binary this device can load: an arch built for the device's own
// major version at or below its cc (sm_80 code runs on 8.6 and 8.9; 90 built as sm_90a is 90).
bool build_has_binary_for(const BuildInfo& build, int cc);

// Admits or refuses the native path and picks its kernel family: the Hopper kernels on cc 9.0
// when built, allowed (allow_hopper; FLASHSPLIT_DISABLE_HOPPER=1 clears it in the torch layer)
// and suited to the shape (use_hopper_tiles); the portable kernels otherwise.
GateDecision check_native(const AttnProblem& problem, const DeviceInfo& device,
                          const BuildInfo& build, bool allow_untested_arch = false,
                          bool allow_hopper = true);

// The tiles the split heuristic models for this problem (zeros for kNone): those of split
// calls (hopper_split_block_m for the Hopper family).
TileConfig tiles_for(KernelFamily family, const AttnProblem& problem);

// The tiles a call of num_splits splits runs on a device of sm_count SMs: the same, except
// that an unsplit Hopper call weighs its grid's waves for the tile height (hopper_block_m).
TileConfig tiles_for_run(KernelFamily family, const AttnProblem& problem, int sm_count,
                         int num_splits);

// The tail split (tail_split.h) of a call of num_splits splits on `tiles`: active only for an
// unsplit Hopper call without a causal mask, where plan_tail_split says it pays. The Hopper
// launcher derives the same from its own tiles and runs it only when the caller gives the
// workspace this sizes (tail_workspace_bytes).
TailSplit tail_split_for_run(KernelFamily family, const AttnProblem& problem,
                             const TileConfig& tiles, int sm_count, int num_splits);

// Whether a call on `tiles` carries S across tiles (hopper_carry_across_tiles): only persistent
// Hopper launches of 128-row ping-pong tiles carry at all. The Hopper launcher applies the same
// rule to its own tiles.
bool carry_across_tiles_for_run(KernelFamily family, const AttnProblem& problem,
                                const TileConfig& tiles);

// Whether a call of num_splits splits on `tiles` rotates each round's tiles among its blocks
// (hopper_rotate_rounds): only persistent Hopper launches walk rounds at all. The Hopper launcher
// applies the same rule to its own tiles.
bool rotates_rounds_for_run(KernelFamily family, const AttnProblem& problem,
                            const TileConfig& tiles, int num_splits);

// Whether a call on `tiles` hands its tiles out through a counter (core/tile_order.h):
// persistent causal Hopper launches of tiles whose consumers run side by side (192 and 256
// rows). The torch layer allocates the counter only for these; the launcher draws tiles only
// when given one, on those tiles.
bool draws_tiles_from_counter(KernelFamily family, const AttnProblem& problem,
                              const TileConfig& tiles);

// The G a call runs for a requested num_splits (0: the heuristic, on the tiles of tiles_for).
// Where the heuristic splits but an unsplit call would run other tiles (tiles_for_run at
// G = 1), G = 1 wins if its modelled time on those tiles, weighted by their row cost
// (hopper_row_cost_pct), is no more than the split's on its own tiles.
int resolve_splits_for(KernelFamily family, const AttnProblem& problem, const DeviceInfo& device,
                       int requested);

}  // namespace flashsplit
