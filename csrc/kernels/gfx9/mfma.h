// One MFMA of the gfx9 policy (HIP device code): D = acc + A B for a wave, each lane passing its
// registers as mfma_layout.h lays them out (A: mfma_a, B: mfma_b, accumulators: mfma_acc).
#pragma once

#include <type_traits>

#include "kernels/gfx9/mfma_layout.h"
#include "kernels/platform.h"

namespace flashsplit {
namespace gfx9 {

// A lane's operand: k_per_lane 16-bit values as raw bits (bf16 or f16 alike), and its fp32
// accumulators.
template <int n>
using Bits16x = unsigned short __attribute__((ext_vector_type(n)));
template <int n>
using Floatx = float __attribute__((ext_vector_type(n)));
template <Mfma op>
using MfmaOperand = Bits16x<mfma_shape(op).k_per_lane>;
template <Mfma op>
using MfmaAcc = Floatx<mfma_shape(op).acc_regs>;

template <Mfma>
constexpr bool kAlwaysFalse = false;

// Elem is gpu_bf16_t or gpu_fp16_t. The operands are reinterpreted as whole vectors: clang 19
// and 22 give element 0 for a bit cast of one element of an ext_vector_type value, so code that
// builds an operand element by element casts a copied scalar, never v[i].
template <Mfma op, class Elem>
__device__ __forceinline__ MfmaAcc<op> mfma(MfmaOperand<op> a, MfmaOperand<op> b, MfmaAcc<op> acc) {
  static_assert(std::is_same<Elem, gpu_bf16_t>::value || std::is_same<Elem, gpu_fp16_t>::value,
                "MFMA inputs are bf16 or f16");
  constexpr bool kBf16 = std::is_same<Elem, gpu_bf16_t>::value;
  typedef short Short4 __attribute__((ext_vector_type(4)));
  typedef _Float16 Half4 __attribute__((ext_vector_type(4)));
  // The bf16 builtins of the 4-element forms keep gfx90a's *_1k names; gfx942 and gfx950 emit
  // v_mfma_f32_*_bf16 for them.
  if constexpr (op == Mfma::k32x32x8 && kBf16) {
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(__builtin_bit_cast(Short4, a),
                                                    __builtin_bit_cast(Short4, b), acc, 0, 0, 0);
  } else if constexpr (op == Mfma::k32x32x8) {
    return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(Half4, a),
                                                __builtin_bit_cast(Half4, b), acc, 0, 0, 0);
  } else if constexpr (op == Mfma::k16x16x16 && kBf16) {
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(Short4, a),
                                                     __builtin_bit_cast(Short4, b), acc, 0, 0, 0);
  } else if constexpr (op == Mfma::k16x16x16) {
    return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(Half4, a),
                                                 __builtin_bit_cast(Half4, b), acc, 0, 0, 0);
  } else {
#if defined(__gfx950__)
    typedef __bf16 Bf16x8 __attribute__((ext_vector_type(8)));
    typedef _Float16 Half8 __attribute__((ext_vector_type(8)));
    if constexpr (op == Mfma::k16x16x32 && kBf16) {
      return __builtin_amdgcn_mfma_f32_16x16x32_bf16(__builtin_bit_cast(Bf16x8, a),
                                                     __builtin_bit_cast(Bf16x8, b), acc, 0, 0, 0);
    } else if constexpr (op == Mfma::k16x16x32) {
      return __builtin_amdgcn_mfma_f32_16x16x32_f16(__builtin_bit_cast(Half8, a),
                                                    __builtin_bit_cast(Half8, b), acc, 0, 0, 0);
    } else if constexpr (kBf16) {
      return __builtin_amdgcn_mfma_f32_32x32x16_bf16(__builtin_bit_cast(Bf16x8, a),
                                                     __builtin_bit_cast(Bf16x8, b), acc, 0, 0, 0);
    } else {
      return __builtin_amdgcn_mfma_f32_32x32x16_f16(__builtin_bit_cast(Half8, a),
                                                    __builtin_bit_cast(Half8, b), acc, 0, 0, 0);
    }
#elif defined(__HIP_DEVICE_COMPILE__)
    static_assert(kAlwaysFalse<op>, "k16x16x32 and k32x32x16 exist on gfx950 only");
    return acc;
#else
    (void)a, (void)b;
    return acc;  // the host side of a HIP build parses device code but never runs it
#endif
  }
}

}  // namespace gfx9
}  // namespace flashsplit
