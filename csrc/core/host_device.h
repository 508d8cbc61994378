// Lets the few core functions the kernels share (partition, combine math) compile for both
// host and device without including any GPU header.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FS_HOST_DEVICE __host__ __device__
#else
#define FS_HOST_DEVICE
#endif
