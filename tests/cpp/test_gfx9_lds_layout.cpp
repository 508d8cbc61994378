// kernels/gfx9/lds_layout.h: every swizzled tile is a bijection; operand reads and the copy's
// writes are bank-conflict-free under the header's bank model; and a whole block goes
// global -> LDS (swizzled unit writes) -> operand registers -> MFMA (emulated from registers)
// -> global through the kernel's own index math, for S^T = K Q^T and O^T = V^T P^T with P^T
// taken from S^T's accumulators and V^T stored in PV k order, equal to a plain matmul.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gfx9_emulation.h"
#include "kernels/gfx9/lds_layout.h"

namespace flashsplit {
namespace gfx9 {
namespace {

using testing::Access;
using testing::emulated_mfma;
using testing::kLanes;
using testing::lds_passes;
using testing::nan_regs;
using testing::Regs;
using testing::worst_bank_load;

// ---- bijection ------------------------------------------------------------------------------------

template <class Tile>
void expect_bijection(const std::string& what) {
  std::vector<int> hits(Tile::kBytes / 2, 0);
  for (int row = 0; row < Tile::kRows; ++row) {
    for (int col = 0; col < Tile::kRowBytes / 2; ++col) {
      const int off = Tile::offset(row, col);
      ASSERT_GE(off, 0) << what;
      ASSERT_LT(off, Tile::kBytes) << what;
      ASSERT_EQ(off % 2, 0) << what;
      ++hits[off / 2];
      // Units move whole and stay in their row: the copy and the operand reads move units.
      const int first = 2 * col / Tile::kUnit * Tile::kUnit / 2;
      ASSERT_EQ(off - Tile::offset(row, first), 2 * (col - first)) << what;
      ASSERT_EQ(off / Tile::kRowBytes, row) << what;
    }
  }
  for (int h : hits) ASSERT_EQ(h, 1) << what << ": an element slot is used twice or never";
}

// ---- configurations ---------------------------------------------------------------------------------

// One attention block configuration: MFMA, LDS banks, queries, keys, head dim.
template <Mfma kOp, int kBanks, int kBlockM, int kBlockN, int kD>
struct Config {
  using Lds = AttnLds<kOp, kBanks, kBlockM, kBlockN, kD>;
  static std::string name() {
    const MfmaShape s = mfma_shape(kOp);
    return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
           " banks=" + std::to_string(kBanks) + " M=" + std::to_string(kBlockM) +
           " N=" + std::to_string(kBlockN) + " D=" + std::to_string(kD);
  }
};

// Byte addresses of one wave's operand read, one unit per lane.
template <class Read>
std::array<int, kLanes> wave_addresses(Read read) {
  std::array<int, kLanes> a{};
  for (int lane = 0; lane < kLanes; ++lane) a[lane] = read(lane);
  return a;
}

template <class Tile>
int worst_copy_write(int banks, int unit, int write_lanes) {
  // The copy gives consecutive lanes consecutive units of the tile in row-major order.
  const int units = Tile::kBytes / unit;
  int worst = 1;
  for (int first = 0; first < units; first += kLanes) {
    std::array<int, kLanes> a{};
    for (int lane = 0; lane < kLanes; ++lane) {
      const int u = (first + lane) % units;
      a[lane] = Tile::unit_offset(u / Tile::kUnitsPerRow, u % Tile::kUnitsPerRow);
    }
    worst = std::max(worst, worst_bank_load(a, banks, unit,
                                            lds_passes(banks, unit, Access::kWrite, write_lanes)));
  }
  return worst;
}

template <class C>
void check_layout() {
  using Lds = typename C::Lds;
  constexpr MfmaShape s = Lds::kShape;
  constexpr int banks = Lds::kLdsBanks;
  const std::string what = C::name();
  SCOPED_TRACE(what);
  expect_bijection<typename Lds::QTile>(what + " Q");
  expect_bijection<typename Lds::KTile>(what + " K");
  expect_bijection<typename Lds::VtTile>(what + " V^T");

  // Operand reads: every step over the head dim (S^T) or keys (O^T), every tile origin.
  const auto reads = lds_passes(banks, Lds::kUnit, Access::kRead);
  const int rows_m = Lds::KTile::kRows;
  for (int step = 0; step < Lds::QTile::kRowBytes / 2 / s.k; ++step) {
    for (int key0 = 0; key0 < rows_m; key0 += s.m) {
      const auto a = wave_addresses([&](int lane) { return Lds::k_read(lane, key0, step); });
      EXPECT_EQ(worst_bank_load(a, banks, Lds::kUnit, reads), 1) << "K read, step " << step;
    }
    for (int q0 = 0; q0 < Lds::QTile::kRows; q0 += s.n) {
      const auto a = wave_addresses([&](int lane) { return Lds::q_read(lane, q0, step); });
      EXPECT_EQ(worst_bank_load(a, banks, Lds::kUnit, reads), 1) << "Q read, step " << step;
    }
  }
  for (int step = 0; step < Lds::VtTile::kRowBytes / 2 / s.k; ++step) {
    for (int d0 = 0; d0 < Lds::VtTile::kRows; d0 += s.m) {
      const auto a = wave_addresses([&](int lane) { return Lds::vt_read(lane, d0, step); });
      EXPECT_EQ(worst_bank_load(a, banks, Lds::kUnit, reads), 1) << "V^T read, step " << step;
      // Each read is one aligned unit.
      for (int lane = 0; lane < kLanes; ++lane) EXPECT_EQ(a[lane] % Lds::kUnit, 0);
    }
  }
  // The copy's unit writes: the model's pass, and (on 64 banks, where the measured b64 write
  // pass covers half the banks) a pass that sweeps all banks, for margin.
  for (int w : {Lds::kUnit == 8 ? 16 : 8, 4 * banks / Lds::kUnit}) {
    EXPECT_EQ(worst_copy_write<typename Lds::QTile>(banks, Lds::kUnit, w), 1) << "Q write " << w;
    EXPECT_EQ(worst_copy_write<typename Lds::KTile>(banks, Lds::kUnit, w), 1) << "K write " << w;
    EXPECT_EQ(worst_copy_write<typename Lds::VtTile>(banks, Lds::kUnit, w), 1) << "V^T write " << w;
  }
}

// ---- round trip ---------------------------------------------------------------------------------------

// An LDS of 16-bit slots holding small integers (exact through every product here).
struct Lds16 {
  std::vector<int16_t> slots;
  explicit Lds16(int bytes) : slots(bytes / 2, INT16_MIN) {}
  void write_unit(int byte_offset, const int16_t* src, int unit_bytes) {
    ASSERT_EQ(byte_offset % unit_bytes, 0);
    std::memcpy(&slots[byte_offset / 2], src, unit_bytes);
  }
  int16_t at(int byte_offset) const { return slots[byte_offset / 2]; }
};

template <class C>
void check_round_trip(std::mt19937& rng) {
  using Lds = typename C::Lds;
  constexpr MfmaShape s = Lds::kShape;
  constexpr int M = Lds::QTile::kRows;  // queries
  constexpr int N = Lds::KTile::kRows;  // keys
  constexpr int D = Lds::QTile::kRowBytes / 2;
  constexpr int unit_elems = Lds::kUnit / 2;
  constexpr Mfma op = Lds::kMfma;
  SCOPED_TRACE(C::name());
  std::uniform_int_distribution<int> small(-3, 3);
  // Global tensors, row-major: Q (M x D), K (N x D), V (N x D).
  std::vector<int16_t> q(M * D), k(N * D), v(N * D);
  for (auto& x : q) x = static_cast<int16_t>(small(rng));
  for (auto& x : k) x = static_cast<int16_t>(small(rng));
  for (auto& x : v) x = static_cast<int16_t>(small(rng));

  // Global -> LDS: Q and K unit by unit from their rows; V^T unit by unit, each element the V
  // entry of the key its column holds (the copy gathers keys in PV k order).
  Lds16 lq(Lds::QTile::kBytes), lk(Lds::KTile::kBytes), lv(Lds::VtTile::kBytes);
  for (int r = 0; r < M; ++r)
    for (int u = 0; u < D / unit_elems; ++u)
      lq.write_unit(Lds::QTile::unit_offset(r, u), &q[r * D + u * unit_elems], Lds::kUnit);
  for (int r = 0; r < N; ++r)
    for (int u = 0; u < D / unit_elems; ++u)
      lk.write_unit(Lds::KTile::unit_offset(r, u), &k[r * D + u * unit_elems], Lds::kUnit);
  for (int d = 0; d < D; ++d) {
    for (int u = 0; u < N / unit_elems; ++u) {
      int16_t unit[8];
      for (int e = 0; e < unit_elems; ++e) {
        const int key = Lds::vt_key(u * unit_elems + e);
        ASSERT_EQ(Lds::vt_col(key), u * unit_elems + e);
        unit[e] = v[key * D + d];
      }
      lv.write_unit(Lds::VtTile::unit_offset(d, u), unit, Lds::kUnit);
    }
  }
  for (int16_t x : lq.slots) ASSERT_NE(x, INT16_MIN);
  for (int16_t x : lk.slots) ASSERT_NE(x, INT16_MIN);
  for (int16_t x : lv.slots) ASSERT_NE(x, INT16_MIN);

  std::vector<double> out(M * D, 0.0);
  for (int q0 = 0; q0 < M; q0 += s.n) {
    // S^T = K Q^T for this query column block: N / m accumulator tiles.
    std::vector<Regs> st(N / s.m, Regs{});
    for (int t = 0; t < N / s.m; ++t) {
      for (int step = 0; step < D / s.k; ++step) {
        Regs a = nan_regs(), b = nan_regs();
        for (int lane = 0; lane < kLanes; ++lane) {
          const int ka = Lds::k_read(lane, t * s.m, step), qb = Lds::q_read(lane, q0, step);
          for (int i = 0; i < s.k_per_lane; ++i) {
            a[lane][i] = lk.at(ka + 2 * i);
            b[lane][i] = lq.at(qb + 2 * i);
          }
        }
        emulated_mfma(op, a, b, st[t]);
      }
    }
    // S^T against the plain product, through the accumulator map.
    for (int t = 0; t < N / s.m; ++t) {
      for (int lane = 0; lane < kLanes; ++lane) {
        for (int r = 0; r < s.acc_regs; ++r) {
          const RowCol e = mfma_acc(op, lane, r);
          const int key = t * s.m + e.row, query = q0 + e.col;
          double want = 0;
          for (int c = 0; c < D; ++c) want += k[key * D + c] * q[query * D + c];
          ASSERT_EQ(st[t][lane][r], want) << "S^T key " << key << " query " << query;
        }
      }
    }
    // O^T = V^T P^T: P^T from S^T's accumulators in order, V^T from LDS in PV k order.
    for (int d0 = 0; d0 < D; d0 += s.m) {
      Regs acc{};
      for (int step = 0; step < N / s.k; ++step) {
        Regs a = nan_regs(), b = nan_regs();
        for (int lane = 0; lane < kLanes; ++lane) {
          const int va = Lds::vt_read(lane, d0, step);
          for (int i = 0; i < s.k_per_lane; ++i) {
            a[lane][i] = lv.at(va + 2 * i);
            const AccSlot src = pv_source(op, step, i);
            b[lane][i] = st[src.tile][lane][src.reg];
          }
        }
        emulated_mfma(op, a, b, acc);
      }
      // O^T registers -> global O (queries x D) through the accumulator map.
      for (int lane = 0; lane < kLanes; ++lane) {
        for (int r = 0; r < s.acc_regs; ++r) {
          const RowCol e = mfma_acc(op, lane, r);
          out[(q0 + e.col) * D + d0 + e.row] = acc[lane][r];
        }
      }
    }
  }
  for (int qi = 0; qi < M; ++qi) {
    for (int d = 0; d < D; ++d) {
      double want = 0;
      for (int key = 0; key < N; ++key) {
        double score = 0;
        for (int c = 0; c < D; ++c) score += q[qi * D + c] * k[key * D + c];
        want += score * v[key * D + d];
      }
      ASSERT_EQ(out[qi * D + d], want) << "O query " << qi << " d " << d;
    }
  }
}

// The policy's configurations: gfx90a/gfx942 (32 banks) with the 4-element MFMAs, gfx950 (64
// banks) with the 8-element ones and k32x32x8; head dims 64 and 128; 32-128 keys a block.
#define FS_GFX9_CONFIGS(X)                              \
  X(Mfma::k32x32x8, 32, 64, 32, 64)                     \
  X(Mfma::k32x32x8, 32, 128, 64, 64)                    \
  X(Mfma::k32x32x8, 32, 64, 128, 128)                   \
  X(Mfma::k16x16x16, 32, 16, 32, 64)                    \
  X(Mfma::k16x16x16, 32, 64, 64, 128)                   \
  X(Mfma::k16x16x16, 32, 32, 128, 64)                   \
  X(Mfma::k32x32x8, 64, 64, 32, 128)                    \
  X(Mfma::k32x32x8, 64, 64, 64, 64)                     \
  X(Mfma::k16x16x32, 64, 16, 64, 64)                    \
  X(Mfma::k16x16x32, 64, 64, 128, 128)                  \
  X(Mfma::k32x32x16, 64, 64, 32, 64)                    \
  X(Mfma::k32x32x16, 64, 128, 64, 128)                  \
  X(Mfma::k32x32x16, 64, 32, 128, 64)

TEST(Gfx9LdsLayout, TilesAreBijectionsAndAccessesConflictFree) {
#define FS_CHECK(op, banks, m, n, d) check_layout<Config<op, banks, m, n, d>>();
  FS_GFX9_CONFIGS(FS_CHECK)
#undef FS_CHECK
}

TEST(Gfx9LdsLayout, BlockRoundTripEqualsMatmul) {
  std::mt19937 rng(11);
#define FS_TRIP(op, banks, m, n, d) check_round_trip<Config<op, banks, m, n, d>>(rng);
  FS_GFX9_CONFIGS(FS_TRIP)
#undef FS_TRIP
}

// Where supported_tile says no, the swizzle does leave conflicts (so the rule is not stricter
// than it needs to be): 16-row MFMAs on 64 banks with 8-byte units or 64-byte rows.
TEST(Gfx9LdsLayout, UnsupportedTilesDoConflict) {
  auto worst_read = [](auto tile, Mfma op, int banks) {
    using Tile = decltype(tile);
    std::array<int, kLanes> a{};
    for (int lane = 0; lane < kLanes; ++lane) {
      const RowK e = mfma_a(op, lane, 0);
      a[lane] = Tile::offset(e.row, e.k);
    }
    return worst_bank_load(a, banks, operand_bytes(op), lds_passes(banks, operand_bytes(op),
                                                                     Access::kRead));
  };
  EXPECT_FALSE(supported_tile(Mfma::k16x16x16, 64, 128));
  EXPECT_GT(worst_read(SwizzledTile<64, 64, 8, 64>{}, Mfma::k16x16x16, 64), 1);
  EXPECT_FALSE(supported_tile(Mfma::k16x16x32, 64, 64));
  EXPECT_GT(worst_read(SwizzledTile<64, 32, 16, 64>{}, Mfma::k16x16x32, 64), 1);
  EXPECT_TRUE(supported_tile(Mfma::k16x16x32, 64, 128));
  EXPECT_EQ(worst_read(SwizzledTile<64, 64, 16, 64>{}, Mfma::k16x16x32, 64), 1);
}

TEST(Gfx9LdsLayout, TargetFacts) {
  EXPECT_EQ(lds_banks(Arch::kGfx90a), 32);
  EXPECT_EQ(lds_banks(Arch::kGfx942), 32);
  EXPECT_EQ(lds_banks(Arch::kGfx950), 64);
  EXPECT_EQ(lds_bytes(Arch::kGfx942), 65536);
  EXPECT_EQ(lds_bytes(Arch::kGfx950), 163840);
  EXPECT_FALSE(has_mfma(Arch::kGfx942, Mfma::k16x16x32));
  EXPECT_TRUE(has_mfma(Arch::kGfx950, Mfma::k32x32x16));
  EXPECT_TRUE(has_mfma(Arch::kGfx90a, Mfma::k32x32x8));
}

}  // namespace
}  // namespace gfx9
}  // namespace flashsplit
