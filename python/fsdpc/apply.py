"""apply_plan: a plan export applied to the user's model with fully_shard.

Before anything is sharded every rank checks, and every rank learns every
other rank's result (one all_gather_object), so a job the plan was not made
for stops on every rank with the same message:

- the world: torch.distributed's world size (and, on CUDA, the ranks per
  node) against the plan's mesh, and a given mesh's shape;
- the plan: every rank's plan_sha256, so no rank runs another plan;
- the model: every parameter's name, shape, dtype, requires_grad and
  position in ``named_parameters()``, and the plan's tied parameters; every
  difference is named, not only the first.

Then fully_shard is called once per unit, bottom-up as the export lists
them, with the plan's reshard_after_forward, MixedPrecisionPolicy and
offload policy, and the FSDPModule settings are made: explicit prefetch
lists, the gradient divide factor or forced sums, and the root's
reduce-scatter buffers.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

from . import verify
from .mirror import DTYPES
from .plan import Plan, load_plan

__all__ = ["ModelMismatch", "PlanMismatch", "apply_plan", "model_differences", "build_mesh"]

# At most this many differences are listed; the rest are counted.
MAX_LISTED = 40


class ModelMismatch(ValueError):
    """The model is not the one the plan was made for."""


class PlanMismatch(RuntimeError):
    """The world, the mesh, or another rank's plan is not this plan's."""


def _dtype_name(dt: torch.dtype) -> str:
    return verify.TORCH_DTYPES.get(dt, str(dt).replace("torch.", ""))


def model_differences(model: nn.Module, plan: Plan) -> list[str]:
    """Every way the model's parameters differ from the plan's: names
    missing or extra, shapes, dtypes, requires_grad, ties, and order."""
    out: list[str] = []
    want = {p.fqn: p for p in plan.parameters}
    got = dict(model.named_parameters())
    for p in plan.parameters:
        if p.fqn not in got:
            out.append("%s (%s, %s) is in the plan, not in the model" % (p.fqn, list(p.shape), p.dtype))
    for name, t in got.items():
        if name not in want:
            out.append("%s (%s, %s) is in the model, not in the plan" % (name, list(t.shape), _dtype_name(t.dtype)))
    for name, t in got.items():
        if name not in want:
            continue
        p = want[name]
        if tuple(t.shape) != p.shape:
            out.append("%s has shape %s in the model, %s in the plan" % (name, list(t.shape), list(p.shape)))
        if _dtype_name(t.dtype) != p.dtype:
            out.append("%s is %s in the model, %s in the plan" % (name, _dtype_name(t.dtype), p.dtype))
        if t.requires_grad != p.requires_grad:
            out.append("%s %s in the model, %s in the plan" % (name, *(("is trained", "frozen") if t.requires_grad else ("is frozen", "trained"))))
    # Ties: every alias names the same Parameter as its tensor's first name.
    every = dict(model.named_parameters(remove_duplicate=False))
    aliases = {a: p.fqn for p in plan.parameters for a in p.aliases}
    for alias, first in aliases.items():
        if alias not in every:
            out.append("%s (tied to %s in the plan) is not in the model" % (alias, first))
        elif first in every and every[alias] is not every[first]:
            out.append("%s is tied to %s in the plan, a separate tensor in the model" % (alias, first))
    for name in every:
        if name not in got and name not in aliases:
            out.append("%s is tied in the model, not in the plan" % name)
    # Order: among the names both have, named_parameters() order decides
    # FSDP2's parameter order in a group and the state dict's.
    both_plan = [p.fqn for p in plan.parameters if p.fqn in got]
    both_model = [n for n in got if n in want]
    if both_plan != both_model:
        i = next(i for i, (a, b) in enumerate(zip(both_plan, both_model)) if a != b)
        out.append("parameter order differs from position %d: %s in the model, %s in the plan (registration order decides FSDP2's)" % (i, both_model[i], both_plan[i]))
    return out


def _device_type() -> str:
    backend = str(dist.get_backend())
    return "cuda" if "nccl" in backend and torch.cuda.is_available() else "cpu"


def _world_differences(plan: Plan, mesh: DeviceMesh | None) -> list[str]:
    out = []
    world = dist.get_world_size()
    if world != plan.mesh.world_size:
        out.append("the job has %d ranks, the plan %d (%s)" % (world, plan.mesh.world_size, _mesh_text(plan)))
    local = os.environ.get("LOCAL_WORLD_SIZE")
    if local and _device_type() == "cuda" and plan.mesh.nodes > 1 and int(local) != plan.mesh.gpus_per_node:
        out.append("the job has %s ranks per node, the plan %d GPUs per node" % (local, plan.mesh.gpus_per_node))
    if mesh is not None and tuple(mesh.shape) != plan.mesh.shape:
        out.append("the mesh given is %s, the plan's %s" % (tuple(mesh.shape), _mesh_text(plan)))
    return out


def _mesh_text(plan: Plan) -> str:
    m = plan.mesh
    if m.hsdp:
        return "HSDP: %d replicas × %d-way sharding" % (m.replicate, m.shard)
    return "FSDP over %d ranks" % m.shard


def build_mesh(plan: Plan) -> DeviceMesh:
    """The device mesh the plan assumes: 1-D ("shard",) or HSDP's
    ("replicate", "shard"), on CUDA under NCCL, else on CPU."""
    return init_device_mesh(_device_type(), plan.mesh.shape, mesh_dim_names=plan.mesh.dim_names)


def _agree(plan: Plan, world: list[str], model: list[str]) -> None:
    """Every rank's plan hash and problems, gathered; raises the same on
    every rank when any rank has one: ModelMismatch when the model alone
    differs, else PlanMismatch."""
    local = world + model
    mine = (plan.plan_sha256, local, bool(world))
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    rank = dist.get_rank()
    hashes: dict[str, list[int]] = {}
    for r, (h, _, _) in enumerate(every):
        hashes.setdefault(h, []).append(r)
    if len(hashes) > 1:
        groups = "; ".join("rank%s %s hold plan %.12s" % ("s" if len(rs) > 1 else "", _ranks(rs), h) for h, rs in hashes.items())
        raise PlanMismatch("rank %d: the ranks hold different plans: %s (this rank: %s, %.12s)" % (rank, groups, plan.source, plan.plan_sha256))
    bad = [r for r, (_, diffs, _) in enumerate(every) if diffs]
    if not bad:
        return
    shown = rank if local else bad[0]
    diffs = every[shown][1]
    listed = diffs[:MAX_LISTED]
    more = len(diffs) - len(listed)
    text = "\n".join("  - " + d for d in listed) + ("\n  … and %d more" % more if more > 0 else "")
    cls = PlanMismatch if any(every[r][2] for r in bad) else ModelMismatch
    raise cls("rank %d: the model or world differs from plan %s (%s, %.12s) on rank%s %s; %d difference%s%s:\n%s" % (
        rank, plan.source, plan.model, plan.plan_sha256, "s" if len(bad) > 1 else "", _ranks(bad),
        len(diffs), "s" if len(diffs) != 1 else "", "" if local else " on rank %d" % bad[0], text))


def _ranks(rs: list[int]) -> str:
    return ", ".join(str(r) for r in rs)


def _gloo_refusals(plan: Plan) -> list[str]:
    """What a CPU mesh cannot run: FSDP2 calls all_reduce (HSDP) itself,
    with no hook for a custom one, and gloo reduces neither bf16 nor fp16."""
    out = []
    for c in plan.collectives:
        if c.kind == "all-reduce" and c.dtype not in ("fp32", "fp64"):
            out.append("unit %s all-reduces %s across replicas, which gloo cannot (run on NCCL, or plan reduce_dtype = \"fp32\")" % (c.unit, c.dtype))
            break
    return out


def apply_plan(model: nn.Module, plan: Plan | str | os.PathLike[str], mesh: DeviceMesh | None = None) -> nn.Module:
    """Checks the model and the world against the plan on every rank, then
    shards the model as the plan says. Returns the model (now an
    FSDPModule); verify_first_step(model) checks its first step."""
    if not isinstance(plan, Plan):
        plan = load_plan(plan)
    if not dist.is_available() or not dist.is_initialized():
        raise PlanMismatch("apply_plan: call torch.distributed.init_process_group first (torchrun sets the environment it reads)")
    world = _world_differences(plan, mesh)
    if dist.get_world_size() != plan.mesh.world_size:
        # The world size is the same on every rank: all raise alike
        # without a collective over a world that is not the plan's.
        raise PlanMismatch("rank %d: %s" % (dist.get_rank(), "; ".join(world)))
    cpu = mesh.device_type == "cpu" if mesh is not None else _device_type() == "cpu"
    if cpu:
        world += _gloo_refusals(plan)
    _agree(plan, world, model_differences(model, plan))
    # Every rank holds this plan and the model it was made for: the mesh's
    # groups are made (collectively) only now.
    if mesh is None:
        mesh = build_mesh(plan)
    _check_semantics(plan)
    _shard(model, plan, mesh)
    verify._remember(model, plan)
    return model


def _check_semantics(plan: Plan) -> None:
    want = plan.semantics.rsplit("/", 1)[-1]
    have = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if want != have:
        warnings.warn(
            "plan %s models FSDP2 as torch %s runs it (%s); this is torch %s, whose collectives may differ: verify_first_step checks them"
            % (plan.source, want, plan.semantics, torch.__version__),
            stacklevel=3,
        )


def _module(model: nn.Module, name: str) -> nn.Module:
    return model if name == "" else model.get_submodule(name)


def _shard(model: nn.Module, plan: Plan, mesh: DeviceMesh) -> None:
    cuda = mesh.device_type == "cuda"
    for u in plan.units:
        mods = [_module(model, m) for m in u.modules]
        kw: dict[str, Any] = {"mesh": mesh, "reshard_after_forward": u.reshard_after_forward}
        mp = u.mixed_precision
        if mp.param_dtype or mp.reduce_dtype or mp.output_dtype:
            kw["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=DTYPES[mp.param_dtype] if mp.param_dtype else None,
                reduce_dtype=DTYPES[mp.reduce_dtype] if mp.reduce_dtype else None,
                output_dtype=DTYPES[mp.output_dtype] if mp.output_dtype else None,
                cast_forward_inputs=mp.cast_forward_inputs,
            )
        if u.offload:
            kw["offload_policy"] = CPUOffloadPolicy(pin_memory=cuda)
        fully_shard(mods if len(mods) > 1 else mods[0], **kw)
    # The settings, once every unit is an FSDPModule; a merged unit is
    # set through its first module (its modules share one state).
    units = {u.group: _module(model, u.modules[0]) for u in plan.units}
    gloo: tuple[Any, Any] | None = None
    if not cuda:
        from ._gloo import GlooAllGather, GlooReduceScatter

        gloo = (GlooAllGather(), GlooReduceScatter())
    for u in plan.units:
        m: Any = units[u.group]
        if u.gradient_divide_factor:
            m.set_gradient_divide_factor(u.gradient_divide_factor)
        if u.force_sum_reduction:
            m.set_force_sum_reduction_for_comms(True)
        if u.prefetch_forward:
            m.set_modules_to_forward_prefetch([units[g] for g in u.prefetch_forward])
        if u.prefetch_backward:
            m.set_modules_to_backward_prefetch([units[g] for g in u.prefetch_backward])
        if gloo is not None and u.params:
            m.set_custom_all_gather(gloo[0])
            m.set_custom_reduce_scatter(gloo[1])
    if plan.reduce_scatter_buffers > 1:
        root: Any = model
        root.set_reduce_scatter_max_input_buffers(plan.reduce_scatter_buffers)
