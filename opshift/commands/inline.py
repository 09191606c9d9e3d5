"""``opshift inline``: PRelu/LeakyRelu/Selu to primitive ops, and model-local functions inlined."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from ..errors import OpshiftError
from ._output import add_force_option, check_not_input, print_rewrite

DESCRIPTION = """\
Replace every PRelu, LeakyRelu and Selu node (any version, in the main graph, If/Loop/Scan
subgraphs and model-local functions) by primitive ops valid at the opset the model declares:
the ONNX function bodies at opset >= 15, the same with typed constants at 9..14, and exact
Relu/Neg/Mul/Max/Min/Sub/Exp forms at 1..8 (see opshift/passes/inline/templates.py). With
--functions, model-local functions are inlined too (all, or those named), and inlined
functions nothing calls any more are removed.

--verify checks each inlined node against its replacement with the bundled evaluator (on
the node's real shapes and constants, with special values), then the whole model when the
evaluator supports all its ops; on a mismatch nothing is written and the exit code is 1.

examples:
  opshift inline model.onnx -o inlined.onnx --verify
  opshift inline model.onnx -o out.onnx --ops PRelu,Selu --functions all
  opshift inline model.onnx -o out.onnx --ops none --functions MyBlock --json

exit codes: 0 ok, 1 verification mismatch (nothing written), 2 bad input or a node that
cannot be inlined exactly (nothing written)
"""


def register(sub, parent) -> None:
    p = sub.add_parser("inline", parents=[parent], help="activations to primitive ops; "
                       "inline model-local functions", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="IN.onnx", help="the model (never modified)")
    p.add_argument("-o", "--output", metavar="OUT.onnx", required=True,
                   help="where to write the result (written atomically)")
    p.add_argument("--ops", default="PRelu,LeakyRelu,Selu", metavar="OPS",
                   help="comma-separated ops to inline, or 'none' (default: all three)")
    p.add_argument("--functions", default=None, metavar="all|NAME,...",
                   help="model-local functions to inline ('all' or names, domain::name "
                        "allowed); default: none")
    p.add_argument("--verify", action="store_true",
                   help="check every replacement, and the whole model, with the evaluator")
    add_force_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import onnx

    from .. import modelio, progress, validate
    from ..passes.inline import inline_proto, verify_inline

    check_not_input(args.input, args.output)
    bar = progress.for_args(args, "inline", 3 + bool(args.verify))
    report, notes = None, []
    try:
        with bar.phase("load"):
            census = validate.Census()  # the check's walk, reused by inline
            model, source_dir = modelio.open_checked(args.input, census=census)
        with bar.phase("inline"):
            original = model
            if args.verify:  # inline ``model`` in place (the census is of it); keep a copy
                original = onnx.ModelProto()
                original.CopyFrom(model)
            try:
                result = inline_proto(model, args.ops, args.functions,
                                      keep_before=args.verify, census=census,
                                      base_dir=source_dir)
            except OpshiftError as e:
                e.args = (f"{args.input}: {e}",)
                raise
        if args.verify:
            with bar.phase("verify"):
                report, notes = verify_inline(original, model, result)
        if report is None or report.ok:
            with bar.phase("save"):
                modelio.save(model, args.output, source_dir=source_dir, force=args.force)
    finally:
        bar.close()
    print_rewrite(args, result, report, notes, _details(result))
    return 1 if report is not None and not report.ok else 0


def _details(result) -> Iterator[str]:
    """The -v lines, made only when printed."""
    for n in result.nodes:
        zero = "" if n.signed_zero_exact else " (sign of zero may differ, documented)"
        yield (f"{n.scope}: {n.label} ({n.op}-{n.version}, opset {n.opset}, {n.band}) -> "
               f"{', '.join(m.op_type for m in n.after)}{zero}")
