// TMA tensor maps for the Hopper forward, built on the host. The driver's encoder is reached
// through the runtime's entry-point query, so the extension has no link-time libcuda dependency.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/attn_params.h"

namespace flashsplit {
namespace sm90 {

// How the rows a map loads are read, which sets the L2 promotion of its loads. kShared: reread
// from L2 by other tiles (a head's K and V by each of its query tiles; Q and O): promoted to 256
// bytes. kStreamed: read once from DRAM, as the K and V of tiles packing a GQA group's heads
// (multi-token decode), whose one tile reads each key for the whole group: promoted to 128
// bytes, which measured up to 13% faster there (H200; pages of 64 keys as boxes alike) and up
// to 1% slower on prefill tiles.
enum class RowReuse { kShared, kStreamed };

// A (batch, rows, heads, d) tensor with element strides (the last dim contiguous), seen as the
// 4-D map (d, rows, heads, batch) whose box is box_cols columns x box_rows rows of one head,
// with TMA's swizzle of a box row (64 columns: 128 bytes; 32 columns: 64 bytes) and the L2
// promotion of `reuse`. Rows past `rows` load as zeros. Throws std::runtime_error naming the
// tensor if the driver refuses the description.
CUtensorMap make_head_tile_map(const char* name, const void* base, ElemType elem, int d, int rows,
                               int heads, int batch, int64_t row_stride, int64_t head_stride,
                               int64_t batch_stride, int box_cols, int box_rows,
                               RowReuse reuse = RowReuse::kShared);

// The queries of a (batch, rows, heads, d) tensor whose heads form groups of `group` (the query
// heads of one k/v head), seen as the 5-D map (d, group, rows, heads / group, batch) whose box is
// box_cols columns x the group's heads x box_rows / group rows: box_rows rows of a tile that
// packs the group's heads (row r: query r / group, head r % group). group divides box_rows.
CUtensorMap make_group_tile_map(const char* name, const void* base, ElemType elem, int d,
                                int rows, int heads, int group, int batch, int64_t row_stride,
                                int64_t head_stride, int64_t batch_stride, int box_cols,
                                int box_rows);

}  // namespace sm90
}  // namespace flashsplit
