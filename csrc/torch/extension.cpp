// The pybind11 module flashsplit._C: the only door from Python into the C++ layers.
#include <torch/extension.h>

#include "build_info.h"
#include "core/gate.h"
#include "forward.h"
#include "heuristic_bindings.h"
#include "plan.h"

namespace flashsplit {
namespace {

pybind11::dict build_info_dict() {
  BuildInfo info = current_build_info();
  pybind11::list tested;  // built archs this project's GPU suite passed on
  for (int cc : info.archs) {
    if (arch_tested(cc)) tested.append(cc);
  }
  pybind11::dict d;
  d["gpu_kernels_built"] = info.gpu_kernels_built;
  d["archs"] = info.archs;
  d["head_dims"] = info.head_dims;
  d["tested_archs"] = tested;
  d["hopper_kernels_built"] = info.hopper_kernels_built;
  d["amd_archs"] = info.amd_archs;
  d["build_id"] = build_id();
  return d;
}

pybind11::tuple grid_tuple(const LaunchGrid& grid) {
  return pybind11::make_tuple(grid.x, grid.y, grid.z);
}

// The kernel internals of a native plan: the tiles, the Hopper walk and the launches.
pybind11::dict plan_details(const LaunchPlan& plan, const at::Tensor& q, const at::Tensor& k) {
  pybind11::dict d;
  if (!plan.gate.ok) return d;
  d["block_m"] = plan.tiles.block_m;
  d["block_n"] = plan.tiles.block_n;
  d["split_block_n"] = plan.split_block_n;
  // What the heuristic weighed: thread blocks per split, and how many fit on one SM.
  d["grid_blocks"] = forward_blocks(q.size(0), q.size(1), q.size(2), k.size(2), plan.tiles);
  d["blocks_per_sm"] = plan.tiles.blocks_per_sm;
  d["persistent"] = plan.persistent;
  d["carry"] = plan.carry;
  d["rotate_rounds"] = plan.rotate_rounds;
  d["tile_counter"] = plan.tile_counter;
  d["tile_group"] = plan.tile_group;
  d["tail_tiles"] = plan.tail.tail_tiles;
  d["tail_parts"] = plan.tail.max_parts;
  d["forward_grid"] = grid_tuple(plan.forward_grid);
  d["tail_grid"] = grid_tuple(plan.tail_grid);
  d["combine_grid"] = grid_tuple(plan.combine_grid);
  d["combine_lanes"] = plan.combine_lanes;
  return d;
}

pybind11::dict explain_plan(const LaunchPlan& plan, const at::Tensor& q, const at::Tensor& k) {
  pybind11::dict d;
  d["path"] = plan.gate.ok ? "native" : "reference";
  d["kernel"] = plan.gate.ok ? kernel_family_name(plan.gate.family) : "reference";
  d["num_splits"] = plan.num_splits;
  d["reason"] = plan.gate.reason;
  // Why the gate trusts (or refuses) the GPU's kernels: "tested", "verified", "override",
  // "unverified"; "none" where it refused before looking at the GPU.
  d["verification"] = arch_trust_name(plan.gate.trust);
  d["details"] = plan_details(plan, q, k);
  return d;
}

pybind11::dict explain(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                       double dropout_p, int64_t window_left, int64_t window_right,
                       double softcap, bool has_alibi, int64_t num_splits,
                       bool arch_verified) {
  check_attention_inputs(q, k, v, num_splits);
  FeatureOptions features{causal, dropout_p, window_left, window_right, softcap, has_alibi};
  return explain_plan(make_plan(q, k, v, features, num_splits, arch_verified), q, k);
}

// What the launchers ran, in the keys of explain()'s details.
pybind11::dict record_dict(const LaunchRecord& r) {
  pybind11::dict d;
  d["kernel"] = kernel_family_name(r.family);
  d["num_splits"] = r.num_splits;
  d["block_m"] = r.block_m;
  d["block_n"] = r.block_n;
  d["carry"] = r.carry;
  d["rotate_rounds"] = r.rotate_rounds;
  d["tile_counter"] = r.tile_counter;
  d["tile_group"] = r.tile_group;
  d["tail_tiles"] = r.tail_tiles;
  d["tail_parts"] = r.tail_parts;
  d["forward_grid"] = grid_tuple(r.forward_grid);
  d["tail_grid"] = grid_tuple(r.tail_grid);
  d["combine_grid"] = grid_tuple(r.combine_grid);
  d["combine_lanes"] = r.combine_lanes;
  return d;
}

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, double softmax_scale, bool causal,
                                           int64_t num_splits, bool arch_verified) {
  return native_forward(q, k, v, softmax_scale, causal, num_splits, arch_verified);
}

// The forward with what it planned (explain's form) and what its launchers ran.
pybind11::tuple forward_recorded(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 double softmax_scale, bool causal, int64_t num_splits,
                                 bool arch_verified) {
  LaunchPlan plan;
  LaunchRecord record;
  auto [out, lse] = native_forward(q, k, v, softmax_scale, causal, num_splits,
                                   arch_verified, &plan, &record);
  return pybind11::make_tuple(out, lse, explain_plan(plan, q, k), record_dict(record));
}

}  // namespace
}  // namespace flashsplit

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  m.doc() = "flashsplit native attention forward (split-KV) and its capability gate";
  m.def("build_info", &flashsplit::build_info_dict, "What this build contains.");
  m.def("explain", &flashsplit::explain, "The plan of a call, without running it.",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("dropout_p"),
        py::arg("window_left"), py::arg("window_right"), py::arg("softcap"),
        py::arg("has_alibi"), py::arg("num_splits"), py::arg("arch_verified") = false);
  m.def("forward", &flashsplit::forward,
        "Native forward: (out, lse). Raises with the gate's reason when it refuses.",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("softmax_scale"), py::arg("causal"),
        py::arg("num_splits"), py::arg("arch_verified") = false);
  m.def("forward_recorded", &flashsplit::forward_recorded,
        "Native forward with its plan and a record of what the launchers ran: "
        "(out, lse, plan, record).",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("softmax_scale"), py::arg("causal"),
        py::arg("num_splits"), py::arg("arch_verified") = false);
  flashsplit::bind_heuristic(m);
}
