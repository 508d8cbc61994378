"""The gfx9 attention kernels, executed on a CPU emulator of the CDNA ISA (gfx942, gfx950).

Every instantiation of the portable forward over the gfx9 policy (bf16 and fp16, d 64 and 128,
the narrow decode tile and the wide tile, causal or not, direct or split epilogue) runs a small
problem chosen to reach it: MHA, GQA and MQA with query heads packed into rows, odd lengths,
rows that see no key (causal, more queries than keys), padded strides, one split or several
and then the split-KV combine. Each call is launched as the launcher launches it: the plan of
an MI300X-like device (flashsplit._C.heuristic.make_launch_plan) gives the tiles, G and grids,
AttnFwdParams is packed from the real header, and the producers run before the combine. The
kernels run under the default and the reversed wave order with poisoned registers, LDS and
outputs, and are compared with a float64 reference: an output passes when its error is at most
twice that of the same attention with probabilities and output rounded to the inputs'
precision, plus 1e-3; lse to 1e-4 relative; rows that see no key are 0 and -inf; NaN never passes.
The instances for calls of sequences of their own lengths (varlen, kv cache, paged kv cache) run
the same way.

Runs where FLASHSPLIT_AMD_EMU names the emulator harness (amd_emulator.py); skips otherwise.
"""

import itertools
import os

import numpy as np
import pytest

import amd_emulator as emu
import amd_toolchain as tc

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GFX9 = os.path.join(tc.CSRC, "kernels", "gfx9")
COMBINE = os.path.join(tc.CSRC, "kernels", "combine_kernel.cu")
DTYPES = ("bf16", "fp16")
ORDERS = ("fwd", "rev")
POISON16, POISON32 = 0xFFFF, 0xFFFFFFFF
CUS = {"gfx942": 304, "gfx950": 256}
# The build the emulator runs: half-precision rounding by integer operations (half_bits.h says
# which instruction the emulator misplaces); everything else is the shipped kernel.
EMULATOR_FLAGS = ("-DFLASHSPLIT_EMULATOR_BUILD",)


# A build whose K/V buffer resources move their base every 64 KiB of a head (the shipped
# kernels: every 1 GiB), so heads of a few hundred keys cross several segments.
SEGMENT_FLAGS = EMULATOR_FLAGS + ("-DFLASHSPLIT_GFX9_SEGMENT_BYTES_LOG2=16",)


def problems(narrow, causal, split):
    """(b, h, hk, sq, sk, num_splits) reaching one instantiation: the narrow tile is decode
    (one query, GQA or MQA rows packed); the wide tile odd lengths, and with the mask more
    queries than keys so leading rows see no key."""
    if narrow:
        shape = (2, 8, 2, 1, 157) if not causal else (1, 6, 1, 2, 131)
    else:
        shape = (1, 4, 2, 37, 91) if not causal else (1, 2, 2, 150, 140)
    return shape + ((3 if split else 1),)


def plan_for(target, b, h, hk, sq, sk, d, causal, num_splits):
    from flashsplit import _C
    hh = _C.heuristic
    problem = hh.AttnProblem(b=b, h=h, hk=hk, sq=sq, sk=sk, d=d, causal=causal)
    device = hh.DeviceInfo(vendor="amd", sm_count=CUS[target], smem_per_block_optin=65536,
                           arch=target)
    build = hh.BuildInfo(gpu_kernels_built=True, head_dims=[64, 128], amd_archs=[target])
    plan = hh.make_launch_plan(problem, device, build, num_splits, arch_verified_here=True)
    assert plan["path"] == "native" and plan["kernel"] == "portable_mfma", plan
    return plan


