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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from opshift import opsets, progress
from opshift.broadcast import SlopeClass, classify, rule_for_version
from opshift.errors import OpshiftError, function_id
from opshift.graph.counts import op_counts
from opshift.graph.facts import Facts
from opshift.graph.index import ModelIndex
from opshift.io.models import ModelLike, to_proto
from opshift.io.tensors import tensor_array
from opshift.tables import number

#: How each broadcast class is described to users (see :func:`slope_class_text`).
CLASS_TEXT = {
    SlopeClass.SHARED: "shared",
    SlopeClass.CHANNEL_AXIS1: "per-channel axis 1 (oneDNN per_channel_broadcast NCX)",
    SlopeClass.CHANNEL_LAST: "per-channel last axis (oneDNN NXC)",
    SlopeClass.ELEMENTWISE: "elementwise",
}


def slope_class_text(cls: SlopeClass, version: int, slope_shape) -> str:
    """What a slope of class ``cls`` means at PRelu-``version``: a 1-D slope read per
    channel on axis 1 is PRelu-1/6's own rule there, a [C,1,...,1] slope at >= 7 is numpy
    broadcasting that lands on axis 1."""
    text = CLASS_TEXT[cls]
    if cls is SlopeClass.CHANNEL_AXIS1:
        how = (f"PRelu-{version}'s 1-D slope rule" if version < 7 and len(slope_shape) == 1
               else "numpy broadcast of [C,1,...,1]")
        text = text.replace("(", f"({how}; ", 1)
    elif cls is SlopeClass.CHANNEL_LAST and version < 7:
        text = text.replace("(", "(numpy broadcast: axis 1 is not C; ", 1)
    return text


@dataclass
class Attr:
    """One attribute as the node sees it."""

    name: str
    value: Any
    default: bool  # True: not set on the node, the schema default applies
    valid: bool = True  # False: set on the node but not defined for this version / wrong type

    def text(self) -> str:
        v = self.value
        s = number(v) if isinstance(v, float) else repr(v)
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
        return {"node": self.node, "op": self.op, "scope": self.scope, "opset": self.opset,
                "version": self.version, "dtype": self.dtype,
                "attributes": {a.name: {"value": _json_value(a.value), "default": a.default,
                                        "valid": a.valid} for a in self.attributes},
                "x_shape": self.x_shape, "slope_shape": self.slope_shape,
                "slope_class": self.slope_class, "at_target": self.at_target,
                "conversion": self.conversion}


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
    #: ConvertResult.to_dict(), or {'error': ...}; then, when fix repairs the model,
    #: 'after_fix': the dry run of the repaired model (ConvertResult.to_dict() or {'error'})
    conversion: dict[str, Any] | None = None
    ops: dict[str, int] = field(default_factory=dict)  # op_counts() of the model
    ops_at_target: dict[str, int] | None = None  # op_counts() after the dry run
    #: what 'opshift fuse' would fuse (opshift.fuse.would_fuse): decomposed
    #: activations ('patterns', each saying whether it needs --allow-rounding and why) and
    #: the matches it would refuse ('refused', with the reason)
    fusable: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"patterns": [], "refused": []})

    def to_dict(self) -> dict[str, Any]:
        return {"ir_version": self.ir_version,
                "opsets": {k or "ai.onnx": v for k, v in self.opsets.items()},
                "node_count": self.node_count, "graph_node_count": self.graph_node_count,
                "functions": self.functions,
                "activations": [r.to_dict() for r in self.rows],
                "defects": self.defects, "target_opset": self.target_opset,
                "conversion": self.conversion, "ops": self.ops, "fusable": self.fusable}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    def table(self) -> str:
        """Every activation node, one row each, then the defects and the dry run."""
        from opshift.inspect.text import full

        return "\n".join(full(self))

    def summary(self) -> str:
        """A screenful: op counts, the activations grouped by op, version, dtype and slope
        class or attributes, the defects grouped by kind, the dry run grouped by change."""
        from opshift.inspect.text import summary

        return "\n".join(summary(self))


def _json_value(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, onnx.TensorProto):
        return tensor_array(v).tolist()
    return v


# ------------------------------------------------------------------------------------------

