# Scratch: is flashsplit's slow mode at causal d=128 512 rows set by the kernel that ran just
# before it? Each timed call follows one chosen predecessor (sleeps around, as in _timing).
import os, sys, statistics, random
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import _timing as T
import torch, flashsplit
REPS = int(os.environ.get("REPS", "80"))
for causal, dt, s in [(True, torch.float16, 512), (False, torch.bfloat16, 512)]:
    b, h, d = 16384 // s, 16, 128
    sets = T.make_input_sets(torch, b, h, h, s, s, d, dt)
    q, k, v = sets[0]
    peers = T.peer_runners(torch, q, k, v, causal, ["sdpa_flash", "sdpa_cudnn"])
    fs = lambda q, k, v: flashsplit.flash_attn_func(q, k, v, causal=causal)
    cud = peers["sdpa_cudnn"][0]
    fla = peers["sdpa_flash"][0]
    # other work of our own kernel (same code, other data) and a pure L2 sweep (tiny code)
    q2, k2, v2 = (torch.randn(2, 2048, 16, 128, device="cuda", dtype=dt) for _ in range(3))
    own_other = lambda: flashsplit.flash_attn_func(q2, k2, v2, causal=False)
    big = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    sweep = lambda: big.add_(1)
    if os.environ.get("SET") == "2":
        qo, ko, vo = (torch.randn_like(q) for _ in range(3))
        nb = max(1, b // 16)  # the first batches (~1/16 of the data: our first round's heads)
        preds = {"cudnn": lambda: cud(q, k, v), "flash": lambda: fla(q, k, v),
                 "cudnn_other": lambda: cud(qo, ko, vo), "read_all": lambda: (q.sum(), k.sum(), v.sum()),
                 "read_first": lambda: (q[:nb].sum(), k[:nb].sum(), v[:nb].sum()),
                 "long_sleep": lambda: torch.cuda._sleep(2000000),
                 "flash_then_read_first": lambda: (fla(q, k, v), q[:nb].sum(), k[:nb].sum(), v[:nb].sum())}
    else:
        preds = {"none": None, "fs": lambda: fs(q, k, v), "cudnn": lambda: cud(q, k, v), "flash": lambda: fla(q, k, v),
                 "fs_other": own_other, "l2_sweep": sweep}
    targets = {"fs": lambda: fs(q, k, v), "cudnn": lambda: cud(q, k, v)}
    for f in [f for f in preds.values() if f is not None] + list(targets.values()):
        for _ in range(3): f()
    torch.cuda.synchronize()
    rng = random.Random(0)
    combos = [(p, t) for p in preds for t in targets]
    recs = []
    for rep in range(REPS):
        rng.shuffle(combos)
        for p, t in combos:
            if preds[p] is not None:
                torch.cuda._sleep(100000)
                preds[p]()
            torch.cuda._sleep(100000)
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            st.record(); targets[t](); en.record()
            recs.append((p, t, st, en))
    torch.cuda.synchronize()
    print(f"{'causal' if causal else 'full'} {str(dt)[6:]} s={s}", flush=True)
    for t in targets:
        for p in preds:
            ts = sorted(st.elapsed_time(en) * 1e3 for p2, t2, st, en in recs if p2 == p and t2 == t)
            print(f"  {t:5s} after {p:21s}: median {statistics.median(ts):6.1f} p10 {ts[len(ts)//10]:6.1f} p90 {ts[9*len(ts)//10]:6.1f} min {ts[0]:6.1f}", flush=True)
    del sets, q, k, v, big
    torch.cuda.empty_cache()
