"""FSDP2's collectives on CPU ranks over gloo.

gloo has no bf16 or fp16 collectives and no PREMUL_SUM, which FSDP2 asks
for under mixed precision and a gradient divide factor. On a CPU mesh
apply_plan installs these through FSDP2's own hooks for custom
communication (``set_custom_all_gather`` / ``set_custom_reduce_scatter``):
an all-gather moves the same bytes as uint8, a reduction runs in fp32 and
a PREMUL_SUM becomes a sum scaled by its factor, so a plan made for NCCL
runs unchanged on gloo with the same results. The collective FSDP2 asked
for is what verify_first_step records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter

from . import verify

# The functions these call, taken before verify_first_step wraps
# torch.distributed's, so a collective is recorded once, as FSDP2 asked.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

_LOW = (torch.bfloat16, torch.float16)


class _Alloc:
    def allocate(self, size: Sequence[int], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)


class GlooAllGather(_Alloc, AllGather):  # type: ignore[misc]
    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup, async_op: bool = False) -> Any:
        verify.note("all-gather", output_tensor, input_tensor, group, None)
        if input_tensor.dtype in _LOW:
            return _all_gather(output_tensor.view(torch.uint8), input_tensor.view(torch.uint8), group=group, async_op=async_op)
        return _all_gather(output_tensor, input_tensor, group=group, async_op=async_op)


class GlooReduceScatter(_Alloc, ReduceScatter):  # type: ignore[misc]
    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup, op: Any, async_op: bool = False) -> Any:
        verify.note("reduce-scatter", output_tensor, input_tensor, group, op)
        factor = getattr(op, "factor", None)
        out, inp = output_tensor, input_tensor
        if inp.dtype in _LOW:
            out, inp = output_tensor.float(), input_tensor.float()
        run_op = dist.ReduceOp.SUM if factor is not None else op
        _reduce_scatter(out, inp, op=run_op, group=group, async_op=False)
        if factor is not None:
            out.mul_(factor)
        if out is not output_tensor:
            output_tensor.copy_(out)
        return None
