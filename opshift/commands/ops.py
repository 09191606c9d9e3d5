"""``opshift ops``: the (op, versions) the evaluator supports."""

from __future__ import annotations

import json


def register(sub, parent) -> None:
    p = sub.add_parser("ops", parents=[parent], help="list the ops and versions the evaluator "
                       "supports", description="List every (domain, op) the bundled evaluator "
                       "implements, with the schema versions it implements.\n\nexample:\n"
                       "  opshift ops --json", formatter_class=_raw())
    p.set_defaults(func=run)


def _raw():
    import argparse

    return argparse.RawDescriptionHelpFormatter


def run(args) -> int:
    from ..evaluator import supported_ops

    table = supported_ops()
    if args.json:
        print(json.dumps([{"domain": d or "ai.onnx", "op": o, "versions": list(v)}
                          for (d, o), v in table.items()], indent=1))
        return 0
    width = max(len(o) for _, o in table)
    for (d, o), v in table.items():
        name = o if not d else f"{d}::{o}"
        print(f"{name:<{width}}  {', '.join(map(str, v))}")
    if not args.quiet:
        print(f"{len(table)} ops")
    return 0
