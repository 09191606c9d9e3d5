"""What :func:`~opshift.inline.inline_proto` did: one row per replaced node, and the
functions inlined and removed."""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from opshift.inline.templates import signed_zero_exact


@dataclass(slots=True)
class InlinedNode:
    """One replaced activation node."""

    label: str  # name used as prefix of the new names
    op: str
    version: int
    opset: int
    band: str
    scope: str
    before: onnx.NodeProto | None  # a copy, with ``keep_before``
    #: where the replacement nodes are: (the graph or function holding them, start, stop)
    span: tuple[onnx.GraphProto | onnx.FunctionProto, int, int]
    opsets: dict[str, int] = field(default_factory=dict)
    function: tuple[str, str] | None = None  # (domain, name) when in a function body
    note: str = ""  # why the replacement is exact only for some inputs (accepted on request)
    #: a PRelu's slope as the pass read it when it is a constant (with ``keep_before``)
    slope_value: onnx.TensorProto | None = None
    #: the zero Constants an earlier replacement in the same node list added, which this
    #: one reads (one per element type and node list)
    borrowed: tuple[onnx.NodeProto, ...] = ()

    @property
    def after(self) -> list[onnx.NodeProto]:
        """The replacement nodes, read from the node list that holds them (with the zero
        Constants they read from an earlier replacement, first)."""
        owner, start, stop = self.span
        return [*self.borrowed, *owner.node[start:stop]]

    @property
    def signed_zero_exact(self) -> bool:
        """False for the sign-of-zero cases documented in :mod:`.templates`."""
        return signed_zero_exact(self.op, self.band, self.after)

    def to_dict(self) -> dict:
        return {"node": self.label, "op": self.op, "version": self.version,
                "opset": self.opset, "band": self.band, "scope": self.scope,
                "replacement": [n.op_type for n in self.after],
                "signed_zero_exact": self.signed_zero_exact,
                **({"note": self.note} if self.note else {})}


@dataclass
class InlineResult:
    """What :func:`inline_proto` did."""

    functions_inlined: list[str] = field(default_factory=list)
    functions_removed: list[str] = field(default_factory=list)
    #: one line per node inlined although its replacement is not exact for every input
    #: (``allow_nonfinite_slope``)
    notes: list[str] = field(default_factory=list)
    #: one row per replaced node: :class:`InlinedNode`'s fields in order (the objects are
    #: made when ``nodes`` is first read; a quiet run never needs them)
    rows: list[tuple] = field(default_factory=list, repr=False)
    _nodes: list[InlinedNode] | None = field(default=None, init=False, repr=False)

    @property
    def nodes(self) -> list[InlinedNode]:
        """The replaced nodes, in the order they were replaced."""
        if self._nodes is None or len(self._nodes) != len(self.rows):
            self._nodes = [InlinedNode(*r) for r in self.rows]
        return self._nodes

    @property
    def modified(self) -> bool:
        return bool(self.rows or self.functions_inlined)

    def to_dict(self) -> dict:
        return {"nodes": [n.to_dict() for n in self.nodes],
                "functions_inlined": self.functions_inlined,
                "functions_removed": self.functions_removed, "notes": self.notes,
                "modified": self.modified}

    def summary(self) -> str:
        by_op: dict[str, int] = {}
        for row in self.rows:
            by_op[row[1]] = by_op.get(row[1], 0) + 1
        parts = [f"{k} x{v}" for k, v in sorted(by_op.items())]
        s = f"inlined {len(self.rows)} node(s)" + (f" ({', '.join(parts)})" if parts else "")
        if self.functions_inlined:
            s += f"; inlined function(s) {', '.join(self.functions_inlined)}"
        if self.functions_removed:
            s += f"; removed {', '.join(self.functions_removed)}"
        return s

