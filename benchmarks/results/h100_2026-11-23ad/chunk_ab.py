# Scratch A/B: chunked walk (FS_CHUNK_GROUP=g) and K/V reuse across tiles (FS_REUSE_KV=1)
# against the shipped walk, bench_seqlen timing, interleaved with cuDNN, one build.
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit

VARIANTS = {"base": {}, "c1r": {"FS_CHUNK_GROUP": "1", "FS_REUSE_KV": "1"},
            "c2r": {"FS_CHUNK_GROUP": "2", "FS_REUSE_KV": "1"}, "c1": {"FS_CHUNK_GROUP": "1"},
            "r": {"FS_REUSE_KV": "1"}}
ROUNDS = int(os.environ.get("ROUNDS", "2"))

def variant(name, causal=False, **kw):
    env = VARIANTS[name]
    def run(q, k, v):
        os.environ.update(env)
        try:
            return flashsplit.flash_attn_func(q, k, v, causal=causal, **kw)
        finally:
            for key in env:
                os.environ.pop(key, None)
    return run

bad = 0
checks = [(32, 16, 512, 512, 128, 8, 0), (16, 32, 512, 512, 64, 32, 0), (3, 7, 1000, 1500, 128, 7, 0),
          (5, 8, 777, 1000, 64, 2, 0), (2, 16, 4096, 4096, 128, 16, 0), (4, 16, 1024, 1100, 64, 4, 0),
          (1, 3, 300, 200, 128, 3, 0), (2, 8, 700, 3000, 128, 8, 3), (2, 8, 300, 5000, 64, 2, 4),
          (16, 16, 1024, 1024, 128, 16, 0), (1, 2, 80, 64, 64, 2, 0)]
for i, (b, h, sq, sk, d, hk, g) in enumerate(checks):
    dt = torch.float16 if i % 2 else torch.bfloat16
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dt)
    k, v = (torch.randn(b, sk, hk, d, device="cuda", dtype=dt) for _ in range(2))
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.float().transpose(1, 2) for t in (q, k, v)), enable_gqa=True).transpose(1, 2)
    line = []
    for name in VARIANTS:
        out = variant(name, num_splits=g)(q, k, v)
        err = float((out.float() - ref).abs().max())
        ok = bool(torch.isfinite(out).all()) and err < 2e-2
        bad += not ok
        line.append(f"{name} {err:.4f}{'' if ok else ' FAIL'}")
    print(f"check b{b} h{h}/{hk} sq{sq} sk{sk} d{d} G{g} {dt}: " + ", ".join(line), flush=True)
print("failures:", bad, flush=True)
if bad:
    sys.exit(1)
points = [(128, 512), (128, 1024), (64, 512), (64, 1024), (128, 2048), (64, 2048), (128, 4096), (64, 8192)]
names0 = list(VARIANTS)
for rnd in range(ROUNDS):
    for d, s in points:
        b, h = 16384 // s, 2048 // d
        sets = T.make_input_sets(torch, b, h, h, s, s, d, torch.bfloat16)
        q, k, v = sets[0]
        fl = T.attention_flops(b, h, s, s, d, False)
        cud = T.peer_runners(torch, q, k, v, False, ["sdpa_cudnn"])["sdpa_cudnn"][0]
        tim = T.time_cuda_interleaved(torch, [variant(n) for n in names0] + [cud], sets, 5, 30)
        ms = {n: t["median_ms"] for n, t in zip(names0 + ["cudnn"], tim)}
        print(f"r{rnd} d={d} s={s}: " + " ".join(f"{n} {fl / ms[n] / 1e9:.0f}" for n in ms) + " | x_cudnn "
              + " ".join(f"{n} {ms['cudnn'] / ms[n]:.3f}" for n in names0), flush=True)
        del sets, q, k, v
        torch.cuda.empty_cache()
