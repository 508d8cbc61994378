// Hopper (sm_90a) building blocks of the warp-specialised forward: mbarriers, cp.async and TMA
// tile loads, wgmma fences and shared-memory matrix descriptors, register reallocation. Only
// sm90/ uses them.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only: nothing here links against the driver)

#include <cstdint>

#include "kernels/platform.h"
#include "kernels/sm90/wgmma_ops.cuh"

namespace flashsplit {
namespace sm90 {

__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// ---- mbarriers: a phase completes when `count` arrivals and all expected bytes have landed.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
}
// Makes initialised barriers visible to the async (TMA) proxy before anyone uses them.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` of TMA traffic the phase must wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// Spins until the phase with this parity has completed. A fresh barrier counts its (virtual)
// previous phase, parity 1, as completed: producers start by waiting on parity 1 of "empty".
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// Returns after at least `ns` nanoseconds of the global timer, sleeping in between.
__device__ __forceinline__ void sleep_at_least_ns(uint32_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(200);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// ---- cp.async: 16 bytes from global into shared memory, zeros where !valid (nothing is read
// then). cp_async_arrive_noinc arrives on `bar` once every earlier cp.async of this thread has
// landed; the barrier's count includes that arrival (noinc).
__device__ __forceinline__ void cp_async_16_zfill(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar))
               : "memory");
}

// ---- TMA: one box of a 4-D tensor map (coordinates innermost first) into shared memory,
// completing on `bar`. Out-of-range rows arrive as zeros and still count as bytes. `policy`
// (l2_evict_*_policy) is the L2 eviction priority of the box's lines.
__device__ __forceinline__ void tma_load_4d(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                            int c0, int c1, int c2, int c3, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
      "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}
// The same for a 5-D map (make_group_tile_map: a tile's rows packing a GQA group's heads).
__device__ __forceinline__ void tma_load_5d(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                            int c0, int c1, int c2, int c3, int c4,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%2, %3, %4, %5, %6}], [%7], %8;\n" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
      "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}
// The reverse: one box from shared memory to global (rows past the map's bounds are not
// written), in this thread's bulk group. The source must stay untouched until
// bulk_wait_group_read says the copy has read it.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, const void* smem_src, int c0,
                                             int c1, int c2, int c3, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group.L2::cache_hint"
      " [%0, {%2, %3, %4, %5}], [%1], %6;\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(smem_u32(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "l"(policy)
      : "memory");
}
// L2 eviction priorities for TMA copies (createpolicy over every line of a copy): evict_first
// for lines used once (they leave first, instead of pushing out lines still to be read),
// evict_last for lines several thread blocks read.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t l2_evict_normal_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t l2_evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until at most Pending of this thread's bulk groups still read shared memory.
template <int Pending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}
// Waits until at most Pending of this thread's bulk groups are unfinished (writes done).
template <int Pending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(Pending) : "memory");
}
// Makes this thread's ordinary shared-memory writes visible to the async proxy (TMA).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Four 8x8 matrices of 16-bit elements from a warp's registers to shared memory (stmatrix):
// lanes 8i..8i+7 give the addresses of matrix i's rows (16 contiguous bytes each), and lane l
// holds in register i row l / 4, columns 2 (l % 4) and + 1 of matrix i: mma's C fragment.
__device__ __forceinline__ void stmatrix_x4(uint32_t row_addr, uint32_t m0, uint32_t m1,
                                            uint32_t m2, uint32_t m3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(row_addr),
               "r"(m0), "r"(m1), "r"(m2), "r"(m3)
               : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- wgmma ordering.
// Before the first wgmma that reads registers written by ordinary instructions.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most Pending committed wgmma groups of this warpgroup are in flight.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}
// The compiler sees a wgmma's outputs as written when it is issued; this re-defines them after
// the wait so no read of an accumulator can be scheduled before the MMA has finished.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&regs)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(regs[i])::"memory");
}
// Likewise for a wgmma's A fragment in registers: this re-defines it after the wait, so a later
// read of the fragment cannot be scheduled before the MMA has finished. (It emits no instruction:
// it does not by itself keep the registers from other values; see FwdConsumer::take_next_p.)
template <int M, int N>
__device__ __forceinline__ void fence_operands(uint32_t (&regs)[M][N]) {
#pragma unroll
  for (int i = 0; i < M; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) asm volatile("" : "+r"(regs[i][j])::"memory");
}

// ---- Register reallocation between warpgroups (setmaxnreg): the TMA warpgroup gives registers
// back so the MMA warpgroups can hold S, P and O without spilling.
template <int Regs>
__device__ __forceinline__ void release_registers() {
#if FS_HAS_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
#endif
}
template <int Regs>
__device__ __forceinline__ void claim_registers() {
#if FS_HAS_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
#endif
}

