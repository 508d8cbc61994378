# Scratch A/B of walk changes (sessions 18 and 19), each against the walk before it in ONE build:
# the scratch build read environment variables in the launcher and set HopperFwdParams fields
# (removed when the change shipped or was reverted, so each mode runs only against its build).
# bench_seqlen timing, interleaved with cuDNN. Modes, the build each needs and its log:
#   --walk rotate:   FS_NO_ROTATE=1 turned the rotated rounds off (step 39; ab_rotate_rounds.txt)
#   --walk backward: FS_SNAKE_LAST=1 turned the backward last round on (step 40;
#                    ab_backward_last_round.txt)
#   --walk plan:     FS_NO_PLAN=1 turned the host-planned last rounds off (session 19,
#                    ../h100_2026-11-23ad/tried_planned_last_rounds.patch, ab_planned_last_rounds.txt)
#   --walk chunk:    FS_CHUNK_GROUP=g chunked the walk, FS_REUSE_KV=1 reused the K/V ring across
#                    tiles (session 19, ../h100_2026-11-23ad/tried_chunked_walk_kv_reuse.patch,
#                    ab_chunked_walk_kv_reuse.txt)
# Session 18's runs timed two variants in one fixed order, alternated between rounds, and the
# chunk run took 30 repetitions per point; the timer now shares the places itself
# (benchmarks/_timing.py).
import argparse, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import _timing as T
import torch, flashsplit

CAUSAL_CHECKS = [(32, 16, 512, 512, 128), (16, 16, 1024, 1024, 128), (3, 7, 1000, 1500, 128),
                 (5, 9, 777, 700, 64), (2, 16, 4096, 4096, 128), (4, 16, 1024, 1024, 64),
                 (1, 3, 300, 200, 128)]
