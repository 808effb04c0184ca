"""fsdpc.importer.kinds: an attention whose traced forward runs
transformers' eager core (matmul, softmax, matmul over every (query,
key) pair) is written flash = false, in every recognised form (separate
q/k/v/o projections as Llama's, cross-attention as BART's, DeepSeek's
MLA), detected as for the fused query_key_value attentions
(kinds._unfused_core); under sdpa it stays a fused kernel's. What the kind
leaves out of an unfused core, and Gemma 2's soft-capped scores, which no
kind key says, are the module's kind_note, never silence. The FLOPs are
FlopCounterMode's for the module on the traced pass: the projections and
the core over all S² pairs forward, twice that backward for an unfused
core (each matmul's backward is two of it)."""

from __future__ import annotations

import unittest
from typing import Any

import torch
from torch import nn

from fsdpc.importer.build import hf_inputs, logit_softcap_notes, meta_mends
from fsdpc.importer.describe import describe
from tests.test_mlp_kind import MICRO_BATCH, SEQ, _model

UNFUSED = "its core runs unfused (matmul, softmax, matmul)"


def _flops(kind: dict[str, Any], seq_kv: int) -> int:
    """Projections (q and o over the queries' tokens, k and v over the
    keys') and the core's QKᵀ and PV over all SEQ·seq_kv pairs."""
    dim, hd = int(kind["dim"]), int(kind["head_dim"])
    q, kv = int(kind["heads"]) * hd, int(kind["kv_heads"]) * hd
    kv_dim = int(kind.get("kv_dim", dim))
    t, tkv = MICRO_BATCH * SEQ, MICRO_BATCH * seq_kv
    return 2 * t * dim * q + 2 * tkv * kv_dim * 2 * kv + 2 * t * q * dim + 4 * MICRO_BATCH * SEQ * seq_kv * q


def _describe(model: nn.Module) -> dict[str, dict[str, Any]]:
    # meta_mends: BART's all-ones decoder mask and LayerDrop's draw, as
    # import torch --hf runs them.
    with torch.enable_grad(), meta_mends(model, []):
        d = describe(model, (), hf_inputs(model, MICRO_BATCH, SEQ), MICRO_BATCH, SEQ, {})
    return {m["name"]: m for m in d["modules"]}


class TestEagerAttention(unittest.TestCase):
    def check(self, model: nn.Module, name: str, flash: bool, notes: tuple[str, ...] = (),
              absent: tuple[str, ...] = ()) -> dict[str, Any]:
        m = _describe(model)[name]
        kind = m.get("kind")
        assert kind is not None, "%s: no kind (%s)" % (name, m.get("measured_because", ""))
        self.assertEqual(kind.get("flash", True), flash, name)
        if not flash:
            self.assertIs(kind["flash"], False, name)
        note = m.get("kind_note", "")
        for n in notes:
            self.assertIn(n, note, name)
        for n in absent:
            self.assertNotIn(n, note, name)
        if kind["kind"] == "attention":
            f = _flops(kind, int(kind.get("kv_seq_len", SEQ)))
            self.assertEqual(m["flops_fwd"], f, name)
            if not flash:
                self.assertEqual(m["flops_bwd"], 2 * f, name)
        return kind

    def test_llama(self) -> None:
        kind = self.check(_model("llama", "LlamaForCausalLM", attn_implementation="eager"), "model.layers.1.self_attn",
                          False, notes=(UNFUSED + " over every (query, key) pair, as the kind counts it",))
        self.assertEqual({k: kind.get(k) for k in ("heads", "kv_heads", "head_dim", "names")},
                         {"heads": 4, "kv_heads": 2, "head_dim": 8,
                          "names": {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}})
        # The default, sdpa, is a fused kernel's core: nothing to say.
        self.check(_model("llama", "LlamaForCausalLM"), "model.layers.1.self_attn", True)
        self.check(_model("llama", "LlamaForCausalLM", attn_implementation="sdpa"), "model.layers.0.self_attn", True)

    def test_gemma2_softcap(self) -> None:
        # attn_logit_softcapping (50 by default) forces eager in practice:
        # transformers' sdpa attention ignores softcap.
        self.check(_model("gemma2", "Gemma2ForCausalLM", head_dim=16, attn_implementation="eager"),
                   "model.layers.0.self_attn", False,
                   notes=(UNFUSED, "its scores are soft-capped (attn_logit_softcapping 50: divide, tanh, multiply"))
        self.check(_model("gemma2", "Gemma2ForCausalLM", head_dim=16, attn_implementation="sdpa"),
                   "model.layers.1.self_attn", True, notes=("attn_logit_softcapping 50 is not applied",), absent=(UNFUSED,))
        # Without a cap there is nothing to say of one.
        self.check(_model("gemma2", "Gemma2ForCausalLM", head_dim=16, attn_implementation="eager",
                          attn_logit_softcapping=None),
                   "model.layers.1.self_attn", False, notes=(UNFUSED,), absent=("soft-capped", "softcapping"))

    def test_gemma2_final_logit_softcap(self) -> None:
        # Gemma 2 also soft-caps its logits in its own forward, in no
        # module: said at the root, and nothing where there is no cap.
        notes = logit_softcap_notes(_model("gemma2", "Gemma2ForCausalLM", head_dim=16))
        self.assertEqual([n["module"] for n in notes], [""])
        self.assertIn("final_logit_softcapping 30", notes[0]["what"])
        self.assertEqual(logit_softcap_notes(_model("gemma2", "Gemma2ForCausalLM", head_dim=16, final_logit_softcapping=None)), [])
        self.assertEqual(logit_softcap_notes(_model("llama", "LlamaForCausalLM")), [])

    def test_bart_cross_attention(self) -> None:
        model = _model("bart", "BartForConditionalGeneration", d_model=32, encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48,
                       attn_implementation="eager")
        kind = self.check(model, "model.decoder.layers.1.encoder_attn", False,
                          notes=(UNFUSED,))
        self.assertIs(kind["causal"], False)
        self.check(model, "model.decoder.layers.0.self_attn", False, notes=(UNFUSED,))
        self.check(model, "model.encoder.layers.0.self_attn", False, notes=(UNFUSED,))

    def test_deepseek_mla(self) -> None:
        keys: dict[str, Any] = dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                                    first_k_dense_replace=1, n_group=1, topk_group=1, kv_lora_rank=16, q_lora_rank=24,
                                    qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8,
                                    num_key_value_heads=4)  # MLA: one key and value per query head
        self.check(_model("deepseek_v3", "DeepseekV3ForCausalLM", attn_implementation="eager", **keys),
                   "model.layers.0.self_attn", False, notes=(UNFUSED,))
        self.check(_model("deepseek_v3", "DeepseekV3ForCausalLM", **keys), "model.layers.0.self_attn", True)


if __name__ == "__main__":
    unittest.main()
