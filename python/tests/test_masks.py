"""fsdpc.importer.masks: the sliding window or chunk of each attention,
read from the values the model keeps (transformers' config layer_types,
an attention's sliding_window), and what cannot be read reported by
module name."""

from __future__ import annotations

import unittest
from typing import Any

import torch
from torch import nn

from fsdpc.importer.build import hf_inputs
from fsdpc.importer.describe import describe


def _hf(model_type: str, arch: str, **keys: Any) -> nn.Module:
    import transformers

    cfg = transformers.AutoConfig.for_model(
        model_type, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=128, **keys)
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    assert isinstance(model, nn.Module)
    return model


def _attention(model: nn.Module, seq_len: int = 32) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each attention kind described, by module name, and the problems."""
    kwargs = hf_inputs(model, 1, seq_len) if hasattr(model, "config") else {}
    args: tuple[Any, ...] = () if kwargs else (torch.zeros((1, seq_len), dtype=torch.long, device="meta"),)
    d = describe(model, args, kwargs, 1, seq_len, {})
    kinds = {m["name"]: m["kind"] for m in d["modules"] if m.get("kind", {}).get("kind") == "attention"}
    return kinds, ["%s: %s" % (p["module"], p["what"]) for p in d["problems"]]


def _masks(kinds: dict[str, dict[str, Any]]) -> list[tuple[str, int]]:
    out = []
    for name in sorted(kinds):
        k = kinds[name]
        out.append(("window", k["window"]) if "window" in k else ("chunk", k["chunk"]) if "chunk" in k else ("full", 0))
    return out


class TestTransformers(unittest.TestCase):
    def test_layer_types(self) -> None:
        # Gemma 2: every other layer slides (config.layer_types).
        kinds, problems = _attention(_hf("gemma2", "Gemma2ForCausalLM", sliding_window=8))
        self.assertEqual(_masks(kinds), [("window", 8), ("full", 0), ("window", 8), ("full", 0)])
        self.assertEqual(problems, [])

    def test_every_layer(self) -> None:
        # Mistral: no layer_types; one sliding mask for every layer.
        kinds, problems = _attention(_hf("mistral", "MistralForCausalLM", sliding_window=8))
        self.assertEqual(_masks(kinds), [("window", 8)] * 4)
        self.assertEqual(problems, [])

    def test_no_window(self) -> None:
        # Qwen2 without use_sliding_window: transformers clears sliding_window.
        kinds, problems = _attention(_hf("qwen2", "Qwen2ForCausalLM", sliding_window=8, max_window_layers=2))
        self.assertEqual(_masks(kinds), [("full", 0)] * 4)
        self.assertEqual(problems, [])
        kinds, _ = _attention(_hf("qwen2", "Qwen2ForCausalLM", use_sliding_window=True, sliding_window=8, max_window_layers=2))
        self.assertEqual(_masks(kinds), [("full", 0), ("full", 0), ("window", 8), ("window", 8)])

    def test_chunked(self) -> None:
        # Llama 4: chunked attention on the RoPE layers (three of four).
        model = _hf("llama4_text", "Llama4ForCausalLM", attention_chunk_size=16, intermediate_size_mlp=64,
                    num_local_experts=2, num_experts_per_tok=1)
        kinds, problems = _attention(model)
        self.assertEqual(_masks(kinds), [("chunk", 16)] * 3 + [("full", 0)])
        self.assertEqual(problems, [])

    def test_mask_nobody_uses(self) -> None:
        # The model's forward builds a sliding mask (its config has a
        # window), but the attention modules' own config says none: said,
        # not counted as full causal in silence.
        model = _hf("mistral", "MistralForCausalLM", sliding_window=8)
        cfg: Any = getattr(model, "config")
        own = type(cfg)(**{**cfg.to_dict(), "sliding_window": None})
        own._attn_implementation = cfg._attn_implementation
        for m in model.modules():
            if type(m).__name__ == "MistralAttention":
                m.config = own
        kinds, problems = _attention(model)
        self.assertEqual(_masks(kinds), [("full", 0)] * 4)
        self.assertTrue(any(p.startswith(": forward built a mask with create_sliding_window_causal_mask") for p in problems), problems)


class Attention(nn.Module):
    """A model's own attention (torchtitan-like names aside), with what
    it keeps of its mask."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__()
        self.head_dim = 8
        self.q_proj = nn.Linear(32, 32, bias=False)
        self.k_proj = nn.Linear(32, 16, bias=False)
        self.v_proj = nn.Linear(32, 16, bias=False)
        self.o_proj = nn.Linear(32, 32, bias=False)
        for k, v in attrs.items():
            setattr(self, k, v)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, 4, 8).transpose(1, 2)
        k = self.k_proj(x).view(b, s, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
        v = self.v_proj(x).view(b, s, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
        o = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, 32))


class Model(nn.Module):
    def __init__(self, *layers: Attention) -> None:
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.layers = nn.ModuleList(layers)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        for layer in self.layers:
            h = h + layer(h)
        return h


class TestFactory(unittest.TestCase):
    def test_own_attributes(self) -> None:
        with torch.device("meta"):
            model = Model(Attention(sliding_window=8), Attention(sliding_window=None), Attention(window_size=(4, 0)),
                          Attention(window_size=(-1, -1)))
        kinds, problems = _attention(model)
        self.assertEqual(_masks(kinds), [("window", 8), ("full", 0), ("full", 0), ("full", 0)])
        self.assertEqual(problems, ["layers.2: attention mask not seen: has window_size = (4, 0), which fsdpc does not "
                                    "read as a window; counted as full causal attention"])


if __name__ == "__main__":
    unittest.main()
