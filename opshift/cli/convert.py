"""``opshift convert``: exact opset upgrade/downgrade of a model file."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from opshift.cli import batch
from opshift.cli import rewrite as _rewrite
from opshift.cli.inline import INLINED, add_inline_options, summary_of
from opshift.cli.inline import changes_of as inline_changes
from opshift.cli.models import with_external_data
from opshift.cli.options import add_model_options, add_verify_options
from opshift.cli.output import Outcome
from opshift.errors import OpshiftError

DESCRIPTION = """\
Convert IN.onnx to default-domain opset N and write OUT.onnx. PRelu, LeakyRelu and Selu
are converted exactly (consumed_inputs, changed defaults, PRelu per-channel slopes across
opset 6/7, types the target does not allow); every other op by opshift's schema-driven
adapters. A node whose op does not exist at opset N (Where below 7) in a region that
'opshift fuse' fuses exactly into PRelu, LeakyRelu or Selu (their function bodies written
out) is fused into that op first -- that region only, and only then -- and reported.
External data is never loaded: its files are copied beside OUT.onnx (one already
there with the same bytes is kept; a different one is replaced only with --force).
The input file is never modified; OUT.onnx is written atomically and not at all on failure.
A model of IR < 4 whose initializers are not graph inputs gets the IR version 'opshift fix'
would give it (reported), so that its shapes can be inferred.

--verify checks every rewritten node against the original on its real shapes and constants
(with special values: +-0, +-inf, NaN, ...), and the whole model when the backend can run
it; on a mismatch it writes nothing and exits 1.

examples:
  opshift convert model.onnx --opset 9 -o model9.onnx --verify
  opshift convert legacy6.onnx --opset 17 -o model17.onnx -v
  opshift convert models/ --opset 13 -o out/ -j 2 --json
  cat model.onnx | opshift convert - --opset 13 -o - > model13.onnx

