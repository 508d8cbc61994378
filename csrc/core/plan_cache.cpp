#include "core/plan_cache.h"

#include <cstring>
#include <utility>

namespace flashsplit {
namespace {

int64_t bits_of(double x) {
  int64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

}  // namespace

PlanCache::PlanCache(BuildInfo build, std::size_t capacity)
    : build_(std::move(build)), capacity_(capacity) {}

PlanCache::Key PlanCache::key_of(const AttnProblem& p, int device_key, const PlanOptions& o,
                                 long long requested) {
  const int64_t flags = (p.causal ? 1 : 0) | (p.on_gpu ? 2 : 0) | (p.last_dim_contiguous ? 4 : 0) |
                        (p.strides_16b_aligned ? 8 : 0) | (p.tma_describable ? 16 : 0) |
                        (p.has_alibi ? 32 : 0) | (p.per_sequence ? 64 : 0) |
                        (o.gate.allow_untested_arch ? 128 : 0) |
                        (o.gate.arch_verified_here ? 256 : 0) | (o.gate.allow_hopper ? 512 : 0) |
                        (o.allow_tail_split ? 1024 : 0) | (p.equal_lengths ? 2048 : 0);
  return Key{p.b, p.sq, p.sk, p.h, p.hk, p.d, value_head_dim(p), static_cast<int64_t>(p.dtype),
             flags, p.kv_row_stride, p.window_left, p.window_right, p.page_size,
             bits_of(p.dropout_p), bits_of(p.softcap), device_key, requested};
}

std::size_t PlanCache::KeyHash::operator()(const Key& key) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
  for (int64_t word : key) {
    h ^= static_cast<uint64_t>(word);
    h *= 1099511628211ull;
  }
  return static_cast<std::size_t>(h);
}

LaunchPlan PlanCache::plan(const AttnProblem& problem, const DeviceInfo& device, int device_key,
                           const PlanOptions& options, long long requested) {
  const Key key = key_of(problem, device_key, options, requested);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
  }
  LaunchPlan plan = make_launch_plan(problem, device, build_, options, requested);
  std::lock_guard<std::mutex> lock(mutex_);
  if (plans_.size() >= capacity_) plans_.clear();
  plans_.emplace(key, plan);
  return plan;
}

std::size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

}  // namespace flashsplit
