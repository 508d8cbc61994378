#include "plan.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "build_info.h"
#include "core/plan_cache.h"

#ifdef FLASHSPLIT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace flashsplit {
namespace {

DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kFloat: return DType::kFloat32;
    case at::kDouble: return DType::kFloat64;
    default: return DType::kOther;
  }
}

// The kernels load 16-byte vectors: every base pointer and every non-last stride must allow it.
// TMA tensor maps take non-zero strides; an expanded dim (stride 0, size > 1) has none.
bool no_expanded_dims(const at::Tensor& t) {
  for (int64_t dim = 0; dim + 1 < t.dim(); ++dim) {
    if (t.size(dim) > 1 && t.stride(dim) == 0) return false;
  }
  return true;
}

bool aligned_16b(const at::Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  int64_t elems_per_16b = 16 / static_cast<int64_t>(t.element_size());
  for (int64_t dim = 0; dim + 1 < t.dim(); ++dim) {
    if (t.size(dim) > 1 && t.stride(dim) % elems_per_16b != 0) return false;
  }
  return true;
}

AttnProblem describe(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const FeatureOptions& f) {
  AttnProblem p;
  p.b = q.size(0);
  p.sq = q.size(1);
  p.h = q.size(2);
  p.d = q.size(3);
  p.dv = v.size(3);
  p.sk = k.size(1);
  p.hk = k.size(2);
  p.dtype = dtype_of(q);
  p.causal = f.causal;
  p.on_gpu = q.is_cuda();
  p.last_dim_contiguous = q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1;
  p.strides_16b_aligned = aligned_16b(q) && aligned_16b(k) && aligned_16b(v);
  p.tma_describable = no_expanded_dims(q) && no_expanded_dims(k) && no_expanded_dims(v);
  p.kv_row_stride = std::max(k.stride(1), v.stride(1));
  p.dropout_p = f.dropout_p;
  p.window_left = f.window_left;
  p.window_right = f.window_right;
  p.softcap = f.softcap;
  p.has_alibi = f.has_alibi;
  return p;
}

#if defined(FLASHSPLIT_WITH_CUDA) && !defined(FLASHSPLIT_WITH_HIP)
// The HBM's peak bandwidth of an NVIDIA device, bytes per microsecond: two transfers a memory
// clock (kHz) over the bus (bits). Asked of the driver once per device.
double dram_bytes_per_us(int device) {
  constexpr int kDevices = 64;
  static std::array<std::atomic<double>, kDevices> known{};
  if (device < 0 || device >= kDevices) return 0.0;
  double bytes = known[device].load(std::memory_order_relaxed);
  if (bytes == 0.0) {
    int clock_khz = 0, bus_bits = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
    bytes = 2.0 * clock_khz * 1e3 * bus_bits / 8.0 / 1e6;
    known[device].store(bytes, std::memory_order_relaxed);
  }
  return bytes;
}
#endif

DeviceInfo describe_device(const at::Tensor& q) {
  DeviceInfo info;
#ifdef FLASHSPLIT_WITH_CUDA
  if (q.is_cuda()) {
    const auto* prop = at::cuda::getDeviceProperties(q.device().index());
    info.sm_count = prop->multiProcessorCount;
    info.smem_per_block_optin = static_cast<int64_t>(prop->sharedMemPerBlockOptin);
#ifdef FLASHSPLIT_WITH_HIP
    // gcnArchName reads like "gfx942:sramecc+:xnack-": the target, then its feature flags.
    const std::string arch = prop->gcnArchName;
    info.vendor = Vendor::kAmd;
    info.arch = arch.substr(0, arch.find(':'));
#else
    info.vendor = Vendor::kNvidia;
    info.cc = prop->major * 10 + prop->minor;
    info.dram_bytes_per_us = dram_bytes_per_us(q.device().index());
#endif
  }
#else
  (void)q;
#endif
  return info;
}

}  // namespace

namespace {
bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}
}  // namespace


