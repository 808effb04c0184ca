"""apply_plan and verify_first_step on 2 CPU ranks over gloo.

One set of rank processes (torch.multiprocessing) runs every case, so
torch is imported once: each rank writes what happened in each case, and
the tests read it. Each refusal must happen on every rank, naming what
differs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import tempfile
import traceback
import unittest
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fsdpc
from fsdpc.mirror import build_model
from fsdpc.plan import Plan, load_plan

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
WORLD = 2


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def tree(name: str) -> dict[str, Any]:
    with open(fixture(name + ".model.json")) as f:
        return json.load(f)  # type: ignore[no-any-return]


def step(model: torch.nn.Module, plan: Plan) -> None:
    for micro in range(plan.train.grad_accum):
        if plan.train.accumulate_unsharded:
            model.set_requires_gradient_sync(micro == plan.train.grad_accum - 1)
        sum(o.sum() for o in model()).backward()


def applied(name: str) -> str:
    """apply_plan and a verified first step, then a second step."""
    plan = load_plan(fixture(name + ".plan.json"))
    model = build_model(tree(name))
    fsdpc.apply_plan(model, plan)
    with fsdpc.verify_first_step(model) as rec:
        step(model, plan)
    step(model, plan)
    return "ok: %d collectives" % len(rec)


def sharded_gradients_match(name: str) -> str:
    """The gloo adapters (bf16 gathers, PREMUL_SUM) compute what an
    unsharded model's gradients say: each rank's gradient shard equals the
    same rows of the full gradient divided by the plan's factor."""
    plan = load_plan(fixture(name + ".plan.json"))
    ref = build_model(tree(name))
    step(ref, plan)
    model = build_model(tree(name))
    fsdpc.apply_plan(model, plan)
    step(model, plan)
    worst = 0.0
    full = dict(ref.named_parameters())
    for n, p in model.named_parameters():
        if p.grad is None:
            continue
        g = p.grad.full_tensor().float()
        want = full[n].grad.float() * WORLD  # every rank ran the same batch
        unit = next(u for u in plan.units if n in u.params)
        factor = unit.gradient_divide_factor or WORLD
        worst = max(worst, float(((g - want / factor).abs().max() / (want.abs().max() / factor + 1e-6))))
    return "ok" if worst < 0.05 else "gradients differ by %.3f" % worst


def wrong_model(name: str) -> str:
    plan = load_plan(fixture(name + ".plan.json"))
    t = tree(name)
    model = build_model(t)
    # One parameter renamed, one reshaped, one added: four differences.
    w = model.emb._parameters.pop("weight")
    model.emb.register_parameter("table", w)
    model.norm.weight = torch.nn.Parameter(torch.ones(9))
    model.output.register_parameter("bias", torch.nn.Parameter(torch.zeros(33)))
    fsdpc.apply_plan(model, plan)
    return "ok"


def other_plan_on_rank1(name: str) -> str:
    plan = load_plan(fixture(name + ".plan.json"))
    if dist.get_rank() == 1:
        plan = dataclasses.replace(plan, plan_sha256="0" * 64)
    fsdpc.apply_plan(build_model(tree(name)), plan)
    return "ok"


def wrong_world(name: str) -> str:
    fsdpc.apply_plan(build_model(tree(name)), load_plan(fixture(name + ".plan.json")))
    return "ok"


def first_step_differs(name: str) -> str:
    plan = load_plan(fixture(name + ".plan.json"))
    cols = list(plan.collectives)
    i = next(i for i, c in enumerate(cols) if c.kind == "reduce-scatter")
    cols[i] = dataclasses.replace(cols[i], bytes=cols[i].bytes + 4, numel=cols[i].numel + 1)
    plan = dataclasses.replace(plan, collectives=tuple(cols))
    model = build_model(tree(name))
    fsdpc.apply_plan(model, plan)
    with fsdpc.verify_first_step(model):
        step(model, plan)
    return "ok"


CASES: list[tuple[str, Callable[[str], str], str]] = [
    ("decoder2", applied, "decoder2"),
    ("decoder2-bf16", applied, "decoder2-bf16"),
    ("bf16-gradients", sharded_gradients_match, "decoder2-bf16"),
    ("wrong-model", wrong_model, "decoder2"),
    ("other-plan", other_plan_on_rank1, "decoder2"),
    ("wrong-world", wrong_world, "hsdp4"),
    ("first-step", first_step_differs, "decoder2"),
]


def rank_main(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    results = {}
    for case, fn, name in CASES:
        try:
            results[case] = fn(name)
        except Exception as e:  # the refusals under test
            results[case] = "%s: %s" % (type(e).__name__, e)
            if not isinstance(e, (fsdpc.ModelMismatch, fsdpc.PlanMismatch, fsdpc.FirstStepMismatch)):
                results[case] += "\n" + traceback.format_exc()
        dist.barrier()
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ApplyTest(unittest.TestCase):
    results: list[dict[str, str]] = []

    @classmethod
    def setUpClass(cls) -> None:
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(rank_main, args=(free_port(), d), nprocs=WORLD)
            cls.results = []
            for r in range(WORLD):
                with open(os.path.join(d, "rank%d.json" % r)) as f:
                    cls.results.append(json.load(f))

    def every_rank(self, case: str, *want: str) -> None:
        for r, res in enumerate(self.results):
            for w in want:
                self.assertIn(w, res[case], "rank %d" % r)

    def test_applies_and_verifies(self) -> None:
        self.every_rank("decoder2", "ok: ")
        self.every_rank("decoder2-bf16", "ok: ")

    def test_gloo_adapters_keep_gradients(self) -> None:
        self.every_rank("bf16-gradients", "ok")

    def test_wrong_model_names_every_difference(self) -> None:
        self.every_rank("wrong-model", "ModelMismatch", "4 differences", "emb.weight ([33, 8], fp32) is in the plan, not in the model",
                        "emb.table ([33, 8], fp32) is in the model, not in the plan", "norm.weight has shape [9] in the model, [8] in the plan",
                        "output.bias ([33], fp32) is in the model, not in the plan")

    def test_other_plan_on_one_rank(self) -> None:
        self.every_rank("other-plan", "PlanMismatch", "different plans", "rank 1 hold plan 000000000000", "rank 0 hold plan")

    def test_wrong_world(self) -> None:
        self.every_rank("wrong-world", "PlanMismatch", "the job has 2 ranks, the plan 4", "HSDP")

    def test_first_step_differs(self) -> None:
        self.every_rank("first-step", "FirstStepMismatch", "ranks 0, 1", "reduce-scatter 1 of", "bytes in FSDP2", "in the plan (unit ")


if __name__ == "__main__":
    unittest.main()
