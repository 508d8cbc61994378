// run_attn_fwd: picks the instantiation for the plan's kernel family, dtype and head dim, and
// chains producers and combine.
#include <string>

#include "core/head_dims.h"
#include "kernels/attn_launch.h"
#include "kernels/combine_kernel.h"
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include "kernels/gfx9/fwd_launch.h"
#else
#include "kernels/sm80/fwd_launch.h"
#include "kernels/sm90/fwd_launch.h"
#endif

namespace flashsplit {
namespace {

// The family's instance for D; a family without one (core/head_dims.h) is never planned for D.
template <class Elem, int D>
void launch_family(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                   LaunchRecord* record) {
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
  if constexpr (portable_mfma_has_head_dim(D)) {
    if (plan.gate.family == KernelFamily::kPortableMfma) {
      return gfx9::launch_attn_fwd<Elem, D>(params, plan, stream, record);
    }
  }
#else
  if constexpr (hopper_has_head_dim(D)) {
    if (plan.gate.family == KernelFamily::kHopperWgmma) {
      return sm90::launch_attn_fwd<Elem, D>(params, plan, stream, record);
    }
  }
  if constexpr (portable_mma_has_head_dim(D)) {
    if (plan.gate.family == KernelFamily::kPortableMma) {
      return sm80::launch_attn_fwd<Elem, D>(params, plan, stream, record);
    }
  }
#endif
  throw std::runtime_error(std::string("flashsplit: this build has no ") +
                           kernel_family_name(plan.gate.family) + " kernels for head dim " +
                           std::to_string(D));
}

template <class Elem>
void launch_producers(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                      LaunchRecord* record) {
  switch (params.d) {
    case 64: return launch_family<Elem, 64>(params, plan, stream, record);
    case 96: return launch_family<Elem, 96>(params, plan, stream, record);
    case 128: return launch_family<Elem, 128>(params, plan, stream, record);
    case 192: return launch_family<Elem, 192>(params, plan, stream, record);
    case 256: return launch_family<Elem, 256>(params, plan, stream, record);
  }
  throw std::runtime_error("flashsplit: no forward kernel for head dim " +
                           std::to_string(params.d));
}

}  // namespace

void run_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                  LaunchRecord* record) {
  if (params.num_splits != plan.num_splits) {
    throw std::runtime_error("flashsplit: params.num_splits " + std::to_string(params.num_splits) +
                             " differs from the plan's " + std::to_string(plan.num_splits));
  }
  if (plan.num_splits > 1 && (params.o_accum == nullptr || params.lse_accum == nullptr)) {
    throw std::runtime_error("flashsplit: num_splits > 1 needs o_accum and lse_accum scratch");
  }
  if (record != nullptr) {
    *record = LaunchRecord{};
    record->family = plan.gate.family;
    record->num_splits = params.num_splits;
  }
  if (params.elem == ElemType::kBFloat16) {
    launch_producers<gpu_bf16_t>(params, plan, stream, record);
  } else {
    launch_producers<gpu_fp16_t>(params, plan, stream, record);
  }
  if (plan.num_splits > 1) launch_combine(params, plan, stream, record);
}

}  // namespace flashsplit
