// Host stand-ins for the gfx9 hardware the layout tests reason about: an MFMA that sees only
// per-lane registers, and the LDS bank model of kernels/gfx9/lds_layout.h.
#pragma once

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "kernels/gfx9/mfma_layout.h"

namespace flashsplit {
namespace gfx9 {
namespace testing {

constexpr int kLanes = 64;
// A wave's registers of one operand: up to 8 elements (A, B) or 16 accumulators per lane.
using Regs = std::array<std::array<double, 16>, kLanes>;

inline Regs nan_regs() {
  Regs r;
  for (auto& lane : r) lane.fill(std::numeric_limits<double>::quiet_NaN());
  return r;
}

// acc += A * B, where A and B exist only as the lanes' registers: the matrices are gathered
// through the layout maps, multiplied, and scattered back through the accumulator map. An
// (row, k) that no register maps to stays NaN and poisons every output it touches; one that two
// registers map to is flagged by `clashes`.
inline void emulated_mfma(Mfma op, const Regs& a, const Regs& b, Regs& acc, int* clashes = nullptr) {
  const MfmaShape s = mfma_shape(op);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> A(s.m * s.k, nan), B(s.k * s.n, nan);
  std::vector<int> seen_a(s.m * s.k, 0), seen_b(s.k * s.n, 0);
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < s.k_per_lane; ++i) {
      const RowK ea = mfma_a(op, lane, i);
      const KCol eb = mfma_b(op, lane, i);
      A[ea.row * s.k + ea.k] = a[lane][i];
      B[eb.k * s.n + eb.col] = b[lane][i];
      ++seen_a[ea.row * s.k + ea.k];
      ++seen_b[eb.k * s.n + eb.col];
    }
  }
  if (clashes) {
    for (int v : seen_a) *clashes += v > 1;
    for (int v : seen_b) *clashes += v > 1;
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int r = 0; r < s.acc_regs; ++r) {
      const RowCol d = mfma_acc(op, lane, r);
      double sum = 0;
      for (int k = 0; k < s.k; ++k) sum += A[d.row * s.k + k] * B[k * s.n + d.col];
      acc[lane][r] += sum;
    }
  }
}

// ---- LDS bank model (lds_layout.h) ---------------------------------------------------------------

enum class Access { kRead, kWrite };

// The lane sets that share one LDS pass for an access of `bytes` per lane on `banks` banks.
inline std::vector<std::vector<int>> lds_passes(int banks, int bytes, Access access,
                                                int write_lanes_override = 0) {
  auto consecutive = [](int n) {
    std::vector<std::vector<int>> passes;
    for (int first = 0; first < kLanes; first += n) {
      std::vector<int> pass;
      for (int l = first; l < first + n; ++l) pass.push_back(l);
      passes.push_back(pass);
    }
    return passes;
  };
  if (access == Access::kWrite) {
    // b64: 16 lanes a pass on 32 and (measured) 64 banks; b128: 8 (CK-Tile docs, 32 banks).
    return consecutive(write_lanes_override ? write_lanes_override : (bytes == 8 ? 16 : 8));
  }
  if (bytes == 8) return consecutive(banks == 32 ? 16 : 32);
  // ds_read_b128: the documented 8-lane groups on 32 banks, pairs of them on 64 banks.
  const int quads[8][2] = {{0, 20}, {4, 16}, {8, 28}, {12, 24}, {32, 52}, {36, 48}, {40, 60}, {44, 56}};
  std::vector<std::vector<int>> groups;
  for (const auto& q : quads) {
    std::vector<int> g;
    for (int start : q)
      for (int l = start; l < start + 4; ++l) g.push_back(l);
    groups.push_back(g);
  }
  if (banks == 32) return groups;
  const int pairs[4][2] = {{0, 3}, {1, 2}, {4, 7}, {5, 6}};
  std::vector<std::vector<int>> passes;
  for (const auto& p : pairs) {
    std::vector<int> pass = groups[p[0]];
    pass.insert(pass.end(), groups[p[1]].begin(), groups[p[1]].end());
    passes.push_back(pass);
  }
  return passes;
}

// The worst number of distinct 4-byte words one bank serves in one pass (1 = conflict-free).
inline int worst_bank_load(const std::array<int, kLanes>& byte_address, int banks, int bytes,
                           const std::vector<std::vector<int>>& passes) {
  int worst = 1;
  for (const auto& pass : passes) {
    std::map<int, std::set<int>> words_of_bank;
    for (int lane : pass) {
      for (int w = 0; w < bytes / 4; ++w) {
        const int word = byte_address[lane] / 4 + w;
        words_of_bank[word % banks].insert(word);
      }
    }
    for (const auto& [bank, words] : words_of_bank) {
      (void)bank;
      worst = std::max<int>(worst, static_cast<int>(words.size()));
    }
  }
  return worst;
}

}  // namespace testing
}  // namespace gfx9
}  // namespace flashsplit
