"""``opshift inline``: PRelu/LeakyRelu/Selu to primitive ops, and model-local functions inlined."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator

from opshift.cli import batch, rewrite
from opshift.cli.models import with_external_data
from opshift.cli.options import add_model_options, add_verify_options
from opshift.cli.output import Outcome
from opshift.errors import OpshiftError
from opshift.tables import plural

DESCRIPTION = """\
Replace every PRelu, LeakyRelu and Selu node (any version, in the main graph, If/Loop/Scan
subgraphs and model-local functions) by primitive ops valid at the opset the model declares:
the ONNX function bodies at opset >= 15, the same with typed constants at 9..14, and exact
Relu/Neg/Mul/Max/Min/Sub/Exp forms at 1..8 (see opshift/passes/inline/decompose.py). At
1..8 a PRelu whose slope is not a constant (a graph input, an initializer that is also an
input from IR 4 on, a computed value) is refused: the form there gives NaN where the slope is
+-inf or NaN and x >= 0; --allow-nonfinite-slope inlines it anyway, with a note per node. With
--functions, model-local functions are inlined too (all, or those named), and inlined
functions nothing calls any more are removed.

--verify checks each inlined node against its replacement with the bundled evaluator (on
the node's real shapes and constants, with special values), then the whole model when the
evaluator supports all its ops; on a mismatch nothing is written and the exit code is 1.

examples:
  opshift inline model.onnx -o inlined.onnx --verify
  opshift inline model.onnx -o out.onnx --ops PRelu,Selu --functions all
  opshift inline model.onnx -o out.onnx --ops none --functions MyBlock --json
  opshift inline models/ -o inlined/ -j 2

exit codes: 0 ok, 1 verification mismatch (nothing written), 2 bad input or a node that
cannot be inlined exactly (nothing written); with several models, the worst of theirs
"""


def register(sub, parent) -> None:
    p = sub.add_parser("inline", parents=[parent], help="activations to primitive ops; "
                       "inline model-local functions", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p, writes=True)
    add_inline_options(p)
    add_verify_options(p, flag=True)
    p.set_defaults(func=run)


def add_inline_options(p: argparse.ArgumentParser, *, within: str = "") -> None:
    """``--ops``, ``--functions``, ``--allow-nonfinite-slope``; ``within``: the option they
    belong to in another command (``--inline`` of convert), which then adds it."""
    g = p.add_argument_group("inline") if within else p
    if within:
        g.add_argument(within, action="store_true",
                       help="also inline, at the target opset, the activations of --ops and "
                       "the model-local functions of --functions, as 'opshift inline' "
                       "does, checked with the conversion as one (--verify)")
    g.add_argument("--ops", default=None if within else INLINED, metavar="OPS",
                   help="comma-separated ops to inline, or 'none' (default: all three)")
    g.add_argument("--functions", default=None, metavar="all|NAME,...",
                   help="model-local functions to inline ('all' or names, domain::name "
                        "allowed); default: none")
    g.add_argument("--allow-nonfinite-slope", action="store_true",
                   help="at opsets 1..8, inline a PRelu whose slope is not a constant too "
                        "(exact only while the slope is finite; a note names each node)")


#: the ops inline replaces by default
INLINED = "PRelu,LeakyRelu,Selu"


def run(args) -> int:
    return batch.run(args, process, writes=True)


def process(args, job) -> Outcome:
    from opshift.check import structure

    index = structure.ModelIndex()  # the check's walk, reused by inline
    return rewrite.run(args, job, lambda a, src: _inline(a, src, index), index=index)


def _inline(args, src, index) -> rewrite.Rewritten:
    import onnx

    from opshift.inline.inliner import inline_proto

    model = original = src.model
    if args.verify:  # inline ``model`` in place (the index is of it); keep a copy
        original = onnx.ModelProto()
        original.CopyFrom(model)
    try:
        result = inline_proto(model, args.ops, args.functions, keep_before=args.verify,
                              index=index, base_dir=src.source_dir,
                              allow_nonfinite_slope=args.allow_nonfinite_slope)
    except OpshiftError as e:
        e.args = (f"{src.origin}: {e}",)
        raise
    changes = changes_of(result, nodes=args.json)
    return rewrite.Rewritten(
        model, changes, summary_of(result),
        details={"functions_inlined": result.functions_inlined,
                 "functions_removed": result.functions_removed},
        notes=result.notes,
        lines=lambda: _details(result) if args.verbose else (),
        check=lambda: _verify(src, original, model, result, args.seed),
        check_total=len(result.rows),
        groups={n.label: n.op for n in result.nodes} if args.verify else None)


def _verify(src, original, model, result, seed: int):
    """What --verify runs (imported here: a run without it loads no checking code)."""
    from opshift.inline.verify import verify_inline

    return verify_inline(*with_external_data(src, original, model), result, seed=seed)


def changes_of(result, *, nodes: bool = True) -> list[dict]:
    """The change dicts of an inline ``result``: one per inlined node (when ``nodes``), per
    function inlined and per function removed."""
    changes = [_change(n) for n in result.nodes] if nodes else []
    changes += [{"node": "", "op": "", "scope": f"function {f}", "what": "inlined",
                 "why": "--functions"} for f in result.functions_inlined]
    changes += [{"node": "", "op": "", "scope": f"function {f}", "what": "removed",
                 "why": "inlined, and nothing calls it any more"}
                for f in result.functions_removed]
    return changes


def _change(n) -> dict:
    return {"node": n.label, "op": f"{n.op}-{n.version}", "scope": n.scope,
            "what": "replaced by " + ", ".join(m.op_type for m in n.after),
            "why": f"{n.band} form at opset {n.opset}"
                   + ("" if n.signed_zero_exact else "; the sign of a zero result may differ "
                      "(documented)")
                   + (f"; {n.note}" if n.note else "")}


def summary_of(result) -> str:
    """``inlined 3 nodes (PRelu x2, Selu x1)``, and the functions inlined and removed."""
    by_op = Counter(row[1] for row in result.rows)  # (label, op, ...): no node objects made
    parts = ", ".join(f"{k} x{v:,}" for k, v in sorted(by_op.items()))
    s = f"inlined {plural(len(result.rows), 'node')}" + (f" ({parts})" if parts else "")
    if result.functions_inlined:
        s += f"; inlined {plural(len(result.functions_inlined), 'function')} " \
             f"{', '.join(result.functions_inlined)}"
    if result.functions_removed:
        s += f"; removed {', '.join(result.functions_removed)}"
    return s


def _details(result) -> Iterator[str]:
    """The -v lines, made only when printed (each parses its node's replacement)."""
    for n in result.nodes:
        zero = "" if n.signed_zero_exact else " (sign of zero may differ, documented)"
        yield (f"{n.scope}: {n.label} ({n.op}-{n.version}, opset {n.opset}, {n.band}) -> "
               f"{', '.join(m.op_type for m in n.after)}{zero}")
