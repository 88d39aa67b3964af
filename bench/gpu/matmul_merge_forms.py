"""matmul_merge_forms.py: on a CUDA device, the three ways a rewrite can run the Q/K/V products of one
BERT layer of Tensat's BERT ([64,1024] by three [1024,1024] weights), each captured in a CUDA graph and
timed by replays (median of 30 x 20; fp32, TF32 off): torch.matmul of the 2-D input by the stacked
[3,1024,1024] weights (what merge_parallel_matmul_batched produces, as tools/onnx_torch.py runs it),
bmm on a stride-0 expanded input, bmm on a materialised one, three GEMMs (the input model) and one GEMM
against the weights concatenated along N (merge_parallel_matmul). docs/REWRITE.md, "Tensat's seven
measured on an H100". Run: python3 bench/gpu/matmul_merge_forms.py (needs a GPU)."""
import torch
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
x = torch.randn(64, 1024, device=dev)
W = torch.randn(3, 1024, 1024, device=dev)
Ws = [W[i].contiguous() for i in range(3)]
xe = x.expand(3, 64, 1024)
cases = {
    "matmul 2-D @ 3-D (torch.matmul broadcast)": lambda: torch.matmul(x, W),
    "bmm on expanded x (stride-0 batch)": lambda: torch.bmm(xe, W),
    "bmm on materialised x": lambda: torch.bmm(xe.contiguous(), W),
    "three GEMMs": lambda: [x @ w for w in Ws],
    "one GEMM against [1024, 3072] (concat along N)": (lambda Wc=torch.cat(Ws, 1): x @ Wc),
}
for name, fn in cases.items():
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g): fn()
    ts = []
    for _ in range(30):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(20): g.replay()
        b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 20 * 1e3)
    ts.sort()
    print(f"{name}: {ts[15]:.1f} us per replay")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
    torch.matmul(x, W); torch.cuda.synchronize()
print([e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA][:6])
