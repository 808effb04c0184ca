"""python -m fsdpc.importer (--factory pkg.module:fn [--arg k=v ...] | --hf config.json)
--micro-batch B --seq-len S: the model's description as JSON on stdout.
Errors go to stderr with exit status 1 (2 for a usage error)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

from fsdpc.importer.build import (BuildError, factory_inputs, from_factory, from_hf, hf_inputs, hf_workarounds,
                                  logit_softcap_notes, meta_mends, parse_args, unpacked_sequences)
from fsdpc.importer.describe import describe
from fsdpc.importer.trace import TraceError


MARKER = "--- fsdpc import torch: description ---"


def accelerate_view(model: torch.nn.Module) -> dict[str, Any]:
    """What accelerate's FSDP2 path reads of a model besides its modules
    (fsdpc import accelerate): _no_split_modules (sorted: transformers
    keeps it in a set), the input and output embeddings by name, and the
    final norm as accelerate 1.14's _find_final_norm finds it: the last
    child of the base model (base_model_prefix) whose class name holds
    "Norm"."""
    names = {id(m): n for n, m in model.named_modules()}

    def name_of(fn: str) -> str | None:
        get = getattr(model, fn, None)
        if not callable(get):
            return None
        try:
            m = get()
        except (NotImplementedError, AttributeError):
            return None
        return names.get(id(m)) if isinstance(m, torch.nn.Module) else None

    prefix = getattr(model, "base_model_prefix", "")
    base = getattr(model, prefix, None) if prefix else model
    final = None
    if isinstance(base, torch.nn.Module):
        for _, child in base.named_children():
            if "Norm" in type(child).__name__:
                final = names.get(id(child))
    ns = getattr(model, "_no_split_modules", None)
    return {"no_split_modules": None if ns is None else sorted(str(x) for x in ns),
            "input_embeddings": name_of("get_input_embeddings"),
            "output_embeddings": name_of("get_output_embeddings"),
            "final_norm": final}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m fsdpc.importer")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--factory")
    src.add_argument("--hf")
    ap.add_argument("--arg", action="append", default=[])
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--seq-len-default", action="store_true",
                    help="seq-len was not given: use min(max_position_embeddings, --seq-len) for an --hf model")
    a = ap.parse_args(argv)
    source: dict[str, Any]
    try:
        if a.hf is not None:
            if a.arg:
                raise BuildError("--arg is for a factory; --hf takes the config alone")
            model = from_hf(a.hf)
            seq_len = a.seq_len
            cfg: Any = getattr(model, "config", None)
            maxpos = getattr(cfg, "max_position_embeddings", None)
            if a.seq_len_default and isinstance(maxpos, int) and 0 < maxpos < seq_len:
                seq_len = maxpos
            args: tuple[Any, ...] = ()
            kwargs = hf_inputs(model, a.micro_batch, seq_len)
            import transformers
            source = {"hf": a.hf, "class": type(model).__name__, "model_type": getattr(cfg, "model_type", ""),
                      "transformers": transformers.__version__}
            if "pixel_values" in kwargs:
                source["image_tokens"] = True
        else:
            model, example = from_factory(a.factory, parse_args(a.arg))
            seq_len = a.seq_len
            args, kwargs = factory_inputs(model, example, a.micro_batch, seq_len)
            source = {"factory": a.factory, "args": a.arg, "class": type(model).__name__}
        model.train()
        source["accelerate"] = accelerate_view(model)
        if a.hf is not None:
            notes = hf_workarounds(model) + logit_softcap_notes(model)
            with unpacked_sequences(), meta_mends(model, notes):
                out = describe(model, args, kwargs, a.micro_batch, seq_len, source)
            out["problems"] = notes + out["problems"]
        else:
            out = describe(model, args, kwargs, a.micro_batch, seq_len, source)
    except (BuildError, TraceError) as e:
        print("fsdpc import torch: %s" % e, file=sys.stderr)
        return 1
    # Native libraries may print to stdout while torch loads; the marker
    # tells the Go side where the description starts.
    sys.stdout.write("\n" + MARKER + "\n")
    json.dump(out, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    torch.set_grad_enabled(True)
    sys.exit(main(sys.argv[1:]))
