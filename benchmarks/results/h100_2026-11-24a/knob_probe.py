# Scratch: per-call time distributions of launch variants (env knobs read per launch) at the
# 512-row d=128 points, interleaved with SDPA cuDNN call by call, sleeps as in _timing.
import os, sys, statistics, random
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit
REPS = int(os.environ.get("REPS", "60"))
def variant(env, causal):
    def run(q, k, v):
        for key, val in env.items(): os.environ[key] = val
        out = flashsplit.flash_attn_func(q, k, v, causal=causal)
        for key in env: del os.environ[key]
        return out
    return run
for causal, dt, s in [(True, torch.float16, 512), (True, torch.bfloat16, 512), (False, torch.bfloat16, 512), (False, torch.float16, 512)]:
    b, h, d = 16384 // s, 16, 128
    sets = T.make_input_sets(torch, b, h, h, s, s, d, dt)
    q, k, v = sets[0]
    fns = {"fs": variant({}, causal),
           "np": variant({"FS_X_PERSIST": "0"}, causal),
           "carry_flip": variant({"FS_X_CARRY": "0" if causal else "1"}, causal),
           "cudnn": T.peer_runners(torch, q, k, v, causal, ["sdpa_cudnn"])["sdpa_cudnn"][0]}
    if not causal:
        fns["no_tail"] = variant({"FLASHSPLIT_DISABLE_TAIL_SPLIT": "1"}, causal)
        fns["np_no_tail"] = variant({"FLASHSPLIT_DISABLE_TAIL_SPLIT": "1", "FS_X_PERSIST": "0"}, causal)
    names = list(fns)
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=causal).transpose(1, 2)
    for nm, f in fns.items():
        for i in range(3): o = f(q, k, v)
        if nm != "cudnn":
            print(f"  check {nm}: max err {float((o.float() - ref.float()).abs().max()):.4f}", flush=True)
    torch.cuda.synchronize()
    rng = random.Random(0)
    recs = []
    for rep in range(REPS):
        order = names[:]; rng.shuffle(order)
        for nm in order:
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(200000)
            st.record(); fns[nm](q, k, v); en.record()
            recs.append((nm, st, en))
    torch.cuda.synchronize()
    times = {nm: sorted(st.elapsed_time(en) * 1e3 for n2, st, en in recs if n2 == nm) for nm in names}
    cud = statistics.median(times["cudnn"])
    for nm in names:
        ts = times[nm]
        med = statistics.median(ts)
        print(f"{'causal' if causal else 'full'} {str(dt)[6:]} {nm:11s} median {med:6.1f} p10 {ts[len(ts)//10]:6.1f} p90 {ts[9*len(ts)//10]:6.1f} x_cudnn {cud/med:.3f} | " + " ".join(f"{t:.0f}" for t in ts[::3]), flush=True)
    del sets, q, k, v
    torch.cuda.empty_cache()