// Barrier among a subset of warps (ids 1..15; 0 is __syncthreads): sync waits until `threads`
// threads have arrived (its own warps included); arrive counts the caller's warps and goes on.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Waits like named_barrier_sync and returns whether `pred` held in any of the `threads`
// threads (bar.red.or): one vote for a warpgroup, whose wgmma all four warps must issue alike.
__device__ __forceinline__ bool named_barrier_any(int id, int threads, bool pred) {
  uint32_t any;
  asm volatile(
      "{\n.reg .pred q, a;\nsetp.ne.u32 q, %1, 0;\nbar.red.or.pred a, %2, %3, q;\n"
      "selp.u32 %0, 1, 0, a;\n}\n"
      : "=r"(any)
      : "r"(static_cast<uint32_t>(pred)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}

// ---- Shared-memory matrix descriptors for tiles stored as TMA's swizzle writes them: slabs of
// rows of RowBytes (128: 64 16-bit elements with the 128-byte swizzle; 64: 32 elements with the
// 64-byte swizzle), 8-row atoms, atoms aligned to their size.
// Bits: [0,14) start address >> 4, [16,30) leading byte offset >> 4, [32,46) stride byte
// offset >> 4, [62,64) layout (1 = 128-byte swizzle, 2 = 64-byte swizzle).
template <int RowBytes>
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t leading_bytes,
                                              uint32_t stride_bytes) {
  static_assert(RowBytes == 128 || RowBytes == 64, "128- and 64-byte swizzled slabs");
  constexpr uint64_t kLayout = RowBytes == 128 ? 1 : 2;
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32) | (kLayout << 62);
}
// K-major operand (the reduction dim is the contiguous one: Q and K rows). A k16 step moves the
// start address 32 B within the row; the leading offset is unused for this layout; the next 8
// rows are 8 * RowBytes further on.
template <int RowBytes>
__device__ __forceinline__ uint64_t desc_k_major(uint32_t addr) {
  return smem_desc<RowBytes>(addr, 16, 8 * RowBytes);
}
// K-major descriptors differ only in their low word (the start address). The consumers keep
// that word alone and add the high word where they issue the wgmma, so the compiler sees it as
// the constant it is (with a whole descriptor kept, ptxas copied its high word into a fresh
// register at every k-step).
template <int RowBytes>
__device__ __forceinline__ uint32_t desc_k_major_low(uint32_t addr) {
  return static_cast<uint32_t>(desc_k_major<RowBytes>(addr));
}
// The K-major descriptor whose low word is `low`, of the operand `bytes` (a multiple of 16)
// further on in shared memory (the address stays below 2^14 * 16 B, so nothing carries).
template <int RowBytes>
__device__ __forceinline__ uint64_t desc_k_major_at(uint32_t low, uint32_t bytes) {
  return (desc_k_major<RowBytes>(0) & 0xFFFFFFFF00000000ull) | (low + (bytes >> 4));
}
// MN-major operand (V: rows are keys = the reduction dim, columns contiguous): the next slab of
// columns lives `slab_bytes` further on; the next 8 keys 8 * RowBytes further on.
template <int RowBytes>
__device__ __forceinline__ uint64_t desc_mn_major(uint32_t addr, uint32_t slab_bytes) {
  return smem_desc<RowBytes>(addr, slab_bytes, 8 * RowBytes);
}
// The MN-major descriptor whose low word (start address and leading offset) is `low`, of the
// operand `bytes` (a multiple of 16) further on, as desc_k_major_at.
template <int RowBytes>
__device__ __forceinline__ uint64_t desc_mn_major_at(uint32_t low, uint32_t slab_bytes,
                                                     uint32_t bytes) {
  return (desc_mn_major<RowBytes>(0, slab_bytes) & 0xFFFFFFFF00000000ull) | (low + (bytes >> 4));
}

// Transposes the 4 x 4 matrix of 32-bit words a quad's lanes hold a row of each: lane q's
// x[k] becomes lane k's x[q]. The 2 x 2 blocks off the diagonal swap between lanes q and q ^ 2,
// then the words off each block's diagonal between lanes q and q ^ 1: two shuffles each. Every
// lane of the warp takes part.
__device__ __forceinline__ void quad_transpose(uint32_t (&x)[4], int quad_col) {
  const bool upper = quad_col & 2;
  uint32_t a = __shfl_xor_sync(0xffffffffu, upper ? x[0] : x[2], 2);
  uint32_t b = __shfl_xor_sync(0xffffffffu, upper ? x[1] : x[3], 2);
  if (upper) {
    x[0] = a, x[1] = b;
  } else {
    x[2] = a, x[3] = b;
  }
  const bool odd = quad_col & 1;
  a = __shfl_xor_sync(0xffffffffu, odd ? x[0] : x[1], 1);
  b = __shfl_xor_sync(0xffffffffu, odd ? x[2] : x[3], 1);
  if (odd) {
    x[0] = a, x[2] = b;
  } else {
    x[1] = a, x[3] = b;
  }
}

}  // namespace sm90
}  // namespace flashsplit
