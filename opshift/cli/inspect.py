"""``opshift inspect``: the model's PRelu, LeakyRelu and Selu nodes, defects, and a convert
dry run."""

from __future__ import annotations

import argparse

from opshift.cli import batch
from opshift.cli.options import add_model_options
from opshift.cli.output import Outcome, error_dict
from opshift.errors import OpshiftError

DESCRIPTION = """\
Show the model's opsets, IR version, node count and op counts; its PRelu, LeakyRelu and Selu
grouped by version, dtype and slope broadcast class or attributes (effective values;
'(default)' marks schema defaults); the defects 'opshift fix' would repair, grouped by kind.
The decomposed activations 'opshift fuse' would fuse (form, the op made, whether only with
--allow-rounding and why) and the matches it would refuse (a dry run of fuse).
Slope classes: shared, per-channel axis 1 (PRelu-1/6's 1-D rule, or a [C,1,...,1] slope at
>= 7; oneDNN per_channel_broadcast NCX), per-channel last axis (oneDNN NXC), elementwise.
--all lists every node (the graph or function it sits in, its attributes and slope) and
every defect. With --opset N, also a dry run of 'opshift convert'. Nothing is written.

examples:
  opshift inspect model.onnx
  opshift inspect model.onnx --opset 6
  opshift inspect model.onnx --all
  opshift inspect model.onnx --json
  opshift inspect models/ -j 2

exit codes: 0 ok, 2 bad input, or convert to --opset N is impossible; with several models,
the worst of theirs
"""


def register(sub, parent) -> None:
    p = sub.add_parser("inspect", parents=[parent], help="op counts, activations, slope "
                       "broadcast classes, defects and a convert dry run",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p, writes=False)
    p.add_argument("--opset", type=int, metavar="N", help="also show what convert to opset N "
                   "would do (dry run); exit 2 when it is impossible")
    p.add_argument("--all", action="store_true", help="every activation node, defect and "
                   "change, one line each (default: grouped, a screenful)")
    p.set_defaults(func=run)


def run(args) -> int:
    from opshift.opsets import MAX_OPSET

    if args.opset is not None and not 1 <= args.opset <= MAX_OPSET:
        raise OpshiftError(f"--opset {args.opset} is outside 1..{MAX_OPSET} (the installed "
                           "onnx)")
    return batch.run(args, process, writes=False)


def process(args, job) -> Outcome:
    from opshift import progress
    from opshift.check import structure
    from opshift.cli.models import open_model
    from opshift.cli.options import parse_input_shapes
    from opshift.inspect.report import inspect_model
    from opshift.tables import plural

    o = Outcome("inspect", job.input)
    with progress.stage("load"):
        src = open_model(job.input, allow=structure.REPAIRABLE,
                         shapes=parse_input_shapes(args.input_shape))
    report = inspect_model(src.model, opset=args.opset, base_dir=src.folder, scratch=True,
                           index=src.index)
    o.ops_before, o.ops_after = report.ops, report.ops_at_target
    if args.json:  # (a row per activation: only JSON shows them all as data)
        o.details = report.to_dict()
    defects = sum(len(report.defects.get(k, [])) for k in ("changes", "left_alone", "refused"))
    o.summary = (f"{plural(report.node_count, 'node')}, "
                 f"{plural(len(report.rows), 'PRelu/LeakyRelu/Selu node')}, "
                 f"{plural(defects, 'defect')}")
    if report.conversion is not None and "error" not in report.conversion:
        n = len(report.conversion.get("changes", []))
        o.summary += f"; to opset {args.opset}: {plural(n, 'node')} would change"
    if job.single and not args.json and not args.quiet:
        text = report.table() if args.all else report.summary()
        o.lines = text.splitlines()
        o.summary = ""  # the report says it all
    if report.conversion is not None and "error" in report.conversion:
        text = (f"{src.origin}: convert to opset {args.opset} is impossible: "
                f"{report.conversion['error']}")
        after = report.conversion.get("after_fix")
        if after is not None and "error" not in after:
            n, r = len(after.get("changes", [])), after.get("relabelled", 0)
            text += (f"; after 'opshift fix' it is possible ({plural(n, 'node')} would "
                     f"change, {r} relabelled): run fix first")
        elif after is not None:
            text += f"; after 'opshift fix' too: {after['error']}"
        err = OpshiftError(text)
        o.exit_code = 2
        o.error = error_dict(str(err), src.origin)
    return o