def inspect_model(model: ModelLike, opset: int | None = None, *,
            base_dir: str | os.PathLike | None = None, scratch: bool = False,
            index: ModelIndex | None = None) -> InspectReport:
    """Report on ``model`` (ModelProto, onnx_ir.Model or path); never modifies it unless
    ``scratch``: then the fix dry run edits a ModelProto given (a caller done with it spares
    a copy). ``base_dir``: the folder of a ModelProto's external data; ``index``: what
    the structural check read of it, when it was checked (see
    :func:`opshift.fix.fix_proto`)."""
    proto, _, folder = to_proto(model)
    base_dir = folder if base_dir is None else base_dir
    functions = [function_id(f) for f in proto.functions]
    # what the rows need of types and shapes, found on demand; node kinds from the index
    facts = Facts(proto, index=index)
    total = sum(len(sc.nodes) for sc in facts.scopes())
    report = InspectReport(
        ir_version=proto.ir_version,
        opsets={opsets.normalize_domain(i.domain): i.version for i in proto.opset_import},
        node_count=total, graph_node_count=len(proto.graph.node), functions=functions,
        ops=op_counts(proto))
    seen: dict = {}
    with progress.stage("activations", total, "nodes"):
        for sc in facts.scopes():
            for i, node in enumerate(sc.nodes):
                if node.op_type in opsets.ACTIVATIONS and not opsets.normalize_domain(
                        node.domain):
                    report.rows.append(_row(node, i, sc, facts, base_dir, seen))
            progress.advance(len(sc.nodes))
    if opset is not None:
        report.target_opset = opset
        work = onnx.ModelProto()
        work.CopyFrom(proto)  # the dry run never touches the input
        with progress.stage(f"convert to opset {opset} (dry run)"):
            _dry_convert(work, opset, report)
        del work
    from opshift.fix.fixer import fix_proto
    from opshift.fuse.anchors import may_hold_patterns

    kinds = facts.kinds()
    if may_hold_patterns(op for _, op in kinds):  # else onnx_ir and the rules stay unloaded
        from opshift.fuse.driver import would_fuse

        with progress.stage("decomposed activations (fuse dry run)"):  # before fix edits it
            report.fusable = would_fuse(proto, kinds=kinds, base_dir=base_dir)
    with progress.stage("defects (fix dry run)"):
        if scratch and proto is model:
            fixed = proto
        else:
            fixed = onnx.ModelProto()
            fixed.CopyFrom(proto)
        report.defects = fix_proto(fixed, strict=False, base_dir=base_dir,
                                   facts=Facts(fixed, index=index)).to_dict()
    conv = report.conversion
    if conv is not None and "error" in conv and report.defects["modified"] and \
            not report.defects["refused"]:
        # refused as it is, but fix repairs the model: say whether convert then succeeds
        with progress.stage(f"convert to opset {opset} after fix (dry run)"):
            conv["after_fix"] = _dry_run(fixed, opset)
    return report


def _row(node, index, sc, facts: Facts, base_dir, seen: dict) -> ActivationRow:
    """The row of activation ``node``; ``seen`` holds what rows judged before (defaults per
    op version, slope classes per pair of shapes, dtype names), each judged once."""
    op, opset, ins = node.op_type, sc.opset, node.input[:]
    ver = opsets.since_version(op, opset) if opset else None
    name = node.name or f"<{op} #{index}>"
    elem = facts.elem_type(ins[0]) if ins else None
    dtype = seen.get(elem) if elem else None
    if elem and dtype is None:
        dtype = seen[elem] = opsets.tensor_type_name(elem)
    row = ActivationRow(name, op, sc.label, opset, ver, dtype)
    if node.attribute:
        row.attributes = _attributes(node, ver, base_dir)
    else:
        key = (op, ver)
        if key not in seen:
            seen[key] = _attributes(node, ver, base_dir)
        row.attributes = list(seen[key])
    if op == "PRelu" and len(ins) >= 2:
        if sc.function is not None:  # function bodies are their own namespace
            c = facts.constant(sc, ins[1])
            xs, ss = None, None if c is None else tuple(c.tensor.dims)
        else:
            xs, ss = facts.shape(ins[0]), facts.shape(ins[1])
        row.x_shape = None if xs is None else list(xs)
        row.slope_shape = None if ss is None else list(ss)
        if sc.function is not None:
            row.slope_class = "unknown (inside a function X's shape depends on the call)"
        elif xs is None or ss is None or ver is None:
            row.slope_class = "unknown (shapes not inferred)"
        else:
            key = (xs, ss, ver)
            if key not in seen:
                seen[key] = _slope_class(xs, ss, ver)
            row.slope_class = seen[key]
    return row


def _slope_class(xs: tuple, ss: tuple, ver: int) -> str:
    try:
        return slope_class_text(classify(xs, ss, rule_for_version(ver)), ver, ss)
    except OpshiftError as e:
        return f"does not broadcast: {e}"


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


def _dry_run(work: onnx.ModelProto, target: int) -> dict[str, Any]:
    """``work`` converted to ``target`` in place: ConvertResult.to_dict(), or {'error': ...}."""
    from opshift.convert.engine import convert_proto

    try:
        return convert_proto(work, target).to_dict()
    except OpshiftError as e:
        return {"error": str(e)}


def _dry_convert(work: onnx.ModelProto, target: int, report: InspectReport) -> None:
    for r in report.rows:
        vt = opsets.since_version(r.op, target)
        if vt is None:
            r.at_target = f"{r.op} does not exist at opset {target}"
        elif r.version is not None and vt == r.version:
            r.at_target = f"{r.op}-{vt} (unchanged)"
        else:
            r.at_target = f"{r.op}-{vt}"
    report.conversion = _dry_run(work, target)
    if "error" in report.conversion:
        return
    report.ops_at_target = op_counts(work)
    by_node: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in report.conversion.get("changes", []):
        by_node.setdefault((c.get("scope", ""), c.get("node", "")), []).append(c)
    for r in report.rows:
        for key in ((r.scope, r.node), (r.scope, repr(r.node))):
            r.conversion.extend(by_node.get(key, []))
        if r.conversion and r.at_target and "(unchanged)" not in r.at_target:
            r.at_target += ": " + "; ".join(c.get("what", "") for c in r.conversion)
