#include "kernels/sm90/tensor_map.h"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <stdexcept>
#include <string>

#include "kernels/platform.h"

namespace flashsplit {
namespace sm90 {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    FS_GPU_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000,
                                                  cudaEnableDefault, &found));
    if (entry == nullptr || found != cudaDriverEntryPointSuccess) {
      throw std::runtime_error("flashsplit: the CUDA driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return fn;
}

CUtensorMapL2promotion l2_promotion(RowReuse reuse) {
  return reuse == RowReuse::kStreamed ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                      : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
}

// A tiled map of `rank` dims (dims[0] = d, contiguous) with element strides of dims 1.. and
// a box of box[] elements, swizzled by box rows of box_cols columns, its loads promoted in L2
// as `reuse` says.
CUtensorMap make_tile_map(const char* name, const void* base, ElemType elem, int rank,
                          const cuuint64_t* dims, const int64_t* given_strides,
                          const cuuint32_t* box, RowReuse reuse) {
  const int box_cols = static_cast<int>(box[0]);
  if (box_cols != 64 && box_cols != 32) {
    throw std::logic_error("flashsplit: TMA boxes are 64 or 32 columns, got " +
                           std::to_string(box_cols));
  }
  constexpr uint64_t kElemBytes = 2;
  // A dim of one element is never stepped, and torch may give it any stride: describe it as
  // packed behind the previous dim so the encoder sees a valid (16-byte multiple) stride.
  cuuint64_t strides[4];
  uint64_t packed = dims[0] * kElemBytes;
  for (int i = 0; i + 1 < rank; ++i) {
    const bool stepped = dims[i + 1] > 1;
    strides[i] = stepped ? static_cast<cuuint64_t>(given_strides[i]) * kElemBytes
                         : (packed + 15) / 16 * 16;
    packed = strides[i] * dims[i + 1];
  }
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  CUtensorMap map;
  CUresult status = encoder()(
      &map, elem == ElemType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      rank, const_cast<void*>(base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE,
      box_cols == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
      l2_promotion(reuse), CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw std::runtime_error(std::string("flashsplit: cuTensorMapEncodeTiled refused ") + name +
                             " (error " + std::to_string(static_cast<int>(status)) + ")");
  }
  return map;
}

}  // namespace

CUtensorMap make_head_tile_map(const char* name, const void* base, ElemType elem, int d, int rows,
                               int heads, int batch, int64_t row_stride, int64_t head_stride,
                               int64_t batch_stride, int box_cols, int box_rows,
                               RowReuse reuse) {
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  const int64_t strides[3] = {row_stride, head_stride, batch_stride};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_cols),
                             static_cast<cuuint32_t>(box_rows), 1, 1};
  return make_tile_map(name, base, elem, 4, dims, strides, box, reuse);
}

CUtensorMap make_group_tile_map(const char* name, const void* base, ElemType elem, int d,
                                int rows, int heads, int group, int batch, int64_t row_stride,
                                int64_t head_stride, int64_t batch_stride, int box_cols,
                                int box_rows) {
  if (group < 1 || heads % group != 0 || box_rows % group != 0) {
    throw std::logic_error("flashsplit: a group of " + std::to_string(group) + " of " +
                           std::to_string(heads) + " heads in boxes of " +
                           std::to_string(box_rows) + " rows");
  }
  const cuuint64_t dims[5] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(group),
                              static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads / group),
                              static_cast<cuuint64_t>(batch)};
  const int64_t strides[4] = {head_stride, row_stride, head_stride * group, batch_stride};
  const cuuint32_t box[5] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(group),
                             static_cast<cuuint32_t>(box_rows / group), 1, 1};
  return make_tile_map(name, base, elem, 5, dims, strides, box, RowReuse::kShared);
}

}  // namespace sm90
}  // namespace flashsplit
