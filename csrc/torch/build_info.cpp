#include "build_info.h"

#include <cstdio>

namespace flashsplit {

BuildInfo current_build_info() {
  BuildInfo info;
#ifdef FLASHSPLIT_WITH_CUDA
  info.gpu_kernels_built = true;
  info.head_dims = {FLASHSPLIT_HEAD_DIMS};
#ifdef FLASHSPLIT_WITH_HIP
#ifdef FLASHSPLIT_AMD_GFX90A
  info.amd_archs.push_back("gfx90a");
#endif
#ifdef FLASHSPLIT_AMD_GFX942
  info.amd_archs.push_back("gfx942");
#endif
#ifdef FLASHSPLIT_AMD_GFX950
  info.amd_archs.push_back("gfx950");
#endif
#else
  info.archs = {FLASHSPLIT_BUILT_ARCHS};
#ifdef FLASHSPLIT_WITH_HOPPER
  info.hopper_kernels_built = true;
#endif
#endif
#endif
  return info;
}

std::string build_id() {
#ifdef FLASHSPLIT_BUILD_ID
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(FLASHSPLIT_BUILD_ID));
  return text;
#else
  return "unversioned";
#endif
}

}  // namespace flashsplit
