"""A plan as ``fsdpc export`` writes it (docs/torch.md, "The plan export").

``load_plan`` reads the JSON into typed, read-only objects and refuses a
document it was not written for: another schema, another command's JSON,
or a field missing or of the wrong type, naming the field. plan.bin itself
is never read here: fsdpc derives everything FSDP2 is asked to do once, in
Go, and this module only carries it.

Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Union

__all__ = [
    "SCHEMA",
    "COMMAND",
    "PLAN_FORMATS",
    "PlanError",
    "Plan",
    "Mesh",
    "Train",
    "Param",
    "MixedPrecision",
    "ParamShard",
    "Unit",
    "Collective",
    "load_plan",
    "loads_plan",
    "optimizer_options",
]

SCHEMA = "fsdpc/v1"
COMMAND = "export"
# The plan.bin format versions whose export this package reads: an export
# of another version may carry fields that mean something else. Format 8
# added the model's FLOPs per token to the plan and format 9 the
# element-wise bytes each segment's backward recomputes, neither of which
# the export carries, so the exports of 7, 8 and 9 are the same. Format 10
# added the optimizer's implementation (train.optimizer_implementation),
# which an export of 10 carries and one of 7 to 9 lacks; format 11 the
# clipping threshold (train.max_grad_norm), absent before it.
PLAN_FORMATS = (7, 8, 9, 10, 11)

# The optimizer implementations a plan prices (AdamW's only).
OPTIMIZER_IMPLEMENTATIONS = ("fused", "foreach")

# The collective kinds and reduce ops an export names.
KINDS = ("all-gather", "reduce-scatter", "all-reduce")
REDUCES = ("", "avg", "sum", "premul-sum")

Reshard = Union[bool, int]


class PlanError(ValueError):
    """The file is not a plan export this package can apply."""


@dataclass(frozen=True)
class Mesh:
    world_size: int
    shard: int
    replicate: int
    nodes: int
    gpus_per_node: int
    dim_names: tuple[str, ...]

    @property
    def hsdp(self) -> bool:
        return self.replicate > 1

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.replicate, self.shard) if self.hsdp else (self.shard,)


@dataclass(frozen=True)
class Train:
    micro_batch: int
    seq_len: int
    grad_accum: int
    accumulate_unsharded: bool
    optimizer: str
    # "fused" or "foreach" for AdamW, what the plan priced its step as;
    # "" for the other optimizers and exports before format 10.
    optimizer_implementation: str = ""
    # The gradient-norm clipping threshold the plan priced the step with
    # (torch.nn.utils.clip_grad_norm_ before optimizer.step()); 0 for none
    # and for exports before format 11.
    max_grad_norm: float = 0.0


@dataclass(frozen=True)
class Param:
    """One entry of ``model.named_parameters()``, in its order."""

    fqn: str
    shape: tuple[int, ...]
    dtype: str
    requires_grad: bool
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class MixedPrecision:
    """A MixedPrecisionPolicy; an empty dtype is None."""

    param_dtype: str
    reduce_dtype: str
    output_dtype: str
    cast_forward_inputs: bool


@dataclass(frozen=True)
class ParamShard:
    fqn: str
    shard_dim: int
    chunk_rows: int
    shard_numel: int


@dataclass(frozen=True)
class Unit:
    """One fully_shard call, and the settings made on it afterwards."""

    group: int
    name: str
    modules: tuple[str, ...]
    root: bool
    params: tuple[str, ...]
    reshard_after_forward: Reshard
    mixed_precision: MixedPrecision
    offload: bool
    prefetch_forward: tuple[int, ...]
    prefetch_backward: tuple[int, ...]
    gradient_divide_factor: float  # 0: not set
    force_sum_reduction: bool
    shard_bytes: int
    param_shards: tuple[ParamShard, ...]


@dataclass(frozen=True)
class Collective:
    """One collective of the first step, as FSDP2 issues it on every rank."""

    kind: str
    micro: int
    phase: str
    group: int
    unit: str
    bytes: int
    numel: int
    dtype: str
    reduce: str
    factor: float
    process_group: str
    group_size: int

    def describe(self) -> str:
        op = " " + self.reduce if self.reduce else ""
        return "%s%s of %s: %d × %s (%d bytes) over %d ranks (%s, micro-batch %d)" % (
            self.kind, op, self.unit, self.numel, self.dtype, self.bytes, self.group_size, self.phase, self.micro)


@dataclass(frozen=True)
class Plan:
    fsdpc_version: str
    plan_format: int
    semantics: str
    plan_sha256: str
    model: str
    model_sha256: str
    scale: int
    mesh: Mesh
    train: Train
    parameters: tuple[Param, ...]
    reduce_scatter_buffers: int
    units: tuple[Unit, ...]
    collectives: tuple[Collective, ...]
    source: str  # the file it was read from, for messages

    def unit(self, group: int) -> Unit:
        """The unit of the plan's group index."""
        for u in self.units:
            if u.group == group:
                return u
        raise PlanError("%s: no unit of group %d" % (self.source, group))


