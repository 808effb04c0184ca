"""A stand-in nn.Module with a model file's structure.

``build_model(tree)`` makes, from the module tree fsdpc writes for a model
(the ``"model"`` of ``fsdpc emit torch``'s MODEL, torchgen's Node), an
nn.Module with the model's modules and parameters in its registration
order, ties as one Parameter and frozen parameters frozen, whose forward
passes data through forward's arguments as the model file's dataflow says,
so FSDP2's hooks fire as in the real model. The arithmetic is not the
model's: it is for checking a plan (and FSDP2's collectives) without the
real model's code, not for training it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["build_model", "DTYPES"]

DTYPES: dict[str, torch.dtype] = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


class _Node(nn.Module):  # type: ignore[misc]
    """One module of the model file. forward takes the outputs named in
    ``ext`` and returns those named in ``outs`` (a compute module: its own
    output)."""

    def __init__(self, spec: dict[str, Any], owners: dict[str, nn.Parameter], prefix: str, device: torch.device) -> None:
        super().__init__()
        self.device = device
        name = spec["name"]
        self.fqn: str = prefix + name if name else ""
        self.compute: bool = bool(spec.get("compute", False))
        self.exec_order: list[str] = list(spec.get("exec", []))
        self.ext: list[str] = list(spec.get("ext", []))
        self.outs: list[str] = list(spec.get("outs", []))
        child_prefix = self.fqn + "." if self.fqn else ""
        for child in spec.get("children", []):
            self.add_module(child["name"], _Node(child, owners, child_prefix, device))
        for p in spec.get("params", []):
            self.register_parameter(p["name"], owners[p.get("tied") or p["fqn"]])

    def forward(self, *args: torch.Tensor) -> Any:
        if self.compute:
            # What the module reads (the batch, when it reads no module),
            # plus every parameter of it, so each gets a gradient.
            x = torch.ones(2, device=self.device)
            for a in args:
                x = x + a
            for p in self.parameters():
                x = x + (p.to(torch.float32) * 1e-3).sum()
            return x
        env: dict[str, torch.Tensor] = dict(zip(self.ext, args))
        for name in self.exec_order:
            child = getattr(self, name)
            res = child(*[env[s] for s in child.ext])
            if child.compute:
                env[child.fqn] = res
            else:
                env.update(zip(child.outs, res))
        # A container's own parameters (ViT's cls_token) are used by its
        # own forward code; here they join its outputs.
        own = [(p.to(torch.float32) * 1e-3).sum() for p in self.parameters(recurse=False)]
        if own:
            extra = torch.stack(own).sum()
            return tuple(env[o] + extra for o in self.outs)
        return tuple(env[o] for o in self.outs)


def build_model(tree: dict[str, Any], device: torch.device | str = "cpu", seed: int = 0) -> nn.Module:
    """The model's modules as nn.Modules with deterministic weights. tree
    is the module tree ({"model": …} or the root node itself)."""
    root = tree.get("model", tree)
    gen = torch.Generator().manual_seed(seed)
    owners: dict[str, nn.Parameter] = {}

    def walk(node: dict[str, Any]) -> None:
        for p in node.get("params", []):
            if not p.get("tied"):
                dtype = DTYPES[p["dtype"]]
                t = torch.randn(p["shape"], generator=gen, dtype=torch.float32)
                owners[p["fqn"]] = nn.Parameter(t.to(device=device, dtype=dtype), requires_grad=bool(p["grad"]) and dtype.is_floating_point)
        for c in node.get("children", []):
            walk(c)

    walk(root)
    return _Node(root, owners, "", torch.device(device))
