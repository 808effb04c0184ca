"""load_plan reads fsdpc export's JSON and refuses anything else by name."""

import json
import os
import tempfile
import unittest

from fsdpc.plan import PLAN_FORMATS, PlanError, load_plan, loads_plan, optimizer_options

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def fixture_doc(name: str) -> dict:  # type: ignore[type-arg]
    with open(fixture(name)) as f:
        return json.load(f)  # type: ignore[no-any-return]


class LoadPlanTest(unittest.TestCase):
    def test_reads_the_export(self) -> None:
        plan = load_plan(fixture("decoder2.plan.json"))
        self.assertEqual(plan.mesh.world_size, 2)
        self.assertEqual(plan.mesh.shape, (2,))
        self.assertEqual(len(plan.plan_sha256), 64)
        self.assertEqual(plan.semantics, "torch-fsdp2/2.14")
        # Bottom-up: the blocks before the root, the root last.
        self.assertEqual([u.name for u in plan.units], ["layers.0", "layers.1", "(root)"])
        self.assertTrue(plan.units[-1].root)
        self.assertEqual(plan.parameters[0].fqn, "emb.weight")
        # prefetch_forward = 1: the first block prefetches the second.
        first = plan.unit(plan.units[0].group)
        self.assertEqual([plan.unit(g).name for g in first.prefetch_forward], ["layers.1"])
        kinds = {c.kind for c in plan.collectives}
        self.assertEqual(kinds, {"all-gather", "reduce-scatter"})

    def test_optimizer_implementation(self) -> None:
        # The fixtures plan AdamW at its default, the fused kernel.
        plan = load_plan(fixture("decoder2.plan.json"))
        self.assertEqual((plan.train.optimizer, plan.train.optimizer_implementation), ("adamw", "fused"))
        self.assertEqual(optimizer_options(plan), {"fused": True})
        doc = fixture_doc("decoder2.plan.json")
        doc["train"]["optimizer_implementation"] = "foreach"
        self.assertEqual(optimizer_options(loads_plan(json.dumps(doc), "x.json")), {"foreach": True})
        # An export from before format 10 names none: PyTorch chooses.
        doc = fixture_doc("decoder2.plan.json")
        del doc["train"]["optimizer_implementation"]
        doc["plan_format"] = 9
        old = loads_plan(json.dumps(doc), "x.json")
        self.assertEqual((old.train.optimizer_implementation, optimizer_options(old)), ("", {}))
        doc["train"]["optimizer_implementation"] = "compiled"
        self.refused(doc, "train.optimizer_implementation", "'compiled'")
        doc["train"]["optimizer_implementation"] = "fused"
        doc["train"]["optimizer"] = "sgd"
        self.refused(doc, "only adamw's")

    def test_max_grad_norm(self) -> None:
        # The fixtures clip nothing: the export leaves the field out.
        plan = load_plan(fixture("decoder2.plan.json"))
        self.assertEqual(plan.train.max_grad_norm, 0.0)
        doc = fixture_doc("decoder2.plan.json")
        doc["train"]["max_grad_norm"] = 1
        self.assertEqual(loads_plan(json.dumps(doc), "x.json").train.max_grad_norm, 1.0)
        for bad in (-1, "1", True, float("inf")):
            doc["train"]["max_grad_norm"] = bad
            with self.assertRaises(PlanError) as cm:
                loads_plan(json.dumps(doc), "x.json")
            self.assertIn("max_grad_norm", str(cm.exception))

    def test_hsdp_mesh(self) -> None:
        plan = load_plan(fixture("hsdp4.plan.json"))
        self.assertEqual(plan.mesh.shape, (2, 2))
        self.assertEqual(plan.mesh.dim_names, ("replicate", "shard"))
        self.assertIn("all-reduce", {c.kind for c in plan.collectives})

    def test_divide_factor_and_reshard(self) -> None:
        plan = load_plan(fixture("decoder2-bf16.plan.json"))
        block = plan.units[0]
        self.assertEqual(block.gradient_divide_factor, 3)
        self.assertIs(block.reshard_after_forward, False)
        self.assertEqual(block.mixed_precision.param_dtype, "bf16")
        self.assertIn("premul-sum", {c.reduce for c in plan.collectives})

    def refused(self, doc: object, *want: str) -> None:
        with self.assertRaises(PlanError) as cm:
            loads_plan(json.dumps(doc), "x.json")
        for w in want:
            self.assertIn(w, str(cm.exception))

    def test_other_schema_version(self) -> None:
        doc = fixture_doc("decoder2.plan.json")
        doc["schema"] = "fsdpc/v2"
        self.refused(doc, "x.json", "fsdpc/v2", "fsdpc/v1")

    def test_other_plan_format(self) -> None:
        for version in (min(PLAN_FORMATS) - 1, max(PLAN_FORMATS) + 1):
            doc = fixture_doc("decoder2.plan.json")
            doc["plan_format"] = version
            self.refused(doc, "plan format %d" % version, "reads formats " + ", ".join(map(str, PLAN_FORMATS)))

    def test_other_command(self) -> None:
        self.refused({"schema": "fsdpc/v1", "command": "show", "plan": {}}, "`fsdpc show`", "fsdpc export")

    def test_missing_and_mistyped_fields(self) -> None:
        doc = fixture_doc("decoder2.plan.json")
        del doc["units"][1]["prefetch_backward"]
        self.refused(doc, "units[1]", "prefetch_backward")
        doc = fixture_doc("decoder2.plan.json")
        doc["mesh"]["shard"] = "2"
        self.refused(doc, "mesh.shard", "an integer")
        doc = fixture_doc("decoder2.plan.json")
        doc["mesh"]["world_size"] = 3
        self.refused(doc, "world size 3")

    def test_not_json_and_missing_file(self) -> None:
        with self.assertRaises(PlanError) as cm:
            loads_plan("{", "bad.json")
        self.assertIn("bad.json: not JSON", str(cm.exception))
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(PlanError) as cm:
                load_plan(os.path.join(d, "none.json"))
            self.assertIn("none.json", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
