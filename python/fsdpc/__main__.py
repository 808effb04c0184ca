"""``python -m fsdpc COMMAND``: the package's command line.

- ``preflight PLAN.json [PROGRAM.py ARGS...]``: the start-up check of the
  files ``fsdpc emit launch`` writes (fsdpc.preflight).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def _preflight(args: Sequence[str]) -> int:
    from fsdpc import preflight

    return preflight.main(args)


COMMANDS: dict[str, tuple[str, Callable[[Sequence[str]], int]]] = {
    "preflight": ("check this rank's world and environment against a plan export, then run a program", _preflight),
}


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print("usage: python -m fsdpc COMMAND [ARGS...]\n\ncommands:", file=sys.stderr)
        for name, (what, _) in COMMANDS.items():
            print(f"  {name:10} {what}", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return COMMANDS[argv[0]][1](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
