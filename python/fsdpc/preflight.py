"""The start-up check every rank runs before the training program.

``python -m fsdpc preflight plan.json [train.py ARGS...]`` (what the files
of ``fsdpc emit launch`` run) reads the plan export and compares the
rank's world with it: the export's schema and plan format, the plan's
SHA-256 against the one the launch file was made for
(``FSDPC_PLAN_SHA256``), ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE`` and the node
count against the plan's mesh, every environment variable the plan's
predictions assume, and that torch has FSDP2's ``fully_shard``. It names
every difference and exits 1, so a job the plan was not made for stops on
every rank before its first step; with none it runs the training program
as ``__main__`` in the same process.

The check needs no process group and imports torch only to look for
FSDP2, so it costs a rank well under a second after torch's import.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .plan import COMMAND, PLAN_FORMATS, SCHEMA

PLAN_SHA256_VAR = "FSDPC_PLAN_SHA256"


class PreflightError(Exception):
    """The plan export cannot be read, or the world differs from it."""


@dataclass
class Report:
    """What the check found: differences fail it; notes do not."""

    plan: str
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences

    def format(self, rank: int | None = None) -> str:
        who = "fsdpc preflight" if rank is None else f"fsdpc preflight: rank {rank}"
        lines = []
        if self.differences:
            n = len(self.differences)
            lines.append(
                f"{who}: {self.plan}: {n} difference{'s' if n != 1 else ''} "
                "from the plan; the training program was not started:"
            )
            lines += [f"  - {d}" for d in self.differences]
        for note in self.notes:
            lines.append(f"{who}: note: {note}")
        return "\n".join(lines)


def load_export(path: str) -> dict[str, Any]:
    """Reads a plan export, refusing another schema, command or format."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise PreflightError(f"{path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise PreflightError(f"{path}: not UTF-8 at byte {e.start}") from e
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise PreflightError(f"{path}:{e.lineno}:{e.colno}: {e.msg}") from e
    if not isinstance(doc, dict):
        raise PreflightError(f"{path}: not a plan export (a JSON object)")
    if doc.get("schema") != SCHEMA or doc.get("command") != COMMAND:
        raise PreflightError(
            f"{path}: schema {doc.get('schema')!r} command {doc.get('command')!r}: "
            f"not a plan export (want schema {SCHEMA!r}, command {COMMAND!r}; "
            "write one with `fsdpc export plan.bin -o plan.json`)"
        )
    if doc.get("plan_format") not in PLAN_FORMATS:
        raise PreflightError(
            f"{path}: plan format {doc.get('plan_format')!r}: this fsdpc package reads "
            f"formats {', '.join(map(str, PLAN_FORMATS))}; export the plan with the fsdpc "
            "whose Python package the job runs"
        )
    return doc


def _int_env(env: Mapping[str, str], name: str, diffs: list[str]) -> int | None:
    raw = env.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        diffs.append(f"{name}={raw!r} is not a whole number")
        return None


def _alloc_key(conf: str, key: str) -> str | None:
    """The value of key in a PYTORCH_CUDA_ALLOC_CONF-style list."""
    value = None
    for item in conf.split(","):
        k, sep, v = item.partition(":")
        if sep and k.strip() == key:
            value = v.strip()  # the last setting wins, as in c10d's parser
    return value


def _check_env(spec: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    name = str(spec["name"])
    want = str(spec["value"])
    why = str(spec.get("why", ""))
    unset_ok = bool(spec.get("unset_ok", False))
    have = env.get(name)
    key = spec.get("key")
    if key:
        want_v = _alloc_key(want, str(key))
        have_v = None if have is None else _alloc_key(have, str(key))
        if have_v is None:
            if unset_ok:
                return None
            return f"{name} does not set {key} (the plan assumes {key}:{want_v}): {why}"
        if have_v.lower() != (want_v or "").lower():
            return f"{name} sets {key}:{have_v}; the plan assumes {key}:{want_v}: {why}"
        return None
    if have is None:
        return None if unset_ok else f"{name} is not set; the plan assumes {want}: {why}"
    at_least = int(spec.get("at_least", 0) or 0)
    if at_least > 0:
        try:
            if int(have) >= at_least:
                return None
        except ValueError:
            pass
        return f"{name}={have}; the plan assumes at least {at_least} (launch files set {want}): {why}"
    if have != want:
        return f"{name}={have}; the plan assumes {want}: {why}"
    return None


def _fsdp2() -> tuple[str | None, str | None]:
    """Torch's version and whether it has fully_shard (None: it has)."""
    try:
        import torch
    except ImportError as e:
        return None, f"torch cannot be imported: {e}"
    version = str(torch.__version__)
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401  (torch 2.6+)
    except ImportError:
        try:
            from torch.distributed._composable.fsdp import (  # noqa: F401  (2.4, 2.5)
                fully_shard as _fully_shard,
            )
        except ImportError:
            return version, f"torch {version} has no FSDP2 fully_shard (torch 2.4 or newer has)"
    return version, None


def check(
    plan: str,
    *,
    env: Mapping[str, str] | None = None,
    world_size: int | None = None,
    local_world_size: int | None = None,
    rank: int | None = None,
    check_torch: bool = True,
) -> Report:
    """Compares this rank's world and environment with the plan export.

    The world comes from torchrun's variables (WORLD_SIZE,
    LOCAL_WORLD_SIZE, GROUP_WORLD_SIZE) unless given, as a launcher that
    knows it otherwise (Ray Train's context) passes it.
    """
    env = os.environ if env is None else env
    doc = load_export(plan)
    report = Report(plan)
    diffs = report.differences

    sha = doc.get("plan_sha256")
    want_sha = env.get(PLAN_SHA256_VAR)
    if want_sha is not None and want_sha != sha:
        diffs.append(
            f"the plan export is of plan {sha}, the launch file was made for plan {want_sha} "
            f"({PLAN_SHA256_VAR}): a stale or different plan.json on this node?"
        )

    mesh = doc.get("mesh")
    if not isinstance(mesh, dict):
        raise PreflightError(f"{plan}: the plan export has no mesh")
    plan_world = int(mesh["world_size"])
    plan_per_node = min(int(mesh["gpus_per_node"]), plan_world)
    plan_nodes = int(mesh["nodes"])

    if world_size is None:
        world_size = _int_env(env, "WORLD_SIZE", diffs)
    if local_world_size is None:
        local_world_size = _int_env(env, "LOCAL_WORLD_SIZE", diffs)
    if world_size is None:
        diffs.append(
            f"WORLD_SIZE is not set: not started by a distributed launcher (torchrun); "
            f"the plan has {plan_world} ranks"
        )
    elif world_size != plan_world:
        diffs.append(f"the world has {world_size} ranks; the plan has {plan_world}")
    if local_world_size is None:
        if world_size is not None:
            diffs.append(
                f"LOCAL_WORLD_SIZE is not set; the plan has {plan_per_node} processes a node"
            )
    elif local_world_size != plan_per_node:
        diffs.append(
            f"{local_world_size} processes a node (LOCAL_WORLD_SIZE); the plan has "
            f"{plan_per_node} (GPUs per node)"
        )
    if world_size and local_world_size and local_world_size > 0:
        nodes = world_size // local_world_size
        groups = _int_env(env, "GROUP_WORLD_SIZE", diffs)
        if groups is not None:
            nodes = groups
        if nodes != plan_nodes:
            diffs.append(f"the job has {nodes} nodes; the plan has {plan_nodes}")
    if rank is None:
        rank = _int_env(env, "RANK", diffs)
    if rank is not None and world_size is not None and not 0 <= rank < world_size:
        diffs.append(f"RANK={rank} is outside the world of {world_size}")

    environment = doc.get("environment")
    if not isinstance(environment, list):
        diffs.append(
            "the plan export lists no environment: it was written by an fsdpc older than "
            "this package; export the plan again"
        )
    else:
        for spec in environment:
            d = _check_env(spec, env)
            if d is not None:
                diffs.append(d)

    if check_torch:
        version, missing = _fsdp2()
        if missing is not None:
            diffs.append(missing)
        semantics = str(doc.get("semantics", ""))
        modelled = semantics.rpartition("/")[2]
        if version is not None and modelled and not _same_release(version, modelled):
            report.notes.append(
                f"torch {version}; the plan models FSDP2 as of torch {modelled} ({semantics}): "
                "verify_first_step compares the collectives this torch issues"
            )
    return report


def _same_release(version: str, release: str) -> bool:
    """Whether torch's version (2.14.1+cu128) is of release (2.14)."""
    parts = version.split("+")[0].split(".")
    return ".".join(parts[: len(release.split("."))]) == release


def check_or_exit(
    plan: str,
    *,
    world_size: int | None = None,
    local_world_size: int | None = None,
    rank: int | None = None,
) -> None:
    """check, printing what it found on stderr; exits 1 on a difference."""
    try:
        report = check(plan, world_size=world_size, local_world_size=local_world_size, rank=rank)
    except PreflightError as e:
        print(f"fsdpc preflight: {e}", file=sys.stderr)
        raise SystemExit(1) from e
    if rank is None:
        rank = _rank_or_none(os.environ)
    text = report.format(rank)
    if text:
        print(text, file=sys.stderr)
    if not report.ok:
        raise SystemExit(1)


def _rank_or_none(env: Mapping[str, str]) -> int | None:
    try:
        return int(env["RANK"])
    except (KeyError, ValueError):
        return None


USAGE = "usage: python -m fsdpc preflight PLAN.json [PROGRAM.py [ARGS...]]"


def main(argv: Sequence[str]) -> int:
    """``python -m fsdpc preflight``: exit 0 ok, 1 a difference, 2 usage."""
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        print(
            "\nChecks this rank's world and environment against the plan export; with a\n"
            "program, then runs it as __main__ with ARGS.",
            file=sys.stderr,
        )
        return 0 if args else 2
    plan, rest = args[0], args[1:]
    check_or_exit(plan)
    if rest:
        program = rest[0]
        sys.argv = list(rest)
        sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
        runpy.run_path(program, run_name="__main__")
    return 0
