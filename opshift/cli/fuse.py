"""``opshift fuse``: decomposed PRelu/LeakyRelu/Selu patterns back into single ops, where exact."""

from __future__ import annotations

import argparse
from collections import Counter

import onnx

from opshift.cli import batch, rewrite
from opshift.cli.models import with_external_data
from opshift.cli.options import add_model_options, add_verify_options
from opshift.cli.output import Outcome
from opshift.tables import plural

DESCRIPTION = """\
Rewrite decomposed activations back into single PRelu, LeakyRelu and Selu ops valid at the
model's opset, in the main graph, If/Loop/Scan subgraphs and model-local functions: the ONNX
function bodies (with or without CastLike, operands commuted, any exactly-equivalent form of
x < 0), everything `opshift inline` emits at any opset, and common exporter patterns
(Max(x, a*x) with 0 < a <= 1, Min(x, a*x) with a >= 1, Where(x > 0, x, s*x),
Relu(x) + s*Min(x, 0), Relu(x) - s*Relu(-x)). A match is fused only when its constants and
shapes prove the single op computes the same values (up to the sign of a zero result, which
ONNX's own function bodies do not preserve either); -v prints why each refused match was
refused. The rules are onnxscript rewriter rules (opshift.fuse.rules.rules()).

--verify checks each fused region against the original nodes with the bundled evaluator (real
shapes and constants, special values), then the whole model when the evaluator supports all
its ops; on a mismatch nothing is written and the exit code is 1.

examples:
  opshift fuse inlined.onnx -o fused.onnx --verify
  opshift fuse exported.onnx -o fused.onnx -v
  opshift fuse model.onnx -o out.onnx --json
  opshift fuse exported/ -o fused/ -j 2

exit codes: 0 ok, 1 verification mismatch (nothing written), 2 bad input; with several
models, the worst of theirs
"""


def register(sub, parent) -> None:
    p = sub.add_parser("fuse", parents=[parent], help="decomposed patterns back into PRelu / "
                       "LeakyRelu / Selu where exact", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p, writes=True)
    p.add_argument("--allow-rounding", action="store_true",
                   help="also fuse the forms that differ from the op in rounding or in the "
                   "sign of a zero result: Relu(x) + c*Relu(-x) (tf2onnx/keras2onnx Keras "
                   "PReLU) and Relu/Max/Clip + s*Min/Clip pairs (TorchScript clamp), +0 at "
                   "x = -0 where PRelu gives -0; s*x + 0 (paddle2onnx scale, +0 for -0); "
                   "Where(x <= 0, s*x, x) with a negative slope element; Elu(x)*gamma and "
                   "gamma*Where(x > 0, Elu(x), alpha*Elu(x)) into Selu, and a Selu or slope "
                   "computed in 16 bits, which round differently (README: Fused forms)")
    add_verify_options(p, flag=True)
    p.set_defaults(func=run)


def run(args) -> int:
    return batch.run(args, process, writes=True)


def process(args, job) -> Outcome:
    from opshift.check import structure

    index = structure.ModelIndex(full=False)  # its op types spare fuse a walk
    return rewrite.run(args, job, _fuse, index=index)


def _fuse(args, src) -> rewrite.Rewritten:
    from opshift.fuse.anchors import may_hold_patterns

    original = src.model
    facts = src.facts()  # (read before the model is rewritten: the check's index of it)
    if not may_hold_patterns(op for _, op in facts.kinds()):
        # no rule can match: the output is the input, and the rules and the IR are not built
        same = onnx.ModelProto()
        same.CopyFrom(original)
        return rewrite.Rewritten(same, [], f"fused {plural(0, 'pattern')}",
                                  details={"refused": []}, check=_nothing_fused)
    from opshift.fuse.driver import fuse_proto, verify_fuse

    model, result = fuse_proto(original, allow_rounding=args.allow_rounding,
                               capture_regions=args.verify, facts=facts,
                               base_dir=src.source_dir)
    quiet = not rewrite.reported(args)
    changes = [] if quiet else [{"node": e.node, "op": e.op, "scope": e.where,
                                 "what": f"fused into {e.detail}", "why": f"rule {e.rule}"}
                                for e in result.fused]
    by_op = Counter(e.detail.split("(")[0] for e in result.fused)  # 'PRelu(...)': the op made
    parts = ", ".join(f"{k} x{v:,}" for k, v in sorted(by_op.items()))
    summary = f"fused {plural(len(result.fused), 'pattern')}" + (f" ({parts})" if parts else "")
    if result.refused:
        summary += f"; refused {len(result.refused):,}" + ("" if args.verbose else
                                                             " (-v for reasons)")

    def check():
        if not result.modified:  # nothing fused: the output is the input
            return _nothing_fused()
        return verify_fuse(*with_external_data(src, original, model), result,
                           seed=args.seed)

    return rewrite.Rewritten(
        model, changes, summary, details={"refused": [] if quiet else result.refused_dicts()},
        lines=lambda: result.lines() if args.verbose else (), check=check,
        check_total=len(result.regions))


def _nothing_fused():
    from opshift.verify.report import VerifyReport

    return VerifyReport(), ["nothing was fused, so there is nothing to check"]
