// The Hopper kernel's tiling rules: tile heights, persistence, carry, round rotation, the start
// stagger and the automatic splits of prefill. The plan (core/plan.cpp) applies them once
// per call; the kernels receive the outcome. docs/design.md has the measurements behind each rule.
#pragma once

#include "core/host_device.h"
#include "core/tile_order.h"
#include "core/tiles.h"

namespace flashsplit {

// Keys per block of the Hopper kernel (64 on wide tiles, kHopperWideBlockN).
constexpr int kHopperBlockN = 128;

// Whether the Hopper kernel runs persistent (one block per SM walking the tiles, the next
// tile's loads overlapping the current tile's epilogue) or one block per tile. Persistent pays
// where tiles are short, and on tiles of equal work (hopper_persistent_unmasked); on long
// causal tiles a static assignment drifts out of step and the K/V of many heads crowd L2, so
// long causal tiles use the hardware's block scheduling, except causal tiles of consumers side
// by side and the long causal ping-pong tiles at the running max, which draw their tiles from a
// counter in the grouped order at any length (draws_tiles_from_counter in core/plan.cpp).
constexpr int kHopperPersistentMaxKeyBlocks = 32;
// The key blocks of kHopperBlockN keys sk keys take.
constexpr long long hopper_key_blocks(long long sk) {
  return (sk + kHopperBlockN - 1) / kHopperBlockN;
}
constexpr bool hopper_persistent(long long sk) {
  return hopper_key_blocks(sk) <= kHopperPersistentMaxKeyBlocks;
}

// Causal chunks of queries against at least four times as many keys (chunked prefill) run
// persistent whatever their length: their tiles differ little in length, and overlapping a
// tile's loads with the previous tile's epilogue pays (measured +0.8-4% on 128-row tiles at
// 6k-16k keys, none slower; 192-row tiles unchanged). Their carry stays with hopper_persistent
// (causal tiles side by side draw from a counter at any length: draws_tiles_from_counter in
// core/plan.cpp).
constexpr bool hopper_persistent_chunk(long long sq, long long sk, bool causal) {
  return causal && 4 * sq <= sk;
}

// Whether persistent 128-row ping-pong tiles issue a tile's first S = Q K^T together with the
// previous tile's last P V. At d=128 without the mask the next tile's Q and K must land before
// the last P V can start, which costs more than the overlap gains; with the mask (tiles walk
// their blocks first to last) and at d=64 it pays. d=192 and 256 tiles have one Q buffer, so the
// next tile's Q cannot land before the last S = Q K^T: they do not carry.
constexpr bool hopper_carry_across_tiles(int head_dim, bool causal) {
  return head_dim == 128 ? causal : head_dim < 128;
}

// Whether causal 128-row ping-pong tiles take each key block's probabilities at the row's
// running max (OnlineSoftmax::at_running_max), as tiles without the mask do, instead of taking
// the block's max first: over more than kHopperPersistentMaxKeyBlocks key blocks, where most
// of a tile's blocks are neither its first nor masked, and at d=128 over more than
// kHopperRunningMaxMinKeyBlocksD128. Measured on an H100 on 4-8 heads of 8k keys and on chunks
// of 512-2048 queries against 6k-16k keys: 5.5-7% faster at d=64, 9-10% at d=96, 6-10% at
// d=128; on short tiles, most of whose blocks are their first or masked, 3-4% slower (512
// rows). Since the d=128 tiles take P in place around the P V's wait, they gain from 1024 keys
// on (H200, against the block max on the same tiles and walk: 1.5% on 256 heads of 1024 rows,
// 4-5% at 2048, 6% at 4096), not at 512 (1% slower). Unsplit calls run it, dense or of
// sequences of their own lengths (varlen, kv cache) whose key blocks load as TMA boxes or are
// copied a row at a time (hopper_running_max_copies_rows), as instances of their own
// (LaunchPlan::running_max, takes_running_max_for_run). Sequences of their own lengths keep
// the block max over at most kHopperPersistentMaxKeyBlocks key blocks at d=128 too: their walk
// and height follow their longest sequence, and varlen sequences of 388-1165 tokens (32 / 8
// heads, H200) ran 0.91x FlashAttention-3's speed on the running-max tiles in static rounds
// against 1.12x on the 192-row tiles.
constexpr int kHopperRunningMaxMinKeyBlocksD128 = 4;
constexpr bool hopper_causal_running_max(int head_dim, bool causal, long long sk,
                                         bool sequences = false) {
  return causal && head_dim <= 128 &&
         hopper_key_blocks(sk) > (head_dim == 128 && !sequences ? kHopperRunningMaxMinKeyBlocksD128
                                                     : kHopperPersistentMaxKeyBlocks);
}

// Whether those tiles have an instance over pages copied a row at a time: at d=128, where
// chunked prefill over pages of 16 runs 5-6% faster on it (H200). At d=64 chunks run the
// 256-row tiles, so the 128-row ones copy pages for few calls, which keep the block max.
constexpr bool hopper_running_max_copies_rows(int head_dim) { return head_dim == 128; }

// Rows per block of the Hopper kernel: 128 (two consumer warpgroups in ping-pong), 192 (three
// side by side: faster per row, coarser steps over the SMs) and, for unsplit d=64 calls, 256
// (four consumers over 64-key blocks: at 128 keys a consumer would need more registers than a
// block of five warpgroups holds), with the causal mask only below kHopperTallMinSq rows.
constexpr int kHopperBaseRows = 128;
constexpr int kHopperTallRows = 192;
constexpr int kHopperWideRows = 256;
constexpr int kHopperWideBlockN = 64;

// Calls without the mask run persistent whatever their length too: their tiles, or a split's
// pieces, are of equal work, so the static rounds stay in step, and the next tile's loads
// overlap the current tile's epilogue instead of waiting for a new block to start. Over a block
// per tile, unsplit: +2.3-3.5% just past 32 key blocks (d=64 6000, d=96 4500, d=128 5000 keys),
// +1.1-2% at 8k keys at every head dim, +0.3-1.7% at 16k, -0.5% to +0.9% at 32k; split calls of
// more pieces than SMs on 128-row tiles +0.6-3.9% (18 shapes, d=64 to 256), while the 192-row
// pieces of d=64's split calls ran 0.7-7.5% slower persistent and keep a block each (H200,
// alternated in one process). Tiles whose work differs by sequence (varlen and kv-cache lengths,
// multi-token decode packing a GQA group's heads) keep the hardware's scheduling: varlen calls
// of lengths s/2 to 3s/2 ran 0.1-20% slower persistent, the static rounds out of step (d=64 and
// 128, 4096-16384 tokens a sequence on average). Varlen calls of equal lengths walk as dense
// ones: unsplit +0.7-2.7% on 1-8 sequences of 6000-16384 tokens (even, within 1.1%, on calls of
// 8192 tiles), split on 128-row tiles +2.6-3.4%, outputs bitwise the same.
constexpr bool hopper_persistent_unmasked(bool causal, int num_splits, int block_m,
                                          bool differ_by_sequence) {
  return !causal && !differ_by_sequence && (num_splits == 1 || block_m == kHopperBaseRows);
}

// Whether those tiles, on a persistent launch (at most kHopperPersistentMaxKeyBlocks key
// blocks), walk the static snake rounds, which carry S across tiles (hopper_carry_across_tiles),
// instead of drawing their tiles from the counter longest first: over at most
// kHopperStaticCausalMaxKeyBlocks key blocks, where the rounds end within
// kHopperStaticCausalSlackPct of longest first in the model (causal_static_walk_time). There
// the carry and the walk without the draw ran 0.997-1.08x the counter's speed (12 grids of
// 256-8192 tiles of 7-16 key blocks, H200); over more key blocks the counter ran from 0.7%
// slower to 1.9% faster (6 grids of 1024-4096 tiles), and where the rounds do not even out it
// is far ahead (1.03-1.32x on 8 grids of 384-2688 tiles modelled 9-50% after longest first).
constexpr int kHopperStaticCausalMaxKeyBlocks = 16;
constexpr int kHopperStaticCausalSlackPct = 4;
// Whether the static rounds of `units` causal 128-row tiles over blocks of block_n keys end
// within slack_pct of longest first on sm_count SMs in the model (causal_static_walk_time,
// causal_longest_first_time): the rule of each tile family that may draw from the counter.
constexpr bool hopper_causal_rounds_within(long long units, long long sq, long long sk,
                                           int block_n, int sm_count, int slack_pct) {
  const double rounds =
      causal_static_walk_time(units, sq, sk, kHopperBaseRows, block_n, sm_count);
  const double longest_first =
      causal_longest_first_time(units, sq, sk, kHopperBaseRows, block_n, 100, sm_count);
  return rounds * 100 <= longest_first * (100 + slack_pct);
}
constexpr bool hopper_causal_walk_static(long long units, long long sq, long long sk,
                                         int sm_count) {
  return hopper_key_blocks(sk) <= kHopperStaticCausalMaxKeyBlocks &&
         hopper_causal_rounds_within(units, sq, sk, kHopperBlockN, sm_count,
                                     kHopperStaticCausalSlackPct);
}

// Keys per block of the d=192 and d=256 tiles (128 rows in ping-pong, one Q buffer): as many as
// a consumer's registers hold S and P of beside O's 96 or 128, and two ring stages of beside Q
// in the shared memory (220 and 224 KB).
// With v of 128 beside d=192, O and S take d=128's registers and the 128-key blocks of d=128
// fit beside one Q buffer (208 KB).
constexpr int hopper_large_head_block_n(int head_dim, int head_dim_v = 0) {
  return head_dim == 192 ? (head_dim_v == 128 ? 128 : 112) : 80;
}
// Whether unsplit causal d=192 and d=256 tiles (v as wide) on a persistent launch draw their
// tiles from a counter longest first (core/tile_order.h) instead of walking the static rounds.
// d=192: from kHopperLargeHeadDrawnMinKeys keys, where the draw ran 2-16% faster on 6 of 13
// grids of 1024-4096 rows (GQA groups and few heads the most), within 0.5% on the others (H200,
// each against FlashAttention-3 in the same process). Over 512-777 keys, whose tiles walk at
// most 7 key blocks, it ran 3.5-12% slower: the tile's hand-off costs more than the rounds lose.
// Over longer keys the tiles keep a block each: the counter measured 1-3% faster on 2 of 7 grids
// of 5000-32768 rows, even on 3, and 1-3% slower at 16k and 32k. d=256, whose 80-key blocks
// make the hand-off dearer: only where the static rounds end more than
// kHopperD256DrawnSlackPct after longest first in the model (hopper_causal_rounds_within). Of
// 10 grids of 1024-4096 rows modelled 10-25% later, drawn ran 0.2-16% faster (6 of them 6% or
// more: (2, 12 / 12, 2048) 1.045x FlashAttention-3's speed -> 1.15x); of 7 modelled at most 7%
// later, 6 ran 0.5-9.5% slower drawn (the most at 1024 keys), one 0.5% faster.
constexpr long long kHopperLargeHeadDrawnMinKeys = 1024;
constexpr int kHopperD256DrawnSlackPct = 9;
constexpr bool hopper_large_head_draws(int head_dim, int head_dim_v, bool causal,
                                       long long units, long long sq, long long sk,
                                       int sm_count) {
  if (!causal || head_dim_v != head_dim || !hopper_persistent(sk)) return false;
  if (head_dim == 192) return sk >= kHopperLargeHeadDrawnMinKeys;
  return head_dim == 256 && sm_count > 0 &&
         !hopper_causal_rounds_within(units, sq, sk, hopper_large_head_block_n(head_dim),
                                      sm_count, kHopperD256DrawnSlackPct);
}
// Keys per block of the tall (192-row) tiles: 144 at d=96, whose S and O registers leave room
// for them (fewer, longer iterations), else kHopperBlockN.
constexpr int hopper_tall_block_n(int head_dim) { return head_dim == 96 ? 144 : kHopperBlockN; }
// Cost of a tall-tile row in % of a base-tile row, fitted to forced tiles: d=64 without the
// mask; d=64 with it on persistent tiles (at most kHopperPersistentMaxKeyBlocks key blocks; the
// consumers rotate their row slices there) and on longer ones; d=128 with the mask (and d=96,
// whose tall tiles measured 4-13% faster than its base tiles from 2k keys); d=128 without it,
// where the base tiles measured 2-7% faster on 10 grids of 2-16 waves (bench_seqlen's 2k-16k
// points 2-4%) and the tall ones 7-15% faster where they take one wave and base tiles two
// (16-32 heads of 768-1536 rows against 16k keys).
constexpr int kHopperTallPct = 87;
constexpr int kHopperTallPctCausal = 95;
constexpr int kHopperTallPctCausalLong = 88;
constexpr int kHopperTallPctD128 = 93;
constexpr int kHopperTallPctD128Unmasked = 105;
// Cost of a wide-tile row (d=64) in % of a base-tile row: more than a tall row, so wide tiles
// win only where they pad less or fill fewer waves. With the mask (below kHopperTallMinSq rows)
// less: forced on 7 shapes of 32-1024 heads of 512-1500 rows, their rows cost 62-87% of a
// base row.
constexpr int kHopperWidePct = 95;
constexpr int kHopperWidePctCausal = 85;
// How much earlier (in %) base tiles must end than tall ones in the longest-first model of a
// long causal call (causal_longest_first_time) to be chosen over them (negative: how much later
// they may end). The model favours base tiles by 2-5% against measurements at d=64 and 96. At
// d=128 the long causal base tiles (probabilities at the running max taken into P around the
// P V's wait, drawn from a counter) run as fast as tall ones or faster: base over tall speed
// 0.99-1.04x on 8 calls of 16-128 heads of 4k-32k rows (H200, each against FlashAttention-3 in
// the same process), where the model has them 2-7% later; tall tiles keep the calls whose few
// heads fill the tall tiles' waves better (the model has base tiles 11-15% later there).
// Dense persistent d=128 calls over more than kHopperRunningMaxMinKeyBlocksD128 key blocks,
// whose base tiles take the running max too (walked in static rounds or drawn), compare alike
// with a margin of -1%: tall tiles ran faster where the model has base tiles up to 5% earlier
// ((8, 32 / 8, 900) 1.10x, (2, 32 / 8, 3000) 1.01x, (2, 64 / 8, 4000) 1.01x, even on
// (1, 32 / 8, 1500)), and 0.95-1.00x the base tiles' speed on the 12 grids of 1152-4096 rows
// where it has them 6.9% earlier or more (H200, against FlashAttention-3 in the same process).
// It misses (16, 32 / 8, 777), whose last tall tile holds 9 rows charged as 192: base tiles
// modelled 24% earlier, 2% slower.
constexpr int hopper_causal_base_margin_pct(int head_dim, long long sk) {
  if (head_dim != 128) return 3;
  return hopper_persistent(sk) ? -1 : -8;
}
// From this many query rows tall tiles run with the mask over any number of keys, and split
// calls at d=64 run them. Below it they run with the mask on persistent calls (at most 32 key
// blocks), where their weighted waves weigh less than the base tiles' and, at d=64, the wide
// tiles' (hopper_block_m); chunks of a long prefill run base or wide tiles. Measured on an H100
// (22 shapes of 32-1024 heads of 512-1500 rows, d=96 and 128), the waves pick the faster height
// at 17: tall tiles by 2-16% at 777-1500 rows, base tiles by 4-14% at 512 and 1024 rows; they
// miss by 1-3% at 1280 and 1408 rows of 128 heads.
constexpr int kHopperTallMinSq = 1536;

// A row's cost on tiles of block_m rows over sk keys, in % of a base-tile row (the heuristic's
// time model is per 128 rows, so tall tiles' modelled times are weighted by this).
constexpr int hopper_row_cost_pct(int head_dim, int block_m, bool causal, long long sk) {
  if (block_m == kHopperWideRows) return causal ? kHopperWidePctCausal : kHopperWidePct;
  if (block_m != kHopperTallRows) return 100;
  if (head_dim != 64) return head_dim == 128 && !causal ? kHopperTallPctD128Unmasked
                                                        : kHopperTallPctD128;
  if (!causal) return kHopperTallPct;
  return hopper_persistent(sk) ? kHopperTallPctCausal : kHopperTallPctCausalLong;
}

// The tile height of split calls (G >= 2), which the split heuristic models to choose G: d=64
// from kHopperTallMinSq rows, tall tiles unless their last tile's padding costs more than their
// faster rows save; else base tiles.
constexpr int hopper_split_block_m(int head_dim, long long sq, bool causal, long long sk) {
  if (head_dim != 64 || sq < kHopperTallMinSq) return kHopperBaseRows;
  const long long pct = hopper_row_cost_pct(head_dim, kHopperTallRows, causal, sk);
  const long long padded_tall = (sq + kHopperTallRows - 1) / kHopperTallRows * kHopperTallRows;
  const long long padded_base = (sq + kHopperBaseRows - 1) / kHopperBaseRows * kHopperBaseRows;
  return padded_tall * pct < padded_base * 100 ? kHopperTallRows : kHopperBaseRows;
}

// Whether the plan declines an automatic split (num_splits = 0) of a prefill grid, whose units
// have two query tiles or more, over at most kHopperPrefillSplitMaxKeyBlocks key blocks and
// fewer than four times as many keys as queries: where its unsplit tiles fill more than
// kHopperPrefillSplitMaxSmPct of the SMs. The split model (core/split_heuristic.cpp) weighs
// whole waves of tiles as long as the longest and knows no causal mask; there its splits ran
// slower (H200, each against the unsplit call in the same process): 7-48% on 40-64 tiles
// (d=128 to 256, with the mask or without; even at d=96), 34% to 2.1x on 144-192 tiles (G = 2:
// (1, 5 / 1, 4096) causal d=128 took 100 us against 54). On 16-32 tiles they ran 12-79% faster
// (d=64 to 256), (1, 4 / 4, 1024) causal d=128 2% slower. At d=64 and 128 the plan chooses the
// split count of such grids itself (hopper_prefill_splits): causal calls of two heads on 48 and
// 64 tiles ran 1.31x and 1.42x faster at G = 4. Longer keys, and chunks of queries against them,
// keep the model's choice at d=96 to 256: nothing there was measured against it.
constexpr int kHopperPrefillSplitMaxSmPct = 25;
constexpr long long kHopperPrefillSplitMaxKeyBlocks = 48;
// `units` (batch, head) pairs of sq queries against sk keys on tiles of block_m rows over
// blocks of block_n keys.
constexpr bool hopper_prefill_declines_split(long long units, long long sq, long long sk,
                                             int block_m, int block_n, int sm_count) {
  const long long query_tiles = (sq + block_m - 1) / block_m;
  const long long key_blocks = (sk + block_n - 1) / block_n;
  return query_tiles >= 2 && 4 * sq > sk && key_blocks <= kHopperPrefillSplitMaxKeyBlocks &&
         units * query_tiles * 100 >
             static_cast<long long>(sm_count) * kHopperPrefillSplitMaxSmPct;
}

// The split count of an automatic split of dense prefill at d=64 and 128 (4 sq > sk, two query
// tiles or more) on the split tiles' 128 rows over 128-key blocks. Unsplit, the SMs take the
// tiles longest first and the call ends with the longest (causal_longest_first_time; without
// the mask a unit's tiles are alike), so on few heads most SMs wait for it; split, each tile's
// key blocks part into G pieces. The split pays where the longest ends at least
// hopper_prefill_split_slack_blocks after the SMs' even share of the key blocks and at least
// kHopperPrefillSplitMinWaitPct of it (hopper_prefill_split_pays); under that the pieces' own
// costs (their starts, fp32 partials, the combine) outweigh the wait. Then G = the longest over
// that share (a share of at least kHopperPrefillSplitMinShareBlocks), at most
// kHopperPrefillMaxSplits. The plan takes this G where the split model's stays 1 and where it
// declines the model's split (hopper_prefill_declines_split); causal calls whose tiles reach
// the SM count run unsplit where the split does not pay, else at the model's G; on fewer
// tiles, and without the mask on more (whose last wave the model weighs), the model's G stands.
// Measured on an H200, G = 1 to 8 of each shape in one process, against the model's G:
// - 84 shapes of 1-8 heads of 1k-16k rows, causal or not (the slacks: waits of 15-17.2 blocks
//   at d=128 went either way, (1, 3 / 3, 3000) 1.12x split, (1, 4 / 4, 3000) 0.94x; d=64's
//   blocks cost less): the geomean over the best G's time 1.061 -> 1.018, none slower; causal
//   d=128 (1, 1 / 1, 6000) 70.5 -> 35.5-35.8 us (G = 5), (1, 2 / 2, 4096) 51.6 -> 36.5,
//   (1, 3 / 3, 8192) 125.8 -> 100.5 (G = 2 -> 1); d=64 (1, 2 / 2, 4096) 45.8 -> 29.0.
// - 21 shapes held out (GQA groups, batches of 2 and 3, queries against twice their keys, odd
//   lengths): 1.180 -> 1.058, 10 faster by 1.02-1.97x, none slower.
// - 22 drawn at random among few-head shapes whose G this moves (1,544 drawn, up to 12 units):
//   1.215 -> 1.024, none slower. They set the 125%: on causal grids of as many tiles as SMs
//   the model's splits lost where the longest ended 1.01-1.22x the share (1.26x: 4% slower)
//   and won at 1.33x and 1.83x.
// - 24 more drawn the same way, held out: 1.18x faster in geomean, 17 faster (up to 1.68x), 2
//   slower ((3, 2 / 2, 1500, 4500) causal d=128 0.91x, (3, 2 / 1, 1500, 2250) d=64 0.95x).
constexpr int kHopperPrefillSplitMinShareBlocks = 4;
constexpr int kHopperPrefillMaxSplits = 8;
constexpr int kHopperPrefillSplitMinWaitPct = 125;
constexpr double hopper_prefill_split_slack_blocks(int head_dim) {
  return head_dim <= 64 ? 11.0 : 18.0;
}
constexpr bool hopper_prefill_splits_apply(int head_dim, long long sq, long long sk) {
  return (head_dim == 64 || head_dim == 128) && 4 * sq > sk && sq > kHopperBaseRows;
}
// When the longest unsplit tile ends and the SMs' even share of the key blocks, in key blocks
// of one tile.
struct PrefillWait {
  double longest = 0.0, share = 0.0;
};
inline PrefillWait hopper_prefill_wait(long long units, long long sq, long long sk, bool causal,
                                       int sm_count) {
  const long long query_tiles = (sq + kHopperBaseRows - 1) / kHopperBaseRows;
  const long long key_blocks = (sk + kHopperBlockN - 1) / kHopperBlockN;
  PrefillWait w;
  if (units <= 0 || sm_count <= 0) return w;
  if (causal) {
    w.longest = causal_longest_first_time(units, sq, sk, kHopperBaseRows, kHopperBlockN, 100,
                                          sm_count) / kHopperBaseRows;
    w.share = causal_even_share_time(units, sq, sk, kHopperBaseRows, kHopperBlockN, 100,
                                     sm_count) / kHopperBaseRows;
  } else {
    const long long waves = (units * query_tiles + sm_count - 1) / sm_count;
    w.longest = static_cast<double>(key_blocks * waves);
    w.share = static_cast<double>(units * query_tiles * key_blocks) / sm_count;
  }
  return w;
}
inline bool hopper_prefill_split_pays(const PrefillWait& w, int head_dim) {
  return w.longest - w.share >= hopper_prefill_split_slack_blocks(head_dim) &&
         w.longest * 100 >= w.share * kHopperPrefillSplitMinWaitPct;
}
inline int hopper_prefill_splits(long long units, long long sq, long long sk, bool causal,
                                 int head_dim, int sm_count) {
  const PrefillWait w = hopper_prefill_wait(units, sq, sk, causal, sm_count);
  if (!hopper_prefill_split_pays(w, head_dim)) return 1;
  const double g = w.longest / (w.share > kHopperPrefillSplitMinShareBlocks
                                    ? w.share
                                    : static_cast<double>(kHopperPrefillSplitMinShareBlocks));
  if (g >= kHopperPrefillMaxSplits) return kHopperPrefillMaxSplits;
  return g < 1.0 ? 1 : static_cast<int>(g);
}

// Paged k/v on the Hopper kernels: each key block of block_n keys (128, or 64 on the wide
// tiles) is loaded as TMA boxes of one page's rows each, or, where pages hold whole blocks, one
// box of a block's rows inside its page; so pages of 64 keys or a multiple of block_n. Returns
// the rows of a box, 0 for page sizes whose blocks the producer warpgroup copies a row at a
// time instead (cp.async; LaunchPlan::page_rows). Smaller pages as
// boxes would be more, smaller boxes: at 16 keys (8 boxes a block) multi-token decode took
// 1.22-1.76x the contiguous time (H200; pages in order as slow as shuffled), chunked prefill
// 2.0-2.1x (H100; copied, 1.06x).
constexpr int kHopperMinPageRows = 64;
constexpr int hopper_page_box_rows(long long page_size, int block_n = kHopperBlockN) {
  if (page_size >= block_n) return page_size % block_n == 0 ? block_n : 0;
  return page_size == kHopperMinPageRows ? kHopperMinPageRows : 0;
}

// Whether the key blocks of block_n keys load as TMA boxes: contiguous k/v (page_size 0), or
// pages hopper_page_box_rows loads as boxes.
constexpr bool hopper_keys_load_as_boxes(long long page_size, int block_n = kHopperBlockN) {
  return page_size == 0 || hopper_page_box_rows(page_size, block_n) != 0;
}

// The rows of the boxes contiguous k/v load a key block in: one box of the block's rows, or, on
// tiles packing a GQA group's heads (multi-token decode, which streams each key once from
// DRAM), two of 64 rows, measured 1-4% faster than one of 128 on seven multi-token shapes
// (H200).
constexpr int hopper_key_box_rows(bool packs_heads, int block_n = kHopperBlockN) {
  return packs_heads ? kHopperMinPageRows : block_n;
}

// The tile height a call runs with num_splits = G. Split calls: hopper_split_block_m. Unsplit
// calls on a grid of heads = b * h query heads: the height whose waves over sm_count SMs,
// weighted by a row's cost, weigh less (tall waves * 192 * pct < base waves * 128 * 100) where
// tall tiles exist; long causal calls compare the modelled time of their longest-first order.
// A row-count rule alone cannot do this: tall tiles win per row on a full grid and lose on a
// grid of one or two waves. heads or sm_count 0: the grid is unknown, so
// hopper_split_block_m. Wide tiles (d=64; with the mask below kHopperTallMinSq rows) win where
// their weighted waves are fewer still.
// Sequences of their own lengths (varlen, contiguous kv caches): their split calls run base
// tiles. Their tall tiles run at d=64 and with the mask: without it, at
// d=128 their 192-row tiles measured 6-8% slower than their 128-row ones at 2k-4k rows (with
// the mask 1-7% faster, at d=64 3-14%). Over a paged cache of page_size keys (sequences too)
// they have no tall tiles; wide ones read pages of any size (as boxes where pages hold whole
// 64-key blocks, hopper_page_box_rows, else copied a row at a time).
constexpr int hopper_block_m(int head_dim, long long sq, bool causal, long long sk,
                             long long heads = 0, int sm_count = 0, int num_splits = 2,
                             bool sequences = false, long long page_size = 0) {
  const bool short_causal = causal && sq < kHopperTallMinSq;
  const bool tall_exists = (head_dim == 64 || head_dim == 96 || head_dim == 128) &&
                           (!short_causal || hopper_persistent(sk)) &&
                           (!sequences || causal || head_dim == 64) && page_size == 0;
  const bool wide_exists = head_dim == 64 && (!causal || short_causal);
  if (sequences && num_splits != 1) return kHopperBaseRows;
  if (num_splits != 1 || heads <= 0 || sm_count <= 0 || !(tall_exists || wide_exists))
    return sequences ? kHopperBaseRows : hopper_split_block_m(head_dim, sq, causal, sk);
  const long long pct = hopper_row_cost_pct(head_dim, kHopperTallRows, causal, sk);
  // Long causal calls, and persistent ones whose base tiles take the probabilities at the
  // running max (dense d=128 calls), hand their tiles to the SMs longest first as SMs free up
  // (the grouped order of core/tile_order.h: tall tiles drawn from a counter, base tiles too
  // where they take the running max, or static rounds that end close to it,
  // hopper_causal_walk_static): base and tall tiles compare by that order's modelled time
  // (causal_longest_first_time), not by whole waves. Measured on an H100 (tall over base speed,
  // before the base tiles took the running max): d=96 1.11x, d=64 1.2-1.4x; 0.77x on 4 heads of
  // 8192 rows at d=128 and 0.97-0.98x on chunks of 2048 queries against 8k-16k keys, where the
  // model picks base tiles. The model favours base tiles by 2-5% against those measurements
  // (even at (1, 8 / 1, 8192), modelled 5% faster on base tiles), so they must end
  // hopper_causal_base_margin_pct earlier in it (at d=128 they may end 8% later, 1% on
  // persistent calls).
  const bool ordered_causal =
      !hopper_persistent(sk) || hopper_causal_running_max(head_dim, causal, sk, sequences);
  if (causal && ordered_causal && !wide_exists) {
    if (!tall_exists) return kHopperBaseRows;
    const double base_time = causal_longest_first_time(heads, sq, sk, kHopperBaseRows,
                                                       kHopperBlockN, 100, sm_count);
    const double tall_time =
        causal_longest_first_time(heads, sq, sk, kHopperTallRows, hopper_tall_block_n(head_dim),
                                  static_cast<int>(pct), sm_count);
    return base_time * 100 < tall_time * (100 - hopper_causal_base_margin_pct(head_dim, sk))
               ? kHopperBaseRows
               : kHopperTallRows;
  }
  const long long base_tiles = heads * ((sq + kHopperBaseRows - 1) / kHopperBaseRows);
  const long long tall_tiles = heads * ((sq + kHopperTallRows - 1) / kHopperTallRows);
  const long long base_waves = (base_tiles + sm_count - 1) / sm_count;
  const long long tall_waves = (tall_tiles + sm_count - 1) / sm_count;
  const long long base_cost = base_waves * kHopperBaseRows * 100;
  const long long tall_cost = tall_waves * kHopperTallRows * pct;
  const bool tall_wins = tall_exists && tall_cost < base_cost;
  const int narrower = tall_wins ? kHopperTallRows : kHopperBaseRows;
  if (!wide_exists) return narrower;
  const long long wide_tiles = heads * ((sq + kHopperWideRows - 1) / kHopperWideRows);
  const long long wide_waves = (wide_tiles + sm_count - 1) / sm_count;
  const long long wide_cost =
      wide_waves * kHopperWideRows * hopper_row_cost_pct(head_dim, kHopperWideRows, causal, sk);
  return wide_cost < (tall_wins ? tall_cost : base_cost) ? kHopperWideRows : narrower;
}

// Whether a persistent unsplit launch without the causal mask rotates each round's tiles among
// its blocks (block j takes the round's tile (j + round) mod its tiles) instead of walking them
// in snake order: on 192-row tiles whose heads end in a shorter query tile (sq not a multiple
// of 192). The snake walk gives a block the same place in a head's query tiles in every round
// whenever the grid is a multiple of a head's tiles (132 blocks = 12 heads of 11 tiles at 2048
// rows), so the short tiles all fall to the same few blocks and the others set the call's
// length; rotated, every block gets its share. Equal tiles keep the snake, and so do split
// calls, on which the split heuristic's times were fitted.
constexpr bool hopper_rotate_rounds(bool causal, int num_splits, long long sq, int block_m) {
  return !causal && num_splits == 1 && block_m == kHopperTallRows && sq % block_m != 0;
}

// A persistent launch whose last round is part-full: the blocks that run no tile in that round
// (one tile fewer than the others) start kHopperStaggerNs later. Otherwise every block reaches
// its tile boundaries, and so the loads of its next tile's Q, K and V, at the same moment in
// every round; offset, the two halves of the grid take turns. It costs nothing at the end, as
// the delayed blocks finish a tile earlier. (The grouped causal walk, whose persistent
// launches draw tiles from a counter, does not stagger: there no block knows its tile count.)
constexpr unsigned kHopperStaggerNs = 2000;
FS_HOST_DEVICE constexpr bool hopper_staggered_block(long long tiles, long long grid,
                                                     long long block) {
  return tiles > grid && tiles % grid != 0 && block >= tiles % grid;
}

// Tiles of the Hopper (wgmma) kernel: block_m query rows of one head in consumer warpgroups of
// 64 rows plus a TMA producer warpgroup, 128-key blocks (64 on wide tiles; 112 at d=192, 80 at
// d=256), one block per SM (multi-token decode packing a GQA group: hopper_packed_tile_config).
// Without heads, sm_count and num_splits: the split calls' tiles, which the heuristic models.
// sequences: a call of sequences of their own lengths (sq and sk their longest), whose
// kernels have the 128-row tiles and, unsplit, the 192-row and (d=64) 256-row ones
// (hopper_block_m); page_size: theirs over a paged cache of pages of that many keys.
constexpr TileConfig hopper_tile_config(int head_dim, long long sq = 1 << 20, bool causal = false,
                                        long long sk = 1 << 20, long long heads = 0,
                                        int sm_count = 0, int num_splits = 2,
                                        int head_dim_v = 0, bool sequences = false,
                                        long long page_size = 0) {
  if (head_dim != 64 && head_dim != 96 && head_dim != 128 && head_dim != 192 && head_dim != 256) {
    return TileConfig{0, 0, 0, 0};
  }
  const int block_m = hopper_block_m(head_dim, sq, causal, sk, heads, sm_count, num_splits,
                                     sequences, page_size);
  const int block_n = block_m == kHopperWideRows ? kHopperWideBlockN
                      : head_dim > 128           ? hopper_large_head_block_n(head_dim, head_dim_v)
                      : block_m == kHopperTallRows ? hopper_tall_block_n(head_dim)
                                                   : kHopperBlockN;
  return TileConfig{block_m, block_n, 4 + block_m / 16, 1, 1, false, true};
}

// Whether the Hopper kernels have split instances for sequences of their own lengths: not
// with the mask at d=192 and 256, whose consumers spilled (their split calls run on the
// portable kernels).
constexpr bool hopper_sequence_splits_built(int head_dim, bool causal) {
  return !(causal && head_dim > 128);
}

// Multi-token decode of a GQA group (fewer than 64 queries of h/hk > 1 heads, more packed rows
// than the narrow tile holds): the Hopper kernel packs the group's query heads into the rows of
// its 128-row tiles (row r: query r / group, head r % group), so one tile's K/V serves the
// whole group, as the portable kernels do. A tile holds whole queries of the group: its Q box is
// (d, group, 128 / group queries), so groups up to 128; it runs at d = 64 and 128.
constexpr bool hopper_packs_heads(long long sq, long long h, long long hk, int head_dim) {
  return h != hk && hk > 0 && h % hk == 0 && h / hk <= kHopperBaseRows && sq < 64 &&
         !use_narrow_tiles(sq, h, hk) && (head_dim == 64 || head_dim == 128);
}

// The rows a tile packing a group of `group` heads fills: as many whole queries of the group as
// 128 rows hold (128 where the group divides 128, 125 for a group of 5); the rest are padding.
constexpr int hopper_packed_tile_rows(long long group) {
  return static_cast<int>(kHopperBaseRows / group * group);
}

// The tiles of a call whose heads the Hopper kernel packs: the 128-row ping-pong tiles of its
// sequence instances, block_m their rows filled.
constexpr TileConfig hopper_packed_tile_config(long long group) {
  return TileConfig{hopper_packed_tile_rows(group), kHopperBlockN, 4 + kHopperBaseRows / 16,
                    1, 1, true, true};
}

// The splits of a call over pages the Hopper kernels copy a row at a time (hopper_page_box_rows
// 0), given the heuristic's `splits` (which models the call as contiguous) and tiles_per_split
// blocks a split: those copies stream less per SM than TMA boxes, so a split grid that leaves
// more than a quarter of the SMs idle splits into as many as one wave holds (at most one a key
// block) instead. Measured on an H100, (1,16,32,8,32768,128) over pages of 16: G = 10 (80
// blocks) 1.15x the contiguous call's time, G = 14 1.04x, G = 16 (128 blocks) 1.05x, where the
// contiguous call reads 0.98-1.00x at all three; (2,6,64,8,32768,128) at G = 7 (112 blocks)
// 1.05x, G = 8 1.06x.
constexpr int hopper_page_rows_splits(int splits, long long tiles_per_split, int sm_count,
                                      long long key_blocks) {
  if (splits < 2 || tiles_per_split <= 0 || 4 * tiles_per_split * splits >= 3LL * sm_count) {
    return splits;
  }
  const long long one_wave = sm_count / tiles_per_split;
  const long long most = one_wave < key_blocks ? one_wave : key_blocks;
  return most > splits ? static_cast<int>(most) : splits;
}

// Whether the Hopper kernels read a paged cache of this page size and head dim: the 128-row
// sequence tiles at d = 64 and 128, v of the same head dim, any page size (as boxes or a row
// at a time); unsplit at d=64 also the 256-row ones.
constexpr bool hopper_reads_pages(long long page_size, int head_dim, int head_dim_v) {
  return page_size >= 1 && (head_dim == 64 || head_dim == 128) && head_dim_v == head_dim;
}

// The Hopper kernel serves a call when each head brings at least half a tile of query rows, or
// there is no group to pack, or it packs the group (hopper_packs_heads); not a narrow-tile decode.
constexpr bool use_hopper_tiles(long long sq, long long h, long long hk, int head_dim) {
  return !use_narrow_tiles(sq, h, hk) &&
         (h == hk || sq >= 64 || hopper_packs_heads(sq, h, hk, head_dim));
}

}  // namespace flashsplit
