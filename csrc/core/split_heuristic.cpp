#include "split_heuristic.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace flashsplit {

namespace {

int64_t num_key_blocks(const AttnProblem& problem, const TileConfig& tiles) {
  return (problem.sk + tiles.block_n - 1) / tiles.block_n;
}

}  // namespace

// A cost model rather than FlashAttention-2's wave-efficiency rule: measured on the H100, the
// v0 rule over-split decode grids (G = 85..109 where 16..32 was best, regret up to 2.3x) and
// never split grids just past one wave, whose last wave runs nearly empty.
int choose_num_splits(const AttnProblem& problem, const DeviceInfo& device,
                      const TileConfig& tiles, const SplitHeuristicConstants& constants) {
  if (tiles.block_m <= 0 || tiles.block_n <= 0 || device.sm_count <= 0) return 1;
  const bool narrow = tiles.block_m <= kNarrowMaxRows;
  const double slots = device.sm_count *
                       (narrow ? constants.slots_per_sm_narrow : constants.slots_per_sm_wide);
  const int64_t grid_blocks = forward_blocks(problem.b, problem.sq, problem.h, problem.hk, tiles);
  const int64_t key_blocks = num_key_blocks(problem, tiles);
  if (grid_blocks <= 0 || key_blocks <= 1 || slots <= 0) return 1;
  const int64_t cap = std::min<int64_t>(
      constants.max_splits, key_blocks / std::max(constants.min_key_blocks_per_split, 1));

  // The Hopper kernels' tiles hold one head's rows; only they leave packs_heads off.
  const double overhead =
      tiles.packs_heads ? constants.block_overhead : constants.block_overhead_hopper;
  int best_g = 1;
  double best_cost = 0.0, unsplit_cost = 0.0;
  for (int64_t g = 1; g <= std::max<int64_t>(cap, 1); ++g) {
    const double waves = std::ceil(static_cast<double>(grid_blocks * g) / slots);
    const double per_split = static_cast<double>((key_blocks + g - 1) / g);
    const double cost = waves * (per_split + overhead) +
                        constants.split_latency * static_cast<double>(g) +
                        (g > 1 ? constants.combine_cost : 0.0);
    if (g == 1) unsplit_cost = cost;
    if (g == 1 || cost < best_cost) best_g = static_cast<int>(g), best_cost = cost;
  }
  return best_cost > unsplit_cost * (1.0 - constants.min_gain) ? 1 : best_g;
}

int resolve_num_splits(int requested, const AttnProblem& problem, const DeviceInfo& device,
                       const TileConfig& tiles) {
  if (requested < 0) {
    throw std::invalid_argument("num_splits must be >= 0 (0 = auto), got " +
                                std::to_string(requested));
  }
  if (requested == 0) return choose_num_splits(problem, device, tiles);
  if (requested == 1 || tiles.block_n <= 0) return 1;
  // More splits than key blocks would only add empty producers.
  int64_t key_blocks = std::max<int64_t>(num_key_blocks(problem, tiles), 1);
  return static_cast<int>(std::min<int64_t>(requested, key_blocks));
}

}  // namespace flashsplit
