"""fsdpc.importer.kinds: encoders' self-attention is the attention kind,
not causal: BERT's and RoBERTa's BertSelfAttention (query, key, value; the
output projection is its sibling BertSelfOutput.dense, so out_proj =
false), DistilBERT's and ViT's. The forward FLOPs FlopCounterMode counts
for each are the kind's: the projections and the full S×S core."""

from __future__ import annotations

import unittest
from typing import Any

from tests.test_mlp_kind import MICRO_BATCH, SEQ, _describe, _model


def _attention_flops(kind: dict[str, Any], batch: int, seq: int) -> int:
    dim, q = int(kind["dim"]), int(kind["heads"]) * int(kind["head_dim"])
    kv = int(kind["kv_heads"]) * int(kind["head_dim"])
    t = batch * seq
    proj = 2 * t * dim * (q + 2 * kv) + (2 * t * q * dim if kind.get("out_proj", True) else 0)
    return proj + 4 * batch * seq * seq * q  # QKᵀ and PV over every pair


class TestEncoderKinds(unittest.TestCase):
    def check(self, model_type: str, arch: str, name: str, want: dict[str, Any], seq: int = SEQ, **keys: Any) -> None:
        mods = _describe(_model(model_type, arch, **keys))
        m = mods[name]
        kind = m.get("kind")
        assert kind is not None, "%s: no kind" % name
        self.assertEqual({k: kind.get(k) for k in want}, want, name)
        self.assertEqual(m["flops_fwd"], _attention_flops(kind, MICRO_BATCH, seq), name)
        # No module of these encoders is measured.
        self.assertEqual([n for n, x in mods.items() if "kind" not in x and not x["children"] and x["params"]], [])

    def test_bert(self) -> None:
        self.check("bert", "BertForMaskedLM", "bert.encoder.layer.1.attention.self",
                   {"kind": "attention", "heads": 4, "head_dim": 8, "causal": False, "out_proj": False, "qkv_bias": True,
                    "names": {"q": "query", "k": "key", "v": "value"}})

    def test_roberta(self) -> None:
        self.check("roberta", "RobertaForMaskedLM", "roberta.encoder.layer.0.attention.self",
                   {"kind": "attention", "causal": False, "out_proj": False})

    def test_distilbert(self) -> None:
        self.check("distilbert", "DistilBertForMaskedLM", "distilbert.transformer.layer.0.attention",
                   {"kind": "attention", "causal": False, "out_bias": True}, dim=32, n_layers=2, n_heads=4, hidden_dim=48)

    def test_vit(self) -> None:
        # 32×32 images in 8×8 patches: 16 tokens and the class token.
        self.check("vit", "ViTForImageClassification", "vit.layers.0.attention", {"kind": "attention", "causal": False},
                   seq=17, image_size=32, patch_size=8)


if __name__ == "__main__":
    unittest.main()
