// The capability gate: one test per refusal (ok == false and the user-facing words), the order
// of the checks, and the cases the native kernels must accept.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/gate.h"
#include "core/hopper_tiles.h"
#include "core/plan.h"
#include "core/portable_tiles.h"
#include "core/split_heuristic.h"
#include "test_devices.h"

namespace flashsplit {
namespace {

AttnProblem admitted_problem() {
  AttnProblem p;
  p.b = 2; p.sq = 200; p.sk = 333; p.h = 8; p.hk = 2; p.d = 64;
  p.dtype = DType::kBFloat16;
  return p;
}

using testing::amd_build;
using testing::h100;
using testing::mi300x;

BuildInfo gpu_build() { return BuildInfo{true, {80, 90}, {64, 128}}; }
BuildInfo gpu_build_with(std::vector<int> head_dims) {
  return BuildInfo{true, {80, 90}, std::move(head_dims)};
}

GateOptions untested_allowed() {
  GateOptions options;
  options.allow_untested_arch = true;
  return options;
}

GateOptions verified_here() {
  GateOptions options;
  options.arch_verified_here = true;
  return options;
}

void expect_refused(const GateDecision& decision, const std::string& words) {
  EXPECT_FALSE(decision.ok);
  EXPECT_EQ(decision.family, KernelFamily::kNone);
  EXPECT_NE(decision.reason.find(words), std::string::npos)
      << "reason \"" << decision.reason << "\" lacks \"" << words << "\"";
}

TEST(Gate, AdmitsSupportedProblemOnH100) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t d : {64, 128}) {
      for (bool causal : {false, true}) {
        AttnProblem p = admitted_problem();
        p.dtype = dtype;
        p.d = d;
        p.causal = causal;
        GateDecision decision = check_native(p, h100(), gpu_build());
        EXPECT_TRUE(decision.ok) << decision.reason;
        EXPECT_EQ(decision.family, KernelFamily::kPortableMma);
        EXPECT_TRUE(decision.reason.empty());
      }
    }
  }
}

TEST(Gate, CausalRightEdgeIsNotAWindow) {
  // flash-attn spells causal as window (-1, 0); that pair must stay on the native path.
  AttnProblem p = admitted_problem();
  p.causal = true;
  p.window_right = 0;
  EXPECT_TRUE(check_native(p, h100(), gpu_build()).ok);
}

TEST(Gate, RefusesCpuTensors) {
  AttnProblem p = admitted_problem();
  p.on_gpu = false;
  expect_refused(check_native(p, DeviceInfo{}, BuildInfo{}), "on the CPU");
  // Even a full GPU build refuses CPU tensors, and says so before anything else.
  p.dtype = DType::kFloat32;
  expect_refused(check_native(p, h100(), gpu_build()), "on the CPU");
}

TEST(Gate, RefusesBuildWithoutGpuKernels) {
  BuildInfo build = gpu_build();
  build.gpu_kernels_built = false;
  expect_refused(check_native(admitted_problem(), h100(), build), "built without GPU kernels");
}

TEST(Gate, RefusesUnknownVendor) {
  DeviceInfo unknown = h100();
  unknown.vendor = Vendor::kNone;
  expect_refused(check_native(admitted_problem(), unknown, gpu_build()), "vendor");
}

TEST(Gate, RefusesDtypesOtherThanHalfPrecision) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kOther}) {
    AttnProblem p = admitted_problem();
    p.dtype = dtype;
    GateDecision decision = check_native(p, h100(), gpu_build());
    expect_refused(decision, std::string("dtype ") + dtype_name(dtype));
    expect_refused(decision, "float16 or bfloat16");
  }
}

TEST(Gate, RefusesHeadDimNotBuilt) {
  for (int64_t d : {32, 96, 256}) {
    AttnProblem p = admitted_problem();
    p.d = d;
    GateDecision decision = check_native(p, h100(), gpu_build());
    expect_refused(decision, "head dim " + std::to_string(d));
    expect_refused(decision, "64, 128");
  }
}

TEST(Gate, RefusesDropout) {
  AttnProblem p = admitted_problem();
  p.dropout_p = 0.1;
  GateDecision decision = check_native(p, h100(), gpu_build());
  expect_refused(decision, "dropout");
  expect_refused(decision, "0.1");
  expect_refused(decision, "not implemented natively");
  p.dropout_p = std::nan("");  // validated upstream, but NaN must never count as "off"
  expect_refused(check_native(p, h100(), gpu_build()), "dropout");
}

TEST(Gate, RefusesSlidingWindows) {
  struct Window { int64_t left, right; bool causal; };
  for (Window w : {Window{128, -1, false}, Window{-1, 64, false}, Window{-1, 0, false},
                   Window{32, 0, true}, Window{-1, 16, true}, Window{0, 0, false}}) {
    AttnProblem p = admitted_problem();
    p.window_left = w.left;
    p.window_right = w.right;
    p.causal = w.causal;
    GateDecision decision = check_native(p, h100(), gpu_build());
    expect_refused(decision, "window");
    expect_refused(decision, "window_left=" + std::to_string(w.left));
    expect_refused(decision, "window_right=" + std::to_string(w.right));
  }
}

TEST(Gate, RefusesSoftcap) {
  AttnProblem p = admitted_problem();
  p.softcap = 30.0;
  GateDecision decision = check_native(p, h100(), gpu_build());
  expect_refused(decision, "softcap 30");
  expect_refused(decision, "not implemented natively");
}

TEST(Gate, RefusesAlibi) {
  AttnProblem p = admitted_problem();
  p.has_alibi = true;
  GateDecision decision = check_native(p, h100(), gpu_build());
  expect_refused(decision, "alibi");
  expect_refused(decision, "not implemented natively");
}

TEST(Gate, RefusesNonContiguousLastDim) {
  AttnProblem p = admitted_problem();
  p.last_dim_contiguous = false;
  expect_refused(check_native(p, h100(), gpu_build()), "contiguous");
}

TEST(Gate, RefusesMisalignedStrides) {
  AttnProblem p = admitted_problem();
  p.strides_16b_aligned = false;
  expect_refused(check_native(p, h100(), gpu_build()), "16-byte aligned");
}

TEST(Gate, RefusesEmptyInputs) {
  for (int which = 0; which < 5; ++which) {
    AttnProblem p = admitted_problem();
    int64_t* dims[] = {&p.b, &p.sq, &p.sk, &p.h, &p.hk};
    *dims[which] = 0;
    expect_refused(check_native(p, h100(), gpu_build()), "empty");
  }
}

TEST(Gate, AdmitsTensorsPast2To31Elements) {
  AttnProblem p = admitted_problem();
  p.b = 1; p.h = 32; p.hk = 32; p.d = 128; p.sq = 1 << 19;  // q: 2^31 elements
  EXPECT_TRUE(check_native(p, h100(), gpu_build()).ok);
  p.sq = 1;
  p.hk = 8;
  p.sk = 2101248;  // k/v: past 2^31 elements (a decode over 2M keys)
  p.kv_row_stride = p.hk * p.d;
  EXPECT_TRUE(check_native(p, h100(), gpu_build()).ok);
  EXPECT_TRUE(check_native(p, mi300x(), amd_build(), verified_here()).ok);
}

TEST(Gate, RefusesDimensionsPast32Bits) {
  AttnProblem p = admitted_problem();
  p.sk = int64_t{1} << 31;
  expect_refused(check_native(p, h100(), gpu_build()), "sk=2147483648");
  p.sk = (int64_t{1} << 31) - 1;
  EXPECT_TRUE(check_native(p, h100(), gpu_build()).ok);
}

