// The portable kernels' grid: x = tiles of packed rows, y = splits, z = (batch, k/v head)
// pairs. A grid's y and z hold at most 65535 blocks each on both vendors, so the pairs past the
// first 65535 go on in y, in chunks of 65535: y = split + chunk * 2^ceil(log2 G), which a block
// takes apart with a mask and a shift (no division: the kernels run at the edge of their
// registers, and what a block can recompute cheaply at its end it need not keep). Blocks whose
// split is past G (between chunks) or whose pair is past b * hk (the last chunk) have no work.
// Decided on the host (portable_grid_yz), read the same way in the kernel (portable_block).
#pragma once

#include "core/ceil_log2.h"
#include "core/host_device.h"

namespace flashsplit {

constexpr long long kMaxGridYZ = 65535;

struct PortableGridYZ {
  long long y, z;
};
// The grid's y and z for G splits of `pairs` (batch, k/v head) pairs (pairs >= 1).
inline PortableGridYZ portable_grid_yz(long long pairs, int num_splits) {
  const long long chunks = (pairs + kMaxGridYZ - 1) / kMaxGridYZ;
  return PortableGridYZ{((chunks - 1) << ceil_log2(num_splits)) + num_splits,
                        pairs < kMaxGridYZ ? pairs : kMaxGridYZ};
}
// The most splits a grid of `pairs` pairs holds in y: the largest G of any 2^s with
// ceil(log2 G) = s and (chunks - 1) * 2^s + G <= 65535.
inline int max_portable_splits(long long pairs) {
  const long long chunks = (pairs + kMaxGridYZ - 1) / kMaxGridYZ;
  long long best = 1;
  for (int s = 0; s <= 16; ++s) {
    const long long room = kMaxGridYZ - ((chunks - 1) << s);
    const long long g = room < (1LL << s) ? room : 1LL << s;
    if (g > (1LL << s) / 2 && g > best) best = g;
  }
  return static_cast<int>(best);
}

struct PortableBlock {
  unsigned split, pair;  // pair = batch * hk + k/v head
  bool has_work;
};
FS_HOST_DEVICE inline PortableBlock portable_block(unsigned y, unsigned z, unsigned num_splits,
                                                   unsigned pairs) {
  const int shift = ceil_log2(num_splits);
  const unsigned split = y & ((1u << shift) - 1), pair = z + 65535u * (y >> shift);
  return PortableBlock{split, pair, split < num_splits && pair < pairs};
}

}  // namespace flashsplit
