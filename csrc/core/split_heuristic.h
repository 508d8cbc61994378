// How many key splits (G) to run for a call the gate admitted.
#pragma once

#include "problem.h"
#include "tile_config.h"

namespace flashsplit {

// Every tunable constant of the heuristic lives here. v1: fitted to 1,211 shapes measured on an
// H100 (benchmarks/data/tune_h100_v1.csv, made by benchmarks/tune_num_splits.py). v2 adds the
// Hopper kernels' block overhead, the combine's fixed cost and the minimum gain, fitted on half
// of the 983 shapes of benchmarks/data/tune_h100_v3.csv (the kernels of this commit) and
// checked on the other half (benchmarks/NOTES.md). Costs are in units of one key-block
// iteration of one producer block of the kernel family that runs.
struct SplitHeuristicConstants {
  // Blocks per SM that actually run concurrently at full speed. Below the residency limit:
  // wide tiles saturate the tensor cores with one block per SM, and narrow (decode) tiles
  // saturate memory bandwidth with two, so more blocks than that only queue.
  double slots_per_sm_wide = 1.0;
  double slots_per_sm_narrow = 2.0;
  // Fixed cost of a producer block (prologue, first loads, epilogue and its partial write):
  // portable kernels, and the Hopper kernels (whose key-block iterations are twice as long).
  double block_overhead = 16.0;
  double block_overhead_hopper = 8.0;
  // Cost each extra split adds whatever the grid: the combine walks the splits of a row in turn.
  double split_latency = 0.5;
  // Cost of splitting at all: the combine kernel's launch and its pass over the partials.
  double combine_cost = 4.0;
  // A split must beat G = 1 by this fraction of G = 1's modelled cost: where the grid already
  // fills the GPU the model's gain is only wave rounding, which measures within noise.
  double min_gain = 0.02;
  int max_splits = 128;
  int min_key_blocks_per_split = 1;
};

// Returns the G >= 1 that minimises the modelled time
//   waves(G) * (ceil(key_blocks / G) + block_overhead) + split_latency * G + [G > 1] combine_cost,
// waves(G) = ceil(grid_blocks * G / slots); the smallest such G on ties, and 1 unless that G
// gains min_gain over it. Never more than the number of key blocks (over
// min_key_blocks_per_split) or max_splits.
int choose_num_splits(const AttnProblem& problem, const DeviceInfo& device,
                      const TileConfig& tiles,
                      const SplitHeuristicConstants& constants = SplitHeuristicConstants{});

// The G that actually runs for a requested num_splits: 0 -> heuristic, 1 -> 1,
// >= 2 -> clamped to [1, number of key blocks]. Negative values are rejected before this.
int resolve_num_splits(int requested, const AttnProblem& problem, const DeviceInfo& device,
                       const TileConfig& tiles);

}  // namespace flashsplit