TEST(Gate, RefusesAmdKeyRowsTooFarApartForItsBufferOffsets) {
  AttnProblem p = admitted_problem();
  p.kv_row_stride = (int64_t{1} << 23) + 8;
  expect_refused(check_native(p, mi300x(), amd_build(), verified_here()), "buffer offsets allow");
  EXPECT_TRUE(check_native(p, h100(), gpu_build()).ok);  // NVIDIA kernels take any stride
  p.kv_row_stride = int64_t{1} << 23;
  EXPECT_TRUE(check_native(p, mi300x(), amd_build(), verified_here()).ok);
}

TEST(Gate, RefusesDeviceWithoutBinary) {
  struct Case { int cc; std::vector<int> archs; };
  for (const Case& c : {Case{75, {80, 90}}, Case{100, {80, 90}}, Case{120, {80, 90}},
                        Case{90, {80}}, Case{80, {90}}, Case{86, {89}}}) {
    BuildInfo build = gpu_build();
    build.archs = c.archs;
    DeviceInfo device = h100();
    device.cc = c.cc;
    GateDecision decision = check_native(admitted_problem(), device, build, untested_allowed());
    std::string cc = std::to_string(c.cc / 10) + "." + std::to_string(c.cc % 10);
    expect_refused(decision, "compute capability " + cc);
    expect_refused(decision, "no native kernel binary");
  }
}

TEST(Gate, BinaryForLowerArchOfSameMajorRuns) {
  BuildInfo build = gpu_build();
  build.archs = {80};
  for (int cc : {80, 86, 89, 90, 75}) {
    DeviceInfo device = h100();
    device.cc = cc;
    EXPECT_EQ(build_has_binary_for(build, device), cc == 80 || cc == 86 || cc == 89) << cc;
  }
  DeviceInfo ada = h100();
  ada.cc = 89;
  GateDecision decision = check_native(admitted_problem(), ada, build, untested_allowed());
  EXPECT_TRUE(decision.ok) << decision.reason;
}

TEST(Gate, RefusesUnverifiedArchUnlessVerifiedOrAllowed) {
  for (int cc : {80, 86, 89}) {
    DeviceInfo device = h100();
    device.cc = cc;
    GateDecision refused = check_native(admitted_problem(), device, gpu_build());
    std::string cc_text = std::to_string(cc / 10) + "." + std::to_string(cc % 10);
    expect_refused(refused, "compute capability " + cc_text + " has not been verified");
    expect_refused(refused, "python -m flashsplit.verify");
    expect_refused(refused, "FLASHSPLIT_ALLOW_UNTESTED_ARCH=1");
    EXPECT_EQ(refused.trust, ArchTrust::kUnverified);
    GateDecision allowed = check_native(admitted_problem(), device, gpu_build(), untested_allowed());
    EXPECT_TRUE(allowed.ok) << allowed.reason;
    EXPECT_EQ(allowed.family, KernelFamily::kPortableMma);
    EXPECT_EQ(allowed.trust, ArchTrust::kOverride);
    GateDecision verified = check_native(admitted_problem(), device, gpu_build(), verified_here());
    EXPECT_TRUE(verified.ok) << verified.reason;
    EXPECT_EQ(verified.trust, ArchTrust::kVerifiedHere);
  }
  // The tested table needs neither; the trust says which case applies.
  EXPECT_EQ(check_native(admitted_problem(), h100(), gpu_build()).trust, ArchTrust::kTested);
  EXPECT_EQ(check_native(admitted_problem(), h100(), gpu_build(), untested_allowed()).trust,
            ArchTrust::kTested);
  EXPECT_STREQ(arch_trust_name(ArchTrust::kVerifiedHere), "verified");
  EXPECT_STREQ(arch_trust_name(ArchTrust::kOverride), "override");
  EXPECT_STREQ(arch_trust_name(ArchTrust::kUnverified), "unverified");
  EXPECT_STREQ(arch_trust_name(ArchTrust::kTested), "tested");
}

TEST(Gate, AmdGpusRunTheMfmaKernelsOnceVerified) {
  GateDecision refused = check_native(admitted_problem(), mi300x(), amd_build());
  expect_refused(refused, "gfx942 has not been verified");
  expect_refused(refused, "python -m flashsplit.verify");
  GateDecision verified = check_native(admitted_problem(), mi300x(), amd_build(), verified_here());
  ASSERT_TRUE(verified.ok) << verified.reason;
  EXPECT_EQ(verified.family, KernelFamily::kPortableMfma);
  EXPECT_STREQ(kernel_family_name(verified.family), "portable_mfma");
  EXPECT_EQ(verified.trust, ArchTrust::kVerifiedHere);
  GateDecision allowed = check_native(admitted_problem(), mi300x(), amd_build(), untested_allowed());
  EXPECT_TRUE(allowed.ok);
  EXPECT_EQ(allowed.trust, ArchTrust::kOverride);
}

TEST(Gate, PagedKvRunsOnHopperAtEveryPageSize) {
  // The Hopper kernels at d=64 and 128 read pages of any size (TMA boxes or a row at a time);
  // other head dims, and AMD, the portable kernels.
  AttnProblem p = admitted_problem();
  for (int page : {1, 8, 16, 24, 32, 48, 64, 128, 200, 256, 1024}) {
    p.page_size = page;
    GateDecision nvidia = check_native(p, h100(), testing::hopper_build());
    ASSERT_TRUE(nvidia.ok) << nvidia.reason;
    EXPECT_EQ(nvidia.family, KernelFamily::kHopperWgmma) << "page " << page;
    GateDecision amd = check_native(p, mi300x(), amd_build(), verified_here());
    ASSERT_TRUE(amd.ok) << amd.reason;
    EXPECT_EQ(amd.family, KernelFamily::kPortableMfma);
  }
  p.page_size = 64;
  p.d = 96;
  GateDecision d96 = check_native(p, h100(), testing::hopper_build_every_head_dim());
  ASSERT_TRUE(d96.ok) << d96.reason;
  EXPECT_EQ(d96.family, KernelFamily::kPortableMma);
}

TEST(Gate, AmdGpusNeedTheirOwnTargetBuilt) {
  BuildInfo build = amd_build();
  build.amd_archs = {"gfx90a", "gfx950"};
  GateDecision refused = check_native(admitted_problem(), mi300x(), build, untested_allowed());
  expect_refused(refused, "gfx942 has no native kernel binary in this build");
  expect_refused(refused, "gfx90a, gfx950");
  // An NVIDIA-only build has no AMD target at all.
  expect_refused(check_native(admitted_problem(), mi300x(), gpu_build(), untested_allowed()),
                 "gfx942 has no native kernel binary in this build (built for none)");
}

TEST(Gate, TestedArchTableIsTheH100Only) {
  EXPECT_EQ(tested_archs(), std::vector<int>{90});
  EXPECT_TRUE(arch_tested(90));
  for (int cc : {70, 75, 80, 86, 89, 100, 120}) EXPECT_FALSE(arch_tested(cc)) << cc;
}

