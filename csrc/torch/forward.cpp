#include "forward.h"

#include "plan.h"

#ifdef FLASHSPLIT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/attn_launch.h"
#endif

namespace flashsplit {

#ifdef FLASHSPLIT_WITH_CUDA
namespace {

AttnFwdParams make_params(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& out, const at::Tensor& lse, double softmax_scale,
                          bool causal) {
  AttnFwdParams p;
  p.elem = q.scalar_type() == at::kHalf ? ElemType::kFloat16 : ElemType::kBFloat16;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.out = out.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.q_batch_stride = q.stride(0), p.q_row_stride = q.stride(1), p.q_head_stride = q.stride(2);
  p.k_batch_stride = k.stride(0), p.k_row_stride = k.stride(1), p.k_head_stride = k.stride(2);
  p.v_batch_stride = v.stride(0), p.v_row_stride = v.stride(1), p.v_head_stride = v.stride(2);
  p.o_batch_stride = out.stride(0), p.o_row_stride = out.stride(1),
  p.o_head_stride = out.stride(2);
  p.b = static_cast<int>(q.size(0));
  p.sq = static_cast<int>(q.size(1));
  p.h = static_cast<int>(q.size(2));
  p.d = static_cast<int>(q.size(3));
  p.dv = static_cast<int>(v.size(3));
  p.sk = static_cast<int>(k.size(1));
  p.hk = static_cast<int>(k.size(2));
  p.seqs = p.b;
  p.max_seqlen_q = p.sq;
  p.kv_batches = static_cast<int>(k.size(0));
  p.softmax_scale = static_cast<float>(softmax_scale);
  p.causal = causal;
  return p;
}

const int* index_ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr<int>() : nullptr; }

// The per-sequence part of the params: the sequences and where their lengths and pages are.
void set_sequences(AttnFwdParams& p, const at::Tensor& q, const SequenceArgs& seqs) {
  p.seqs = static_cast<int>(seqs.count(q));
  p.max_seqlen_q = static_cast<int>(seqs.max_seqlen_q);
  p.cu_seqlens_q = index_ptr(seqs.cu_seqlens_q);
  p.cu_seqlens_k = index_ptr(seqs.cu_seqlens_k);
  p.seqused_k = index_ptr(seqs.seqused_k);
  p.kv_batch_idx = index_ptr(seqs.kv_batch_idx);
  p.block_table = index_ptr(seqs.block_table);
  if (seqs.paged()) {
    p.block_table_stride = seqs.block_table.stride(0);
    p.page_size = p.sk;  // k is (pages, page_size, hk, d)
  }
}

// Runs the plan into the params' out and lse (q's layout), with the split partials and the
// scratch the plan asks for.
void run_plan(AttnFwdParams& params, const LaunchPlan& plan, const at::Tensor& q,
              LaunchRecord* record) {
  const int64_t b = q.size(0), sq = q.size(1), h = q.size(2), dv = params.dv;
  params.num_splits = plan.num_splits;
  // Scratch from the caching allocator (safe under graph capture), as the plan asks for it.
  at::Tensor o_accum, tail_ws, tile_counter;
  if (plan.num_splits > 1) {
    // One allocation: the partials (G, b, h, sq, dv), then their LSEs (G, b, h, sq).
    const int64_t rows = plan.num_splits * b * h * sq;
    o_accum = at::empty({rows * (dv + 1)}, q.options().dtype(at::kFloat));
    params.o_accum = o_accum.data_ptr<float>();
    params.lse_accum = params.o_accum + rows * dv;
  }
  if (plan.tail.active()) {
    const size_t bytes = tail_workspace_bytes_for(plan, params.dv);  // records of O's columns
    tail_ws = at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte));
    params.tail_ws = tail_ws.data_ptr();
    params.tail_ws_bytes = bytes;
  }
  if (plan.tile_counter) {
    tile_counter = at::empty({1}, q.options().dtype(at::kInt));
    params.tile_counter = tile_counter.data_ptr<int>();
  }
  run_attn_fwd(params, plan, at::cuda::getCurrentCUDAStream().stream(), record);
}

}  // namespace
#endif

std::tuple<at::Tensor, at::Tensor> run_admitted(const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const SequenceArgs* seqs,
                                                const LaunchPlan& plan, double softmax_scale,
                                                bool causal, LaunchRecord* record) {
  TORCH_CHECK(plan.gate.ok, "flashsplit: the native kernels cannot serve this call: ",
              plan.gate.reason);
#ifdef FLASHSPLIT_WITH_CUDA
  c10::cuda::CUDAGuard device_guard(q.device());
  at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
  at::Tensor lse = at::empty({q.size(0), q.size(2), q.size(1)}, q.options().dtype(at::kFloat));
  AttnFwdParams params = make_params(q, k, v, out, lse, softmax_scale, causal);
  if (seqs != nullptr) set_sequences(params, q, *seqs);
  run_plan(params, plan, q, record);
  return {out, lse};
#else
  (void)k, (void)v, (void)seqs, (void)softmax_scale, (void)causal, (void)record;
  TORCH_CHECK(false, "flashsplit was built without GPU kernels");
#endif
}

std::tuple<at::Tensor, at::Tensor> native_forward(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, double softmax_scale,
                                                  bool causal, int64_t num_splits,
                                                  bool arch_verified, LaunchPlan* plan_out,
                                                  LaunchRecord* record) {
  check_attention_inputs(q, k, v, num_splits);
  FeatureOptions features;
  features.causal = causal;
  const LaunchPlan plan = make_plan(q, k, v, features, num_splits, arch_verified);
  if (plan_out != nullptr) *plan_out = plan;
  return run_admitted(q, k, v, nullptr, plan, softmax_scale, causal, record);
}

}  // namespace flashsplit
