// ceil(log2(n)): the shift of the power of two at or above n, for the host and the kernels
// alike (a fast divisor's shift, the combine's lanes, the portable grid's split stride).
#pragma once

#include "core/host_device.h"

namespace flashsplit {

// n >= 1.
FS_HOST_DEVICE inline int ceil_log2(unsigned n) {
#if defined(__CUDA_ARCH__)
  return n > 1 ? 32 - __clz(static_cast<int>(n - 1)) : 0;
#else
  return n > 1 ? 32 - __builtin_clz(n - 1) : 0;
#endif
}

}  // namespace flashsplit
