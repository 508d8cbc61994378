#include "core/plan.h"

#include <algorithm>

#include "core/combine_math.h"
#include "core/hopper_tiles.h"
#include "core/portable_grid.h"
#include "core/portable_tiles.h"
#include "core/split_heuristic.h"
#include "core/tile_order.h"

namespace flashsplit {

TileConfig tiles_for(KernelFamily family, const AttnProblem& p) {
  const int d = static_cast<int>(p.d);
  switch (family) {
    case KernelFamily::kHopperWgmma:
      if (hopper_packs_heads(p.sq, p.h, p.hk, d)) return hopper_packed_tile_config(p.h / p.hk);
      return hopper_tile_config(d, p.sq, p.causal, p.sk, 0, 0, 2,
                                static_cast<int>(value_head_dim(p)), p.per_sequence);
    case KernelFamily::kPortableMma:
      return portable_tile_config(d, sm80_uses_narrow_tiles(p.sq, p.h, p.hk));
    case KernelFamily::kPortableMfma:
      return gfx9_tile_config(d, use_narrow_tiles(p.sq, p.h, p.hk));
    case KernelFamily::kNone: break;
  }
  return TileConfig{0, 0, 0, 0};
}

TileConfig tiles_for_run(KernelFamily family, const AttnProblem& p, int sm_count,
                         int num_splits) {
  const TileConfig modelled = tiles_for(family, p);
  // Only the Hopper tiles of one head's rows weigh the grid (those packing a group do not);
  // over paged k/v, between the heights whose sequence instances read its pages.
  if (family != KernelFamily::kHopperWgmma || modelled.packs_heads) return modelled;
  return hopper_tile_config(static_cast<int>(p.d), p.sq, p.causal, p.sk, p.b * p.h, sm_count,
                            num_splits, static_cast<int>(value_head_dim(p)), p.per_sequence,
                            p.page_size);
}

SplitHeuristicConstants constants_for(KernelFamily family, const DeviceInfo& device) {
  switch (family) {
    case KernelFamily::kPortableMfma: return gfx9_constants(device);
    case KernelFamily::kHopperWgmma: return hopper_constants(device);
    default: return nvidia_constants(device);
  }
}

namespace {

// The split model's G on the Hopper tiles (g, num_splits = 0): 1 where the unsplit call's tiles
// differ from the modelled ones (taller tiles, a tail split) and are modelled to end first.
int hopper_modelled_splits(const AttnProblem& p, const DeviceInfo& device, int g,
                           const TileConfig& modelled, const TileConfig& unsplit,
                           const SplitHeuristicConstants& constants) {
  const TailSplit tail =
      tail_split_for_run(KernelFamily::kHopperWgmma, p, unsplit, device.sm_count, 1);
  if (unsplit.block_m == modelled.block_m && !tail.active()) return g;
  const int d = static_cast<int>(p.d);
  const double split_us = modelled_split_us(p, device, modelled, g, constants) *
                          hopper_row_cost_pct(d, modelled.block_m, p.causal, p.sk);
  const double unsplit_us = modelled_split_us(p, device, unsplit, 1, constants) *
                            hopper_row_cost_pct(d, unsplit.block_m, p.causal, p.sk) *
                            tail_split_time_share(tail, tail_overhead_blocks(unsplit.block_n));
  return unsplit_us >= 0 && unsplit_us <= split_us ? 1 : g;
}

}  // namespace

int resolve_splits_for(KernelFamily family, const AttnProblem& p, const DeviceInfo& device,
                       int requested, const SplitHeuristicConstants& constants) {
  if (takes_key_warps_for_run(family, p, device, requested)) return 1;
  const TileConfig modelled = tiles_for(family, p);
  const int g = resolve_num_splits(requested, p, device, modelled, constants);
  // The portable grid's y holds G blocks per chunk of 65535 (batch, k/v head) pairs.
  if (family != KernelFamily::kHopperWgmma) return std::min(g, max_portable_splits(p.b * p.hk));
  if (requested != 0) return g;
  const TileConfig unsplit = tiles_for_run(family, p, device.sm_count, 1);
  const bool declined =
      g > 1 && !unsplit.packs_heads &&
      hopper_prefill_declines_split(p.b * p.h, p.sq, p.sk, unsplit.block_m, unsplit.block_n,
                                    device.sm_count);
  const int model_g =
      g <= 1 || declined ? 1 : hopper_modelled_splits(p, device, g, modelled, unsplit, constants);
  // Dense prefill at d=64 and 128 (hopper_prefill_splits): the plan's G where the model's is 1
  // or declined; causal grids of as many tiles as SMs split only where the wait pays.
  const long long units = p.b * p.h;
  const long long tiles = units * ceil_div(p.sq, kHopperBaseRows);
  const int d = static_cast<int>(p.d);
  if (p.per_sequence || unsplit.packs_heads || value_head_dim(p) != p.d ||
      !hopper_prefill_splits_apply(d, p.sq, p.sk)) {
    return model_g;
  }
  if (model_g <= 1 || declined) {
    return hopper_prefill_splits(units, p.sq, p.sk, p.causal, d, device.sm_count);
  }
  if (p.causal && tiles >= device.sm_count &&
      !hopper_prefill_split_pays(
          hopper_prefill_wait(units, p.sq, p.sk, p.causal, device.sm_count), d)) {
    return 1;
  }
  return model_g;
}

TailSplit tail_split_for_run(KernelFamily family, const AttnProblem& p, const TileConfig& tiles,
                             int sm_count, int num_splits) {
  if (family != KernelFamily::kHopperWgmma || tiles.block_m <= 0 || p.per_sequence ||
      tiles.packs_heads || !tail_split_applies(p.causal, num_splits != 1, tiles.block_n)) {
    return TailSplit{};
  }
  const long long tiles_total = forward_blocks(p.b, p.sq, p.h, p.hk, tiles);
  const long long key_blocks = (p.sk + tiles.block_n - 1) / tiles.block_n;
  if (key_blocks >= (1LL << 30)) return TailSplit{};
  return plan_tail_split(tiles_total, static_cast<int>(key_blocks), sm_count,
                         tail_overhead_blocks(tiles.block_n));
}

int key_warp_blocks_per_sm_for_run(KernelFamily family, const AttnProblem& p,
                                   const DeviceInfo& device, int requested) {
  if (family != KernelFamily::kPortableMma || requested != 0 || device.sm_count <= 0) return 0;
  const TileConfig narrow = tiles_for(family, p);
  if (narrow.block_m > kNarrowMaxRows) return 0;
  const long long blocks = forward_blocks(p.b, p.sq, p.h, p.hk, narrow);
  const double share = hbm_share_over_h100(device);
  const int per_sm = sm80_key_warp_blocks_per_sm(
      blocks, device.sm_count, device.smem_per_block_optin, static_cast<int>(p.d), p.sq == 1,
      sm80_key_warp_min_blocks(device.sm_count, device.dram_bytes_per_us),
      sm80_key_warp_max_blocks(device.sm_count, p.sq == 1, share));
  if (p.page_size > 0 && per_sm > 0 &&
      !sm80_key_warps_walk_pages(blocks, device.sm_count, per_sm, share, p.sk)) {
    return 0;
  }
  if (p.page_size == 0 && per_sm > 0) {
    const long long kv_bytes = 2 * p.sk * (p.d + value_head_dim(p));  // K and V, 16-bit
    const int split_g = resolve_num_splits(0, p, device, narrow, constants_for(family, device));
    if (!sm80_key_warps_walk_cache(blocks, device.sm_count, per_sm, share, kv_bytes, split_g)) {
      return 0;
    }
  }
  return per_sm;
}

bool takes_key_warps_for_run(KernelFamily family, const AttnProblem& p,
                             const DeviceInfo& device, int requested) {
  return key_warp_blocks_per_sm_for_run(family, p, device, requested) > 0;
}

bool carry_across_tiles_for_run(KernelFamily family, const AttnProblem& p,
                                const TileConfig& tiles, bool tile_counter) {
  // The 128-row ping-pong tiles (those packing a group's heads fill fewer of their rows).
  const bool ping_pong = tiles.block_m == kHopperBaseRows || (tiles.wgmma && tiles.packs_heads);
  return family == KernelFamily::kHopperWgmma && ping_pong && !tile_counter &&
         hopper_persistent(p.sk) &&
         hopper_carry_across_tiles(static_cast<int>(p.d), p.causal);
}

bool takes_running_max_for_run(KernelFamily family, const AttnProblem& p,
                               const TileConfig& tiles, int num_splits) {
  // Key blocks loaded as TMA boxes (contiguous k/v, pages of 64 keys or of whole blocks), or
  // copied a row at a time where the tiles have an instance for it.
  const bool boxes = hopper_keys_load_as_boxes(p.page_size, tiles.block_n);
  const int d = static_cast<int>(p.d);
  return family == KernelFamily::kHopperWgmma && tiles.block_m == kHopperBaseRows &&
         !tiles.packs_heads && num_splits == 1 && (boxes || hopper_running_max_copies_rows(d)) &&
         hopper_causal_running_max(d, p.causal, p.sk, p.per_sequence);
}

bool rotates_rounds_for_run(KernelFamily family, const AttnProblem& p, const TileConfig& tiles,
                            int num_splits) {
  return family == KernelFamily::kHopperWgmma && hopper_persistent(p.sk) &&
         hopper_rotate_rounds(p.causal, num_splits, p.sq, tiles.block_m);
}

// Causal tiles of consumers side by side (192 and 256 rows) run persistent at any length, their
// tiles drawn from a counter in the grouped order: as blocks free up they take the longest
// tiles left, as a launch of a block per tile hands them out, and the next tile's loads overlap
// the current tile's epilogue (over a block per tile: +1-3.4% at d=64 to 128 with 8k keys,
// +2.8-4.1% on GQA shapes of 4k-8k keys, within 1% at 16k-32k). So do the long causal 128-row
// tiles at the running max, where their keys load as TMA boxes (the producer warpgroup that
// copies pages a row at a time walks a static order together) and they are not chunks (those
// run persistent in the head-major order: hopper_persistent_chunk): over a block per tile
// +0.4-2.3% on 4-8 heads of 8k-16k keys at d=64 to 128, outputs bitwise the same (H200).
// On persistent d=128 calls the 128-row tiles at the running max draw too, unless the static
// rounds end close to longest first over few key blocks (hopper_causal_walk_static), and so do
// unsplit dense d=192 calls from 1024 keys, and d=256 ones whose static rounds end far after
// longest first, that are not chunks (hopper_large_head_draws).
bool draws_tiles_from_counter(KernelFamily family, const AttnProblem& p,
                              const TileConfig& tiles, int num_splits, int sm_count) {
  if (family != KernelFamily::kHopperWgmma || !p.causal) return false;
  if (tiles.block_m == kHopperTallRows || tiles.block_m == kHopperWideRows) return true;
  const int d = static_cast<int>(p.d);
  if (d > 128) {
    return num_splits == 1 && !p.per_sequence && p.page_size == 0 &&
           !hopper_persistent_chunk(p.sq, p.sk, p.causal) &&
           hopper_large_head_draws(d, static_cast<int>(value_head_dim(p)), p.causal,
                                   p.b * p.h, p.sq, p.sk, sm_count);
  }
  if (!hopper_keys_load_as_boxes(p.page_size, tiles.block_n) ||
      hopper_persistent_chunk(p.sq, p.sk, p.causal) ||
      !takes_running_max_for_run(family, p, tiles, num_splits)) {
    return false;
  }
  // Long calls draw too: over more than 16 key blocks no walk is static.
  const long long units = static_cast<long long>(num_splits) * p.b * p.h;
  return !hopper_causal_walk_static(units, p.sq, p.sk, sm_count);
}

namespace {

// Causal tiles run in the grouped order of tile_order.h, except on persistent launches of a
// static walk (the short ping-pong tiles, chunks), tuned to the head-major order (one unit per
// group), as is everything without the mask. Launched a block per tile or drawn from a
// counter, the head-major order hands the SMs each head's tiles longest first but the heads
// one after another, and the blocks that draw the last heads' long tiles finish late:
// simulated 11-23% over longest-first on grids of 8-32 heads of 4k-8k rows.
int causal_group_for(const AttnProblem& p, const TileConfig& tiles, int num_splits,
                     bool persistent, bool tile_counter) {
  if (!p.causal || (persistent && !tile_counter)) return 1;
  // A unit is a query head's rows, or a GQA group's where the tiles pack the heads; the units
  // of one k/v head (heads / hk of them) share its keys and values.
  const long long heads = tiles.packs_heads ? p.hk : p.h;
  const long long units = static_cast<long long>(num_splits) * p.b * heads;
  const long long kv_bytes = causal_unit_kv_bytes(p.sk, static_cast<int>(p.d), 2, num_splits,
                                                  static_cast<int>(heads / p.hk));
  return causal_tile_group(units, kv_bytes);
}

// Whether the tiles of a call on the sequence instances differ in work by their sequence:
// sequences of their own lengths, and a GQA group's heads packed into a dense call's sequence.
// Sequences of equal lengths (AttnProblem::equal_lengths) not packing heads are tiles of a dense
// call's work.
bool tiles_differ_by_sequence(const AttnProblem& p, const LaunchPlan& plan) {
  return plan.sequences && !(p.equal_lengths && !plan.tiles.packs_heads);
}

void plan_hopper_walk(const AttnProblem& p, const DeviceInfo& device, const PlanOptions& options,
                      LaunchPlan& plan) {
  plan.running_max = takes_running_max_for_run(plan.gate.family, p, plan.tiles, plan.num_splits);
  plan.tile_counter = draws_tiles_from_counter(plan.gate.family, p, plan.tiles, plan.num_splits,
                                               device.sm_count);
  plan.persistent =
      device.sm_count > 0 &&
      (hopper_persistent(p.sk) || hopper_persistent_chunk(p.sq, p.sk, p.causal) ||
       hopper_persistent_unmasked(p.causal, plan.num_splits, plan.tiles.block_m,
                                  tiles_differ_by_sequence(p, plan)) ||
       plan.tile_counter);
  if (options.allow_tail_split) {
    plan.tail = tail_split_for_run(plan.gate.family, p, plan.tiles, device.sm_count,
                                   plan.num_splits);
  }
  plan.carry = carry_across_tiles_for_run(plan.gate.family, p, plan.tiles, plan.tile_counter);
  plan.rotate_rounds = rotates_rounds_for_run(plan.gate.family, p, plan.tiles, plan.num_splits);
  plan.tile_group =
      causal_group_for(p, plan.tiles, plan.num_splits, plan.persistent, plan.tile_counter);
  const long long tiles = plan.tiles_per_split * plan.num_splits;
  const long long main_tiles = plan.tail.active() ? plan.tail.main_tiles : tiles;
  plan.forward_grid.x = plan.persistent ? std::min<long long>(main_tiles, device.sm_count)
                                        : main_tiles;
  if (plan.tail.active()) plan.tail_grid.x = plan.tail.chunks;
}

// The problem whose grid an unsplit call's tiles are chosen for. A sequence call with a fixed
// num_splits takes the tiles of a batch of kInvariantTilingBatch sequences of its layout,
// whatever its own number: the Hopper tile height follows the waves of the grid's (sequence,
// head) pairs, the heights' kernels round a row apart (the 128-row ping-pong consumers move the
// max at every block, those side by side only past a slack), and so a sequence's bits would
// follow the number of its batch-mates. So many sequences round no wave away: the height whose
// rows cost least, as on a full GPU. Against the waves of the call's own batch (H200, 8 shapes
// of 8-64 sequences of 777-4096 tokens, d=64 to 128, equal and unequal lengths, alternated):
// the same height on 15 of 16 calls, 6.5% faster on the other; the height of one sequence
// alone ran 2-26% slower on 10 of them. Calls of one or two sequences of 1000-6000 tokens on 4
// to 32 heads, whose grids leave SMs idle, ran 2-41% slower (num_splits = 0 sizes the tiles for
// the call's own batch).
constexpr long long kInvariantTilingBatch = 1 << 16;
AttnProblem tiled_as(const AttnProblem& p, int requested) {
  AttnProblem tiled = p;
  if (p.per_sequence && requested != 0) tiled.b = kInvariantTilingBatch;
  return tiled;
}

void plan_combine(const AttnProblem& p, LaunchPlan& plan) {
  if (plan.num_splits < 2) return;
  const int d = static_cast<int>(value_head_dim(p));  // the partials' columns
  plan.combine_lanes = combine_lanes(plan.num_splits);
  plan.combine_grid.x = combine_blocks(p.b * p.h * p.sq, d, plan.combine_lanes);
}

}  // namespace

LaunchPlan make_launch_plan(const AttnProblem& p, const DeviceInfo& device,
                            const BuildInfo& build, const PlanOptions& options,
                            long long requested) {
  LaunchPlan plan;
  plan.gate = check_native(p, device, build, options.gate);
  if (!plan.gate.ok) return plan;
  // Any request beyond the key-block count is clamped anyway; cap before narrowing to int.
  const int wanted = static_cast<int>(std::min<long long>(std::max(requested, 0LL), 1 << 20));
  // Paged k/v is modelled as contiguous: the narrow tile's paged walk reads one table entry per
  // run of rows (sm80/policy.cuh, load_paged_tile), the Hopper tiles a page per TMA box or, for
  // smaller pages, a row per thread (sm90/mainloop_load.cuh); both run within a few percent of
  // it, up to a fifth more over pages of 16 on the Hopper tiles.
  const auto splits_on = [&](KernelFamily family) {
    return resolve_splits_for(family, p, device, wanted, constants_for(family, device));
  };
  plan.num_splits = splits_on(plan.gate.family);
  // Split sequence calls the Hopper kernels have no instance for run on the portable ones.
  if (plan.gate.family == KernelFamily::kHopperWgmma && p.per_sequence &&
      plan.num_splits > 1 && !hopper_sequence_splits_built(static_cast<int>(p.d), p.causal)) {
    plan.gate.family = KernelFamily::kPortableMma;
    plan.num_splits = splits_on(plan.gate.family);
  }
  const KernelFamily family = plan.gate.family;
  plan.paged = p.page_size > 0;
  const bool hopper = family == KernelFamily::kHopperWgmma;
  // Split calls over pages copied a row at a time (those of the 128-row tiles' key blocks).
  if (plan.paged && hopper && hopper_page_box_rows(p.page_size) == 0 && wanted == 0) {
    const TileConfig modelled = tiles_for(family, p);
    plan.num_splits = hopper_page_rows_splits(
        plan.num_splits, forward_blocks(p.b, p.sq, p.h, p.hk, modelled), device.sm_count,
        ceil_div(p.sk, modelled.block_n));
  }
  plan.tiles = tiles_for_run(family, tiled_as(p, wanted), device.sm_count, plan.num_splits);
  plan.page_rows =
      plan.paged && hopper && !hopper_keys_load_as_boxes(p.page_size, plan.tiles.block_n);
  // Unsplit (resolve_splits_for).
  if (const int per_sm = key_warp_blocks_per_sm_for_run(family, p, device, wanted)) {
    plan.tiles = sm80_key_warp_tile_config(static_cast<int>(p.d), per_sm);
    plan.staggered_kv = sm80_key_warp_staggered(forward_blocks(p.b, p.sq, p.h, p.hk, plan.tiles),
                                                device.sm_count, per_sm, p.sq == 1,
                                                hbm_share_over_h100(device));
  }
  // Tiles that pack heads run the sequence instances (a dense call's sequence is its batch).
  plan.sequences = p.per_sequence || p.page_size > 0 ||
                   (family == KernelFamily::kHopperWgmma && plan.tiles.packs_heads);
  plan.split_block_n = tiles_for(family, p).block_n;
  plan.tiles_per_split = forward_blocks(p.b, p.sq, p.h, p.hk, plan.tiles);
  if (family == KernelFamily::kHopperWgmma) {
    plan_hopper_walk(p, device, options, plan);
  } else {
    const PortableGridYZ yz = portable_grid_yz(p.b * p.hk, plan.num_splits);
    plan.forward_grid = LaunchGrid{row_tiles(p.sq, p.h, p.hk, plan.tiles.block_m), yz.y, yz.z};
  }
  plan_combine(p, plan);
  plan.dependent_launch = device.vendor == Vendor::kNvidia && device.cc >= 90;
  return plan;
}

std::size_t tail_workspace_bytes_for(const LaunchPlan& plan, int head_dim) {
  return tail_workspace_bytes(plan.tail, plan.tiles.block_m, head_dim);
}

}  // namespace flashsplit
