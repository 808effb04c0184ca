"""fsdpc.importer.build: what transformers' own classes need to run
forward on meta tensors — DeepseekV2Moe's missing num_experts, and the
packed-sequence check that reads position_ids' values — is mended where
the answer is fixed, and reported."""

from __future__ import annotations

import unittest
from typing import Any

import torch
from torch import nn

from fsdpc.importer.build import hf_inputs, hf_workarounds, unpacked_sequences
from fsdpc.importer.describe import describe
from fsdpc.importer.trace import TraceError


def _hf(model_type: str, arch: str, **keys: Any) -> nn.Module:
    import transformers

    cfg = transformers.AutoConfig.for_model(
        model_type, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128, **keys)
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    assert isinstance(model, nn.Module)
    model.train()
    return model


def _describe(model: nn.Module) -> dict[str, Any]:
    return describe(model, (), hf_inputs(model, 1, 16), 1, 16, {})


class TestWorkarounds(unittest.TestCase):
    def test_deepseek_v2_group_limited_greedy(self) -> None:
        def build() -> nn.Module:
            return _hf("deepseek_v2", "DeepseekV2ForCausalLM", n_routed_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=16, first_k_dense_replace=1, topk_method="group_limited_greedy", n_group=2,
                       topk_group=1, kv_lora_rank=16, q_lora_rank=None, qk_nope_head_dim=8, qk_rope_head_dim=8,
                       v_head_dim=8)

        with self.assertRaises(TraceError):  # transformers 5.12 alone cannot run it
            _describe(build())
        model = build()
        notes = hf_workarounds(model)
        self.assertEqual([n["module"] for n in notes], ["model.layers.1.mlp"])
        self.assertIn("router's experts", notes[0]["what"])
        self.assertEqual(getattr(model.get_submodule("model.layers.1.mlp"), "num_experts"), 4)
        _describe(model)

    def test_smollm3_position_ids(self) -> None:
        def build() -> nn.Module:
            return _hf("smollm3", "SmolLM3ForCausalLM", use_cache=False, pad_token_id=0, bos_token_id=None,
                       eos_token_id=None)

        with self.assertRaises(TraceError):  # find_packed_sequence_indices reads values
            _describe(build())
        with unpacked_sequences():
            d = _describe(build())
        self.assertEqual(d["problems"], [])
        from transformers import masking_utils

        # Put back, and real tensors still get the function's own answer.
        ids = torch.tensor([[0, 1, 2, 0, 1]])
        self.assertEqual(masking_utils.find_packed_sequence_indices(ids).tolist(), [[0, 0, 0, 1, 1]])


if __name__ == "__main__":
    unittest.main()
