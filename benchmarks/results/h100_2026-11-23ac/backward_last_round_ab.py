# Scratch A/B: causal snake walk whose part-full last round also runs backwards after a forward
# round (FS_SNAKE_LAST=1) against the shipped snake, bench_seqlen timing, interleaved, with cuDNN.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import _timing as T
import torch, flashsplit

def variant(on, causal=True):
    def run(q, k, v):
        if on:
            os.environ["FS_SNAKE_LAST"] = "1"
        try:
            return flashsplit.flash_attn_func(q, k, v, causal=causal)
        finally:
            os.environ.pop("FS_SNAKE_LAST", None)
    return run

bad = 0
for (b, h, sq, sk, d, dt) in [(32, 16, 512, 512, 128, torch.bfloat16), (16, 16, 1024, 1024, 128, torch.float16),
                              (3, 7, 1000, 1500, 128, torch.bfloat16), (5, 9, 777, 700, 64, torch.bfloat16),
                              (2, 16, 4096, 4096, 128, torch.float16), (4, 16, 1024, 1024, 64, torch.bfloat16),
                              (1, 3, 300, 200, 128, torch.bfloat16)]:
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dt)
    k = torch.randn(b, sk, h, d, device="cuda", dtype=dt)
    v = torch.randn(b, sk, h, d, device="cuda", dtype=dt)
    a = variant(False)(q, k, v)
    c = variant(True)(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2),
        attn_mask=torch.ones(sq, sk, device="cuda", dtype=torch.bool).tril(sk - sq)).transpose(1, 2)
    same = torch.equal(a, c)
    err = float(torch.nan_to_num((a.float() - ref).abs(), nan=0.0).max())  # rows with no key
    ok = same and err < 2e-2
    bad += not ok
    print(f"check b{b} h{h} sq{sq} sk{sk} d{d} {dt}: identical={same} err={err:.4f} {'ok' if ok else 'FAIL'}", flush=True)
print("failures:", bad, flush=True)
if bad:
    sys.exit(1)
points = [(128, 512), (128, 1024), (128, 2048), (64, 512), (64, 1024)]
for rnd in range(3):
    for d, s in points:
        b, h = 16384 // s, 2048 // d
        sets = T.make_input_sets(torch, b, h, h, s, s, d, torch.bfloat16)
        q, k, v = sets[0]
        fl = T.attention_flops(b, h, s, s, d, True)
        cud = T.peer_runners(torch, q, k, v, True, ["sdpa_cudnn"])["sdpa_cudnn"][0]
        pair = [variant(True), variant(False)]
        names = ["new", "old"]
        if rnd % 2:
            pair, names = pair[::-1], names[::-1]
        tim = T.time_cuda_interleaved(torch, pair + [cud], sets, 5, 30)
        ms = {n: t["median_ms"] for n, t in zip(names + ["cudnn"], tim)}
        print(f"r{rnd} causal d={d} s={s}: new {fl / ms['new'] / 1e9:.0f} old {fl / ms['old'] / 1e9:.0f} "
              f"cudnn {fl / ms['cudnn'] / 1e9:.0f} | new/old {ms['old'] / ms['new']:.4f} "
              f"x_cudnn new {ms['cudnn'] / ms['new']:.3f} old {ms['cudnn'] / ms['old']:.3f}", flush=True)
        del sets, q, k, v
        torch.cuda.empty_cache()