# Per mode: variants (name -> environment; the first is the reference), causal, whether outputs
# must match the reference bit for bit (same tiles, other blocks), check shapes (b, h, sq, sk, d
# [, hk, num_splits]), points (d, s[, dtype]), rounds.
WALKS = {
    "rotate": ({"new": {}, "old": {"FS_NO_ROTATE": "1"}}, False, True,
               [(8, 16, 2048, 2048, 128), (8, 32, 2048, 2048, 64), (3, 7, 1000, 1500, 128),
                (5, 9, 777, 4096, 64), (2, 16, 4096, 4096, 128), (16, 32, 512, 512, 64),
                (1, 3, 300, 200, 128)],
               [(128, 2048), (64, 2048), (128, 512), (128, 1024), (128, 4096), (64, 512),
                (64, 1024), (64, 4096), (128, 8192)], 3),
    "backward": ({"new": {"FS_SNAKE_LAST": "1"}, "old": {}}, True, True, CAUSAL_CHECKS,
                 [(128, 512), (128, 1024), (128, 2048), (64, 512), (64, 1024)], 3),
    "plan": ({"new": {}, "old": {"FS_NO_PLAN": "1"}}, True, True,
             [(32, 16, 512, 512, 128, 16, 0), (16, 16, 1024, 1024, 128, 4, 0),
              (3, 7, 1000, 1500, 128, 7, 0), (5, 8, 777, 700, 64, 2, 0),
              (4, 16, 1024, 1024, 64, 16, 0), (2, 8, 700, 3000, 128, 8, 3),
              (1, 3, 300, 200, 128, 3, 0), (6, 20, 640, 640, 128, 5, 2),
              (40, 16, 256, 256, 64, 16, 0)],
             [(128, 512), (128, 1024), (128, 512, "fp16"), (128, 1024, "fp16"), (64, 512)], 3),
    "chunk": ({"base": {}, "c1r": {"FS_CHUNK_GROUP": "1", "FS_REUSE_KV": "1"},
               "c2r": {"FS_CHUNK_GROUP": "2", "FS_REUSE_KV": "1"}, "c1": {"FS_CHUNK_GROUP": "1"},
               "r": {"FS_REUSE_KV": "1"}}, False, False,
              [(32, 16, 512, 512, 128, 8, 0), (16, 32, 512, 512, 64, 32, 0),
               (3, 7, 1000, 1500, 128, 7, 0), (5, 8, 777, 1000, 64, 2, 0),
               (2, 16, 4096, 4096, 128, 16, 0), (4, 16, 1024, 1100, 64, 4, 0),
               (1, 3, 300, 200, 128, 3, 0), (2, 8, 700, 3000, 128, 8, 3),
               (2, 8, 300, 5000, 64, 2, 4), (16, 16, 1024, 1024, 128, 16, 0),
               (1, 2, 80, 64, 64, 2, 0)],
              [(128, 512), (128, 1024), (64, 512), (64, 1024), (128, 2048), (64, 2048),
               (128, 4096), (64, 8192)], 2),
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
args = argparse.ArgumentParser()
args.add_argument("--walk", choices=sorted(WALKS), required=True)
variants, causal, identical, checks, points, rounds = WALKS[args.parse_args().walk]
names = list(variants)


def variant(name, num_splits=0):
    env = variants[name]
    def run(q, k, v):
        os.environ.update(env)
        try:
            return flashsplit.flash_attn_func(q, k, v, causal=causal, num_splits=num_splits)
        finally:
            for key in env:
                os.environ.pop(key, None)
    return run


bad = 0
for i, (b, h, sq, sk, d, *rest) in enumerate(checks):
    hk, splits = rest if rest else (h, 0)
    dt = torch.float16 if i % 2 else torch.bfloat16
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dt)
    k, v = (torch.randn(b, sk, hk, d, device="cuda", dtype=dt) for _ in range(2))
    mask = torch.ones(sq, sk, device="cuda", dtype=torch.bool).tril(sk - sq) if causal else None
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.float().transpose(1, 2) for t in (q, k, v)), attn_mask=mask,
        enable_gqa=True).transpose(1, 2)
    ref = torch.nan_to_num(ref, nan=0.0)  # rows that see no key
    outs = {n: variant(n, splits)(q, k, v) for n in names}
    line = []
    for n, out in outs.items():
        err = float((out.float() - ref).abs().max())
        same = torch.equal(out, outs[names[0]])
        ok = bool(torch.isfinite(out).all()) and err < 2e-2 and (same or not identical)
        bad += not ok
        line.append(f"{n} err={err:.4f}{' identical' if same else ''}{'' if ok else ' FAIL'}")
    print(f"check b{b} h{h}/{hk} sq{sq} sk{sk} d{d} G{splits} {dt}: " + ", ".join(line), flush=True)
print("failures:", bad, flush=True)
if bad:
    sys.exit(1)
for rnd in range(rounds):
    for d, s, *dtype in points:
        dt = DTYPES[dtype[0] if dtype else "bf16"]
        b, h = 16384 // s, 2048 // d
        sets = T.make_input_sets(torch, b, h, h, s, s, d, dt)
        q, k, v = sets[0]
        fl = T.attention_flops(b, h, s, s, d, causal)
        cud = T.peer_runners(torch, q, k, v, causal, ["sdpa_cudnn"])["sdpa_cudnn"][0]
        tim = T.time_cuda_interleaved(torch, [variant(n) for n in names] + [cud], sets, 5, 40)
        ms = {n: t["median_ms"] for n, t in zip(names + ["cudnn"], tim)}
        print(f"r{rnd} causal={causal} d={d} s={s} {dt}: "
              + " ".join(f"{n} {fl / ms[n] / 1e9:.0f}" for n in ms) + " | vs " + names[0] + " "
              + " ".join(f"{n} {ms[names[0]] / ms[n]:.4f}" for n in names[1:]) + " | x_cudnn "
              + " ".join(f"{n} {ms['cudnn'] / ms[n]:.3f}" for n in names), flush=True)
        del sets, q, k, v
        torch.cuda.empty_cache()
