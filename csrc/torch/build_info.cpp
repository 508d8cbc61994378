#include "build_info.h"

namespace flashsplit {

BuildInfo current_build_info() {
  BuildInfo info;
#ifdef FLASHSPLIT_WITH_CUDA
  info.gpu_kernels_built = true;
  info.archs = {FLASHSPLIT_BUILT_ARCHS};
  info.head_dims = {FLASHSPLIT_HEAD_DIMS};
#ifdef FLASHSPLIT_WITH_HOPPER
  info.hopper_kernels_built = true;
#endif
#endif
  return info;
}

}  // namespace flashsplit
