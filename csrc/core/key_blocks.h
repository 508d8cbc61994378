// Which keys a query row sees (the mask rule, once for every kernel family) and which key
// blocks split g of a query tile walks. Header-only and usable from device code.
#pragma once

#include "core/host_device.h"

namespace flashsplit {

// The last key query row `query` sees. Causal masking is bottom-right aligned: query i sees key
// j iff j <= i + sk - sq (a row with a negative limit sees no key). Without the mask: every key.
FS_HOST_DEVICE inline int last_visible_key(int query, int sq, int sk, bool causal) {
  const int causal_limit = query + sk - sq;
  return causal && causal_limit < sk - 1 ? causal_limit : sk - 1;
}

// Whether key block [n0, n0 + block_n) holds a key that some row from first_query on may not
// see (keys past sk, or past a causal limit), so its scores need masking.
FS_HOST_DEVICE inline bool block_needs_mask(int n0, int block_n, int first_query, int sq, int sk,
                                            bool causal) {
  return n0 + block_n > sk || (causal && n0 + block_n - 1 > first_query + sk - sq);
}

// The first key row of the box of `rows` rows that a kernel reading whole boxes (TMA) loads for
// the keys from first_key on, of a sequence of sk keys: first_key, except for a box cut short by
// sk, which ends at the sequence's last key instead (sk - rows; negative where the sequence is
// shorter than a box, rows the load fills with zeros). So no box reads a row past the sequence:
// in a varlen batch that row would be the next sequence's, in a kv cache a slot never written
// (any bits, NaN included, and 0 * NaN is NaN in P V). The box's rows before first_key belong
// to earlier boxes and are masked.
FS_HOST_DEVICE inline int box_start(int first_key, int rows, int sk) {
  return first_key + rows > sk ? sk - rows : first_key;
}
// The same for key block n of block_n keys, loaded as one box.
FS_HOST_DEVICE inline int key_box_start(int n, int block_n, int sk) {
  return box_start(n * block_n, block_n, sk);
}

// The key that column c of key block n's scores stands for where the block is loaded as boxes
// of box_rows rows (a power of two dividing block_n: paged k/v, one box per page), each ending
// no later than the sequence's last key as key_box_start's box does: the key of its box's row
// c % box_rows. A key before its box's own first key (first_of_box) is another box's, or none
// where the box lies past the sequence (its rows then all fall before it), and is masked.
struct BoxedKey {
  int key;           // the key the column holds
  int first_of_box;  // the first key of the box's own rows
};
FS_HOST_DEVICE inline BoxedKey boxed_key(int n0, int c, int box_rows, int sk) {
  const int within = c & (box_rows - 1);
  const int first = n0 + c - within;
  return BoxedKey{box_start(first, box_rows, sk) + within, first};
}

// Paged k/v: the first row, within its page (which starts at key page_start), of the box of
// box_rows rows for the keys from `first` on (first a multiple of box_rows). The box ends by the
// sequence's last key (box_start), so where that cuts it short it starts before its page: the
// loads fill those rows with zeros, as every row of a box that starts past the last key
// (-box_rows: the whole box before its page). boxed_key labels the rows loaded so.
FS_HOST_DEVICE inline int page_box_row(int first, int box_rows, int page_start, int sk) {
  return first < sk ? box_start(first, box_rows, sk) - page_start : -box_rows;
}

struct KeyBlockRange {
  int begin;  // first key block (inclusive)
  int end;    // one past the last; begin == end means this split has no work
};

// Number of key blocks a query tile [m_begin, m_end) can see. Returns 0 when no row of the tile
// sees a key.
FS_HOST_DEVICE constexpr int visible_key_blocks(int m_end, int sq, int sk, int block_n, bool causal) {
  int n_blocks = (sk + block_n - 1) / block_n;
  if (!causal) return n_blocks;
  long long last_key = static_cast<long long>(m_end) - 1 + sk - sq;  // last key row m_end-1 sees
  if (last_key < 0) return 0;
  int visible = static_cast<int>(last_key / block_n) + 1;
  return visible < n_blocks ? visible : n_blocks;
}

// Splits the n_visible key blocks of one tile into num_splits contiguous ranges whose sizes
// differ by at most one; split g gets [g*n/G, (g+1)*n/G). Empty only when n_visible < G.
FS_HOST_DEVICE inline KeyBlockRange split_key_blocks(int n_visible, int num_splits, int g) {
  long long n = n_visible;
  return KeyBlockRange{static_cast<int>(n * g / num_splits),
                       static_cast<int>(n * (g + 1) / num_splits)};
}

}  // namespace flashsplit
