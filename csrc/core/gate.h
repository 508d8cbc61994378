// The capability gate: can the native kernels serve this call, and if not, why not.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"

namespace flashsplit {

// kPortableMma: mma.sync kernels (sm_80 and later). kHopperWgmma: TMA + wgmma kernels (sm_90a).
enum class KernelFamily { kNone, kPortableMma, kHopperWgmma };

// "none", "portable_mma", "hopper_wgmma"
const char* kernel_family_name(KernelFamily family);

struct GateDecision {
  bool ok = false;
  KernelFamily family = KernelFamily::kNone;
  std::string reason;  // empty when ok; otherwise one human-readable sentence
};

// Compute capabilities whose kernels were run and tested on real hardware.
// The gate admits only these unless allow_untested_arch is set.
bool arch_tested(int cc);

// The same table as a list (ascending), for build_info() and messages.
std::vector<int> tested_archs();

// Whether the build holds a binary this device can load: an arch built for the device's own
// major version at or below its cc (sm_80 code runs on 8.6 and 8.9; 90 built as sm_90a is 90).
bool build_has_binary_for(const BuildInfo& build, int cc);

// Admits or refuses the native path and picks its kernel family: the Hopper kernels on cc 9.0
// when built, allowed (allow_hopper; FLASHSPLIT_DISABLE_HOPPER=1 clears it in the torch layer)
// and suited to the shape (use_hopper_tiles); the portable kernels otherwise.
GateDecision check_native(const AttnProblem& problem, const DeviceInfo& device,
                          const BuildInfo& build, bool allow_untested_arch = false,
                          bool allow_hopper = true);

}  // namespace flashsplit
