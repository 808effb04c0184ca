"""fsdpc.importer.kinds: the MLPs of transformers architectures are the
mlp kind (GPT-2's Conv1D c_fc/c_proj, Phi-3's fused gate_up_proj, BERT's
and DistilBERT's feed-forwards, ...), and each kind's FLOPs are what
FlopCounterMode counted for that module on the traced pass."""

from __future__ import annotations

import unittest
from typing import Any

import torch
from torch import nn

from fsdpc.importer.build import hf_inputs
from fsdpc.importer.describe import describe

MICRO_BATCH, SEQ = 2, 16


def _model(model_type: str, arch: str, **keys: Any) -> nn.Module:
    import transformers

    base: dict[str, Any] = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    base.update(keys)
    cfg = transformers.AutoConfig.for_model(model_type, **base)
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    assert isinstance(model, nn.Module)
    model.train()
    return model


def _describe(model: nn.Module) -> dict[str, dict[str, Any]]:
    with torch.enable_grad():
        d = describe(model, (), hf_inputs(model, MICRO_BATCH, SEQ), MICRO_BATCH, SEQ, {})
    return {m["name"]: m for m in d["modules"]}


def _mlp_flops(kind: dict[str, Any], tokens: int) -> int:
    """The mlp kind's matmul FLOPs forward: 2·tokens·dim·hidden per
    projection, three for a gated MLP (the fused gate_up counts two)."""
    n = 3 if kind["activation"] in ("swiglu", "geglu") else 2
    return 2 * tokens * int(kind["dim"]) * int(kind["hidden"]) * n


class TestMLPKind(unittest.TestCase):
    def check(self, model: nn.Module, want: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        mods = _describe(model)
        for name, keys in want.items():
            m = mods[name]
            kind = m.get("kind")
            assert kind is not None, "%s: no kind (%s)" % (name, m.get("measured_because", ""))
            self.assertEqual({k: kind.get(k) for k in keys}, keys, name)
            # The kind's FLOPs are FlopCounterMode's for this module:
            # forward, and backward twice that (input and weight gradients).
            f = _mlp_flops(kind, MICRO_BATCH * SEQ)
            self.assertEqual((m["flops_fwd"], m["flops_bwd"]), (f, 2 * f), name)
        return mods

    def test_gpt2(self) -> None:
        # Conv1D c_fc [32, 128] and c_proj [128, 32]: weights [in, out].
        self.check(_model("gpt2", "GPT2LMHeadModel", n_embd=32, n_layer=2, n_head=4, n_positions=64),
                   {"transformer.h.0.mlp": {"kind": "mlp", "dim": 32, "hidden": 128, "activation": "gelu", "bias": True,
                                            "transposed": True, "names": {"up": "c_fc", "down": "c_proj"}}})

    def test_phi3(self) -> None:
        self.check(_model("phi3", "Phi3ForCausalLM", pad_token_id=0),
                   {"model.layers.1.mlp": {"kind": "mlp", "dim": 32, "hidden": 48, "activation": "swiglu", "bias": False,
                                           "fused_gate_up": True, "names": {"gate_up": "gate_up_proj", "down": "down_proj"}}})

    def test_distilbert(self) -> None:
        mods = self.check(_model("distilbert", "DistilBertForMaskedLM", dim=32, n_layers=2, n_heads=4, hidden_dim=48),
                          {"distilbert.transformer.layer.0.ffn": {"kind": "mlp", "dim": 32, "hidden": 48, "activation": "gelu",
                                                                  "bias": True, "names": {"up": "lin1", "down": "lin2"}}})
        att = mods["distilbert.transformer.layer.0.attention"].get("kind") or {}
        self.assertEqual({k: att.get(k) for k in ("kind", "heads", "head_dim", "causal")},
                         {"kind": "attention", "heads": 4, "head_dim": 8, "causal": False})

    def test_gpt_neox(self) -> None:
        self.check(_model("gpt_neox", "GPTNeoXForCausalLM"),
                   {"gpt_neox.layers.0.mlp": {"kind": "mlp", "dim": 32, "hidden": 48, "activation": "gelu",
                                              "names": {"up": "dense_h_to_4h", "down": "dense_4h_to_h"}}})

    def test_t5(self) -> None:
        t5 = dict(d_model=32, d_ff=48, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=8)
        self.check(_model("t5", "T5ForConditionalGeneration", **t5),
                   {"encoder.block.0.layer.1.DenseReluDense": {"kind": "mlp", "dim": 32, "hidden": 48, "activation": "relu",
                                                               "bias": False, "names": {"up": "wi", "down": "wo"}},
                    "decoder.block.1.layer.2.DenseReluDense": {"kind": "mlp", "activation": "relu"}})
        # T5 v1.1 and Flan-T5: gelu(wi_0(h)) · wi_1(h), then wo.
        self.check(_model("t5", "T5ForConditionalGeneration", feed_forward_proj="gated-gelu", **t5),
                   {"encoder.block.1.layer.1.DenseReluDense": {"kind": "mlp", "dim": 32, "hidden": 48, "activation": "geglu",
                                                               "names": {"gate": "wi_0", "up": "wi_1", "down": "wo"}}})

    def test_measured_elsewhere(self) -> None:
        # Two projections whose shapes do not chain (dim → hidden → dim) are
        # no MLP, whatever their names.
        class Odd(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.c_fc = nn.Linear(8, 16)
                self.c_proj = nn.Linear(16, 4)
                self.act = nn.GELU()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.c_proj(self.act(self.c_fc(x)))

        from fsdpc.importer.kinds import recognise
        with torch.device("meta"):
            self.assertIsNone(recognise(Odd()))


if __name__ == "__main__":
    unittest.main()
