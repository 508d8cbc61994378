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
void launch_variant(HopperFwdParams hp, gpuStream_t stream, bool persistent) {
  auto kernel = hopper_fwd_kernel<Elem, D, Causal, Split, Tiles>;
  FS_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                   Tiles::kSmemBytes));
  const AttnFwdParams& p = hp.p;
  // Persistent: one block per SM walks the tiles (fwd_kernel.cuh). Otherwise one block per
  // tile, and the hardware hands tiles to SMs as they free up.
  const int m_blocks = ceil_div(p.sq, Tiles::kBlockM);
  const long long tiles = static_cast<long long>(m_blocks) * p.num_splits * p.b * p.h;
  if (persistent && p.sm_count <= 0) {
    throw std::runtime_error("flashsplit: a persistent launch needs AttnFwdParams::sm_count, got " +
                             std::to_string(p.sm_count));
  }
  // The calls the planner may give a tail split (core/tail_split.h).
  constexpr bool kTailSplitApplies = tail_split_applies(Causal, Split, Tiles::kBlockN);
  if constexpr (kTailSplitApplies) {
    if (p.tail_ws != nullptr) {
      hp.tail = plan_tail_split(tiles, ceil_div(p.sk, Tiles::kBlockN), p.sm_count);
      const size_t needed = tail_workspace_bytes(hp.tail, Tiles::kBlockM, D);
      if (needed > p.tail_ws_bytes) {
        throw std::runtime_error("flashsplit: the tail split needs " + std::to_string(needed) +
                                 " bytes of tail_ws, got " + std::to_string(p.tail_ws_bytes));
      }
      hp.tail_ws = static_cast<float*>(p.tail_ws);
      if (hp.tail.active()) {
        // The pieces count their arrivals from zero (fwd_kernel.cuh, settle_tail_piece).
        const long long counters = tail_counters_offset_bytes(hp.tail, Tiles::kBlockM, D);
        FS_GPU_CHECK(gpuMemsetAsync(static_cast<unsigned char*>(p.tail_ws) + counters, 0,
                                    needed - static_cast<size_t>(counters), stream));
      }
    }
  }
  // With a tail split the main kernel runs the tiles of the full rounds only.
  const long long main_tiles = hp.tail.active() ? hp.tail.main_tiles : tiles;
  const int blocks =
      static_cast<int>(persistent ? std::min<long long>(main_tiles, p.sm_count) : main_tiles);
  hp.by_grid = FastDivmod(blocks);
  hp.rotate_rounds =
      persistent && hopper_rotate_rounds(Causal, p.num_splits, p.sq, Tiles::kBlockM);
  hp.last_round_tiles = static_cast<int>(main_tiles % blocks);
  if (hp.last_round_tiles > 0) {
    hp.last_round_shift = static_cast<int>(main_tiles / blocks % hp.last_round_tiles);
  }
  hp.by_m_blocks = FastDivmod(m_blocks);
  hp.by_splits = FastDivmod(p.num_splits);
  hp.by_heads = FastDivmod(p.h);
  hp.by_group = FastDivmod(p.h / p.hk);
  hp.carry = hopper_carry_across_tiles(D, Causal);
  if constexpr (Causal && !Tiles::kOverlap) {
    // Causal tiles of consumers side by side (the kernel's kGroupedWalk): persistent launches
    // given a counter draw their tiles from it, and one block per tile runs them in the order
    // the hardware starts blocks: both in the grouped order, longest first
    // (core/tile_order.h). The static walk keeps the head-major order its snake rounds pair up.
    const bool dynamic = persistent && p.tile_counter != nullptr;
    const int units = p.num_splits * p.b * p.h;
    const long long kv_bytes = causal_unit_kv_bytes(p.sk, D, static_cast<int>(sizeof(Elem)),
                                                    p.num_splits, p.h / p.hk);
    const int group = persistent && !dynamic ? 1 : causal_tile_group(units, kv_bytes);
    hp.groups = make_tile_groups(units, m_blocks, group);
    if (dynamic) {
      hp.tile_counter = p.tile_counter;
      FS_GPU_CHECK(gpuMemsetAsync(p.tile_counter, 0, sizeof(int), stream));
    }
  }
  kernel<<<blocks, Tiles::kThreads, Tiles::kSmemBytes, stream>>>(hp);
  FS_LAUNCH_CHECK("hopper_fwd_kernel launch");
  if constexpr (kTailSplitApplies) {
    if (hp.tail.active()) {
      // The pieces, one block per chunk, each starting as an SM leaves the main kernel.
      auto tail_kernel = hopper_fwd_kernel<Elem, D, false, false, Tiles, true>;
      FS_GPU_CHECK(gpuFuncSetAttribute(tail_kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                       Tiles::kSmemBytes));
      launch_after_prior_grid(p.cc >= 90, tail_kernel, dim3(hp.tail.chunks),
                              dim3(Tiles::kThreads), Tiles::kSmemBytes, stream, hp);
    }
  }
}

