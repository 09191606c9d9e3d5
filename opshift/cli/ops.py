"""``opshift ops``: every op's schema versions, where the evaluator's kernel for each comes
from, and how convert crosses each version boundary."""

from __future__ import annotations

DESCRIPTION = """\
List every op onnx knows (default domain, ai.onnx.ml, ai.onnx.preview, ...) with its schema
versions, where the bundled evaluator's kernel for each comes from, and how convert crosses
its version boundaries.

evaluator: opshift's own kernel, the version's function body (run node by node) where its
schema defines one, or onnx.reference's (run one node at a time) where opshift has neither.
Versions with none ("no kernel") cannot be evaluated: verify and --verify stop with exit 2.

convert (default domain only): "V: name" is a step function registered for the boundary
into version V (run both ways), "(refused)" one that refuses what has no exact form on the
other side, "refused up/down" a boundary the schemas refuse (a deprecated version). Every
boundary runs the schema-driven step; those not listed run it alone ("schema": all of them).
"<V: ..." says how a node gets below the first version V: its registered replacement, its
onnx function body, or not at all ("refused").
--all lists every boundary: its functions (with their docstring's first line, their module
and their "when" condition) and what the schema step checks going up and going down.

examples:
  opshift ops
  opshift ops --all PRelu Pad
  opshift ops --json
"""


def register(sub, parent) -> None:
    p = sub.add_parser("ops", parents=[parent], help="list the op versions, whose kernel the "
                       "evaluator uses and how convert crosses them", description=DESCRIPTION,
                       formatter_class=_raw())
    p.add_argument("names", nargs="*", metavar="OP", help="only these ops (domain::Op "
                   "outside the default domain)")
    p.add_argument("--all", action="store_true", help="one row per version boundary: the "
                   "registered functions and what the schema step checks going up and down")
    p.set_defaults(func=run)


def _raw():
    import argparse

    return argparse.RawDescriptionHelpFormatter


def run(args) -> int:
    from opshift.cli.output import Outcome, emit
    from opshift.convert.boundaries import crossings
    from opshift.evaluator.kernels import FUNCTION_BODY, ONNX_REFERENCE, OPSHIFT, every_op
    from opshift.tables import plural

    ops = every_op()
    named = {(op if not d else f"{d}::{op}"): (d, op) for d, op in ops}
    o = Outcome("ops", None)
    unknown = [n for n in args.names if n not in named]
    if unknown:
        emit(o.fail(ValueError(f"unknown op {unknown[0]!r} (onnx.defs has no schema of it)"),
                    2, None), args, single=True)
        return 2
    if args.names:
        ops = {named[n]: ops[named[n]] for n in dict.fromkeys(args.names)}
    conv = {(d, op): crossings(op) for d, op in ops if not d}
    o.details = {"ops": [
        {"domain": d or "ai.onnx", "op": op, "versions": [v for v, s in vs.items() if s],
         "sources": {str(v): s for v, s in vs.items() if s},
         "no_kernel": [v for v, s in vs.items() if not s],
         "convert": conv[d, op].to_dict() if (d, op) in conv else None}
        for (d, op), vs in ops.items()]}
    if not args.json and not args.quiet:
        names = {k: n for n, k in named.items()}
        o.lines = (_boundary_table if args.all else _version_table)(ops, conv, names)
        counts = [sum(s == want for vs in ops.values() for s in vs.values())
                  for want in (OPSHIFT, FUNCTION_BODY, ONNX_REFERENCE, None)]
        o.summary = (f"{plural(len(ops), 'op')}; op versions: {counts[0]:,} opshift, "
                     f"{counts[1]:,} function body, {counts[2]:,} onnx.reference, "
                     f"{counts[3]:,} no kernel")
    emit(o, args, single=True)
    return 0


def _version_table(ops, conv, names) -> list[str]:
    """One row per op: versions, kernel sources, and convert's registered steps."""
    from opshift.tables import plural, table

    lines = []
    rows = [[names[k], ", ".join(map(str, vs)), _sources(vs), _convert_cell(conv[k])]
            for k, vs in ops.items() if k in conv]
    if rows:
        # The long heading keeps the convert column wide enough for step names.
        lines = table(["op", "versions", "evaluator", "convert: registered steps by version"],
                      rows, keep=(0,))
        bounds = [b for c in conv.values() for b in c.boundaries]
        lines.append(f"{plural(len(bounds), 'boundary', 'boundaries')}: "
                     f"{sum(bool(b.functions) for b in bounds):,} with registered steps, "
                     f"{sum(b.refused for b in bounds):,} refusing, all checked by the schema "
                     "step")
    rest = [[names[k], ", ".join(map(str, vs)), _sources(vs)]
            for k, vs in ops.items() if k not in conv]
    if rest:
        lines += ([""] if rows else []) + [
            "outside the default domain (convert keeps them as they are):",
            *table(["op", "versions", "evaluator"], rest, keep=(0,))]
    return lines


def _boundary_table(ops, conv, names) -> list[str]:
    """One row per version boundary of each default-domain op."""
    from opshift.tables import table

    lines = table(["op", "step", "registered", "schema up", "schema down"],
                  [r for k, c in conv.items() for r in _boundary_rows(names[k], c)],
                  keep=(0, 1)) if conv else []
    rest = [names[k] for k in ops if k not in conv]
    if rest:
        lines.append("convert keeps ops outside the default domain as they are: "
                     f"{', '.join(rest[:3])}{', ...' if len(rest) > 3 else ''}")
    return lines


def _sources(vs: dict[int, str | None]) -> str:
    """``opshift`` when every version has the same source, else each source's versions."""
    groups: dict[str, list[int]] = {}
    for v, s in vs.items():
        groups.setdefault(s or "no kernel", []).append(v)
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{s} {', '.join(map(str, v))}" for s, v in groups.items())


def _refused_ways(b) -> str:
    ways = [w for w, side in (("up", b.up), ("down", b.down)) if side.refuses]
    return f"refused {'/'.join(ways)}" if ways else ""


def _convert_cell(c) -> str:
    """The boundaries with registered functions or schema refusals, else ``schema``."""
    items = [f"<{c.versions[0]}: {c.below}"] if c.below else []
    for b in c.boundaries:
        what = [f.name + (" (refused)" if f.refusal else "") for f in b.functions]
        what += [_refused_ways(b)] if _refused_ways(b) else []
        if what:
            items.append(f"{b.hi}: {', '.join(what)}")
    return "; ".join(items) or "schema"


def _boundary_rows(name: str, c) -> list[list[str]]:
    """``--all``'s rows of one op."""
    rows = []
    if c.below:
        rows.append([name, f"< {c.versions[0]}", c.below, "", ""])
    for b in c.boundaries:
        fns = ", ".join(f"{f.name}{': ' + f.doc if f.doc else ''} ({f.module}"
                        f"{', when ' + f.when if f.when else ''})"
                        for f in b.functions)
        rows.append(["" if rows else name, f"{b.lo} -> {b.hi}", fns or "-",
                     b.up.words(), b.down.words()])
    return rows or [[name, "-", "one version", "", ""]]
