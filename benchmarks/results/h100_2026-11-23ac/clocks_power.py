# Scratch: SM clock, power and throttle reasons while one attention shape runs back to back.
import subprocess, sys, time, threading, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import _timing as T
import torch, flashsplit

def sample(stop, rows):
    q = "clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active"
    while not stop.is_set():
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout.strip()
        rows.append(out)
        time.sleep(0.1)

def run(name, fn, seconds=2.5):
    fn(); torch.cuda.synchronize()
    t0 = time.time(); n = 0
    st = torch.cuda.Event(enable_timing=True); en = torch.cuda.Event(enable_timing=True)
    stop = threading.Event(); rows = []
    th = threading.Thread(target=sample, args=(stop, rows)); th.start()
    st.record()
    while time.time() - t0 < seconds:
        for _ in range(20): fn()
        n += 20
        torch.cuda.synchronize()
    en.record(); torch.cuda.synchronize()
    stop.set(); th.join()
    ms = st.elapsed_time(en) / n
    mid = rows[len(rows) // 3: 2 * len(rows) // 3] or rows
    print(f"{name}: {ms*1000:.1f} us/call; samples (sm MHz, mem MHz, W, limit W, C, throttle): {mid[:6]}", flush=True)

cfg = [(128, 512, False), (64, 1024, False), (64, 512, False), (128, 16384, False), (128, 2048, False)]
for d, s, causal in cfg:
    b, h = 16384 // s, 2048 // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cud = T.peer_runners(torch, q, k, v, causal, ["sdpa_cudnn"])["sdpa_cudnn"][0]
    run(f"fs    d={d} s={s}", lambda: flashsplit.flash_attn_func(q, k, v, causal=causal))
    run(f"cudnn d={d} s={s}", lambda: cud(q, k, v))
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
run("matmul 8192^3", lambda: a @ a)
