# Scratch: flashsplit and SDPA cuDNN at the d=64 points, bench timing; run once per build variant.
# Also saves outputs of fixed inputs (incl. large score ranges) for a bitwise compare of builds.
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit
tag = sys.argv[2]
rnd = int(sys.argv[3]) if len(sys.argv) > 3 else 1
print(tag, os.path.dirname(flashsplit.__file__), flush=True)
if rnd == 1:
    torch.manual_seed(0)
    outs = {}
    for (b, h, s, d, causal, mult, dt) in [(2, 16, 1024, 128, False, 1, torch.bfloat16), (2, 16, 1024, 128, True, 1, torch.bfloat16),
                                           (2, 8, 3000, 128, False, 6, torch.bfloat16), (2, 8, 3000, 128, True, 6, torch.float16),
                                           (1, 4, 700, 128, True, 30, torch.float16), (3, 7, 1000, 64, False, 1, torch.bfloat16), (2, 32, 1024, 64, False, 1, torch.bfloat16),
                                           (2, 32, 1024, 64, True, 1, torch.float16), (2, 8, 3000, 64, False, 6, torch.bfloat16),
                                           (2, 8, 3000, 64, True, 6, torch.bfloat16), (1, 4, 700, 64, False, 30, torch.float16),
                                           (2, 16, 2048, 64, False, 1, torch.bfloat16)]:
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dt) for _ in range(3))
        q = q * mult
        o = flashsplit.flash_attn_func(q, k, v, causal=causal)
        ref = torch.nn.functional.scaled_dot_product_attention(*(t.float().transpose(1, 2) for t in (q, k, v)), is_causal=causal).transpose(1, 2)
        key = f"{b},{h},{s},{d},{causal},{mult},{dt}"
        outs[key] = o.cpu()
        print(tag, key, "err", float((o.float() - ref).abs().max()), "nan", bool(o.isnan().any()), flush=True)
    torch.save(outs, f"/tmp/outs_{tag}.pt")
PTS = [(64, 512, False, torch.bfloat16), (64, 1024, False, torch.bfloat16), (64, 2048, False, torch.bfloat16),
       (64, 4096, False, torch.bfloat16), (64, 16384, False, torch.bfloat16), (64, 512, True, torch.bfloat16),
       (64, 2048, True, torch.bfloat16), (64, 8192, True, torch.bfloat16), (64, 1024, False, torch.float16),
       (64, 512, False, torch.float16)]
if os.environ.get("PTS") == "pp":
    PTS = [(128, 512, False, torch.bfloat16), (128, 1024, False, torch.bfloat16), (128, 2048, False, torch.bfloat16),
           (128, 512, True, torch.bfloat16), (128, 1024, True, torch.bfloat16), (128, 2048, True, torch.bfloat16),
           (128, 4096, True, torch.bfloat16), (128, 512, True, torch.float16), (128, 1024, False, torch.float16),
           (64, 1024, True, torch.bfloat16)]
if os.environ.get("PTS") == "pp2":
    PTS = [(128, 512, False, torch.bfloat16), (128, 1024, False, torch.bfloat16), (128, 512, True, torch.bfloat16),
           (128, 1024, True, torch.bfloat16), (128, 512, True, torch.float16), (128, 1024, False, torch.float16),
           (128, 512, False, torch.float16), ("split", 1, 16, 128, 65535, 64), ("split", 1, 16, 8192, 8192, 128)]
if os.environ.get("PTS") == "tall":  # session 21 (results/h100_2026-11-24a): 192-row d=128 tiles
    PTS = [(128, 2048, False, torch.bfloat16), (128, 4096, False, torch.bfloat16), (128, 8192, False, torch.bfloat16),
           (128, 16384, False, torch.bfloat16), (128, 2048, False, torch.float16), (128, 4096, False, torch.float16),
           (128, 1024, False, torch.bfloat16), (64, 2048, False, torch.bfloat16), (128, 2048, True, torch.bfloat16)]


def against_cudnn(b, h, s, sk, d, causal, dt):
    """Median ms of flashsplit and SDPA cuDNN, interleaved (bench timing), and the call's FLOPs."""
    sets = T.make_input_sets(torch, b, h, h, s, sk, d, dt)
    q, k, v = sets[0]
    cud = T.peer_runners(torch, q, k, v, causal, ["sdpa_cudnn"])["sdpa_cudnn"][0]
    fs = lambda q, k, v: flashsplit.flash_attn_func(q, k, v, causal=causal)
    tim = T.time_cuda_interleaved(torch, [fs, cud], sets, 5, 40)
    del sets, q, k, v
    torch.cuda.empty_cache()
    return tim[0]["median_ms"], tim[1]["median_ms"], T.attention_flops(b, h, s, sk, d, causal)


for pt in PTS:
    if pt[0] == "split":
        _, b, h, s, sk, d = pt
        a, c, _ = against_cudnn(b, h, s, sk, d, False, torch.bfloat16)
        print(f"{tag} r{rnd} split {pt[1:]}: fs {a * 1e3:.1f} us cudnn {c * 1e3:.1f} us x_cudnn {c / a:.3f}", flush=True)
        continue
    d, s, causal, dt = pt
    a, c, fl = against_cudnn(16384 // s, 2048 // d, s, s, d, causal, dt)
    print(f"{tag} r{rnd} d={d} s={s} causal={causal} {str(dt)[6:]}: fs {fl / a / 1e9:.0f} cudnn {fl / c / 1e9:.0f} x_cudnn {c / a:.3f}", flush=True)
