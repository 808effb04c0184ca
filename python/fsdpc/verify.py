"""The first-step check: the collectives FSDP2 issues against the plan's.

``with fsdpc.verify_first_step(model): <the first training step>``
records every collective FSDP2 issues on this rank while the block runs
(all-gathers, reduce-scatters, HSDP's all-reduces; on CUDA/NCCL or
CPU/gloo) and, when the block ends, compares them with the plan's
expected collectives kind by kind, in issue order: the bytes, the dtype,
the reduce op and the number of ranks. Every rank then learns every
other rank's verdict (one all_gather_object), so a difference on any rank
raises FirstStepMismatch on every rank, naming the ranks, the unit and
the first differing collective, rather than letting some ranks run on.

Collectives are recorded where FSDP2 calls torch.distributed (its
all_gather_single, reduce_scatter_single and all_reduce, wrapped only
while the block runs) and where fsdpc's gloo adapters are called; a
collective the training step issues itself (a loss all-reduce for
logging) is not FSDP2's and is not recorded.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from .plan import Collective, Plan

__all__ = ["FirstStepMismatch", "Recorded", "verify_first_step", "compare"]

TORCH_DTYPES: dict[Any, str] = {
    torch.float64: "fp64",
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int32: "int32",
    torch.int64: "int64",
}
SIZES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "uint8": 1, "int8": 1, "int32": 4, "int64": 8, "fp8_e4m3": 1, "fp8_e5m2": 1, "bool": 1}


class FirstStepMismatch(RuntimeError):
    """FSDP2's first step issued other collectives than the plan's."""


@dataclass(frozen=True)
class Recorded:
    """One collective as FSDP2 asked for it on this rank."""

    kind: str
    numel: int  # the larger side: all-gather output, reduce-scatter input
    dtype: str
    reduce: str
    factor: float
    group_size: int
    phase: str

    @property
    def bytes(self) -> int:
        return self.numel * SIZES.get(self.dtype, 0)

    def describe(self) -> str:
        op = " " + self.reduce if self.reduce else ""
        return "%s%s of %d × %s (%d bytes) over %d ranks (%s)" % (self.kind, op, self.numel, self.dtype, self.bytes, self.group_size, self.phase)


# The recorders of the verify_first_step blocks running now.
_active: list[list[Recorded]] = []


def _reduce_name(op: Any) -> tuple[str, float]:
    factor = getattr(op, "factor", None)
    if factor is not None:  # ReduceOp.PREMUL_SUM(f)
        return "premul-sum", float(factor)
    s = str(op)
    for name in ("AVG", "SUM"):
        if s.endswith(name):
            return name.lower(), 0.0
    return s.rsplit(".", 1)[-1].lower(), 0.0


def note(kind: str, output: torch.Tensor, input: torch.Tensor, group: Any, op: Any) -> None:
    """Records one collective in every active block."""
    if not _active:
        return
    big = output if kind == "all-gather" else input
    reduce, factor = _reduce_name(op) if op is not None else ("", 0.0)
    size = dist.get_world_size(group)
    phase = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
    rec = Recorded(kind, big.numel(), TORCH_DTYPES.get(big.dtype, str(big.dtype).replace("torch.", "")), reduce, factor, size, phase)
    for r in _active:
        r.append(rec)


def _from_fsdp() -> bool:
    """Whether the caller's caller is FSDP2 itself."""
    f = sys._getframe(2)
    return str(f.f_globals.get("__name__", "")).startswith("torch.distributed.fsdp")


def _wrap_all_gather(fn: Callable[..., Any]) -> Callable[..., Any]:
    def all_gather(output_tensor: torch.Tensor, input_tensor: torch.Tensor, *args: Any, **kw: Any) -> Any:
        if _from_fsdp():
            note("all-gather", output_tensor, input_tensor, kw.get("group"), None)
        return fn(output_tensor, input_tensor, *args, **kw)

    return all_gather


def _wrap_reduce_scatter(fn: Callable[..., Any]) -> Callable[..., Any]:
    def reduce_scatter(output: torch.Tensor, input: torch.Tensor, *args: Any, **kw: Any) -> Any:
        if _from_fsdp():
            note("reduce-scatter", output, input, kw.get("group"), kw.get("op", dist.ReduceOp.SUM))
        return fn(output, input, *args, **kw)

    return reduce_scatter


def _wrap_all_reduce(fn: Callable[..., Any]) -> Callable[..., Any]:
    def all_reduce(tensor: torch.Tensor, *args: Any, **kw: Any) -> Any:
        if _from_fsdp():
            op = kw.get("op", args[0] if args else dist.ReduceOp.SUM)
            note("all-reduce", tensor, tensor, kw.get("group"), op)
        return fn(tensor, *args, **kw)

    return all_reduce


