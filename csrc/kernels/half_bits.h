// Float to half precision by integer operations (round to nearest even; overflow to infinity,
// subnormals kept, NaN stays NaN), usable on host and device. The emulator build of the AMD
// kernels converts with it: the CPU emulator writes a 16-bit result of a VOP1 instruction such
// as v_cvt_f16_f32 whose destination is v128 or above to the high half of v[n - 128] (the RDNA
// true16 encoding, not CDNA's), so a kernel whose conversions land there reads back zeros.
#pragma once

#include <stdint.h>

#include "core/host_device.h"

namespace flashsplit {

FS_HOST_DEVICE inline uint32_t half_bits_rne(uint32_t float_bits) {
  const uint32_t sign = (float_bits >> 16) & 0x8000u;
  const uint32_t a = float_bits & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN: a quiet NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and up round to infinity
  if (a >= 0x38800000u) {                       // 2^-14 and up: a normal half
    const uint32_t h = (a - 0x38000000u) >> 13, rest = a & 0x1fffu;
    return sign | (h + ((rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ? 1u : 0u));
  }
  // A subnormal half (or zero): the significand, with its implicit bit, in units of 2^-24.
  const int shift = 126 - static_cast<int>(a >> 23);
  if (shift > 24) return sign;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t h = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  return sign | (h + ((rest > half || (rest == half && (h & 1u))) ? 1u : 0u));
}

}  // namespace flashsplit
