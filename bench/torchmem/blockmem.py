#!/usr/bin/env python3
"""Measures what a torchtitan Llama 3 block keeps for backward, and what its
backward holds while it runs, eager and compiled, per token.

The block is torchtitan's at 9dec370 (torchtitan/models/llama/model.py and
models/norms.py, read for semantics): RMSNorm as `_norm(x.float()).type_as(x)
* weight`, complex RoPE (`view_as_complex` of the fp32 upcast times
freqs_cis, `view_as_real`, `type_as`), repeat_kv's expand and reshape, causal
SDPA, wo, SwiGLU `w2(silu(w1(x)) * w3(x))`, two residual adds. Checkpointing
is none, full (torch.utils.checkpoint, non-reentrant) or torchtitan's per-op
policy (parallelize_llama.py `_save_list` and `_custom_policy`: save every
op in the list except every second aten.mm, recompute the rest).

Eager, a TorchDispatchMode follows every storage an op returns (weakly) and
notes after each op which are alive: the bytes saved for backward are those
alive after forward other than the block's output (the block's input
counted when the block holds it), and the backward peak is the most alive at
once during backward, parameters' gradients and the block's output left out
(fsdpc models the unsharded gradients apart, and the output is the next
block's input). Allocations an op makes and frees inside itself (kernel
workspaces) are not seen.

Compiled, torch.compile with Inductor's decompositions, joint-graph passes
and min-cut partitioner (torch._inductor.compile_fx.partition_fn: what
Inductor partitions; the backend does not
generate kernels, so no C++ compiler is needed): the forward graph's saved
outputs are what crosses to backward; the forward and backward graphs are
then run op by op under the same tracker. Inductor's generated code fuses
the element-wise ops of the backward graph, so the compiled backward peak
measured this way is an upper bound on Inductor's.

On CPU, SDPA runs _scaled_dot_product_flash_attention_for_cpu, which saves
and returns what CUDA's flash kernel does (output and an fp32 log-sum-exp
per head and token; its backward writes dq, dk, dv); the policy treats it as
torchtitan's list treats the CUDA op. CUDA's flash backward also holds an
fp32 dq accumulator (tokens x heads x head_dim x 4 bytes) inside the
kernel, which no op returns: the report adds it by name.

    cp bench/torchmem/blockmem.py /var/cache/fsdpc/torch-forky/tmp/
    chroot /var/cache/fsdpc/torch-forky python3 /tmp/blockmem.py --seq 64 --out /tmp/out.json

(about a minute on two cores; bench/torchmem/llama3-8b-seq64.json is that
run, docs/cost-model.md "What a block keeps, measured" reads it).

Prints JSON: per mode, bytes per token and in units of tokens x dim x 2
(bf16 hidden-wide tensors), with the tensors behind each figure.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import sys
from collections import defaultdict
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

aten = torch.ops.aten


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def freqs_cis(head_dim: int, seq: int, theta: float = 500000.0) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def rope(xq: torch.Tensor, xk: torch.Tensor, fc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cq = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    ck = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = fc[: xq.shape[1]].view(1, xq.shape[1], 1, cq.shape[-1])
    oq = torch.view_as_real(cq * f).flatten(3)
    ok = torch.view_as_real(ck * f).flatten(3)
    return oq.type_as(xq), ok.type_as(xk)


def repeat_kv(x: torch.Tensor, n: int) -> torch.Tensor:
    b, s, h, d = x.shape
    if n == 1:
        return x
    return x.unsqueeze(3).expand(b, s, h, n, d).reshape(b, s, h * n, d)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, fc: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        xq = self.wq(x).view(b, s, -1, self.head_dim)
        xk = self.wk(x).view(b, s, -1, self.head_dim)
        xv = self.wv(x).view(b, s, -1, self.head_dim)
        xq, xk = rope(xq, xk, fc)
        n = self.heads // self.kv_heads
        q = xq.transpose(1, 2)
        k = repeat_kv(xk, n).transpose(1, 2)
        v = repeat_kv(xv, n).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, ffn: int) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads, kv_heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, ffn)

    def forward(self, x: torch.Tensor, fc: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), fc)
        return h + self.feed_forward(self.ffn_norm(h))


# torchtitan's _save_list (9dec370 to 6fc499f), with the CPU's flash
# attention beside CUDA's.
SAVE = {
    aten.mm.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
    aten.abs.default,
    aten.max.default,
}


def op_context() -> Any:
    meta: dict[str, int] = defaultdict(int)

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        key = ("recompute" if ctx.is_recompute else "forward") + "_mm_count"
        if func == aten.mm.default:
            meta[key] += 1
        save = func in SAVE and not (func == aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Wrapped(nn.Module):
    def __init__(self, block: Block, mode: str) -> None:
        super().__init__()
        self.block, self.mode = block, mode

    def forward(self, x: torch.Tensor, fc: torch.Tensor) -> torch.Tensor:
        if self.mode == "none":
            return self.block(x, fc)
        if self.mode == "full":
            out: torch.Tensor = checkpoint(self.block, x, fc, use_reentrant=False, preserve_rng_state=False)
            return out
        out = checkpoint(self.block, x, fc, use_reentrant=False, preserve_rng_state=False, context_fn=op_context)
        return out


class Tracker(TorchDispatchMode):
    """Follows every storage an op returns; after each op notes the live ones."""

    def __init__(self, outside: set[int]) -> None:
        super().__init__()
        self.outside = outside
        self.serial = 0
        # storage key -> (weak ref, serial, bytes, producing op, shape)
        self.refs: dict[int, tuple[StorageWeakRef, int, int, str, str]] = {}
        self.phase = "forward"
        self.snaps: list[tuple[str, str, list[int]]] = []
        self.info: dict[int, tuple[int, str, str]] = {}

    def note(self, t: torch.Tensor, op: str) -> int:
        st = t.untyped_storage()
        key = st._cdata
        if key in self.outside or st.nbytes() == 0:
            return -1
        cur = self.refs.get(key)
        if cur is None or cur[0].expired():
            self.serial += 1
            desc = f"{list(t.shape)} {str(t.dtype).removeprefix('torch.')}"
            self.refs[key] = (StorageWeakRef(st), self.serial, st.nbytes(), op, desc)
            self.info[self.serial] = (st.nbytes(), op, desc)
            return self.serial
        return cur[1]

    def live(self) -> list[int]:
        return [v[1] for v in self.refs.values() if not v[0].expired()]

    def snap(self, op: str) -> None:
        self.snaps.append((self.phase, op, self.live()))

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket.__name__)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.note(t, name)
        self.snap(name)
        return out

    def serial_of(self, t: torch.Tensor) -> int:
        cur = self.refs.get(t.untyped_storage()._cdata)
        return cur[1] if cur is not None and not cur[0].expired() else -1


def describe(tr: Tracker, serials: list[int], per: float) -> list[dict[str, Any]]:
    rows = []
    for s in sorted(serials, key=lambda s: -tr.info[s][0]):
        b, op, desc = tr.info[s]
        rows.append({"bytes_per_token": b / per, "op": op, "tensor": desc})
    return rows


def external(*groups: Any) -> set[int]:
    keys = set()
    for g in groups:
        for t in g:
            keys.add(t.untyped_storage()._cdata)
    return keys


def run_tracked(
    fwd: Callable[[torch.Tensor], tuple[torch.Tensor, Callable[[torch.Tensor], None]]],
    block: Block,
    x0: torch.Tensor,
    fc: torch.Tensor,
    dy: torch.Tensor,
    tokens: int,
    unit: int,
) -> dict[str, Any]:
    """fwd(x) runs forward and returns the output and a function running
    backward from a gradient of it."""
    for p in block.parameters():
        p.grad = None
    x0.grad = None
    gc.collect()
    tr = Tracker(external(block.parameters(), [fc, x0]))
    with tr:
        tr.phase = "input"
        x = x0 * 1  # a non-leaf input, as a block's input is
        y, backward = fwd(x)
        del x
        gc.collect()
        tr.phase = "forward-end"
        tr.snap("end of forward")
        y_serial = tr.serial_of(y)
        saved = [s for s in tr.snaps[-1][2] if s != y_serial]
        tr.phase = "backward"
        g = dy.clone()
        backward(g)
        del g
        gc.collect()
        tr.phase = "backward-end"
        tr.snap("end of backward")
    grads = {tr.serial_of(p.grad) for p in block.parameters() if p.grad is not None}
    excluded = grads | {y_serial}

    def total(ss: list[int]) -> int:
        return sum(tr.info[s][0] for s in ss if s not in excluded)

    fwd_snaps = [sn for sn in tr.snaps if sn[0] == "input"]
    peak_fwd = max(fwd_snaps, key=lambda sn: total(sn[2]))
    bwd = [sn for sn in tr.snaps if sn[0] == "backward"]
    peak = max(bwd, key=lambda sn: total(sn[2]))
    per = float(tokens)
    saved_b = total(saved)
    return {
        "saved_bytes_per_token": saved_b / per,
        "saved_units": saved_b / (tokens * unit),
        "saved": describe(tr, saved, per),
        "forward_peak_bytes_per_token": total(peak_fwd[2]) / per,
        "forward_peak_op": peak_fwd[1],
        "backward_peak_bytes_per_token": total(peak[2]) / per,
        "backward_peak_units": total(peak[2]) / (tokens * unit),
        "backward_peak_op": peak[1],
        "backward_peak_live": describe(tr, [s for s in peak[2] if s not in excluded], per),
        "ops_seen": len(tr.snaps),
    }


def eager(block: Block, mode: str, x0: torch.Tensor, fc: torch.Tensor, dy: torch.Tensor, tokens: int, unit: int) -> dict[str, Any]:
    w = Wrapped(block, mode)

    def fwd(x: torch.Tensor) -> tuple[torch.Tensor, Callable[[torch.Tensor], None]]:
        y = w(x, fc)
        return y, lambda g: torch.autograd.backward(y, g)

    return run_tracked(fwd, block, x0, fc, dy, tokens, unit)


class Captured:
    def __init__(self) -> None:
        self.fw: torch.fx.GraphModule | None = None
        self.bw: torch.fx.GraphModule | None = None
        self.num_fwd_outputs = 0
        self.inputs: list[Any] = []


def compiled(block: Block, mode: str, x0: torch.Tensor, fc: torch.Tensor, dy: torch.Tensor, tokens: int, unit: int) -> dict[str, Any]:
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.compile_fx import partition_fn, select_decomp_table

    cap = Captured()

    def partition(joint: torch.fx.GraphModule, inputs: Any, **kw: Any) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
        # Inductor's own: its joint-graph passes, then the min-cut partitioner.
        fw, bw = partition_fn(joint, inputs, **kw)
        cap.fw, cap.bw, cap.num_fwd_outputs = fw, bw, kw["num_fwd_outputs"]
        return fw, bw

    def nop(gm: torch.fx.GraphModule, _: Any) -> Any:
        return gm

    aot = aot_autograd(fw_compiler=nop, bw_compiler=nop, partition_fn=partition, decompositions=select_decomp_table)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        cap.inputs = list(example_inputs)
        return aot(gm, example_inputs)

    torch._dynamo.reset()
    w = torch.compile(Wrapped(block, mode), backend=backend, fullgraph=True)
    xs = (x0 * 1).detach().requires_grad_(True)
    y = w(xs, fc)
    y.backward(dy)
    assert cap.fw is not None and cap.bw is not None
    fw, bw = cap.fw, cap.bw
    saved_nodes = list(fw.graph.output_node().args[0])[cap.num_fwd_outputs :]
    static = [
        {"node": str(n), "tensor": f"{list(n.meta['val'].shape)} {str(n.meta['val'].dtype).removeprefix('torch.')}",
         "bytes_per_token": n.meta["val"].untyped_storage().nbytes() / tokens if hasattr(n.meta["val"], "untyped_storage") else 0}
        for n in saved_nodes if isinstance(n, torch.fx.Node) and isinstance(n.meta.get("val"), torch.Tensor)
    ]
    # Map the captured graph inputs back to the real tensors: the block's
    # parameters and freqs_cis are the same objects; the one input that is
    # neither is x.
    ids = {id(p): p for p in block.parameters()}
    ids[id(fc)] = fc
    x_at = [i for i, t in enumerate(cap.inputs) if isinstance(t, torch.Tensor) and id(t) not in ids]
    if len(x_at) != 1:
        raise RuntimeError(f"expected one activation input among the compiled graph's {len(cap.inputs)}, found {len(x_at)}")
    primal_names = [n for n in fw.graph.nodes if n.op == "placeholder"]
    if len(primal_names) != len(cap.inputs):
        raise RuntimeError(f"forward graph takes {len(primal_names)} inputs, dynamo passed {len(cap.inputs)}")

    def fwd(x: torch.Tensor) -> tuple[torch.Tensor, Callable[[torch.Tensor], None]]:
        args = list(cap.inputs)
        args[x_at[0]] = x
        with torch.no_grad():
            outs = fw(*args)
        args.clear()
        y = outs[0]
        saved = list(outs[cap.num_fwd_outputs :])
        del outs

        def backward(g: torch.Tensor) -> None:
            with torch.no_grad():
                grads = bw(*saved, g)
            saved.clear()
            params = list(cap.inputs)
            for i, gr in enumerate(grads):
                if gr is None or i == x_at[0]:
                    continue
                t = params[i]
                if isinstance(t, nn.Parameter):
                    t.grad = gr
            x0.grad = grads[x_at[0]]

        return y, backward

    res = run_tracked(fwd, block, x0, fc, dy, tokens, unit)
    res["saved_static"] = sorted(static, key=lambda r: -r["bytes_per_token"])
    res["saved_static_bytes_per_token"] = sum(r["bytes_per_token"] for r in static)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--modes", default="none,full,op")
    ap.add_argument("--compile", default="eager,compiled", help="eager, compiled or both")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="-", help="where the JSON goes (default stdout; UCX's start-up line can land there too)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dt = torch.bfloat16
    block = Block(a.dim, a.heads, a.kv_heads, a.ffn).to(dt)
    for p in block.parameters():
        nn.init.normal_(p, std=0.02) if p.dim() > 1 else nn.init.ones_(p)
    fc = freqs_cis(a.dim // a.heads, a.seq)
    tokens = a.batch * a.seq
    x0 = torch.randn(a.batch, a.seq, a.dim, dtype=dt, requires_grad=True)
    dy = torch.randn(a.batch, a.seq, a.dim, dtype=dt)
    unit = a.dim * 2
    out: dict[str, Any] = {
        "torch": torch.__version__,
        "shape": {"dim": a.dim, "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn, "batch": a.batch, "seq": a.seq},
        "unit": "bytes per token; *_units in tokens x dim x 2 bytes",
        # CUDA's flash backward (PyTorch's flash_api.cpp mha_bwd) holds an
        # fp32 accumulator for dq inside the kernel, not seen on CPU.
        "cuda_flash_dq_accum_bytes_per_token": a.dim * 4,
        "runs": {},
    }
    for how in a.compile.split(","):
        for mode in a.modes.split(","):
            fn = eager if how == "eager" else compiled
            print(f"blockmem: {how} {mode}", file=sys.stderr, flush=True)
            out["runs"][f"{how}/{mode}"] = fn(block, mode, x0, fc, dy, tokens, unit)
    text = json.dumps(out, indent=1) + "\n"
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
