#!/usr/bin/env python3
"""Times the kernels fsdpc's cost model prices, on the GPU it runs on.

Needs PyTorch with CUDA (a GPU machine; CI does not run it). Prints one CSV
row per shape: bf16 matrix multiplies (cuBLAS through torch.matmul) at
square sizes and at the Llama 3 8B and 70B layer shapes forward and
backward, and causal scaled-dot-product attention (torch's fused kernel)
forward and forward+backward. Each figure is the median of --reps timed runs
after --warmup, timed with CUDA events; the GPU's SM clock and power draw
are read before and after, and the SM clock after each row (sm_mhz): a
card held down by heat or its power limit times the same multiply slower
later in a run (the H200 table of 2026-11-27 has 8,192 cubed at 786.0
TFLOP/s as square-8192 and 614.6 as llama3-70b-wq-fwd), so the squares are
timed again at the end (label suffix -end) to show the drift.
calibrate/testdata/kernels-*.csv hold its output
and `go test ./calibrate -run KernelShapes` compares the cost model's shape
dependence with it (docs/cost-model.md).

    python3 bench/gpu/kernels.py [--reps 10] > kernels.csv
"""

import argparse
import subprocess
import sys

import torch
import torch.nn.functional as F


def smi(query):
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10).stdout.strip()
        return out.splitlines()[0] if out else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def median_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def gemm_shapes():
    shapes = []  # (label, M, N, K)
    squares = (512, 1024, 2048, 4096, 6144, 8192, 16384)
    for s in squares:
        shapes.append((f"square-{s}", s, s, s))
    # (model, tokens, [(name, in, out)]): Llama 3 8B at torchtitan's 2 x 8192
    # tokens per GPU, 70B at 1 x 8192.
    models = [
        ("llama3-8b", 16384, [("wq", 4096, 4096), ("wkv", 4096, 1024), ("w13", 4096, 14336),
                              ("w2", 14336, 4096), ("output", 4096, 128256)]),
        ("llama3-70b", 8192, [("wq", 8192, 8192), ("wkv", 8192, 1024), ("w13", 8192, 28672),
                              ("w2", 28672, 8192)]),
    ]
    for model, t, layers in models:
        for name, k, n in layers:
            shapes.append((f"{model}-{name}-fwd", t, n, k))   # y = x W
            shapes.append((f"{model}-{name}-dx", t, k, n))    # dx = dy W^T
            shapes.append((f"{model}-{name}-dw", k, n, t))    # dW = x^T dy
    for s in squares[3:]:
        shapes.append((f"square-{s}-end", s, s, s))
    return shapes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("kernels.py: no CUDA device")
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    print(f"# {name}; torch {torch.__version__}; SM clock before {smi('clocks.sm')} MHz, "
          f"power limit {smi('power.limit')} W", flush=True)
    print("kind,label,m,n,k,batch,heads,seq,head_dim,ms,tflops,sm_mhz")
    for label, m, n, k in gemm_shapes():
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        ms = median_ms(lambda: torch.matmul(a, b), args.warmup, args.reps)
        print(f"gemm,{label},{m},{n},{k},,,,,{ms:.4f},{2 * m * n * k / ms / 1e9:.1f},{smi('clocks.sm')}", flush=True)
        del a, b
    for batch, heads, seq, hd in ((2, 32, 2048, 128), (2, 32, 4096, 128), (2, 32, 8192, 128), (1, 64, 8192, 128)):
        q, k, v = (torch.randn(batch, heads, seq, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        # Causal attention does half of the full S x S work: 2 multiplies
        # of 2*S*S*D FLOPs each, halved, per head, forward; backward 2.5x.
        fwd_flops = 2 * 2 * batch * heads * seq * seq * hd / 2
        ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.warmup, args.reps)
        print(f"attention-fwd,b{batch}h{heads}s{seq},,,,{batch},{heads},{seq},{hd},{ms:.4f},{fwd_flops / ms / 1e9:.1f},{smi('clocks.sm')}", flush=True)
        grad = torch.randn(batch, heads, seq, hd, device=dev, dtype=torch.bfloat16)

        def fwd_bwd():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.backward(grad)

        ms = median_ms(fwd_bwd, args.warmup, args.reps)
        print(f"attention-fwd-bwd,b{batch}h{heads}s{seq},,,,{batch},{heads},{seq},{hd},{ms:.4f},{3.5 * fwd_flops / ms / 1e9:.1f},{smi('clocks.sm')}", flush=True)
        del q, k, v, grad
    print(f"# SM clock after {smi('clocks.sm')} MHz, power draw {smi('power.draw')} W", flush=True)


if __name__ == "__main__":
    main()