exit codes: 0 ok, 1 verification mismatch, 2 bad input or impossible conversion; with
several models, the worst of theirs
"""


def register(sub, parent) -> None:
    p = sub.add_parser("convert", parents=[parent], help="exact opset upgrade/downgrade",
                       description=DESCRIPTION, allow_abbrev=False,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p, writes=True)
    p.add_argument("--opset", type=int, required=True, metavar="N",
                   help="target default-domain opset")
    p.add_argument("--node-metadata-to-model", action="store_true",
                   help="where the IR version goes below 10 (which defines node metadata), "
                        "move the nodes' metadata_props into the model's as "
                        "'node:<node name>:<key>' instead of dropping them")
    add_inline_options(p, within="--inline")
    add_verify_options(p, flag=True)
    p.set_defaults(func=run)


def run(args) -> int:
    from opshift import opsets

    if not 1 <= args.opset <= opsets.MAX_OPSET:
        raise OpshiftError(f"--opset {args.opset} is outside 1..{opsets.MAX_OPSET}")
    if not args.inline:
        given = [o for o, v in (("--ops", args.ops), ("--functions", args.functions),
                                ("--allow-nonfinite-slope", args.allow_nonfinite_slope)) if v]
        if given:
            raise OpshiftError(f"{given[0]} only applies with --inline")
    return batch.run(args, process, writes=True)


def process(args, job) -> Outcome:
    from opshift.check import structure

    # the check's reading of the main graph's declarations and uses, for the planner
    return _rewrite.run(args, job, _convert, index=structure.ModelIndex(full=False, facts=True))


def _convert(args, src) -> _rewrite.Rewritten:
    import onnx

    from opshift.convert.engine import convert_proto

    model = src.model
    original = None
    if args.verify:
        original = onnx.ModelProto()
        original.CopyFrom(model)
    log: list[str] = []
    try:
        result = convert_proto(model, args.opset, record=args.verify,
                               verbose_log=log.append if args.verbose else None,
                               base_dir=Path(src.origin).parent, facts=src.facts(),
                               keep_node_metadata=args.node_metadata_to_model)
    except OpshiftError as e:
        raise type(e)(f"{src.origin}: {e}") from None
    changes = [c.to_dict() for c in result.changes] if _rewrite.reported(args) else []
    n = len(changes)
    ir = result.ir_version
    ir_s = f", IR {ir[0]} -> {ir[1]}" if ir[0] != ir[1] else ""
    from opshift.tables import plural

    relabelled = f", {result.relabelled:,} relabelled" if result.relabelled else ""
    summary = (f"opset {result.source_opset} -> {result.target_opset}{ir_s}: "
               f"{plural(n, 'node')} changed{relabelled}")

    def lines():
        if args.verbose:
            return [f"  {m}" for m in log]
        return _rewrite.listed((f"  {c['node']} ({c['op']}): {c['what']}" for c in changes),
                               n, ", with reasons")

    fused = [c for c in result.changes if c.action == "fuse"]
    notes = [f"fused {plural(len(fused), 'region')} into "
             f"{'a single op' if len(fused) == 1 else 'single ops'} before converting, the "
             f"only way: {', '.join(dict.fromkeys(c.op for c in fused))} does not exist at "
             f"opset {args.opset}"] if fused else []
    notes += result.notes
    folded = [c for c in result.changes if c.action == "fold"]
    if folded:
        notes.append(f"folded {plural(len(folded), 'value')} computed from constants alone "
                     "into initializers before converting, the only way: below their "
                     "versions' opsets, the nodes reading them need them as constants")
    taken = sum(c.action == "take_branch" for c in result.changes)
    if taken:
        notes.append(f"replaced {plural(taken, 'If node')} by the branch its condition takes "
                     "before converting, the only way: the condition depends on constants and "
                     "shapes only, and the If cannot be converted")

    inlined = _inline(args, src, model) if args.inline else None
    if inlined is not None:
        changes += inline_changes(inlined[1], nodes=_rewrite.reported(args))
        summary += f"; {summary_of(inlined[1])}"
        notes += inlined[1].notes

    def check():
        return _verify(original, model, result, src, args.seed, inlined)

    return _rewrite.Rewritten(
        model, changes, summary, details={"source_opset": result.source_opset,
                                          "target_opset": result.target_opset,
                                          "ir_version": list(result.ir_version),
                                          "relabelled": result.relabelled,
                                          "fused": len(fused)},
        lines=lines, check=check, notes=notes,
        check_total=(sum(c.region is not None for c in result.changes)
                     + (len(inlined[1].rows) if inlined else 0)) if args.verify else 0,
        groups={**{f"{c.node} ({c.label})": c.op for c in result.changes},
                **({n.label: f"{n.op} inlined" for n in inlined[1].nodes} if inlined else {})}
        if args.verify else None)


def _inline(args, src, model):
    """``--inline``: the activations and functions asked for inlined in the converted
    ``model``, in place; ``(the model before, when --verify checks it, the InlineResult)``."""
    import onnx

    from opshift.inline.inliner import inline_proto

    before = None
    if args.verify:
        before = onnx.ModelProto()
        before.CopyFrom(model)
    try:
        result = inline_proto(model, args.ops or INLINED, args.functions,
                              keep_before=args.verify, base_dir=src.source_dir,
                              allow_nonfinite_slope=args.allow_nonfinite_slope)
    except OpshiftError as e:
        raise type(e)(f"{src.origin}: --inline: {e}") from None
    return before, result


def _verify(original, converted, result, src, seed: int, inlined=None):
    """Each rewritten region (a rewrite that changes nothing a node computes needs none),
    each node ``--inline`` replaced (``inlined``: see :func:`_inline`), then the whole model,
    its external data loaded whatever its size."""
    from opshift.verify.region import same_computation
    from opshift.verify.rewritten import verify_rewritten
    from opshift.verify.verifier import Rewrite

    notes = []
    # regions fused before converting are checked as fuse checks them: one that cannot be
    # checked fails; a converted node that cannot is left to the whole-model check
    fused = [Rewrite(f"fused {r.label}", r.before, r.after, r.signed_zero_exact)
             for r in result.fused_regions]
    signed_zeros = all(r.signed_zeros for r in fused)
    if not signed_zeros:
        notes.append("signs of zeros not compared on the whole model: a fused region's "
                     "pattern fixes the sign of zero differently from the op (fuse's policy)")
    alone = [(f"{ch.node} ({ch.label})", "it holds subgraphs, converted on their own")
             for ch in result.changes if ch.action == "rewrite" and ch.region is None]
    regions = ((f"{ch.node} ({ch.label})", ch.region_models()) for ch in result.changes)
    rewritten = (Rewrite(label, *models) for label, models in regions
                 if models is not None and not same_computation(*models))
    finite: list[str] = []
    # the models that run, each with its external data loaded once
    if inlined is None:
        original, converted = with_external_data(src, original, converted)
    else:
        from opshift.inline.verify import inline_checks

        original, converted, before = with_external_data(src, original, converted, inlined[0])
        c = inline_checks(before, converted, inlined[1])
        rewritten = itertools.chain(rewritten, c.rewrites)
        signed_zeros = signed_zeros and c.signed_zeros
        finite, alone = c.finite, alone + c.alone
        notes += c.notes
    report = verify_rewritten(original, converted, itertools.chain(fused, rewritten),
                              seed=seed, signed_zeros=signed_zeros, finite=finite,
                              strict={rw.label for rw in fused}, unchecked=alone)
    return report, notes
