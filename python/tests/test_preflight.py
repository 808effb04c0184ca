"""fsdpc.preflight: every difference named, the program run only without one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
from typing import Any

from fsdpc import preflight

SHA = "ab" * 32


def export(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "fsdpc/v1",
        "command": "export",
        "plan_format": 7,
        "semantics": "torch-fsdp2/2.14",
        "plan_sha256": SHA,
        "mesh": {"world_size": 8, "shard": 4, "replicate": 2, "nodes": 2, "gpus_per_node": 4},
        "environment": [
            {"name": "CUDA_DEVICE_MAX_CONNECTIONS", "value": "8", "at_least": 5, "unset_ok": True, "why": "streams"},
            {"name": "NCCL_BUFFSIZE", "value": "4194304", "unset_ok": True, "why": "nccl memory"},
            {
                "name": "PYTORCH_CUDA_ALLOC_CONF",
                "value": "expandable_segments:False",
                "key": "expandable_segments",
                "unset_ok": True,
                "why": "allocator",
            },
        ],
    }
    doc.update(over)
    return doc


WORLD = {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "GROUP_WORLD_SIZE": "2", "RANK": "5"}


class PreflightTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, doc: Any, name: str = "plan.json") -> str:
        path = os.path.join(self.dir.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def check(self, env: dict[str, str], doc: Any = None) -> preflight.Report:
        path = self.write(export() if doc is None else doc)
        return preflight.check(path, env=env, check_torch=False)

    def test_matching_world(self) -> None:
        env = dict(WORLD, FSDPC_PLAN_SHA256=SHA, CUDA_DEVICE_MAX_CONNECTIONS="32")
        r = self.check(env)
        self.assertTrue(r.ok, r.format())
        self.assertEqual(r.format(), "")

    def test_every_difference_named(self) -> None:
        env = {
            "WORLD_SIZE": "6",
            "LOCAL_WORLD_SIZE": "2",
            "RANK": "7",
            "FSDPC_PLAN_SHA256": "cd" * 32,
            "CUDA_DEVICE_MAX_CONNECTIONS": "1",
            "NCCL_BUFFSIZE": "8388608",
            "PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.6,expandable_segments:True",
        }
        r = self.check(env)
        self.assertFalse(r.ok)
        text = r.format(7)
        for want in [
            "rank 7",
            "8 differences",
            "the world has 6 ranks; the plan has 8",
            "2 processes a node (LOCAL_WORLD_SIZE); the plan has 4",
            "the job has 3 nodes; the plan has 2",
            "RANK=7 is outside the world of 6",
            "launch file was made for plan " + "cd" * 32,
            "CUDA_DEVICE_MAX_CONNECTIONS=1; the plan assumes at least 5",
            "NCCL_BUFFSIZE=8388608; the plan assumes 4194304",
            "expandable_segments:True; the plan assumes expandable_segments:False",
        ]:
            self.assertIn(want, text)

    def test_unset_world(self) -> None:
        r = self.check({})
        self.assertIn("WORLD_SIZE is not set", r.format())

    def test_expandable_required(self) -> None:
        doc = export()
        doc["environment"][2].update(value="expandable_segments:True", unset_ok=False)
        r = self.check(dict(WORLD), doc)
        self.assertIn("does not set expandable_segments", r.format())
        r = self.check(dict(WORLD, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"), doc)
        self.assertTrue(r.ok, r.format())

    def test_not_an_export(self) -> None:
        for doc, want in [
            ("{\n  \"schema\": ", "plan.json:2:"),
            ("[]", "not a plan export"),
            (export(schema="fsdpc/v2"), "schema 'fsdpc/v2'"),
            (export(plan_format=6), "plan format 6"),
            (export(environment=None), "lists no environment"),
        ]:
            with self.subTest(want=want):
                try:
                    r = self.check(dict(WORLD), doc)
                except preflight.PreflightError as e:
                    self.assertIn(want, str(e))
                else:
                    self.assertIn(want, r.format())
        with self.assertRaises(preflight.PreflightError) as cm:
            preflight.check(os.path.join(self.dir.name, "missing.json"), env={})
        self.assertIn("missing.json", str(cm.exception))

    def test_torch_has_fsdp2(self) -> None:
        version, missing = preflight._fsdp2()
        self.assertIsNone(missing)
        self.assertIsNotNone(version)

    def run_module(self, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        full = {k: v for k, v in os.environ.items() if k not in WORLD and not k.startswith("FSDPC_")}
        full.update(env)
        full["PYTHONPATH"] = os.pathsep.join(sys.path)
        return subprocess.run(
            [sys.executable, "-m", "fsdpc", "preflight", *args],
            env=full,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=self.dir.name,
        )

    def test_module_runs_program_only_when_ok(self) -> None:
        plan = self.write(export())
        marker = os.path.join(self.dir.name, "ran")
        program = self.write(
            "import sys\nopen(sys.argv[1], 'w').write(repr(sys.argv[2:]))\n", "train.py"
        )
        bad = self.run_module(dict(WORLD, WORLD_SIZE="4"), plan, program, marker, "a b")
        self.assertEqual(bad.returncode, 1, bad.stderr)
        self.assertIn("the world has 4 ranks; the plan has 8", bad.stderr)
        self.assertFalse(os.path.exists(marker))
        good = self.run_module(dict(WORLD), plan, program, marker, "a b", "$(x)")
        self.assertEqual(good.returncode, 0, good.stderr)
        with open(marker) as f:
            self.assertEqual(f.read(), repr(["a b", "$(x)"]))

    def test_module_usage(self) -> None:
        r = self.run_module({})
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage", r.stderr)


if __name__ == "__main__":
    unittest.main()
