// How many key splits (G) to run for a call the gate admitted.
#pragma once

#include "problem.h"
#include "tile_config.h"

namespace flashsplit {

// Every tunable constant of the heuristic lives here. v0 values: the first three are
// FlashAttention-2's published ones (see REFERENCES.md); min_key_blocks_per_split is ours.
// All are to be re-tuned from H100 measurements.
struct SplitHeuristicConstants {
  double fill_fraction = 0.8;        // grid >= this fraction of a wave -> no split
  double efficiency_fraction = 0.85; // smallest G within this fraction of the best efficiency
  int max_splits = 128;
  // Each split writes an fp32 partial tile (block_m x d x 4 bytes) that the combine reads back:
  // the bytes of one to two K/V block reads, so a split walks at least this many key blocks.
  int min_key_blocks_per_split = 2;
};

// Returns G >= 1. G == 1 when the grid already fills the GPU; never more than the number of key
// blocks, max_splits, or sm_count * blocks_per_sm.
int choose_num_splits(const AttnProblem& problem, const DeviceInfo& device,
                      const TileConfig& tiles,
                      const SplitHeuristicConstants& constants = SplitHeuristicConstants{});

// The G that actually runs for a requested num_splits: 0 -> heuristic, 1 -> 1,
// >= 2 -> clamped to [1, number of key blocks]. Negative values are rejected before this.
int resolve_num_splits(int requested, const AttnProblem& problem, const DeviceInfo& device,
                       const TileConfig& tiles);

}  // namespace flashsplit
