#include "core/gate.h"

#include "core/head_dims.h"
#include "core/hopper_tiles.h"
#include "core/portable_tiles.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

namespace flashsplit {

namespace {

// The one table of hardware this project's GPU suite passed on: the H100 (sm_90). Any other
// GPU is admitted once `python -m flashsplit.verify` passed on it (ArchTrust::kVerifiedHere).
constexpr int kTestedArchs[] = {90};

// The kernels address q, k, v and the output from 64-bit bases per (batch, head) and tile, so
// tensors of any size run natively. The AMD kernels read k and v through buffer resources with
// 32-bit byte offsets from a base that moves along a head in 1 GiB steps: an offset stays under
// 2^30 plus one 64-key block's rows, under 2^31 while key rows are at most this far apart.
constexpr int64_t kMaxAmdKvRowStride = int64_t{1} << 23;

std::string cc_text(int cc) {
  return std::to_string(cc / 10) + "." + std::to_string(cc % 10);
}

std::string join(const std::vector<std::string>& values) {
  if (values.empty()) return "none";
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) text += ", ";
    text += values[i];
  }
  return text;
}

std::string join(const std::vector<int>& values) {
  std::vector<std::string> texts;
  for (int value : values) texts.push_back(std::to_string(value));
  return join(texts);
}


std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

bool has_window(const AttnProblem& p) {
  // causal is the window (-1, 0) in flash-attn's convention, so that pair is not a window.
  bool right_is_causal_edge = p.causal && p.window_right == 0;
  return p.window_left >= 0 || (p.window_right >= 0 && !right_is_causal_edge);
}

GateDecision refuse(std::string reason) {
  GateDecision decision;
  decision.reason = std::move(reason);
  return decision;
}

}  // namespace

const char* kernel_family_name(KernelFamily family) {
  switch (family) {
    case KernelFamily::kNone: return "none";
    case KernelFamily::kPortableMma: return "portable_mma";
    case KernelFamily::kHopperWgmma: return "hopper_wgmma";
    case KernelFamily::kPortableMfma: return "portable_mfma";
  }
  return "none";
}

const char* arch_trust_name(ArchTrust trust) {
  switch (trust) {
    case ArchTrust::kNone: return "none";
    case ArchTrust::kUnverified: return "unverified";
    case ArchTrust::kTested: return "tested";
    case ArchTrust::kVerifiedHere: return "verified";
    case ArchTrust::kOverride: return "override";
  }
  return "none";
}

bool arch_tested(int cc) {
  const int* end = std::end(kTestedArchs);
  return std::find(std::begin(kTestedArchs), end, cc) != end;
}

std::vector<int> tested_archs() {
  std::vector<int> archs(std::begin(kTestedArchs), std::end(kTestedArchs));
  std::sort(archs.begin(), archs.end());
  return archs;
}

bool build_has_binary_for(const BuildInfo& build, const DeviceInfo& device) {
  if (device.vendor == Vendor::kAmd) {
    return std::find(build.amd_archs.begin(), build.amd_archs.end(), device.arch) !=
           build.amd_archs.end();
  }
  for (int arch : build.archs) {
    if (arch / 10 == device.cc / 10 && arch <= device.cc) return true;
  }
  return false;
}

std::string arch_text(const DeviceInfo& device) {
  return device.vendor == Vendor::kAmd ? device.arch : "compute capability " + cc_text(device.cc);
}

// Whether and why the gate trusts the device's kernels (see ArchTrust).
static ArchTrust trust_for(const DeviceInfo& device, const GateOptions& options) {
  if (device.vendor == Vendor::kNvidia && arch_tested(device.cc)) return ArchTrust::kTested;
  if (options.arch_verified_here) return ArchTrust::kVerifiedHere;
  if (options.allow_untested_arch) return ArchTrust::kOverride;
  return ArchTrust::kUnverified;
}

