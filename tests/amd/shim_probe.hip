// Exercises kernels/hip_shim.h through platform.h on the emulator (tests/test_amd_emulator.py):
// ids in three dimensions, blockDim / gridDim from the implicit kernel arguments, a workgroup
// barrier, lane_shfl_xor and __shfl_xor with a width, the 16-bit conversions and the float math.
#include "kernels/platform.h"

namespace {

constexpr int kThreads = 128;  // launched as (32, 2, 2)
constexpr int kIds = 12;
constexpr int kShuffles = 7;
constexpr int kMath = 4;

}  // namespace

__global__ void __launch_bounds__(kThreads)
    shim_probe(const float* x, unsigned int* ids, float* shuffled, unsigned short* bf16,
               unsigned short* fp16, float* math) {
  const unsigned int local = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned int g = block * kThreads + local;
  const unsigned int id[kIds] = {threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y,
                                 blockIdx.z,  blockDim.x,  blockDim.y,  blockDim.z, gridDim.x,
                                 gridDim.y,   gridDim.z};
  for (int i = 0; i < kIds; ++i) ids[g * kIds + i] = id[i];

  // The barrier orders the workgroup's LDS writes before its reads.
  __shared__ float mirror[kThreads];
  mirror[local] = static_cast<float>(g);
  __syncthreads();
  const float v = mirror[kThreads - 1 - local];

  float* sh = shuffled + g * kShuffles;
  sh[0] = v;
  sh[1] = flashsplit::lane_shfl_xor(v, 1);
  sh[2] = flashsplit::lane_shfl_xor(v, 8);
  sh[3] = flashsplit::lane_shfl_xor(v, 32);
  sh[4] = static_cast<float>(flashsplit::lane_shfl_xor(static_cast<int>(g), 3));
  sh[5] = __shfl_xor(v, 4, 8);   // inside segments of 8 lanes
  sh[6] = __shfl_xor(v, 16, 8);  // leaves the segment: the lane keeps its own value

  const float in = x[g];
  bf16[g] = __builtin_bit_cast(unsigned short, flashsplit::from_float<gpu_bf16_t>(in));
  fp16[g] = __builtin_bit_cast(unsigned short, flashsplit::from_float<gpu_fp16_t>(in));
  float* m = math + g * kMath;
  m[0] = expf(in);
  m[1] = logf(fabsf(in));
  m[2] = exp2f(fminf(in, 100.f));
  m[3] = log2f(fmaxf(in, 1e-30f));
}
