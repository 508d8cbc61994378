// Definition of sm90::launch_attn_fwd, included only by the instantiation units. It turns the
// plan into the kernel's parameters and launches; every decision was made by the plan.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/sm90/fwd_kernel.cuh"
#include "kernels/sm90/fwd_launch.h"
#include "kernels/sm90/tensor_map.h"

namespace flashsplit {
namespace sm90 {

template <int D, class Tiles, KvLayout Layout, bool PackHeads>
HopperFwdParams make_hopper_params(const AttnFwdParams& params) {
  HopperFwdParams hp{};
  hp.p = params;
  if constexpr (PackHeads) {  // a tile's rows: whole queries of the group, as many as fit
    const int group = params.h / params.hk;
    hp.mainloop.q_map = make_group_tile_map(
        "q", params.q, params.elem, D, params.sq, params.h, group, params.b, params.q_row_stride,
        params.q_head_stride, params.q_batch_stride, Tiles::kSlabCols,
        hopper_packed_tile_rows(group));
  } else {
    hp.mainloop.q_map = make_head_tile_map(
        "q", params.q, params.elem, D, params.sq, params.h, params.b, params.q_row_stride,
        params.q_head_stride, params.q_batch_stride, Tiles::kSlabCols, Tiles::kBlockM);
  }
  // k and v: (d, sk, hk, b) in boxes of a key block's rows (two of 64 rows on tiles packing a
  // group's heads: hopper_key_box_rows); paged, (d, page_size, hk, pages)
  // (sk is the page size) in boxes of a page's rows, at most a block's (hopper_page_box_rows).
  // Pages copied a row at a time have no maps; the mask reads their blocks as one box each.
  int box_rows = hopper_key_box_rows(PackHeads, Tiles::kBlockN);
  if constexpr (reads_pages(Layout)) {
    const bool rows = Layout == KvLayout::kPagedRows;
    const int page_box_rows = hopper_page_box_rows(params.page_size, Tiles::kBlockN);
    box_rows = rows ? Tiles::kBlockN : page_box_rows;
    if (params.page_size < 1 || params.page_size != params.sk || (page_box_rows == 0) != rows) {
      throw std::logic_error(std::string("flashsplit: the Hopper kernels do not read pages of ") +
                             std::to_string(params.page_size) + " keys " +
                             (rows ? "a row at a time" : "as boxes"));
    }
    hp.mainloop.page_box_rows = box_rows;
    hp.mainloop.by_page = FastDivmod(params.page_size);
  }
  if constexpr (Layout != KvLayout::kPagedRows) {
    // Tiles packing a group's heads read each key once for the whole group (RowReuse).
    const RowReuse reuse = PackHeads ? RowReuse::kStreamed : RowReuse::kShared;
    hp.mainloop.k_map = make_head_tile_map(
        "k", params.k, params.elem, D, params.sk, params.hk, params.kv_batches,
        params.k_row_stride, params.k_head_stride, params.k_batch_stride, Tiles::kSlabCols,
        box_rows, reuse);
    // v has its own head dim (Tiles::kHeadDimV slabs of it are loaded).
    hp.mainloop.v_map = make_head_tile_map("v", params.v, params.elem, params.dv, params.sk,
                                           params.hk, params.kv_batches, params.v_row_stride,
                                           params.v_head_stride, params.v_batch_stride,
                                           Tiles::kSlabCols, box_rows, reuse);
  }
  // G = 1 stores the output with TMA, 16 rows (one consumer warp) per box, and a sequence's
  // rows where it ends inside a warp's one row per box; splits write fp32 partials without a
  // map, and tiles packing a group's heads copy their rows out (write_direct).
  if (params.num_splits <= 1 && Tiles::kStagedOutput && !PackHeads) {
    hp.epilogue.o_map = make_head_tile_map("out", params.out, params.elem, D, params.sq, params.h,
                                  params.b, params.o_row_stride, params.o_head_stride,
                                  params.o_batch_stride, 64, 16);
    if constexpr (Layout != KvLayout::kDense) {
      hp.epilogue.o_row_map = make_head_tile_map(
          "out", params.out, params.elem, D, params.sq, params.h, params.b, params.o_row_stride,
          params.o_head_stride, params.o_batch_stride, 64, 1);
    }
  }
  return hp;
}

// The plan's walk as kernel parameters: the grid's and the tile order's divisors, the tail
// split (its workspace's counters cleared) and the tile counter (cleared); and its carry.
// Tiles packing a group's heads walk (query tile, split, batch, k/v head) over the group's rows.
template <int D, class Tiles, bool PackHeads>
void set_walk(HopperFwdParams& hp, const LaunchPlan& plan, gpuStream_t stream) {
  const AttnFwdParams& p = hp.p;
  SchedulerParams& sp = hp.scheduler;
  const int group = p.h / p.hk, heads = PackHeads ? p.hk : p.h;
  const int tile_rows = PackHeads ? hopper_packed_tile_rows(group) : Tiles::kBlockM;
  const int m_blocks =
      ceil_div(static_cast<long long>(p.max_seqlen_q) * (PackHeads ? group : 1), tile_rows);
  const long long tiles = static_cast<long long>(m_blocks) * p.num_splits * p.seqs * heads;
  const long long main_tiles = plan.tail.active() ? plan.tail.main_tiles : tiles;
  const int blocks = static_cast<int>(plan.forward_grid.x);
  sp.by_grid = FastDivmod(blocks);
  sp.by_m_blocks = FastDivmod(m_blocks);
  sp.by_splits = FastDivmod(p.num_splits);
  sp.by_heads = FastDivmod(heads);
  sp.by_group = FastDivmod(group);
  hp.mainloop.carry = plan.carry;
  sp.rotate_rounds = plan.rotate_rounds;
  sp.last_round_tiles = static_cast<int>(main_tiles % blocks);
  if (sp.last_round_tiles > 0) {
    sp.last_round_shift = static_cast<int>(main_tiles / blocks % sp.last_round_tiles);
  }
  sp.groups = make_tile_groups(p.num_splits * p.seqs * heads, m_blocks, plan.tile_group);
  if (plan.tile_counter) {
    if (p.tile_counter == nullptr) {
      throw std::runtime_error("flashsplit: the plan draws tiles from a counter; none was given");
    }
    sp.tile_counter = p.tile_counter;
    FS_GPU_CHECK(gpuMemsetAsync(p.tile_counter, 0, sizeof(int), stream));
  }
  if (plan.tail.active()) {
    const size_t needed = tail_workspace_bytes(plan.tail, Tiles::kBlockM, Tiles::kHeadDimV);
    if (p.tail_ws == nullptr || needed > p.tail_ws_bytes) {
      throw std::runtime_error("flashsplit: the tail split needs " + std::to_string(needed) +
                               " bytes of tail_ws, got " + std::to_string(p.tail_ws_bytes));
    }
    sp.tail = plan.tail;
    hp.epilogue.tail_ws = static_cast<float*>(p.tail_ws);
    // The pieces count their arrivals from zero (epilogue.cuh, settle_tail_piece).
    const long long counters =
        tail_counters_offset_bytes(plan.tail, Tiles::kBlockM, Tiles::kHeadDimV);
    FS_GPU_CHECK(gpuMemsetAsync(static_cast<unsigned char*>(p.tail_ws) + counters, 0,
                                needed - static_cast<size_t>(counters), stream));
  }
}

template <class Elem, int D, bool Causal, bool Split, class Tiles,
          KvLayout Layout = KvLayout::kDense, bool PackHeads = false>
void launch_variant(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                    LaunchRecord* record) {
  using Kt = FwdKernelTraits<Elem, D, Causal, Split, Tiles, false, Layout, PackHeads>;
  if (plan.tile_counter && !Kt::kDrawsTiles) {
    throw std::logic_error("flashsplit: the plan draws tiles from a counter on an instance that "
                           "walks a static order");
  }
  HopperFwdParams hp = make_hopper_params<D, Tiles, Layout, PackHeads>(params);
  set_walk<D, Tiles, PackHeads>(hp, plan, stream);
  constexpr int kSmemBytes = shared_storage_bytes<Tiles>();
  auto kernel = hopper_fwd_kernel<Elem, D, Causal, Split, Tiles, false, Layout, PackHeads>;
  allow_dynamic_smem<
      hopper_fwd_kernel<Elem, D, Causal, Split, Tiles, false, Layout, PackHeads>>(kSmemBytes);
  const unsigned blocks = static_cast<unsigned>(plan.forward_grid.x);
  kernel<<<blocks, Tiles::kThreads, kSmemBytes, stream>>>(hp);
  FS_LAUNCH_CHECK("hopper_fwd_kernel launch");
  if constexpr (Layout == KvLayout::kDense && tail_split_applies(Causal, Split, Tiles::kBlockN)) {
    if (hp.scheduler.tail.active()) {
      // The pieces, one block per chunk, each starting as an SM leaves the main kernel.
      auto tail_kernel = hopper_fwd_kernel<Elem, D, false, false, Tiles, true>;
      allow_dynamic_smem<hopper_fwd_kernel<Elem, D, false, false, Tiles, true>>(kSmemBytes);
      launch_after_prior_grid(plan.dependent_launch, tail_kernel,
                              dim3(static_cast<unsigned>(plan.tail_grid.x)),
                              dim3(Tiles::kThreads), kSmemBytes, stream, hp);
      if (record != nullptr) record->tail_grid = LaunchGrid{plan.tail_grid.x, 1, 1};
    }
  } else if (plan.tail.active()) {
    throw std::logic_error("flashsplit: a tail split on tiles that cannot run one");
  }
  if (record != nullptr) {
    // Tiles packing a group's heads fill as many rows as hold whole queries of the group.
    record->block_m =
        PackHeads ? hopper_packed_tile_rows(params.h / params.hk) : Tiles::kBlockM;
    record->block_n = Tiles::kBlockN;
    record->packs_heads = PackHeads;
    record->page_rows = Layout == KvLayout::kPagedRows;
    record->forward_grid = LaunchGrid{blocks, 1, 1};
    record->carry = Tiles::kCarry && hp.mainloop.carry;
    record->rotate_rounds = hp.scheduler.rotate_rounds;
    record->tile_counter = hp.scheduler.tile_counter != nullptr;
    record->running_max = Tiles::kRunningMax;
    record->tile_group = hp.scheduler.groups.by_group_units.divisor();
    record->tail_tiles = hp.scheduler.tail.tail_tiles;
    record->tail_parts = hp.scheduler.tail.max_parts;
  }
}

// Tile choices per causal mask and split.
template <class Elem, int D, class Tiles, KvLayout Layout = KvLayout::kDense,
          bool PackHeads = false>
void launch_tiles(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                  LaunchRecord* record) {
  const bool split = plan.num_splits > 1;
  if (params.causal) {
    split ? launch_variant<Elem, D, true, true, Tiles, Layout, PackHeads>(params, plan, stream,
                                                                        record)
          : launch_variant<Elem, D, true, false, Tiles, Layout, PackHeads>(params, plan, stream,
                                                                         record);
  } else {
    split ? launch_variant<Elem, D, false, true, Tiles, Layout, PackHeads>(params, plan, stream,
                                                                         record)
          : launch_variant<Elem, D, false, false, Tiles, Layout, PackHeads>(params, plan, stream,
                                                                          record);
  }
}

// Tiles whose instances exist only unsplit: the mask picks the variant.
template <class Elem, int D, class Tiles, KvLayout Layout = KvLayout::kDense>
void launch_unsplit(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                    LaunchRecord* record) {
  if (params.causal) {
    launch_variant<Elem, D, true, false, Tiles, Layout>(params, plan, stream, record);
  } else {
    launch_variant<Elem, D, false, false, Tiles, Layout>(params, plan, stream, record);
  }
}

// 192 rows: three consumers issuing in turn on their own (ping-pong is written for two); two Q
// buffers at d=64, one at d=128 (two do not fit beside the K/V stages and the output staging).
template <int D>
using TallTiles = HopperTiles<D, kHopperTallRows, false, false, D == 64 ? 2 : 1, false,
                              hopper_tall_block_n(D)>;
// 128 rows: ping-pong tiles with two Q buffers, whose last P V may carry the next tile's first
// S = Q K^T (LaunchPlan::carry).
template <int D>
using PingPongTiles = HopperTiles<D, kHopperBaseRows, true, true, 2, true>;
// The same for unsplit causal calls over long keys: probabilities at the running max
// (LaunchPlan::running_max), walking the static rounds (chunks) or drawn from a counter.
template <int D, bool Drawn>
using LongCausalTiles =
    HopperTiles<D, kHopperBaseRows, true, true, 2, true, kHopperBlockN, D, true, false, Drawn>;
// 128 rows at d=192 and 256: ping-pong tiles over hopper_large_head_block_n keys, one Q buffer
// (so they do not carry S across tiles).
template <int D>
using LargeHeadTiles =
    HopperTiles<D, kHopperBaseRows, true, true, 1, false, hopper_large_head_block_n(D)>;
// The same drawn from a counter (unsplit causal dense calls: hopper_large_head_draws).
template <int D>
using DrawnLargeHeadTiles = HopperTiles<D, kHopperBaseRows, true, true, 1, false,
                                        hopper_large_head_block_n(D), D, false, false, true>;
// d=192 with v of 128: d=128's 128-key blocks and O, one Q buffer.
using NarrowValueTiles =
    HopperTiles<192, kHopperBaseRows, true, true, 1, false, hopper_large_head_block_n(192, 128),
                128>;
// 256 rows (unsplit d=64 calls): four consumers side by side over 64-key blocks, six stages of
// the K/V ring, so it holds as many keys as three of 128.
using WideTiles = HopperTiles<64, kHopperWideRows, false, false, 2, false, kHopperWideBlockN>;
// The same over pages copied a row at a time, with the row table in their shared memory.
using RowTableWideTiles = HopperTiles<64, kHopperWideRows, false, false, 2, false,
                                      kHopperWideBlockN, 64, false, true>;

// Unsplit causal calls over long keys on the running-max tiles `Tiles`, dense or of sequences
// of their own lengths, over contiguous k/v, pages loaded as boxes or pages copied a row at a
// time (hopper_running_max_copies_rows; not drawn from a counter).
template <class Elem, int D, class Tiles>
void launch_long_causal_on(const AttnFwdParams& params, const LaunchPlan& plan,
                           gpuStream_t stream, LaunchRecord* record) {
  if (!plan.sequences) {
    return launch_variant<Elem, D, true, false, Tiles>(params, plan, stream, record);
  }
  if constexpr (hopper_running_max_copies_rows(D) && !Tiles::kDrawn) {
    if (plan.page_rows) {
      return launch_variant<Elem, D, true, false, Tiles, KvLayout::kPagedRows>(params, plan,
                                                                              stream, record);
    }
  }
  if constexpr (D == 64 || D == 128) {
    if (plan.paged && !plan.page_rows) {
      return launch_variant<Elem, D, true, false, Tiles, KvLayout::kPaged>(params, plan, stream,
                                                                          record);
    }
  }
  if (plan.paged) {
    throw std::logic_error("flashsplit: no running-max tiles for paged k/v at d=" +
                           std::to_string(D) + (plan.page_rows ? " copied a row at a time" : "") +
                           (Tiles::kDrawn ? " drawn from a counter" : ""));
  }
  launch_variant<Elem, D, true, false, Tiles, KvLayout::kSequences>(params, plan, stream, record);
}

// Unsplit causal calls over long keys on the 128-row tiles (LaunchPlan::running_max): drawn from
// a counter where the plan says so (LaunchPlan::tile_counter), else in static rounds.
template <class Elem, int D>
void launch_long_causal(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                        LaunchRecord* record) {
  if (!params.causal || plan.num_splits != 1 || plan.tiles.block_m != kHopperBaseRows ||
      plan.tiles.block_n != kHopperBlockN || plan.tiles.packs_heads) {
    throw std::logic_error("flashsplit: the running-max tiles are for unsplit causal calls "
                           "of one head a row");
  }
  if (plan.tile_counter) {
    return launch_long_causal_on<Elem, D, LongCausalTiles<D, true>>(params, plan, stream, record);
  }
  launch_long_causal_on<Elem, D, LongCausalTiles<D, false>>(params, plan, stream, record);
}

// Sequences of their own lengths run instances of their own (FwdKernelTraits::kSequences): the
// 128-row ping-pong tiles of the head dim, and unsplit the 192-row ones.
template <int D>
using SequenceTiles = std::conditional_t<(D > 128), LargeHeadTiles<D>, PingPongTiles<D>>;

// The instances of sequence tiles reading the plan's k/v layout: paged k/v on the 128-row tiles
// of 128-key blocks at d=64 and 128 only (hopper_reads_pages; the 256-row ones in
// launch_attn_fwd), as boxes or a row at a time (LaunchPlan::page_rows).
template <class Elem, int D, class Tiles, bool PackHeads = false>
void launch_sequence_tiles(const AttnFwdParams& params, const LaunchPlan& plan,
                           gpuStream_t stream, LaunchRecord* record) {
  if constexpr ((D == 64 || D == 128) && Tiles::kBlockM == kHopperBaseRows &&
                Tiles::kBlockN == kHopperBlockN) {
    if (plan.page_rows) {
      return launch_tiles<Elem, D, Tiles, KvLayout::kPagedRows, PackHeads>(params, plan, stream,
                                                                           record);
    }
    if (plan.paged) {
      return launch_tiles<Elem, D, Tiles, KvLayout::kPaged, PackHeads>(params, plan, stream,
                                                                       record);
    }
  }
  if (plan.paged) {
    throw std::logic_error("flashsplit: no Hopper tile of " + std::to_string(Tiles::kBlockM) +
                           " rows x " + std::to_string(Tiles::kBlockN) +
                           " keys for paged k/v at d=" + std::to_string(D));
  }
  launch_tiles<Elem, D, Tiles, KvLayout::kSequences, PackHeads>(params, plan, stream, record);
}

template <class Elem, int D>
void launch_attn_fwd(const AttnFwdParams& params, const LaunchPlan& plan, gpuStream_t stream,
                     LaunchRecord* record) {
  const int block_m = plan.tiles.block_m, block_n = plan.tiles.block_n;
  // Multi-token decode of a GQA group: the 128-row sequence tiles packing the group's heads.
  if constexpr (D == 64 || D == 128) {
    if (plan.tiles.packs_heads) {
      if (plan.sequences && block_m == hopper_packed_tile_rows(params.h / params.hk) &&
          block_n == PingPongTiles<D>::kBlockN) {
        return launch_sequence_tiles<Elem, D, PingPongTiles<D>, true>(params, plan, stream,
                                                                      record);
      }
      throw std::logic_error("flashsplit: no Hopper tile packing heads of " +
                             std::to_string(block_m) + " rows x " + std::to_string(block_n) +
                             " keys");
    }
  }
  if constexpr (D <= 128) {
    if (plan.running_max) return launch_long_causal<Elem, D>(params, plan, stream, record);
  }
  if (plan.sequences) {
    if (params.dv == D && block_m == SequenceTiles<D>::kBlockM &&
        block_n == SequenceTiles<D>::kBlockN) {
      using Tiles = SequenceTiles<D>;
      if constexpr (hopper_sequence_splits_built(D, true)) {
        return launch_sequence_tiles<Elem, D, Tiles>(params, plan, stream, record);
      } else if (plan.num_splits == 1 && !plan.paged) {
        return launch_unsplit<Elem, D, Tiles, KvLayout::kSequences>(params, plan, stream, record);
      } else if (!params.causal && !plan.paged) {
        return launch_variant<Elem, D, false, true, Tiles, KvLayout::kSequences>(params, plan,
                                                                                stream, record);
      }
    }
    // Unsplit calls from d=128 down may take the 192-row tiles (their split forms spilled), and
    // at d=64 the 256-row ones, also over pages (of whole key blocks as boxes, others copied a
    // row at a time).
    if constexpr (D <= 128) {
      if (!plan.paged && block_m == kHopperTallRows && plan.num_splits == 1) {
        return launch_unsplit<Elem, D, TallTiles<D>, KvLayout::kSequences>(params, plan, stream,
                                                                           record);
      }
    }
    if constexpr (D == 64) {
      if (block_m == kHopperWideRows && plan.num_splits == 1) {
        if (plan.page_rows) {
          return launch_unsplit<Elem, D, RowTableWideTiles, KvLayout::kPagedRows>(
              params, plan, stream, record);
        }
        if (plan.paged) {
          return launch_unsplit<Elem, D, WideTiles, KvLayout::kPaged>(params, plan, stream,
                                                                     record);
        }
        return launch_unsplit<Elem, D, WideTiles, KvLayout::kSequences>(params, plan, stream,
                                                                       record);
      }
    }
  } else if constexpr (D > 128) {
    // 128-row ping-pong tiles only, over their own key blocks (hopper_large_head_block_n).
    if (block_m == kHopperBaseRows) {
      if constexpr (D == 192) {
        if (params.dv == 128 && block_n == NarrowValueTiles::kBlockN) {
          return launch_tiles<Elem, D, NarrowValueTiles>(params, plan, stream, record);
        }
      }
      if (plan.tile_counter) {
        if (!params.causal || plan.num_splits != 1 || plan.sequences || params.dv != D) {
          throw std::logic_error("flashsplit: the d=" + std::to_string(D) +
                                 " tiles drawn from a counter are for unsplit causal calls of "
                                 "dense k/v");
        }
        return launch_variant<Elem, D, true, false, DrawnLargeHeadTiles<D>>(params, plan, stream,
                                                                            record);
      }
      if (params.dv == D) {
        return launch_tiles<Elem, D, LargeHeadTiles<D>>(params, plan, stream, record);
      }
    }
  } else {
    switch (block_m) {
      case kHopperBaseRows:
        return launch_tiles<Elem, D, PingPongTiles<D>>(params, plan, stream, record);
      case kHopperTallRows: return launch_tiles<Elem, D, TallTiles<D>>(params, plan, stream, record);
      case kHopperWideRows:
        if constexpr (D == 64) {
          // Only unsplit forms exist: the plan takes wide tiles for nothing else.
          if (plan.num_splits != 1) {
            throw std::logic_error("flashsplit: wide Hopper tiles are for unsplit calls");
          }
          return launch_unsplit<Elem, D, WideTiles>(params, plan, stream, record);
        }
        break;
    }
  }
  throw std::logic_error("flashsplit: no Hopper tile of " + std::to_string(block_m) + " rows x " +
                         std::to_string(block_n) + " keys at d=" + std::to_string(D) +
                         " with v's " + std::to_string(params.dv) +
                         (plan.paged ? " for paged k/v" : plan.sequences ? " for sequences" : ""));
}

}  // namespace sm90
}  // namespace flashsplit
