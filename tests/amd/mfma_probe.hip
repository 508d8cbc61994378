// One wave computes D = A B with one MFMA, each lane loading its operand registers from
// row-major A (m x k) and B (k x n) through mfma_layout.h's maps and storing its accumulators to
// row-major D (m x n) through mfma_acc: the layouts and gfx9/mfma.h checked together on the
// emulator (tests/test_amd_emulator.py).
#include "kernels/gfx9/mfma.h"

namespace flashsplit {
namespace gfx9 {

template <Mfma op, class Elem>
__global__ void __launch_bounds__(64)
    mfma_probe(const unsigned short* a_rows, const unsigned short* b_rows, float* d_rows) {
  constexpr MfmaShape s = mfma_shape(op);
  const int lane = static_cast<int>(threadIdx.x);
  MfmaOperand<op> a, b;
#pragma unroll
  for (int i = 0; i < s.k_per_lane; ++i) {
    const RowK ea = mfma_a(op, lane, i);
    const KCol eb = mfma_b(op, lane, i);
    a[i] = a_rows[ea.row * s.k + ea.k];
    b[i] = b_rows[eb.k * s.n + eb.col];
  }
  MfmaAcc<op> acc = {};
  acc = mfma<op, Elem>(a, b, acc);
#pragma unroll
  for (int r = 0; r < s.acc_regs; ++r) {
    const RowCol e = mfma_acc(op, lane, r);
    d_rows[e.row * s.n + e.col] = acc[r];
  }
}

template __global__ void mfma_probe<Mfma::k32x32x8, gpu_bf16_t>(const unsigned short*, const unsigned short*, float*);
template __global__ void mfma_probe<Mfma::k32x32x8, gpu_fp16_t>(const unsigned short*, const unsigned short*, float*);
template __global__ void mfma_probe<Mfma::k16x16x16, gpu_bf16_t>(const unsigned short*, const unsigned short*, float*);
template __global__ void mfma_probe<Mfma::k16x16x16, gpu_fp16_t>(const unsigned short*, const unsigned short*, float*);
#if defined(__gfx950__)
template __global__ void mfma_probe<Mfma::k16x16x32, gpu_bf16_t>(const unsigned short*, const unsigned short*, float*);
template __global__ void mfma_probe<Mfma::k16x16x32, gpu_fp16_t>(const unsigned short*, const unsigned short*, float*);
template __global__ void mfma_probe<Mfma::k32x32x16, gpu_bf16_t>(const unsigned short*, const unsigned short*, float*);
template __global__ void mfma_probe<Mfma::k32x32x16, gpu_fp16_t>(const unsigned short*, const unsigned short*, float*);
#endif

}  // namespace gfx9
}  // namespace flashsplit
