// The named barriers (bar.sync / bar.arrive / bar.red ids, 0-15) of the Hopper forward. Id 0 is
// __syncthreads; the others order consumer warpgroups among themselves, one id per consumer.
#pragma once

#include "core/host_device.h"

namespace flashsplit {
namespace sm90 {

enum class FwdNamedBarrier : int {
  // Ping-pong turns (two consumers): consumer c waits on kPingPongTurn + c before issuing its
  // GEMMs and arrives on the other consumer's id once it has issued them.
  kPingPongTurn = 1,
  // The recompute vote of consumer c's warpgroup (kRecomputeVote + c, bar.red.or over its 128
  // threads): after the ping-pong turns, one per consumer.
  kRecomputeVote = kPingPongTurn + 2,
};

// The hardware's named barriers per thread block.
constexpr int kNamedBarrierCount = 16;

// The id of barrier `b` of consumer warpgroup `consumer`.
FS_HOST_DEVICE constexpr int named_barrier_id(FwdNamedBarrier b, int consumer) {
  return static_cast<int>(b) + consumer;
}

}  // namespace sm90
}  // namespace flashsplit