TEST(Gate, ReportsTheFirstProblemInCheckOrder) {
  // Everything wrong at once: each fix in turn reveals the next reason, in the documented order.
  AttnProblem p = admitted_problem();
  p.dtype = DType::kFloat32;
  p.d = 96;
  p.dropout_p = 0.5;
  p.window_left = 4;
  p.softcap = 5.0;
  p.has_alibi = true;
  p.last_dim_contiguous = false;
  p.strides_16b_aligned = false;
  DeviceInfo device = h100();
  device.cc = 86;
  const char* expected[] = {"dtype", "head dim", "dropout", "window", "softcap", "alibi",
                            "contiguous", "aligned", "not been verified"};
  for (const char* words : expected) {
    GateDecision decision = check_native(p, device, gpu_build());
    expect_refused(decision, words);
    std::string reason = decision.reason;
    if (reason.find("dtype") != std::string::npos) p.dtype = DType::kFloat16;
    else if (reason.find("head dim") != std::string::npos) p.d = 128;
    else if (reason.find("dropout") != std::string::npos) p.dropout_p = 0.0;
    else if (reason.find("window") != std::string::npos) p.window_left = -1;
    else if (reason.find("softcap") != std::string::npos) p.softcap = 0.0;
    else if (reason.find("alibi") != std::string::npos) p.has_alibi = false;
    else if (reason.find("contiguous") != std::string::npos) p.last_dim_contiguous = true;
    else if (reason.find("aligned") != std::string::npos) p.strides_16b_aligned = true;
    else device.cc = 90;
  }
  EXPECT_TRUE(check_native(p, device, gpu_build()).ok);
}

TEST(Gate, NamesAreStable) {
  EXPECT_STREQ(kernel_family_name(KernelFamily::kNone), "none");
  EXPECT_STREQ(kernel_family_name(KernelFamily::kPortableMma), "portable_mma");
  EXPECT_STREQ(dtype_name(DType::kFloat16), "float16");
  EXPECT_STREQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(DType::kFloat32), "float32");
  EXPECT_STREQ(dtype_name(DType::kFloat64), "float64");
}

}  // namespace
}  // namespace flashsplit

// ---- Kernel family: the Hopper kernels where they are built, allowed and suited.
namespace flashsplit {
namespace {

using testing::hopper_build;
using testing::hopper_build_every_head_dim;

AttnProblem long_sequence_problem() {
  AttnProblem p = admitted_problem();
  p.sq = 4096; p.sk = 4096; p.h = 16; p.hk = 16; p.d = 128;
  return p;
}

TEST(GateFamily, PicksHopperOnH100WhenBuilt) {
  GateDecision decision = check_native(long_sequence_problem(), h100(), hopper_build());
  ASSERT_TRUE(decision.ok) << decision.reason;
  EXPECT_EQ(decision.family, KernelFamily::kHopperWgmma);
  EXPECT_STREQ(kernel_family_name(decision.family), "hopper_wgmma");
}

TEST(GateFamily, FallsBackToPortableWhenHopperIsNotPossible) {
  AttnProblem p = long_sequence_problem();
  // Not built for sm_90a.
  EXPECT_EQ(check_native(p, h100(), gpu_build()).family, KernelFamily::kPortableMma);
  // Switched off (FLASHSPLIT_DISABLE_HOPPER=1 in the torch layer).
  GateOptions no_hopper;
  no_hopper.allow_hopper = false;
  EXPECT_EQ(check_native(p, h100(), hopper_build(), no_hopper).family, KernelFamily::kPortableMma);
  // Another GPU (untested archs allowed so the gate admits it at all).
  DeviceInfo a100{Vendor::kNvidia, 80, 108, 163 * 1024};
  EXPECT_EQ(check_native(p, a100, hopper_build(), untested_allowed()).family,
            KernelFamily::kPortableMma);
  // An expanded (stride 0) input TMA cannot describe.
  p.tma_describable = false;
  EXPECT_EQ(check_native(p, h100(), hopper_build()).family, KernelFamily::kPortableMma);
}

TEST(GateFamily, HeadDimsGoToTheFamiliesThatHaveThem) {
  AttnProblem p = long_sequence_problem();
  const BuildInfo build = hopper_build_every_head_dim();
  for (int64_t d : {64, 96, 128, 192, 256}) {
    p.d = d;
    EXPECT_EQ(check_native(p, h100(), build).family, KernelFamily::kHopperWgmma) << d;
  }
  // Without the Hopper kernels the portable ones serve every head dim.
  p.d = 96;
  GateDecision decision = check_native(p, h100(), gpu_build_with(build.head_dims));
  ASSERT_TRUE(decision.ok) << decision.reason;
  EXPECT_EQ(decision.family, KernelFamily::kPortableMma);
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_n, 128);
  // The Hopper tiles walk 112-key blocks at d=192, 80-key blocks at d=256.
  p.d = 256;
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_n, 80);
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 128);
  p.d = 192;
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_n, 112);
}

TEST(GateFamily, VHeadDimOfItsOwnOnlyAt192With128) {
  AttnProblem p = long_sequence_problem();
  const BuildInfo build = hopper_build_every_head_dim();
  p.d = 192;
  p.dv = 128;
  EXPECT_EQ(check_native(p, h100(), build).family, KernelFamily::kHopperWgmma);
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_n, 128);  // d=128's blocks
  EXPECT_EQ(check_native(p, h100(), gpu_build_with(build.head_dims)).family,
            KernelFamily::kPortableMma);
  p.per_sequence = true;  // varlen and kv-cache calls keep v's head dim k's
  expect_refused(check_native(p, h100(), build), "v's head dim 128 differs from q's 192");
  p.per_sequence = false;
  p.dv = 64;
  expect_refused(check_native(p, h100(), build), "only d=192 with v's 128");
  p.d = 128;
  p.dv = 128;  // the same as d, spelled out
  EXPECT_TRUE(check_native(p, h100(), build).ok);
  BuildInfo amd = amd_build();
  amd.head_dims = build.head_dims;
  p.d = 192;
  expect_refused(check_native(p, mi300x(), amd, verified_here()), "differs from q's 192");
}

TEST(GateFamily, AmdRefusesTheHeadDimsOnlyNvidiaHas) {
  AttnProblem p = long_sequence_problem();
  BuildInfo build = amd_build();
  build.head_dims = {64, 96, 128, 192, 256};
  for (int64_t d : {96, 192, 256}) {
    p.d = d;
    GateDecision decision = check_native(p, mi300x(), build, verified_here());
    expect_refused(decision, "head dim " + std::to_string(d) + " is built only for the NVIDIA");
  }
  p.d = 128;
  EXPECT_TRUE(check_native(p, mi300x(), build, verified_here()).ok);
}

TEST(GateFamily, RefusesPortableTilesLargerThanTheSharedMemory) {
  AttnProblem p = long_sequence_problem();
  BuildInfo build = gpu_build();
  build.head_dims = {64, 96, 128, 192, 256};
  DeviceInfo rtx{Vendor::kNvidia, 86, 84, 99 * 1024};
  p.d = 192;  // 144 KB of wide tile
  expect_refused(check_native(p, rtx, build, untested_allowed()), "needs 144 KB of shared memory");
  p.d = 128;  // 96 KB
  EXPECT_TRUE(check_native(p, rtx, build, untested_allowed()).ok);
  DeviceInfo a100{Vendor::kNvidia, 80, 108, 163 * 1024};
  p.d = 256;  // 128 KB with 32-key blocks
  EXPECT_TRUE(check_native(p, a100, build, untested_allowed()).ok);
}

