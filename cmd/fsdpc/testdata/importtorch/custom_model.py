"""A model of the shapes import torch must get right beyond a stack of
layers: parameters on the root, an nn.ModuleDict, one submodule reachable
at two places, a frozen part, an nn.ParameterList, and a module called
twice in forward (TestImportTorchConformanceCustom)."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(torch.relu(self.up(self.norm(h))))


class Custom(nn.Module):
    def __init__(self, vocab: int = 512, dim: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))
        self.embed = nn.Embedding(vocab, dim)
        self.embed.weight.requires_grad_(False)  # a frozen part
        self.blocks = nn.ModuleDict({"first": Block(dim), "second": Block(dim)})
        self.extra = nn.ModuleList(Block(dim) for _ in range(layers))
        self.shared = self.blocks["second"]  # the same module at a second place
        self.mix = nn.ParameterList([nn.Parameter(torch.ones(dim)), nn.Parameter(torch.zeros(dim))])
        self.proj = nn.Linear(dim, dim, bias=False)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids) * self.scale
        h = self.proj(h)  # called here
        h = self.blocks["first"](h)
        h = self.blocks["second"](h)
        for b in self.extra:
            h = b(h)
        h = self.proj(h) * self.mix[0] + self.mix[1]  # and again
        return self.head(h)


def build(layers: int = 2) -> nn.Module:
    return Custom(layers=layers)