// Checks run from "where the data is" to "what the GPU is", so the reason names the first
// thing a user would have to change.
GateDecision check_native(const AttnProblem& p, const DeviceInfo& device, const BuildInfo& build,
                          const GateOptions& options) {
  if (!p.on_gpu) return refuse("tensors are on the CPU; the native kernels run on GPUs");
  if (!build.gpu_kernels_built) return refuse("flashsplit was built without GPU kernels");
  if (device.vendor != Vendor::kNvidia && device.vendor != Vendor::kAmd) {
    return refuse("the GPU vendor is unknown; the native kernels run on NVIDIA and AMD GPUs");
  }
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return refuse(std::string("dtype ") + dtype_name(p.dtype) +
                  " is not supported natively (needs float16 or bfloat16)");
  }
  if (std::find(build.head_dims.begin(), build.head_dims.end(), p.d) == build.head_dims.end()) {
    return refuse("head dim " + std::to_string(p.d) + " is not built natively (built head dims: " +
                  join(build.head_dims) + ")");
  }
  const int64_t dv = value_head_dim(p);
  if (dv != p.d && (device.vendor != Vendor::kNvidia || p.per_sequence ||
                    !has_value_head_dim(static_cast<int>(p.d), static_cast<int>(dv)))) {
    return refuse("v's head dim " + std::to_string(dv) + " differs from q's " +
                  std::to_string(p.d) + "; natively only d=192 with v's 128 runs, on NVIDIA "
                  "GPUs in flash_attn_func");
  }
  // "!= 0" rather than "> 0" so a NaN or negative value is refused too, never run as "off".
  if (p.dropout_p != 0.0) {
    return refuse("dropout (dropout_p=" + number_text(p.dropout_p) +
                  ") is not implemented natively");
  }
  if (has_window(p)) {
    return refuse("sliding window (window_left=" + std::to_string(p.window_left) +
                  ", window_right=" + std::to_string(p.window_right) +
                  ") is not implemented natively");
  }
  if (p.softcap != 0.0) {
    return refuse("softcap " + number_text(p.softcap) + " is not implemented natively");
  }
  if (p.has_alibi) return refuse("alibi slopes are not implemented natively");
  if (!p.last_dim_contiguous) {
    return refuse(
        "the last dim of q, k or v is not contiguous; the native kernels need stride 1 there");
  }
  if (!p.strides_16b_aligned) {
    return refuse("a stride or base pointer of q, k or v is not 16-byte aligned; "
                  "the native kernels load 16-byte vectors");
  }
  if (p.b < 1 || p.sq < 1 || p.sk < 1 || p.h < 1 || p.hk < 1) {
    // A zero-sized grid is not a valid launch; the reference path handles empty tensors.
    return refuse("empty inputs (b=" + std::to_string(p.b) + ", sq=" + std::to_string(p.sq) +
                  ", sk=" + std::to_string(p.sk) + ", h=" + std::to_string(p.h) +
                  ", hk=" + std::to_string(p.hk) + ") are not run natively");
  }
  if (std::max({p.b, p.sq, p.sk, p.h, p.hk}) > std::numeric_limits<int32_t>::max()) {
    return refuse("a dimension of q, k or v is past 2^31-1 (b=" + std::to_string(p.b) +
                  ", sq=" + std::to_string(p.sq) + ", sk=" + std::to_string(p.sk) +
                  ", h=" + std::to_string(p.h) + ", hk=" + std::to_string(p.hk) +
                  "); the kernels count rows, keys and heads in 32 bits");
  }
  if (device.vendor == Vendor::kAmd && p.kv_row_stride > kMaxAmdKvRowStride) {
    return refuse("k or v has key rows " + std::to_string(p.kv_row_stride) +
                  " elements apart, more than the AMD kernels' 32-bit buffer offsets allow (" +
                  std::to_string(kMaxAmdKvRowStride) + ": a key block within 1 GiB)");
  }
  if (device.vendor == Vendor::kAmd && !portable_mfma_has_head_dim(p.d)) {
    return refuse("head dim " + std::to_string(p.d) +
                  " is built only for the NVIDIA kernels (the AMD kernels have head dims 64, 128)");
  }
  if (!build_has_binary_for(build, device)) {
    const bool amd = device.vendor == Vendor::kAmd;
    return refuse(arch_text(device) + " has no native kernel binary in this build (built for " +
                  (amd ? join(build.amd_archs) : join(build.archs)) + ")");
  }
  GateDecision decision;
  decision.trust = trust_for(device, options);
  if (decision.trust == ArchTrust::kUnverified) {
    decision.reason = arch_text(device) +
                      " has not been verified: its native kernels are built but were never run "
                      "on this GPU; run `python -m flashsplit.verify` on it (it checks them "
                      "against the reference and, on a pass, admits this GPU), or set "
                      "FLASHSPLIT_ALLOW_UNTESTED_ARCH=1 to try them unverified";
    return decision;
  }
  decision.ok = true;
  if (device.vendor == Vendor::kAmd) {
    decision.family = KernelFamily::kPortableMfma;
    return decision;
  }
  // Paged k/v runs on the Hopper kernels at the head dims whose sequence tiles read pages
  // (hopper_reads_pages), else on the portable kernels; so do decode and calls that would waste
  // most of a Hopper tile's rows (use_hopper_tiles).
  const int d = static_cast<int>(p.d);
  const bool hopper =
      device.cc == 90 && build.hopper_kernels_built && options.allow_hopper &&
      hopper_has_head_dim(d) && p.tma_describable &&
      (p.page_size == 0 ||
       hopper_reads_pages(p.page_size, d, static_cast<int>(value_head_dim(p)))) &&
      use_hopper_tiles(p.sq, p.h, p.hk, d);
  decision.family = hopper ? KernelFamily::kHopperWgmma : KernelFamily::kPortableMma;
  if (!hopper && device.smem_per_block_optin > 0) {
    const long long need = portable_smem_bytes(portable_tile_config(static_cast<int>(p.d)),
                                               static_cast<int>(p.d));
    if (need > device.smem_per_block_optin) {
      return refuse("head dim " + std::to_string(p.d) + " needs " + std::to_string(need / 1024) +
                    " KB of shared memory per block; " + arch_text(device) + " allows " +
                    std::to_string(device.smem_per_block_optin / 1024) + " KB");
    }
  }
  return decision;
}

}  // namespace flashsplit
