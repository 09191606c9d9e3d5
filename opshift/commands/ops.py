"""``opshift ops``: every op version and where the evaluator's kernel for it comes from."""

from __future__ import annotations

import json

DESCRIPTION = """\
List every op onnx knows (default domain, ai.onnx.ml, ai.onnx.preview, ...) with its schema
versions and where the bundled evaluator's kernel for each comes from: opshift's own, or
onnx.reference's (run one node at a time) where opshift has none. Versions with neither
cannot be evaluated: verify and --verify stop with exit 2 on them.

example:
  opshift ops --json
"""


def register(sub, parent) -> None:
    p = sub.add_parser("ops", parents=[parent], help="list the op versions the evaluator "
                       "runs and whose kernel it uses", description=DESCRIPTION,
                       formatter_class=_raw())
    p.set_defaults(func=run)


def _raw():
    import argparse

    return argparse.RawDescriptionHelpFormatter


def run(args) -> int:
    from ..evaluator.kernels import OPSHIFT, every_op

    table = every_op()
    if args.json:
        print(json.dumps([{"domain": d or "ai.onnx", "op": o,
                           "versions": [v for v, s in vs.items() if s],
                           "sources": {str(v): s for v, s in vs.items() if s},
                           "no_kernel": [v for v, s in vs.items() if not s]}
                          for (d, o), vs in table.items()], indent=1))
        return 0
    head = ["op", "opshift", "onnx.reference", "no kernel"]
    rows = []
    for (d, o), vs in table.items():
        cols = [[str(v) for v, s in vs.items() if s == want]
                for want in (OPSHIFT, "onnx.reference", None)]
        rows.append([o if not d else f"{d}::{o}", *(", ".join(c) for c in cols)])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths + [0])).rstrip())
    if not args.quiet:
        counts = [sum(s == want for vs in table.values() for s in vs.values())
                  for want in (OPSHIFT, "onnx.reference", None)]
        print(f"{len(table)} ops; op versions: {counts[0]} opshift, {counts[1]} onnx.reference, "
              f"{counts[2]} no kernel")
    return 0
