// The one place that names the GPU runtime: nvcc builds against CUDA, hipcc against HIP.
// Kernel code uses only the gpu* names below, so portable kernels (combine, dispatch) compile
// for either; matrix-core code lives in per-target folders (sm80/, sm90/, gfx9/).
#pragma once

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#if defined(FLASHSPLIT_HIP_SHIM)
// clang without ROCm (-nogpuinc -nogpulib): the project's own subset of the same API.
#include "kernels/hip_shim.h"
#else
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#endif
// The HIP kernels are written for wave64 (kWarpSize below): the gfx9 (CDNA) family.
#if defined(__HIP_DEVICE_COMPILE__) && !defined(__GFX9__)
#error "flashsplit's HIP kernels target gfx9 (CDNA, wave64) only"
#endif
using gpuStream_t = hipStream_t;
using gpuError_t = hipError_t;
using gpu_bf16_t = __hip_bfloat16;
using gpu_fp16_t = __half;
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define gpuMemsetAsync hipMemsetAsync
#define gpuGetDevice hipGetDevice
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
using gpuStream_t = cudaStream_t;
using gpuError_t = cudaError_t;
using gpu_bf16_t = __nv_bfloat16;
using gpu_fp16_t = __half;
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define gpuMemsetAsync cudaMemsetAsync
#define gpuGetDevice cudaGetDevice
#endif

namespace flashsplit {

// Throws so the torch layer turns a failed call or launch into a Python RuntimeError.
inline void gpu_check(gpuError_t status, const char* what, const char* file, int line) {
  if (status != gpuSuccess) {
    throw std::runtime_error(std::string("flashsplit: ") + what + " failed at " + file + ":" +
                             std::to_string(line) + ": " + gpuGetErrorString(status));
  }
}

}  // namespace flashsplit

#define FS_GPU_CHECK(expr) ::flashsplit::gpu_check((expr), #expr, __FILE__, __LINE__)
// After every launch: catches bad configurations (and, synchronously, nothing else).
#define FS_LAUNCH_CHECK(name) ::flashsplit::gpu_check(gpuGetLastError(), name, __FILE__, __LINE__)

// Programmatic dependent launch (CUDA, sm_90 and later). launch_after_prior_grid starts a kernel
// while the kernel before it on the stream is still finishing, so its launch latency hides
// behind that kernel's tail; the kernel must call wait_for_prior_grid() before it reads
// anything the prior kernel writes. The prior kernel calls allow_dependent_launch() once each
// of its blocks has started, which lets the dependent grid be scheduled as soon as every
// prior block is resident (they cannot be starved: all prior blocks already hold their slots).
// On HIP and before sm_90 these are a plain launch and no-ops.
namespace flashsplit {

__device__ __forceinline__ void allow_dependent_launch() {
#if !defined(__HIPCC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_prior_grid() {
#if !defined(__HIPCC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// dependent: whether the device supports it (compute capability 9.0 or later).
template <class... Params, class... Args>
void launch_after_prior_grid(bool dependent, void (*kernel)(Params...), dim3 grid, dim3 block,
                             size_t smem_bytes, gpuStream_t stream, Args&&... args) {
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
  (void)dependent;
  hipLaunchKernelGGL(kernel, grid, block, smem_bytes, stream, std::forward<Args>(args)...);
#else
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = dependent ? 1 : 0;
  gpu_check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...),
            "cudaLaunchKernelEx", __FILE__, __LINE__);
#endif
}

// Opts Kernel in to `bytes` of dynamic shared memory (needed above 48 KB) on the current device,
// once per device: the attribute stays set, and setting it costs about a microsecond of host
// time, a fair part of a decode step's. Devices past the 64th set it on every launch.
template <auto Kernel>
void allow_dynamic_smem(int bytes) {
  static std::atomic<uint64_t> done{0};  // bit i: set on device i
  int device = 0;
  gpu_check(gpuGetDevice(&device), "gpuGetDevice", __FILE__, __LINE__);
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if ((done.load(std::memory_order_acquire) & bit) != 0) return;
  gpu_check(gpuFuncSetAttribute(reinterpret_cast<const void*>(Kernel),
                                gpuFuncAttributeMaxDynamicSharedMemorySize, bytes),
            "gpuFuncSetAttribute", __FILE__, __LINE__);
  done.fetch_or(bit, std::memory_order_release);
}

// A plain launch of kernel(args...) on the stream, the same call on either runtime.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                   gpuStream_t stream, Args&&... args) {
  launch_after_prior_grid(false, kernel, grid, block, smem_bytes, stream,
                          std::forward<Args>(args)...);
}

}  // namespace flashsplit

// A kernel's launch bounds: at most `threads` per block, and the occupancy the compiler keeps
// registers for: min_occupancy resident blocks per SM on CUDA, waves per SIMD (execution unit)
// on AMD.
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define FS_LAUNCH_BOUNDS(threads, min_occupancy) \
  __attribute__((amdgpu_flat_work_group_size(1, threads), amdgpu_waves_per_eu(min_occupancy)))
#else
#define FS_LAUNCH_BOUNDS(threads, min_occupancy) __launch_bounds__(threads, min_occupancy)
#endif

// Lanes that run in lockstep and exchange registers: a CUDA warp, or an AMD gfx9 wavefront.
namespace flashsplit {

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
constexpr int kWarpSize = 64;
#else
constexpr int kWarpSize = 32;
#endif

// Butterfly exchange: lane i receives x of lane i ^ offset (0 < offset < kWarpSize). Every lane
// of the warp must reach the call (the CUDA form names them all in its mask).
template <class T>
__device__ __forceinline__ T lane_shfl_xor(T x, int offset) {
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
  return __shfl_xor(x, offset);
#else
  return __shfl_xor_sync(0xffffffffu, x, offset);
#endif
}

}  // namespace flashsplit

// 16-bit element helpers shared by every target.
namespace flashsplit {

template <class Elem>
__device__ __forceinline__ Elem from_float(float x);
template <>
__device__ __forceinline__ gpu_bf16_t from_float<gpu_bf16_t>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ gpu_fp16_t from_float<gpu_fp16_t>(float x) { return __float2half_rn(x); }

}  // namespace flashsplit
