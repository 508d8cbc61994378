// Definition of sm90::launch_attn_fwd, included only by the instantiation units.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/sm90/fwd_kernel.cuh"
#include "kernels/sm90/fwd_launch.h"
#include "kernels/sm90/tensor_map.h"

namespace flashsplit {
namespace sm90 {

template <class Elem, int D, bool Causal, bool Split, class Tiles>
void launch_variant(const HopperFwdParams& hp, gpuStream_t stream, bool persistent) {
  auto kernel = hopper_fwd_kernel<Elem, D, Causal, Split, Tiles>;
  FS_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                   Tiles::kSmemBytes));
  const AttnFwdParams& p = hp.p;
  // Persistent: one block per SM walks the tiles (fwd_kernel.cuh). Otherwise one block per
  // tile, and the hardware hands tiles to SMs as they free up.
  const long long tiles =
      static_cast<long long>(ceil_div(p.sq, Tiles::kBlockM)) * p.num_splits * p.b * p.h;
  if (persistent && p.sm_count <= 0) {
    throw std::runtime_error("flashsplit: a persistent launch needs AttnFwdParams::sm_count, got " +
                             std::to_string(p.sm_count));
  }
  const int blocks = static_cast<int>(persistent ? std::min<long long>(tiles, p.sm_count) : tiles);
  kernel<<<blocks, Tiles::kThreads, Tiles::kSmemBytes, stream>>>(hp);
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
void launch_with_tiles(const AttnFwdParams& params, gpuStream_t stream, bool persistent) {
  const HopperFwdParams hp = make_hopper_params<D, Tiles>(params);
  const bool split = params.num_splits > 1;
  if (params.causal) {
    split ? launch_variant<Elem, D, true, true, Tiles>(hp, stream, persistent)
          : launch_variant<Elem, D, true, false, Tiles>(hp, stream, persistent);
  } else {
    split ? launch_variant<Elem, D, false, true, Tiles>(hp, stream, persistent)
          : launch_variant<Elem, D, false, false, Tiles>(hp, stream, persistent);
  }
}

// Rows per block follow hopper_tile_config, which the heuristic modelled too.
template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, gpuStream_t stream) {
  const bool persistent = hopper_persistent(params.sk);
  if constexpr (D == 64) {
    if (hopper_block_m(D, params.sq) == 192) {
      // Three consumers issue in turn on their own; ping-pong is written for two.
      return launch_with_tiles<Elem, D, HopperTiles<D, 192, false, false, 2>>(params, stream,
                                                                             persistent);
    }
  }
  launch_with_tiles<Elem, D, HopperTiles<D, 128, true, true, 1>>(params, stream, persistent);
}

}  // namespace sm90
}  // namespace flashsplit