template <int D, class Tiles>
HopperFwdParams make_hopper_params(const AttnFwdParams& params) {
  HopperFwdParams hp{};
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
  // G = 1 stores the output with TMA, 16 rows (one consumer warp) per box; splits write fp32
  // partials without a map.
  if (params.num_splits <= 1) {
    hp.o_map = make_head_tile_map("out", params.out, params.elem, D, params.sq, params.h,
                                  params.b, params.o_row_stride, params.o_head_stride,
                                  params.o_batch_stride, 16);
  }
  return hp;
}

// Tile choices per causal mask: TilesFor::template For<Causal> is the HopperTiles to run.
template <class Elem, int D, class TilesFor>
void launch_with_tiles(const AttnFwdParams& params, gpuStream_t stream, bool persistent) {
  using CausalTiles = typename TilesFor::template For<true>;
  using FullTiles = typename TilesFor::template For<false>;
  const bool split = params.num_splits > 1;
  if (params.causal) {
    const HopperFwdParams hp = make_hopper_params<D, CausalTiles>(params);
    split ? launch_variant<Elem, D, true, true, CausalTiles>(hp, stream, persistent)
          : launch_variant<Elem, D, true, false, CausalTiles>(hp, stream, persistent);
  } else {
    const HopperFwdParams hp = make_hopper_params<D, FullTiles>(params);
    split ? launch_variant<Elem, D, false, true, FullTiles>(hp, stream, persistent)
          : launch_variant<Elem, D, false, false, FullTiles>(hp, stream, persistent);
  }
}

// Where hopper_block_m picks 192 rows: three consumers issuing in turn on their own (ping-pong
// is written for two); two Q buffers at d=64, one at d=128 (two do not fit beside the K/V
// stages and the output staging).
template <int D>
struct TallTiles {
  template <bool Causal>
  using For = HopperTiles<D, 192, false, false, D == 64 ? 2 : 1, false>;
};
// Otherwise 128-row ping-pong tiles with two Q buffers. A tile's last P V carries the next
// tile's first S = Q K^T (step 14) where hopper_carry_across_tiles says it pays (d=64, and d=128
// with the causal mask: benchmarks/NOTES.md, steps 31, 36, 38, 44).
template <int D>
struct PingPongTiles {
  template <bool Causal>
  using For = HopperTiles<D, 128, true, true, 2, true>;
};

// Where hopper_block_m picks 256 rows (unsplit d=64 calls; with the mask below 1536 rows): four
// consumers side by side over 64-key blocks (at 128 keys a consumer needs ~122 registers; four
// get 112 each), six stages of the K/V ring, so it holds as many keys as three of 128.
using WideTiles = HopperTiles<64, kHopperWideRows, false, false, 2, false, kHopperWideBlockN>;

// Rows per block follow hopper_block_m with the plan's inputs (the keys, the grid's b * h, the
// device's SMs and G), as the planner's tiles_for_run did.
template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, gpuStream_t stream) {
  const bool persistent = hopper_persistent(params.sk);
  const long long heads = static_cast<long long>(params.b) * params.h;
  const int block_m = hopper_block_m(D, params.sq, params.causal, params.sk, heads,
                                     params.sm_count, params.num_splits);
  if (block_m == kHopperWideRows) {
    if constexpr (D == 64) {
      // Only unsplit forms exist: hopper_block_m takes wide tiles for nothing else.
      if (params.num_splits != 1) {
        throw std::logic_error("flashsplit: wide Hopper tiles are for unsplit calls");
      }
      const HopperFwdParams hp = make_hopper_params<D, WideTiles>(params);
      if (params.causal) {
        return launch_variant<Elem, D, true, false, WideTiles>(hp, stream, persistent);
      }
      return launch_variant<Elem, D, false, false, WideTiles>(hp, stream, persistent);
    }
    throw std::logic_error("flashsplit: wide Hopper tiles are for d=64, got d=" +
                           std::to_string(D));
  }
  if (block_m == kHopperTallRows) {
    return launch_with_tiles<Elem, D, TallTiles<D>>(params, stream, persistent);
  }
  launch_with_tiles<Elem, D, PingPongTiles<D>>(params, stream, persistent);
}

}  // namespace sm90
}  // namespace flashsplit
