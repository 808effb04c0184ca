"""accelerate's own FSDP2 path, recorded for comparison with an fsdpc plan.

``python -m fsdpc.accelerate_check CASES.json`` runs, for each case (an
accelerate config file, the plan export fsdpc made from the same config,
or none for a config fsdpc refuses, and the Hugging Face ``config.json``
of the model), what a user's job
launched with ``accelerate launch --config_file CONFIG`` does:

- accelerate reads the config: its own launcher code
  (``launch_command_parser``, ``_validate_launch_command``,
  ``prepare_multi_gpu_env``) turns the file into the ``ACCELERATE_*`` and
  ``FSDP_*`` environment its ranks get, and the number of processes;
- every rank builds the model with transformers (``from_config``, seed 0,
  the plan's parameter dtype), an AdamW optimizer, a
  ``FullyShardedDataParallelPlugin()`` (which reads that environment) and
  an ``Accelerator``, and calls ``accelerator.prepare(model, optimizer)``:
  accelerate's activation checkpointing, auto-wrap policy, embedding and
  tail units, root unit and mixed precision, as it does on GPUs;
- one training step (the plan's micro-batches under
  ``accelerator.accumulate``, ``accelerator.backward``, the optimizer's
  step) runs on CPU over gloo.

Each rank writes ``rankR.json`` into the case's directory: every
``fully_shard`` call accelerate made (modules, in call order), every FSDP2
state it left (modules, resolved reshard_after_forward, mixed precision,
offload, parameters and their padded shard sizes), the layouts of the
plan's units, every collective FSDP2 issued (kind, sizes, dtype, reduce
op, group size, in order) and every parameter group's hook, unshard,
copy-out and reshard, in order. fsdpc compares them with the plan
(torchgen.CompareAccelerate).

Two things differ from a GPU job, both said here because they are not
accelerate's doing. accelerate enables FSDP only on an accelerator device:
on CPU its state stays MULTI_CPU and ignores the plugin, so after the
Accelerator is made, the three assignments AcceleratorState makes on a GPU
(distributed type FSDP, the plugin's mixed precision, the plugin) are made
here (``_enable_fsdp_on_cpu``). And gloo has no bf16/fp16 collectives:
the package's adapters (fsdpc._gloo) are installed on every FSDP2 module
after prepare, through FSDP2's own custom-collective hooks; they record
the collective FSDP2 asked for, before adapting it.

Checkpoint-wrapped modules (accelerate's activation checkpointing) carry
``_checkpoint_wrapped_module`` in their names; the records give names with
that segment removed, as the model (and the plan) name them.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["AccelerateConfigError", "Case", "accelerate_env", "main"]

WRAPPED = "_checkpoint_wrapped_module"
# How long a rank waits in one collective: seconds suffice for these
# models; a rank whose peer failed alone stops instead of hanging.
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=3)
# The token batch of each micro-batch: FSDP2's collectives and hooks do not
# depend on its length, so a short one keeps a CPU step quick.
TOKENS = 8


def _plain(name: str) -> str:
    """A module or parameter name without checkpoint-wrapper segments."""
    return ".".join(s for s in name.split(".") if s != WRAPPED)


@dataclass(frozen=True)
class Case:
    config: str  # the accelerate config file
    plan: str  # the plan export (fsdpc export); "" for a config fsdpc refuses
    model: str  # the model's Hugging Face config.json
    out: str  # where each rank writes rankR.json
    # apply_plan: the documented hook (docs/accelerate.md): fsdpc.apply_plan
    # shards the model as the plan says after Accelerator() and before
    # accelerator.prepare, which then leaves an FSDPModule as it is.
    apply_plan: bool = False


class AccelerateConfigError(ValueError):
    """The config is not one accelerate runs with FSDP2."""


def accelerate_env(config: str) -> tuple[dict[str, str], int]:
    """The environment ``accelerate launch --config_file config`` gives
    its ranks (the ACCELERATE_* and FSDP_* variables), and the number of
    processes, computed by accelerate's own launcher code."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(["--config_file", config, "fsdpc-accelerate-check"])
    args, _, _ = _validate_launch_command(args)
    if not args.use_fsdp:
        raise AccelerateConfigError("%s: distributed_type is not FSDP: accelerate would not shard the model" % config)
    if int(getattr(args, "fsdp_version", 1) or 1) != 2:
        raise AccelerateConfigError(
            "%s: fsdp_version is not 2: accelerate runs FSDP1 (FullyShardedDataParallel) for it, which this check does not compare; "
            "`accelerate to-fsdp2 --config_file %s --output_file NEW` converts it" % (config, config))
    env = prepare_multi_gpu_env(args)
    keep = {k: v for k, v in env.items() if k.startswith(("ACCELERATE_", "FSDP_"))}
    return keep, int(args.num_processes)


