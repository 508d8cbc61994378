#include "core/problem.h"

namespace flashsplit {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kOther: break;
  }
  return "other";
}

}  // namespace flashsplit