void check_attention_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t num_splits, bool same_batch) {
  TORCH_CHECK(q.dim() == 4, "q must have 4 dims (b, sq, h, d), got ", q.dim(), " dims");
  TORCH_CHECK(k.dim() == 4, "k must have 4 dims (b, sk, hk, d), got ", k.dim(), " dims");
  TORCH_CHECK(v.dim() == 4, "v must have 4 dims (b, sk, hk, dv), got ", v.dim(), " dims");
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "q, k, v must share a dtype, got q ", q.scalar_type(), ", k ", k.scalar_type(),
              ", v ", v.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(),
              "q, k, v must be on one device, got q ", q.device(), ", k ", k.device(), ", v ",
              v.device());
  // v's head dim may differ from k's in dense calls (FlashAttention-3's headdim_v).
  TORCH_CHECK(same_batch ? k.sizes().slice(0, 3) == v.sizes().slice(0, 3) : k.sizes() == v.sizes(),
              "k and v must have the same shape", same_batch ? " but for the head dim" : "",
              ", got k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK(!same_batch || k.size(0) == q.size(0), "k batch ", k.size(0), " differs from q batch ", q.size(0));
  TORCH_CHECK(k.size(3) == q.size(3), "k head dim ", k.size(3), " differs from q head dim ",
              q.size(3));
  TORCH_CHECK(k.size(2) > 0 && q.size(2) % k.size(2) == 0, "q heads (", q.size(2),
              ") must be a multiple of k/v heads (", k.size(2), ")");
  TORCH_CHECK(num_splits >= 0, "num_splits must be >= 0 (0 auto, 1 off, >= 2 forced), got ",
              num_splits);
}

namespace {

PlanOptions plan_options(bool arch_verified) {
  PlanOptions options;
  options.gate.allow_untested_arch = env_flag("FLASHSPLIT_ALLOW_UNTESTED_ARCH");
  options.gate.arch_verified_here = arch_verified;
  options.gate.allow_hopper = !env_flag("FLASHSPLIT_DISABLE_HOPPER");
  options.allow_tail_split = !env_flag("FLASHSPLIT_DISABLE_TAIL_SPLIT");
  return options;
}

LaunchPlan empty_input_plan() {
  LaunchPlan plan;
  plan.gate.reason = "empty inputs (a zero-sized dim) are served by the reference path";
  return plan;
}

void check_index(const char* name, const at::Tensor& t, const at::Tensor& q, int64_t dims) {
  TORCH_CHECK(t.dim() == dims, name, " must have ", dims, " dims, got shape ", t.sizes());
  TORCH_CHECK(t.scalar_type() == at::kInt, name, " must be int32, got ", t.scalar_type());
  TORCH_CHECK(t.device() == q.device(), name, " is on ", t.device(), " but q is on ", q.device());
  TORCH_CHECK(t.stride(-1) == 1, name, " must be contiguous in its last dim");
}

}  // namespace

// The plans of this process's calls: the build is fixed, and a device index names the device.
static LaunchPlan cached_plan(const AttnProblem& problem, const at::Tensor& q, bool arch_verified,
                              int64_t num_splits) {
  static PlanCache cache(current_build_info());
  const int device_key = q.is_cuda() ? q.device().index() : -1;
  return cache.plan(problem, describe_device(q), device_key, plan_options(arch_verified),
                    num_splits);
}

LaunchPlan make_plan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const FeatureOptions& features, int64_t num_splits, bool arch_verified) {
  if (q.numel() == 0 || k.numel() == 0) return empty_input_plan();
  return cached_plan(describe(q, k, v, features), q, arch_verified, num_splits);
}

int64_t SequenceArgs::count(const at::Tensor& q) const {
  return cu_seqlens_q.defined() ? cu_seqlens_q.size(0) - 1 : q.size(0);
}

