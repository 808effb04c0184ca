"""fsdpc.accelerate_check: reading an accelerate config as `accelerate
launch` does (the root's accelerate), and the names it records."""

from __future__ import annotations

import os
import tempfile
import unittest

from fsdpc import accelerate_check

CONFIG = """compute_environment: LOCAL_MACHINE
distributed_type: %s
fsdp_config:
  fsdp_version: %d
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_reshard_after_forward: false
  fsdp_activation_checkpointing: true
mixed_precision: bf16
num_machines: 1
num_processes: 3
machine_rank: 0
"""


class AccelerateEnvTest(unittest.TestCase):
    def config(self, text: str) -> str:
        d = tempfile.mkdtemp()
        path = os.path.join(d, "accelerate.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_fsdp2(self) -> None:
        env, world = accelerate_check.accelerate_env(self.config(CONFIG % ("FSDP", 2)))
        self.assertEqual(world, 3)
        self.assertEqual(env["ACCELERATE_USE_FSDP"], "true")
        self.assertEqual(env["FSDP_VERSION"], "2")
        self.assertEqual(env["FSDP_AUTO_WRAP_POLICY"], "TRANSFORMER_BASED_WRAP")
        self.assertEqual(env["FSDP_TRANSFORMER_CLS_TO_WRAP"], "LlamaDecoderLayer")
        self.assertEqual(env["FSDP_RESHARD_AFTER_FORWARD"], "false")
        self.assertEqual(env["FSDP_ACTIVATION_CHECKPOINTING"], "true")
        self.assertEqual(env["ACCELERATE_MIXED_PRECISION"], "bf16")
        self.assertFalse([k for k in env if not k.startswith(("ACCELERATE_", "FSDP_"))])

    def test_refusals(self) -> None:
        with self.assertRaisesRegex(accelerate_check.AccelerateConfigError, "fsdp_version is not 2.*to-fsdp2"):
            accelerate_check.accelerate_env(self.config(CONFIG % ("FSDP", 1)))
        with self.assertRaisesRegex(accelerate_check.AccelerateConfigError, "distributed_type is not FSDP"):
            accelerate_check.accelerate_env(self.config(CONFIG % ("MULTI_GPU", 2)))

    def test_plain_names(self) -> None:
        self.assertEqual(accelerate_check._plain("model.layers.0.self_attn._checkpoint_wrapped_module.q_proj.weight"),
                         "model.layers.0.self_attn.q_proj.weight")
        self.assertEqual(accelerate_check._plain("_checkpoint_wrapped_module.w"), "w")
        self.assertEqual(accelerate_check._plain(""), "")


if __name__ == "__main__":
    unittest.main()