class _Reader:
    """Typed access to one JSON object, naming the field on an error."""

    def __init__(self, obj: Any, where: str, source: str) -> None:
        if not isinstance(obj, dict):
            raise PlanError("%s: %s is not an object" % (source, where or "the document"))
        self.obj: dict[str, Any] = obj
        self.where = where
        self.source = source

    def _get(self, key: str) -> Any:
        if key not in self.obj:
            raise PlanError("%s: %s has no %r" % (self.source, self.where or "the document", key))
        return self.obj[key]

    def _bad(self, key: str, want: str) -> PlanError:
        return PlanError("%s: %s%s is %r, not %s" % (self.source, self.where + "." if self.where else "", key, self.obj[key], want))

    def string(self, key: str) -> str:
        v = self._get(key)
        if not isinstance(v, str):
            raise self._bad(key, "a string")
        return v

    def integer(self, key: str) -> int:
        v = self._get(key)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._bad(key, "an integer")
        return v

    def number(self, key: str) -> float:
        v = self._get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self._bad(key, "a number")
        return float(v)

    def flag(self, key: str) -> bool:
        v = self._get(key)
        if not isinstance(v, bool):
            raise self._bad(key, "true or false")
        return v

    def array(self, key: str) -> list[Any]:
        v = self._get(key)
        if not isinstance(v, list):
            raise self._bad(key, "a list")
        return v

    def strings(self, key: str) -> tuple[str, ...]:
        v = self.array(key)
        if not all(isinstance(x, str) for x in v):
            raise self._bad(key, "a list of strings")
        return tuple(v)

    def integers(self, key: str) -> tuple[int, ...]:
        v = self.array(key)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise self._bad(key, "a list of integers")
        return tuple(v)

    def objects(self, key: str) -> list[_Reader]:
        prefix = (self.where + "." if self.where else "") + key
        return [_Reader(x, "%s[%d]" % (prefix, i), self.source) for i, x in enumerate(self.array(key))]

    def object(self, key: str) -> _Reader:
        return _Reader(self._get(key), (self.where + "." if self.where else "") + key, self.source)


def _reshard(r: _Reader) -> Reshard:
    v = r._get("reshard_after_forward")
    if isinstance(v, bool) or (isinstance(v, int) and v >= 1):
        return v
    raise r._bad("reshard_after_forward", "true, false or a positive integer")


