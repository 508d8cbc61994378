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
  p.sk = static_cast<int>(k.size(1));
  p.hk = static_cast<int>(k.size(2));
  p.softmax_scale = static_cast<float>(softmax_scale);
  p.causal = causal;
  return p;
}

}  // namespace
#endif

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
  TORCH_CHECK(plan.gate.ok, "flashsplit: the native kernels cannot serve this call: ",
              plan.gate.reason);
#ifdef FLASHSPLIT_WITH_CUDA
  c10::cuda::CUDAGuard device_guard(q.device());
  const int64_t b = q.size(0), sq = q.size(1), h = q.size(2), d = q.size(3);
  at::Tensor out = at::empty({b, sq, h, d}, q.options());
  at::Tensor lse = at::empty({b, h, sq}, q.options().dtype(at::kFloat));
  AttnFwdParams params = make_params(q, k, v, out, lse, softmax_scale, causal);
  params.num_splits = plan.num_splits;
  // Scratch from the caching allocator (safe under graph capture), as the plan asks for it.
  at::Tensor o_accum, lse_accum, tail_ws, tile_counter;
  if (plan.num_splits > 1) {
    o_accum = at::empty({plan.num_splits, b, h, sq, d}, q.options().dtype(at::kFloat));
    lse_accum = at::empty({plan.num_splits, b, h, sq}, q.options().dtype(at::kFloat));
    params.o_accum = o_accum.data_ptr<float>();
    params.lse_accum = lse_accum.data_ptr<float>();
  }
  if (plan.tail.active()) {
    const size_t bytes = tail_workspace_bytes_for(plan, static_cast<int>(d));
    tail_ws = at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte));
    params.tail_ws = tail_ws.data_ptr();
    params.tail_ws_bytes = bytes;
  }
  if (plan.tile_counter) {
    tile_counter = at::empty({1}, q.options().dtype(at::kInt));
    params.tile_counter = tile_counter.data_ptr<int>();
  }
  run_attn_fwd(params, plan, at::cuda::getCurrentCUDAStream().stream(), record);
  return {out, lse};
#else
  (void)softmax_scale;
  (void)record;
  TORCH_CHECK(false, "flashsplit was built without GPU kernels");
#endif
}

}  // namespace flashsplit