def _set_case_env(env: dict[str, str]) -> None:
    for k in list(os.environ):
        if k.startswith(("ACCELERATE_", "FSDP_")):
            del os.environ[k]
    os.environ.update(env)


# --- recording -----------------------------------------------------------


class _Recorder:
    """What FSDP2 does in one case on this rank: fully_shard calls, and
    each parameter group's hooks, unshards, copy-outs and reshards."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.group_index: dict[int, int] = {}  # id(FSDPParamGroup) -> plan group, -1 none
        self.micro = 0
        self.prefetching = 0

    def event(self, pg: Any, kind: str, **kw: Any) -> None:
        import torch

        if id(pg) not in self.group_index:
            return
        phase = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        self.events.append(dict(ev=kind, group=self.group_index[id(pg)], phase=phase, micro=self.micro, **kw))


_recorder: list[_Recorder] = []


@contextmanager
def _recording_fully_shard(root: Any, rec: _Recorder) -> Iterator[None]:
    """Records every fully_shard call (accelerate imports it from
    torch.distributed.fsdp at call time): the modules, by name in root."""
    import torch.distributed.fsdp as fsdp

    orig = fsdp.fully_shard

    def fully_shard(module: Any, *args: Any, **kw: Any) -> Any:
        names = {id(m): n for n, m in root.named_modules()}
        mods = list(module) if isinstance(module, (list, tuple)) else [module]
        rec.calls.append({
            "modules": [_plain(names.get(id(m), "?")) for m in mods],
            "reshard_after_forward": kw.get("reshard_after_forward", "default"),
        })
        return orig(module, *args, **kw)

    fsdp.fully_shard = fully_shard
    try:
        yield
    finally:
        fsdp.fully_shard = orig


def _patch_param_groups() -> None:
    """Records, for the active recorder, what each FSDP2 parameter group
    does: its pre-forward, pre-backward and post-backward hooks, and each
    unshard that issues an all-gather (a prefetch when another group's
    hook issues it), copy-out and reshard that takes effect (FSDP2 calls
    them also when they are no-ops). Installed once per process."""
    from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    if getattr(FSDPParamGroup, "_fsdpc_recorded", False):
        return
    orig = {n: getattr(FSDPParamGroup, n) for n in ("unshard", "wait_for_unshard", "reshard", "pre_forward", "pre_backward", "post_backward")}
    prefetch = FSDPParamGroup._prefetch_unshard

    def event(pg: Any, kind: str, **kw: Any) -> None:
        if _recorder:
            _recorder[-1].event(pg, kind, **kw)

    def unshard(self: Any, *a: Any, **kw: Any) -> Any:
        issues = self._all_gather_result is None and not self.is_unsharded
        out = orig["unshard"](self, *a, **kw)
        if issues and self._all_gather_result is not None:
            event(self, "unshard", prefetch=bool(_recorder and _recorder[-1].prefetching > 0))
        return out

    def wait_for_unshard(self: Any, *a: Any, **kw: Any) -> Any:
        pending = self._all_gather_result is not None
        out = orig["wait_for_unshard"](self, *a, **kw)
        if pending:
            event(self, "copy-out")
        return out

    def reshard(self: Any, *a: Any, **kw: Any) -> Any:
        held = self.is_unsharded
        out = orig["reshard"](self, *a, **kw)
        if held and not self.is_unsharded:
            event(self, "reshard")
        return out

    def pre_forward(self: Any, *a: Any, **kw: Any) -> Any:
        if self._training_state != TrainingState.FORWARD:
            event(self, "pre-forward")
        return orig["pre_forward"](self, *a, **kw)

    def pre_backward(self: Any, *a: Any, **kw: Any) -> Any:
        if self._training_state != TrainingState.PRE_BACKWARD:
            event(self, "pre-backward")
        return orig["pre_backward"](self, *a, **kw)

    def post_backward(self: Any, *a: Any, **kw: Any) -> Any:
        event(self, "post-backward")
        return orig["post_backward"](self, *a, **kw)

    def prefetch_unshard(target: Any, pass_type: Any) -> Any:
        if _recorder:
            _recorder[-1].prefetching += 1
        try:
            return prefetch(target, pass_type)
        finally:
            if _recorder:
                _recorder[-1].prefetching -= 1

    FSDPParamGroup.unshard, FSDPParamGroup.wait_for_unshard, FSDPParamGroup.reshard = unshard, wait_for_unshard, reshard
    FSDPParamGroup.pre_forward, FSDPParamGroup.pre_backward, FSDPParamGroup.post_backward = pre_forward, pre_backward, post_backward
    FSDPParamGroup._prefetch_unshard = staticmethod(prefetch_unshard)
    FSDPParamGroup._fsdpc_recorded = True


# --- the model and accelerate --------------------------------------------


def _build_model(config_json: str, dtype: Any) -> Any:
    """The Hugging Face model of config_json, as transformers builds it
    (from_config, no weights downloaded), with seed-0 weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with open(config_json) as f:
        raw = json.load(f)
    model_type = raw.pop("model_type", None)
    if not isinstance(model_type, str):
        raise ValueError("%s has no model_type" % config_json)
    cfg = AutoConfig.for_model(model_type, **raw)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg, dtype=dtype)