def loads_plan(text: str | bytes | dict[str, Any], source: str = "<plan>") -> Plan:
    """Reads a plan export from its JSON text (or decoded object)."""
    if isinstance(text, dict):
        doc: Any = text
    else:
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise PlanError("%s: not JSON: %s" % (source, e)) from None
    r = _Reader(doc, "", source)
    schema = doc.get("schema")
    if schema != SCHEMA:
        raise PlanError("%s: schema %r: this fsdpc package reads %r (export it again with an fsdpc of the same version)" % (source, schema, SCHEMA))
    command = doc.get("command")
    if command != COMMAND:
        raise PlanError("%s: this is the JSON of `fsdpc %s`, not a plan export: write one with `fsdpc export plan.bin -o plan.json`" % (source, command))
    plan_format = r.integer("plan_format")
    if plan_format not in PLAN_FORMATS:
        raise PlanError("%s: plan format %d: this fsdpc package reads formats %s; export the plan with the fsdpc whose Python package the job runs"
                        % (source, plan_format, ", ".join(map(str, PLAN_FORMATS))))
    m = r.object("mesh")
    mesh = Mesh(m.integer("world_size"), m.integer("shard"), m.integer("replicate"), m.integer("nodes"), m.integer("gpus_per_node"), m.strings("dim_names"))
    if mesh.shard * mesh.replicate != mesh.world_size or mesh.shard < 1 or mesh.replicate < 1:
        raise PlanError("%s: mesh %d × %d does not make world size %d" % (source, mesh.replicate, mesh.shard, mesh.world_size))
    t = r.object("train")
    impl = ""
    if "optimizer_implementation" in t.obj:
        impl = t.string("optimizer_implementation")
        if impl not in OPTIMIZER_IMPLEMENTATIONS:
            raise PlanError("%s: train.optimizer_implementation %r: want one of %s" % (source, impl, ", ".join(OPTIMIZER_IMPLEMENTATIONS)))
        if t.string("optimizer") != "adamw":
            raise PlanError("%s: train.optimizer_implementation %r for optimizer %r: only adamw's is planned" % (source, impl, t.string("optimizer")))
    clip = 0.0
    if "max_grad_norm" in t.obj:
        clip = t.number("max_grad_norm")
        if not (clip >= 0 and clip != float("inf")):
            raise PlanError("%s: train.max_grad_norm %r: want a finite threshold, 0 for none" % (source, clip))
    train = Train(t.integer("micro_batch"), t.integer("seq_len"), t.integer("grad_accum"), t.flag("accumulate_unsharded"), t.string("optimizer"), impl, clip)
    params = tuple(Param(p.string("fqn"), p.integers("shape"), p.string("dtype"), p.flag("requires_grad"), p.strings("aliases")) for p in r.objects("parameters"))
    units = []
    for u in r.objects("units"):
        mp = u.object("mixed_precision")
        units.append(Unit(
            group=u.integer("group"), name=u.string("name"), modules=u.strings("modules"), root=u.flag("root"), params=u.strings("params"),
            reshard_after_forward=_reshard(u),
            mixed_precision=MixedPrecision(mp.string("param_dtype"), mp.string("reduce_dtype"), mp.string("output_dtype"), mp.flag("cast_forward_inputs")),
            offload=u.flag("offload"), prefetch_forward=u.integers("prefetch_forward"), prefetch_backward=u.integers("prefetch_backward"),
            gradient_divide_factor=u.number("gradient_divide_factor"), force_sum_reduction=u.flag("force_sum_reduction"),
            shard_bytes=u.integer("shard_bytes"),
            param_shards=tuple(ParamShard(s.string("fqn"), s.integer("shard_dim"), s.integer("chunk_rows"), s.integer("shard_numel")) for s in u.objects("param_shards")),
        ))
    groups = {unit.group for unit in units}
    for unit in units:
        for g in unit.prefetch_forward + unit.prefetch_backward:
            if g not in groups:
                raise PlanError("%s: unit %s prefetches group %d, which is no unit" % (source, unit.name, g))
    cols = []
    for c in r.objects("collectives"):
        col = Collective(c.string("kind"), c.integer("micro"), c.string("phase"), c.integer("group"), c.string("unit"), c.integer("bytes"), c.integer("numel"),
                         c.string("dtype"), c.string("reduce"), c.number("factor"), c.string("process_group"), c.integer("group_size"))
        if col.kind not in KINDS or col.reduce not in REDUCES:
            raise PlanError("%s: %s: unknown collective %r or reduce op %r" % (source, c.where, col.kind, col.reduce))
        if col.group not in groups:
            raise PlanError("%s: %s is of group %d, which is no unit" % (source, c.where, col.group))
        cols.append(col)
    return Plan(
        fsdpc_version=r.string("fsdpc_version"), plan_format=plan_format, semantics=r.string("semantics"),
        plan_sha256=r.string("plan_sha256"), model=r.string("model"), model_sha256=r.string("model_sha256"), scale=r.integer("scale"),
        mesh=mesh, train=train, parameters=params, reduce_scatter_buffers=r.integer("reduce_scatter_buffers"),
        units=tuple(units), collectives=tuple(cols), source=source,
    )


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Reads the plan export at path (``fsdpc export plan.bin -o PATH``)."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PlanError("cannot read plan export %s: %s" % (p, e.strerror or e)) from None
    return loads_plan(data, p)


def optimizer_options(plan: Plan) -> dict[str, bool]:
    """The keyword arguments that build the optimizer the plan priced:
    ``{"fused": True}`` or ``{"foreach": True}`` for AdamW, ``{}`` where the
    plan names no implementation (other optimizers, older exports)::

        torch.optim.AdamW(model.parameters(), lr=3e-4, **fsdpc.optimizer_options(plan))

    Without them PyTorch picks foreach on CUDA, whose step moves about three
    times the fused kernel's bytes, so a plan priced fused would predict a
    faster step than the job runs."""
    impl = plan.train.optimizer_implementation
    return {impl: True} if impl else {}
