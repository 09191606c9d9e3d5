"""What ``fix`` changed, left alone or refused: one :class:`FixChange` each."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import onnx


def node_id(node: onnx.NodeProto, index: int) -> str:
    """How a change names a node: its name quoted, or ``<Op #i>``."""
    return repr(node.name) if node.name else f"<{node.op_type} #{index}>"


@dataclass(frozen=True)
class FixChange:
    """One change ``fix`` made (or, in a report of defects, one it would leave alone)."""

    kind: str  # consumed_inputs | attribute_type | prelu_slope | opset_import | node_name
    #            | value_name | ir_version | unknown_attribute | function | negative_dim
    scope: str  # iter_scopes label, or 'model'
    node: str  # node name, '<Op #i>' when unnamed, '' for model-level changes
    what: str
    why: str

    def to_dict(self) -> dict[str, str]:
        """kind, scope, node, what, why."""
        return {"kind": self.kind, "scope": self.scope, "node": self.node, "what": self.what,
                "why": self.why}

    def line(self) -> str:
        loc = f"{self.scope}" + (f", node {self.node}" if self.node else "")
        return f"{loc}: {self.what} -- {self.why}"


@dataclass
class FixResult:
    """What :func:`fix_proto` changed, what it reported and left alone, and what it refused."""

    changes: list[FixChange] = field(default_factory=list)
    left_alone: list[FixChange] = field(default_factory=list)
    refused: list[FixChange] = field(default_factory=list)

    @property
    def modified(self) -> bool:
        return bool(self.changes)

    def __bool__(self) -> bool:  # truthy when anything was found
        return bool(self.changes or self.left_alone or self.refused)

    def to_dict(self) -> dict[str, Any]:
        return {"modified": self.modified,
                "changes": [c.to_dict() for c in self.changes],
                "left_alone": [c.to_dict() for c in self.left_alone],
                "refused": [c.to_dict() for c in self.refused]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def table(self) -> str:
        """Human-readable lines: one per change, then what was left alone or refused."""
        out = [f"fixed: {c.line()}" for c in self.changes]
        out += [f"left alone: {c.line()}" for c in self.left_alone]
        out += [f"refused: {c.line()}" for c in self.refused]
        return "\n".join(out) if out else "no defects found"

