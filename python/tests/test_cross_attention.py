"""fsdpc.importer: encoder-decoder attention is the attention kind in
each of its forms: T5's (encoder self-attention not causal, decoder
self-attention causal, EncDecAttention the cross form; the first
self-attention holds the position bias's nn.Embedding beside the kind's
projections) and BART's (the
encoder_attn cross form Whisper, mBART and Marian share, and its self
forms), and OPT's. A cross-attention's kv_dim and kv_seq_len are its key
projection's traced input, so a decoder shorter than its encoder shows
them apart. The forward FLOPs FlopCounterMode counts for each module are
the kind's: the projections (keys and values over kv_seq_len tokens) and
the core over every (query, key) pair it computes.

BART's and OPT's forward read tensor values on meta (an all-ones
attention_mask it builds itself, LayerDrop's draw); build.meta_mends
answers them where the answer is fixed, and says so."""

from __future__ import annotations

import unittest
from typing import Any

import torch
from torch import nn

from fsdpc.importer.build import hf_inputs, meta_mends
from fsdpc.importer.describe import describe
from fsdpc.importer.trace import TraceError

BATCH, ENC, DEC = 2, 16, 8


def _model(model_type: str, arch: str, **keys: Any) -> nn.Module:
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, vocab_size=64, max_position_embeddings=64, **keys)
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    assert isinstance(model, nn.Module)
    model.train()
    return model


def _describe(model: nn.Module, kwargs: dict[str, Any], notes: list[dict[str, str]] | None = None) -> dict[str, Any]:
    notes = [] if notes is None else notes
    with torch.enable_grad(), meta_mends(model, notes):
        d = describe(model, (), kwargs, BATCH, ENC, {})
    d["problems"] = notes + d["problems"]
    return d


def _seq2seq(model: nn.Module) -> dict[str, Any]:
    """An encoder of ENC tokens and a decoder of DEC."""
    meta = torch.device("meta")
    return {"input_ids": torch.zeros((BATCH, ENC), dtype=torch.long, device=meta),
            "decoder_input_ids": torch.zeros((BATCH, DEC), dtype=torch.long, device=meta)}


def attention_flops(kind: dict[str, Any], batch: int, seq: int) -> int:
    """The attention kind's forward FLOPs (docs/model-format.md, Costs)
    with the core over all seq·kv_seq_len pairs: what FlopCounterMode
    counts for an unfused core (T5's matmuls) and for any SDPA call, whose
    formula ignores is_causal. For causal self-attention the kind's own
    core is the seq·(seq+1)/2 pairs a fused kernel computes."""
    dim, q = int(kind["dim"]), int(kind["heads"]) * int(kind["head_dim"])
    kv = int(kind["kv_heads"]) * int(kind["head_dim"])
    kv_seq, kv_dim = int(kind.get("kv_seq_len", seq)), int(kind.get("kv_dim", dim))
    t, t_kv = batch * seq, batch * kv_seq
    proj = 2 * t * dim * q + 2 * 2 * t_kv * kv_dim * kv + (2 * t * q * dim if kind.get("out_proj", True) else 0)
    return proj + 4 * batch * seq * kv_seq * q