TEST(GateFamily, DecodeStaysPortableAndShortGqaQueriesPackTheirGroupOnHopper) {
  AttnProblem p = long_sequence_problem();
  p.d = 128;
  p.sq = 1; p.h = 32; p.hk = 8;  // 4 packed rows: the narrow tile
  EXPECT_EQ(check_native(p, h100(), hopper_build()).family, KernelFamily::kPortableMma);
  p.sq = 16;  // 64 packed rows: the group's heads packed into one 128-row Hopper tile
  EXPECT_EQ(check_native(p, h100(), hopper_build()).family, KernelFamily::kHopperWgmma);
  TileConfig packed = tiles_for(KernelFamily::kHopperWgmma, p);
  EXPECT_TRUE(packed.packs_heads);
  EXPECT_TRUE(packed.wgmma);
  EXPECT_EQ(packed.block_m, 128);
  EXPECT_EQ(forward_blocks(p.b, p.sq, p.h, p.hk, packed), p.b * p.hk);
  p.h = 40;  // a group of 5: 25 whole queries fill 125 of the tile's rows
  EXPECT_EQ(check_native(p, h100(), hopper_build()).family, KernelFamily::kHopperWgmma);
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 125);
  EXPECT_EQ(forward_blocks(p.b, p.sq, p.h, p.hk, tiles_for(KernelFamily::kHopperWgmma, p)),
            p.b * p.hk);  // 16 queries x 5 heads: 80 rows, one tile
  p.sq = 40;            // 200 rows: two tiles of 125
  EXPECT_EQ(forward_blocks(p.b, p.sq, p.h, p.hk, tiles_for(KernelFamily::kHopperWgmma, p)),
            p.b * p.hk * 2);
  p.h = 8 * 256;  // a group of 256 would not fit one query in a tile: portable
  EXPECT_FALSE(hopper_packs_heads(p.sq, p.h, p.hk, 128));
  p.sq = 16;
  p.h = 32;  // packed tiles run at d = 64 and 128
  EXPECT_TRUE(hopper_packs_heads(p.sq, p.h, p.hk, 64));
  EXPECT_FALSE(hopper_packs_heads(p.sq, p.h, p.hk, 96));
  EXPECT_FALSE(hopper_packs_heads(p.sq, p.h, p.hk, 256));
  p.sq = 64;  // a head's rows fill half a tile: one head per tile
  EXPECT_EQ(check_native(p, h100(), hopper_build()).family, KernelFamily::kHopperWgmma);
  EXPECT_FALSE(tiles_for(KernelFamily::kHopperWgmma, p).packs_heads);
  p.sq = 20; p.h = 8; p.hk = 8;  // MHA: nothing to pack, Hopper's tile is no emptier
  EXPECT_EQ(check_native(p, h100(), hopper_build()).family, KernelFamily::kHopperWgmma);
  EXPECT_FALSE(tiles_for(KernelFamily::kHopperWgmma, p).packs_heads);
}

TEST(GateFamily, TilesFollowTheFamily) {
  AttnProblem p = long_sequence_problem();
  TileConfig hopper = tiles_for(KernelFamily::kHopperWgmma, p);
  EXPECT_EQ(hopper.block_m, 128);
  EXPECT_EQ(hopper.block_n, 128);
  EXPECT_FALSE(hopper.packs_heads);
  EXPECT_TRUE(hopper.wgmma);
  p.d = 64;
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  p.sq = 4100;  // 22 tiles of 192 rows pad 124 rows: still cheaper than 33 tiles of 128
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  p.sq = 2048;  // 11 tiles of 192 rows pad 64 rows: cheaper than 16 tiles of 128
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  p.sq = 1024;  // short sequences: 128-row ping-pong tiles
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 128);
  // With the causal mask tall tiles run only from 1536 rows, and their rows gain less: 95% of
  // a base row over at most 4096 keys (persistent tiles), 88% over more.
  p.causal = true;
  p.sq = 1536;  // no padding either way
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  p.sq = 2048;  // 2112 rows of 192 against 2048 of 128: 1.031 * 0.95 < 1
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  p.sq = 2176;  // 2304 rows against 2176: 1.059 * 0.95 > 1
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 128);
  p.sk = 4097;  // 33 key blocks: 1.059 * 0.88 < 1
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  p.sq = 1792;  // 1920 rows against 1792: 1.071 * 0.88 < 1
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  p.sq = 1280;
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 128);
  p.sq = 6144; p.sk = 4096;  // no padding
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  p.causal = false;
  TileConfig portable = tiles_for(KernelFamily::kPortableMma, p);
  EXPECT_EQ(portable.block_m, portable_tile_config(64).block_m);
  EXPECT_TRUE(portable.packs_heads);
  EXPECT_EQ(tiles_for(KernelFamily::kNone, p).block_m, 0);
}

TEST(GateFamily, UnsplitCallsPickTheTileHeightByWaves) {
  // G = 1: 192-row tiles where their waves, weighted by a row's cost (87% at d=64, 95% / 88%
  // with the mask over at most / more than 4096 keys, 93% at d=128), are fewer than the 128-row
  // tiles' waves; split calls keep the tiles the heuristic modelled (tiles_for).
  AttnProblem p = long_sequence_problem();
  p.d = 64; p.h = 32; p.hk = 32;
  const auto run_m = [&](int sms, int g) {
    return tiles_for_run(KernelFamily::kHopperWgmma, p, sms, g).block_m;
  };
  p.b = 32; p.sq = p.sk = 512;  // 4096 tiles of 128 (32 waves) vs 3072 of 192 (24 waves)
  EXPECT_EQ(run_m(132, 1), 256) << "2048 tiles of 256 (16 waves): 16 * 2 * 0.95 < 24 * 1.5 * 0.87";
  p.causal = true;
  EXPECT_EQ(run_m(132, 1), 256) << "with the mask: wide tiles below 1536 rows, 16 * 2 * 0.85 < 32";
  p.causal = false;
  EXPECT_EQ(run_m(132, 2), 128) << "split calls run the modelled tiles";
  EXPECT_EQ(run_m(0, 1), 128) << "no SM count: the grid is unknown";
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 128);
  p.b = 21; p.sq = p.sk = 768;  // 31 waves vs 21: 21 * 1.5 * 0.87 = 27.4
  EXPECT_EQ(run_m(132, 1), 192);
  p.b = 4; p.h = p.hk = 16; p.sq = p.sk = 512;  // 256 tiles (2 waves) vs 192 (2): 2.6 > 2
  EXPECT_EQ(run_m(132, 1), 256) << "128 tiles of 256 rows, one wave: 1.9 < 2";
  p.b = 1; p.sq = p.sk = 2048;  // 256 tiles vs 176: both 2 waves; the split tiles are 192
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 192);
  EXPECT_EQ(run_m(132, 1), 256) << "128 tiles of 256 rows, one wave";
  p.h = p.hk = 17;  // 136 tiles of 256 (2 waves) vs 272 of 128 (3) and 187 of 192 (2)
  EXPECT_EQ(run_m(132, 1), 192);
  p.h = p.hk = 16;
  EXPECT_EQ(run_m(132, 3), 192);
  p.sq = p.sk = 1536;  // 192 tiles of 128 (2 waves) vs 128 of 192 (1 wave)
  EXPECT_EQ(run_m(132, 1), 192);
  // With the mask: tall tiles weighted at 95% over at most 4096 keys and 88% over more; wide
  // tiles below 1536 rows, at 85% (ShortCausalCallsWeighEveryHeightByWaves).
  p.causal = true;
  p.b = 16; p.h = p.hk = 32; p.sq = p.sk = 1024;  // 2048 tiles of 256 (16 waves) vs 4096 of 128
  EXPECT_EQ(run_m(132, 1), 256);
  p.b = 1; p.h = p.hk = 16;  // one wave of each height: 2 * 0.85 > 1.5 * 0.95 > 1
  EXPECT_EQ(run_m(132, 1), 128);
  p.h = p.hk = 32;
  p.b = 2; p.sq = p.sk = 8192;  // 4096 tiles (32 waves) vs 2752 (21): 27.7 < 32
  EXPECT_EQ(run_m(132, 1), 192);
  p.b = 4; p.sq = p.sk = 4096;  // 32 waves vs 22: 22 * 1.5 * 0.95 = 31.35 < 32
  EXPECT_EQ(run_m(132, 1), 192);
  p.sk = 16384;  // the same tiles over 128 key blocks: 29.0 < 32
  EXPECT_EQ(run_m(132, 1), 192);
  p.b = 1; p.h = p.hk = 16; p.sq = p.sk = 8192;  // 1024 tiles (8 waves) vs 688 (6): 7.9 < 8
  EXPECT_EQ(run_m(132, 1), 192);
  p.b = 4; p.sq = 2048;  // 1024 tiles vs 704: 6 * 1.5 * 0.88 = 7.9 < 8 over 8192 keys
  EXPECT_EQ(run_m(132, 1), 192);
  p.sk = 2048;  // 8.7 > 8 over 2048
  EXPECT_EQ(run_m(132, 1), 128);
  EXPECT_EQ(run_m(132, 2), 192) << "split calls run the modelled tiles: 2112 * 0.95 < 2048";
  p.sk = 65536;
  EXPECT_EQ(run_m(132, 2), 192) << "split calls over long keys: 192 rows";
  // The launcher's rule is the same function with the keys, b * h, the SM count and G.
  EXPECT_EQ(hopper_block_m(64, 2048, true, 2048, 4 * 16, 132, 1), 128);
  EXPECT_EQ(hopper_block_m(64, 4096, true, 4096, 4 * 32, 132, 1), 192);
  EXPECT_EQ(hopper_block_m(64, 8192, true, 8192, 2 * 32, 132, 1), 192);
  EXPECT_EQ(hopper_block_m(64, 2048, true, 65536, 16, 132, 3), 192);
}

