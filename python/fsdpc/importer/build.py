"""Build a model on the meta device, and one micro-batch of inputs for it."""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode


class BuildError(Exception):
    """The model could not be built; the message says what to change."""


def _coerce(v: str) -> Any:
    """--arg values are JSON when they parse as JSON (numbers, booleans,
    lists), otherwise strings."""
    try:
        return json.loads(v)
    except ValueError:
        return v


def parse_args(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise BuildError("--arg %r: want key=value" % p)
        if k in out:
            raise BuildError("--arg %s is given twice" % k)
        out[k] = _coerce(v)
    return out


def from_factory(spec: str, kwargs: dict[str, Any]) -> tuple[nn.Module, Callable[..., Any] | None]:
    """spec is pkg.module:callable. Returns the model and the module's
    example_inputs function, if it has one."""
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise BuildError("%r: want pkg.module:factory (a callable returning an nn.Module)" % spec)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise BuildError("cannot import %s: %s" % (mod_name, e)) from e
    fn: Any = mod
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise BuildError("%s has no attribute %r" % (mod_name, attr))
        fn = getattr(fn, part)
    if not callable(fn):
        raise BuildError("%s is not callable" % spec)
    with torch.device("meta"):
        model = fn(**kwargs)
    if not isinstance(model, nn.Module):
        raise BuildError("%s returned %s, not an nn.Module" % (spec, type(model).__name__))
    return model, getattr(mod, "example_inputs", None)


def from_hf(path: str) -> nn.Module:
    """transformers' own class for the config's architecture, built from
    the config on the meta device."""
    import transformers
    from transformers import AutoConfig

    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise BuildError("%s: %s" % (path, e)) from e
    if not isinstance(d, dict) or not isinstance(d.get("model_type"), str):
        raise BuildError("%s: no model_type: not a transformers config.json" % path)
    typ = d.pop("model_type")
    try:
        config = AutoConfig.for_model(typ, **d)
    except (ValueError, KeyError) as e:
        raise BuildError("%s: transformers %s does not know model_type %r: %s" % (path, transformers.__version__, typ, e)) from e
    archs = getattr(config, "architectures", None) or []
    cls: Any = None
    for a in archs:
        cls = getattr(transformers, a, None)
        if cls is not None:
            break
    with torch.device("meta"):
        if cls is not None:
            model = cls(config)
        else:
            auto = transformers.AutoModelForCausalLM
            try:
                model = auto.from_config(config)
            except ValueError:
                model = transformers.AutoModel.from_config(config)
    if not isinstance(model, nn.Module):
        raise BuildError("%s: transformers built %s, not an nn.Module" % (path, type(model).__name__))
    return model


def hf_inputs(model: nn.Module, micro_batch: int, seq_len: int) -> dict[str, Any]:
    """One micro-batch for a transformers model: token ids, or images for
    a vision model; decoder ids too for an encoder-decoder."""
    meta = torch.device("meta")
    cfg: Any = getattr(model, "config", None)
    main = getattr(model, "main_input_name", "input_ids")
    if main == "input_ids":
        ids = torch.zeros((micro_batch, seq_len), dtype=torch.long, device=meta)
        out: dict[str, Any] = {"input_ids": ids}
        if cfg is not None and getattr(cfg, "is_encoder_decoder", False):
            out["decoder_input_ids"] = ids
        return out
    if main == "pixel_values":
        vision = getattr(cfg, "vision_config", None) or cfg
        size = getattr(vision, "image_size", 224)
        h, w = (size, size) if isinstance(size, int) else tuple(size)
        ch = getattr(vision, "num_channels", 3)
        return {"pixel_values": torch.zeros((micro_batch, ch, h, w), device=meta)}
    raise BuildError("%s takes %s as its input; fsdpc import torch --hf makes token ids and images only"
                     % (type(model).__name__, main))


def factory_inputs(model: nn.Module, example: Callable[..., Any] | None, micro_batch: int,
                   seq_len: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The factory module's example_inputs(model, micro_batch, seq_len)
    (a dict of keyword arguments or a tuple of positional ones) or the
    model's own example_inputs(micro_batch, seq_len); otherwise token ids
    [micro_batch, seq_len] for a forward that takes one argument, or
    nothing for one that takes none."""
    got: Any = None
    if example is not None:
        with torch.device("meta"):
            got = example(model, micro_batch, seq_len)
    elif callable(getattr(model, "example_inputs", None)):
        with torch.device("meta"):
            got = model.example_inputs(micro_batch, seq_len)
    if got is not None:
        if isinstance(got, dict):
            return (), got
        if isinstance(got, tuple):
            return got, {}
        return (got,), {}
    sig = inspect.signature(model.forward)
    required = [p for p in sig.parameters.values()
                if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not required:
        return (), {}
    if len(required) == 1:
        return (torch.zeros((micro_batch, seq_len), dtype=torch.long, device=torch.device("meta")),), {}
    raise BuildError("%s.forward takes %d arguments (%s): define example_inputs(model, micro_batch, seq_len) "
                     "beside the factory, returning them" % (type(model).__name__, len(required),
                                                             ", ".join(p.name for p in required)))


def hf_workarounds(model: nn.Module) -> list[dict[str, str]]:
    """Mends what transformers' own classes need to run forward and lack,
    where the missing value is fixed by the module's parameters; each
    mend is reported by module name.

    DeepseekV2Moe (transformers 5.12) reads self.num_experts under
    topk_method "group_limited_greedy" (DeepSeek-V2's) to split the
    router's logits into groups, and __init__ never sets it: the only
    value that view accepts is the router's number of experts, the rows
    of gate.weight."""
    mended: list[str] = []
    for name, m in model.named_modules():
        if type(m).__name__ != "DeepseekV2Moe" or hasattr(m, "num_experts"):
            continue
        gate = getattr(m, "gate", None)
        w = getattr(gate, "weight", None)
        if isinstance(w, torch.Tensor) and w.dim() == 2:
            setattr(m, "num_experts", int(w.shape[0]))
            mended.append(name)
    if not mended:
        return []
    which = mended[0] if len(mended) == 1 else "%s … %s (%d modules)" % (mended[0], mended[-1], len(mended))
    return [{"module": mended[0], "what": "DeepseekV2Moe has no num_experts, which transformers' group_limited_greedy routing "
             "reads: set to the router's experts (gate.weight's rows) for the traced pass, on %s" % which}]


def logit_softcap_notes(model: nn.Module) -> list[dict[str, str]]:
    """Gemma 2's final_logit_softcapping soft-caps the logits in the
    model's own forward (divide, tanh, multiply over batch·seq·vocab
    values), after lm_head and in no module of the file: element-wise work
    no kind counts, said at the root rather than left out silently."""
    cap = getattr(getattr(model, "config", None), "final_logit_softcapping", None)
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap:
        return []
    return [{"module": "", "what": "soft-caps its logits in its own forward (final_logit_softcapping %g: divide, tanh, "
             "multiply over the batch·seq·vocab logits, three element-wise passes and their saved input): not "
             "counted by any module of this file" % cap}]


@contextmanager
def unpacked_sequences() -> Iterator[None]:
    """transformers' mask builders look for packed sequences in
    position_ids' values (masking_utils.find_packed_sequence_indices,
    when a forward gets no attention_mask and no cache, as SmolLM3's
    does), which meta tensors do not have. The inputs --hf makes are one
    sequence per row, whose positions transformers builds as arange: not
    packed, the function's own answer (None) for them."""
    try:
        from transformers import masking_utils
    except ImportError:
        yield
        return
    found = getattr(masking_utils, "find_packed_sequence_indices", None)
    if found is None:
        yield
        return
    find: Callable[..., Any] = found

    def not_packed(position_ids: torch.Tensor) -> torch.Tensor | None:
        if position_ids.device.type != "meta":
            result: torch.Tensor | None = find(position_ids)
            return result
        return None

    setattr(masking_utils, "find_packed_sequence_indices", not_packed)
    try:
        yield
    finally:
        setattr(masking_utils, "find_packed_sequence_indices", find)


# The mask builders transformers' modeling modules import by name, which
# read the padding mask's values (masking_utils._ignore_causal_mask_sdpa:
# padding_mask.all()) to choose SDPA's is_causal over a materialised mask.
_MASK_BUILDERS = ("create_causal_mask", "create_bidirectional_mask")

# Set on each tensor torch.ones returns while the mends are active.
_ONES = "_fsdpc_all_ones"


class _MarkOnes(TorchFunctionMode):  # type: ignore[misc]
    """Marks what torch.ones returns: a tensor whose values are known
    without reading them (all ones), even on the meta device."""

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is torch.ones and isinstance(out, torch.Tensor):
            try:
                setattr(out, _ONES, True)
            except (AttributeError, RuntimeError):
                pass
        return out


def _caller_module(names: dict[int, str], depth: int = 6) -> str | None:
    """The name of the model's module whose forward is on the Python stack
    just above the caller (its frame's self), if any."""
    f: FrameType | None = sys._getframe(2)
    for _ in range(depth):
        if f is None:
            return None
        owner = f.f_locals.get("self")
        if owner is not None and id(owner) in names:
            return names[id(owner)]
        f = f.f_back
    return None


@contextmanager
def meta_mends(model: nn.Module, notes: list[dict[str, str]]) -> Iterator[None]:
    """Two value reads transformers' encoder-decoders and OPT make in
    forward, each mended only where its answer is fixed without the
    values, and reported in notes by module name.

    A forward given no attention_mask that builds an all-ones one itself
    (BART's decoder, OPT's, mBART's, Marian's: torch.ones(batch, length))
    hands it to create_causal_mask, whose SDPA path asks padding_mask.all()
    to choose is_causal. An all-ones mask masks nothing, so the builder is
    given none instead, for which it answers without reading values; any
    other mask goes through unchanged (and a meta one then fails the
    import, naming the module).

    LayerDrop (BART's, OPT's, Whisper's encoder and decoder in training:
    skip layer i if torch.rand([]) < layerdrop) draws a scalar and compares
    it. Each draw a module with a float layerdrop makes gets a real 1.0
    on the CPU, so every layer runs; with layerdrop > 0 the model skips
    layers at random in training, which the file counts as always run,
    said by module name."""
    names = {id(m): n for n, m in model.named_modules()}
    drops = {id(m): n for n, m in model.named_modules()
             if isinstance(getattr(m, "layerdrop", None), float) and not isinstance(getattr(m, "layerdrop"), bool)}
    for n, m in model.named_modules():
        p = getattr(m, "layerdrop", None)
        if id(m) in drops and isinstance(p, float) and p > 0:
            notes.append({"module": n, "what": "has layerdrop %g: layers skipped at random in training, counted as always run" % p})
    mended: dict[str, str] = {}
    patched: list[tuple[Any, str, Any]] = []

    def wrap(builder: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def build(*args: Any, **kwargs: Any) -> Any:
            mask = kwargs.get("attention_mask")
            if isinstance(mask, torch.Tensor) and mask.device.type == "meta" and getattr(mask, _ONES, False):
                kwargs["attention_mask"] = None
                who = _caller_module(names)
                if who is not None:
                    mended.setdefault(who, builder)
            return fn(*args, **kwargs)

        return build

    for modname in sorted({type(m).__module__ for m in model.modules()}):
        mod = sys.modules.get(modname)
        if mod is None or not modname.startswith("transformers."):
            continue
        for builder in _MASK_BUILDERS:
            fn = getattr(mod, builder, None)
            if callable(fn):
                patched.append((mod, builder, fn))
                setattr(mod, builder, wrap(builder, fn))

    original_rand = torch.rand

    class _Mends(_MarkOnes):
        def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if func is original_rand and drops and _is_scalar_size(args, kwargs):
                who = _caller_module(drops)
                if who is not None:
                    return torch.ones((), device="cpu")
            return super().__torch_function__(func, types, args, kwargs)

    try:
        with _Mends():
            yield
    finally:
        for mod, builder, fn in reversed(patched):
            setattr(mod, builder, fn)
        for who, builder in sorted(mended.items()):
            notes.append({"module": who, "what": "builds an all-ones attention_mask itself (none given) and passes it to "
                          "transformers' %s, which reads its values to choose SDPA's is_causal: given no mask instead, "
                          "the same answer without the values" % builder})


def _is_scalar_size(args: Any, kwargs: Any) -> bool:
    """torch.rand([]) or torch.rand(()): a 0-d draw."""
    if len(args) > 1:
        return False
    size = args[0] if args else (kwargs or {}).get("size")
    return isinstance(size, (list, tuple)) and len(size) == 0
