"""``opshift fix``: repair the defects that break runtimes, keeping the opset."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import OpshiftError, printable
from ._output import add_force_option, check_not_input

DESCRIPTION = """\
Repair, without changing the model's opset, the defects that break runtimes, and list each
change (node, what, why):
  - 'consumed_inputs' left on nodes of opset >= 6 (removed: it was only an in-place hint);
  - PRelu >= 7 with a 1-D slope [C] that only makes sense per channel (X's axis 1 is C, its
    last axis is not): the slope becomes [C,1,...,1]; when both readings fit (axis 1 and the
    last axis are both C) the node is reported and left alone unless --prelu-slope says which;
  - attributes of the wrong type (alpha as INT or a one-element tensor), converted when the
    value is exactly representable, else refused;
  - missing opset imports for a used domain (added for model-local function domains and for
    function bodies; refused for the default domain: its version is unknown);
  - duplicate node names and values produced twice (renamed);
  - a model-local function defined twice (a later identical copy removed; differing bodies
    refused: a call could mean either);
  - an IR version too old or too new for the opset (set to the opset's, never below what the
    model's imports and features need).
Each fix is exact; --verify compares the outputs of the original and the fixed model (with
the evaluator, else onnxruntime); when the defect makes the original impossible to run,
it says so and runs the fixed model alone.

examples:
  opshift fix model.onnx -o fixed.onnx --verify
  opshift fix model.onnx --dry-run
  opshift fix model.onnx -o fixed.onnx --prelu-slope channel --json

exit codes: 0 ok, 1 verification mismatch (nothing written), 2 bad input or a defect that
cannot be fixed exactly (nothing written)
"""


def register(sub, parent) -> None:
    p = sub.add_parser("fix", parents=[parent], help="repair defects that break runtimes "
                       "(keeps the opset)", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="IN.onnx", help="the model to repair (never modified)")
    p.add_argument("-o", "--output", metavar="OUT.onnx", help="where to write the fixed model")
    p.add_argument("--dry-run", action="store_true", help="list the changes, write nothing")
    p.add_argument("--verify", action="store_true", help="prove the outputs are unchanged")
    p.add_argument("--prelu-slope", choices=("channel", "numpy"), default=None,
                   help="reading of a 1-D PRelu slope that fits both axis 1 and the last axis")
    add_force_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import modelio, progress, validate
    from ..passes.fix import fix_with_result, verify_fix

    if not args.output and not args.dry_run:
        raise OpshiftError("no output: give -o OUT.onnx, or --dry-run to only list changes")
    if args.output and not args.dry_run:
        check_not_input(args.input, args.output)
    bar = progress.for_args(args, "fix", 2 + bool(args.verify) + (not args.dry_run))
    try:
        with bar.phase("load"):
            # what fix repairs is not a reason to refuse the model
            original, source_dir = modelio.open_checked(args.input,
                                                        allow=validate.REPAIRABLE)
        with bar.phase("fix"):
            try:
                # the folder even when the census saw no external data: it does not look
                # into attributes of wrong types, which fix converts
                fixed, result = fix_with_result(original, prelu_slope=args.prelu_slope,
                                                base_dir=Path(args.input).resolve().parent)
            except OpshiftError as e:
                e.args = (f"{args.input}: {e}",)
                raise
        ver = None
        if args.verify:
            with bar.phase("verify"):
                ver = verify_fix(*_with_data(source_dir, args.input, original, fixed))
        if not args.dry_run and (ver is None or ver.ok):
            with bar.phase("save"):
                modelio.save(fixed, args.output, source_dir=source_dir, force=args.force)
    finally:
        bar.close()
    _print(args, result, ver)
    return 1 if ver is not None and not ver.ok else 0


def _with_data(source_dir, path: str, *models):
    """Copies of ``models`` with their external data loaded from ``source_dir`` (None: the
    model has none), so the evaluator and onnxruntime see the weights whatever the working
    directory."""
    if source_dir is None:
        return models
    import onnx

    from ..external import load_external_data_safely

    out = []
    for m in models:
        c = onnx.ModelProto()
        c.CopyFrom(m)
        load_external_data_safely(c, source_dir, origin=path)
        out.append(c)
    return out


def _print(args, result, ver) -> None:
    written = not args.dry_run and (ver is None or ver.ok)
    if args.json:
        out = {"input": args.input, "output": args.output if written else None,
               "dry_run": bool(args.dry_run), **result.to_dict(),
               "verify": None if ver is None else ver.to_dict()}
        print(json.dumps(out, indent=1, default=str))
        return
    if args.quiet:
        if ver is not None and not ver.ok:
            print(ver.line(), file=sys.stderr)
        return
    for c in result.changes:
        print(printable(f"fixed: {c.line()}"))
    for c in result.left_alone:
        print(printable(f"left alone: {c.line()}"))
    if ver is not None:
        print(ver.line())
        if args.verbose:
            for r in ver.rows:
                print(f"  {r}")
    n = len(result.changes)
    tail = ("nothing written (--dry-run)" if args.dry_run else
            f"wrote {args.output}" if written else "nothing written")
    print(f"{n} change{'s' if n != 1 else ''}, {len(result.left_alone)} left alone; {tail}")