void check_sequence_inputs(const at::Tensor& q, const at::Tensor& k, const SequenceArgs& seqs) {
  const int64_t n = seqs.count(q);
  if (seqs.cu_seqlens_q.defined()) {
    check_index("cu_seqlens_q", seqs.cu_seqlens_q, q, 1);
    TORCH_CHECK(seqs.cu_seqlens_q.size(0) >= 1, "cu_seqlens_q must have at least one entry");
    TORCH_CHECK(q.size(0) == 1, "a varlen q is laid out as batch 1, got ", q.size(0));
  }
  if (seqs.cu_seqlens_k.defined()) {
    check_index("cu_seqlens_k", seqs.cu_seqlens_k, q, 1);
    TORCH_CHECK(seqs.cu_seqlens_k.size(0) == n + 1, "cu_seqlens_k must have ", n + 1,
                " entries, got ", seqs.cu_seqlens_k.size(0));
  }
  if (seqs.seqused_k.defined()) {
    check_index("seqused_k", seqs.seqused_k, q, 1);
    TORCH_CHECK(seqs.seqused_k.size(0) == n, "seqused_k must have ", n, " entries, got ",
                seqs.seqused_k.size(0));
  }
  if (seqs.kv_batch_idx.defined()) {
    check_index("cache_batch_idx", seqs.kv_batch_idx, q, 1);
    TORCH_CHECK(seqs.kv_batch_idx.size(0) == n, "cache_batch_idx must have ", n,
                " entries, got ", seqs.kv_batch_idx.size(0));
  }
  if (seqs.paged()) {
    check_index("block_table", seqs.block_table, q, 2);
    TORCH_CHECK(seqs.block_table.size(0) == n, "block_table must have ", n, " rows, got ",
                seqs.block_table.size(0));
    TORCH_CHECK(seqs.seqused_k.defined() || seqs.cu_seqlens_k.defined(),
                "a paged call needs its keys per sequence (seqused_k or cu_seqlens_k)");
  }
  if (!seqs.cu_seqlens_q.defined() && !seqs.paged() && !seqs.kv_batch_idx.defined()) {
    TORCH_CHECK(k.size(0) == n || seqs.cu_seqlens_k.defined(), "k has batch ", k.size(0),
                " but there are ", n, " sequences");
  }
  TORCH_CHECK(seqs.max_seqlen_q >= 0 && seqs.max_seqlen_k >= 0,
              "max_seqlen_q and max_seqlen_k must be >= 0, got ", seqs.max_seqlen_q, " and ",
              seqs.max_seqlen_k);
}

namespace {

// Whether every sequence of a varlen call of contiguous k/v is the longest: its packed rows are
// b times the longest sequence's, for queries and for keys (max_seqlen_* is trusted to be at
// least the longest, as the kernels trust it; the lengths themselves live on the GPU).
bool varlen_of_equal_lengths(const at::Tensor& q, const at::Tensor& k, const SequenceArgs& seqs,
                             int64_t b) {
  const bool varlen = seqs.cu_seqlens_q.defined() && seqs.cu_seqlens_k.defined() &&
                      !seqs.seqused_k.defined() && !seqs.kv_batch_idx.defined() && !seqs.paged();
  return varlen && q.size(1) == b * seqs.max_seqlen_q && k.size(1) == b * seqs.max_seqlen_k;
}

}  // namespace

LaunchPlan make_sequence_plan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const SequenceArgs& seqs, const FeatureOptions& features,
                              int64_t num_splits, bool arch_verified) {
  AttnProblem problem = describe(q, k, v, features);
  problem.b = seqs.count(q);
  problem.sq = seqs.max_seqlen_q;
  problem.sk = seqs.max_seqlen_k;
  problem.per_sequence = true;
  problem.equal_lengths = varlen_of_equal_lengths(q, k, seqs, problem.b);
  problem.page_size = seqs.paged() ? k.size(1) : 0;
  if (q.numel() == 0 || k.numel() == 0 || problem.b == 0) return empty_input_plan();
  return cached_plan(problem, q, arch_verified, num_splits);
}

}  // namespace flashsplit