TEST(GateFamily, ShortCausalCallsWeighEveryHeightByWaves) {
  // Below 1536 rows with the mask, calls over at most 4096 keys run 192-row tiles where their
  // waves, weighted at 93% a row (95% at d=64), weigh less than the 128-row tiles' waves, and at
  // d=64 256-row tiles where theirs weigh less still, at 85% a row (the messages count a wave of
  // 192 or 256 rows as 1.5 or 2 of 128); over more keys (chunks of a long prefill) 128 rows.
  // (At d=128 over more than 4 key blocks the longest-first model decides instead:
  // PersistentD128CausalCallsCompareHeightsLongestFirst.)
  AttnProblem p = long_sequence_problem();
  p.causal = true; p.h = 32; p.hk = 8; p.d = 96;
  const auto run_m = [&](int b, int h, long long sq, long long sk) {
    p.b = b; p.h = h; p.sq = sq; p.sk = sk;
    return tiles_for_run(KernelFamily::kHopperWgmma, p, 132, 1).block_m;
  };
  EXPECT_EQ(run_m(4, 32, 1152, 1152), 192) << "9 waves vs 6: 6 * 1.5 * 0.93 = 8.37 < 9";
  EXPECT_EQ(run_m(8, 40, 1500, 1500), 192) << "30 waves vs 20: 27.9 < 30";
  EXPECT_EQ(run_m(1, 32, 1500, 1500), 192) << "3 waves vs 2: 2.79 < 3";
  EXPECT_EQ(run_m(16, 32, 777, 777), 192) << "28 waves vs 20: 27.9 < 28";
  EXPECT_EQ(run_m(16, 16, 1024, 1024), 128) << "16 waves vs 12: 16.7 > 16";
  EXPECT_EQ(run_m(32, 16, 512, 512), 128) << "16 waves vs 12: 16.7 > 16";
  EXPECT_EQ(run_m(16, 21, 1024, 1024), 128) << "21 waves vs 16: 22.3 > 21";
  p.d = 64;
  EXPECT_EQ(run_m(4, 32, 1152, 1152), 256) << "9 waves of 128, 6 of 192 (8.55), 5 of 256 (8.5)";
  EXPECT_EQ(run_m(8, 32, 777, 777), 256) << "14 waves of 128, 10 of 192 (14.25), 8 of 256 (13.6)";
  EXPECT_EQ(run_m(1, 32, 1500, 1500), 192) << "3 waves of 128, 2 of 192 (2.85), 2 of 256 (3.4)";
  EXPECT_EQ(run_m(1, 16, 1024, 1024), 128) << "one wave of each: 1, 1.43, 1.7";
  EXPECT_EQ(run_m(1, 32, 1500, 8192), 128) << "over more keys no 192 rows; 2 waves of 256: 3.4";
  p.d = 96;
  EXPECT_EQ(run_m(8, 40, 1500, 1500), 192);
  EXPECT_EQ(tiles_for_run(KernelFamily::kHopperWgmma, p, 132, 2).block_m, 128)
      << "split calls run the modelled tiles";
  EXPECT_EQ(hopper_block_m(96, 1500, true, 1500, 8 * 40, 132, 1), 192);
  EXPECT_EQ(hopper_block_m(96, 777, true, 777, 8 * 32, 132, 1, true), 192)
      << "sequences of their own lengths: 14 waves vs 10, 13.95 < 14";
  p.d = 128;
  EXPECT_EQ(run_m(32, 16, 512, 512), 128) << "d=128 over 4 key blocks: 16 waves vs 12";
}

TEST(GateFamily, PersistentD128CausalCallsCompareHeightsLongestFirst) {
  // With the mask at d=128 over 5-32 key blocks, where the base tiles take the running max,
  // tall tiles run unless the longest-first model has base tiles end more than 1% later than
  // tall ones weighted at 93% a row (the messages give base's time over tall's unweighted).
  const auto m = [](long long heads, long long s) {
    return hopper_block_m(128, s, true, s, heads, 132, 1);
  };
  const auto later = [](long long heads, long long s) {
    return causal_longest_first_time(heads, s, s, kHopperTallRows, 128, 100, 132) /
           causal_longest_first_time(heads, s, s, kHopperBaseRows, 128, 100, 132);
  };
  EXPECT_EQ(hopper_causal_base_margin_pct(128, 4096), -1);
  EXPECT_EQ(m(8 * 32, 900), 192) << later(8 * 32, 900);
  EXPECT_EQ(m(32, 1500), 192) << later(32, 1500);
  EXPECT_EQ(m(2 * 64, 4000), 192) << later(2 * 64, 4000);
  EXPECT_EQ(m(4 * 32, 1152), 128) << later(4 * 32, 1152);
  EXPECT_EQ(m(8 * 40, 1500), 128) << later(8 * 40, 1500);
  EXPECT_EQ(m(8 * 16, 2048), 128) << later(8 * 16, 2048);
  EXPECT_EQ(m(4 * 16, 4096), 128) << later(4 * 16, 4096);
  // 512 heads of 777 rows: the model has tall tiles' last, 9-row tiles cost whole ones, so
  // base tiles run (measured 2% slower than tall ones).
  EXPECT_EQ(m(16 * 32, 777), 128) << later(16 * 32, 777);
  // Split calls run the modelled tiles. Sequences of their own lengths keep the block max and
  // the waves: 20 waves of base tiles against 14 of tall ones (13.02 weighted) at 1165 rows,
  // where the longest-first model has base tiles 7.5% earlier.
  EXPECT_EQ(hopper_block_m(128, 900, true, 900, 8 * 32, 132, 2), 128);
  EXPECT_FALSE(hopper_causal_running_max(128, true, 1165, true));
  EXPECT_TRUE(hopper_causal_running_max(128, true, 1165));
  EXPECT_EQ(m(8 * 32, 1165), 128) << later(8 * 32, 1165);
  EXPECT_EQ(hopper_block_m(128, 1165, true, 1165, 8 * 32, 132, 1, true), 192);
}

