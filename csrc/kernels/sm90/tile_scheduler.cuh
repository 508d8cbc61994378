// The Hopper forward's tile walk.
#pragma once

#include "core/tail_split.h"
#include "core/host_device.h"

namespace flashsplit {
namespace sm90 {

// The tail kernel's slot: piece `half` of chunk k of the last round (empty where there is
// none). Worked out again from the slot where needed rather than kept in registers across the
// tile: the 192-row d=128 consumers have none to spare.
__device__ __forceinline__ TailPiece tail_piece_of_slot(const TailSplit& tail, int slot) {
  const int k = slot - tail.main_tiles, half = k >= tail.sm_count;
  return tail_piece(tail, k - half * tail.sm_count, half);
}

}  // namespace sm90
}  // namespace flashsplit
