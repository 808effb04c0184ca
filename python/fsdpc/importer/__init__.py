"""Describe a PyTorch model for ``fsdpc import torch``.

The model is built on the meta device (no storage: a 671B model costs
nothing), and one forward and backward pass on meta tensors records what
a model file needs and the module alone cannot say:

- the module tree in registration order (what FSDP2 walks), every
  parameter's name, shape, dtype and ``requires_grad``, and ties (one
  Parameter reachable under several names);
- the order forward calls the modules in, and whose outputs each module
  reads (tensor provenance through every torch function);
- for modules fsdpc knows, their kind (so its calibrated cost model
  applies); for the rest, FLOPs measured with
  ``torch.utils.flop_counter.FlopCounterMode`` and saved activation bytes
  measured with ``torch.autograd.graph.saved_tensors_hooks``;
- what the pass cannot see (modules never called, custom autograd
  Functions, hooks already on the model that may change outputs, a
  forward that depends on tensor values), by module name.

The description is JSON on stdout (``python -m fsdpc.importer``); the Go
side (ir/hf/torch.go) checks it and writes the model file.
"""

from fsdpc.importer.describe import describe

__all__ = ["describe"]
