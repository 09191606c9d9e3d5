"""The text of an :class:`opshift.inspect.InspectReport`: a screenful by default
(:func:`summary`), every activation node with ``--all`` (:func:`full`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from opshift.errors import printable
from opshift.tables import plural, screen_width, table, wrap

#: Lines of each grouped list before the rest is summed up in one line.
MAX_GROUPS = 12
MAX_OP_TYPES = 40


def header(r) -> str:
    ops = ", ".join(f"{k or 'ai.onnx'} {v}" for k, v in r.opsets.items())
    line = (f"IR version {r.ir_version}; opsets: {ops}; {plural(r.node_count, 'node')} "
            f"({r.graph_node_count:,} in the main graph)")
    if r.functions:
        line += f"; {plural(len(r.functions), 'function')}: {', '.join(r.functions)}"
    return line


def summary(r) -> list[str]:
    """Op counts, grouped activations, grouped defects, the grouped dry run."""
    lines = [*wrap(header(r)), *_op_line(r.ops)]
    if r.rows:
        groups: Counter[tuple[str, str, str]] = Counter()
        for row in r.rows:
            what = (row.slope_class or "?" if row.op == "PRelu" else
                    ", ".join(a.text() for a in row.attributes) or "-")
            version = f"{row.op}-{row.version}" if row.version else f"{row.op}-?"
            groups[(version, row.dtype or "?", what)] += 1
        body = [[v, d, w, f"{n:,}"] for (v, d, w), n in groups.most_common()]
        lines.append(f"{plural(len(r.rows), 'PRelu/LeakyRelu/Selu node')}, by version, dtype, "
                     "and slope class or attributes:")
        lines += _indent(table(["op", "dtype", "slope class / attributes", "nodes"],
                               _capped(body, 3, "groups"), right=(3,), width=screen_width() - 2))
    else:
        lines.append("no PRelu, LeakyRelu or Selu nodes")
    lines += _fusable(r.fusable, grouped=True)
    lines += _defects(r.defects, grouped=True)
    lines += _conversion(r, grouped=True)
    return [printable(x) for x in lines]


def full(r) -> list[str]:
    """Every activation node, every defect, every change of the dry run."""
    lines = [*wrap(header(r)), *_op_line(r.ops, cap=False)]
    if r.rows:
        head = ["node", "scope", "version", "dtype", "attributes", "slope"]
        if r.target_opset is not None:
            head.append(f"at opset {r.target_opset}")
        # a slope class's explanation (in parentheses) is said once below the table, not in
        # every row, where it made the table too wide for a terminal
        said: dict[str, set[str]] = {}
        for row in r.rows:
            if row.op == "PRelu" and row.slope_class:
                said.setdefault(row.slope_class.split(" (", 1)[0], set()).add(row.slope_class)
        body = []
        for row in r.rows:
            cells = [row.node, row.scope, f"{row.op}-{row.version or '?'}", row.dtype or "?",
                     ", ".join(a.text() for a in row.attributes) or "-",
                     slope_text(row, short=len(said.get(_short(row), ())) == 1)
                     if row.op == "PRelu" else "-"]
            if r.target_opset is not None:
                cells.append(row.at_target or "?")
            body.append([printable(c) for c in cells])
        lines += table(head, body)
        legend = sorted(t for ts in said.values() if len(ts) == 1 for t in ts if " (" in t)
        if legend:
            lines.append("slope classes:")
            lines += [x for t in legend for x in wrap(f"  {t}")]
    else:
        lines.append("no PRelu, LeakyRelu or Selu nodes")
    lines += _fusable(r.fusable, grouped=False)
    lines += _defects(r.defects, grouped=False)
    lines += _conversion(r, grouped=False)
    return [printable(x) for x in lines]


def slope_text(row, *, short: bool = False) -> str:
    """``[4, 1, 1]: per-channel axis 1 (...)``; with ``short``, without the parentheses."""
    shape = "?" if row.slope_shape is None else str(row.slope_shape)
    return f"{shape}: {_short(row) if short else row.slope_class}"


def _short(row) -> str:
    return (row.slope_class or "").split(" (", 1)[0]


def _op_line(ops: dict[str, int], cap: bool = True) -> list[str]:
    items = list(ops.items())
    more = len(items) - MAX_OP_TYPES if cap and len(items) > MAX_OP_TYPES else 0
    words = [f"{op} {n:,}" for op, n in items[:len(items) - more]]
    if more:
        words.append(f"... {more} more op types (--all)")
    lines, cur, width = [], f"ops ({plural(len(items), 'type')}):", screen_width()
    for w in words:
        if len(cur) + len(w) + 2 > width:
            lines.append(cur + ",")
            cur = "  " + w
        else:
            cur += (", " if not cur.endswith(":") else " ") + w
    return [*lines, cur]


def _fusable(f: dict[str, list[dict[str, Any]]], *, grouped: bool) -> list[str]:
    """The decomposed activations 'opshift fuse' would fuse, and the matches it refuses."""
    patterns, refused = f.get("patterns", []), f.get("refused", [])
    if not patterns and not refused:
        return ["no decomposed activations for opshift fuse"]
    lines = []
    if patterns:
        loose = sum(p["allow_rounding"] for p in patterns)
        lines.append(f"decomposed activations 'opshift fuse' would fuse: "
                     f"{plural(len(patterns), 'pattern')}"
                     + (f", {loose:,} of them only with --allow-rounding" if loose else ""))
        if grouped:
            groups: Counter[tuple[str, str, str, str]] = Counter(
                (p["into"], _form(p), p["rule"], _needs(p)) for p in patterns)
            body = [[into, form, rule, f"{n:,}", needs]
                    for (into, form, rule, needs), n in groups.most_common()]
            lines += _indent(table(["into", "form", "rule", "nodes", "needs"],
                                   _capped(body, 3, "forms"), right=(3,),
                                   width=screen_width() - 2))
        else:
            body = [[printable(p["node"] or f"<{p['op']}>"), printable(_scope(p)), p["into"],
                     _form(p), p["rule"], _needs(p)] for p in patterns]
            lines += table(["node", "scope", "into", "form", "rule", "needs"], body)
        whys = dict.fromkeys((p["rule"], p["why"]) for p in patterns if p["allow_rounding"])
        lines += [x for rule, why in whys for x in wrap(
            printable(f"  --allow-rounding, {rule}: {why}"))]
    if refused:
        if grouped:
            lines.append(f"'opshift fuse' would refuse {plural(len(refused), 'match', 'matches')}"
                         " (why: --all, or 'opshift fuse -v')")
        else:
            lines.append(f"'opshift fuse' would refuse "
                         f"{plural(len(refused), 'match', 'matches')}:")
            lines += [x for e in refused for x in wrap(printable(
                f"  {_scope(e)}, node {e['node']!r} ({e['op']}, rule {e['rule']}): "
                f"{e['reason']}"))]
    return lines


def _scope(e: dict[str, Any]) -> str:
    where = e["graph"]
    return where if where.startswith("function ") else f"graph {where!r}"


def _form(p: dict[str, Any]) -> str:
    return " + ".join(p["form"]) or p["op"]


def _needs(p: dict[str, Any]) -> str:
    return "--allow-rounding" if p["allow_rounding"] else "-"


def _defects(d: dict[str, Any], *, grouped: bool) -> list[str]:
    found = [(word, c) for key, word in (("changes", "would fix"),
                                         ("left_alone", "would leave alone"),
                                         ("refused", "cannot fix")) for c in d.get(key, [])]
    if not found:
        return ["no defects for opshift fix"]
    lines = [f"defects ({plural(len(found), 'finding')}, what 'opshift fix' would do):"]
    if grouped:
        kinds: dict[tuple[str, str], list[dict]] = {}
        for word, c in found:
            kinds.setdefault((word, c["kind"]), []).append(c)
        body = [[word, kind, f"{len(cs):,}", "e.g. " + _defect_line(cs[0])]
                for (word, kind), cs in kinds.items()]
        return lines + _indent(table(["", "kind", "count", "first"], _capped(body, 2, "kinds"),
                                     right=(2,), width=screen_width() - 2))
    return lines + [x for word, c in found for x in wrap(f"  {word}: {_defect_line(c)}")]


def _defect_line(c: dict[str, Any]) -> str:
    node = f", node {c['node']}" if c["node"] else ""
    return printable(f"{c['scope']}{node}: {c['what']} -- {c['why']}")


def _conversion(r, *, grouped: bool) -> list[str]:
    if r.conversion is None or "error" in r.conversion:
        return []  # an impossible conversion is the command's error, said once
    changes = r.conversion.get("changes", [])
    head = (f"convert to opset {r.target_opset} (dry run): "
            f"{plural(len(changes), 'node')} would change")
    lines = [head + (":" if changes else "")]
    if grouped:
        by: dict[str, list[dict]] = {}
        for c in changes:
            by.setdefault(c.get("op", ""), []).append(c)
        body = [[op, f"{len(cs):,}",
                 printable(f"e.g. {cs[0].get('node', '')}: {cs[0].get('what', '')}")]
                for op, cs in sorted(by.items(), key=lambda kv: -len(kv[1]))]
        lines += _indent(table(["change", "nodes", "first"], _capped(body, 1, "changes"),
                               right=(1,), width=screen_width() - 2)) if body else []
    else:
        lines += [x for c in changes for x in wrap(printable(
            f"  {c.get('scope', '')}, node {c.get('node', '')}: {c.get('what', '')} -- "
            f"{c.get('why', '')}"))]
    lines += [x for note in r.conversion.get("notes", []) for x in wrap(f"  note: {note}")]
    return lines


def _capped(body: list[list[str]], count_col: int, what: str) -> list[list[str]]:
    """At most :data:`MAX_GROUPS` rows; the rest summed up in a last row."""
    if len(body) <= MAX_GROUPS:
        return body
    rest = body[MAX_GROUPS - 1:]
    n = sum(int(b[count_col].replace(",", "")) for b in rest if b[count_col].strip())
    last = [""] * len(body[0])
    last[0] = f"... {len(rest)} more {what} (--all)"
    last[count_col] = f"{n:,}"
    return body[:MAX_GROUPS - 1] + [last]


def _indent(lines: list[str]) -> list[str]:
    return ["  " + x for x in lines]
