"""fsdpc.importer.kinds: attention with one fused query_key_value
projection, then dense (GPT-NeoX, BLOOM, Falcon in its multi-query,
multi-head and new_decoder_architecture forms) is the attention kind with
fused_qkv, its kv heads read off the projection's width. The forward FLOPs
FlopCounterMode counts for each are the kind's projections plus the core
over every (query, key) pair (FlopCounterMode does not skip the pairs a
causal mask removes; the kind counts the S·(S+1)/2 a fused kernel
computes); an unfused core's backward is twice its forward, the kind's
factor for flash = false. What the kind leaves out (ALiBi, partial rotary,
an unfused core's extra work) is the module's kind_note, never silence."""

from __future__ import annotations

import unittest
from typing import Any

import torch
from torch import nn

from fsdpc.importer.kinds import recognise
from tests.test_mlp_kind import MICRO_BATCH, SEQ, _describe, _model


def _proj_flops(kind: dict[str, Any], tokens: int) -> int:
    dim, hd = int(kind["dim"]), int(kind["head_dim"])
    q, kv = int(kind["heads"]) * hd, int(kind["kv_heads"]) * hd
    return 2 * tokens * dim * (q + 2 * kv) + 2 * tokens * q * dim


def _dense_core_flops(kind: dict[str, Any], batch: int, seq: int) -> int:
    """QKᵀ and PV over all seq² pairs: 4·B·S²·heads·head_dim."""
    return 4 * batch * seq * seq * int(kind["heads"]) * int(kind["head_dim"])


class TestFusedQKV(unittest.TestCase):
    def check(self, model: nn.Module, name: str, want: dict[str, Any], notes: tuple[str, ...] = ()) -> dict[str, Any]:
        mods = _describe(model)
        m = mods[name]
        kind = m.get("kind")
        assert kind is not None, "%s: no kind (%s)" % (name, m.get("measured_because", ""))
        self.assertEqual({k: kind.get(k) for k in want}, want, name)
        proj = _proj_flops(kind, MICRO_BATCH * SEQ)
        core = _dense_core_flops(kind, MICRO_BATCH, SEQ)
        self.assertEqual(m["flops_fwd"], proj + core, name)
        if kind.get("flash") is False:
            # Matmul, softmax, matmul: each matmul's backward is two of it.
            self.assertEqual(m["flops_bwd"], 2 * proj + 2 * core, name)
        note = m.get("kind_note", "")
        for n in notes:
            self.assertIn(n, note, name)
        if not notes:
            self.assertEqual(note, "", name)
        # Nothing of these models is measured, and no attention core runs in
        # a container's own code.
        self.assertEqual([n for n, x in mods.items() if "kind" not in x and not x["children"] and x["params"]], [])
        return kind

    def test_gpt_neox(self) -> None:
        # Pythia's default: RoPE on a quarter of each head.
        self.check(_model("gpt_neox", "GPTNeoXForCausalLM"), "gpt_neox.layers.1.attention",
                   {"kind": "attention", "dim": 32, "heads": 4, "kv_heads": 4, "head_dim": 8, "fused_qkv": True,
                    "qkv_bias": True, "out_bias": True, "flash": None, "names": {"qkv": "query_key_value", "o": "dense"}},
                   notes=("RoPE rotates 2 of the 8 dims of each head (partial_rotary_factor 0.25)",))
        # Full rotary and eager attention: nothing about RoPE, an unfused core.
        self.check(_model("gpt_neox", "GPTNeoXForCausalLM", attn_implementation="eager",
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}),
                   "gpt_neox.layers.0.attention", {"kind": "attention", "flash": False},
                   notes=("its core runs unfused",))

    def test_bloom(self) -> None:
        kind = self.check(_model("bloom", "BloomForCausalLM", n_layer=2, n_head=4), "transformer.h.1.self_attention",
                          {"kind": "attention", "dim": 32, "heads": 4, "kv_heads": 4, "head_dim": 8, "fused_qkv": True,
                           "qkv_bias": True, "out_bias": True, "flash": False},
                          notes=("ALiBi adds a per-head linear bias", "its core runs unfused"))
        self.assertNotIn("causal", kind)

    def test_falcon_multi_query(self) -> None:
        # Falcon-7B's layout: one key and one value head.
        self.check(_model("falcon", "FalconForCausalLM"), "transformer.h.0.self_attention",
                   {"kind": "attention", "heads": 4, "kv_heads": 1, "head_dim": 8, "fused_qkv": True, "qkv_bias": False,
                    "out_bias": False},
                   notes=("its one key and value head reaches SDPA unexpanded",))

    def test_falcon_new_decoder_architecture(self) -> None:
        # Falcon-40B's and 180B's: grouped kv heads.
        self.check(_model("falcon", "FalconForCausalLM", new_decoder_architecture=True, num_kv_heads=2),
                   "transformer.h.1.self_attention", {"kind": "attention", "heads": 4, "kv_heads": 2, "fused_qkv": True})

    def test_falcon_multi_head_alibi(self) -> None:
        self.check(_model("falcon", "FalconForCausalLM", multi_query=False, bias=True), "transformer.h.0.self_attention",
                   {"kind": "attention", "heads": 4, "kv_heads": 4, "qkv_bias": True, "out_bias": True})
        self.check(_model("falcon", "FalconForCausalLM", alibi=True), "transformer.h.0.self_attention",
                   {"kind": "attention", "kv_heads": 1},
                   notes=("ALiBi adds a per-head linear bias", "SDPA gets the bias as a float mask"))

    def test_not_attention(self) -> None:
        # A query_key_value whose width is no (heads + 2·kv_heads)·head_dim
        # is not the kind.
        class Odd(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.head_dim = 8
                self.query_key_value = nn.Linear(32, 40)
                self.dense = nn.Linear(32, 32)

        with torch.device("meta"):
            self.assertIsNone(recognise(Odd()))


if __name__ == "__main__":
    unittest.main()