def _enable_fsdp_on_cpu(accelerator: Any, plugin: Any) -> None:
    """What AcceleratorState does with an FSDP plugin on an accelerator
    device (state.py: distributed type FSDP, the plugin's mixed precision
    from the Accelerator's, the plugin), which it skips on CPU."""
    from accelerate.utils import DistributedType

    state = accelerator.state
    if state.distributed_type == DistributedType.FSDP:
        return
    if state.distributed_type != DistributedType.MULTI_CPU:
        raise RuntimeError("accelerate made a %s state, not MULTI_CPU: this check runs on CPU ranks over gloo" % state.distributed_type)
    state.distributed_type = DistributedType.FSDP
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    state.fsdp_plugin = plugin


def _states(model: Any) -> list[tuple[Any, list[str]]]:
    """Every FSDP2 state in the model, in module order, with its modules'
    names (checkpoint-wrapper segments removed)."""
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state

    seen: dict[int, tuple[Any, list[str]]] = {}
    order: list[int] = []
    for name, m in model.named_modules():
        st = _get_module_fsdp_state(m)
        if st is None:
            continue
        if id(st) not in seen:
            seen[id(st)] = (st, [])
            order.append(id(st))
        plain = _plain(name)
        if plain not in seen[id(st)][1]:
            seen[id(st)][1].append(plain)
    return [seen[i] for i in order]


_TORCH_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}


def _dtype(dt: Any) -> str:
    return "" if dt is None else str(dt).replace("torch.", "")


def _state_record(st: Any, modules: list[str], world: int) -> dict[str, Any]:
    pg = st._fsdp_param_group
    rec: dict[str, Any] = {"modules": modules, "params": []}
    if pg is None:
        return rec
    info = pg.post_forward_mesh_info
    if info is None:
        reshard: Any = False
    else:
        size = info.shard_mesh_size
        reshard = True if size == world else size
    mp = pg.mp_policy
    rec.update({
        "reshard_after_forward": reshard,
        "param_dtype": _dtype(mp.param_dtype),
        "reduce_dtype": _dtype(mp.reduce_dtype),
        "output_dtype": _dtype(mp.output_dtype),
        "offload": type(pg.offload_policy).__name__ == "CPUOffloadPolicy",
        "params": [{"fqn": _plain(fp._param_fqn), "padded": list(fp.padded_sharded_param_size)} for fp in pg.fsdp_params],
    })
    return rec


