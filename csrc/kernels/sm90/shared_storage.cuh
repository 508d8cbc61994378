// The Hopper forward's shared memory, one struct per tile shape: Q buffers, the K/V ring, the
// output staging, then the mbarriers and the tile ring's slots.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/sm90/hopper_primitives.cuh"
#include "kernels/sm90/kernel_traits.cuh"

namespace flashsplit {
namespace sm90 {

// Swizzled tiles must start on a 1024-byte boundary (TMA's 128-byte swizzle repeats every 8
// rows of 128 B). The dynamic shared memory's start is not that aligned, so the kernel rounds it
// up (SharedView) and the launch asks for this much more than the struct.
constexpr int kSwizzleAlign = 1024;

// Output staging of the direct epilogue, per consumer: D/64 slabs of 64 rows; nothing where
// the rows are stored from registers (Tiles::kStagedOutput).
template <int Bytes>
struct OutputStaging {
  unsigned char bytes[Bytes];
};
template <>
struct OutputStaging<0> {};

// The row table of the 256-row tiles over pages copied a row at a time (FwdKernelTraits::
// kRowTable), per K/V ring stage: where each row of the stage's key block is read from, in K
// and in V (two tables, by the parity of the stage's use), whether the walk goes on (0 at its
// end), and a barrier the locating warp's 32 lanes arrive on once they have written it (12 KB;
// only the tiles of that instance hold it, Tiles::kRowTable).
struct alignas(16) RowSource {
  const unsigned char* k;  // the row's first byte in k (its k/v head); null: no key (zeros)
  const unsigned char* v;  // ... in v
};
template <int Stages, int Rows>
struct RowTable {
  RowSource rows[2][Stages][Rows];  // by the parity of the stage's use
  int walking[Stages];
  uint64_t full[Stages];
};
template <int Stages>
struct RowTable<Stages, 0> {};

template <class Tiles>
struct SharedStorage {
  // Tiles in TMA's 128-byte swizzle: a tile of R rows and D columns is D/64 "slabs" of R x 64
  // elements, one TMA box each. Every tile array is a whole number of 1024-byte atoms, so each
  // starts aligned where the struct does (asserted in shared_storage_bytes); alignas(1024) on
  // them would pad the struct's end, behind the barriers, to 1024 bytes too.
  unsigned char q[Tiles::kQStages][Tiles::kTileBytesQ];  // per Q buffer
  unsigned char k[Tiles::kStages][Tiles::kTileBytesKV];  // per K/V ring stage
  unsigned char v[Tiles::kStages][Tiles::kTileBytesV];
  OutputStaging<Tiles::kStagedOutput ? Tiles::kSlabs * Tiles::kSlabBytesO : 0>
      o[Tiles::kConsumers];
  // mbarriers: a Q buffer's, a ring stage's K and V, the tile ring's (the grouped dynamic walk).
  uint64_t q_full[Tiles::kQStages];
  uint64_t q_empty[Tiles::kQStages];
  uint64_t k_full[Tiles::kStages];
  uint64_t v_full[Tiles::kStages];
  uint64_t k_empty[Tiles::kStages];
  uint64_t v_empty[Tiles::kStages];
  uint64_t tile_full[Tiles::kTileRing];
  uint64_t tile_empty[Tiles::kTileRing];
  int tile_ring[Tiles::kTileRing];  // the tiles drawn, by ring slot
  RowTable<Tiles::kStages, Tiles::kRowTable ? Tiles::kBlockN : 0> row_table;
};

// Dynamic shared memory a block of these tiles asks for: the struct and the alignment slack.
template <class Tiles>
constexpr int shared_storage_bytes() {
  using Storage = SharedStorage<Tiles>;
  static_assert(offsetof(Storage, k) % kSwizzleAlign == 0 &&
                    offsetof(Storage, v) % kSwizzleAlign == 0 &&
                    offsetof(Storage, o) % kSwizzleAlign == 0 &&
                    (!Tiles::kStagedOutput || sizeof(Storage::o[0]) % kSwizzleAlign == 0),
                "swizzled tiles start on 1024-byte boundaries");
  constexpr int bytes = static_cast<int>(sizeof(Storage)) + kSwizzleAlign;
  static_assert(bytes <= 227 * 1024, "shared memory of one block on sm_90");
  return bytes;
}

// The kernel's view of its SharedStorage: the storage's start (the dynamic shared memory from
// its first 1024-byte boundary on) and each member's address as that start plus the member's
// byte offset. (Addressed as members of the struct, the shared addresses come out of the
// compiler in another form and ptxas's code for every kernel changes; as byte offsets it is
// the code the hand-summed offsets gave.)
template <class Tiles>
struct SharedView {
  using Storage = SharedStorage<Tiles>;
  unsigned char* base;

