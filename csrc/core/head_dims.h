// The head dims each kernel family has instances for. The gate admits a call only where its
// family has the call's head dim; setup.py's HEAD_DIMS (the union, built into every GPU build)
// and the instantiation units under csrc/kernels/ follow these lists.
#pragma once

namespace flashsplit {

// The portable kernels over the sm80 policy (mma.sync): rows of 96 elements take their own
// shared-memory swizzle; from 256 Q is read from shared memory per k-step instead of being
// held in registers.
constexpr bool portable_mma_has_head_dim(int d) {
  return d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
}

// The Hopper kernels: TMA boxes and wgmma operands are slabs of 64 columns (of 32 at d=96).
constexpr bool hopper_has_head_dim(int d) {
  return d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
}

// Where v's head dim dv differs from q's and k's d: only d=192 with dv=128 (the shape of
// DeepSeek's multi-head latent attention prefill), on the NVIDIA kernels of dense calls. The
// Hopper kernels have tiles with O of dv columns; the portable ones run their d=192 instances
// with v's columns past dv read as zeros and only dv columns written.
constexpr bool has_value_head_dim(int d, int dv) { return dv == d || (d == 192 && dv == 128); }
// Whether instances of head dim d may see a narrower v (else their dv is d, a constant).
constexpr bool may_narrow_value(int d) { return d == 192; }

// The portable kernels over the gfx9 policy (MFMA): its LDS rows are a power of two of units.
constexpr bool portable_mfma_has_head_dim(int d) { return d == 64 || d == 128; }

}  // namespace flashsplit
