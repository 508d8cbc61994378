// Definition of sm90::launch_attn_fwd, included only by the instantiation units.
#pragma once

#include "kernels/sm90/fwd_kernel.cuh"
#include "kernels/sm90/fwd_launch.h"
#include "kernels/sm90/tensor_map.h"

namespace flashsplit {
namespace sm90 {

template <class Elem, int D, bool Causal, bool Split>
void launch_variant(const HopperFwdParams& hp, gpuStream_t stream) {
  using Tiles = HopperTiles<D>;
  auto kernel = hopper_fwd_kernel<Elem, D, Causal, Split>;
  FS_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                   Tiles::kSmemBytes));
  const AttnFwdParams& p = hp.p;
  // Blocks of one (batch, head) are adjacent in launch order, so they share K/V in L2.
  dim3 grid(static_cast<unsigned>(ceil_div(p.sq, Tiles::kBlockM)), p.num_splits, p.b * p.h);
  kernel<<<grid, Tiles::kThreads, Tiles::kSmemBytes, stream>>>(hp);
  FS_LAUNCH_CHECK("hopper_fwd_kernel launch");
}

template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, gpuStream_t stream) {
  using Tiles = HopperTiles<D>;
  HopperFwdParams hp;
  hp.p = params;
  hp.q_map = make_head_tile_map("q", params.q, params.elem, D, params.sq, params.h, params.b,
                                params.q_row_stride, params.q_head_stride, params.q_batch_stride,
                                Tiles::kBlockM);
  hp.k_map = make_head_tile_map("k", params.k, params.elem, D, params.sk, params.hk, params.b,
                                params.k_row_stride, params.k_head_stride, params.k_batch_stride,
                                Tiles::kBlockN);
  hp.v_map = make_head_tile_map("v", params.v, params.elem, D, params.sk, params.hk, params.b,
                                params.v_row_stride, params.v_head_stride, params.v_batch_stride,
                                Tiles::kBlockN);
  const bool split = params.num_splits > 1;
  if (params.causal) {
    split ? launch_variant<Elem, D, true, true>(hp, stream) : launch_variant<Elem, D, true, false>(hp, stream);
  } else {
    split ? launch_variant<Elem, D, false, true>(hp, stream)
          : launch_variant<Elem, D, false, false>(hp, stream);
  }
}

}  // namespace sm90
}  // namespace flashsplit
