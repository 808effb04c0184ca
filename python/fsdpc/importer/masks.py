"""Which tokens each attention attends to: sliding windows and chunked
attention (docs/model-format.md, attention's window and chunk).

A mask is not a module: transformers builds it once in the model's
forward from its config and hands each layer the one its layer type
names, so the trace cannot see it. The window comes from the values the
model itself keeps: the config's layer_types (transformers 5 fills them
in at init) with its sliding_window or attention_chunk_size, else the
attention module's own sliding_window, else a config sliding_window that
the model applies to every layer (Mistral, Mixtral, Phi-3, Qwen3-MoE). A
transformers model's mask builders are watched during the traced
forward, so a model that builds a windowed mask no attention module
accounts for (or the reverse) is reported by name, never counted as
full causal in silence.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from torch import nn

# transformers' mask builders (masking_utils), by the attention key of
# the model file their mask sets.
BUILDERS = {"create_sliding_window_causal_mask": "window", "create_chunked_causal_mask": "chunk"}

# A module attribute of one of these names that is set, where none of the
# rules below reads a window, says the model has a mask fsdpc did not see.
_HINTS = ("window", "chunk")


class Watch:
    """What watch saw: whether any mask builder was there to watch, and
    which ran."""

    def __init__(self) -> None:
        self.watched = False
        self.called: set[str] = set()


@contextmanager
def watch(model: nn.Module) -> Iterator[Watch]:
    """Records which of transformers' mask builders the model's forward
    calls: each modeling module of the model's classes imports them by
    name, and the names there are wrapped while the block runs."""
    w = Watch()
    called = w.called
    patched: list[tuple[Any, str, Any]] = []

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def builder(*args: Any, **kwargs: Any) -> Any:
            called.add(name)
            return fn(*args, **kwargs)

        return builder

    for modname in sorted({type(m).__module__ for m in model.modules()}):
        mod = sys.modules.get(modname)
        if mod is None or not modname.startswith("transformers."):
            continue
        for name in BUILDERS:
            fn = getattr(mod, name, None)
            if callable(fn):
                patched.append((mod, name, fn))
                setattr(mod, name, wrap(name, fn))
    w.watched = bool(patched)
    try:
        yield w
    finally:
        for mod, name, fn in reversed(patched):
            setattr(mod, name, fn)


def _positive(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def mask_of(m: nn.Module, model_config: Any) -> tuple[dict[str, int], str]:
    """The attention keys (window or chunk) for attention module m, and
    what could not be read ("" when nothing)."""
    cfg = getattr(m, "config", None) or model_config
    idx = getattr(m, "layer_idx", None)
    types = getattr(cfg, "layer_types", None)
    if isinstance(idx, int) and isinstance(types, (list, tuple)) and 0 <= idx < len(types):
        t = types[idx]
        if t == "full_attention":
            return {}, ""
        if t == "sliding_attention":
            w = _positive(getattr(cfg, "sliding_window", None))
            if w is None:
                return {}, "layer_types[%d] is sliding_attention but sliding_window is %r" % (idx, getattr(cfg, "sliding_window", None))
            return {"window": w}, ""
        if t == "chunked_attention":
            c = _positive(getattr(cfg, "attention_chunk_size", None))
            if c is None:
                return {}, "layer_types[%d] is chunked_attention but attention_chunk_size is %r" % (idx, getattr(cfg, "attention_chunk_size", None))
            return {"chunk": c}, ""
        return {}, "layer_types[%d] is %r, a mask fsdpc does not know" % (idx, t)
    if "sliding_window" in vars(m):
        v = vars(m)["sliding_window"]
        if v is None:
            return {}, ""
        w = _positive(v)
        if w is None:
            return {}, "its sliding_window is %r, not a number of tokens" % (v,)
        return {"window": w}, ""
    w = _positive(getattr(cfg, "sliding_window", None))
    if w is not None:
        # One mask for every layer (Mistral, Mixtral, Phi-3, Qwen3-MoE:
        # create_sliding_window_causal_mask whenever sliding_window is set).
        return {"window": w}, ""
    for owner, where in ((m, ""), (cfg, "config.")):
        if owner is None:
            continue
        try:
            attrs = vars(owner)
        except TypeError:
            continue
        for k, v in sorted(attrs.items()):
            if k.startswith("_") or not any(h in k.lower() for h in _HINTS) or isinstance(v, nn.Module):
                continue
            if v is None or v is False or v == 0 or v == -1 or v == (-1, -1) or v == [-1, -1]:
                continue
            return {}, "has %s%s = %r, which fsdpc does not read as a window" % (where, k, v)
    return {}, ""


def apply(model: nn.Module, entries: list[dict[str, Any]], seen: Watch, problems: list[dict[str, str]]) -> None:
    """Sets window or chunk on every described attention kind, and reports
    by module name what cannot be read; seen is what watch saw of the
    traced forward."""
    model_config = getattr(model, "config", None)
    used: set[str] = set()
    for e in entries:
        kind = e.get("kind")
        if not kind or kind.get("kind") != "attention":
            continue
        m = model.get_submodule(e["name"])
        keys, why = mask_of(m, model_config)
        if why:
            problems.append({"module": e["name"], "what": "attention mask not seen: %s; counted as full causal attention" % why})
            continue
        if keys and kind.get("causal") is False:
            problems.append({"module": e["name"], "what": "a %s on non-causal attention, which fsdpc does not model; counted as full attention" % ", ".join(keys)})
            continue
        kind.update(keys)
        used.update(keys)
    if not seen.watched:
        return
    # With layer_types, forward builds every mask its families use and
    # hands each layer the one its type names, which is what mask_of read.
    by_type = isinstance(getattr(model_config, "layer_types", None), (list, tuple))
    for builder, key in sorted(BUILDERS.items()):
        if builder in seen.called and key not in used and not by_type:
            problems.append({"module": "", "what": "forward built a mask with %s, but no attention module says it uses one: "
                             "its attention is counted as full causal" % builder})
        if key in used and builder not in seen.called:
            problems.append({"module": "", "what": "the config gives attention a %s, but forward never called %s: "
                             "the %s is modelled as the config says" % (key, builder, key)})
