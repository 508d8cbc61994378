// run_attn_fwd: picks the instantiation for (dtype, head dim) and chains producers and combine.
#include <string>

#include "kernels/attn_launch.h"
#include "kernels/combine_kernel.h"
#include "kernels/sm80/fwd_launch.h"
#include "kernels/sm90/fwd_launch.h"

namespace flashsplit {
namespace {

template <class Elem>
void launch_producers(const AttnFwdParams& params, gpuStream_t stream) {
  if (params.kernel == FwdKernel::kHopper) {
    if (params.d == 64) return sm90::launch_attn_fwd<Elem, 64>(params, stream);
    if (params.d == 128) return sm90::launch_attn_fwd<Elem, 128>(params, stream);
  }
  if (params.d == 64) {
    sm80::launch_attn_fwd<Elem, 64>(params, stream);
  } else if (params.d == 128) {
    sm80::launch_attn_fwd<Elem, 128>(params, stream);
  } else {
    throw std::runtime_error("flashsplit: no forward kernel for head dim " + std::to_string(params.d));
  }
}

}  // namespace

void run_attn_fwd(const AttnFwdParams& params, gpuStream_t stream) {
  if (params.num_splits > 1 && (params.o_accum == nullptr || params.lse_accum == nullptr)) {
    throw std::runtime_error("flashsplit: num_splits > 1 needs o_accum and lse_accum scratch");
  }
  if (params.elem == ElemType::kBFloat16) {
    launch_producers<gpu_bf16_t>(params, stream);
  } else {
    launch_producers<gpu_fp16_t>(params, stream);
  }
  if (params.num_splits > 1) launch_combine(params, stream);
}

}  // namespace flashsplit
