// Definition of sm80::launch_attn_fwd, included only by the instantiation units.
#pragma once

#include "kernels/sm80/fwd_kernel.cuh"
#include "kernels/sm80/fwd_launch.h"

namespace flashsplit {
namespace sm80 {

template <class Elem, int D, bool Narrow, bool Causal, bool Split>
void launch_variant(const AttnFwdParams& params, gpuStream_t stream) {
  using Tiles = FwdTiles<D, Narrow>;
  auto kernel = attn_fwd_kernel<Elem, D, Narrow, Causal, Split>;
  // Above 48 KB a block must opt in to its dynamic shared memory.
  FS_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                   Tiles::kSmemBytes));
  dim3 grid(static_cast<unsigned>(row_tiles(params.sq, params.h, params.hk, Tiles::kBlockM)),
            params.num_splits, params.b * params.hk);
  kernel<<<grid, Tiles::kThreads, Tiles::kSmemBytes, stream>>>(params);
  FS_LAUNCH_CHECK("attn_fwd_kernel launch");
}

template <class Elem, int D, bool Narrow>
void launch_shape(const AttnFwdParams& params, gpuStream_t stream) {
  const bool split = params.num_splits > 1;
  if (params.causal) {
    split ? launch_variant<Elem, D, Narrow, true, true>(params, stream)
          : launch_variant<Elem, D, Narrow, true, false>(params, stream);
  } else {
    split ? launch_variant<Elem, D, Narrow, false, true>(params, stream)
          : launch_variant<Elem, D, Narrow, false, false>(params, stream);
  }
}

// The tile shape follows the same rule the heuristic modelled (core/tile_config.h).
template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, gpuStream_t stream) {
  if (use_narrow_tiles(params.sq, params.h, params.hk)) {
    launch_shape<Elem, D, true>(params, stream);
  } else {
    launch_shape<Elem, D, false>(params, stream);
  }
}

}  // namespace sm80
}  // namespace flashsplit
