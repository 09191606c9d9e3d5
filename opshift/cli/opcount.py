"""Op counts of a model, and the before/after table rewriting commands print (onnxsim's
style): one line by default, every op with ``-v``."""

from __future__ import annotations

from opshift.graph.counts import op_counts
from opshift.tables import plural, screen_width, table

__all__ = ["full_table", "one_line", "op_counts"]


def one_line(before: dict[str, int], after: dict[str, int]) -> str:
    """``ops: 12 -> 15 nodes (PRelu 3 -> 0, Max 0 -> 3, Mul 0 -> 3)``, within the screen."""
    nb, na = sum(before.values()), sum(after.values())
    changed = [op for op in _order(before, after) if before.get(op, 0) != after.get(op, 0)]
    if not changed:
        return f"ops: {plural(nb, 'node')}, op counts unchanged"
    head = f"ops: {nb:,} -> {plural(na, 'node')} ("
    parts: list[str] = []
    width = screen_width()
    for i, op in enumerate(changed):
        part = f"{op} {before.get(op, 0):,} -> {after.get(op, 0):,}"
        rest = len(changed) - i - 1
        line = head + ", ".join([*parts, part]) + (f", and {rest} more (-v))" if rest else ")")
        if len(line) > width and parts:
            parts.append(f"and {rest + 1} more (-v)")
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


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} B"
    return f"{n / 1024:,.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):,.1f} MiB"
