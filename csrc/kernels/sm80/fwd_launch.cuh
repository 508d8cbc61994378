// Definition of sm80::launch_attn_fwd, included only by the instantiation units.
#pragma once

#include "kernels/sm80/fwd_kernel.cuh"
#include "kernels/sm80/fwd_launch.h"

namespace flashsplit {
namespace sm80 {

template <class Elem, int D, bool Causal, bool Split>
void launch_variant(const AttnFwdParams& params, gpuStream_t stream) {
  using Tiles = FwdTiles<D>;
  auto kernel = attn_fwd_kernel<Elem, D, Causal, Split>;
  // Above 48 KB a block must opt in to its dynamic shared memory.
  FS_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                   Tiles::kSmemBytes));
  dim3 grid(ceil_div(params.sq, Tiles::kBlockM), params.num_splits, params.b * params.h);
  kernel<<<grid, Tiles::kThreads, Tiles::kSmemBytes, stream>>>(params);
  FS_LAUNCH_CHECK("attn_fwd_kernel launch");
}

template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, gpuStream_t stream) {
  const bool split = params.num_splits > 1;
  if (params.causal) {
    split ? launch_variant<Elem, D, true, true>(params, stream)
          : launch_variant<Elem, D, true, false>(params, stream);
  } else {
    split ? launch_variant<Elem, D, false, true>(params, stream)
          : launch_variant<Elem, D, false, false>(params, stream);
  }
}

}  // namespace sm80
}  // namespace flashsplit
