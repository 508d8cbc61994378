// FastDivmod must agree with / and % for every divisor and dividend the tile walk can meet;
// ceil_log2, its shift, with the power of two at or above.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/ceil_log2.h"
#include "core/fast_divmod.h"

namespace flashsplit {
namespace {

void expect_exact(int divisor, int n) {
  const FastDivmod fd(divisor);
  const int q = fd.div(n);
  ASSERT_EQ(q, n / divisor) << n << " / " << divisor;
  ASSERT_EQ(fd.mod(n, q), n % divisor) << n << " % " << divisor;
}

TEST(FastDivmod, SmallDivisorsAndEdgeDividends) {
  for (int d = 1; d <= 4096; ++d) {
    for (int n : {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, 1 << 20, 2147483646, 2147483647}) {
      if (n >= 0) expect_exact(d, n);
    }
  }
}

TEST(FastDivmod, RandomDivisorsAndDividends) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> any(0, 2147483647);
  for (int i = 0; i < 20000; ++i) {
    const int d = 1 + any(rng) % (i % 2 ? 2147483647 : 100000);
    expect_exact(d, any(rng));
    expect_exact(d, static_cast<int>(static_cast<int64_t>(d) * (any(rng) % 8) % 2147483647));  // multiples
  }
}

TEST(FastDivmod, PowersOfTwo) {
  for (int s = 0; s < 31; ++s) {
    const int d = 1 << s;
    for (int n : {0, d - 1, d, 12345678, 2147483647}) expect_exact(d, n);
  }
}

TEST(CeilLog2, IsTheShiftOfThePowerOfTwoAtOrAbove) {
  for (unsigned n = 1; n <= (1u << 20); ++n) {
    const int s = ceil_log2(n);
    ASSERT_GE(1ull << s, n) << n;
    ASSERT_TRUE(s == 0 || (1ull << (s - 1)) < n) << n;
  }
  EXPECT_EQ(ceil_log2(0x80000000u), 31);
  EXPECT_EQ(ceil_log2(0x80000001u), 32);
}

}  // namespace
}  // namespace flashsplit