def _collective(r: Any) -> dict[str, Any]:
    """A verify.Recorded as torchgen.Collective reads it."""
    inp = out = r.numel
    if r.kind == "all-gather":
        inp = r.numel // r.group_size
    elif r.kind == "reduce-scatter":
        out = r.numel // r.group_size
    return {"op": r.kind, "phase": r.phase, "in": inp, "out": out, "dtype": _TORCH_NAMES.get(r.dtype, r.dtype),
            "reduce": r.reduce.replace("-", "_"), "group_size": r.group_size}


def run_case(case: Case, env: dict[str, str], rank: int) -> None:
    """Prepares the case's model with accelerate, runs one training step,
    and writes what FSDP2 did to case.out/rank{rank}.json."""
    import torch
    import torch.distributed as dist
    from accelerate import Accelerator, FullyShardedDataParallelPlugin
    from accelerate.state import AcceleratorState
    from accelerate.utils import InitProcessGroupKwargs

    from . import _gloo, verify
    from .apply import model_differences
    from .mirror import DTYPES
    from .plan import load_plan

    _set_case_env(env)
    AcceleratorState._reset_state(True)
    # Without a plan (a config fsdpc refuses) the model is built in fp32
    # and one micro-batch runs: what accelerate does with it is recorded.
    plan = load_plan(case.plan) if case.plan else None
    dtype = "fp32"
    if plan is not None:
        dtypes = {p.dtype for p in plan.parameters}
        if len(dtypes) != 1:
            raise ValueError("%s: the plan's parameters have dtypes %s; this check builds the model in one" % (case.plan, sorted(dtypes)))
        dtype = dtypes.pop()
    model = _build_model(case.model, DTYPES[dtype])
    if plan is not None:
        diffs = model_differences(model, plan)
        if diffs:
            raise ValueError("%s is not the model plan %s was made for:\n  - %s" % (case.model, case.plan, "\n  - ".join(diffs[:20])))
    accum = plan.train.grad_accum if plan is not None else 1
    batch = plan.train.micro_batch if plan is not None else 1
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    plugin = FullyShardedDataParallelPlugin()
    # gloo: on CPU accelerate picks MPI where torch has it, which would
    # make each rank a world of its own here (no mpirun). A collective
    # another rank never joins (it failed alone) fails after COLLECTIVE_TIMEOUT
    # rather than gloo's 30 minutes.
    accelerator = Accelerator(cpu=True, fsdp_plugin=plugin, gradient_accumulation_steps=accum,
                              kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=COLLECTIVE_TIMEOUT)])
    _enable_fsdp_on_cpu(accelerator, plugin)
    if plan is not None and accelerator.num_processes != plan.mesh.world_size:
        raise ValueError("accelerate runs %d processes, plan %s %d" % (accelerator.num_processes, case.plan, plan.mesh.world_size))

    if case.apply_plan:
        if plan is None:
            raise ValueError("%s: apply_plan needs a plan" % case.config)
        from .apply import apply_plan

        apply_plan(model, plan)
        # The optimizer over the sharded parameters: accelerate maps the
        # optimizer's parameters to the model's by name and storage, and
        # the unsharded ones apply_plan replaced are no longer the model's.
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    rec = _Recorder()
    _patch_param_groups()
    with _recording_fully_shard(model, rec):
        prepared, optimizer = accelerator.prepare(model, optimizer)
    world = dist.get_world_size()
    states = _states(prepared)
    checkpointed = [_plain(n) for n, m in prepared.named_modules() if type(m).__name__ == "CheckpointWrapper"]
    adapters = (_gloo.GlooAllGather(), _gloo.GlooReduceScatter())
    units = {tuple(u.modules): u.group for u in plan.units} if plan is not None else {}
    for st, modules in states:
        if st._fsdp_param_group is not None:
            rec.group_index[id(st._fsdp_param_group)] = units.get(tuple(modules), -1)
            mod = st._modules[0]
            mod.set_custom_all_gather(adapters[0])
            mod.set_custom_reduce_scatter(adapters[1])

    gen = torch.Generator().manual_seed(1)
    vocab = int(prepared.config.vocab_size)
    _recorder.append(rec)
    try:
        with verify._recording() as collectives:
            for micro in range(accum):
                rec.micro = micro
                ids = torch.randint(0, vocab, (batch, TOKENS), generator=gen)
                with accelerator.accumulate(prepared):
                    # No KV cache: a training step has no use for one, and
                    # under activation checkpointing the recomputed
                    # attention would append to it a second time.
                    loss = prepared(input_ids=ids, labels=ids, use_cache=False).loss
                    accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    finally:
        _recorder.remove(rec)
    dist.barrier()

    by_modules = {tuple(m): _state_record(st, m, world) for st, m in states}
    layouts = [{"modules": list(u.modules), "params": by_modules.get(tuple(u.modules), {}).get("params", [])}
               for u in sorted(plan.units if plan is not None else (), key=lambda u: u.group)]
    import accelerate

    record = {
        "torch": torch.__version__,
        "accelerate": accelerate.__version__,
        "calls": rec.calls,
        "states": list(by_modules.values()),
        "layouts": layouts,
        "collectives": [_collective(r) for r in collectives],
        "events": rec.events,
        "checkpointed": checkpointed,
        "checkpoint": None,
    }
    _write(case.out, rank, record)


