"""``opshift ops``: the (op, versions) the evaluator supports."""

from __future__ import annotations


def register(sub, parent) -> None:
    p = sub.add_parser("ops", parents=[parent], help="list the ops and versions the evaluator "
                       "supports", description="List every (domain, op) the bundled evaluator "
                       "implements, with the schema versions it implements.\n\nexample:\n"
                       "  opshift ops --json", formatter_class=_raw())
    p.set_defaults(func=run)


def _raw():
    import argparse

    return argparse.RawDescriptionHelpFormatter


def run(args) -> int:
    from ..evaluator import supported_ops
    from ._output import Outcome, emit

    table = supported_ops()
    o = Outcome("ops", None, details={"ops": [
        {"domain": d or "ai.onnx", "op": op, "versions": list(v)}
        for (d, op), v in table.items()]})
    if not args.json and not args.quiet:
        width = max(len(op) for _, op in table)
        o.lines = [f"{op if not d else f'{d}::{op}':<{width}}  {', '.join(map(str, v))}"
                   for (d, op), v in table.items()]
        o.summary = f"{len(table)} ops"
    emit(o, args, single=True)
    return 0
