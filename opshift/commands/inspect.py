"""``opshift inspect``: the model's PRelu, LeakyRelu and Selu nodes, defects, and a convert
dry run."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """\
Show the model's opsets, IR version and node count; a table of every PRelu, LeakyRelu and
Selu (node, the graph or function it sits in, the version in force, dtype, attributes with
their effective values -- '(default)' marks schema defaults -- and the PRelu slope's
broadcast class: shared, per-channel axis 1 (legacy ONNX <= 6, oneDNN per_channel_broadcast
NCX), per-channel last axis (oneDNN NXC) or elementwise); and every defect 'opshift fix' would
repair. With --opset N, also a dry run of 'opshift convert': what each node would become and
why. Nothing is written.

examples:
  opshift inspect model.onnx
  opshift inspect model.onnx --opset 6
  opshift inspect model.onnx --json

exit codes: 0 ok, 2 bad input
"""


def register(sub, parent) -> None:
    p = sub.add_parser("inspect", parents=[parent], help="list activations, slope broadcast "
                       "classes, defects and a convert dry run", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="IN.onnx", help="the model to inspect")
    p.add_argument("--opset", type=int, metavar="N", help="also show what convert to opset N "
                   "would do (dry run)")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import modelio, progress, validate
    from ..errors import OpshiftError
    from ..inspect import inspect
    from ..opsets import MAX_OPSET

    if args.opset is not None and not 1 <= args.opset <= MAX_OPSET:
        raise OpshiftError(f"--opset {args.opset} is outside 1..{MAX_OPSET} (the installed "
                           "onnx)")
    bar = progress.for_args(args, "inspect", 2)
    try:
        with bar.phase("load"):
            model = modelio.load_checked(args.input, allow=(
                validate.ATTRIBUTE, validate.DUPLICATE_VALUE, validate.DUPLICATE_FUNCTION))
        with bar.phase("inspect"):
            report = inspect(model, opset=args.opset,
                             base_dir=Path(args.input).resolve().parent)
    finally:
        bar.close()
    if args.json:
        out = {"input": args.input, **report.to_dict()}
        import json

        print(json.dumps(out, indent=1, default=str))
    elif not args.quiet:
        print(report.table())
    return 0