# --- processes -----------------------------------------------------------


def _read_cases(path: str) -> list[tuple[Case, dict[str, str]]]:
    with open(path) as f:
        doc = json.load(f)
    out = []
    for c in doc:
        out.append((Case(c["config"], c["plan"], c["model"], c["out"], bool(c.get("apply_plan", False))), dict(c.get("env", {}))))
    return out


def _rank_main(path: str) -> int:
    """Runs every case on this rank. A case that raises (accelerate or
    torch refusing the config, as they do on every rank alike) is recorded
    as its error, and the next case runs."""
    import traceback

    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    for case, env in _read_cases(path):
        try:
            run_case(case, env, rank)
        except Exception as e:
            frames = traceback.extract_tb(e.__traceback__)
            where = "%s:%s" % (os.path.basename(frames[-1].filename), frames[-1].lineno) if frames else ""
            # The first line: torch's messages go on to print whole modules.
            first = (str(e).splitlines() or [""])[0]
            _write(case.out, rank, {"error": "%s: %s" % (type(e).__name__, first[:400]), "where": where})
            if dist.is_initialized():
                dist.barrier()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def _write(out: str, rank: int, record: dict[str, Any]) -> None:
    tmp = os.path.join(out, "rank%d.json.tmp" % rank)
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, os.path.join(out, "rank%d.json" % rank))


def _launch(path: str) -> int:
    """Reads each case's config the way `accelerate launch` does and
    starts the ranks, one process each, with torchrun's environment (not
    torchrun itself: its rendezvous store needs libuv, which Debian's
    torch lacks). A rank that fails ends the others."""
    import socket

    cases = []
    world = 0
    for case, _ in _read_cases(path):
        try:
            env, n = accelerate_env(case.config)
        except AccelerateConfigError as e:
            print("fsdpc accelerate check: %s" % e, file=sys.stderr)
            return 1
        except Exception as e:  # accelerate's own config reading failed
            print("fsdpc accelerate check: accelerate cannot read %s: %s: %s" % (case.config, type(e).__name__, e), file=sys.stderr)
            return 1
        if world and n != world:
            print("fsdpc accelerate check: %s runs %d processes, an earlier config %d; one launch runs one world" % (case.config, n, world), file=sys.stderr)
            return 1
        world = n
        cases.append({"config": case.config, "plan": case.plan, "model": case.model, "out": case.out, "apply_plan": case.apply_plan, "env": env})
    resolved = path + ".env.json"
    with open(resolved, "w") as f:
        json.dump(cases, f)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    ranks = [subprocess.Popen([sys.executable, "-m", "fsdpc.accelerate_check", "--rank", resolved],
                              env=dict(base, RANK=str(r), LOCAL_RANK=str(r))) for r in range(world)]
    while any(p.poll() is None for p in ranks):
        if any(p.returncode not in (None, 0) for p in ranks):
            for p in ranks:
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(0.2)
    codes = [p.wait() for p in ranks]
    return 0 if all(c == 0 for c in codes) else 1


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "--rank":
        return _rank_main(argv[1])
    if len(argv) == 1:
        return _launch(argv[0])
    print("usage: python -m fsdpc.accelerate_check CASES.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
