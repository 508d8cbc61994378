#include "split_heuristic.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace flashsplit {

namespace {

int64_t num_key_blocks(const AttnProblem& problem, const TileConfig& tiles) {
  return (problem.sk + tiles.block_n - 1) / tiles.block_n;
}

// Fraction of the last wave that is busy: waves / ceil(waves) with waves = work / slots.
double wave_efficiency(int64_t work_blocks, int64_t slots) {
  int64_t full_waves = (work_blocks + slots - 1) / slots;
  return static_cast<double>(work_blocks) / static_cast<double>(full_waves * slots);
}

}  // namespace

// FlashAttention-2's occupancy model (REFERENCES.md) with one change: FA2 skips a G whose
// ceil(key_blocks / G) equals that of G - 1; we instead cap G so that every split walks at
// least min_key_blocks_per_split blocks. Why: the efficiency of a G does not depend on sk, so
// when the candidates are the prefix [1, cap] and cap grows with sk, the chosen G can only grow
// with sk (a larger prefix can only raise the best efficiency, which only raises the smallest
// G that comes within efficiency_fraction of it). FA2's skip makes the candidate set jump with
// sk, and its answer then drops as sk grows (16 -> 15 from 64 to 128 key blocks on a 16-block
// grid with 264 slots), which would make timings of neighbouring lengths jump for no reason.
int choose_num_splits(const AttnProblem& problem, const DeviceInfo& device,
                      const TileConfig& tiles, const SplitHeuristicConstants& constants) {
  if (tiles.block_m <= 0 || tiles.block_n <= 0 || device.sm_count <= 0) return 1;
  const int64_t slots = static_cast<int64_t>(device.sm_count) * std::max(tiles.blocks_per_sm, 1);
  // One block per (batch, k/v head, tile of packed rows): see packed_rows in tile_config.h.
  const int64_t rows = packed_rows(problem.sq, problem.h, problem.hk);
  const int64_t grid_blocks = problem.b * problem.hk * ((rows + tiles.block_m - 1) / tiles.block_m);
  if (grid_blocks <= 0) return 1;
  if (static_cast<double>(grid_blocks) >= constants.fill_fraction * static_cast<double>(slots)) {
    return 1;
  }
  const int64_t min_blocks = std::max(constants.min_key_blocks_per_split, 1);
  const int64_t cap = std::min<int64_t>({constants.max_splits, slots,
                                         num_key_blocks(problem, tiles) / min_blocks});
  if (cap <= 1) return 1;

  double best = 0.0;
  for (int64_t g = 1; g <= cap; ++g) best = std::max(best, wave_efficiency(grid_blocks * g, slots));
  for (int64_t g = 1; g <= cap; ++g) {
    if (wave_efficiency(grid_blocks * g, slots) >= constants.efficiency_fraction * best) {
      return static_cast<int>(g);
    }
  }
  return 1;  // unreachable: the best G itself passes
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
