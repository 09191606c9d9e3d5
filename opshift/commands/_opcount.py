"""Op counts of a model, and the before/after table rewriting commands print (onnxsim's
style): one line by default, every op with ``-v``."""

from __future__ import annotations

from collections import Counter

import onnx

from ..tables import WIDTH, plural, table

_GRAPH, _GRAPHS = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS
#: default-domain ops with graph attributes (other domains' nodes are all looked at)
_CONTROL = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Op type -> nodes, over the main graph, its subgraphs and model-local functions;
    ``domain::Op`` for ops outside ai.onnx. Most frequent first."""
    counts: Counter[str] = Counter()

    def nodes(ns) -> None:
        for n in ns:
            domain = n.domain if n.domain != "ai.onnx" else ""
            counts[f"{domain}::{n.op_type}" if domain else n.op_type] += 1
            if domain or n.op_type in _CONTROL:
                for a in n.attribute:
                    if a.type == _GRAPH:
                        nodes(a.g.node)
                    elif a.type == _GRAPHS:
                        for g in a.graphs:
                            nodes(g.node)

    nodes(model.graph.node)
    for f in model.functions:
        nodes(f.node)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def one_line(before: dict[str, int], after: dict[str, int]) -> str:
    """``ops: 12 -> 15 nodes (PRelu 3 -> 0, Max 0 -> 3, Mul 0 -> 3)``, within the screen."""
    nb, na = sum(before.values()), sum(after.values())
    changed = [op for op in _order(before, after) if before.get(op, 0) != after.get(op, 0)]
    if not changed:
        return f"ops: {plural(nb, 'node')}, op counts unchanged"
    head = f"ops: {nb:,} -> {plural(na, 'node')} ("
    parts: list[str] = []
    for i, op in enumerate(changed):
        part = f"{op} {before.get(op, 0):,} -> {after.get(op, 0):,}"
        rest = len(changed) - i - 1
        tail = f", and {rest} more (-v)" if rest else ""
        if len(head) + len(", ".join([*parts, part])) + len(tail) + 1 > WIDTH and parts:
            parts.append(f"and {len(changed) - i} more (-v)")
            break
        parts.append(part)
    return head + ", ".join(parts) + ")"


def full_table(before: dict[str, int], after: dict[str, int], sizes: tuple[int | None,
               int | None] = (None, None), *, titles=("before", "after")) -> list[str]:
    """Every op with its count before and after, the totals, and the file sizes if known."""
    rows = [[op, f"{before.get(op, 0):,}", f"{after.get(op, 0):,}"]
            for op in _order(before, after)]
    rows.append(["total nodes", f"{sum(before.values()):,}", f"{sum(after.values()):,}"])
    if all(s is not None for s in sizes):
        rows.append(["model size", *(_size(s) for s in sizes)])
    return table(["op", *titles], rows, right=(1, 2))


def _order(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return sorted(set(before) | set(after), key=lambda op: (-max(before.get(op, 0),
                                                                 after.get(op, 0)), op))


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"
