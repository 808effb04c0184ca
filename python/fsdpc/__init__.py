"""fsdpc's Python side.

Two bridges between fsdpc and PyTorch, both pure Python over the user's
own torch:

- ``fsdpc.importer``: builds a model on the meta device and describes it
  as an fsdpc model file (``fsdpc import torch``).
- the apply library: ``load_plan`` reads a plan exported by ``fsdpc
  export``, ``apply_plan`` applies it with ``fully_shard`` inside the
  user's trainer, and ``verify_first_step`` checks the first step's
  collectives against it (docs/torch.md).

Nothing here imports torch at package import time, so ``import fsdpc``
works (and can report a missing torch clearly) in any interpreter: the
names that need torch are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .plan import Plan, PlanError, load_plan, loads_plan, optimizer_options

if TYPE_CHECKING:
    from .apply import ModelMismatch, PlanMismatch, apply_plan
    from .verify import FirstStepMismatch, verify_first_step

__all__ = [
    "Plan",
    "PlanError",
    "load_plan",
    "loads_plan",
    "optimizer_options",
    "apply_plan",
    "ModelMismatch",
    "PlanMismatch",
    "verify_first_step",
    "FirstStepMismatch",
]

_LAZY = {
    "apply_plan": "apply",
    "ModelMismatch": "apply",
    "PlanMismatch": "apply",
    "verify_first_step": "verify",
    "FirstStepMismatch": "verify",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'fsdpc' has no attribute %r" % name)
    return getattr(importlib.import_module("." + module, __name__), name)
