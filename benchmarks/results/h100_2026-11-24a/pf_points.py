# Scratch: flashsplit vs SDPA cuDNN with SDPA flash in the interleave (so calls follow foreign
# kernels as in bench_seqlen), _timing's interleaved timing; one process per build variant.
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit
tag, rnd = sys.argv[2], sys.argv[3]
REPS = int(os.environ.get("REPS", "40"))
PTS = [(128, 512, False, torch.bfloat16), (128, 512, True, torch.bfloat16), (128, 512, True, torch.float16),
       (128, 1024, False, torch.bfloat16), (128, 1024, True, torch.bfloat16), (128, 2048, False, torch.bfloat16),
       (128, 4096, False, torch.bfloat16), (64, 512, False, torch.bfloat16), (64, 1024, True, torch.bfloat16),
       (64, 2048, False, torch.bfloat16)]
for d, s, causal, dt in PTS:
    b, h = 16384 // s, 2048 // d
    sets = T.make_input_sets(torch, b, h, h, s, s, d, dt)
    q, k, v = sets[0]
    fl = T.attention_flops(b, h, s, s, d, causal)
    peers = T.peer_runners(torch, q, k, v, causal, ["sdpa_flash", "sdpa_cudnn"])
    fs = lambda q, k, v: flashsplit.flash_attn_func(q, k, v, causal=causal)
    tim = T.time_cuda_interleaved(torch, [fs, peers["sdpa_flash"][0], peers["sdpa_cudnn"][0]], sets, 5, REPS)
    a, c = tim[0]["median_ms"], tim[2]["median_ms"]
    print(f"{tag} r{rnd} d={d} s={s} causal={causal} {str(dt)[6:]}: fs {fl / a / 1e9:.0f} [{tim[0]['p10_ms']*1e3:.1f}-{tim[0]['p90_ms']*1e3:.1f} us] cudnn {fl / c / 1e9:.0f} x_cudnn {c / a:.3f}", flush=True)
    del sets, q, k, v
    torch.cuda.empty_cache()
