"""fsdpc.importer.kinds: transformers 5's fused experts as the moe kind,
where the hidden size equals the experts' (gpt-oss-20b: 2880 and 2880)
and only down_proj's shape tells the layouts apart, and gpt-oss's
biased experts with their clamped SwiGLU."""

from __future__ import annotations

import unittest
from typing import Any

import torch
from torch import nn

from fsdpc.importer.kinds import recognise


def _mlp(model_type: str, arch: str, **keys: Any) -> nn.Module:
    import transformers

    cfg = transformers.AutoConfig.for_model(
        model_type, vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_experts_per_tok=2, **keys)
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    mlp = model.get_submodule("model.layers.0.mlp")
    assert isinstance(mlp, nn.Module)
    return mlp


class TestMoEKind(unittest.TestCase):
    def test_gpt_oss(self) -> None:
        k = recognise(_mlp("gpt_oss", "GptOssForCausalLM", num_local_experts=4))
        assert k is not None
        self.assertEqual({x: k.get(x) for x in ("kind", "dim", "hidden", "experts", "top_k", "activation", "transposed", "bias",
                                                "router_bias")},
                         {"kind": "moe", "dim": 32, "hidden": 32, "experts": 4, "top_k": 2, "activation": "swiglu",
                          "transposed": True, "bias": True, "router_bias": True})

    def test_mixtral_square(self) -> None:
        k = recognise(_mlp("mixtral", "MixtralForCausalLM", num_local_experts=4))
        assert k is not None
        self.assertEqual((k["kind"], k["hidden"], k.get("transposed"), k.get("bias")), ("moe", 32, None, None))


if __name__ == "__main__":
    unittest.main()
