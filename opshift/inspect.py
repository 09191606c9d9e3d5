"""``inspect``: what a model holds of PRelu, LeakyRelu and Selu, and what fix/convert would do.

:func:`inspect` returns an :class:`InspectReport`: the model's opsets, IR version and node
count; one row per activation node (its node, the graph or function it sits in, the version in
force, its dtype, every attribute with its effective value -- defaults marked -- and, for
PRelu, the slope's broadcast class); the defects ``fix`` would repair (a dry run on a copy);
and, with ``opset=N``, a dry run of ``convert``: what each node would become and why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from . import opsets
from .broadcast import SlopeClass, classify, rule_for_version
from .errors import OpshiftError, function_id, printable
from .external import tensor_array
from .graph.facts import static_shapes
from .graph.scopes import iter_scopes, subgraphs
from .modelio import ModelLike, to_proto

#: How each broadcast class is described to users.
CLASS_TEXT = {
    SlopeClass.SHARED: "shared",
    SlopeClass.CHANNEL_AXIS1: "per-channel axis 1 (legacy ONNX <= 6; oneDNN "
                              "per_channel_broadcast NCX)",
    SlopeClass.CHANNEL_LAST: "per-channel last axis (oneDNN NXC)",
    SlopeClass.ELEMENTWISE: "elementwise",
}


@dataclass
class Attr:
    """One attribute as the node sees it."""

    name: str
    value: Any
    default: bool  # True: not set on the node, the schema default applies
    valid: bool = True  # False: set on the node but not defined for this version / wrong type

    def text(self) -> str:
        v = self.value
        s = f"{v:.9g}" if isinstance(v, float) else repr(v)
        mark = " (default)" if self.default else "" if self.valid else " (INVALID)"
        return f"{self.name}={s}{mark}"


@dataclass
class ActivationRow:
    """One PRelu, LeakyRelu or Selu node."""

    node: str
    op: str
    scope: str
    opset: int | None
    version: int | None
    dtype: str | None
    attributes: list[Attr] = field(default_factory=list)
    x_shape: list | None = None
    slope_shape: list | None = None
    slope_class: str | None = None  # CLASS_TEXT value, 'unknown', or 'does not broadcast: ...'
    at_target: str | None = None  # with opset=N: 'PRelu-16', 'PRelu-16 (unchanged)', ...
    conversion: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["attributes"] = {a.name: {"value": _json_value(a.value), "default": a.default,
                                    "valid": a.valid} for a in self.attributes}
        return d


@dataclass
class InspectReport:
    """Everything :func:`inspect` found; ``table()`` for people, ``to_dict()`` for tools."""

    ir_version: int
    opsets: dict[str, int]
    node_count: int
    graph_node_count: int
    functions: list[str]
    rows: list[ActivationRow] = field(default_factory=list)
    defects: dict[str, Any] = field(default_factory=dict)  # FixResult.to_dict()
    target_opset: int | None = None
    conversion: dict[str, Any] | None = None  # ConvertResult.to_dict() or {'error': ...}

    def to_dict(self) -> dict[str, Any]:
        return {"ir_version": self.ir_version,
                "opsets": {k or "ai.onnx": v for k, v in self.opsets.items()},
                "node_count": self.node_count, "graph_node_count": self.graph_node_count,
                "functions": self.functions,
                "activations": [r.to_dict() for r in self.rows],
                "defects": self.defects, "target_opset": self.target_opset,
                "conversion": self.conversion}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    def table(self) -> str:
        ops = ", ".join(f"{k or 'ai.onnx'} {v}" for k, v in self.opsets.items())
        lines = [f"IR version {self.ir_version}; opsets: {ops}; {self.node_count} nodes "
                 f"({self.graph_node_count} in the main graph)"
                 + (f"; functions: {', '.join(self.functions)}" if self.functions else "")]
        if self.rows:
            head = ["node", "scope", "version", "dtype", "attributes", "slope"]
            if self.target_opset is not None:
                head.append(f"at opset {self.target_opset}")
            body = []
            for r in self.rows:
                cells = [r.node, r.scope, f"{r.op}-{r.version}" if r.version else f"{r.op}-?",
                         r.dtype or "?", ", ".join(a.text() for a in r.attributes) or "-",
                         _slope_text(r)]
                if self.target_opset is not None:
                    cells.append(r.at_target or "?")
                body.append(cells)
            body = [[printable(c) for c in cells] for cells in body]
            widths = [max(len(c[i]) for c in [head, *body]) for i in range(len(head))]
            for cells in [head, *body]:
                lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        else:
            lines.append("no PRelu, LeakyRelu or Selu nodes")
        if self.conversion is not None:
            lines.append(f"convert to opset {self.target_opset} (dry run):")
            if "error" in self.conversion:
                lines.append(f"  impossible: {self.conversion['error']}")
            else:
                for c in self.conversion.get("changes", []):
                    lines.append(f"  {c.get('scope', '')}, node {c.get('node', '')}: "
                                 f"{c.get('what', '')} -- {c.get('why', '')}")
                if not self.conversion.get("changes"):
                    lines.append("  no node changes")
                for note in self.conversion.get("notes", []):
                    lines.append(f"  note: {note}")
        d = self.defects
        if d.get("changes") or d.get("left_alone") or d.get("refused"):
            lines.append("defects (opshift fix):")
            for key, word in (("changes", "would fix"), ("left_alone", "would leave alone"),
                              ("refused", "cannot fix")):
                for c in d.get(key, []):
                    node = f", node {c['node']}" if c["node"] else ""
                    lines.append(f"  {word}: {c['scope']}{node}: {c['what']} -- {c['why']}")
        else:
            lines.append("no defects for opshift fix")
        return "\n".join(map(printable, lines))


def _slope_text(r: ActivationRow) -> str:
    if r.op != "PRelu":
        return "-"
    shape = "?" if r.slope_shape is None else str(r.slope_shape)
    return f"{shape}: {r.slope_class}"


def _json_value(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, onnx.TensorProto):
        return tensor_array(v).tolist()
    return v


# ------------------------------------------------------------------------------------------

def inspect(model: ModelLike, opset: int | None = None, *,
            base_dir: str | os.PathLike | None = None) -> InspectReport:
    """Report on ``model`` (ModelProto, onnx_ir.Model or path); never modifies it.
    ``base_dir``: the folder of a ModelProto's external data."""
    proto, _, folder = to_proto(model)
    base_dir = folder if base_dir is None else base_dir
    work = onnx.ModelProto()
    work.CopyFrom(proto)  # fix/convert dry runs and shape inference never touch the input
    functions = [function_id(f) for f in proto.functions]
    total = sum(len(sc.nodes) for sc in iter_scopes(proto))
    report = InspectReport(
        ir_version=proto.ir_version,
        opsets={opsets.normalize_domain(i.domain): i.version for i in proto.opset_import},
        node_count=total, graph_node_count=len(proto.graph.node), functions=functions)
    shapes = static_shapes(proto)
    dtypes = _elem_types(proto)
    for sc in iter_scopes(proto):
        for i, node in enumerate(sc.nodes):
            if node.op_type not in opsets.ACTIVATIONS or opsets.normalize_domain(node.domain):
                continue
            report.rows.append(_row(node, i, sc, shapes, dtypes, base_dir))
    from .passes.fix import fix_proto

    fixed = onnx.ModelProto()
    fixed.CopyFrom(proto)
    report.defects = fix_proto(fixed, strict=False, base_dir=base_dir).to_dict()
    if opset is not None:
        report.target_opset = opset
        _dry_convert(work, opset, report)
    return report


