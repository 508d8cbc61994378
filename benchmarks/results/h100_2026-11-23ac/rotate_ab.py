# Scratch A/B: non-causal persistent walk with rounds rotated among the blocks (shipped candidate)
# against the snake walk (FS_NO_ROTATE=1), bench_seqlen timing, interleaved, with cuDNN.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import _timing as T
import torch, flashsplit

def variant(no_rotate, causal=False):
    def run(q, k, v):
        if no_rotate:
            os.environ["FS_NO_ROTATE"] = "1"
        try:
            return flashsplit.flash_attn_func(q, k, v, causal=causal)
        finally:
            os.environ.pop("FS_NO_ROTATE", None)
    return run

bad = 0
for (b, h, sq, sk, d, dt) in [(8, 16, 2048, 2048, 128, torch.bfloat16), (8, 32, 2048, 2048, 64, torch.float16),
                              (3, 7, 1000, 1500, 128, torch.bfloat16), (5, 9, 777, 4096, 64, torch.bfloat16),
                              (2, 16, 4096, 4096, 128, torch.float16), (16, 32, 512, 512, 64, torch.bfloat16),
                              (1, 3, 300, 200, 128, torch.bfloat16)]:
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dt)
    k = torch.randn(b, sk, h, d, device="cuda", dtype=dt)
    v = torch.randn(b, sk, h, d, device="cuda", dtype=dt)
    a = variant(False)(q, k, v)
    c = variant(True)(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2)).transpose(1, 2)
    same = torch.equal(a, c)
    err = float((a.float() - ref).abs().max())
    ok = same and err < 2e-2
    bad += not ok
    print(f"check b{b} h{h} sq{sq} sk{sk} d{d} {dt}: identical={same} err={err:.4f} {'ok' if ok else 'FAIL'}", flush=True)
print("failures:", bad, flush=True)
if bad:
    sys.exit(1)
points = [(128, 2048), (64, 2048), (128, 512), (128, 1024), (128, 4096), (64, 512), (64, 1024), (64, 4096), (128, 8192)]
for rnd in range(3):
    for d, s in points:
        b, h = 16384 // s, 2048 // d
        sets = T.make_input_sets(torch, b, h, h, s, s, d, torch.bfloat16)
        q, k, v = sets[0]
        fl = T.attention_flops(b, h, s, s, d, False)
        cud = T.peer_runners(torch, q, k, v, False, ["sdpa_cudnn"])["sdpa_cudnn"][0]
        pair = [variant(False), variant(True)]
        names = ["rotate", "snake"]
        if rnd % 2:
            pair, names = pair[::-1], names[::-1]
        tim = T.time_cuda_interleaved(torch, pair + [cud], sets, 5, 30)
        ms = {n: t["median_ms"] for n, t in zip(names + ["cudnn"], tim)}
        print(f"r{rnd} d={d} s={s}: rotate {fl / ms['rotate'] / 1e9:.0f} snake {fl / ms['snake'] / 1e9:.0f} "
              f"cudnn {fl / ms['cudnn'] / 1e9:.0f} | rotate/snake {ms['snake'] / ms['rotate']:.4f} "
              f"x_cudnn rotate {ms['cudnn'] / ms['rotate']:.3f} snake {ms['cudnn'] / ms['snake']:.3f}", flush=True)
        del sets, q, k, v
        torch.cuda.empty_cache()