TEST(GateFamily, WideTilesOnlyForUnsplitD64Calls) {
  // 256-row tiles (four consumers, 64-key blocks) at 95% of a base row's cost (85% with the
  // mask, ShortCausalCallsWeighEveryHeightByWaves): they win where
  // the 192-row tiles pad or fill more waves (bench_seqlen's d=64 points at 512 and 1024 rows),
  // and lose where those do not (768, 1536, and 2048 rows of 256 heads: 16 waves * 2 * 0.95 >
  // 22 * 1.5 * 0.87). With the mask they run below 1536 rows only.
  AttnProblem p = long_sequence_problem();
  p.d = 64; p.h = p.hk = 32;
  const auto run = [&](int g) { return tiles_for_run(KernelFamily::kHopperWgmma, p, 132, g); };
  for (const auto& [b, sq, want] : std::vector<std::tuple<int, int, int>>{
           {32, 512, 256}, {16, 1024, 256}, {21, 768, 192}, {10, 1536, 192}, {8, 2048, 192},
           {4, 4096, 192}, {2, 2048, 256}, {64, 256, 256}, {42, 384, 192}}) {
    p.b = b; p.sq = p.sk = sq;
    const TileConfig t = run(1);
    EXPECT_EQ(t.block_m, want) << "b=" << b << " sq=" << sq;
    EXPECT_EQ(t.block_n, want == 256 ? 64 : 128) << "b=" << b << " sq=" << sq;
    EXPECT_EQ(t.warps, 4 + want / 16);
  }
  p.b = 32; p.sq = p.sk = 512;
  EXPECT_NE(run(2).block_m, 256) << "split calls run the modelled tiles";
  EXPECT_FALSE(tail_split_for_run(KernelFamily::kHopperWgmma, p, run(1), 132, 1).active())
      << "the tail split is planned in 128-key blocks";
  p.causal = true;
  EXPECT_EQ(run(1).block_m, 256) << "with the mask below 1536 rows";
  EXPECT_EQ(run(1).block_n, 64) << "with the mask below 1536 rows";
  p.b = 8; p.sq = p.sk = 2048;
  EXPECT_NE(run(1).block_m, 256) << "with the mask from 1536 rows";
  p.b = 32; p.sq = p.sk = 512;
  p.causal = false;
  p.d = 128;
  EXPECT_NE(run(1).block_m, 256) << "at d=128";
  // The same rule where the launcher reads it, and the row cost the split choice weighs.
  EXPECT_EQ(hopper_block_m(64, 1024, false, 1024, 16 * 32, 132, 1), 256);
  EXPECT_EQ(hopper_block_m(64, 1024, false, 1024, 16 * 32, 132, 2), 128);
  // Over pages: the wide tiles at any page size (boxes or rows), never the tall ones.
  EXPECT_EQ(hopper_block_m(64, 1024, false, 1024, 16 * 32, 132, 1, true, 64), 256);
  EXPECT_EQ(hopper_block_m(64, 1024, false, 1024, 16 * 32, 132, 1, true, 192), 256);
  EXPECT_EQ(hopper_block_m(64, 1024, false, 1024, 16 * 32, 132, 1, true, 16), 256);
  EXPECT_EQ(hopper_block_m(64, 4096, true, 4096, 4 * 32, 132, 1, true), 192);
  EXPECT_EQ(hopper_block_m(64, 4096, true, 4096, 4 * 32, 132, 1, true, 64), 128);
  EXPECT_EQ(hopper_row_cost_pct(64, 256, false, 1024), kHopperWidePct);
  EXPECT_EQ(hopper_row_cost_pct(64, 256, true, 1024), kHopperWidePctCausal);
}

TEST(GateFamily, TailSplitOnlyForUnsplitHopperCallsWithoutMask) {
  // bench_seqlen's d=128 point at 4096 rows: 2048 tiles of 128 rows on 132 SMs, a last round
  // of 68 over 32 key blocks each.
  AttnProblem p = long_sequence_problem();
  p.d = 128; p.h = p.hk = 16; p.b = 4; p.sq = p.sk = 4096;
  const auto tail = [&](KernelFamily family, int g) {
    return tail_split_for_run(family, p, tiles_for_run(family, p, 132, g), 132, g);
  };
  ASSERT_EQ(tiles_for_run(KernelFamily::kHopperWgmma, p, 132, 1).block_m, 128);
  const TailSplit t = tail(KernelFamily::kHopperWgmma, 1);
  ASSERT_TRUE(t.active());
  EXPECT_EQ(t.main_tiles, 15 * 132);
  EXPECT_EQ(t.tail_tiles, 68);
  EXPECT_EQ(t.key_blocks, 32);
  EXPECT_FALSE(tail(KernelFamily::kHopperWgmma, 2).active()) << "split calls";
  EXPECT_FALSE(tail(KernelFamily::kPortableMma, 1).active()) << "portable kernels";
  p.causal = true;
  EXPECT_FALSE(tail(KernelFamily::kHopperWgmma, 1).active()) << "tiles of unequal work";
  p.causal = false;
  // 16 key blocks (2048 rows): a chunk of 11 plus a piece's overhead against 16: off.
  p.b = 8; p.sq = p.sk = 2048;
  EXPECT_FALSE(tail(KernelFamily::kHopperWgmma, 1).active());
  // 128-row tiles: 264 heads of 128 rows over 64 key blocks, 2 rounds.
  p.b = 1; p.h = p.hk = 264 + 40; p.sq = 128; p.sk = 8192;
  ASSERT_EQ(tiles_for_run(KernelFamily::kHopperWgmma, p, 132, 1).block_m, 128);
  EXPECT_EQ(tail(KernelFamily::kHopperWgmma, 1).tail_tiles, 40);
  // d=64, 192-row tiles: 2816 tiles at 2048 rows (21 rounds and 44 tiles).
  p.d = 64; p.h = p.hk = 32; p.b = 8; p.sq = p.sk = 2048;
  ASSERT_EQ(tiles_for_run(KernelFamily::kHopperWgmma, p, 132, 1).block_m, 192);
  EXPECT_EQ(tail(KernelFamily::kHopperWgmma, 1).tail_tiles, 44);
  EXPECT_FALSE(tail_split_for_run(KernelFamily::kHopperWgmma, p,
                                  tiles_for_run(KernelFamily::kHopperWgmma, p, 0, 1), 0, 1)
                   .active())
      << "no SM count";
}

TEST(GateFamily, HeadDim128TakesTallTilesOnlyUnsplit) {
  // Tall rows weigh 93% of a base row with the mask and 105% without it.
  AttnProblem p = long_sequence_problem();
  p.d = 128; p.h = 16; p.hk = 16;
  const auto run_m = [&](int sms, int g) {
    return tiles_for_run(KernelFamily::kHopperWgmma, p, sms, g).block_m;
  };
  p.b = 8; p.sq = p.sk = 2048;  // 2048 tiles of 128 (16 waves) vs 1408 of 192 (11)
  EXPECT_EQ(run_m(132, 1), 128) << "11 * 1.5 * 1.05 = 17.3 > 16";
  EXPECT_EQ(run_m(132, 2), 128);
  EXPECT_EQ(tiles_for(KernelFamily::kHopperWgmma, p).block_m, 128);
  p.causal = true;
  EXPECT_EQ(run_m(132, 1), 128) << "with the mask longest first (tall tiles 12.5% later)";
  EXPECT_EQ(run_m(132, 2), 128);
  p.b = 12; p.sq = p.sk = 1280;  // 1920 tiles (15 waves) vs 1344 (11): 15.3 > 15
  EXPECT_EQ(run_m(132, 1), 128);
  p.causal = false;
  EXPECT_EQ(run_m(132, 1), 128);
  p.b = 1; p.sq = p.sk = 16384;  // 16 waves vs 1376 tiles (11)
  EXPECT_EQ(run_m(132, 1), 128);
  p.b = 2; p.h = p.hk = 8; p.sq = 1536; p.sk = 16384;  // 192 tiles (2 waves) vs 128 (1)
  EXPECT_EQ(run_m(132, 1), 192) << "1.5 * 1.05 < 2";
  p.b = 1; p.h = p.hk = 48; p.sq = p.sk = 1536;  // 576 tiles (5 waves) vs 384 (3): 4.7 < 5
  EXPECT_EQ(run_m(132, 1), 192);
  p.b = 2; p.h = p.hk = 8; p.sq = p.sk = 2048;  // 256 tiles vs 176: 2 waves each
  EXPECT_EQ(run_m(132, 1), 128);
}

