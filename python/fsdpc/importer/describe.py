"""The description of one model: its tree, parameters, ties and trace."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from fsdpc.importer import masks
from fsdpc.importer.kinds import HELD, attention_source, conv_input_size, not_modelled, recognise, unrecognised_because
from fsdpc.importer.trace import Trace, run_trace

DTYPES = {
    torch.float64: "fp64", torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
    torch.int64: "int64", torch.int32: "int32", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
}
for _name, _short in (("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2")):
    if hasattr(torch, _name):
        DTYPES[getattr(torch, _name)] = _short

FORMAT = "fsdpc-import-torch/1"


def _holds_params(m: nn.Module) -> bool:
    return any(True for _ in m.parameters())


def describe(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], micro_batch: int, seq_len: int,
             source: dict[str, Any]) -> dict[str, Any]:
    """Describe model, built on the meta device, for the Go side.

    args and kwargs are forward's arguments for one micro-batch. The
    model's parameters keep their dtypes in the description; the traced
    pass runs in bf16, the compute dtype of the plan's mixed precision.
    """
    problems: list[dict[str, str]] = []
    modules: list[dict[str, Any]] = []
    first_name: dict[int, str] = {}  # id(module) -> its first name
    owner: dict[int, str] = {}  # id(parameter) -> its first name

    def walk(m: nn.Module, name: str) -> None:
        entry: dict[str, Any] = {"name": name, "type": type(m).__name__}
        if id(m) in first_name:
            entry["alias_of"] = first_name[id(m)]
        else:
            first_name[id(m)] = name
        params = []
        for local, p in m._parameters.items():
            if p is None:
                continue
            fqn = name + "." + local if name else local
            if p.dtype not in DTYPES:
                problems.append({"module": name, "what": "parameter %s has dtype %s, which fsdpc has no name for" % (fqn, p.dtype)})
            d: dict[str, Any] = {"name": local, "shape": [int(s) for s in p.shape],
                                 "dtype": DTYPES.get(p.dtype, str(p.dtype)), "requires_grad": bool(p.requires_grad)}
            if id(p) in owner:
                d["tied_to"] = owner[id(p)]
            else:
                owner[id(p)] = fqn
            params.append(d)
        entry["params"] = params
        kids = [(n, c) for n, c in m._modules.items() if c is not None and _holds_params(c)]
        entry["children"] = [n for n, _ in kids]
        if "alias_of" not in entry:
            kind = recognise(m)
            if kind is not None:
                if HELD in kind:
                    entry[HELD] = kind.pop(HELD)
                entry["kind"] = kind
            elif why := unrecognised_because(m):
                entry["measured_because"] = why
        modules.append(entry)
        for n, c in kids:
            walk(c, name + "." + n if name else n)

    walk(model, "")

    # Hooks already on the model run inside forward and may replace
    # outputs: the pass sees their effect but cannot say what it is.
    for name, m in model.named_modules():
        if m._forward_hooks or m._forward_pre_hooks:
            problems.append({"module": name, "what": "has forward hooks of its own (they may change its inputs or outputs; the dataflow recorded is what they left)"})

    # The pass runs in bf16, the plan's compute dtype (and what grouped
    # expert matmuls require); the description keeps the parameters' own.
    model.to(torch.bfloat16)
    # Floating-point inputs (images, embeddings) join the pass in bf16 too,
    # as autocast would give them to the model's first layer.
    args, kwargs = tree_map(_bf16, (args, kwargs))
    with masks.watch(model) as seen:
        tr = run_trace(model, args, kwargs)
    _merge(modules, tr, problems)
    _sources(modules, micro_batch)
    masks.apply(model, modules, seen, problems)
    for m in modules:
        kind = m.get("kind")
        if kind is not None and kind.get("kind") == "conv":
            size, why = conv_input_size(kind, m.get("input_shape", []), micro_batch)
            if size is None:
                _measure(m, why)
            else:
                kind["input_size"] = size
    # Modules whose parameters forward read directly (an nn.ParameterList
    # indexed by its parent) run though they are never called.
    used = {n for n, mod in model.named_modules()
            if any(id(p) in tr.used_params for p in mod.parameters(recurse=False))}
    for m in modules:
        if "alias_of" in m:
            continue
        if m["name"] in used and not _ran(m):
            m["params_used"] = True
            continue
        if not _ran(m) and _called_parent(modules, m):
            problems.append({"module": m["name"], "what": "is never called in forward: its parameters get no gradient from the pass traced"})
    # What each kind leaves out, said of the kind as the trace left it (a
    # cross-attention is known only now; a withdrawn kind says nothing).
    for m in modules:
        if "kind" in m and "alias_of" not in m:
            if note := not_modelled(model.get_submodule(m["name"]), m["kind"]):
                m["kind_note"] = note
    return {
        "format": FORMAT,
        "source": source,
        "micro_batch": micro_batch,
        "seq_len": seq_len,
        "torch": torch.__version__,
        "modules": modules,
        # What PyTorch counts: each Parameter once, however many names it has.
        "numel": sum(int(p.numel()) for p in model.parameters()),
        "problems": problems + tr.problems,
    }


def _sources(modules: list[dict[str, Any]], micro_batch: int) -> None:
    """Each attention kind with separate projections is self- or
    cross-attention as its key projection's traced input says
    (kinds.attention_source)."""
    by_name = {m["name"]: m for m in modules}
    for m in modules:
        kind = m.get("kind")
        if kind is None or kind.get("kind") != "attention" or kind.get("fused_qkv"):
            continue
        names = kind.get("names", {})
        q, k = by_name.get(_child(m["name"], names.get("q", "wq"))), by_name.get(_child(m["name"], names.get("k", "wk")))
        if q is None or k is None:
            continue
        got, why = attention_source(kind, q, k, micro_batch)
        if got is None:
            _measure(m, why)
        else:
            m["kind"] = got


def _measure(m: dict[str, Any], why: str) -> None:
    """Withdraws m's kind (and the children it held beside it): m is
    measured, for the reason given."""
    m["measured_because"] = why
    del m["kind"]
    m.pop(HELD, None)


def _child(parent: str, local: str) -> str:
    return parent + "." + local if parent else local


def _bf16(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(torch.bfloat16)
    return x


def _called_parent(modules: list[dict[str, Any]], m: dict[str, Any]) -> bool:
    """Report a module never called only where its parent was: one line
    for an unused subtree, not one per module in it."""
    name = m["name"]
    if "." not in name:
        return True
    parent = name.rsplit(".", 1)[0]
    for x in modules:
        if x["name"] == parent:
            return _ran(x)
    return True


def _ran(m: dict[str, Any]) -> bool:
    """A module ran if forward called it or one of its children (an
    nn.ModuleList is never called itself)."""
    return bool(m.get("calls") or m.get("forward"))


def _merge(modules: list[dict[str, Any]], tr: Trace, problems: list[dict[str, str]]) -> None:
    for m in modules:
        if "alias_of" in m:
            continue
        rec = tr.record.get(m["name"])
        if rec is None:
            m["calls"] = 0
            m["reads"] = []
            m["forward"] = []
            m["flops_fwd"] = m["flops_bwd"] = m["activation_bytes"] = 0
            continue
        m["calls"] = rec.calls
        m["reads"] = sorted(rec.reads)
        m["forward"] = [c for c in rec.children_called if c in m["children"]]
        m["flops_fwd"] = rec.flops_fwd
        m["flops_bwd"] = rec.flops_bwd
        m["activation_bytes"] = rec.activation_bytes
        m["own_output"] = rec.own_output
        if rec.input_shape:
            m["input_shape"] = rec.input_shape
        if rec.calls > 1:
            problems.append({"module": m["name"], "what": "is called %d times in forward: the model file places it where it "
                             "first runs, reading what that call read; its measured costs are all calls'" % rec.calls})
        if rec.calls > 1 and "kind" in m:
            # A kind's formula is one call's cost.
            _measure(m, "called %d times in forward" % rec.calls)
