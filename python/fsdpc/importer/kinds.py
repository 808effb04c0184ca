"""Modules fsdpc has a kind for (docs/model-format.md, Kinds).

Recognition is a proposal: it reads the module's children, parameter
shapes and a few attributes, and says which kind and keys would make the
same parameters. The Go side loads the model file and compares every
parameter with the module's own; a kind that does not reproduce them
exactly is dropped there and the module is written with explicit
parameters and measured costs instead.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

Kind = dict[str, Any]


def _params(m: nn.Module) -> dict[str, torch.Tensor]:
    return dict(m.named_parameters(recurse=False))


def _param_children(m: nn.Module) -> dict[str, nn.Module]:
    """Children that hold parameters (activation functions and dropout
    hold none and do not appear in a model file)."""
    return {n: c for n, c in m.named_children() if any(True for _ in c.parameters())}


def _is_linear(m: nn.Module | None) -> bool:
    return isinstance(m, nn.Linear) and not _param_children(m)


def _norm(m: nn.Module) -> Kind | None:
    """LayerNorm and RMSNorm, torch's and the many copies in model code
    (LlamaRMSNorm, T5LayerNorm, ...): one 1-D weight, maybe a bias."""
    name = type(m).__name__
    p = _params(m)
    if _param_children(m) or "weight" not in p or p["weight"].dim() != 1:
        return None
    if set(p) - {"weight", "bias"}:
        return None
    dim = int(p["weight"].shape[0])
    if "bias" in p and tuple(p["bias"].shape) != (dim,):
        return None
    order = list(p)
    if order != ["weight", "bias"][: len(order)]:
        return None
    if isinstance(m, nn.LayerNorm) or (name.endswith("LayerNorm") and "bias" in p):
        return {"kind": "norm", "norm": "layer", "dim": dim, "bias": "bias" in p}
    if isinstance(m, getattr(nn, "RMSNorm", ())) or name.endswith("RMSNorm") or name.endswith("LayerNorm"):
        # T5LayerNorm is an RMSNorm without a bias.
        return {"kind": "norm", "norm": "rms", "dim": dim, "bias": "bias" in p}
    return None


def _act_of(m: nn.Module) -> object:
    """The activation an MLP applies: an attribute most model code names
    act_fn, act or activation(_fn) (Llama 4), or BERT's
    intermediate_act_fn; else its one parameter-free child that is not
    dropout (BLOOM's gelu_impl)."""
    for attr in ("act_fn", "act", "activation", "activation_fn", "intermediate_act_fn"):
        fn = getattr(m, attr, None)
        if fn is not None:
            return fn
    free = [c for c in m.children() if not any(True for _ in c.parameters()) and "dropout" not in type(c).__name__.lower()]
    return free[0] if len(free) == 1 else None


def _act(m: nn.Module, gated: bool) -> str | None:
    fn = _act_of(m)
    if fn is None:
        return None
    name = type(fn).__name__.lower()
    if "silu" in name or "swish" in name:
        return "swiglu" if gated else "silu"
    if "gelu" in name:
        return "geglu" if gated else "gelu"
    if "relu" in name and not gated:
        return "relu"
    return None


# Up and down projections of ungated MLPs, by the names model code gives
# them: Llama-style, GPT-2's and StarCoder 2's c_fc/c_proj (Conv1D in
# GPT-2), GPT-J's fc_in/fc_out, GPT-NeoX's, BLOOM's and Falcon's
# dense_h_to_4h/dense_4h_to_h, DistilBERT's lin1/lin2.
_MLP_NAMES = (
    ("fc1", "fc2"),
    ("up_proj", "down_proj"),
    ("c_fc", "c_proj"),
    ("fc_in", "fc_out"),
    ("dense_h_to_4h", "dense_4h_to_h"),
    ("lin1", "lin2"),
    ("wi", "wo"),  # T5's DenseReluDense
)

# Gate, up and down of gated MLPs: Llama-style, and T5 v1.1's
# DenseGatedActDense (act(wi_0(h)) · wi_1(h), then wo).
_GATED_NAMES = (
    ("gate_proj", "up_proj", "down_proj"),
    ("wi_0", "wi_1", "wo"),
)


def _mlp(m: nn.Module) -> Kind | None:
    ch = _param_children(m)
    if _params(m):
        return None
    for names in _GATED_NAMES:
        if set(ch) != set(names) or not all(_is_linear(c) for c in ch.values()):
            continue
        g, u, d = (ch[n] for n in names)
        assert isinstance(g, nn.Linear) and isinstance(u, nn.Linear) and isinstance(d, nn.Linear)
        act = _act(m, gated=True)
        if act is None:
            return None
        bias = g.bias is not None
        if (u.bias is not None) != bias or (d.bias is not None) != bias:
            return None
        dim, hidden = int(g.in_features), int(g.out_features)
        if (u.in_features, u.out_features, d.in_features, d.out_features) != (dim, hidden, hidden, dim):
            return None
        return {"kind": "mlp", "dim": dim, "hidden": hidden, "activation": act, "bias": bias,
                "names": dict(zip(("gate", "up", "down"), names))}
    if set(ch) == {"gate_up_proj", "down_proj"}:
        # Phi-3: one projection [2·hidden, dim] whose output is chunked
        # into gate and up.
        gu, dn = _proj(ch["gate_up_proj"]), _proj(ch["down_proj"])
        act = _act(m, gated=True)
        if gu is None or dn is None or act is None or gu[2:] != dn[2:] or gu[1] % 2:
            return None
        dim, hidden = gu[0], gu[1] // 2
        if dn[:2] != (hidden, dim):
            return None
        kind: Kind = {"kind": "mlp", "dim": dim, "hidden": hidden, "activation": act, "bias": gu[2], "fused_gate_up": True,
                      "names": {"gate_up": "gate_up_proj", "down": "down_proj"}}
        if gu[3]:
            kind["transposed"] = True
        return kind
    for up_name, down_name in _MLP_NAMES:
        if set(ch) != {up_name, down_name}:
            continue
        u, d = _proj(ch[up_name]), _proj(ch[down_name])
        act = _act(m, gated=False)
        if u is None or d is None or act is None or u[2:] != d[2:] or d[:2] != (u[1], u[0]):
            return None
        kind = {"kind": "mlp", "dim": u[0], "hidden": u[1], "activation": act, "bias": u[2],
                "names": {"up": up_name, "down": down_name}}
        if u[3]:
            kind["transposed"] = True  # GPT-2's Conv1D: weights [in, out]
        return kind
    return None


_ATTENTION_NAMES = (
    ("q_proj", "k_proj", "v_proj", "o_proj"),
    ("q_proj", "k_proj", "v_proj", "out_proj"),
    ("q", "k", "v", "o"),
    ("q_lin", "k_lin", "v_lin", "out_lin"),  # DistilBERT
    # BERT's and RoBERTa's self-attention: the output projection is
    # BertSelfOutput.dense, a sibling (the kind's out_proj = false).
    ("query", "key", "value"),
)


def _proj(m: nn.Module | None) -> tuple[int, int, bool, bool] | None:
    """A projection's (in, out, bias, transposed): nn.Linear, or
    transformers' Conv1D (GPT-2), a linear whose weight is [in, out]."""
    if _is_linear(m):
        assert isinstance(m, nn.Linear)
        return int(m.in_features), int(m.out_features), m.bias is not None, False
    if m is None or type(m).__name__ != "Conv1D" or _param_children(m):
        return None
    p = _params(m)
    w = p.get("weight")
    if w is None or w.dim() != 2 or set(p) - {"weight", "bias"} or list(p)[0] != "weight":
        return None
    if "bias" in p and tuple(p["bias"].shape) != (int(w.shape[1]),):
        return None
    return int(w.shape[0]), int(w.shape[1]), "bias" in p, True


def _fused_attention(m: nn.Module, ch: dict[str, nn.Module], hd: int) -> Kind | None:
    """One projection for q, k and v: Phi-3's qkv_proj (registered after
    o_proj) and GPT-2's c_attn (a Conv1D, weights [in, out])."""
    for qkv_name, o_name in (("qkv_proj", "o_proj"), ("c_attn", "c_proj")):
        if set(ch) != {qkv_name, o_name}:
            continue
        qkv, o = _proj(ch[qkv_name]), _proj(ch[o_name])
        if qkv is None or o is None or qkv[3] != o[3]:
            return None
        dim, width = qkv[0], qkv[1]
        if o[0] % hd or o[1] != dim:
            return None
        heads = o[0] // hd
        kv2 = width // hd - heads
        if width % hd or kv2 <= 0 or kv2 % 2:
            return None
        kind: Kind = {"kind": "attention", "dim": dim, "heads": heads, "kv_heads": kv2 // 2, "head_dim": hd,
                      "fused_qkv": True, "qkv_bias": qkv[2], "out_bias": o[2], "names": {"qkv": qkv_name, "o": o_name}}
        if qkv[3]:
            kind["transposed"] = True
        if getattr(m, "is_causal", True) is False:
            kind["causal"] = False
        return kind
    return None


# The key under which a kind proposal lists children the module holds
# beside the kind's (docs/model-format.md, [[module.module]]).
HELD = "held_children"


def _position_bias(m: nn.Module, ch: dict[str, nn.Module]) -> list[str]:
    """T5's first attention in each stack holds relative_attention_bias,
    nn.Embedding(buckets, heads): the position bias every layer adds to
    its scores, a lookup and an add (no matmul). It is the module's last
    child, held beside the kind's projections."""
    e = ch.get("relative_attention_bias")
    heads = getattr(m, "n_heads", None)
    if not isinstance(e, nn.Embedding) or list(ch)[-1] != "relative_attention_bias" or recognise(e) is None:
        return []
    if not isinstance(heads, int) or e.embedding_dim != heads:
        return []
    return ["relative_attention_bias"]


def _attention(m: nn.Module) -> Kind | None:
    """Attention with q, k, v (and o) projections, or one fused qkv
    projection; flash = false where its core runs unfused (_unfused_core:
    transformers' eager attention, which Gemma 2's soft-capped scores
    need), as for the query_key_value attentions."""
    kind = _attention_projections(m)
    if kind is not None and _unfused_core(m):
        kind["flash"] = False
    return kind


def _attention_projections(m: nn.Module) -> Kind | None:
    ch = _param_children(m)
    own = _params(m)
    if set(own) - {"sinks"}:
        return None
    # BERT's and DistilBERT's attention_head_size, T5's key_value_proj_dim.
    hd = getattr(m, "head_dim", None) or getattr(m, "attention_head_size", None) or getattr(m, "key_value_proj_dim", None)
    if not isinstance(hd, int) or hd <= 0:
        return None
    if not own:
        fused = _fused_attention(m, ch, hd)
        if fused is not None:
            return fused
    for names in _ATTENTION_NAMES:
        if not set(names) <= set(ch):
            continue
        rest = set(ch) - set(names)
        held = _position_bias(m, ch)
        rest -= set(held)
        if rest - {"q_norm", "k_norm"}:
            return None
        projs = [ch[n] for n in names]
        if not all(_is_linear(x) for x in projs):
            return None
        q, k, v = projs[:3]
        o = projs[3] if len(projs) == 4 else None
        # Keys and values from another sequence (cross-attention) are read
        # off the trace: describe sets kv_dim and kv_seq_len
        # (attention_source).
        order = [n for n in ch if n in names]
        q_last = order == [names[1], names[2], names[0], *names[3:]]  # fairseq's k, v, q: BART, OPT, Whisper, CLIP
        if order != list(names) and not q_last:
            return None
        dim = int(q.in_features)
        if q.out_features % hd or k.out_features % hd:
            return None
        heads, kv = q.out_features // hd, k.out_features // hd
        if v.out_features != kv * hd:
            return None
        if o is not None and (o.in_features, o.out_features) != (heads * hd, dim):
            return None
        if k.in_features != v.in_features:
            return None
        qkv_bias = q.bias is not None
        if (k.bias is not None) != qkv_bias or (v.bias is not None) != qkv_bias:
            return None
        kind: Kind = {"kind": "attention", "dim": dim, "heads": heads, "kv_heads": kv, "head_dim": hd, "qkv_bias": qkv_bias,
                      "names": dict(zip(("q", "k", "v", "o"), names))}
        if o is None:
            kind["out_proj"] = False
        else:
            kind["out_bias"] = o.bias is not None
        if k.in_features != dim:
            kind["kv_dim"] = int(k.in_features)  # a cross-attention's source width; the trace must confirm it
        if q_last:
            kind["q_last"] = True
        if getattr(m, "is_causal", True) is False:
            kind["causal"] = False
        elif not hasattr(m, "is_causal") and getattr(m, "is_decoder", None) is False:
            kind["causal"] = False  # T5's encoder
        if hasattr(m, "key_value_proj_dim"):
            # T5's attention (mT5's, LongT5's, UMT5's) adds its position
            # bias to the scores and runs matmul, softmax, matmul: never a
            # fused kernel.
            kind["flash"] = False
        if held:
            # Registered after the kind's children; describe moves this to
            # the module's held_children.
            kind[HELD] = held
        if "sinks" in own:
            # gpt-oss: a learned logit per head, the module's own parameter.
            if tuple(own["sinks"].shape) != (heads,):
                return None
            kind["sinks"] = True
        if rest:
            if rest != {"q_norm", "k_norm"}:
                return None
            qn, kn = _norm(ch["q_norm"]), _norm(ch["k_norm"])
            if qn is None or kn is None or qn["norm"] != "rms" or qn["bias"] or kn["bias"]:
                return None
            if qn["dim"] == hd and kn["dim"] == hd:
                kind["qk_norm"] = "head"
            elif qn["dim"] == heads * hd and kn["dim"] == kv * hd:
                kind["qk_norm"] = "full"
            else:
                return None
            kind["names"].update({"q_norm": "q_norm", "k_norm": "k_norm"})
        return kind
    return None


def _mla(m: nn.Module) -> Kind | None:
    """DeepSeek's multi-head latent attention, as DeepseekV2/V3Attention
    register it."""
    ch = _param_children(m)
    cfg = getattr(m, "config", None)
    if cfg is None or _params(m) or not {"kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj"} <= set(ch):
        return None
    try:
        heads = int(getattr(m, "num_heads", None) or cfg.num_attention_heads)
        kind: Kind = {"kind": "mla", "dim": int(cfg.hidden_size), "heads": heads,
                      "kv_lora_rank": int(cfg.kv_lora_rank), "qk_nope_head_dim": int(cfg.qk_nope_head_dim),
                      "qk_rope_head_dim": int(cfg.qk_rope_head_dim), "v_head_dim": int(cfg.v_head_dim),
                      "q_lora_rank": int(cfg.q_lora_rank or 0), "bias": bool(getattr(cfg, "attention_bias", False))}
    except (AttributeError, TypeError, ValueError):
        return None
    if _unfused_core(m):
        kind["flash"] = False
    names = {"kv_a": "kv_a_proj_with_mqa", "kv_a_norm": "kv_a_layernorm", "kv_b": "kv_b_proj", "o": "o_proj"}
    if kind["q_lora_rank"]:
        names.update({"q_a": "q_a_proj", "q_a_norm": "q_a_layernorm", "q_b": "q_b_proj"})
    else:
        names["q"] = "q_proj"
    if set(ch) != set(names.values()):
        return None
    kind["names"] = names
    return kind


def _moe(m: nn.Module) -> Kind | None:
    """A mixture of experts as transformers 5 builds them: a router, the
    experts fused into gate_up_proj [E, 2·I, H] and down_proj [E, H, I],
    and maybe a gated shared-expert MLP (docs/model-format.md, moe)."""
    ch = _param_children(m)
    if _params(m) or "experts" not in ch:
        return None
    router_name = next((n for n in ("gate", "router") if n in ch), None)
    if router_name is None:
        return None
    experts, router = ch["experts"], ch[router_name]
    shared_name = next((n for n in ch if n.startswith("shared_expert")), None)
    if set(ch) - {"experts", router_name} - ({shared_name} if shared_name else set()):
        return None
    ep = _params(experts)
    rp = _params(router)
    biased = list(ep) == ["gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"]  # gpt-oss
    if _param_children(experts) or (list(ep) != ["gate_up_proj", "down_proj"] and not biased) or _param_children(router):
        return None
    if set(rp) - {"weight", "bias"} or "weight" not in rp or rp["weight"].dim() != 2:
        return None
    gu, dn = ep["gate_up_proj"], ep["down_proj"]
    if gu.dim() != 3 or dn.dim() != 3:
        return None
    e, dim = int(rp["weight"].shape[0]), int(rp["weight"].shape[1])
    # [E, 2·I, H] and [E, H, I], or transposed (Llama 4, gpt-oss) [E, H, 2·I]
    # and [E, I, H]: down_proj's shape tells them apart where H = I
    # (gpt-oss-20b's 2880 and 2880).
    g1, g2 = int(gu.shape[1]), int(gu.shape[2])
    if g2 == dim and g1 % 2 == 0 and tuple(dn.shape) == (e, dim, g1 // 2):
        transposed, hidden = False, g1 // 2
    elif g1 == dim and g2 % 2 == 0 and tuple(dn.shape) == (e, g2 // 2, dim):
        transposed, hidden = True, g2 // 2
    else:
        return None
    if int(gu.shape[0]) != e:
        return None
    act = _act(experts, gated=True) or _act(m, gated=True)
    if act is None and isinstance(getattr(experts, "alpha", None), float) and isinstance(getattr(experts, "limit", None), float):
        # GptOssExperts: a clamped SwiGLU, gate·σ(alpha·gate)·(up + 1), with
        # no act_fn; its matmuls are a SwiGLU's.
        act = "swiglu"
    cfg = getattr(m, "config", None)
    top_k = getattr(m, "top_k", None) or getattr(router, "top_k", None) or getattr(cfg, "num_experts_per_tok", None)
    if act is None or not isinstance(top_k, int):
        return None
    kind: Kind = {"kind": "moe", "dim": dim, "hidden": hidden, "experts": e, "top_k": top_k, "activation": act,
                  "grouped": True, "fused_gate_up": True,
                  "names": {"router": router_name, "experts": "experts", "gate_up": "gate_up_proj", "down": "down_proj"}}
    if transposed:
        kind["transposed"] = True
    if biased:
        if tuple(ep["gate_up_proj_bias"].shape) != (e, 2 * hidden) or tuple(ep["down_proj_bias"].shape) != (e, dim):
            return None
        kind["bias"] = True
    if "bias" in rp:
        kind["router_bias"] = True
    order = list(ch)
    if order.index("experts") < order.index(router_name):
        kind["experts_first"] = True
    if shared_name:
        sh = _mlp(ch[shared_name])
        if sh is None or sh.get("activation") != act or sh["dim"] != dim or sh["hidden"] % hidden or sh.get("bias"):
            return None
        kind["shared_experts"] = sh["hidden"] // hidden
        kind["names"].update({"shared": shared_name, **sh["names"]})
    return kind


def _query_key_value(m: nn.Module) -> Kind | None:
    """Attention with one fused query_key_value projection, then dense:
    GPT-NeoX's (Pythia's), BLOOM's and Falcon's, Falcon's multi-query
    (one key and value head) and new_decoder_architecture (grouped kv
    heads) included. The projection's width says the kv heads:
    (heads + 2·kv_heads)·head_dim, heads being dense's input over the head
    size; how the rows interleave q, k and v per head changes no shape.
    What the kind does not model of these is said by not_modelled."""
    ch = _param_children(m)
    if _params(m) or list(ch) != ["query_key_value", "dense"]:
        return None
    hd = getattr(m, "head_dim", None) or getattr(m, "head_size", None)  # GPT-NeoX's head_size
    qkv, o = _proj(ch["query_key_value"]), _proj(ch["dense"])
    if not isinstance(hd, int) or hd <= 0 or qkv is None or o is None or qkv[3] or o[3]:
        return None
    dim, width = qkv[0], qkv[1]
    if o[0] % hd or o[1] != dim or width % hd:
        return None
    heads = o[0] // hd
    kv2 = width // hd - heads
    if kv2 <= 0 or kv2 % 2 or heads % (kv2 // 2):
        return None
    for attr in ("num_heads", "num_attention_heads"):
        said = getattr(m, attr, None)
        if isinstance(said, int) and said != heads:
            return None
    kind: Kind = {"kind": "attention", "dim": dim, "heads": heads, "kv_heads": kv2 // 2, "head_dim": hd,
                  "fused_qkv": True, "qkv_bias": qkv[2], "out_bias": o[2], "names": {"qkv": "query_key_value", "o": "dense"}}
    if getattr(m, "is_causal", True) is False:
        kind["causal"] = False
    if _unfused_core(m):
        kind["flash"] = False
    return kind


def _config(m: nn.Module) -> Any:
    return getattr(m, "config", None)


def _alibi(m: nn.Module) -> bool:
    """m adds ALiBi's per-head linear bias to its scores: its forward
    takes an alibi tensor (BLOOM's always; Falcon's where config.alibi)."""
    try:
        takes = "alibi" in inspect.signature(m.forward).parameters
    except (TypeError, ValueError):
        return False
    return takes and getattr(_config(m), "alibi", True) is not False


def _unfused_core(m: nn.Module) -> bool:
    """The core runs as matmul, softmax, matmul: transformers' eager
    attention, and BLOOM's, whose forward is baddbmm, softmax, bmm whatever
    the config says (BloomAttention keeps no config to dispatch on)."""
    cfg = _config(m)
    if cfg is None:
        return _alibi(m)
    return getattr(cfg, "_attn_implementation", None) == "eager"


def _t5_not_modelled(m: nn.Module) -> str:
    """T5's attention adds its position bias to the scores and runs
    matmul, softmax, matmul (flash = false): element-wise passes over the
    scores the kind does not count. (Its decoder's causal self-attention
    computes all S² pairs, which the kind counts for flash = false.)"""
    out = ["its core runs unfused (matmul, softmax, matmul) with T5's position bias added to every score: no element-wise "
           "pass over the B·heads·S·S_kv scores (bias add, mask, softmax, casts, dropout) is counted"]
    if isinstance(getattr(m, "relative_attention_bias", None), nn.Embedding):
        out.append("it looks up the position bias every layer adds (relative_attention_bias, held beside the kind's "
                   "projections): a gather, no FLOPs, and its saved S·S bucket ids are not counted")
    return "; ".join(out)


def not_modelled(m: nn.Module, kind: Kind) -> str:
    """What the kind recognised for m leaves out of m's cost, said in the
    model file's header ("" where nothing is left out). kind is the final
    one, after the trace (a cross-attention's, a window's): for every
    attention and MLA, an unfused core's extra work and soft-capped
    scores; for the fused query_key_value attentions, ALiBi, partial
    rotary and Falcon's single key/value head; for T5's attention, its
    unfused core and position bias (_t5_not_modelled)."""
    if kind.get("kind") == "attention" and hasattr(m, "key_value_proj_dim"):
        return _t5_not_modelled(m)
    if kind.get("kind") not in ("attention", "mla"):
        return ""
    out: list[str] = []
    qkv = kind.get("names", {}).get("qkv") == "query_key_value"
    alibi = qkv and _alibi(m)
    if alibi:
        out.append("ALiBi adds a per-head linear bias to every score (B·heads·S·S element-wise, no matmul), which the "
                   "kind does not count")
    if kind.get("flash") is False:
        out.append(_unfused_note(kind))
    elif alibi:
        out.append("SDPA gets the bias as a float mask and computes all S² pairs: the kind counts the S·(S+1)/2 pairs "
                   "a causal fused kernel computes")
    if note := _softcap_note(m, kind):
        out.append(note)
    rotary, hd = getattr(m, "rotary_ndims", None), kind.get("head_dim")
    if qkv and isinstance(rotary, int) and isinstance(hd, int) and 0 < rotary < hd:
        out.append("RoPE rotates %d of the %d dims of each head (partial_rotary_factor %.3g) and concatenates the rest: "
                   "the kind counts RoPE's element-wise traffic over whole heads (no FLOPs either way)" % (rotary, hd, rotary / hd))
    if qkv and kind.get("kv_heads") == 1 and int(kind.get("heads", 1)) > 1 and kind.get("flash") is not False:
        out.append("its one key and value head reaches SDPA unexpanded for every query head (no enable_gqa): the kind "
                   "assumes a fused kernel, which SDPA's dispatch may not pick for unequal head counts, and an eager "
                   "expansion of k and v that this forward does not make")
    return "; ".join(out)


def _unfused_note(kind: Kind) -> str:
    """What an unfused core (flash = false) does that the kind does not
    count. Its FLOPs the kind counts as they run, every (query, key) pair
    (ir/kindcost.go: no causal, window or chunk saving unfused)."""
    return ("its core runs unfused (matmul, softmax, matmul) over every (query, key) pair, as the kind counts it, but no "
            "element-wise pass over the scores (mask, softmax, casts, dropout) is counted, and the probabilities are "
            "kept once")


def _softcap_note(m: nn.Module, kind: Kind) -> str:
    """Soft-capped attention scores, cap·tanh(s/cap) (Gemma 2's
    attn_logit_softcapping), which no kind key says: eager runs it as
    three element-wise passes over the scores, flash_attention_2 and flex
    attention inside the kernel, and transformers' SDPA attention drops
    the softcap argument, so the model runs without it."""
    cap = getattr(m, "attn_logit_softcapping", None)
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap:
        return ""
    impl = getattr(_config(m), "_attn_implementation", None)
    if kind.get("flash") is False:
        return ("its scores are soft-capped (attn_logit_softcapping %g: divide, tanh, multiply, three element-wise "
                "passes over every score and their backward), which the kind does not count" % cap)
    if impl == "sdpa":
        return ("attn_logit_softcapping %g is not applied: transformers' sdpa attention ignores softcap, so this model "
                "runs without it (eager applies it, at three element-wise passes over the scores, flash_attention_2 and "
                "flex_attention inside the kernel); the kind counts no cap" % cap)
    return ("its scores are soft-capped (attn_logit_softcapping %g) inside the %s kernel, whose extra work the kind "
            "does not count" % (cap, impl or "fused"))


_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_CONV_TRANSPOSED = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def _conv_padding(m: nn.Module) -> tuple[list[int] | None, str]:
    """A convolution's padding on each side as the conv kind says it, or
    why the kind cannot say it."""
    if isinstance(m, _CONV_TRANSPOSED):
        return None, "it is a transposed convolution, which the conv kind does not describe"
    if not isinstance(m, _CONVS):
        return None, ""
    if _param_children(m) or set(_params(m)) - {"weight", "bias"}:
        return None, ""
    kernel = [int(k) for k in m.kernel_size]
    if any(int(d) != 1 for d in m.dilation):
        return None, "it has dilation %s, which the conv kind does not describe" % [int(d) for d in m.dilation]
    if isinstance(m.padding, str):
        if m.padding == "valid":
            return [0] * len(kernel), ""
        if m.padding == "same" and all(k % 2 == 1 for k in kernel):
            return [(k - 1) // 2 for k in kernel], ""  # what padding="same" pads on each side
        # Even kernels pad one side more, which the kind cannot say.
        return None, "padding %r with kernel %s pads one side more than the other, which the conv kind does not describe" % (
            m.padding, kernel)
    return [int(p) for p in m.padding], ""


def _conv(m: nn.Module) -> Kind | None:
    """nn.Conv1d, Conv2d and Conv3d. The kind's input_size is the
    spatial size of what forward gives it, which only the trace knows:
    describe adds it (conv_input_size) or drops the kind."""
    padding, _ = _conv_padding(m)
    if padding is None:
        return None
    assert isinstance(m, _CONVS)
    return {"kind": "conv", "in": int(m.in_channels), "out": int(m.out_channels), "kernel": [int(k) for k in m.kernel_size],
            "stride": [int(x) for x in m.stride], "padding": padding, "groups": int(m.groups), "bias": m.bias is not None}


def unrecognised_because(m: nn.Module) -> str:
    """Why a module that looks like one of fsdpc's kinds is measured
    instead ("" where nothing is to be said): a convolution the conv kind
    cannot hold."""
    return _conv_padding(m)[1]


def attention_source(kind: Kind, q: dict[str, Any], k: dict[str, Any], micro_batch: int) -> tuple[Kind | None, str]:
    """The attention kind with what the trace saw of its keys and values:
    q and k are the descriptions of its query and key projections. Keys
    read from another tensor than the queries (an encoder's output) make a
    cross-attention, kv_dim and kv_seq_len the key projection's input
    [batch, length, width]; else the kind is self-attention. None and why
    where the kind cannot say what ran."""
    kind = dict(kind)
    q_in, k_in = q.get("input_shape", []), k.get("input_shape", [])
    if len(k_in) != 3 or len(q_in) != 3:
        return None, "its key projection's input has shape %s, not [batch, length, width]" % (k_in,)
    cross = q.get("reads") != k.get("reads") or q_in != k_in
    if not cross:
        return kind, ""
    if k_in[0] != micro_batch:
        return None, "its keys' batch is %d, not the micro-batch %d" % (k_in[0], micro_batch)
    kind["kv_dim"], kind["kv_seq_len"], kind["causal"] = int(k_in[2]), int(k_in[1]), False
    return kind, ""


def conv_input_size(kind: Kind, input_shape: list[int], micro_batch: int) -> tuple[list[int] | None, str]:
    """The conv kind's input_size from the shape forward gave the module:
    [B, C, spatial…] with B the micro-batch (the kind's cost counts
    micro_batch images), or why not."""
    n = len(kind["kernel"])
    if len(input_shape) != n + 2:
        return None, "its input has shape %s, not [batch, channels] and %d spatial dimensions" % (input_shape, n)
    if input_shape[0] != micro_batch:
        return None, "its input's batch is %d, not the micro-batch %d (the conv kind counts micro_batch inputs)" % (
            input_shape[0], micro_batch)
    return input_shape[2:], ""


def recognise(m: nn.Module) -> Kind | None:
    """The kind and keys that would make m's parameters, or None."""
    if isinstance(m, nn.Linear):
        if _param_children(m) or set(_params(m)) - {"weight", "bias"}:
            return None
        return {"kind": "linear", "in": int(m.in_features), "out": int(m.out_features), "bias": m.bias is not None}
    if isinstance(m, nn.Embedding):
        if _param_children(m) or set(_params(m)) != {"weight"}:
            return None
        return {"kind": "embedding", "num": int(m.num_embeddings), "dim": int(m.embedding_dim)}
    for f in (_conv, _norm, _mla, _attention, _query_key_value, _mlp, _moe):
        k = f(m)
        if k is not None:
            return k
    return None