TEST(GateFamily, AutoSplitsGiveWayToAnUnsplitCallsOwnTiles) {
  // The heuristic picks G on the split calls' tiles; where an unsplit call would run other
  // tiles, G = 1 wins if those model no slower, weighted by their row cost (H100, one call:
  // every shape below as measured).
  const DeviceInfo dev = h100();
  AttnProblem p = long_sequence_problem();
  p.causal = false;
  // (2,8,8,1536,16384,128): G = 2 on 128-row tiles (0.357 ms) vs G = 1 on 192 (0.304 ms).
  p.b = 2; p.h = p.hk = 8; p.sq = 1536; p.sk = 16384; p.d = 128;
  ASSERT_EQ(choose_num_splits(p, dev, tiles_for(KernelFamily::kHopperWgmma, p)), 2);
  EXPECT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 0), 1);
  EXPECT_EQ(tiles_for_run(KernelFamily::kHopperWgmma, p, dev.sm_count, 1).block_m, 192);
  EXPECT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 2), 2) << "a forced G stays";
  EXPECT_EQ(resolve_splits_for(KernelFamily::kPortableMma, p, dev, 0),
            choose_num_splits(p, dev, tiles_for(KernelFamily::kPortableMma, p)))
      << "the portable tiles do not change with G";
  // (1,12,12,3072,32768,128): the heuristic's G = 4 (0.907 ms) gives way to an unsplit call on
  // the same 128-row tiles, whose last round runs as a tail split (0.814 ms).
  p.b = 1; p.h = p.hk = 12; p.sq = 3072; p.sk = 32768;
  ASSERT_EQ(choose_num_splits(p, dev, tiles_for(KernelFamily::kHopperWgmma, p)), 4);
  const TileConfig unsplit = tiles_for_run(KernelFamily::kHopperWgmma, p, dev.sm_count, 1);
  EXPECT_EQ(unsplit.block_m, 128);
  EXPECT_TRUE(tail_split_for_run(KernelFamily::kHopperWgmma, p, unsplit, dev.sm_count, 1).active());
  EXPECT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 0), 1);
  // The other way round at d=64: (1,8,8,2048,4096) splits on 192-row tiles (G = 3, 0.061 ms)
  // where an unsplit call runs 128 rows (0.054 ms).
  p.d = 64; p.h = p.hk = 8; p.sq = 2048; p.sk = 4096;
  ASSERT_EQ(choose_num_splits(p, dev, tiles_for(KernelFamily::kHopperWgmma, p)), 3);
  EXPECT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 0), 1);
  // ... and (1,8,8,2048,32768): G = 3 (0.291 ms) stays against G = 1 (0.314 ms).
  p.sk = 32768;
  EXPECT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 0), 3);
}

TEST(GateFamily, ResolveSplitsForWeighsTheGivenConstants) {
  const DeviceInfo dev = h100();
  AttnProblem p = long_sequence_problem();
  p.causal = false;
  // Without constants the plan's defaults: the same G for every family and request.
  for (int64_t sk : {512, 4096, 32768}) {
    for (int64_t sq : {128, 2048}) {
      for (int64_t d : {64, 128}) {
        p.sq = sq; p.sk = sk; p.d = d;
        for (KernelFamily family : {KernelFamily::kPortableMma, KernelFamily::kHopperWgmma}) {
          for (int requested : {0, 1, 3}) {
            EXPECT_EQ(resolve_splits_for(family, p, dev, requested),
                      resolve_splits_for(family, p, dev, requested, SplitHeuristicConstants{}))
                << "sq=" << sq << " sk=" << sk << " d=" << d << " requested=" << requested;
          }
        }
      }
    }
  }
  // A split that must gain all of G = 1's time never runs; a forced G still does.
  SplitHeuristicConstants never_split;
  never_split.min_gain = never_split.min_gain_multi_wave = 1.0;
  p.b = 1; p.h = p.hk = 8; p.sq = 2048; p.sk = 32768; p.d = 64;
  ASSERT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 0), 3);
  EXPECT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 0, never_split), 1);
  EXPECT_EQ(resolve_splits_for(KernelFamily::kPortableMma, p, dev, 0, never_split), 1);
  EXPECT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 5, never_split), 5);
  // The weighing against the unsplit call's own tiles takes them too: a dearer combine leaves
  // the split tiles' G at 3 but makes it lose to G = 1 on the 128-row unsplit tiles.
  SplitHeuristicConstants dear_combine;
  dear_combine.combine_us = 30.0;
  const TileConfig split_tiles = tiles_for(KernelFamily::kHopperWgmma, p);
  ASSERT_NE(tiles_for_run(KernelFamily::kHopperWgmma, p, dev.sm_count, 1).block_m,
            split_tiles.block_m);
  ASSERT_EQ(choose_num_splits(p, dev, split_tiles, dear_combine), 3);
  EXPECT_EQ(resolve_splits_for(KernelFamily::kHopperWgmma, p, dev, 0, dear_combine), 1);
}

TEST(GateFamily, ForwardBlocksCountHeadsOrGroups) {
  // b=2, sq=300, h=8, hk=2: Hopper tiles one head's 300 rows (3 tiles of 128) per query head;
  // portable packs 4 heads -> 1200 rows per k/v head (10 tiles of 128).
  TileConfig hopper = hopper_tile_config(128, 300);
  EXPECT_EQ(forward_blocks(2, 300, 8, 2, hopper), 2 * 8 * 3);
  EXPECT_EQ(forward_blocks(2, 300, 8, 2, portable_tile_config(128)), 2 * 2 * 10);
}

}  // namespace
}  // namespace flashsplit

