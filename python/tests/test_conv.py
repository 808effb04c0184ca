"""fsdpc.importer: nn.Conv1d/2d/3d become the conv kind with their exact
channels, kernel, stride, padding and groups, and the input size forward
gave them; the kind's cost is torch's own count of the convolution."""

from __future__ import annotations

import math
import unittest
from typing import Any

import torch
from torch import nn

from fsdpc.importer.describe import describe


class Net(nn.Module):
    """A ResNet-like stem and a few convolutions the kind cannot hold."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, kernel_size=7, stride=2, padding=3, bias=False)
        self.grouped = nn.Conv2d(16, 32, kernel_size=(3, 5), padding=(1, 2), groups=4)
        self.seq = nn.Conv1d(32, 8, kernel_size=3, padding="same")
        self.vol = nn.Conv3d(1, 4, kernel_size=2, stride=2)
        self.dilated = nn.Conv2d(3, 4, kernel_size=3, dilation=2)
        self.folded = nn.Conv2d(3, 4, kernel_size=1)
        self.even = nn.Conv1d(32, 8, kernel_size=4, padding="same")
        self.up = nn.ConvTranspose2d(3, 4, kernel_size=2, stride=2)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.grouped(self.stem(x))  # [B, 32, 8, 8]
        s = self.seq(h.flatten(2))  # [B, 8, 64]
        v = self.vol(x[:, :2].unsqueeze(1))  # a one-channel volume [B, 1, 2, 32, 32]
        d = self.dilated(x)
        f = self.folded(x.repeat(2, 1, 1, 1))  # twice the micro-batch: not what the kind counts
        e = self.even(h.flatten(2))
        u = self.up(x)
        return self.head(s.mean(-1)).sum() + v.sum() + d.sum() + f.sum() + e.sum() + u.sum()


class TestConv(unittest.TestCase):
    def setUp(self) -> None:
        with torch.device("meta"):
            self.model = Net()
        x = torch.zeros((2, 3, 32, 32), device="meta")
        d = describe(self.model, (x,), {}, 2, 32, {})
        self.mods: dict[str, dict[str, Any]] = {m["name"]: m for m in d["modules"]}

    def test_kinds(self) -> None:
        want = {
            "stem": {"kind": "conv", "in": 3, "out": 16, "kernel": [7, 7], "stride": [2, 2], "padding": [3, 3], "groups": 1,
                     "bias": False, "input_size": [32, 32]},
            "grouped": {"kind": "conv", "in": 16, "out": 32, "kernel": [3, 5], "stride": [1, 1], "padding": [1, 2], "groups": 4,
                        "bias": True, "input_size": [16, 16]},
            "seq": {"kind": "conv", "in": 32, "out": 8, "kernel": [3], "stride": [1], "padding": [1], "groups": 1, "bias": True,
                    "input_size": [256]},
            "vol": {"kind": "conv", "in": 1, "out": 4, "kernel": [2, 2, 2], "stride": [2, 2, 2], "padding": [0, 0, 0], "groups": 1,
                    "bias": True, "input_size": [2, 32, 32]},
        }
        for name, kind in want.items():
            self.assertEqual(self.mods[name].get("kind"), kind, name)
        # Measured, and the file's header says why (measured_because).
        for name, why in (("dilated", "dilation [2, 2]"), ("even", "pads one side more"), ("up", "transposed convolution")):
            self.assertNotIn("kind", self.mods[name])
            self.assertIn(why, self.mods[name].get("measured_because", ""), name)
        self.assertNotIn("kind", self.mods["folded"])
        self.assertIn("not the micro-batch 2", self.mods["folded"]["measured_because"])

    def test_measured_is_the_formula(self) -> None:
        # What the trace measured of each recognised conv is the kind's
        # formula, 2·B·Π(out_size)·out·(in/groups)·Π(kernel).
        for name in ("stem", "grouped", "seq", "vol"):
            k = self.mods[name]["kind"]
            out_size = [(s + 2 * p - kk) // st + 1 for s, p, kk, st in zip(k["input_size"], k["padding"], k["kernel"], k["stride"])]
            formula = 2 * 2 * math.prod(out_size) * k["out"] * (k["in"] // k["groups"]) * math.prod(k["kernel"])
            self.assertEqual(self.mods[name]["flops_fwd"], formula, name)


if __name__ == "__main__":
    unittest.main()
