// wgmma (sm_90a warpgroup MMA) instructions flashsplit's Hopper forward issues, one function per
// shape and element type. Accumulators are fp32 registers in the m64nNk16 fragment layout:
// register 4j+e of a thread (lane l of warp w in the warpgroup) holds row 16w + l/4 + 8*(e/2),
// column 8j + 2*(l%4) + e%2, which is mma.sync's m16n8 C layout repeated over N/8 column tiles.
//
// Each instruction is asynchronous: the caller brackets a batch with wgmma_fence() before and
// wgmma_commit() + wgmma_wait<N>() after, then fences the accumulator registers
// (fence_accumulators) so the compiler cannot read them before the wait.
//
// Each operand form (A in shared memory or in registers) is written once as a macro, stamped per
// N (64 to 256 columns of D) and element type (the bfloat16 and float16 forms differ only in
// the type named in the instruction).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/platform.h"

namespace flashsplit {
namespace sm90 {

// The asm bodies exist only where the target has wgmma (sm_90a); other passes of a multi-arch
// build see empty functions, and the gate never routes a call there.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FS_HAS_WGMMA 1
#define FS_WGMMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define FS_HAS_WGMMA 0
#define FS_WGMMA_ASM(...) \
  do {                    \
  } while (0)
#endif

#define FS_WGMMA_ACC32(d) \
  "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]), "+f"((d)[4]), "+f"((d)[5]), "+f"((d)[6]), "+f"((d)[7]), \
  "+f"((d)[8]), "+f"((d)[9]), "+f"((d)[10]), "+f"((d)[11]), "+f"((d)[12]), "+f"((d)[13]), "+f"((d)[14]), "+f"((d)[15]), \
  "+f"((d)[16]), "+f"((d)[17]), "+f"((d)[18]), "+f"((d)[19]), "+f"((d)[20]), "+f"((d)[21]), "+f"((d)[22]), "+f"((d)[23]), \
  "+f"((d)[24]), "+f"((d)[25]), "+f"((d)[26]), "+f"((d)[27]), "+f"((d)[28]), "+f"((d)[29]), "+f"((d)[30]), "+f"((d)[31])

#define FS_WGMMA_ACC40(d) \
  FS_WGMMA_ACC32(d), \
  "+f"((d)[32]), "+f"((d)[33]), "+f"((d)[34]), "+f"((d)[35]), "+f"((d)[36]), "+f"((d)[37]), "+f"((d)[38]), "+f"((d)[39])

#define FS_WGMMA_ACC48(d) \
  FS_WGMMA_ACC40(d), \
  "+f"((d)[40]), "+f"((d)[41]), "+f"((d)[42]), "+f"((d)[43]), "+f"((d)[44]), "+f"((d)[45]), "+f"((d)[46]), "+f"((d)[47])

#define FS_WGMMA_ACC56(d) \
  FS_WGMMA_ACC40(d), \
  "+f"((d)[40]), "+f"((d)[41]), "+f"((d)[42]), "+f"((d)[43]), "+f"((d)[44]), "+f"((d)[45]), "+f"((d)[46]), "+f"((d)[47]), \
  "+f"((d)[48]), "+f"((d)[49]), "+f"((d)[50]), "+f"((d)[51]), "+f"((d)[52]), "+f"((d)[53]), "+f"((d)[54]), "+f"((d)[55])

#define FS_WGMMA_ACC64(d) \
  FS_WGMMA_ACC32(d), \
  "+f"((d)[32]), "+f"((d)[33]), "+f"((d)[34]), "+f"((d)[35]), "+f"((d)[36]), "+f"((d)[37]), "+f"((d)[38]), "+f"((d)[39]), \
  "+f"((d)[40]), "+f"((d)[41]), "+f"((d)[42]), "+f"((d)[43]), "+f"((d)[44]), "+f"((d)[45]), "+f"((d)[46]), "+f"((d)[47]), \
  "+f"((d)[48]), "+f"((d)[49]), "+f"((d)[50]), "+f"((d)[51]), "+f"((d)[52]), "+f"((d)[53]), "+f"((d)[54]), "+f"((d)[55]), \
  "+f"((d)[56]), "+f"((d)[57]), "+f"((d)[58]), "+f"((d)[59]), "+f"((d)[60]), "+f"((d)[61]), "+f"((d)[62]), "+f"((d)[63])

#define FS_WGMMA_ACC72(d) \
  FS_WGMMA_ACC64(d), \
  "+f"((d)[64]), "+f"((d)[65]), "+f"((d)[66]), "+f"((d)[67]), "+f"((d)[68]), "+f"((d)[69]), "+f"((d)[70]), "+f"((d)[71])

#define FS_WGMMA_ACC96(d) \
  FS_WGMMA_ACC64(d), \
  "+f"((d)[64]), "+f"((d)[65]), "+f"((d)[66]), "+f"((d)[67]), "+f"((d)[68]), "+f"((d)[69]), "+f"((d)[70]), "+f"((d)[71]), \
  "+f"((d)[72]), "+f"((d)[73]), "+f"((d)[74]), "+f"((d)[75]), "+f"((d)[76]), "+f"((d)[77]), "+f"((d)[78]), "+f"((d)[79]), \
  "+f"((d)[80]), "+f"((d)[81]), "+f"((d)[82]), "+f"((d)[83]), "+f"((d)[84]), "+f"((d)[85]), "+f"((d)[86]), "+f"((d)[87]), \
  "+f"((d)[88]), "+f"((d)[89]), "+f"((d)[90]), "+f"((d)[91]), "+f"((d)[92]), "+f"((d)[93]), "+f"((d)[94]), "+f"((d)[95])

#define FS_WGMMA_ACC128(d) \
  FS_WGMMA_ACC96(d), \
  "+f"((d)[96]), "+f"((d)[97]), "+f"((d)[98]), "+f"((d)[99]), "+f"((d)[100]), "+f"((d)[101]), "+f"((d)[102]), "+f"((d)[103]), \
  "+f"((d)[104]), "+f"((d)[105]), "+f"((d)[106]), "+f"((d)[107]), "+f"((d)[108]), "+f"((d)[109]), "+f"((d)[110]), "+f"((d)[111]), \
  "+f"((d)[112]), "+f"((d)[113]), "+f"((d)[114]), "+f"((d)[115]), "+f"((d)[116]), "+f"((d)[117]), "+f"((d)[118]), "+f"((d)[119]), \
  "+f"((d)[120]), "+f"((d)[121]), "+f"((d)[122]), "+f"((d)[123]), "+f"((d)[124]), "+f"((d)[125]), "+f"((d)[126]), "+f"((d)[127])

// The accumulator operands of an m64nN wgmma, "{%0, ..., %(N/2 - 1)}": 32 at N = 64 up to 128
// at N = 256; the instruction's other operands are numbered after them.
#define FS_WGMMA_D32_BODY \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FS_WGMMA_D32 "{" FS_WGMMA_D32_BODY "}"
#define FS_WGMMA_D40 "{" FS_WGMMA_D32_BODY ", %32, %33, %34, %35, %36, %37, %38, %39}"
#define FS_WGMMA_D48 \
  "{" FS_WGMMA_D32_BODY ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define FS_WGMMA_D56 \
  "{" FS_WGMMA_D32_BODY ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55}"
#define FS_WGMMA_D64_BODY \
  FS_WGMMA_D32_BODY ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FS_WGMMA_D64 "{" FS_WGMMA_D64_BODY "}"
#define FS_WGMMA_D72 "{" FS_WGMMA_D64_BODY ", %64, %65, %66, %67, %68, %69, %70, %71}"
#define FS_WGMMA_D96_BODY \
  FS_WGMMA_D64_BODY ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define FS_WGMMA_D96 "{" FS_WGMMA_D96_BODY "}"
#define FS_WGMMA_D128 \
  "{" FS_WGMMA_D96_BODY ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// D[64 x N] (+)= A[64 x 16] * B[16 x N]; A and B both K-major in shared memory. scale_d == 0
// overwrites D instead of accumulating. DESCS and SCALE are the operand numbers after D's.
#define FS_DEFINE_WGMMA_SS(N, REGS, DLIST, ACC, DESCS, SCALE, SUFFIX, TY)                     \
  __device__ __forceinline__ void wgmma_m64n##N##k16_ss_##SUFFIX(float (&d)[REGS],          \
                                                                 uint64_t desc_a,            \
                                                                 uint64_t desc_b, int scale_d) { \
    FS_WGMMA_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " \
                 DLIST ", " DESCS ", p, 1, 1, 0, 0;\n}\n" \
                 : ACC(d) \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d)); \
  }

