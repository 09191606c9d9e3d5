"""``opshift ops``: every op version and where the evaluator's kernel for it comes from."""

from __future__ import annotations

DESCRIPTION = """\
List every op onnx knows (default domain, ai.onnx.ml, ai.onnx.preview, ...) with its schema
versions and where the bundled evaluator's kernel for each comes from: opshift's own, the
version's function body (run node by node) where its schema defines one, or onnx.reference's
(run one node at a time) where opshift has neither. Versions with neither
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
    from ..evaluator.kernels import FUNCTION_BODY, ONNX_REFERENCE, OPSHIFT, every_op
    from ..tables import plural, table
    from ._output import Outcome, emit

    sources = (OPSHIFT, FUNCTION_BODY, ONNX_REFERENCE, None)
    ops = every_op()
    o = Outcome("ops", None, details={"ops": [
        {"domain": d or "ai.onnx", "op": op, "versions": [v for v, s in vs.items() if s],
         "sources": {str(v): s for v, s in vs.items() if s},
         "no_kernel": [v for v, s in vs.items() if not s]} for (d, op), vs in ops.items()]})
    if not args.json and not args.quiet:
        rows = []
        for (d, op), vs in ops.items():
            cols = [[str(v) for v, s in vs.items() if s == want] for want in sources]
            rows.append([op if not d else f"{d}::{op}", *(", ".join(c) for c in cols)])
        o.lines = table(["op", OPSHIFT, FUNCTION_BODY, ONNX_REFERENCE, "no kernel"], rows,
                        keep=(0,))
        counts = [sum(s == want for vs in ops.values() for s in vs.values()) for want in sources]
        o.summary = (f"{plural(len(ops), 'op')}; op versions: {counts[0]:,} opshift, "
                     f"{counts[1]:,} function body, {counts[2]:,} onnx.reference, "
                     f"{counts[3]:,} no kernel")
    emit(o, args, single=True)
    return 0
