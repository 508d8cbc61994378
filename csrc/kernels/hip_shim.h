// The HIP API subset flashsplit's device code and launchers use, for clang builds without ROCm
// (compile and resource checks, the CPU emulator): clang compiles with
// `-x hip -nogpuinc -nogpulib -DFLASHSPLIT_HIP_SHIM`, and platform.h includes this header in
// place of <hip/hip_runtime.h>, <hip/hip_bf16.h> and <hip/hip_fp16.h>.
//
// Every name is spelled as ROCm spells it, so platform.h's HIP branch is the same code over
// either header, and whatever compiles against this subset compiles against ROCm. Device
// functions lower to clang builtins (no device library is linked). The runtime calls that
// platform.h's launch helpers make are declared for the host side and never defined: a
// device-only compile parses the launchers (which is what instantiates the kernels) but never
// links them, and a build that links host code uses ROCm's headers and libraries instead.
#pragma once

#if !defined(__HIP__)
#error "hip_shim.h needs clang's HIP mode (-x hip)"
#endif

#include <math.h>  // INFINITY, NAN and the host declarations the device overloads below sit beside
#include <stddef.h>
#include <stdint.h>

// ---- qualifiers -------------------------------------------------------------------------------
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ inline __attribute__((always_inline))
// One argument only: the largest workgroup the kernel is compiled for. (ROCm's optional second
// argument means waves per execution unit, not CUDA's blocks per SM, so it is left out here.)
#define __launch_bounds__(max_threads) __attribute__((amdgpu_flat_work_group_size(1, max_threads)))

// ---- vector types -------------------------------------------------------------------------------
// Aligned to their size, so a load or store of one is a single 8- or 16-byte access.
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned int x, y;
};
struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
__host__ __device__ constexpr float2 make_float2(float x, float y) { return float2{x, y}; }
__host__ __device__ constexpr float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}
__host__ __device__ constexpr uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }
__host__ __device__ constexpr uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z,
                                               unsigned int w) {
  return uint4{x, y, z, w};
}

struct dim3 {
  unsigned int x, y, z;
  __host__ __device__ constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
      : x(x_), y(y_), z(z_) {}
};

// ---- work-item and workgroup ids ------------------------------------------------------------------
// threadIdx.x and friends read like CUDA's built-in variables; each component is a property whose
// getter is a hardware id (threadIdx, blockIdx) or a field of the code object v5 implicit kernel
// arguments (blockDim: hidden_group_size_*, gridDim: hidden_block_count_*; clang 19 and later emit
// v5 or v6 objects, whose implicit arguments start with these fields).
namespace flashsplit_hip_shim {

// The implicit arguments live in the constant address space (scalar loads).
typedef const __attribute__((address_space(4))) uint32_t* ConstantU32;
typedef const __attribute__((address_space(4))) uint16_t* ConstantU16;
__device__ __forceinline__ ConstantU32 implicit_u32() {
  return (ConstantU32)__builtin_amdgcn_implicitarg_ptr();
}
__device__ __forceinline__ ConstantU16 implicit_u16() {
  return (ConstantU16)__builtin_amdgcn_implicitarg_ptr();
}

struct ThreadIdx {
  __declspec(property(get = get_x)) unsigned int x;
  __declspec(property(get = get_y)) unsigned int y;
  __declspec(property(get = get_z)) unsigned int z;
  static __device__ __forceinline__ unsigned int get_x() { return __builtin_amdgcn_workitem_id_x(); }
  static __device__ __forceinline__ unsigned int get_y() { return __builtin_amdgcn_workitem_id_y(); }
  static __device__ __forceinline__ unsigned int get_z() { return __builtin_amdgcn_workitem_id_z(); }
};
struct BlockIdx {
  __declspec(property(get = get_x)) unsigned int x;
  __declspec(property(get = get_y)) unsigned int y;
  __declspec(property(get = get_z)) unsigned int z;
  static __device__ __forceinline__ unsigned int get_x() { return __builtin_amdgcn_workgroup_id_x(); }
  static __device__ __forceinline__ unsigned int get_y() { return __builtin_amdgcn_workgroup_id_y(); }
  static __device__ __forceinline__ unsigned int get_z() { return __builtin_amdgcn_workgroup_id_z(); }
};
// Implicit argument layout (code object v5): block counts x, y, z as u32 at bytes 0, 4, 8;
// group sizes x, y, z as u16 at bytes 12, 14, 16.
struct BlockDim {
  __declspec(property(get = get_x)) unsigned int x;
  __declspec(property(get = get_y)) unsigned int y;
  __declspec(property(get = get_z)) unsigned int z;
  static __device__ __forceinline__ unsigned int get_x() { return implicit_u16()[6]; }
  static __device__ __forceinline__ unsigned int get_y() { return implicit_u16()[7]; }
  static __device__ __forceinline__ unsigned int get_z() { return implicit_u16()[8]; }
};
struct GridDim {
  __declspec(property(get = get_x)) unsigned int x;
  __declspec(property(get = get_y)) unsigned int y;
  __declspec(property(get = get_z)) unsigned int z;
  static __device__ __forceinline__ unsigned int get_x() { return implicit_u32()[0]; }
  static __device__ __forceinline__ unsigned int get_y() { return implicit_u32()[1]; }
  static __device__ __forceinline__ unsigned int get_z() { return implicit_u32()[2]; }
};

}  // namespace flashsplit_hip_shim

