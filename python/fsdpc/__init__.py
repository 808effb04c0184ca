"""fsdpc's Python side.

Two bridges between fsdpc and PyTorch, both pure Python over the user's
own torch:

- ``fsdpc.importer``: builds a model on the meta device and describes it
  as an fsdpc model file (``fsdpc import torch``).
- the apply library: applies a plan exported by ``fsdpc`` with
  ``fully_shard`` inside the user's trainer, and checks the first step's
  collectives against it.

Nothing here imports torch at package import time, so ``import fsdpc``
works (and can report a missing torch clearly) in any interpreter.
"""

__all__: list[str] = []