def to_bits(x, dtype):
    if dtype == "fp16":
        return x.astype(np.float16).view(np.uint16)
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bits(bits, dtype):
    if dtype == "fp16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def reference(q, k, v, causal, scale, round_p=None):
    """float64 attention (b, sq, h, d) and lse (b, h, sq); round_p rounds the probabilities as
    the kernel's P V takes them."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    kk = np.repeat(k, h // hk, axis=2)
    vv = np.repeat(v, h // hk, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    if causal:
        keys, queries = np.arange(sk)[None, :], np.arange(sq)[:, None]
        s = np.where(keys <= queries + sk - sq, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    if round_p is not None:
        p = round_p(p)
    o = np.einsum("bhqk,bkhd->bqhd", p, vv) / np.where(l > 0, l, 1.0).transpose(0, 2, 1, 3)
    lse = np.where(l[..., 0] > 0, m[..., 0] + np.log(np.where(l[..., 0] > 0, l[..., 0], 1)), -np.inf)
    return o, lse


class Case:
    """One call: inputs, buffers, launches, and the reference."""

    def __init__(self, target, dtype, d, narrow, causal, split, seed, sk=None):
        self.target, self.dtype, self.d = target, dtype, d
        self.narrow, self.causal, self.split = narrow, causal, split
        b, h, hk, sq, default_sk, g = problems(narrow, causal, split)
        sk = sk or default_sk
        self.shape = (b, h, hk, sq, sk)
        self.plan = plan_for(target, b, h, hk, sq, sk, d, causal, g)
        assert (self.plan["num_splits"] > 1) == split, "the case must reach its instantiation"
        assert (self.plan["details"]["block_m"] == 16) == narrow, self.plan
        rng = np.random.default_rng(seed)
        pad = 8  # every row stride is padded: the kernels take strides, not shapes
        self.q_bits = to_bits(rng.standard_normal((b, sq, h, d + pad)), dtype)
        self.k_bits = to_bits(rng.standard_normal((b, sk, hk, d + pad)), dtype)
        self.v_bits = to_bits(rng.standard_normal((b, sk, hk, d + pad)), dtype)
        q, k, v = (from_bits(x[..., :d], dtype) for x in (self.q_bits, self.k_bits, self.v_bits))
        self.scale = d ** -0.5
        self.ref, self.ref_lse = reference(q, k, v, causal, self.scale)
        rounded = lambda x: from_bits(to_bits(x, dtype), dtype)
        self.lowp = rounded(reference(q, k, v, causal, self.scale, rounded)[0])

    def params(self):
        return params_of(self, seqs=self.shape[0])

    def buffers(self):
        return buffers_of(self)

    def check(self, buffers):
        """(problems, max |out - ref|, bound, max lse error)."""
        b, h, hk, sq, sk = self.shape
        out = from_bits(buffers["out"].reshape(self.q_bits.shape), self.dtype)
        lse = buffers["lse"].view(np.float32).astype(np.float64).reshape(b, h, sq)
        padding_kept = (buffers["out"].reshape(self.q_bits.shape)[..., self.d:] == POISON16).all()
        return compare(out[..., :self.d], lse, self.ref, self.ref_lse, self.lowp, padding_kept)


def params_of(case, seqs, index=None, max_seqlen_q=None, **fields):
    """AttnFwdParams for a case's q, k, v bits (batch, rows, heads, d + pad), as the torch layer
    fills them: `seqs` sequences of at most `max_seqlen_q` queries (default: q's rows),
    `index` the sequence index buffers the kernel reads, and `fields` any other values (a
    paged call's block_table_stride and page_size)."""
    bq, rows_q, h, pad = case.q_bits.shape
    _, rows_k, hk, _ = case.k_bits.shape
    pointers = {"q": "q", "k": "k", "v": "v", "out": "out", "lse": "lse", "o_accum": "o_accum",
                "lse_accum": "lse_accum"}
    pointers.update({name: name for name in index or {}})
    return emu.attn_params(
        {"elem": "ElemType::kBFloat16" if case.dtype == "bf16" else "ElemType::kFloat16",
         "b": bq, "seqs": seqs, "sq": rows_q, "sk": rows_k, "h": h, "hk": hk,
         "kv_batches": case.k_bits.shape[0],
         "max_seqlen_q": rows_q if max_seqlen_q is None else max_seqlen_q,
         "d": case.d, "dv": case.d,
         "q_batch_stride": rows_q * h * pad, "q_row_stride": h * pad, "q_head_stride": pad,
         "k_batch_stride": rows_k * hk * pad, "k_row_stride": hk * pad, "k_head_stride": pad,
         "v_batch_stride": rows_k * hk * pad, "v_row_stride": hk * pad, "v_head_stride": pad,
         "o_batch_stride": rows_q * h * pad, "o_row_stride": h * pad, "o_head_stride": pad,
         "softmax_scale": case.scale, "causal": int(case.causal),
         "num_splits": case.plan["num_splits"], **fields},
        pointers)


def buffers_of(case, index=None):
    """The inputs, poisoned outputs and split scratch of a case, and its index buffers."""
    bq, rows_q, h, _ = case.q_bits.shape
    rows = case.plan["num_splits"] * bq * h * rows_q
    return dict({"q": case.q_bits.reshape(-1), "k": case.k_bits.reshape(-1),
                 "v": case.v_bits.reshape(-1),
                 "out": np.full(case.q_bits.size, POISON16, np.uint16),
                 "lse": np.full(bq * h * rows_q, POISON32, np.uint32),
                 "o_accum": np.full(rows * case.d, POISON32, np.uint32),
                 "lse_accum": np.full(rows, POISON32, np.uint32)},
                **(index or {}))


def compare(o, lse, ref, ref_lse, lowp, padding_kept):
    """check()'s verdict on out o (b, sq, h, d) and lse (b, h, sq) against the references."""
    found = []
    if np.isnan(o).any() or np.isnan(lse).any():
        found.append("NaN or unwritten (poison) values")
    if not padding_kept:
        found.append("wrote into the row padding")
    seen = np.isfinite(ref_lse).transpose(0, 2, 1)  # (b, sq, h)
    err = np.abs(o - ref)[seen].max(initial=0)
    bound = 2 * np.abs(lowp - ref)[seen].max(initial=0) + 1e-3
    if not err <= bound:
        found.append(f"out error {err:.2e} > {bound:.2e}")
    if (o[~seen] != 0).any():
        found.append("rows that see no key are not 0")
    fin = np.isfinite(ref_lse)
    lse_err = np.abs(lse[fin] - ref_lse[fin]).max(initial=0)
    if not lse_err <= 1e-4 * max(1.0, np.abs(ref_lse[fin]).max(initial=0)):
        found.append(f"lse error {lse_err:.2e}")
    if not (np.isneginf(lse) == ~fin).all():
        found.append("lse -inf where a row sees keys, or finite where it sees none")
    return found, err, bound, lse_err


class SequenceCase:
    """A call of sequences of their own lengths, as the kernels take varlen and kv-cache calls:
    varlen packs each sequence's queries and keys one after another (cu_seqlens); the kv-cache
    form keeps q dense and takes each sequence's key count (seqused_k) and cache batch
    (kv_batch_idx) from a cache longer than any of them."""

    kv_layout = 1

    def __init__(self, target, dtype, d, varlen, causal, split, seed, queries=1):
        self.target, self.dtype, self.d, self.causal = target, dtype, d, causal
        self.varlen = varlen
        rng = np.random.default_rng(seed)
        pad = 8
        if varlen:  # prefill-like: odd lengths, an empty sequence, the wide tile
            self.q_lens, self.k_lens, h, hk = [37, 0, 70], [91, 13, 60], 4, 2
            self.rows_q, self.rows_k = sum(self.q_lens), sum(self.k_lens)
            q_shape, k_shape = (1, self.rows_q, h, d + pad), (1, self.rows_k, hk, d + pad)
        else:  # decode (or a chunk of queries) from a cache: rows 3 and 0 of 4 rows of 200 keys
            self.q_lens, self.k_lens, h, hk = [queries] * 2, [157, 60], 8, 2
            self.kv_batch, self.rows_k = [3, 0], 200
            q_shape, k_shape = (2, queries, h, d + pad), (4, self.rows_k, hk, d + pad)
        self.shape = (len(self.q_lens), h, hk, max(self.q_lens), max(self.k_lens))
        self.plan = plan_for(target, *self.shape, d, causal, 3 if split else 1)
        self.narrow = self.plan["details"]["block_m"] == 16
        assert (self.plan["num_splits"] > 1) == split, self.plan
        assert self.narrow == (not varlen and queries == 1), self.plan
        self.q_bits, self.k_bits, self.v_bits = (
            to_bits(rng.standard_normal(shape), dtype) for shape in (q_shape, k_shape, k_shape))
        self.scale = d ** -0.5
        self.refs = []  # per sequence: (q rows of out, reference, lse, low-precision out)
        q, k, v = (from_bits(x[..., :d], dtype) for x in (self.q_bits, self.k_bits, self.v_bits))
        rounded = lambda x: from_bits(to_bits(x, dtype), dtype)
        for i, (nq, nk) in enumerate(zip(self.q_lens, self.k_lens)):
            if varlen:
                q0, k0 = sum(self.q_lens[:i]), sum(self.k_lens[:i])
                qi, ki, vi = q[:, q0:q0 + nq], k[:, k0:k0 + nk], v[:, k0:k0 + nk]
            else:
                row = self.kv_batch[i]
                qi, ki, vi = q[i:i + 1], k[row:row + 1, :nk], v[row:row + 1, :nk]
            ref, ref_lse = reference(qi, ki, vi, causal, self.scale)
            lowp = rounded(reference(qi, ki, vi, causal, self.scale, rounded)[0])
            self.refs.append((ref, ref_lse, lowp))
        self.index = {}
        if varlen:
            self.index["cu_seqlens_q"] = np.cumsum([0] + self.q_lens).astype(np.int32)
            self.index["cu_seqlens_k"] = np.cumsum([0] + self.k_lens).astype(np.int32)
        else:
            self.index["seqused_k"] = np.array(self.k_lens, np.int32)
            self.index["kv_batch_idx"] = np.array(self.kv_batch, np.int32)

    def params(self):
        return params_of(self, seqs=len(self.q_lens), index=self.index,
                         max_seqlen_q=max(self.q_lens))


    def buffers(self):
        return buffers_of(self, index=self.index)

    def check(self, buffers):
        bq, rows_q, h, _ = self.q_bits.shape
        out = from_bits(buffers["out"].reshape(self.q_bits.shape), self.dtype)[..., :self.d]
        lse = buffers["lse"].view(np.float32).astype(np.float64).reshape(bq, h, rows_q)
        padding_kept = (buffers["out"].reshape(self.q_bits.shape)[..., self.d:] == POISON16).all()
        verdicts = []
        for i, (ref, ref_lse, lowp) in enumerate(self.refs):
            if self.varlen:
                q0, nq = sum(self.q_lens[:i]), self.q_lens[i]
                o_i, lse_i = out[:, q0:q0 + nq], lse[:, :, q0:q0 + nq]
            else:
                o_i, lse_i = out[i:i + 1], lse[i:i + 1]
            verdicts.append(compare(o_i, lse_i, ref, ref_lse, lowp, padding_kept))
        found = sorted({f for v in verdicts for f in v[0]})
        return (found,) + tuple(max(v[j] for v in verdicts) for j in (1, 2, 3))


class PagedCase(SequenceCase):
    """The cache form of SequenceCase on a paged cache (KvLayout::kPaged): each sequence's keys
    lie in pages of page_size keys, picked at random from a pool by its row of the block table.
    The rows of a last page past the sequence's keys, the pool's pages no sequence uses and the
    table's entries past a sequence's pages (they name an unused page) hold NaN."""

    kv_layout = 2
    NAN16 = {"bf16": 0x7FC0, "fp16": 0x7E00}

    def __init__(self, target, dtype, d, page_size, queries, causal, split, seed):
        super().__init__(target, dtype, d, False, causal, split, seed, queries=queries)
        rng = np.random.default_rng(seed + 1)
        self.page_size = page_size
        counts = [-(-nk // page_size) for nk in self.k_lens]
        order = rng.permutation(sum(counts) + 3)  # three pages no sequence uses
        table = np.full((len(counts), max(counts) + 2), order[-1], np.int32)
        pages = (len(order), page_size) + self.k_bits.shape[2:]
        k_pages = np.full(pages, self.NAN16[dtype], np.uint16)
        v_pages = np.full(pages, self.NAN16[dtype], np.uint16)
        used = 0
        for i, (nk, count) in enumerate(zip(self.k_lens, counts)):
            table[i, :count] = order[used:used + count]
            used += count
            for j in range(count):
                rows = slice(j * page_size, min(nk, (j + 1) * page_size))
                n = rows.stop - rows.start
                k_pages[table[i, j], :n] = self.k_bits[self.kv_batch[i], rows]
                v_pages[table[i, j], :n] = self.v_bits[self.kv_batch[i], rows]
        self.k_bits, self.v_bits = k_pages, v_pages
        self.table_stride = table.shape[1]
        self.index = {"seqused_k": np.array(self.k_lens, np.int32),
                      "block_table": table.reshape(-1)}

    def params(self):
        return params_of(self, seqs=len(self.q_lens), index=self.index,
                         max_seqlen_q=max(self.q_lens),
                         block_table_stride=self.table_stride, page_size=self.page_size)


def symbol_of(names, needle):
    found = [n for n, demangled in names.items() if needle in demangled]
    assert len(found) == 1, f"{needle}: {found}"
    return found[0]


def build_kernels(target, out_dir, flags=EMULATOR_FLAGS, dtypes=DTYPES):
    """{(dtype, d): (code object, {demangled: symbol}, metadata)} and the combine's."""
    kernels = {}
    for dtype, d in itertools.product(dtypes, (64, 128)):
        build = tc.compile_source(os.path.join(GFX9, f"fwd_{dtype}_d{d}.cu"), target, out_dir,
                                  flags)
        meta = {k["name"]: k for k in tc.kernel_metadata(build.code_object)}
        kernels[(dtype, d)] = (build.code_object, tc.demangle(list(meta)), meta)
    build = tc.compile_source(COMBINE, target, out_dir)
    meta = {k["name"]: k for k in tc.kernel_metadata(build.code_object)}
    return kernels, (build.code_object, tc.demangle(list(meta)), meta)


def producer_launch(case, kernels, order):
    code_object, names, meta = kernels[(case.dtype, case.d)]
    elem = "__hip_bfloat16" if case.dtype == "bf16" else "__half"
    narrow = "true" if case.plan["details"]["block_m"] == 16 else "false"
    split = "true" if case.plan["num_splits"] > 1 else "false"
    layout = getattr(case, "kv_layout", 0)  # KvLayout: 0 dense, 1 sequences, 2 paged
    symbol = symbol_of(names, f"gfx9::Policy<{elem}, {case.d}, {narrow}>, "
                              f"{str(case.causal).lower()}, {split}, "
                              f"(flashsplit::KvLayout){layout}>")
    return emu.Launch(code_object, symbol, grid=case.plan["details"]["forward_grid"],
                      block=(meta[symbol]["max_flat_workgroup_size"], 1, 1),
                      args=[case.params()], buffers=case.buffers(), order=order, poison=True)


def combine_launch(case, combine, producer, order):
    code_object, names, meta = combine
    elem = "__hip_bfloat16" if case.dtype == "bf16" else "__half"
    symbol = symbol_of(names, f"combine_kernel<{elem}, {case.d}>")
    lanes = case.plan["details"]["combine_lanes"]
    return emu.Launch(code_object, symbol, grid=case.plan["details"]["combine_grid"],
                      block=(meta[symbol]["max_flat_workgroup_size"], 1, 1),
                      args=[case.params(), emu.Value(int(lanes.bit_length() - 1).to_bytes(4, "little"))],
                      buffers=producer.buffers, order=order, poison=True)


def run_and_check(cases, producers, capsys):
    """Runs the producers, then the combines of the split cases; prints the table, asserts."""
    produced = emu.run_launches(producers)
    combines = [(i, combine_launch(case, combine, producers[i], order))
                for i, (case, order, combine) in enumerate(cases) if case.plan["num_splits"] > 1]
    combined = dict(zip((i for i, _ in combines), emu.run_launches([c for _, c in combines])))

    lines = [f"{'target':7} {'dtype':5} {'d':>4} {'tile':6} {'causal':6} {'G':>2} {'order':5} "
             f"{'(b,h,hk,sq,sk)':18} {'|out-ref|':>9} {'bound':>9} {'|lse-ref|':>9}  result"]
    failures = []
    for i, ((case, order, _), result) in enumerate(zip(cases, produced)):
        errors = [] if result.ok else [f"producers: {result.error[:300]}"]
        if i in combined and not combined[i].ok:
            errors.append(f"combine: {combined[i].error[:300]}")
        found, err, bound, lse_err = case.check(producers[i].buffers) if not errors else \
            (errors, float("nan"), float("nan"), float("nan"))
        label = (f"{case.target:7} {case.dtype:5} {case.d:4d} {'narrow' if case.narrow else 'wide':6} "
                 f"{str(case.causal):6} {case.plan['num_splits']:2d} {order:5} "
                 f"{str(case.shape):18}")
        lines.append(f"{label} {err:9.2e} {bound:9.2e} {lse_err:9.2e}  "
                     f"{'PASS' if not found else 'FAIL ' + '; '.join(found)}")
        if found:
            failures.append(f"{label}: {'; '.join(found)}")
    emu.report(capsys, lines, failures)


def test_gfx9_attention_on_emulator(tmp_path, capsys):
    emu.require_emulator()
    cases, producers = [], []
    for target in emu.EMU_TARGETS:
        tc.require_compiler(target)
        kernels, combine = build_kernels(target, str(tmp_path))
        for seed, (dtype, d, narrow, causal, split, order) in enumerate(itertools.product(
                DTYPES, (64, 128), (True, False), (False, True), (False, True), ORDERS)):
            case = Case(target, dtype, d, narrow, causal, split, seed)
            cases.append((case, order, combine))
            producers.append(producer_launch(case, kernels, order))
    run_and_check(cases, producers, capsys)


def test_gfx9_buffer_base_moves_along_a_head_on_emulator(tmp_path, capsys):
    """Heads of 300 keys in a build with 64 KiB segments: the K/V buffer resources' base moves
    two to four times along a head (key rows of 2 * (hk * (d + 8)) bytes: 128 keys per segment
    at d = 64, 64 at d = 128), on both tiles, with one split and with several."""
    emu.require_emulator()
    target = "gfx942"
    tc.require_compiler(target)
    kernels, combine = build_kernels(target, str(tmp_path), SEGMENT_FLAGS, dtypes=("bf16",))
    cases, producers = [], []
    for seed, (d, narrow, split) in enumerate(itertools.product((64, 128), (True, False),
                                                                 (False, True))):
        case = Case(target, "bf16", d, narrow, False, split, 1000 + seed, sk=300)
        cases.append((case, "fwd", combine))
        producers.append(producer_launch(case, kernels, "fwd"))
    run_and_check(cases, producers, capsys)


def test_gfx9_sequences_on_emulator(tmp_path, capsys):
    """The kernels of calls of sequences of their own lengths (KvLayout::kSequences): varlen
    prefill on the wide tile (odd lengths, an empty sequence, causal or not) and decode from a
    cache longer than its sequences, through a batch index, on the narrow tile; one split and
    several."""
    emu.require_emulator()
    cases, producers = [], []
    for target in emu.EMU_TARGETS:
        tc.require_compiler(target)
        kernels, combine = build_kernels(target, str(tmp_path), dtypes=("bf16",))
        for seed, (d, varlen, causal, split) in enumerate(itertools.product(
                (64, 128), (True, False), (False, True), (False, True))):
            case = SequenceCase(target, "bf16", d, varlen, causal, split, 2000 + seed)
            cases.append((case, "fwd", combine))
            producers.append(producer_launch(case, kernels, "fwd"))
    run_and_check(cases, producers, capsys)


def test_gfx9_paged_kv_on_emulator(tmp_path, capsys):
    """The kernels of paged kv caches (KvLayout::kPaged): decode on the narrow tile and a chunk
    of 40 queries on the wide tile, against caches in pages of 16 keys and of 5 (pages shorter
    than a key block, and a size that is no power of two), causal or not, one split and
    several; NaN in every page row no sequence owns."""
    emu.require_emulator()
    cases, producers = [], []
    for target in emu.EMU_TARGETS:
        tc.require_compiler(target)
        kernels, combine = build_kernels(target, str(tmp_path), dtypes=("bf16",))
        for seed, (d, page_size, queries, causal, split) in enumerate(itertools.product(
                (64, 128), (16, 5), (1, 40), (False, True), (False, True))):
            case = PagedCase(target, "bf16", d, page_size, queries, causal, split, 3000 + seed)
            cases.append((case, "fwd", combine))
            producers.append(producer_launch(case, kernels, "fwd"))
    run_and_check(cases, producers, capsys)
