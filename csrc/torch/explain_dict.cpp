#include "explain_dict.h"

#include "core/gate.h"
#include "core/tiles.h"

namespace flashsplit {
namespace {

pybind11::tuple grid_tuple(const LaunchGrid& grid) {
  return pybind11::make_tuple(grid.x, grid.y, grid.z);
}

pybind11::dict plan_details(const LaunchPlan& plan, int64_t b, int64_t sq, int64_t h,
                            int64_t hk) {
  pybind11::dict d;
  if (!plan.gate.ok) return d;
  d["block_m"] = plan.tiles.block_m;
  d["block_n"] = plan.tiles.block_n;
  // Whether a tile's rows pack a GQA group's query heads (every portable tile; Hopper tiles of
  // multi-token decode) or hold one head's rows.
  d["packs_heads"] = plan.tiles.packs_heads;
  // Paged k/v on Hopper tiles copied a row at a time (pages too small for TMA boxes).
  d["page_rows"] = plan.page_rows;
  d["split_block_n"] = plan.split_block_n;
  // Warps that share a portable block's rows, each over its part of every key block (0 on
  // Hopper tiles).
  d["key_warps"] = plan.tiles.wgmma ? 0 : plan.tiles.key_warps;
  // What the heuristic weighed: thread blocks per split, and how many fit on one SM.
  d["grid_blocks"] = forward_blocks(b, sq, h, hk, plan.tiles);
  d["blocks_per_sm"] = plan.tiles.blocks_per_sm;
  d["persistent"] = plan.persistent;
  d["carry"] = plan.carry;
  d["rotate_rounds"] = plan.rotate_rounds;
  d["tile_counter"] = plan.tile_counter;
  d["tile_group"] = plan.tile_group;
  d["running_max"] = plan.running_max;
  // Key-warp tiles: each key block's K and V copied apart, K after S = Q K^T, V after P V.
  d["staggered_kv"] = plan.staggered_kv;
  d["tail_tiles"] = plan.tail.tail_tiles;
  d["tail_parts"] = plan.tail.max_parts;
  d["forward_grid"] = grid_tuple(plan.forward_grid);
  d["tail_grid"] = grid_tuple(plan.tail_grid);
  d["combine_grid"] = grid_tuple(plan.combine_grid);
  d["combine_lanes"] = plan.combine_lanes;
  return d;
}

}  // namespace

pybind11::dict explain_dict(const LaunchPlan& plan, int64_t b, int64_t sq, int64_t h,
                            int64_t hk) {
  pybind11::dict d;
  d["path"] = plan.gate.ok ? "native" : "reference";
  d["kernel"] = plan.gate.ok ? kernel_family_name(plan.gate.family) : "reference";
  d["num_splits"] = plan.num_splits;
  d["reason"] = plan.gate.reason;
  // Why the gate trusts (or refuses) the GPU's kernels: "tested", "verified", "override",
  // "unverified"; "none" where it refused before looking at the GPU.
  d["verification"] = arch_trust_name(plan.gate.trust);
  d["details"] = plan_details(plan, b, sq, h, hk);
  return d;
}

pybind11::dict launch_record_dict(const LaunchRecord& r) {
  pybind11::dict d;
  d["kernel"] = kernel_family_name(r.family);
  d["num_splits"] = r.num_splits;
  d["block_m"] = r.block_m;
  d["block_n"] = r.block_n;
  d["packs_heads"] = r.packs_heads;
  d["page_rows"] = r.page_rows;
  d["key_warps"] = r.key_warps;
  d["carry"] = r.carry;
  d["rotate_rounds"] = r.rotate_rounds;
  d["tile_counter"] = r.tile_counter;
  d["tile_group"] = r.tile_group;
  d["running_max"] = r.running_max;
  d["staggered_kv"] = r.staggered_kv;
  d["tail_tiles"] = r.tail_tiles;
  d["tail_parts"] = r.tail_parts;
  d["forward_grid"] = grid_tuple(r.forward_grid);
  d["tail_grid"] = grid_tuple(r.tail_grid);
  d["combine_grid"] = grid_tuple(r.combine_grid);
  d["combine_lanes"] = r.combine_lanes;
  return d;
}

}  // namespace flashsplit
