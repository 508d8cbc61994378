// Quotient and remainder by a divisor fixed for a whole kernel, without a division instruction
// sequence: q = mulhi(n, m) >> s with a precomputed multiplier m and shift s (Granlund and
// Montgomery, "Division by invariant integers using multiplication", 1994). A GPU has no integer
// divider; each `/` or `%` by a runtime value is a ~20-instruction sequence with a reciprocal,
// and the Hopper kernel's tile walk does six of them per tile.
#pragma once

#include <cstdint>

#include "core/ceil_log2.h"
#include "core/host_device.h"

namespace flashsplit {

class FastDivmod {
 public:
  // divisor >= 1; dividends must lie in [0, 2^31).
  FS_HOST_DEVICE explicit FastDivmod(int divisor) : divisor_(divisor) {
    const unsigned shift = ceil_log2(static_cast<unsigned>(divisor));
    shift_ = shift;
    // m = ceil(2^(32 + shift) / divisor) - 2^32 fits in 32 bits; the 2^32 * n part is added back
    // in div() as `n`.
    const uint64_t one = 1;
    multiplier_ = static_cast<uint32_t>(((one << (32 + shift)) + divisor - 1) / divisor - (one << 32));
  }
  FS_HOST_DEVICE int div(int n) const {
    const uint32_t hi = mulhi(static_cast<uint32_t>(n), multiplier_);
    // (hi + n) >> shift without overflow: n < 2^31 and hi <= n.
    return static_cast<int>((hi + static_cast<uint32_t>(n)) >> shift_);
  }
  FS_HOST_DEVICE int mod(int n, int quotient) const { return n - quotient * divisor_; }
  FS_HOST_DEVICE int divisor() const { return divisor_; }

 private:
  FS_HOST_DEVICE static uint32_t mulhi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else  // one v_mul_hi_u32 on AMD GPUs
    return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
  }
  int divisor_;
  uint32_t multiplier_;
  unsigned shift_;
};

}  // namespace flashsplit
