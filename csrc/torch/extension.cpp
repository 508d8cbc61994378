// The pybind11 module flashsplit._C: the only door from Python into the C++ layers.
#include <torch/extension.h>

#include "build_info.h"
#include "core/gate.h"
#include "forward.h"
#include "plan.h"

namespace flashsplit {
namespace {

pybind11::dict build_info_dict() {
  BuildInfo info = current_build_info();
  pybind11::list tested;
  for (int cc : info.archs) {
    if (arch_tested(cc)) tested.append(cc);
  }
  pybind11::dict d;
  d["gpu_kernels_built"] = info.gpu_kernels_built;
  d["archs"] = info.archs;
  d["head_dims"] = info.head_dims;
  d["tested_archs"] = tested;
  d["hopper_kernels_built"] = info.hopper_kernels_built;
  return d;
}

pybind11::dict explain(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                       double dropout_p, int64_t window_left, int64_t window_right,
                       double softcap, bool has_alibi, int64_t num_splits,
                       bool allow_untested_arch) {
  check_attention_inputs(q, k, v, num_splits);
  FeatureOptions features{causal, dropout_p, window_left, window_right, softcap, has_alibi};
  Plan plan = make_plan(q, k, v, features, num_splits, allow_untested_arch);
  pybind11::dict d;
  d["path"] = plan.gate.ok ? "native" : "reference";
  d["num_splits"] = plan.num_splits;
  d["kernel"] = plan.gate.ok ? kernel_family_name(plan.gate.family) : "reference";
  d["reason"] = plan.gate.reason;
  d["block_m"] = plan.tiles.block_m;
  d["block_n"] = plan.tiles.block_n;
  d["split_block_n"] = plan.split_block_n;
  // What the heuristic weighed: thread blocks per split, and how many fit on one SM.
  d["grid_blocks"] = plan.gate.ok ? forward_blocks(q.size(0), q.size(1), q.size(2), k.size(2),
                                                   plan.tiles)
                                  : 0;
  d["blocks_per_sm"] = plan.tiles.blocks_per_sm;
  // The last round of an unsplit call spread over every SM: its tiles (0 = off) and the most
  // pieces one of them is cut into.
  d["tail_tiles"] = plan.tail.tail_tiles;
  d["tail_parts"] = plan.tail.max_parts;
  // Whether a tile's first S = Q K^T runs under the previous tile's last P V.
  d["carry"] = plan.carry;
  // Whether the persistent walk rotates each round's tiles among the blocks (not snake order).
  d["rotate_rounds"] = plan.rotate_rounds;
  return d;
}

}  // namespace
}  // namespace flashsplit

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "flashsplit native attention forward (split-KV) and its capability gate";
  m.def("build_info", &flashsplit::build_info_dict, "What this build contains.");
  m.def("explain", &flashsplit::explain, "The dispatch decision for a call, without running it.",
        pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("causal"),
        pybind11::arg("dropout_p"), pybind11::arg("window_left"), pybind11::arg("window_right"),
        pybind11::arg("softcap"), pybind11::arg("has_alibi"), pybind11::arg("num_splits"),
        pybind11::arg("allow_untested_arch") = false);
  m.def("forward", &flashsplit::native_forward,
        "Native forward: (out, lse). Raises with the gate's reason when it refuses.",
        pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("softmax_scale"),
        pybind11::arg("causal"), pybind11::arg("num_splits"));
}
