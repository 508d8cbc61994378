// The problem and device descriptions every decision in flashsplit is made from.
// Plain C++17: no torch, no GPU headers, so it builds and is unit-tested anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashsplit {

enum class DType { kFloat16, kBFloat16, kFloat32, kFloat64, kOther };

// "float16", "bfloat16", ... (used in the gate's reasons).
const char* dtype_name(DType dtype);

enum class Vendor { kNone, kNvidia, kAmd };

// One attention call: q (b, sq, h, d), k/v (b, sk, hk, d). A call of sequences of their own
// lengths (varlen, kv cache) has b sequences of at most sq queries and sk keys each.
struct AttnProblem {
  int64_t b = 1, sq = 1, sk = 1, h = 1, hk = 1, d = 64;
  int64_t dv = 0;  // v's and the output's head dim; 0: d (value_head_dim)
  // Lengths per sequence (cu_seqlens, seqused_k) or a k/v batch per sequence (cache_batch_idx).
  bool per_sequence = false;
  // Of those, sequences that all have sq queries and sk keys: varlen rows b x sq and b x sk,
  // every length at most the longest, so each is the longest (one sequence always is).
  bool equal_lengths = false;
  int64_t page_size = 0;  // keys per page of a paged k/v cache; 0: contiguous k/v
  DType dtype = DType::kBFloat16;
  bool causal = false;
  bool on_gpu = true;               // false: tensors live on the CPU
  bool last_dim_contiguous = true;  // the kernels need stride(-1) == 1
  bool strides_16b_aligned = true;  // every other stride and base pointer 16-byte aligned
  // TMA can describe q, k and v: no dim with more than one element has stride 0 (expanded).
  bool tma_describable = true;
  int64_t kv_row_stride = 0;  // the larger of k's and v's key-row strides, in elements
  // Features the native kernels do not implement; the reference path does.
  double dropout_p = 0.0;
  int64_t window_left = -1, window_right = -1;  // -1 = unbounded on that side
  double softcap = 0.0;
  bool has_alibi = false;
};

// v's head dim: dv, or d where dv is 0.
inline int64_t value_head_dim(const AttnProblem& p) { return p.dv > 0 ? p.dv : p.d; }

// The GPU a call runs on. cc = compute capability (major*10 + minor on NVIDIA, e.g. 90);
// arch = the AMD target (gcnArchName without its feature flags, e.g. "gfx942"); sm_count = SMs
// on NVIDIA, compute units on AMD; dram_bytes_per_us = the HBM's peak bandwidth (two transfers a
// memory clock over the bus), 0 where unknown.
struct DeviceInfo {
  Vendor vendor = Vendor::kNone;
  int cc = 0;
  int sm_count = 0;
  int64_t smem_per_block_optin = 0;  // bytes
  std::string arch;
  double dram_bytes_per_us = 0.0;
};

// The H100 (SXM) the sm80 key-warp rule and the heuristic's constants were measured on: its HBM's
// 3.35 TB/s (2619 MHz, a 5120-bit bus) over its 132 SMs.
constexpr double kH100DramBytesPerUs = 2619e3 * 5120 / 4000;
constexpr int kH100SmCount = 132;

// The HBM bandwidth each SM of the device gets, over the H100's (1 where it is unknown). Memory-
// bound tiles need bytes in flight in proportion to it (an H200: 4.81 TB/s over 132 SMs, 1.44).
inline double hbm_share_over_h100(const DeviceInfo& device) {
  if (device.sm_count <= 0 || device.dram_bytes_per_us <= 0) return 1.0;
  return device.dram_bytes_per_us / device.sm_count / (kH100DramBytesPerUs / kH100SmCount);
}

// What this build of the extension contains.
struct BuildInfo {
  bool gpu_kernels_built = false;
  std::vector<int> archs;      // NVIDIA compute capabilities compiled for, e.g. {80, 90}
  std::vector<int> head_dims;  // head dims instantiated, e.g. {64, 128}
  bool hopper_kernels_built = false;  // sm_90a (wgmma + TMA) kernels compiled in
  std::vector<std::string> amd_archs;  // AMD targets compiled for, e.g. {"gfx90a", "gfx942"}
};

}  // namespace flashsplit
