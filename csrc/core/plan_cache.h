// The plans of recent calls, by everything a plan is made from, so that a call of a shape seen
// before skips the gate's and the split heuristic's work (a few microseconds of host time, a
// fair part of a decode step's). Plain C++17, thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "core/plan.h"

namespace flashsplit {

class PlanCache {
 public:
  // build: what this build holds, fixed for the cache's life. capacity: plans kept; the cache
  // starts over when it is full (calls come in few shapes).
  explicit PlanCache(BuildInfo build, std::size_t capacity = 512);

  // make_launch_plan(problem, device, build, options, requested), from the cache where the same
  // arguments were planned before. device_key names the device (its index): a device's facts
  // must not change under one key.
  LaunchPlan plan(const AttnProblem& problem, const DeviceInfo& device, int device_key,
                  const PlanOptions& options, long long requested);

  std::size_t size() const;

 private:
  using Key = std::array<int64_t, 17>;
  struct KeyHash {
    std::size_t operator()(const Key& key) const;
  };
  static Key key_of(const AttnProblem& p, int device_key, const PlanOptions& o,
                    long long requested);

  const BuildInfo build_;
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<Key, LaunchPlan, KeyHash> plans_;
};

}  // namespace flashsplit
