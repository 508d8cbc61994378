# Scratch A/B: planned last rounds (shipped candidate) against the snake walk (FS_NO_PLAN=1) on
# causal ping-pong tiles, bench_seqlen timing, interleaved with cuDNN, one build.
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit

def variant(new, **kw):
    def run(q, k, v):
        if not new:
            os.environ["FS_NO_PLAN"] = "1"
        try:
            return flashsplit.flash_attn_func(q, k, v, causal=True, **kw)
        finally:
            os.environ.pop("FS_NO_PLAN", None)
    return run

bad = 0
checks = [(32, 16, 512, 512, 128, 16, 0), (16, 16, 1024, 1024, 128, 4, 0), (3, 7, 1000, 1500, 128, 7, 0),
          (5, 8, 777, 700, 64, 2, 0), (4, 16, 1024, 1024, 64, 16, 0), (2, 8, 700, 3000, 128, 8, 3),
          (1, 3, 300, 200, 128, 3, 0), (6, 20, 640, 640, 128, 5, 2), (40, 16, 256, 256, 64, 16, 0)]
for i, (b, h, sq, sk, d, hk, g) in enumerate(checks):
    dt = torch.float16 if i % 2 else torch.bfloat16
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dt)
    k, v = (torch.randn(b, sk, hk, d, device="cuda", dtype=dt) for _ in range(2))
    mask = torch.ones(sq, sk, device="cuda", dtype=torch.bool).tril(sk - sq)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.float().transpose(1, 2) for t in (q, k, v)), attn_mask=mask, enable_gqa=True).transpose(1, 2)
    ref = torch.nan_to_num(ref, nan=0.0)
    new, old = variant(True, num_splits=g)(q, k, v), variant(False, num_splits=g)(q, k, v)
    info = flashsplit.explain(q, k, v, causal=True, num_splits=g) if hasattr(flashsplit, "explain") else {}
    err = float((new.float() - ref).abs().max())
    ok = bool(torch.isfinite(new).all()) and torch.equal(new, old) and err < 2e-2
    bad += not ok
    print(f"check b{b} h{h}/{hk} sq{sq} sk{sk} d{d} G{g} {dt}: identical={torch.equal(new, old)} err={err:.4f} "
          f"block_m={info.get('block_m')} {'ok' if ok else 'FAIL'}", flush=True)
print("failures:", bad, flush=True)
if bad:
    sys.exit(1)
points = [(128, 512, torch.bfloat16), (128, 1024, torch.bfloat16), (128, 512, torch.float16),
          (128, 1024, torch.float16), (64, 512, torch.bfloat16)]
for rnd in range(3):
    for d, s, dt in points:
        b, h = 16384 // s, 2048 // d
        sets = T.make_input_sets(torch, b, h, h, s, s, d, dt)
        q, k, v = sets[0]
        fl = T.attention_flops(b, h, s, s, d, True)
        cud = T.peer_runners(torch, q, k, v, True, ["sdpa_cudnn"])["sdpa_cudnn"][0]
        tim = T.time_cuda_interleaved(torch, [variant(True), variant(False), cud], sets, 5, 40)
        ms = {n: t["median_ms"] for n, t in zip(["new", "old", "cudnn"], tim)}
        print(f"r{rnd} causal d={d} s={s} {dt}: new {fl / ms['new'] / 1e9:.0f} old {fl / ms['old'] / 1e9:.0f} "
              f"cudnn {fl / ms['cudnn'] / 1e9:.0f} | new/old {ms['old'] / ms['new']:.4f} "
              f"x_cudnn new {ms['cudnn'] / ms['new']:.3f} old {ms['cudnn'] / ms['old']:.3f}", flush=True)
        del sets, q, k, v
        torch.cuda.empty_cache()
