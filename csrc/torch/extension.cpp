// The pybind11 module flashsplit._C: the only door from Python into the C++ layers.
#include <torch/extension.h>

#include "build_info.h"
#include "core/gate.h"
#include "explain_dict.h"
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

// explain()'s answer for the tensors q (b, sq, h, d) and k (b, sk, hk, d).
pybind11::dict explain_plan(const LaunchPlan& plan, const at::Tensor& q, const at::Tensor& k) {
  return explain_dict(plan, q.size(0), q.size(1), q.size(2), k.size(2));
}

pybind11::dict explain(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                       double dropout_p, int64_t window_left, int64_t window_right,
                       double softcap, bool has_alibi, int64_t num_splits,
                       bool arch_verified) {
  check_attention_inputs(q, k, v, num_splits);
  FeatureOptions features{causal, dropout_p, window_left, window_right, softcap, has_alibi};
  return explain_plan(make_plan(q, k, v, features, num_splits, arch_verified), q, k);
}

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, double softmax_scale, bool causal,
                                           int64_t num_splits, bool arch_verified) {
  return native_forward(q, k, v, softmax_scale, causal, num_splits, arch_verified);
}

// The lean call: plans once and runs it natively, returning (out, lse), or returns the gate's
// reason (a str) for a call the native kernels cannot serve, which the caller then serves.
pybind11::object run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     double softmax_scale, bool causal, double dropout_p, int64_t window_left,
                     int64_t window_right, double softcap, bool has_alibi, int64_t num_splits,
                     bool arch_verified) {
  check_attention_inputs(q, k, v, num_splits);
  FeatureOptions features{causal, dropout_p, window_left, window_right, softcap, has_alibi};
  const LaunchPlan plan = make_plan(q, k, v, features, num_splits, arch_verified);
  if (!plan.gate.ok) return pybind11::str(plan.gate.reason);
  auto [out, lse] = run_admitted(q, k, v, nullptr, plan, softmax_scale, causal);
  return pybind11::make_tuple(out, lse);
}

// The forward with what it planned (explain's form) and what its launchers ran.
pybind11::tuple forward_recorded(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 double softmax_scale, bool causal, int64_t num_splits,
                                 bool arch_verified) {
  LaunchPlan plan;
  LaunchRecord record;
  auto [out, lse] = native_forward(q, k, v, softmax_scale, causal, num_splits,
                                   arch_verified, &plan, &record);
  return pybind11::make_tuple(out, lse, explain_plan(plan, q, k), launch_record_dict(record));
}

using OptionalTensor = c10::optional<at::Tensor>;

// A sequence call's indices and lengths, checked with its tensors (the same errors for both
// entry points below).
SequenceArgs checked_sequences(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const OptionalTensor& cu_seqlens_q,
                               const OptionalTensor& cu_seqlens_k,
                               const OptionalTensor& seqused_k,
                               const OptionalTensor& kv_batch_idx,
                               const OptionalTensor& block_table, int64_t max_seqlen_q,
                               int64_t max_seqlen_k, int64_t num_splits) {
  SequenceArgs seqs;
  seqs.cu_seqlens_q = cu_seqlens_q.value_or(at::Tensor());
  seqs.cu_seqlens_k = cu_seqlens_k.value_or(at::Tensor());
  seqs.seqused_k = seqused_k.value_or(at::Tensor());
  seqs.kv_batch_idx = kv_batch_idx.value_or(at::Tensor());
  seqs.block_table = block_table.value_or(at::Tensor());
  seqs.max_seqlen_q = max_seqlen_q;
  seqs.max_seqlen_k = max_seqlen_k;
  check_attention_inputs(q, k, v, num_splits, /*same_batch=*/false);
  check_sequence_inputs(q, k, seqs);
  return seqs;
}

