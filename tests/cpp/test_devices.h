// The GPUs and builds the core tests describe: an H100, an H200 and an MI300X, and builds with the
// Hopper kernels and with the AMD kernels.
#pragma once

#include "core/gate.h"
#include "core/problem.h"

namespace flashsplit {
namespace testing {

// The H100 SXM (HBM3, 2619 MHz x 5120 bits) and the H200 (HBM3e as the driver reports it:
// 3201 MHz x 6016 bits, 4.81 TB/s), both of 132 SMs.
inline DeviceInfo h100() {
  return DeviceInfo{Vendor::kNvidia, 90, 132, 227 * 1024, "", kH100DramBytesPerUs};
}
inline DeviceInfo h200() {
  return DeviceInfo{Vendor::kNvidia, 90, 132, 227 * 1024, "", 3201e3 * 6016 / 4000};
}

inline DeviceInfo mi300x() { return DeviceInfo{Vendor::kAmd, 0, 304, 64 * 1024, "gfx942"}; }

// sm_80 and sm_90 kernels, the Hopper family among them.
inline BuildInfo hopper_build() { return BuildInfo{true, {80, 90}, {64, 128}, true}; }
// The same with every head dim the kernels have (64, 96, 128, 192, 256).
inline BuildInfo hopper_build_every_head_dim() {
  return BuildInfo{true, {80, 90}, {64, 96, 128, 192, 256}, true};
}

inline BuildInfo amd_build() {
  BuildInfo build;
  build.gpu_kernels_built = true;
  build.head_dims = {64, 128};
  build.amd_archs = {"gfx90a", "gfx942", "gfx950"};
  return build;
}

}  // namespace testing
}  // namespace flashsplit