def _row(node, index, sc, shapes, dtypes, base_dir) -> ActivationRow:
    ver = opsets.since_version(node.op_type, sc.opset) if sc.opset else None
    name = node.name or f"<{node.op_type} #{index}>"
    row = ActivationRow(name, node.op_type, sc.label, sc.opset, ver,
                        dtypes.get(node.input[0]) if node.input else None)
    row.attributes = _attributes(node, ver, base_dir)
    if node.op_type == "PRelu" and len(node.input) >= 2:
        if sc.function is not None:  # function bodies are their own namespace
            t = _constant_dims(sc, node.input[1])
            xs, ss = None, t
        else:
            xs, ss = shapes.get(node.input[0]), shapes.get(node.input[1])
        row.x_shape = None if xs is None else list(xs)
        row.slope_shape = None if ss is None else list(ss)
        if sc.function is not None:
            row.slope_class = "unknown (inside a function X's shape depends on the call)"
        elif xs is None or ss is None or ver is None:
            row.slope_class = "unknown (shapes not inferred)"
        else:
            try:
                row.slope_class = CLASS_TEXT[classify(xs, ss, rule_for_version(ver))]
            except OpshiftError as e:
                row.slope_class = f"does not broadcast: {e}"
    return row


def _constant_dims(sc, name: str) -> tuple[int, ...] | None:
    for n in sc.nodes:
        if (n.op_type == "Constant" and list(n.output) == [name] and len(n.attribute) == 1
                and n.attribute[0].type == onnx.AttributeProto.TENSOR):
            return tuple(n.attribute[0].t.dims)
    return None


