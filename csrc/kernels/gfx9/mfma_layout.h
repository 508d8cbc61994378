// Register layouts of the MFMA instructions the gfx9 policy uses, written once for host tests and
// device code (plain C++17; clang treats constexpr functions as host and device in HIP mode).
//
// Each instruction computes D (m x n, fp32) += A (m x k) * B (k x n) over one wave64, 16-bit
// inputs. Lane l holds k_per_lane consecutive k elements of one A row and one B column, and
// acc_regs fp32 accumulators (AMD Matrix Instruction Calculator for CDNA2/CDNA3; CK-Tile's
// warp_gemm_attribute_mfma_impl.hpp for the CDNA4 forms: lanes per k group 4 and 2, 8 k elements
// per lane):
//   A[row][k]:  row = l % m,  k = k_per_lane * (l / m) + i            (i < k_per_lane)
//   B[k][col]:  k = k_per_lane * (l / n) + i,  col = l % n
//   D, 16x16:   register r of lane l is D[4 * (l / 16) + r][l % 16]      (4 registers)
//   D, 32x32:   register r of lane l is D[8 * (r / 4) + 4 * (l / 32) + r % 4][l % 32]   (16)
//
//   op          instruction (bf16 / f16)                          gfx90a  gfx942  gfx950
//   k32x32x8    v_mfma_f32_32x32x8_{bf16,f16} (gfx90a: *bf16_1k)    yes     yes     yes
//   k16x16x16   v_mfma_f32_16x16x16_{bf16,f16} (gfx90a: *bf16_1k)   yes     yes     yes
//   k16x16x32   v_mfma_f32_16x16x32_{bf16,f16}                       -       -      yes
//   k32x32x16   v_mfma_f32_32x32x16_{bf16,f16}                       -       -      yes
//
// The attention kernel computes transposed, so that every lane owns query columns:
//   S^T = K Q^T    A = the K tile (rows = keys, k = head dim), B = Q^T (columns = queries)
//   O^T = V^T P^T  A = V^T (rows = head dim, k = keys), B = P^T (columns = queries)
// S^T's accumulators hold keys on rows and queries on columns (col = l % n), which is the layout
// P^T needs as a B operand: P^T is S^T's accumulator registers, in order, converted to 16 bits.
// A query's row statistics (max, sum) therefore reduce over its registers and then across the
// lanes that share its column, l ^ n, l ^ 2n, ... l ^ 32 (query_lane_groups below).
//
// Where an accumulator's key order differs from the B operand's k order (k16x16x32, k32x32x16:
// 8 k elements per lane from 4-row accumulator groups), element i of P^T is not key
// k_per_lane * g + i; the kernel feeds V^T's A operand the same permutation (a sum over k is
// order-free): pv_key names the key of each element, pv_slot its position in MFMA k order, and
// the V^T tile in LDS stores keys in that order (lds_layout.h).
#pragma once

namespace flashsplit {
namespace gfx9 {

enum class Mfma { k32x32x8, k16x16x16, k16x16x32, k32x32x16 };

constexpr Mfma kAllMfma[] = {Mfma::k32x32x8, Mfma::k16x16x16, Mfma::k16x16x32, Mfma::k32x32x16};

struct MfmaShape {
  int m, n, k;      // D (m x n) += A (m x k) * B (k x n)
  int k_per_lane;   // 16-bit A (and B) elements per lane: 4 (2 VGPRs) or 8 (4 VGPRs)
  int acc_regs;     // fp32 accumulators per lane: m * n / 64
};

constexpr MfmaShape mfma_shape(Mfma op) {
  return op == Mfma::k32x32x8    ? MfmaShape{32, 32, 8, 4, 16}
         : op == Mfma::k16x16x16 ? MfmaShape{16, 16, 16, 4, 4}
         : op == Mfma::k16x16x32 ? MfmaShape{16, 16, 32, 8, 4}
                                 : MfmaShape{32, 32, 16, 8, 16};
}

// Lane groups that share a column: lanes l, l + n, l + 2n, ... hold the same query.
constexpr int query_lane_groups(Mfma op) { return 64 / mfma_shape(op).n; }
// The column (query) lane l holds in B and in the accumulators.
constexpr int lane_col(Mfma op, int lane) { return lane % mfma_shape(op).n; }
// The lane group of lane l: selects its k elements in A and B.
constexpr int lane_k_group(Mfma op, int lane) { return lane / mfma_shape(op).m; }

struct RowK {
  int row, k;
};
struct KCol {
  int k, col;
};
struct RowCol {
  int row, col;
};

// Element i (< k_per_lane) of lane l's A operand is A[row][k].
constexpr RowK mfma_a(Mfma op, int lane, int i) {
  const MfmaShape s = mfma_shape(op);
  return RowK{lane % s.m, s.k_per_lane * (lane / s.m) + i};
}
// Element i of lane l's B operand is B[k][col].
constexpr KCol mfma_b(Mfma op, int lane, int i) {
  const MfmaShape s = mfma_shape(op);
  return KCol{s.k_per_lane * (lane / s.n) + i, lane % s.n};
}
// Accumulator register r (< acc_regs) of lane l is D[row][col].
constexpr RowCol mfma_acc(Mfma op, int lane, int r) {
  const MfmaShape s = mfma_shape(op);
  return s.m == 16 ? RowCol{4 * (lane / 16) + r, lane % 16}
                   : RowCol{8 * (r / 4) + 4 * (lane / 32) + r % 4, lane % 32};
}

// ---- P^T from S^T's accumulators -------------------------------------------------------------
// S^T is computed in tiles of m keys (one MFMA output tile each) for one n-query column block;
// a lane's accumulators, tile after tile, are the sequence e = tile * acc_regs + reg. PV step s
// (keys [s * k, (s + 1) * k) of the block) takes B element i from sequence element
// s * k_per_lane + i, converted to 16 bits.
struct AccSlot {
  int tile, reg;
};
constexpr AccSlot pv_source(Mfma op, int step, int i) {
  const MfmaShape s = mfma_shape(op);
  const int e = step * s.k_per_lane + i;
  return AccSlot{e / s.acc_regs, e % s.acc_regs};
}

// The key, counted from the start of its PV step (0 <= key < k), that element i of lane l's
// P^T operand holds; element i of the lane's V^T operand must hold the same key. It depends on
// the lane only through its k group, and is the same in every step.
constexpr int pv_key(Mfma op, int lane, int i) {
  const MfmaShape s = mfma_shape(op);
  const AccSlot slot = pv_source(op, 0, i);
  return slot.tile * s.m + mfma_acc(op, lane, slot.reg).row;
}

// The position in MFMA k order (k group * k_per_lane + element) of a key of a PV step: the
// inverse of pv_key, equal to the key for k32x32x8 and k16x16x16. Every accumulator layout above
// gives each lane group runs of 4 consecutive rows, G = 64 / m groups apart, so with
// key = 4G * (i / 4) + 4g + i % 4 the slot is k_per_lane * g + i.
constexpr int pv_slot(Mfma op, int key) {
  const MfmaShape s = mfma_shape(op);
  const int groups = 64 / s.m;
  return s.k_per_lane * ((key / 4) % groups) + 4 * (key / (4 * groups)) + key % 4;
}

}  // namespace gfx9
}  // namespace flashsplit