  __device__ __forceinline__ explicit SharedView(unsigned char* smem_raw)
      : base(smem_raw + ((kSwizzleAlign - (smem_u32(smem_raw) & (kSwizzleAlign - 1))) &
                         (kSwizzleAlign - 1))) {}

  // The same view, its start read through a shuffle: ptxas cannot derive the start again from
  // the block's cluster id, so it keeps it in a register. In the ping-pong consumers that takes
  // the address arithmetic of the ring's barriers out of the key-block loop (3-10 instructions
  // per block); the side-by-side consumers keep the plain view (pinned, two of them spilled).
  __device__ __forceinline__ SharedView pinned() const {
    SharedView view = *this;
    const uint32_t start = __shfl_sync(0xffffffffu, smem_u32(base), 0);
    view.base += start - smem_u32(base);
    return view;
  }

  template <class T>
  __device__ __forceinline__ T* at(size_t offset) const {
    return reinterpret_cast<T*>(base + offset);
  }
  // Q buffer b at q() + b * kTileBytesQ; K and V stage s at k() + s * kTileBytesKV and
  // v() + s * kTileBytesV;
  // consumer c's output staging at o() + c * kSlabs * kSlabBytesO.
  __device__ __forceinline__ unsigned char* q() const { return base + offsetof(Storage, q); }
  __device__ __forceinline__ unsigned char* k() const { return base + offsetof(Storage, k); }
  __device__ __forceinline__ unsigned char* v() const { return base + offsetof(Storage, v); }
  __device__ __forceinline__ unsigned char* o() const { return base + offsetof(Storage, o); }
  __device__ __forceinline__ uint64_t* q_full() const {
    return at<uint64_t>(offsetof(Storage, q_full));
  }
  __device__ __forceinline__ uint64_t* q_empty() const {
    return at<uint64_t>(offsetof(Storage, q_empty));
  }
  __device__ __forceinline__ uint64_t* k_full() const {
    return at<uint64_t>(offsetof(Storage, k_full));
  }
  __device__ __forceinline__ uint64_t* v_full() const {
    return at<uint64_t>(offsetof(Storage, v_full));
  }
  __device__ __forceinline__ uint64_t* k_empty() const {
    return at<uint64_t>(offsetof(Storage, k_empty));
  }
  __device__ __forceinline__ uint64_t* v_empty() const {
    return at<uint64_t>(offsetof(Storage, v_empty));
  }
  __device__ __forceinline__ uint64_t* tile_full() const {
    return at<uint64_t>(offsetof(Storage, tile_full));
  }
  __device__ __forceinline__ uint64_t* tile_empty() const {
    return at<uint64_t>(offsetof(Storage, tile_empty));
  }
  __device__ __forceinline__ int* tile_ring() const {
    return at<int>(offsetof(Storage, tile_ring));
  }
  // The row table's (Tiles::kRowTable only): stage s's rows at
  // row_sources() + (parity * kStages + s) * kBlockN, its flag and barrier at row_walking()[s],
  // rows_full()[s].
  __device__ __forceinline__ RowSource* row_sources() const {
    return at<RowSource>(offsetof(Storage, row_table) +
                         offsetof(decltype(Storage::row_table), rows));
  }
  __device__ __forceinline__ int* row_walking() const {
    return at<int>(offsetof(Storage, row_table) +
                   offsetof(decltype(Storage::row_table), walking));
  }
  __device__ __forceinline__ uint64_t* rows_full() const {
    return at<uint64_t>(offsetof(Storage, row_table) +
                        offsetof(decltype(Storage::row_table), full));
  }
};

}  // namespace sm90
}  // namespace flashsplit
