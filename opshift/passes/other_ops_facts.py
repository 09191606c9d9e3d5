"""What the (still unmodified) model says about values: element types, shapes, constants.

Types come from declarations and a cheap schema-driven propagation (or, when every declared
value has one type and every op keeps its inputs' type, from that one type); shapes, and any
type still unknown, from one run of onnx shape inference on a copy -- only when a conversion
step asks.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import opsets
from ._graph import subgraphs


class ModelFacts:
    """Lazily computed facts about the (still unmodified) model.

    Element types come from declarations and a cheap schema-driven propagation; shapes (and
    any type still unknown) from one run of onnx shape inference on a copy, only when some
    step needs them.
    """

    def __init__(self, model: onnx.ModelProto, source: int):
        self.model = model
        self.source = source
        self._types: dict[str, int] | None = None
        self._inferred: tuple[dict[str, int], dict[str, tuple]] | None = None
        self.extra_types: dict[str, int] = {}
        self.extra_shapes: dict[str, tuple] = {}

    # -- types
    def elem_type(self, name: str) -> int | None:
        if not name:
            return None
        t = self.extra_types.get(name)
        if t:
            return t
        t = self.propagated().get(name)
        if t:
            return t
        return self._infer()[0].get(name) or None

    def propagated(self) -> dict[str, int]:
        """The declared and propagated element types (no shape inference)."""
        if self._types is None:
            self._types = _uniform_types(self.model, self.source)
            if self._types is None:
                self._types = _declared_and_propagated_types(self.model, self.source)
        return self._types

    def propagate(self, nodes, opset: int) -> None:
        """Element types of the outputs of new ``nodes`` (valid at ``opset``), in order."""
        for n in nodes:
            c = constant_tensor(n)
            if c is not None:
                self.extra_types[n.output[0]] = c.data_type
                continue
            rules = _output_type_rules(n.op_type, opset) or ()
            for k, r in enumerate(rules):
                if k >= len(n.output) or not n.output[k] or r is None:
                    continue
                kind, arg = r
                if kind == "input":
                    t = self.elem_type(n.input[arg]) if arg < len(n.input) else None
                elif kind == "fixed":
                    t = arg
                else:
                    t = next((a.i for a in n.attribute if a.name == arg), None)
                if t:
                    self.extra_types[n.output[k]] = t

    # -- shapes
    def shape(self, name: str) -> tuple | None:
        if not name:
            return None
        if name in self.extra_shapes:
            return self.extra_shapes[name]
        return self._infer()[1].get(name)

    def _infer(self) -> tuple[dict[str, int], dict[str, tuple]]:
        if self._inferred is None:
            self._inferred = _inferred_types_and_shapes(self.model)
        return self._inferred


def _take_value_infos(vis, types: dict[str, int], shapes: dict[str, tuple] | None) -> None:
    for vi in vis:
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if tt.elem_type:
            types[vi.name] = tt.elem_type
        if shapes is not None and tt.HasField("shape"):
            shapes[vi.name] = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tt.shape.dim)


def constant_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    if node.op_type != "Constant" or opsets.normalize_domain(node.domain) != "":
        return None
    for a in node.attribute:
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            return a.t
        if a.name in _CONSTANT_VALUE_ATTRS:
            return _constant_attr_tensor(a)
    return None


_CONSTANT_VALUE_ATTRS = ("value_float", "value_floats", "value_int", "value_ints")


def _constant_attr_tensor(a: onnx.AttributeProto) -> onnx.TensorProto:
    v = helper.get_attribute_value(a)
    dtype = np.float32 if "float" in a.name else np.int64
    return numpy_helper.from_array(np.array(v, dtype=dtype))


@functools.cache
def _output_type_rules(op: str, opset: int) -> tuple | None:
    """Per output: ('fixed', elem) or ('input', index) or ('attr', name) or None."""
    s = opsets.schema(op, opset)
    if s is None:
        return None
    rules = []
    params = {tc.type_param_str: tc for tc in s.type_constraints}
    for i, out in enumerate(s.outputs):
        if op in ("Cast",) and i == 0:
            rules.append(("attr", "to"))
            continue
        if out.type_str in params:
            src = next((j for j, inp in enumerate(s.inputs) if inp.type_str == out.type_str),
                       None)
            rules.append(None if src is None else ("input", src))
        else:
            rules.append(("fixed", _elem_of_type_str(out.type_str)))
    return tuple(rules)


def _elem_of_type_str(ts: str) -> int | None:
    if ts.startswith("tensor(") and ts.endswith(")"):
        name = ts[len("tensor("):-1].upper()
        try:
            return onnx.TensorProto.DataType.Value(name)
        except ValueError:
            return None
    return None


class Uniform(dict):
    """Every value of the model has one element type."""

    def __init__(self, elem: int):
        super().__init__()
        self.elem = elem

    def get(self, name, default=None):
        return self.elem


def _uniform_types(model: onnx.ModelProto, source: int) -> Uniform | None:
    """A shortcut for models whose declared values all have one element type and whose ops
    all give their outputs their inputs' type (a chain of Conv/Add/activations): then every
    value has that type, with no per-node propagation."""
    g = model.graph
    if model.functions:
        return None
    elems: set[int] = {t.data_type for t in g.initializer}
    for vis in (g.input, g.output, g.value_info):
        for vi in vis:
            if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.elem_type:
                return None
            elems.add(vi.type.tensor_type.elem_type)
    if len(elems) != 1:
        return None
    for op, dom in {(n.op_type, n.domain) for n in g.node}:
        if dom not in ("", "ai.onnx") or op in CONTROL_FLOW or op == "Constant":
            return None
        rules = _output_type_rules(op, source)
        if not rules or any(r is None or r[0] != "input" for r in rules):
            return None
    return Uniform(elems.pop())


_UNSET = object()
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def _declared_and_propagated_types(model: onnx.ModelProto, source: int) -> dict[str, int]:
    types: dict[str, int] = {}

    def graph(g: onnx.GraphProto, opset: int) -> None:
        _take_value_infos(g.input, types, None)
        _take_value_infos(g.output, types, None)
        _take_value_infos(g.value_info, types, None)
        for t in g.initializer:
            types[t.name] = t.data_type
        nodes(g.node, opset)

    def nodes(ns, opset: int) -> None:
        # The hot loop of type propagation: few protobuf field reads per node.
        rules_for: dict[str, tuple | None] = {}
        get = types.get
        for n in ns:
            op = n.op_type
            rules = rules_for.get(op, _UNSET)
            if rules is _UNSET:
                rules = rules_for[op] = _output_type_rules(op, opset)
            if rules is None or op in CONTROL_FLOW:
                for _, sg in subgraphs(n):
                    graph(sg, opset)
                if rules is None:
                    continue
            dom = n.domain
            if dom and dom != "ai.onnx":
                continue
            if op == "Constant":
                c = constant_tensor(n)
                if c is not None:
                    types[n.output[0]] = c.data_type
                continue
            outs = n.output
            for i, r in enumerate(rules):
                if i >= len(outs):
                    break
                if r is None:
                    continue
                kind, arg = r
                if kind == "input":
                    ins = n.input
                    t = get(ins[arg]) if arg < len(ins) else None
                elif kind == "fixed":
                    t = arg
                else:
                    t = next((a.i for a in n.attribute if a.name == arg), None)
                if t:
                    types[outs[i]] = t

    graph(model.graph, source)
    for f in model.functions:
        _take_value_infos(getattr(f, "value_info", ()), types, None)
        nodes(f.node, opsets.opset_of(f) or source)
    return types


def _inferred_types_and_shapes(model: onnx.ModelProto) -> tuple[dict[str, int], dict[str, tuple]]:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    except Exception:  # best effort: what inference cannot say stays unknown
        m = model
    types: dict[str, int] = {}
    shapes: dict[str, tuple] = {}

    def graph(g: onnx.GraphProto) -> None:
        for vis in (g.input, g.output, g.value_info):
            _take_value_infos(vis, types, shapes)
        for t in g.initializer:
            types[t.name] = t.data_type
            shapes[t.name] = tuple(t.dims)
        for n in g.node:
            for _, sg in subgraphs(n):
                graph(sg)
            c = constant_tensor(n)
            if c is not None:
                types[n.output[0]] = c.data_type
                shapes[n.output[0]] = tuple(c.dims)

    graph(m.graph)
    for f in m.functions:
        _take_value_infos(getattr(f, "value_info", ()), types, shapes)
    return types, shapes
