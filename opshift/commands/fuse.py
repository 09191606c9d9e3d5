"""``opshift fuse``: decomposed PRelu/LeakyRelu/Selu patterns back into single ops, where exact."""

from __future__ import annotations

import argparse

from ._output import add_force_option, check_not_input, print_rewrite

DESCRIPTION = """\
Rewrite decomposed activations back into single PRelu, LeakyRelu and Selu ops valid at the
model's opset, in the main graph, If/Loop/Scan subgraphs and model-local functions: the ONNX
function bodies (with or without CastLike, operands commuted, any exactly-equivalent form of
x < 0), everything `opshift inline` emits at any opset, and common exporter patterns
(Max(x, a*x) with 0 < a <= 1, Min(x, a*x) with a >= 1, Where(x > 0, x, s*x),
Relu(x) + s*Min(x, 0), Relu(x) - s*Relu(-x)). A match is fused only when its constants and
shapes prove the single op computes the same values (up to the sign of a zero result, which
ONNX's own function bodies do not preserve either); -v prints why each refused match was
refused. The rules are onnxscript rewriter rules (opshift.rewriters.rules()).

--verify checks each fused region against the original nodes with the bundled evaluator (real
shapes and constants, special values), then the whole model when the evaluator supports all
its ops; on a mismatch nothing is written and the exit code is 1.

examples:
  opshift fuse inlined.onnx -o fused.onnx --verify
  opshift fuse exported.onnx -o fused.onnx -v
  opshift fuse model.onnx -o out.onnx --json

exit codes: 0 ok, 1 verification mismatch (nothing written), 2 bad input
"""


def register(sub, parent) -> None:
    p = sub.add_parser("fuse", parents=[parent], help="decomposed patterns back into PRelu / "
                       "LeakyRelu / Selu where exact", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="IN.onnx", help="the model (never modified)")
    p.add_argument("-o", "--output", metavar="OUT.onnx", required=True,
                   help="where to write the result (written atomically)")
    p.add_argument("--verify", action="store_true",
                   help="check every fusion, and the whole model, with the evaluator")
    p.add_argument("--allow-rounding", action="store_true",
                   help="also fuse Elu(x)*gamma into Selu, which rounds differently for x < 0")
    add_force_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import modelio, progress, validate
    from ..passes.fuse import fuse_proto, verify_fuse

    check_not_input(args.input, args.output)
    bar = progress.for_args(args, "fuse", 3 + bool(args.verify))
    report, notes = None, []
    try:
        with bar.phase("load"):
            census = validate.Census(full=False)  # its op types spare fuse a walk
            original, source_dir = modelio.open_checked(args.input, census=census)
        with bar.phase("fuse"):
            model, result = fuse_proto(original, allow_rounding=args.allow_rounding,
                                       capture_regions=args.verify, census=census,
                                       base_dir=source_dir)
        if args.verify and result.modified:
            with bar.phase("verify"):
                report, notes = verify_fuse(original, model, result)
        if report is None or report.ok:
            with bar.phase("save"):
                modelio.save(model, args.output, source_dir=source_dir, force=args.force)
    finally:
        bar.close()
    print_rewrite(args, result, report, notes, result.lines())
    return 1 if report is not None and not report.ok else 0