// D[64 x N] (+)= A[64 x 16] * B[16 x N]; A from registers (per warp, the m16k16 fragment of
// mma.sync), B MN-major (transposed) in shared memory. scale_d == 0 overwrites D.
#define FS_DEFINE_WGMMA_RS(N, REGS, DLIST, ACC, AB, SCALE, SUFFIX, TY)                        \
  __device__ __forceinline__ void wgmma_m64n##N##k16_rs_##SUFFIX(                            \
      float (&d)[REGS], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {             \
    FS_WGMMA_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " \
                 DLIST ", " AB ", p, 1, 1, 1;\n}\n" \
                 : ACC(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)); \
  }

FS_DEFINE_WGMMA_SS(128, 64, FS_WGMMA_D64, FS_WGMMA_ACC64, "%64, %65", "%66", bf16, "bf16")
FS_DEFINE_WGMMA_SS(128, 64, FS_WGMMA_D64, FS_WGMMA_ACC64, "%64, %65", "%66", f16, "f16")
FS_DEFINE_WGMMA_SS(64, 32, FS_WGMMA_D32, FS_WGMMA_ACC32, "%32, %33", "%34", bf16, "bf16")
FS_DEFINE_WGMMA_SS(64, 32, FS_WGMMA_D32, FS_WGMMA_ACC32, "%32, %33", "%34", f16, "f16")
FS_DEFINE_WGMMA_SS(112, 56, FS_WGMMA_D56, FS_WGMMA_ACC56, "%56, %57", "%58", bf16, "bf16")
FS_DEFINE_WGMMA_SS(112, 56, FS_WGMMA_D56, FS_WGMMA_ACC56, "%56, %57", "%58", f16, "f16")
FS_DEFINE_WGMMA_SS(80, 40, FS_WGMMA_D40, FS_WGMMA_ACC40, "%40, %41", "%42", bf16, "bf16")
FS_DEFINE_WGMMA_SS(80, 40, FS_WGMMA_D40, FS_WGMMA_ACC40, "%40, %41", "%42", f16, "f16")
FS_DEFINE_WGMMA_SS(144, 72, FS_WGMMA_D72, FS_WGMMA_ACC72, "%72, %73", "%74", bf16, "bf16")
FS_DEFINE_WGMMA_SS(144, 72, FS_WGMMA_D72, FS_WGMMA_ACC72, "%72, %73", "%74", f16, "f16")
FS_DEFINE_WGMMA_RS(64, 32, FS_WGMMA_D32, FS_WGMMA_ACC32, "{%32, %33, %34, %35}, %36", "%37",
                   bf16, "bf16")
