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

}  // namespace

CUtensorMap make_head_tile_map(const char* name, const void* base, ElemType elem, int d, int rows,
                               int heads, int batch, int64_t row_stride, int64_t head_stride,
                               int64_t batch_stride, int box_cols, int box_rows) {
  if (box_cols != 64 && box_cols != 32) {
    throw std::logic_error("flashsplit: TMA boxes are 64 or 32 columns, got " +
                           std::to_string(box_cols));
  }
  constexpr uint64_t kElemBytes = 2;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  // A dim of one element is never stepped, and torch may give it any stride: describe it as
  // packed behind the previous dim so the encoder sees a valid (16-byte multiple) stride.
  cuuint64_t strides[3];
  const int64_t given[3] = {row_stride, head_stride, batch_stride};
  uint64_t packed = static_cast<uint64_t>(d) * kElemBytes;
  for (int i = 0; i < 3; ++i) {
    const bool stepped = dims[i + 1] > 1;
    strides[i] = stepped ? static_cast<cuuint64_t>(given[i]) * kElemBytes : (packed + 15) / 16 * 16;
    packed = strides[i] * dims[i + 1];
  }
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_cols),
                             static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  CUresult status = encoder()(
      &map, elem == ElemType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      4, const_cast<void*>(base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE,
      box_cols == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw std::runtime_error(std::string("flashsplit: cuTensorMapEncodeTiled refused ") + name +
                             " (error " + std::to_string(static_cast<int>(status)) + ")");
  }
  return map;
}

}  // namespace sm90
}  // namespace flashsplit
