// Lets the few core functions the kernels share (partition, combine math, tile order) compile
// for both host and device without including any GPU header. (HIP spells the attributes out:
// a build without ROCm's headers defines __host__ only once platform.h includes its shim.)
#pragma once

#if defined(__HIP__)
#define FS_HOST_DEVICE __attribute__((host, device))
#elif defined(__CUDACC__)
#define FS_HOST_DEVICE __host__ __device__
#else
#define FS_HOST_DEVICE
#endif
