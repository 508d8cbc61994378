// How many key splits (G) to run for a call the gate admitted.
#pragma once

#include "core/problem.h"
#include "core/tiles.h"

namespace flashsplit {

// Every tunable constant of the heuristic lives here, measured or fitted on an H100 (132 SMs,
// HBM3); docs/design.md says how, and on which measured shapes in benchmarks/data. The model is
// in microseconds: a compute term (waves of thread blocks, each walking its key blocks) and a
// DRAM term (the bytes the call must move), since a count of waves alone misses memory-bound
// grids (long keys, few query rows, no GQA reuse), where G follows the traffic rather than the
// waves. Narrow (decode) tiles have their own block overhead, combine cost and per-batch combine
// latency: they are memory-bound, and their combine deals a row's splits to several threads
// that each read one batch of loads (combine_math.h).
struct SplitHeuristicConstants {
  // Time of one key-block iteration of one thread block, in microseconds, per kernel family and
  // head dim (d <= 64 uses the d64 value, larger d the d128 one). Hopper: per 128 query rows.
  double hopper_iteration_us_d64 = 1.16;
  double hopper_iteration_us_d128 = 1.48;
  double portable_iteration_us_d64 = 0.97;
  double portable_iteration_us_d128 = 1.70;
  double narrow_iteration_us = 1.2;
  // Narrow (decode) tiles: blocks per SM that run at full speed together (they are memory-
  // bound): a grid under them splits up to them, and one past them unsplit shares the HBM's
  // rate among its resident blocks (see waves below). Wide tiles: one per SM, see
  // co_resident_speedup.
  double slots_per_sm_narrow = 2.0;
  // Narrow tiles: blocks on one SM share it, so once there are more blocks than SMs the
  // busiest SM, with ceil(blocks / SMs), sets the pace: compute is scaled by
  // (ceil(blocks / SMs) / (blocks / SMs)) ^ narrow_crowding. Measured: 158 blocks (26 SMs
  // with two) ran 15-26% slower than 128 with less work each; 0.25-0.5 fit
  // h100_prefill_fit.csv alike.
  double narrow_crowding = 0.5;
  // Wide portable tiles with room for two blocks per SM: throughput of two co-resident blocks
  // relative to one (latency hiding), applied once the grid puts two on an SM.
  double co_resident_speedup = 1.3;
  // Fixed cost of a thread block (prologue, first loads, epilogue and its partial write), in
  // key-block iterations of its own family: portable, and Hopper.
  double block_overhead = 2.0;
  double block_overhead_hopper = 4.0;
  double narrow_block_overhead = 10.0;
  // DRAM bandwidth the kernels reach, bytes per microsecond (3.4 TB/s fits h100_prefill_fit.csv
  // best, 3.2 h100_decode_fit.csv; the H100's peak is 3.35: the term also stands in for L2 hits
  // on the smaller grids).
  double dram_bytes_per_us = 3.2e6;
  // Tiles packing a GQA group's heads (Hopper decode; hopper_constants): their waves stream at
  // the HBM's rate as they reach it, packed_dram_bytes_per_us, or with fewer blocks than that
  // needs at packed_sm_bytes_per_us a block, and each pays packed_wave_latency_us before its
  // bytes flow (its blocks' first loads) and after (their epilogues). 0: their memory term is
  // the other wide tiles'.
  double packed_dram_bytes_per_us = 0.0;
  double packed_sm_bytes_per_us = 0.0;
  double packed_wave_latency_us = 0.0;
  // Of those, a split grid (G > 1) of one wave at d >= 128 streams this fraction slower: such
  // grids ran 2-7% behind two waves of blocks half as long.
  double packed_one_wave_split_penalty = 0.0;
  // A memory-bound grid of one wave of wide tiles runs at the pace of its slowest block; more,
  // shorter waves even that out: the DRAM term is scaled by (1 + one_wave_imbalance / waves).
  // Not for narrow tiles, whose memory-bound grids measured fastest at exactly one full wave.
  double one_wave_imbalance = 0.03;
  // A last wave only partly full leaves bandwidth unused: the DRAM term is scaled by
  // (1 + partial_wave_penalty * (waves / fractional waves - 1)).
  double partial_wave_penalty = 0.05;
  // Cost of each split (the combine walks a row's splits in turn), microseconds.
  double split_latency_us = 0.4;
  // Cost of splitting at all: the combine kernel's launch, microseconds (its pass over the
  // partials is charged as DRAM traffic).
  double combine_us = 3.0;
  // Narrow tiles: the combine's cost per batch of loads of its slowest thread (combine_batches:
  // a thread folds up to kCombineSplitsPerChunk splits per batch, and a row's splits are dealt
  // to up to 32 threads), and of splitting at all, microseconds; both only where G > 1. Decode
  // calls last 10-1000 us, where these two decide G; the wide tiles' per-split form fits those
  // best.
  double narrow_chunk_latency_us = 3.0;
  double narrow_combine_us = 2.0;
  // A split must beat G = 1 by this fraction of G = 1's modelled time: where the grid already
  // fills the GPU the model's gain is only wave rounding, which measures within noise.
  double min_gain = 0.03;
  // Where the unsplit grid already runs multi_wave_grid waves or more, a split must gain
  // min_gain_multi_wave instead: the modelled gain there is wave rounding of 2-4%, and the
  // H100 reads a 10-wave grid's best G differently from run to run by as much (bench_splitkv's
  // (1,8,8,32768,32768,64): G = 2 from 1% faster to 10% slower than G = 1 over seven runs).
  // No choice on the 3,344 prefill shapes measured for the fit changes with it.
  double min_gain_multi_wave = 0.04;
  double multi_wave_grid = 4.0;
  int max_splits = 256;
  int min_key_blocks_per_split = 1;
};

// The modelled time of running the call with g splits, in microseconds:
//   max(compute, memory) + split cost + [g > 1] (combine + partials / bandwidth)
// compute = waves * (ceil(key_blocks / g) + block overhead) * iteration time
//           (/ co_resident_speedup for wide tiles with blocks_per_sm >= 2 once waves >= 2;
//            x (ceil(blocks / SMs) / (blocks / SMs)) ^ narrow_crowding for narrow tiles once
//            blocks > SMs),
// waves = ceil(grid_blocks * g / slots), slots = SMs (x slots_per_sm_narrow for narrow tiles);
//         for a narrow grid past its slots unsplit (grid_blocks > slots), blocks up to the SMs'
//         resident ones (SMs x blocks_per_sm) share the HBM's rate instead: each full wave of
//         resident blocks counts resident / slots waves, the rest its share of the slots, at
//         least one;
// memory = (K and V once per k/v head + Q + O + [g > 1] partials written) / bandwidth,
//          scaled by the one-wave imbalance (wide tiles) and partial-wave penalty above,
//          + (waves - 1) * narrow_block_overhead * iteration time for narrow tiles (past the
//          first wave, each wave's block overhead is paid on the DRAM stream too);
// split cost = split_latency_us * g (wide) or [g > 1] narrow_chunk_latency_us * combine_batches
//              (narrow),
// combine = combine_us (wide) or narrow_combine_us (narrow).
// Returns a negative value when the tiles or the device cannot run the problem.
double modelled_split_us(const AttnProblem& problem, const DeviceInfo& device,
                         const TileConfig& tiles, int g,
                         const SplitHeuristicConstants& constants = SplitHeuristicConstants{});

// Returns the G >= 1 with the least modelled_split_us, of the fewest G of each split length
// (ceil(key blocks / G)); the smallest such G on ties, and 1
// unless that G gains min_gain over G = 1 (min_gain_multi_wave where the unsplit grid is
// multi_wave_grid waves of `slots` or more). Never more than the number of key blocks (over
// min_key_blocks_per_split) or max_splits.
int choose_num_splits(const AttnProblem& problem, const DeviceInfo& device,
                      const TileConfig& tiles,
                      const SplitHeuristicConstants& constants = SplitHeuristicConstants{});

// The G that actually runs for a requested num_splits: 0 -> heuristic, 1 -> 1,
// >= 2 -> clamped to [1, number of key blocks]. Negative values are rejected before this.
int resolve_num_splits(int requested, const AttnProblem& problem, const DeviceInfo& device,
                       const TileConfig& tiles,
                       const SplitHeuristicConstants& constants = SplitHeuristicConstants{});

// The constants of the NVIDIA kernels on a device: the H100 fit, with the narrow (decode) tiles'
// slots_per_sm_narrow scaled by the HBM bandwidth each SM gets over the H100's
// (hbm_share_over_h100) and rounded to whole blocks, where that makes more than two. A one-warp
// block keeps a key block in flight, and the HBM needs bytes in flight in proportion to its
// bandwidth: on the H200 (1.44 times the H100's share, three slots) nine of ten decode shapes of
// 8-64 blocks ran fastest split into about three blocks an SM, and the heuristic's G there runs
// 1.7-2.9% faster than at two slots, 6-8% over pages (docs/design.md).
SplitHeuristicConstants nvidia_constants(const DeviceInfo& device);

// The constants of the Hopper kernels on a device: nvidia_constants, and where each SM gets
// more of the HBM than on the H100 (high_hbm_share), the packed tiles' wave model at the
// device's HBM rate (packed_dram_bytes_per_us and the two after it). Fitted on the H200
// (docs/design.md, "A GPU with more HBM bandwidth per SM").
SplitHeuristicConstants hopper_constants(const DeviceInfo& device);

// Published figures of an AMD target the gfx9 constants are derived from: its compute units,
// the dense bf16 rate an attention forward reaches on it (aiter's hand-written forward: 592
// TFLOPS at d=128 on MI300X, about 1438 on MI355X; MI250X's peak scaled by the same fraction as
// MI300X's) and its HBM bandwidth.
struct Gfx9Facts {
  const char* arch;
  int compute_units;
  double attention_tflops;
  double hbm_tb_per_s;
};
// The facts of device.arch (gfx90a: one GCD of an MI250X; gfx942: MI300X; gfx950: MI355X);
// gfx942's for a target not in the table.
Gfx9Facts gfx9_facts(const std::string& arch);

// The constants of the gfx9 (MFMA) kernels on a device, DERIVED from gfx9_facts, not measured:
// a wide tile's key-block iteration is its matrix work (4 * block_m * block_n * d flops) at the
// reachable rate of one compute unit; a narrow tile's is its K and V bytes at half a compute
// unit's share of HBM (two such tiles share a unit: slots_per_sm_narrow), which is also how the
// H100's fitted narrow iteration time relates to its HBM; the DRAM rate is the same fraction of
// HBM as the H100's fit. The rest (overheads, combine costs, gain thresholds) is the H100 fit.
// `benchmarks/tune_num_splits.py` refits them on the hardware.
SplitHeuristicConstants gfx9_constants(const DeviceInfo& device);

}  // namespace flashsplit
