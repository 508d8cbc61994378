// LDS layouts of the gfx9 policy's attention tiles, for host tests and device code alike
// (constexpr; clang treats constexpr functions as host and device in HIP mode).
//
// Q and K tiles are stored row-major (rows = queries / keys, D 16-bit columns); V is stored
// transposed (rows = head dim, BN key columns, in the PV MFMA's k order: mfma_layout.h pv_slot).
// Each row is cut into units of the MFMA operand read (8 bytes for k_per_lane = 4, 16 bytes for
// 8), and unit u of row r sits at unit u ^ swizzle(r) of that row. Units move whole, so the
// global -> LDS copy writes whole units (ds_write_b64 / ds_write_b128), and an operand read
// (lane l: k_per_lane elements of row l % m at a unit chosen by its k group) is one ds_read of a
// unit.
//
// Bank model (what "conflict-free" means here; tests/cpp/test_gfx9_lds_layout.cpp checks it):
//  - LDS has 32 banks of 4 bytes on gfx90a and gfx942, 64 on gfx950; byte address a is in bank
//    (a / 4) % banks (CK-Tile documentation, "Understanding AMD GPU LDS and Bank Conflicts").
//  - A wave's access runs in passes of some of its lanes (below); it is conflict-free when no
//    two lanes of a pass touch different 4-byte words of one bank.
//  - Lanes of a pass: ds_read_b64 and ds_write_b64 take consecutive lanes, 16 per pass on 32
//    banks (128 bytes, one sweep of the banks); on 64 banks 32 for reads and 16 for writes, as
//    measured on MI355X by HipKittens (Hazy Research, 2025). ds_write_b128 takes 8 consecutive
//    lanes (CK-Tile docs; assumed on 64 banks too). ds_read_b128 takes lanes {0-3, 20-23},
//    {4-7, 16-19}, {8-11, 28-31}, {12-15, 24-27} and the same + 32 on 32 banks (CK-Tile docs),
//    and the unions {0-3, 12-15, 20-23, 24-27}, {4-11, 16-19, 28-31} (+ 32) on 64 banks
//    (HipKittens, MI355X).
//
// The swizzle: where a row is shorter than one sweep of the banks (banks * 4 bytes),
// rows_per_sweep = sweep / row bytes consecutive rows share a sweep at different banks and take
// the same pattern; swizzle(r) = (r / rows_per_sweep) % min(units per row, units per sweep).
// Under the model it makes every operand read below conflict-free, and the copy's writes
// (consecutive lanes, consecutive units of a row), except for 16-row MFMAs on 64 banks with
// 8-byte units (k16x16x16 on gfx950) or 64-byte rows (k16x16x32 with BN = 32), which this
// header rejects at compile time (supported_tile).
#pragma once

#include "kernels/gfx9/mfma_layout.h"

namespace flashsplit {
namespace gfx9 {

enum class Arch { kGfx90a, kGfx942, kGfx950 };

constexpr int lds_banks(Arch arch) { return arch == Arch::kGfx950 ? 64 : 32; }
constexpr int lds_bytes(Arch arch) { return arch == Arch::kGfx950 ? 160 * 1024 : 64 * 1024; }
constexpr bool has_mfma(Arch arch, Mfma op) {
  return arch == Arch::kGfx950 || op == Mfma::k32x32x8 || op == Mfma::k16x16x16;
}

#if defined(__HIP_DEVICE_COMPILE__)
#if defined(__gfx950__)
constexpr Arch kDeviceArch = Arch::kGfx950;
#elif defined(__gfx942__)
constexpr Arch kDeviceArch = Arch::kGfx942;
#elif defined(__gfx90a__)
constexpr Arch kDeviceArch = Arch::kGfx90a;
#else
#error "gfx9 layouts are defined for gfx90a, gfx942 and gfx950"
#endif
#endif

// Bytes of one operand read (and swizzle unit) of an MFMA: k_per_lane 16-bit elements.
constexpr int operand_bytes(Mfma op) { return 2 * mfma_shape(op).k_per_lane; }

// Whether the swizzle keeps op's operand reads from a tile with rows of row_bytes bytes
// conflict-free on `banks` banks (see the header comment).
constexpr bool supported_tile(Mfma op, int banks, int row_bytes) {
  return banks == 32 || mfma_shape(op).m == 32 ||
         (operand_bytes(op) == 16 && row_bytes >= 128);
}

// A tile of `rows` x `cols` 16-bit elements, row-major, its `unit_bytes`-byte units swizzled by
// row for an LDS of `banks` banks.
template <int rows, int cols, int unit_bytes, int banks>
struct SwizzledTile {
  static constexpr int kRows = rows;
  static constexpr int kCols = cols;
  static constexpr int kUnit = unit_bytes;
  static constexpr int kBanks = banks;
  static constexpr int kRowBytes = 2 * cols;
  static constexpr int kBytes = rows * kRowBytes;
  static constexpr int kUnitsPerRow = kRowBytes / kUnit;
  static constexpr int kUnitsPerSweep = 4 * banks / kUnit;
  static constexpr int kRowsPerSweep =
      kUnitsPerSweep > kUnitsPerRow ? kUnitsPerSweep / kUnitsPerRow : 1;
  static constexpr int kSwizzleSpan = kUnitsPerRow < kUnitsPerSweep ? kUnitsPerRow : kUnitsPerSweep;
  static_assert(kUnit == 8 || kUnit == 16, "units are one ds_read_b64 or b128");
  static_assert(kRowBytes % kUnit == 0 && (kUnitsPerRow & (kUnitsPerRow - 1)) == 0,
                "a row is a power-of-two number of units");

