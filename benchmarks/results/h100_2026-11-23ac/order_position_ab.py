# Scratch: does a method's place in the interleaved rotation (which call ran just before it)
# change its time? flashsplit num_splits=0 and =1 run the same G = 1 kernel.
import sys, os, statistics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import _timing as T
import torch, flashsplit

def fs(g, causal):
    return lambda q, k, v: flashsplit.flash_attn_func(q, k, v, causal=causal, num_splits=g)

flush_buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")

def timed(fns, q, k, v, reps=30, flush=False):
    for f in fns:
        for _ in range(3):
            f(q, k, v)
    torch.cuda.synchronize()
    ev = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)] for _ in fns]
    for i in range(reps):
        for j, f in enumerate(fns):
            if flush:
                flush_buf.zero_()
            torch.cuda._sleep(400000)
            ev[j][i][0].record()
            f(q, k, v)
            ev[j][i][1].record()
    torch.cuda.synchronize()
    return [statistics.median(s.elapsed_time(e) for s, e in ev[j]) * 1000 for j in range(len(fns))]

for rnd in range(2):
    for d, s, causal in [(128, 512, False), (128, 512, True), (128, 1024, True), (64, 1024, False)]:
        b, h = 16384 // s, 2048 // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        cud = T.peer_runners(torch, q, k, v, causal, ["sdpa_cudnn"])["sdpa_cudnn"][0]
        fla = T.peer_runners(torch, q, k, v, causal, ["sdpa_flash"])["sdpa_flash"][0]
        f0, f1 = fs(0, causal), fs(1, causal)
        a = timed([f0, f1, fla, cud], q, k, v)
        b_ = timed([f1, f0, fla, cud], q, k, v)
        c = timed([f0, f1, cud], q, k, v)
        e = timed([f0, f1, fla, cud], q, k, v, flush=True)
        tag = f"d={d} s={s} causal={causal}"
        print(f"r{rnd} {tag:24s} order fs0,fs1,fla,cud: fs0 {a[0]:.1f} fs1 {a[1]:.1f} cud {a[3]:.1f} | "
              f"fs1,fs0,fla,cud: fs1 {b_[0]:.1f} fs0 {b_[1]:.1f} cud {b_[3]:.1f} | fs0,fs1,cud: {c[0]:.1f} {c[1]:.1f} cud {c[2]:.1f} | "
              f"flushed: fs0 {e[0]:.1f} fs1 {e[1]:.1f} fla {e[2]:.1f} cud {e[3]:.1f} x_cudnn {e[3]/e[0]:.3f}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