// Declared, never defined: every use goes through a static getter, so no storage is read.
extern const __device__ __attribute__((weak)) flashsplit_hip_shim::ThreadIdx threadIdx;
extern const __device__ __attribute__((weak)) flashsplit_hip_shim::BlockIdx blockIdx;
extern const __device__ __attribute__((weak)) flashsplit_hip_shim::BlockDim blockDim;
extern const __device__ __attribute__((weak)) flashsplit_hip_shim::GridDim gridDim;

// ---- synchronisation ----------------------------------------------------------------------------
// A workgroup barrier that also orders memory: writes before it (LDS and global) are visible to
// the workgroup's reads after it.
__device__ __forceinline__ void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// ---- wave shuffles (wave64) -------------------------------------------------------------------------
__device__ __forceinline__ unsigned int __lane_id() {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
// Lane i receives var of lane i ^ lane_mask when that lane lies in i's width-aligned segment,
// and its own var otherwise (HIP's rule). ds_bpermute reads any of the wave's 64 lanes.
__device__ __forceinline__ int __shfl_xor(int var, int lane_mask, int width = 64) {
  const int self = static_cast<int>(__lane_id());
  int src = self ^ lane_mask;
  if ((src & ~(width - 1)) != (self & ~(width - 1))) src = self;
  return __builtin_amdgcn_ds_bpermute(src << 2, var);
}
__device__ __forceinline__ unsigned int __shfl_xor(unsigned int var, int lane_mask, int width = 64) {
  return static_cast<unsigned int>(__shfl_xor(static_cast<int>(var), lane_mask, width));
}
__device__ __forceinline__ float __shfl_xor(float var, int lane_mask, int width = 64) {
  return __builtin_bit_cast(float, __shfl_xor(__builtin_bit_cast(int, var), lane_mask, width));
}

// ---- 16-bit floating-point types ----------------------------------------------------------------
// Storage types with explicit conversions only (no arithmetic), the part of ROCm's __half and
// __hip_bfloat16 that flashsplit uses. The conversions are the compiler's own (round to nearest
// even, NaN kept NaN), which lower to the target's convert instructions where it has them.
struct __hip_bfloat16 {
  __bf16 data;
};
struct __half {
  _Float16 data;
};
__host__ __device__ __forceinline__ __hip_bfloat16 __float2bfloat16(float x) {
  return __hip_bfloat16{static_cast<__bf16>(x)};
}
__host__ __device__ __forceinline__ __hip_bfloat16 __float2bfloat16_rn(float x) {
  return __float2bfloat16(x);
}
__host__ __device__ __forceinline__ float __bfloat162float(__hip_bfloat16 x) {
  return static_cast<float>(x.data);
}
__host__ __device__ __forceinline__ __half __float2half(float x) {
  return __half{static_cast<_Float16>(x)};
}
__host__ __device__ __forceinline__ __half __float2half_rn(float x) { return __float2half(x); }
__host__ __device__ __forceinline__ float __half2float(__half x) { return static_cast<float>(x.data); }

// ---- float math on the device ----------------------------------------------------------------------
// Device overloads beside <math.h>'s host declarations (clang resolves a __host__ __device__
// caller to these in the device pass). The builtins become LLVM intrinsics that the AMDGPU
// backend expands to full-accuracy sequences (expf and logf with range reduction around
// v_exp_f32 / v_log_f32), not the fast approximations.
static __device__ __forceinline__ float expf(float x) { return __builtin_expf(x); }
static __device__ __forceinline__ float logf(float x) { return __builtin_logf(x); }
static __device__ __forceinline__ float exp2f(float x) { return __builtin_exp2f(x); }
static __device__ __forceinline__ float log2f(float x) { return __builtin_log2f(x); }
static __device__ __forceinline__ float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
static __device__ __forceinline__ float fminf(float a, float b) { return __builtin_fminf(a, b); }
static __device__ __forceinline__ float fabsf(float x) { return __builtin_fabsf(x); }
static __device__ __forceinline__ float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

// ---- host runtime: declarations only ------------------------------------------------------------------
typedef struct ihipStream_t* hipStream_t;
enum hipError_t { hipSuccess = 0 };
enum hipFuncAttribute { hipFuncAttributeMaxDynamicSharedMemorySize = 8 };

const char* hipGetErrorString(hipError_t error);
hipError_t hipGetLastError();
hipError_t hipFuncSetAttribute(const void* func, hipFuncAttribute attr, int value);
hipError_t hipGetDevice(int* device);
hipError_t hipMemsetAsync(void* dst, int value, size_t size_bytes, hipStream_t stream);
template <class Kernel, class... Args>
void hipLaunchKernelGGL(Kernel kernel, const dim3& grid, const dim3& block, uint32_t shared_bytes,
                        hipStream_t stream, Args... args);