  static constexpr int swizzle(int row) { return (row / kRowsPerSweep) % kSwizzleSpan; }
  // Byte offset of unit `unit` of row `row` (the unit's bytes follow contiguously).
  static constexpr int unit_offset(int row, int unit) {
    return row * kRowBytes + (unit ^ swizzle(row)) * kUnit;
  }
  // Byte offset of element (row, col).
  static constexpr int offset(int row, int col) {
    return unit_offset(row, 2 * col / kUnit) + (2 * col) % kUnit;
  }
};

// The LDS tiles of one attention block: kBlockM queries, kBlockN keys, head dim kD, computed
// with MFMA kOp for both products on an LDS of kBanks banks.
template <Mfma kOp, int kBanks, int kBlockM, int kBlockN, int kD>
struct AttnLds {
  static constexpr Mfma kMfma = kOp;
  static constexpr int kLdsBanks = kBanks;
  static constexpr MfmaShape kShape = mfma_shape(kOp);
  static constexpr int kUnit = operand_bytes(kOp);
  using QTile = SwizzledTile<kBlockM, kD, kUnit, kBanks>;   // rows: queries
  using KTile = SwizzledTile<kBlockN, kD, kUnit, kBanks>;   // rows: keys
  using VtTile = SwizzledTile<kD, kBlockN, kUnit, kBanks>;  // rows: head dim, columns: keys
  static_assert(kBlockM % kShape.n == 0 && kBlockN % kShape.m == 0 && kBlockN % kShape.k == 0 &&
                    kD % kShape.k == 0 && kD % kShape.m == 0,
                "tiles are whole MFMA tiles");
  static_assert(supported_tile(kOp, kBanks, QTile::kRowBytes) &&
                    supported_tile(kOp, kBanks, KTile::kRowBytes) &&
                    supported_tile(kOp, kBanks, VtTile::kRowBytes),
                "the swizzle leaves bank conflicts for this MFMA, bank count and row length");

  // S^T = K Q^T, MFMA step `step` over the head dim (k = [step * k, (step + 1) * k)):
  // lane l's A operand (k_per_lane elements) for the key tile starting at key0, and its B
  // operand for the query tile starting at query0, as byte offsets of one unit each.
  static constexpr int k_read(int lane, int key0, int step) {
    const RowK a = mfma_a(kOp, lane, 0);
    return KTile::offset(key0 + a.row, step * kShape.k + a.k);
  }
  static constexpr int q_read(int lane, int query0, int step) {
    const KCol b = mfma_b(kOp, lane, 0);
    return QTile::offset(query0 + b.col, step * kShape.k + b.k);
  }

  // O^T = V^T P^T, PV step `step` over the block's keys: lane l's A operand for the head-dim
  // tile starting at row d0. Element i holds key step * k + pv_key(kOp, lane, i).
  static constexpr int vt_read(int lane, int d0, int step) {
    const RowK a = mfma_a(kOp, lane, 0);
    return VtTile::offset(d0 + a.row, step * kShape.k + a.k);
  }
  // Where V[key][d] goes: V^T row d, at the column of key in PV k order.
  static constexpr int vt_col(int key) {
    return key / kShape.k * kShape.k + pv_slot(kOp, key % kShape.k);
  }
  static constexpr int vt_offset(int d, int key) { return VtTile::offset(d, vt_col(key)); }
  // The key stored at column `col` of the V^T tile: the inverse of vt_col.
  static constexpr int vt_key(int col) {
    const int slot = col % kShape.k;
    return col / kShape.k * kShape.k +
           pv_key(kOp, slot / kShape.k_per_lane * kShape.m, slot % kShape.k_per_lane);
  }
};

}  // namespace gfx9
}  // namespace flashsplit
