"""fsdpc.importer.trace: which modules return a tensor of their own, the
model file's output = "own" (FSDP2 hooks a unit's pre-backward on what
its forward returns)."""

from __future__ import annotations

import unittest

import torch
from torch import nn

from fsdpc.importer.trace import run_trace


class Block(nn.Module):
    """torchtitan's TransformerBlock shape: returns h + ffn(norm(h))."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.ffn = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ffn(self.norm(x))


class Chain(nn.Module):
    """Returns its last child's tensor itself, as nn.Sequential does."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.ffn = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ffn(self.norm(x))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(8, 4)
        self.block = Block()
        self.chain = Chain()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
        self.head = nn.Linear(4, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.seq(self.chain(self.block(self.emb(ids)))))


class TestOwnOutput(unittest.TestCase):
    def test_own_and_child(self) -> None:
        with torch.device("meta"):
            model = Model()
        ids = torch.zeros(2, 3, dtype=torch.long, device="meta")
        rec = run_trace(model, (ids,), {}).record
        want = {"block": True, "chain": False, "seq": False, "": False, "block.ffn": True, "head": True}
        got = {name: rec[name].own_output for name in want}
        self.assertEqual(got, want)


if __name__ == "__main__":
    unittest.main()