def _attributes(node: onnx.NodeProto, ver: int | None, base_dir) -> list[Attr]:
    s = opsets.schema(node.op_type, ver) if ver else None
    given = {a.name: a for a in node.attribute}
    out: list[Attr] = []
    if s is not None:
        defaults = opsets.attribute_defaults(node.op_type, ver)
        for name in sorted(s.attributes):
            a = given.pop(name, None)
            if a is not None:
                ok = a.type == s.attributes[name].type.value
                out.append(Attr(name, _attr_value(a, base_dir), False, ok))
            elif name in defaults:
                out.append(Attr(name, defaults[name], True))
    for name, a in given.items():
        out.append(Attr(name, _attr_value(a, base_dir), False, False))
    return out


def _attr_value(a: onnx.AttributeProto, base_dir) -> Any:
    if a.ref_attr_name:
        return f"@{a.ref_attr_name}"
    v = helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        return tensor_array(v, base_dir).tolist()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return list(v)
    return v


def _elem_types(model: onnx.ModelProto) -> dict[str, str]:
    """Value name -> numpy-style dtype name, from declared and inferred types."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=False)
    except Exception:  # best effort: declared types only
        m = model
    out: dict[str, str] = {}

    def graph(g: onnx.GraphProto) -> None:
        for vi in (*g.input, *g.output, *g.value_info):
            tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
            if tt is not None and tt.elem_type:
                out[vi.name] = opsets.tensor_type_name(tt.elem_type)
        for t in g.initializer:
            out[t.name] = opsets.tensor_type_name(t.data_type)
        for n in g.node:
            for _, sg in subgraphs(n):
                graph(sg)

    graph(m.graph)
    for f in m.functions:
        for vi in getattr(f, "value_info", []):
            tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
            if tt is not None and tt.elem_type:
                out.setdefault(vi.name, opsets.tensor_type_name(tt.elem_type))
    return out


def _dry_convert(work: onnx.ModelProto, target: int, report: InspectReport) -> None:
    for r in report.rows:
        vt = opsets.since_version(r.op, target)
        if vt is None:
            r.at_target = f"{r.op} does not exist at opset {target}"
        elif r.version is not None and vt == r.version:
            r.at_target = f"{r.op}-{vt} (unchanged)"
        else:
            r.at_target = f"{r.op}-{vt}"
    try:
        from .conversion.engine import convert_proto
    except ImportError:  # pragma: no cover - convert ships with opshift
        report.conversion = {"error": "opshift.conversion is not available"}
        return
    try:
        result = convert_proto(work, target)
    except OpshiftError as e:
        report.conversion = {"error": str(e)}
        return
    report.conversion = result.to_dict()
    by_node: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in report.conversion.get("changes", []):
        by_node.setdefault((c.get("scope", ""), c.get("node", "")), []).append(c)
    for r in report.rows:
        for key in ((r.scope, r.node), (r.scope, repr(r.node))):
            r.conversion.extend(by_node.get(key, []))
        if r.conversion and r.at_target and "(unchanged)" not in r.at_target:
            r.at_target += ": " + "; ".join(c.get("what", "") for c in r.conversion)


def iter_activations(model: onnx.ModelProto) -> Iterator[tuple[Any, onnx.NodeProto]]:
    """(scope, node) for every PRelu, LeakyRelu and Selu in the model."""
    for sc in iter_scopes(model):
        for n in sc.nodes:
            if n.op_type in opsets.ACTIVATIONS and not opsets.normalize_domain(n.domain):
                yield sc, n

