// Host entry of the Hopper forward producers, one explicit instantiation per (dtype, head dim)
// in fwd_{bf16,fp16}_d{64,128}.cu.
#pragma once

#include "kernels/attn_params.h"
#include "kernels/platform.h"

namespace flashsplit {
namespace sm90 {

template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, gpuStream_t stream);

}  // namespace sm90
}  // namespace flashsplit
