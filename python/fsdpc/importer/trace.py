"""One forward and backward pass on meta tensors, with hooks recording
what each module does: when it first runs, whose outputs it reads, the
FLOPs it issues and the activations autograd saves inside it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

# Where a tensor came from: the names of the modules whose outputs it was
# computed from, set on the tensor object itself.
_SRC = "_fsdpc_src"
# The first module that returned a tensor, set on the tensor: a module
# returning a tensor no module inside it returned made it itself.
_MADE = "_fsdpc_made_by"


@dataclass
class Record:
    """What the pass saw of one module (by its first name)."""

    calls: int = 0
    first: int = -1  # order of its first call among all modules
    reads: set[str] = field(default_factory=set)
    children_called: list[str] = field(default_factory=list)
    input_shape: list[int] = field(default_factory=list)
    flops_fwd: int = 0
    flops_bwd: int = 0
    activation_bytes: int = 0
    # Its first call returned a tensor it made (h + ffn(h)), not only
    # tensors a module inside it returned: FSDP2 hooks a unit's
    # pre-backward on what it returns.
    own_output: bool = False


@dataclass
class Trace:
    record: dict[str, Record]
    problems: list[dict[str, str]]
    # used_params: ids of the parameters some torch function read.
    used_params: set[int] = field(default_factory=set)


class TraceError(Exception):
    """The forward or backward pass could not run on meta tensors."""


def _tensors(tree: Any) -> Iterator[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    for x in leaves:
        if isinstance(x, torch.Tensor):
            yield x
        elif hasattr(x, "to_tuple"):  # transformers' ModelOutput
            yield from _tensors(x.to_tuple())


def _src(t: torch.Tensor) -> frozenset[str]:
    s = getattr(t, _SRC, None)
    return s if isinstance(s, frozenset) else frozenset()


class _Tracker:
    """Stands in for FlopCounterMode's ModuleTracker, whose backward
    attribution drifts (a module's backward FLOPs land in its
    neighbours'): parents are the modules on the importer's own stack in
    forward, and in backward the stack at which the autograd node about to
    run was created."""

    def __init__(self) -> None:
        self.parents: set[str] = {"Global"}

    def __enter__(self) -> "_Tracker":
        return self

    def __exit__(self, *args: Any) -> None:
        self.parents = {"Global"}


class _Provenance(TorchFunctionMode):  # type: ignore[misc]
    """Every torch function's tensor outputs come from the union of what
    its tensor inputs came from; the autograd nodes it creates belong to
    the modules running."""

    def __init__(self, stack: list[str], nodes: dict[Any, tuple[str, ...]], params: set[int]) -> None:
        super().__init__()
        self.stack = stack
        self.nodes = nodes
        self.params = params
        self.used: set[int] = set()

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        src: frozenset[str] = frozenset()
        for t in _tensors((args, kwargs)):
            src |= _src(t)
            if id(t) in self.params:
                self.used.add(id(t))
        for t in _tensors(out):
            if src:
                try:
                    setattr(t, _SRC, src | _src(t))
                except (AttributeError, RuntimeError):
                    pass
            fn = t.grad_fn
            if fn is not None and self.stack and fn not in self.nodes:
                self.nodes[fn] = tuple(self.stack)
        return out


def _grouped_mm_flops(a_shape: Any, b_shape: Any, *args: Any, **kwargs: Any) -> int:
    """torch._grouped_mm (transformers' grouped experts): every row of a
    meets one group of b, so the work is one matmul of all rows. Torch's
    flop counter has no formula for it."""
    if len(a_shape) == 2 and len(b_shape) == 3:
        return 2 * int(a_shape[0]) * int(a_shape[1]) * int(b_shape[2])
    if len(a_shape) == 2 and len(b_shape) == 2:  # weight gradient: groups along K
        return 2 * int(a_shape[0]) * int(a_shape[1]) * int(b_shape[1])
    if len(a_shape) == 3 and len(b_shape) == 3:
        return 2 * int(a_shape[0]) * int(a_shape[1]) * int(a_shape[2]) * int(b_shape[2])
    return 0


def _custom_flops() -> dict[Any, Any]:
    op = getattr(torch.ops.aten, "_grouped_mm", None)
    return {op.default: _grouped_mm_flops} if op is not None else {}


def _enter(tracker: _Tracker, stack: tuple[str, ...]) -> Callable[..., None]:
    def hook(grad_outputs: Any) -> None:
        tracker.parents = {"Global", *stack}

    return hook


def run_trace(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Trace:
    names: dict[int, str] = {}
    holds: set[int] = set()
    for name, m in model.named_modules():
        names[id(m)] = name
        if any(True for _ in m.parameters()):
            holds.add(id(m))
    params = {id(p) for p in model.parameters()}
    record: dict[str, Record] = {}
    stack: list[str] = []
    counter = [0]
    problems: list[dict[str, str]] = []
    custom_fn: set[str] = set()
    nodes: dict[Any, tuple[str, ...]] = {}
    tracker = _Tracker()

    def pre(m: nn.Module, args: Any, kwargs: Any) -> None:
        name = names.get(id(m))
        if name is None:
            return
        r = record.setdefault(name, Record())
        if r.calls == 0:
            r.first = counter[0]
            counter[0] += 1
            for t in _tensors((args, kwargs)):
                r.input_shape = [int(s) for s in t.shape]
                break
        if r.calls == 0:
            # A module called again later reads later modules' outputs;
            # its place in the dataflow is its first call's (docs/import.md).
            for t in _tensors((args, kwargs)):
                r.reads |= _src(t)
        r.calls += 1
        stack.append(name)
        tracker.parents = {"Global", *stack}

    def post(m: nn.Module, args: Any, kwargs: Any, out: Any) -> None:
        name = names.get(id(m))
        if name is None:
            return
        if stack and stack[-1] == name:
            stack.pop()
        tracker.parents = {"Global", *stack}
        r = record.get(name)
        for t in _tensors(out):
            if getattr(t, _MADE, None) is None:
                if r is not None and r.calls == 1:
                    r.own_output = True
                try:
                    setattr(t, _MADE, name)
                except (AttributeError, RuntimeError):
                    pass
        if id(m) in holds:
            label = frozenset((name,))
            for t in _tensors(out):
                try:
                    setattr(t, _SRC, label)
                except (AttributeError, RuntimeError):
                    pass

    saved: dict[str, dict[int, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        if id(t) in params or id(base) in params:
            return t
        size = base.numel() * base.element_size()
        for name in stack:
            d = saved.setdefault(name, {})
            d[id(base)] = max(d.get(id(base), 0), size)
        return t

    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    handles = []
    for m in model.modules():
        handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(m.register_forward_hook(post, with_kwargs=True))

    # The classmethod object itself, so that it can be called for any
    # subclass and put back exactly.
    original_apply = torch.autograd.Function.__dict__["apply"]

    def apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if stack and not cls.__module__.startswith("torch."):
            custom_fn.add("%s (custom autograd Function %s.%s)" % (stack[-1], cls.__module__, cls.__qualname__))
        return original_apply.__get__(None, cls)(*args, **kwargs)

    prov = _Provenance(stack, nodes, params)
    fc = FlopCounterMode(display=False, custom_mapping=_custom_flops())
    fc.mod_tracker = tracker
    fwd_counts: dict[str, int] = {}
    try:
        torch.autograd.Function.apply = classmethod(apply)
        with fc:
            try:
                with prov, torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                    with torch.device("meta"):  # tensors forward creates (torch.ones(2)) join the pass
                        out = model(*args, **kwargs)
            except Exception as e:
                where = stack[-1] if stack else "(the model's own forward)"
                hint = ""
                if isinstance(e, (NotImplementedError, RuntimeError)) and ("meta" in str(e) or "data-dependent" in str(e)):
                    hint = (" (a forward that reads tensor values, such as data-dependent control flow or .item(), "
                            "cannot be traced on the meta device)")
                raise TraceError("forward on meta tensors failed in module %s: %s: %s%s"
                                 % (where or "(root)", type(e).__name__, e, hint)) from e
            fwd_counts = {k: sum(v.values()) for k, v in fc.flop_counts.items()}
            losses = [t.float().sum() for t in _tensors(out) if t.is_floating_point() and t.requires_grad]
            if losses:
                for fn, st in nodes.items():
                    fn.register_prehook(_enter(tracker, st))
                try:
                    torch.stack(losses).sum().backward()
                except Exception as e:
                    raise TraceError("backward on meta tensors failed: %s: %s" % (type(e).__name__, e)) from e
            else:
                problems.append({"module": "", "what": "forward returned no floating-point tensor that requires grad: no backward was traced"})
        all_counts = {k: sum(v.values()) for k, v in fc.flop_counts.items()}
    finally:
        torch.autograd.Function.apply = original_apply
        for h in handles:
            h.remove()

    for name, fwd in fwd_counts.items():
        if name in record:
            record[name].flops_fwd = fwd
    for name, total in all_counts.items():
        if name in record:
            record[name].flops_bwd = total - fwd_counts.get(name, 0)
    for name, d in saved.items():
        record[name].activation_bytes = sum(d.values())

    # Children in the order their subtrees first run; a container that is
    # never called itself (nn.ModuleList) runs when its first child does.
    first: dict[str, int] = {}
    for name, r in record.items():
        parts = name.split(".") if name else []
        for i in range(len(parts) + 1):
            anc = ".".join(parts[:i])
            if anc not in first or r.first < first[anc]:
                first[anc] = r.first
    for name in first:
        record.setdefault(name, Record())
    for anc, r in record.items():
        prefix = anc + "." if anc else ""
        kids = {n[len(prefix):].split(".")[0] for n in first if n.startswith(prefix) and n != anc}
        r.children_called = sorted(kids, key=lambda k: first[prefix + k])
    # What an uncalled container reads: what its subtree reads from outside.
    for anc, r in record.items():
        if r.calls == 0 and anc:
            prefix = anc + "."
            for n, x in record.items():
                if n.startswith(prefix):
                    r.reads |= {s for s in x.reads if s != anc and not s.startswith(prefix)}
    for c in sorted(custom_fn):
        mod, _, what = c.partition(" ")
        problems.append({"module": mod, "what": "calls a %s: FLOPs it hides from torch's dispatcher are not counted" % what.strip("()")})
    return Trace(record=record, problems=problems, used_params=prov.used)
