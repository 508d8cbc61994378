// The integer float-to-half conversion of the emulator build against the compiler's own
// (_Float16, round to nearest even), over every exponent and boundary case.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/half_bits.h"

namespace flashsplit {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

uint16_t reference_half(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}

void expect_same(float x) {
  const uint16_t want = reference_half(x);
  const uint32_t got = half_bits_rne(bits_of(x));
  if (std::isnan(x)) {
    EXPECT_EQ(got & 0x7c00u, 0x7c00u) << x;
    EXPECT_NE(got & 0x3ffu, 0u) << "NaN stays NaN";
  } else {
    EXPECT_EQ(got, want) << x << " bits " << std::hex << bits_of(x);
  }
}

TEST(HalfBits, MatchesTheCompilersRoundingEverywhere) {
  std::mt19937 rng(7);
  // Every float exponent, random significands, both signs.
  for (uint32_t exponent = 0; exponent < 256; ++exponent)
    for (int i = 0; i < 2000; ++i) {
      const uint32_t u = (static_cast<uint32_t>(rng() & 1u) << 31) | (exponent << 23) |
                         (rng() & 0x7fffffu);
      float x;
      std::memcpy(&x, &u, sizeof x);
      expect_same(x);
    }
}

TEST(HalfBits, BoundariesRoundToNearestEven) {
  for (float x : {0.f, -0.f, 1.f, 65504.f, 65519.99f, 65520.f, 1e9f, 6.1035156e-5f,
                  6.0975552e-5f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 1e-10f,
                  std::numeric_limits<float>::infinity(), std::nanf("")}) {
    expect_same(x);
    expect_same(-x);
  }
  // Halfway between two halves, both ways.
  for (uint32_t h = 0x0001; h < 0x7bff; h += 97) {
    _Float16 lo, hi;
    const uint16_t lo_bits = static_cast<uint16_t>(h), hi_bits = static_cast<uint16_t>(h + 1);
    std::memcpy(&lo, &lo_bits, 2);
    std::memcpy(&hi, &hi_bits, 2);
    expect_same((static_cast<float>(lo) + static_cast<float>(hi)) / 2);
  }
}

}  // namespace
}  // namespace flashsplit
