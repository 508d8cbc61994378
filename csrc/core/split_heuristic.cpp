#include "core/split_heuristic.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/combine_math.h"
#include "core/hopper_tiles.h"
#include "core/portable_tiles.h"

namespace flashsplit {

namespace {

int64_t num_key_blocks(const AttnProblem& problem, const TileConfig& tiles) {
  return (problem.sk + tiles.block_n - 1) / tiles.block_n;
}

bool is_narrow(const TileConfig& tiles) { return tiles.block_m <= kNarrowMaxRows; }

// One key-block iteration of one thread block of these tiles, microseconds. Measured at d=64
// and 128; other head dims scale the d=128 time with the block's elements (d x block_n: the
// GEMMs and, for narrow tiles, the bytes read), which leaves d=64 and 128 as measured.
double iteration_us(const TileConfig& tiles, int64_t d, const SplitHeuristicConstants& c) {
  if (tiles.wgmma) {  // Hopper tiles: measured per 128 query rows and 128 keys
    const double per_128_rows = d <= 64 ? c.hopper_iteration_us_d64 : c.hopper_iteration_us_d128;
    const double dim_scale = d > 128 ? d / 128.0 : 1.0;
    return per_128_rows * tiles.block_m / 128.0 * tiles.block_n / kHopperBlockN * dim_scale;
  }
  if (is_narrow(tiles)) {
    return c.narrow_iteration_us * static_cast<double>(d) * tiles.block_n / 4096.0;
  }
  if (d <= 64) return c.portable_iteration_us_d64;
  return c.portable_iteration_us_d128 * static_cast<double>(d) * tiles.block_n / (128.0 * 64.0);
}

// Blocks that run at once: one per SM for wide tiles (co-residency is a speed-up, not more
// slots), slots_per_sm_narrow per SM for narrow ones.
double slots_for(const DeviceInfo& device, const TileConfig& tiles, const SplitHeuristicConstants& c) {
  return device.sm_count * (is_narrow(tiles) ? c.slots_per_sm_narrow : 1.0);
}

// Waves of a narrow grid of grid_blocks x g blocks over `slots` (slots_for), of which the
// SMs hold `resident` at once. Where the unsplit grid fits the slots, a block past them waits
// for a slot, a whole wave later. Where it does not, the grid streams the HBM at its rate from
// G = 1 on, and blocks up to the resident ones share that rate rather than queue: slots x 1.01
// blocks are 1.01 waves, not 2 (H200, (50,1,16,8,3595,64), 400 one-warp blocks: G = 1 88.8 us,
// the G = 2 that two waves chose 106.8). Blocks past the resident ones wait for a wave of them.
double narrow_waves(int64_t grid_blocks, int g, double slots, double resident) {
  const double blocks = static_cast<double>(grid_blocks) * g;
  if (grid_blocks <= slots || resident <= slots) return std::ceil(blocks / slots);
  const double full = std::floor(blocks / resident);
  const double rest = blocks - full * resident;
  return full * resident / slots + (rest > 0 ? std::max(1.0, rest / slots) : 0.0);
}

// The native kernels take fp16 / bf16 inputs and write fp32 partials (+ one lse per row).
constexpr double kElementBytes = 2.0, kPartialBytes = 4.0;

// The DRAM time of `bytes` spread evenly over `blocks` tiles packing a group's heads, in waves
// of at most sm_count blocks: each wave streams at the HBM's rate or, with fewer blocks than
// that needs, at theirs (packed_sm_bytes_per_us each), and pays packed_wave_latency_us.
double packed_memory_us(double bytes, double blocks, int sm_count,
                        const SplitHeuristicConstants& c) {
  const double per_block = bytes / blocks;
  const auto wave_us = [&](double active) {
    const double rate = std::min(c.packed_dram_bytes_per_us, active * c.packed_sm_bytes_per_us);
    return active * per_block / rate + c.packed_wave_latency_us;
  };
  const double full = std::floor(blocks / sm_count);
  const double rest = blocks - full * sm_count;
  return full * wave_us(sm_count) + (rest > 0 ? wave_us(rest) : 0.0);
}

}  // namespace

double modelled_split_us(const AttnProblem& problem, const DeviceInfo& device,
                         const TileConfig& tiles, int g, const SplitHeuristicConstants& c) {
  if (tiles.block_m <= 0 || tiles.block_n <= 0 || device.sm_count <= 0 || g < 1) return -1.0;
  const int64_t grid_blocks = forward_blocks(problem.b, problem.sq, problem.h, problem.hk, tiles);
  const bool narrow = is_narrow(tiles);
  const double slots = slots_for(device, tiles, c);
  if (grid_blocks <= 0 || slots <= 0) return -1.0;

  const double blocks = static_cast<double>(grid_blocks) * g;
  const double waves =
      narrow ? narrow_waves(grid_blocks, g, slots,
                            static_cast<double>(device.sm_count) * tiles.blocks_per_sm)
             : std::ceil(blocks / slots);
  const int64_t per_split = (num_key_blocks(problem, tiles) + g - 1) / g;
  const double overhead = narrow        ? c.narrow_block_overhead
                          : tiles.wgmma ? c.block_overhead_hopper
                                        : c.block_overhead;
  const double iteration = iteration_us(tiles, problem.d, c);
  const double block_us = (static_cast<double>(per_split) + overhead) * iteration;
  const bool co_resident = !narrow && tiles.blocks_per_sm >= 2 && waves >= 2;
  double compute_us = waves * block_us / (co_resident ? c.co_resident_speedup : 1.0);
  const double per_sm = blocks / device.sm_count;
  if (narrow && per_sm > 1.0) compute_us *= std::pow(std::ceil(per_sm) / per_sm, c.narrow_crowding);

  const double d = static_cast<double>(problem.d);
  const double kv_bytes = 2.0 * problem.b * problem.hk * problem.sk * d * kElementBytes;
  const double qo_bytes = 2.0 * problem.b * problem.h * problem.sq * d * kElementBytes;
  const double partial_bytes = static_cast<double>(problem.b) * problem.h * problem.sq *
                               (d + 1.0) * kPartialBytes * g;  // all g splits' partials
  const double split_bytes = g > 1 ? partial_bytes : 0.0;
  const double imbalance = narrow ? 0.0 : c.one_wave_imbalance;
  // Past a narrow grid's first wave, each wave's block overhead (first loads, epilogue) is paid
  // on the DRAM stream too: more, shorter blocks stream the same bytes more slowly (measured:
  // (4,32,8,1,131072,128) ran 689 us at G = 8, one wave, against 716 us at G = 33, four).
  const double wave_starts_us = narrow ? (waves - 1.0) * overhead * iteration : 0.0;
  const double bytes = kv_bytes + qo_bytes + split_bytes;
  double memory_us = bytes / c.dram_bytes_per_us * (1.0 + imbalance / waves) *
                         (1.0 + c.partial_wave_penalty * (waves / (blocks / slots) - 1.0)) +
                     wave_starts_us;
  if (tiles.wgmma && tiles.packs_heads && c.packed_dram_bytes_per_us > 0 &&
      c.packed_sm_bytes_per_us > 0) {
    const bool one_wave_split = g > 1 && problem.d >= 128 && blocks <= device.sm_count;
    memory_us = packed_memory_us(bytes, blocks, device.sm_count, c) *
                (one_wave_split ? 1.0 + c.packed_one_wave_split_penalty : 1.0);
  }

  const double batches = combine_batches(g);
  const double split_us = narrow ? (g > 1 ? c.narrow_chunk_latency_us * batches : 0.0)
                                 : c.split_latency_us * g;
  const double combine_us = narrow ? c.narrow_combine_us : c.combine_us;
  return std::max(compute_us, memory_us) + split_us +
         (g > 1 ? combine_us + partial_bytes / c.dram_bytes_per_us : 0.0);
}

// A cost model rather than FlashAttention-2's wave-efficiency rule: measured on the H100, the
// v0 rule over-split decode grids (G = 85..109 where 16..32 was best, regret up to 2.3x) and
// never split grids just past one wave, whose last wave runs nearly empty.
int choose_num_splits(const AttnProblem& problem, const DeviceInfo& device,
                      const TileConfig& tiles, const SplitHeuristicConstants& constants) {
  if (tiles.block_m <= 0 || tiles.block_n <= 0 || device.sm_count <= 0) return 1;
  const int64_t key_blocks = num_key_blocks(problem, tiles);
  const double unsplit_us = modelled_split_us(problem, device, tiles, 1, constants);
  if (key_blocks <= 1 || unsplit_us < 0) return 1;
  const int64_t cap = std::min<int64_t>(
      constants.max_splits, key_blocks / std::max(constants.min_key_blocks_per_split, 1));

  int best_g = 1;
  double best_us = unsplit_us;
  for (int g = 2; g <= cap; ++g) {
    // Only the fewest splits of each split length: more with the same longest split add
    // blocks and partials and shorten nothing.
    if (ceil_div(key_blocks, g) == ceil_div(key_blocks, g - 1)) continue;
    const double us = modelled_split_us(problem, device, tiles, g, constants);
    if (us < best_us) best_g = g, best_us = us;
  }
  const double unsplit_waves =
      static_cast<double>(forward_blocks(problem.b, problem.sq, problem.h, problem.hk, tiles)) /
      slots_for(device, tiles, constants);
  const double min_gain = unsplit_waves >= constants.multi_wave_grid ? constants.min_gain_multi_wave
                                                                     : constants.min_gain;
  return best_us > unsplit_us * (1.0 - min_gain) ? 1 : best_g;
}

int resolve_num_splits(int requested, const AttnProblem& problem, const DeviceInfo& device,
                       const TileConfig& tiles, const SplitHeuristicConstants& constants) {
  if (requested < 0) {
    throw std::invalid_argument("num_splits must be >= 0 (0 = auto), got " +
                                std::to_string(requested));
  }
  if (requested == 0) return choose_num_splits(problem, device, tiles, constants);
  if (requested == 1 || tiles.block_n <= 0) return 1;
  // More splits than key blocks would only add empty producers.
  int64_t key_blocks = std::max<int64_t>(num_key_blocks(problem, tiles), 1);
  return static_cast<int>(std::min<int64_t>(requested, key_blocks));
}

namespace {

constexpr Gfx9Facts kGfx9Facts[] = {
    {"gfx90a", 110, 191.5 * 592.0 / 1307.0, 1.6},
    {"gfx942", 304, 592.0, 5.3},
    {"gfx950", 256, 1438.0, 8.0},
};

// The H100 fit's DRAM rate as a fraction of its HBM's 3.35 TB/s.
constexpr double kReachedHbmFraction = 3.2 / 3.35;

// The packed tiles' wave model on the H200 (hopper_constants).
constexpr double kPackedSmBytesPerUs = 45e3;
constexpr double kPackedWaveLatencyUs = 8.0;
constexpr double kPackedOneWaveSplitPenalty = 0.15;

}  // namespace

Gfx9Facts gfx9_facts(const std::string& arch) {
  for (const Gfx9Facts& facts : kGfx9Facts) {
    if (arch == facts.arch) return facts;
  }
  return kGfx9Facts[1];
}

SplitHeuristicConstants nvidia_constants(const DeviceInfo& device) {
  SplitHeuristicConstants c;
  const double in_flight = c.slots_per_sm_narrow * hbm_share_over_h100(device);
  c.slots_per_sm_narrow = std::max(c.slots_per_sm_narrow, std::round(in_flight));
  return c;
}

SplitHeuristicConstants hopper_constants(const DeviceInfo& device) {
  SplitHeuristicConstants c = nvidia_constants(device);
  if (!high_hbm_share(hbm_share_over_h100(device))) return c;
  c.packed_dram_bytes_per_us = device.dram_bytes_per_us * kReachedHbmFraction;
  c.packed_sm_bytes_per_us = kPackedSmBytesPerUs;
  c.packed_wave_latency_us = kPackedWaveLatencyUs;
  c.packed_one_wave_split_penalty = kPackedOneWaveSplitPenalty;
  return c;
}

SplitHeuristicConstants gfx9_constants(const DeviceInfo& device) {
  const Gfx9Facts facts = gfx9_facts(device.arch);
  SplitHeuristicConstants c;
  const double flops_per_us_per_cu = facts.attention_tflops * 1e6 / facts.compute_units;
  const TileConfig d64 = gfx9_tile_config(64), d128 = gfx9_tile_config(128);
  c.portable_iteration_us_d64 = 4.0 * d64.block_m * d64.block_n * 64 / flops_per_us_per_cu;
  c.portable_iteration_us_d128 = 4.0 * d128.block_m * d128.block_n * 128 / flops_per_us_per_cu;
  const double hbm_bytes_per_us = facts.hbm_tb_per_s * 1e6;
  const TileConfig narrow = gfx9_tile_config(128, true);
  const double narrow_block_bytes = 2.0 * narrow.block_n * 128 * kElementBytes;
  c.narrow_iteration_us = narrow_block_bytes /
                          (hbm_bytes_per_us / facts.compute_units / c.slots_per_sm_narrow);
  c.dram_bytes_per_us = hbm_bytes_per_us * kReachedHbmFraction;
  return c;
}

}  // namespace flashsplit