namespace flashsplit {
namespace {

TEST(HopperSchedule, PersistentOnlyForShortTiles) {
  EXPECT_TRUE(hopper_persistent(1024));
  EXPECT_TRUE(hopper_persistent(4096));   // 32 key blocks of 128
  EXPECT_FALSE(hopper_persistent(4097));  // 33: long tiles use the hardware's scheduling
}

TEST(HopperSchedule, CarryAcrossTilesOnlyWhereItMeasuredFaster) {
  // d=128 without the mask: never (on tiles of 4 key blocks too).
  EXPECT_FALSE(hopper_carry_across_tiles(128, false));
  // d=128 with the mask, and d=64: always.
  EXPECT_TRUE(hopper_carry_across_tiles(128, true));
  EXPECT_TRUE(hopper_carry_across_tiles(64, false));
  EXPECT_TRUE(hopper_carry_across_tiles(64, true));
}

TEST(HopperSchedule, RoundsRotateOnlyForUnsplitTallTilesEndingShort) {
  // 192-row tiles whose heads end in a shorter tile (2048 = 10 x 192 + 128), unsplit, no mask.
  EXPECT_TRUE(hopper_rotate_rounds(false, 1, 2048, kHopperTallRows));
  EXPECT_TRUE(hopper_rotate_rounds(false, 1, 4096, kHopperTallRows));   // + 64 rows
  EXPECT_FALSE(hopper_rotate_rounds(false, 1, 1920, kHopperTallRows));  // equal tiles
  EXPECT_FALSE(hopper_rotate_rounds(true, 1, 2048, kHopperTallRows));   // causal: snake
  EXPECT_FALSE(hopper_rotate_rounds(false, 2, 2048, kHopperTallRows));  // split calls
  EXPECT_FALSE(hopper_rotate_rounds(false, 1, 1000, kHopperBaseRows));
  EXPECT_FALSE(hopper_rotate_rounds(false, 1, 1000, kHopperWideRows));
}

TEST(HopperSchedule, BlocksWithoutALastRoundTileStartLater) {
  // 2048 tiles on 132 blocks: 15 full rounds and 68 tiles, so blocks 68-131 run one tile fewer.
  EXPECT_FALSE(hopper_staggered_block(2048, 132, 0));
  EXPECT_FALSE(hopper_staggered_block(2048, 132, 67));
  EXPECT_TRUE(hopper_staggered_block(2048, 132, 68));
  EXPECT_TRUE(hopper_staggered_block(2048, 132, 131));
  // Every round full (or a tail split's main tiles), or one block per tile: nobody waits.
  EXPECT_FALSE(hopper_staggered_block(1980, 132, 131));
  EXPECT_FALSE(hopper_staggered_block(100, 100, 99));
}

// The Hopper tile shapes the schedule tests below hand to the gate's *_for_run functions.
constexpr TileConfig kPingPongTiles{128, 128, 0, 1}, kTallTiles{192, 128, 0, 1},
    kWideTiles{256, 64, 0, 1};

TEST(HopperSchedule, RotatedRoundsReportedOnlyForPersistentHopperLaunches) {
  AttnProblem p = long_sequence_problem();  // d=128
  p.sq = 2048; p.sk = 2048;
  const KernelFamily hopper = KernelFamily::kHopperWgmma;
  EXPECT_TRUE(rotates_rounds_for_run(hopper, p, kTallTiles, 1));
  EXPECT_FALSE(rotates_rounds_for_run(hopper, p, kPingPongTiles, 1));
  EXPECT_FALSE(rotates_rounds_for_run(hopper, p, kTallTiles, 3));
  EXPECT_FALSE(rotates_rounds_for_run(KernelFamily::kPortableMma, p, kTallTiles, 1));
  p.sk = 4097;  // one block per tile: no rounds to walk
  EXPECT_FALSE(rotates_rounds_for_run(hopper, p, kTallTiles, 1));
}

TEST(HopperSchedule, TilesDrawnFromACounterSideBySideAndAtTheRunningMax) {
  AttnProblem p = long_sequence_problem();  // d=128, 4096 keys: persistent
  p.causal = true;
  const KernelFamily hopper = KernelFamily::kHopperWgmma;
  TileConfig ping_pong = kPingPongTiles;
  const TileConfig tall = kTallTiles, wide = kWideTiles;
  EXPECT_TRUE(draws_tiles_from_counter(hopper, p, tall, 1, 132));
  EXPECT_TRUE(draws_tiles_from_counter(hopper, p, wide, 1, 132));
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, ping_pong, 1, 132));
  EXPECT_FALSE(draws_tiles_from_counter(KernelFamily::kPortableMma, p, tall, 1, 132));
  p.sk = 4097;  // longer tiles too (persistent for the counter's sake), and at the running max
  EXPECT_TRUE(draws_tiles_from_counter(hopper, p, tall, 1, 132));
  ping_pong.packs_heads = false;  // a head's rows, as the Hopper tiles of prefill hold
  ping_pong.wgmma = true;
  ASSERT_TRUE(takes_running_max_for_run(hopper, p, ping_pong, 1));
  EXPECT_TRUE(draws_tiles_from_counter(hopper, p, ping_pong, 1, 132));
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, ping_pong, 2, 132));  // split: block max
  p.page_size = 16;  // the producer warpgroup copies these pages a row at a time
  ASSERT_TRUE(takes_running_max_for_run(hopper, p, ping_pong, 1));
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, ping_pong, 1, 132));
  p.page_size = 64;
  EXPECT_TRUE(draws_tiles_from_counter(hopper, p, ping_pong, 1, 132));
  p.page_size = 0;
  p.sq = 1024;  // a chunk: the persistent head-major walk
  ASSERT_TRUE(takes_running_max_for_run(hopper, p, ping_pong, 1));
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, ping_pong, 1, 132));
  p.sq = 4096; p.sk = 4096;
  p.causal = false;  // equal tiles: the static walk
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, tall, 1, 132));
}

TEST(HopperSchedule, D192TilesDrawnFromACounterFrom1024PersistentKeys) {
  AttnProblem p = long_sequence_problem();
  p.d = 192; p.sq = 1024; p.sk = 1024;
  p.causal = true;
  const KernelFamily hopper = KernelFamily::kHopperWgmma;
  TileConfig large{128, hopper_large_head_block_n(192), 0, 1};
  large.packs_heads = false;
  large.wgmma = true;
  EXPECT_TRUE(draws_tiles_from_counter(hopper, p, large, 1, 132));
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, large, 2, 132));  // split
  p.sq = 1023; p.sk = 1023;  // under kHopperLargeHeadDrawnMinKeys: the static rounds
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, large, 1, 132));
  p.sq = 4097; p.sk = 4097;  // a block per tile
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, large, 1, 132));
  p.sq = 4096; p.sk = 4096;
  EXPECT_TRUE(draws_tiles_from_counter(hopper, p, large, 1, 132));
  p.page_size = 64;  // sequences' pages: no drawn instance
  EXPECT_FALSE(draws_tiles_from_counter(hopper, p, large, 1, 132));
}

TEST(HopperSchedule, CarryReportedOnlyForPersistentPingPongTiles) {
  AttnProblem p = long_sequence_problem();  // d=128
  p.sq = 512; p.sk = 512;
  p.causal = true;
  const TileConfig ping_pong = kPingPongTiles, tall = kTallTiles;
  EXPECT_TRUE(carry_across_tiles_for_run(KernelFamily::kHopperWgmma, p, ping_pong, false));
  EXPECT_FALSE(carry_across_tiles_for_run(KernelFamily::kHopperWgmma, p, tall, false));
  EXPECT_FALSE(carry_across_tiles_for_run(KernelFamily::kPortableMma, p, ping_pong, false));
  EXPECT_FALSE(carry_across_tiles_for_run(KernelFamily::kNone, p, ping_pong, false));
  p.causal = false;  // d=128 without the mask: never
  EXPECT_FALSE(carry_across_tiles_for_run(KernelFamily::kHopperWgmma, p, ping_pong, false));
  p.d = 64;
  EXPECT_TRUE(carry_across_tiles_for_run(KernelFamily::kHopperWgmma, p, ping_pong, false));
  EXPECT_FALSE(carry_across_tiles_for_run(KernelFamily::kHopperWgmma, p, ping_pong, true))
      << "tiles drawn from the counter do not carry";
  p.sk = 4097;  // one block per tile: no tile follows another in a block
  EXPECT_FALSE(carry_across_tiles_for_run(KernelFamily::kHopperWgmma, p, ping_pong, false));
}

}  // namespace
}  // namespace flashsplit
