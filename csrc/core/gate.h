// The capability gate: can the native kernels serve this call, and if not, why not.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"

namespace flashsplit {

// kPortableMma: the portable kernels over the sm80 policy (mma.sync; sm_80 and later).
// kHopperWgmma: the TMA + wgmma kernels (sm_90a). kPortableMfma: the portable kernels over the
// gfx9 policy (MFMA, wave64; gfx90a, gfx942, gfx950).
enum class KernelFamily { kNone, kPortableMma, kHopperWgmma, kPortableMfma };

// "none", "portable_mma", "hopper_wgmma", "portable_mfma"
const char* kernel_family_name(KernelFamily family);

// Why the gate trusts the GPU's kernels: the GPU is in the table of hardware this project's GPU
// suite passed on (kTested), `python -m flashsplit.verify` passed on this machine for this
// build (kVerifiedHere), FLASHSPLIT_ALLOW_UNTESTED_ARCH=1 (kOverride); or it does not
// (kUnverified: the gate refuses).
enum class ArchTrust { kNone, kUnverified, kTested, kVerifiedHere, kOverride };

// "none", "unverified", "tested", "verified", "override"
const char* arch_trust_name(ArchTrust trust);

struct GateOptions {
  bool allow_untested_arch = false;  // FLASHSPLIT_ALLOW_UNTESTED_ARCH=1
  bool arch_verified_here = false;   // a verify stamp for this GPU and build exists
  bool allow_hopper = true;          // FLASHSPLIT_DISABLE_HOPPER=1 clears it
};

struct GateDecision {
  bool ok = false;
  KernelFamily family = KernelFamily::kNone;
  ArchTrust trust = ArchTrust::kNone;  // set once the checks reach the GPU
  std::string reason;  // empty when ok; otherwise one human-readable sentence
};

// NVIDIA compute capabilities whose kernels this project's GPU suite passed on.
bool arch_tested(int cc);

// The same table as a list (ascending), for build_info() and messages.
std::vector<int> tested_archs();

// Whether the build holds a binary this device can load: on NVIDIA an arch built for the
// device's own major version at or below its cc (sm_80 code runs on 8.6 and 8.9; 90 built as
// sm_90a is 90); on AMD the device's own target.
bool build_has_binary_for(const BuildInfo& build, const DeviceInfo& device);

// The device's arch as messages name it: "compute capability 9.0" or "gfx942".
std::string arch_text(const DeviceInfo& device);

// Admits or refuses the native path and picks its kernel family: on NVIDIA the Hopper kernels
// on cc 9.0 when built, allowed and suited to the shape (use_hopper_tiles), for dense calls and
// sequences of their own lengths with contiguous k/v; the portable mma kernels otherwise (and
// for paged k/v); on AMD the portable MFMA kernels. A GPU is admitted only if its arch is
// tested, verified on this machine, or the override is set.
GateDecision check_native(const AttnProblem& problem, const DeviceInfo& device,
                          const BuildInfo& build, const GateOptions& options = GateOptions{});

}  // namespace flashsplit
