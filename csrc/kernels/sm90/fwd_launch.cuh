// Definition of sm90::launch_attn_fwd, included only by the instantiation units.
#pragma once

#include "kernels/sm90/fwd_kernel.cuh"
#include "kernels/sm90/fwd_launch.h"
#include "kernels/sm90/tensor_map.h"

namespace flashsplit {
namespace sm90 {

template <class Elem, int D, bool Causal, bool Split, class Tiles>
void launch_variant(const HopperFwdParams& hp, gpuStream_t stream) {
  auto kernel = hopper_fwd_kernel<Elem, D, Causal, Split, Tiles>;
  FS_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                   Tiles::kSmemBytes));
  const AttnFwdParams& p = hp.p;
  // Blocks of one (batch, head) are adjacent in launch order, so they share K/V in L2.
  dim3 grid(static_cast<unsigned>(ceil_div(p.sq, Tiles::kBlockM)), p.num_splits, p.b * p.h);
  kernel<<<grid, Tiles::kThreads, Tiles::kSmemBytes, stream>>>(hp);
  FS_LAUNCH_CHECK("hopper_fwd_kernel launch");
}

template <int D, class Tiles>
HopperFwdParams make_hopper_params(const AttnFwdParams& params) {
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
  return hp;
}

template <class Elem, int D, class Tiles>
void launch_with_tiles(const AttnFwdParams& params, gpuStream_t stream) {
  const HopperFwdParams hp = make_hopper_params<D, Tiles>(params);
  const bool split = params.num_splits > 1;
  if (params.causal) {
    split ? launch_variant<Elem, D, true, true, Tiles>(hp, stream)
          : launch_variant<Elem, D, true, false, Tiles>(hp, stream);
  } else {
    split ? launch_variant<Elem, D, false, true, Tiles>(hp, stream)
          : launch_variant<Elem, D, false, false, Tiles>(hp, stream);
  }
}

// Rows per block follow hopper_tile_config, which the heuristic modelled too.
template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, gpuStream_t stream) {
  if (hopper_block_m(D, params.sq) == 192) {
    launch_with_tiles<Elem, D, HopperTiles<D, 192>>(params, stream);
  } else {
    launch_with_tiles<Elem, D, HopperTiles<D, 128>>(params, stream);
  }
}

}  // namespace sm90
}  // namespace flashsplit
