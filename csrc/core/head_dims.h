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

// The portable kernels over the gfx9 policy (MFMA): its LDS rows are a power of two of units.
constexpr bool portable_mfma_has_head_dim(int d) { return d == 64 || d == 128; }

}  // namespace flashsplit
