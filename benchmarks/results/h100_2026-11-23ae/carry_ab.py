# Scratch: carry on/off (FS_SCRATCH_CARRY) at the short d=128 points, one build, alternated in one process.
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit
for rnd in (1, 2):
  for d, s, causal, dt in [(128, 512, False, torch.bfloat16), (128, 512, False, torch.float16), (128, 1024, False, torch.bfloat16),
                           (128, 512, True, torch.bfloat16), (128, 512, True, torch.float16), (64, 512, False, torch.bfloat16)]:
    b, h = 16384 // s, 2048 // d
    sets = T.make_input_sets(torch, b, h, h, s, s, d, dt)
    q, k, v = sets[0]
    fl = T.attention_flops(b, h, s, s, d, causal)
    cud = T.peer_runners(torch, q, k, v, causal, ["sdpa_cudnn"])["sdpa_cudnn"][0]
    def mk(c):
        def f(q, k, v):
            os.environ["FS_SCRATCH_CARRY"] = c
            return flashsplit.flash_attn_func(q, k, v, causal=causal)
        return f
    outs = [mk("1")(q, k, v), mk("0")(q, k, v)]
    tim = T.time_cuda_interleaved(torch, [mk("1"), mk("0"), cud], sets, 5, 40)
    a1, a0, c = (t["median_ms"] for t in tim)
    print(f"r{rnd} d={d} s={s} causal={causal} {str(dt)[6:]}: carry {c / a1:.3f} nocarry {c / a0:.3f} x_cudnn; maxdiff {float((outs[0].float() - outs[1].float()).abs().max()):.2e}", flush=True)
    del sets, q, k, v
    torch.cuda.empty_cache()