class TestCrossAttention(unittest.TestCase):
    def check(self, mods: dict[str, dict[str, Any]], name: str, seq: int, want: dict[str, Any]) -> None:
        m = mods[name]
        kind = m.get("kind")
        assert kind is not None, "%s: no kind (%s)" % (name, m.get("measured_because", ""))
        self.assertEqual({k: kind.get(k) for k in want}, want, name)
        self.assertEqual(m["flops_fwd"], attention_flops(kind, BATCH, seq), name)

    def test_t5(self) -> None:
        model = _model("t5", "T5ForConditionalGeneration", d_model=32, d_ff=48, num_layers=2, num_decoder_layers=2,
                       num_heads=4, d_kv=8)
        d = _describe(model, _seq2seq(model))
        mods = {m["name"]: m for m in d["modules"]}
        t5 = {"kind": "attention", "dim": 32, "heads": 4, "head_dim": 8, "qkv_bias": False, "out_bias": False, "flash": False,
              "names": {"q": "q", "k": "k", "v": "v", "o": "o"}}
        self.check(mods, "encoder.block.1.layer.0.SelfAttention", ENC, {**t5, "causal": False})
        self.check(mods, "decoder.block.1.layer.0.SelfAttention", DEC, {**t5, "causal": None})  # causal, the default
        for i in (0, 1):
            # Queries over the decoder's 8 tokens, keys and values over the
            # encoder's 16.
            self.check(mods, "decoder.block.%d.layer.1.EncDecAttention" % i, DEC,
                       {**t5, "causal": False, "kv_dim": 32, "kv_seq_len": ENC})
        # The first block's self-attention in each stack holds the position
        # bias, nn.Embedding(32 buckets, 4 heads), beside the kind's
        # projections: a lookup and an add, no matmul FLOPs.
        self.check(mods, "encoder.block.0.layer.0.SelfAttention", ENC, {**t5, "causal": False})
        self.check(mods, "decoder.block.0.layer.0.SelfAttention", DEC, {**t5, "causal": None})
        for stack in ("encoder", "decoder"):
            first = mods["%s.block.0.layer.0.SelfAttention" % stack]
            self.assertEqual(first["children"], ["q", "k", "v", "o", "relative_attention_bias"])
            self.assertEqual(first.get("held_children"), ["relative_attention_bias"])
            self.assertEqual(mods["%s.block.0.layer.0.SelfAttention.relative_attention_bias" % stack].get("kind"),
                             {"kind": "embedding", "num": 32, "dim": 4})
        self.assertNotIn("held_children", mods["encoder.block.1.layer.0.SelfAttention"])
        # What the kind leaves out of T5's unfused core is in the header;
        # the S² pairs its causal decoder computes the kind counts
        # (flash = false), so no note says S·(S+1)/2.
        notes = {n: mods[n].get("kind_note", "") for n in ("encoder.block.1.layer.0.SelfAttention",
                                                            "decoder.block.1.layer.0.SelfAttention",
                                                            "decoder.block.1.layer.1.EncDecAttention",
                                                            "decoder.block.0.layer.0.SelfAttention")}
        for n, note in notes.items():
            self.assertIn("runs unfused", note, n)
            self.assertNotIn("S·(S+1)/2", note, n)
            self.assertEqual("relative_attention_bias" in note, ".block.0." in n, n)
        self.assertEqual(d["numel"], sum(p.numel() for p in model.parameters()))

    def test_bart(self) -> None:
        model = _model("bart", "BartForConditionalGeneration", d_model=32, encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48)
        notes: list[dict[str, str]] = []
        d = _describe(model, _seq2seq(model), notes)
        mods = {m["name"]: m for m in d["modules"]}
        bart = {"kind": "attention", "dim": 32, "heads": 4, "head_dim": 8, "qkv_bias": True, "out_bias": True, "q_last": True,
                "names": {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "out_proj"}}
        self.check(mods, "model.encoder.layers.0.self_attn", ENC, {**bart, "causal": False})
        self.check(mods, "model.decoder.layers.1.self_attn", DEC, {**bart, "causal": None})
        self.check(mods, "model.decoder.layers.0.encoder_attn", DEC, {**bart, "causal": False, "kv_dim": 32, "kv_seq_len": ENC})
        # The decoder's own all-ones mask went to transformers as none, and
        # the header says so; LayerDrop is 0 (nothing skipped, nothing said).
        self.assertEqual([n["module"] for n in notes], ["model.decoder"])
        self.assertIn("all-ones attention_mask", notes[0]["what"])

    def test_opt(self) -> None:
        def build(**keys: Any) -> nn.Module:
            return _model("opt", "OPTForCausalLM", hidden_size=32, word_embed_proj_dim=32, num_hidden_layers=2,
                          num_attention_heads=4, ffn_dim=48, **keys)

        model = build()
        inputs = hf_inputs(model, BATCH, ENC)
        with self.assertRaises(TraceError):  # transformers alone reads the mask's values
            describe(model, (), inputs, BATCH, ENC, {})
        d = _describe(build(), inputs)
        mods = {m["name"]: m for m in d["modules"]}
        self.check(mods, "model.decoder.layers.0.self_attn", ENC,
                   {"kind": "attention", "dim": 32, "heads": 4, "qkv_bias": True, "q_last": True, "causal": None})
        # A mask the caller gives is read as it is: on meta that still fails.
        with self.assertRaises(TraceError):
            _describe(build(), {**inputs, "attention_mask": torch.ones((BATCH, ENC), device="meta")})

    def test_layerdrop(self) -> None:
        model = _model("opt", "OPTForCausalLM", hidden_size=32, word_embed_proj_dim=32, num_hidden_layers=2,
                       num_attention_heads=4, ffn_dim=48, layerdrop=0.25)
        notes: list[dict[str, str]] = []
        d = _describe(model, hf_inputs(model, BATCH, ENC), notes)
        self.assertIn({"module": "model.decoder", "what": "has layerdrop 0.25: layers skipped at random in training, "
                       "counted as always run"}, notes)
        # Every layer ran.
        mods = {m["name"]: m for m in d["modules"]}
        self.assertEqual([mods["model.decoder.layers.%d" % i]["calls"] for i in (0, 1)], [1, 1])


if __name__ == "__main__":
    unittest.main()
