"""``opshift fix``: repair the defects that break runtimes, keeping the opset."""

from __future__ import annotations

import argparse

from opshift.cli import batch, rewrite
from opshift.cli.models import with_external_data
from opshift.cli.options import add_model_options, add_verify_options
from opshift.cli.output import Outcome
from opshift.errors import OpshiftError
from opshift.tables import plural

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
  - an IR version below what the model's features need (raised, e.g. to IR 4 for
    initializers that are not graph inputs); annotations (node metadata, IR 10) that the
    declared IR does not define are dropped (an IR above the opset's era is no defect);
  - a negative dim in a graph input, output or value_info (paddle2onnx writes -1 for a
    dynamic dim): cleared, so it says unknown, as runtimes and every opshift command read it.
Each fix is exact; --verify compares the outputs of the original and the fixed model, as
every command's --verify does (--backend onnxruntime to run them on onnxruntime); when the
defect makes the original impossible to run, it says so and runs the fixed model alone.

examples:
  opshift fix model.onnx -o fixed.onnx --verify
  opshift fix model.onnx --dry-run
  opshift fix model.onnx -o fixed.onnx --prelu-slope channel --json
  opshift fix models/ -o fixed/ --dry-run

exit codes: 0 ok, 1 verification mismatch (nothing written), 2 bad input or a defect that
cannot be fixed exactly (nothing written); with several models, the worst of theirs
"""


def register(sub, parent) -> None:
    p = sub.add_parser("fix", parents=[parent], help="repair defects that break runtimes "
                       "(keeps the opset)", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p, writes=True, output_required=False)
    p.add_argument("--dry-run", action="store_true", help="list the changes, write nothing")
    p.add_argument("--prelu-slope", choices=("channel", "numpy"), default=None,
                   help="reading of a 1-D PRelu slope that fits both axis 1 and the last axis")
    add_verify_options(p, flag=True)
    p.set_defaults(func=run)


def run(args) -> int:
    if not args.output and not args.dry_run:
        raise OpshiftError("no output: give -o OUT.onnx, or --dry-run to only list changes")
    if args.dry_run:
        args.output = None
    return batch.run(args, process, writes=True)


def process(args, job) -> Outcome:
    from opshift.check import structure

    # what fix repairs is not a reason to refuse the model; the names the check met are
    # kept for the fresh names a repair makes
    return rewrite.run(args, job, _fix, allow=structure.REPAIRABLE, repair=False,
                        index=structure.ModelIndex(full=False, keep_names=True))


def _fix(args, src) -> rewrite.Rewritten:
    from opshift.fix.fixer import fix_proto, fix_with_result
    from opshift.fix.verification import verify_fix

    original = src.model
    try:
        if args.verify:  # the check compares with the original
            fixed, result = fix_with_result(original, prelu_slope=args.prelu_slope,
                                            base_dir=src.folder, index=src.index)
        else:  # nothing reads the original again: repaired in place, no copy
            fixed, result = original, fix_proto(original, prelu_slope=args.prelu_slope,
                                                base_dir=src.folder, facts=src.facts())
    except OpshiftError as e:
        e.args = (f"{src.origin}: {e}",)
        raise
    _negative_input_dims(fixed, src, result)
    n = len(result.changes)
    summary = f"{plural(n, 'change')}, {len(result.left_alone):,} left alone"
    if args.dry_run:
        summary += "; nothing written (--dry-run)"

    def lines():
        done = "would fix" if args.dry_run else "fixed"  # --dry-run changed nothing
        fixed = (f"{done}: {c.line()}" for c in result.changes)
        left = (f"left alone: {c.line()}" for c in result.left_alone)
        if args.verbose:
            return [*fixed, *left]
        return [*rewrite.listed(fixed, n), *rewrite.listed(left, len(result.left_alone))]

    def check():
        return verify_fix(*with_external_data(src, original, fixed), seed=args.seed)

    return rewrite.Rewritten(
        fixed, [c.to_dict() for c in result.changes], summary,
        details={"dry_run": bool(args.dry_run),
                 "left_alone": [c.to_dict() for c in result.left_alone]},
        lines=lines, check=check, write=not args.dry_run)


def _negative_input_dims(fixed, src, result) -> None:
    """The inputs --input-shape gave shapes to get their declared types back when written
    (:func:`~._models.restore_inputs`): their negative dims are cleared there, as the
    repair clears every other (it saw the given shapes)."""
    from opshift.fix.dims import WHY, cleared
    from opshift.fix.report import FixChange

    for name, tp in src.declared.items():
        what = cleared(tp)
        if what is not None:
            result.changes.append(FixChange("negative_dim",
                                            f"graph {fixed.graph.name!r}", "",
                                            f"input {name!r}: {what}", WHY))