_WRAPPERS = {
    "all_gather_single": _wrap_all_gather,
    "all_gather_into_tensor": _wrap_all_gather,
    "reduce_scatter_single": _wrap_reduce_scatter,
    "reduce_scatter_tensor": _wrap_reduce_scatter,
    "all_reduce": _wrap_all_reduce,
}


@contextmanager
def _recording() -> Iterator[list[Recorded]]:
    rec: list[Recorded] = []
    saved = {name: getattr(dist, name) for name in _WRAPPERS if hasattr(dist, name)}
    if not _active:
        for name, fn in saved.items():
            setattr(dist, name, _WRAPPERS[name](fn))
    _active.append(rec)
    try:
        yield rec
    finally:
        _active.remove(rec)
        if not _active:
            for name, fn in saved.items():
                setattr(dist, name, fn)


def compare(plan: Plan, got: list[Recorded]) -> str | None:
    """The first difference between the recorded collectives and the
    plan's, kind by kind in issue order; None when they agree."""
    first: tuple[int, str] | None = None
    for kind in ("all-gather", "reduce-scatter", "all-reduce"):
        want = [c for c in plan.collectives if c.kind == kind]
        have = [(i, r) for i, r in enumerate(got) if r.kind == kind]
        found: tuple[int, str] | None = None
        for n, (w, (i, g)) in enumerate(zip(want, have), 1):
            what = _difference(w, g)
            if what:
                found = (i, "%s %d of %d: %s\n  FSDP2 issued: %s\n  the plan:     %s" % (kind, n, len(want), what, g.describe(), w.describe()))
                break
        if found is None and len(want) != len(have):
            if len(have) > len(want):
                i, g = have[len(want)]
                found = (i, "FSDP2 issued %d %ss, the plan %d; the first extra one: %s" % (len(have), kind, len(want), g.describe()))
            else:
                w = want[len(have)]
                found = (len(got), "FSDP2 issued %d %ss, the plan %d; the first missing one: %s" % (len(have), kind, len(want), w.describe()))
        if found is not None and (first is None or found[0] < first[0]):
            first = found
    return first[1] if first else None


def _difference(w: Collective, g: Recorded) -> str:
    if g.bytes != w.bytes:
        return "%d bytes in FSDP2, %d in the plan (unit %s)" % (g.bytes, w.bytes, w.unit)
    if g.dtype != w.dtype:
        return "dtype %s in FSDP2, %s in the plan (unit %s)" % (g.dtype, w.dtype, w.unit)
    if g.reduce != w.reduce or (w.reduce == "premul-sum" and abs(g.factor - w.factor) > 1e-9 * max(1.0, abs(w.factor))):
        return "reduce op %s in FSDP2, %s in the plan (unit %s)" % (_op(g.reduce, g.factor), _op(w.reduce, w.factor), w.unit)
    if g.group_size != w.group_size:
        return "over %d ranks in FSDP2, %d in the plan (unit %s, %s group)" % (g.group_size, w.group_size, w.unit, w.process_group)
    return ""


def _op(reduce: str, factor: float) -> str:
    return "%s(%g)" % (reduce, factor) if reduce == "premul-sum" else reduce


# The plan apply_plan applied to a model, for verify_first_step(model).
_applied: weakref.WeakKeyDictionary[Any, Plan] = weakref.WeakKeyDictionary()


def _remember(model: Any, plan: Plan) -> None:
    _applied[model] = plan


@contextmanager
def verify_first_step(model: Any = None, plan: Plan | None = None) -> Iterator[list[Recorded]]:
    """Checks the collectives of the block (the first training step: every
    micro-batch's forward and backward) against the plan that apply_plan
    applied to model, or against plan. Yields the list it records into.
    Raises FirstStepMismatch on every rank when any rank differs."""
    if plan is None:
        if model is None or model not in _applied:
            raise ValueError("verify_first_step needs the model apply_plan returned, or plan=")
        plan = _applied[model]
    with _recording() as rec:
        yield rec
    # Reached only when the step finished on this rank: a step that
    # raised propagates as it is, without waiting for the other ranks.
    verdict = compare(plan, rec)
    verdicts: list[Any] = [verdict]
    if dist.is_available() and dist.is_initialized():
        verdicts = [None] * dist.get_world_size()
        dist.all_gather_object(verdicts, verdict)
    bad = [(r, v) for r, v in enumerate(verdicts) if v]
    if bad:
        me = dist.get_rank() if dist.is_initialized() else 0
        ranks = ", ".join(str(r) for r, _ in bad)
        first_rank, first = bad[0]
        mine = verdict or ""
        raise FirstStepMismatch(
            "rank %d: the first step differs from plan %s (%.12s) on rank%s %s; %s:\n%s"
            % (me, plan.source, plan.plan_sha256, "s" if len(bad) > 1 else "", ranks,
               "here" if mine else "on rank %d" % first_rank, mine or first)
        )