FS_DEFINE_WGMMA_RS(64, 32, FS_WGMMA_D32, FS_WGMMA_ACC32, "{%32, %33, %34, %35}, %36", "%37",
                   f16, "f16")
FS_DEFINE_WGMMA_RS(96, 48, FS_WGMMA_D48, FS_WGMMA_ACC48, "{%48, %49, %50, %51}, %52", "%53",
                   bf16, "bf16")
FS_DEFINE_WGMMA_RS(96, 48, FS_WGMMA_D48, FS_WGMMA_ACC48, "{%48, %49, %50, %51}, %52", "%53",
                   f16, "f16")
FS_DEFINE_WGMMA_RS(128, 64, FS_WGMMA_D64, FS_WGMMA_ACC64, "{%64, %65, %66, %67}, %68", "%69",
                   bf16, "bf16")
FS_DEFINE_WGMMA_RS(128, 64, FS_WGMMA_D64, FS_WGMMA_ACC64, "{%64, %65, %66, %67}, %68", "%69",
                   f16, "f16")
FS_DEFINE_WGMMA_RS(192, 96, FS_WGMMA_D96, FS_WGMMA_ACC96, "{%96, %97, %98, %99}, %100", "%101",
                   bf16, "bf16")
FS_DEFINE_WGMMA_RS(192, 96, FS_WGMMA_D96, FS_WGMMA_ACC96, "{%96, %97, %98, %99}, %100", "%101",
                   f16, "f16")