// run() for a sequence call.
pybind11::object run_sequences(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const OptionalTensor& cu_seqlens_q,
                               const OptionalTensor& cu_seqlens_k,
                               const OptionalTensor& seqused_k,
                               const OptionalTensor& kv_batch_idx,
                               const OptionalTensor& block_table, int64_t max_seqlen_q,
                               int64_t max_seqlen_k, double softmax_scale, bool causal,
                               double dropout_p, int64_t window_left, int64_t window_right,
                               double softcap, bool has_alibi, int64_t num_splits,
                               bool arch_verified) {
  const SequenceArgs seqs =
      checked_sequences(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_idx,
                        block_table, max_seqlen_q, max_seqlen_k, num_splits);
  FeatureOptions features{causal, dropout_p, window_left, window_right, softcap, has_alibi};
  const LaunchPlan plan =
      make_sequence_plan(q, k, v, seqs, features, num_splits, arch_verified);
  if (!plan.gate.ok) return pybind11::str(plan.gate.reason);
  auto [out, lse] = run_admitted(q, k, v, &seqs, plan, softmax_scale, causal);
  return pybind11::make_tuple(out, lse);
}

// explain() for a sequence call: the plan of its sequences (b of them, of at most max_seqlen_q
// queries each), without running it.
pybind11::dict explain_sequences(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const OptionalTensor& cu_seqlens_q,
                                 const OptionalTensor& cu_seqlens_k,
                                 const OptionalTensor& seqused_k,
                                 const OptionalTensor& kv_batch_idx,
                                 const OptionalTensor& block_table, int64_t max_seqlen_q,
                                 int64_t max_seqlen_k, bool causal, int64_t num_splits,
                                 bool arch_verified) {
  const SequenceArgs seqs =
      checked_sequences(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_idx,
                        block_table, max_seqlen_q, max_seqlen_k, num_splits);
  FeatureOptions features;
  features.causal = causal;
  const LaunchPlan plan = make_sequence_plan(q, k, v, seqs, features, num_splits, arch_verified);
  return explain_dict(plan, seqs.count(q), max_seqlen_q, q.size(2), k.size(2));
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
  m.def("run", &flashsplit::run,
        "Plans once and runs natively: (out, lse), or the gate's reason (str) when it refuses.",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("softmax_scale"), py::arg("causal"),
        py::arg("dropout_p"), py::arg("window_left"), py::arg("window_right"),
        py::arg("softcap"), py::arg("has_alibi"), py::arg("num_splits"),
        py::arg("arch_verified") = false);
  m.def("forward_recorded", &flashsplit::forward_recorded,
        "Native forward with its plan and a record of what the launchers ran: "
        "(out, lse, plan, record).",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("softmax_scale"), py::arg("causal"),
        py::arg("num_splits"), py::arg("arch_verified") = false);
  m.def("run_sequences", &flashsplit::run_sequences,
        "run() for a call of sequences of their own lengths.", py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("cu_seqlens_q"), py::arg("cu_seqlens_k"), py::arg("seqused_k"),
        py::arg("kv_batch_idx"), py::arg("block_table"), py::arg("max_seqlen_q"),
        py::arg("max_seqlen_k"), py::arg("softmax_scale"), py::arg("causal"),
        py::arg("dropout_p"), py::arg("window_left"), py::arg("window_right"),
        py::arg("softcap"), py::arg("has_alibi"), py::arg("num_splits"),
        py::arg("arch_verified") = false);
  m.def("explain_sequences", &flashsplit::explain_sequences,
        "explain() for a call of sequences of their own lengths.", py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("cu_seqlens_q"), py::arg("cu_seqlens_k"), py::arg("seqused_k"),
        py::arg("kv_batch_idx"), py::arg("block_table"), py::arg("max_seqlen_q"),
        py::arg("max_seqlen_k"), py::arg("causal"), py::arg("num_splits"),
        py::arg("arch_verified") = false);
  flashsplit::bind_heuristic(m);
}