FS_DEFINE_WGMMA_RS(256, 128, FS_WGMMA_D128, FS_WGMMA_ACC128, "{%128, %129, %130, %131}, %132",
                   "%133", bf16, "bf16")
FS_DEFINE_WGMMA_RS(256, 128, FS_WGMMA_D128, FS_WGMMA_ACC128, "{%128, %129, %130, %131}, %132",
                   "%133", f16, "f16")

// The two GEMMs of the forward by element type: S = Q K^T over one key block of 144, 128, 112,
// 80 or 64 keys (S of BN / 2 registers), and O += P V with O of D columns.
template <class Elem, int N>
__device__ __forceinline__ void wgmma_qk(float (&s)[N], uint64_t desc_q, uint64_t desc_k,
                                         int scale_d) {
  static_assert(N == 72 || N == 64 || N == 56 || N == 40 || N == 32,
                "wgmma_qk is instantiated for 144-, 128-, 112-, 80- and 64-key blocks");
  constexpr bool kBf16 = std::is_same<Elem, gpu_bf16_t>::value;
  if constexpr (N == 72) {
    kBf16 ? wgmma_m64n144k16_ss_bf16(s, desc_q, desc_k, scale_d)
          : wgmma_m64n144k16_ss_f16(s, desc_q, desc_k, scale_d);
  } else if constexpr (N == 64) {
    kBf16 ? wgmma_m64n128k16_ss_bf16(s, desc_q, desc_k, scale_d)
          : wgmma_m64n128k16_ss_f16(s, desc_q, desc_k, scale_d);
  } else if constexpr (N == 56) {
    kBf16 ? wgmma_m64n112k16_ss_bf16(s, desc_q, desc_k, scale_d)
          : wgmma_m64n112k16_ss_f16(s, desc_q, desc_k, scale_d);
  } else if constexpr (N == 40) {
    kBf16 ? wgmma_m64n80k16_ss_bf16(s, desc_q, desc_k, scale_d)
          : wgmma_m64n80k16_ss_f16(s, desc_q, desc_k, scale_d);
  } else {
    kBf16 ? wgmma_m64n64k16_ss_bf16(s, desc_q, desc_k, scale_d)
          : wgmma_m64n64k16_ss_f16(s, desc_q, desc_k, scale_d);
  }
}

template <class Elem, int D>
__device__ __forceinline__ void wgmma_pv(float (&o)[D / 2], const uint32_t (&p)[4],
                                         uint64_t desc_v, int scale_d) {
  static_assert(D == 64 || D == 96 || D == 128 || D == 192 || D == 256,
                "wgmma_pv is instantiated for head dims 64, 96, 128, 192 and 256");
  constexpr bool kBf16 = std::is_same<Elem, gpu_bf16_t>::value;
  if constexpr (D == 64) {
    kBf16 ? wgmma_m64n64k16_rs_bf16(o, p, desc_v, scale_d) : wgmma_m64n64k16_rs_f16(o, p, desc_v, scale_d);
  } else if constexpr (D == 96) {
    kBf16 ? wgmma_m64n96k16_rs_bf16(o, p, desc_v, scale_d) : wgmma_m64n96k16_rs_f16(o, p, desc_v, scale_d);
  } else if constexpr (D == 128) {
    kBf16 ? wgmma_m64n128k16_rs_bf16(o, p, desc_v, scale_d)
          : wgmma_m64n128k16_rs_f16(o, p, desc_v, scale_d);
  } else if constexpr (D == 192) {
    kBf16 ? wgmma_m64n192k16_rs_bf16(o, p, desc_v, scale_d)
          : wgmma_m64n192k16_rs_f16(o, p, desc_v, scale_d);
  } else {
    kBf16 ? wgmma_m64n256k16_rs_bf16(o, p, desc_v, scale_d)
          : wgmma_m64n256k16_rs_f16(o, p, desc_v, scale_d);
  }
}

}  // namespace sm90
}  // namespace flashsplit
