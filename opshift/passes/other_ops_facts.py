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
        self._variants: dict[FunctionKey, list[Variant]] = {}
        #: The types of the function variant being converted (None: a graph scope).
        self.local: dict[str, int] | None = None
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
        if self.local is not None:
            return self.local.get(name) or None
        t = self.propagated().get(name)
        if t:
            return t
        return self._infer()[0].get(name) or None

    def propagated(self) -> dict[str, int]:
        """The declared and propagated element types (no shape inference)."""
        if self._types is None:
            self._types = _uniform_types(self.model, self.source)
            if self._types is None:
                self._types, self._variants = _declared_and_propagated_types(
                    self.model, self.source)
        return self._types

    def scope_types(self) -> dict[str, int]:
        """The types of the scope being converted: the function variant's, else the model's."""
        return self.local if self.local is not None else self.propagated()

    def function_variants(self, f: onnx.FunctionProto) -> list[Variant]:
        """(call-site input types, body types) for each distinct tuple of input types the
        calls of ``f`` pass (in the main graph, subgraphs, and functions called from them)."""
        self.propagated()
        return self._variants.get((f.domain, f.name), [])

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
        if self.local is not None:
            return None  # a function's names are its own: the model's shapes say nothing
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


FunctionKey = tuple[str, str]
#: The element types of one function body for one tuple of call-site input types.
Variant = tuple[tuple[int, ...], dict[str, int]]


class _Propagation:
    """Declared types, then each node's outputs typed from its schema, in node order.

    A call of a model-local function types the function's inputs from the call site's
    values and propagates them through its body (once per distinct tuple of input types;
    0 = unknown), then gives the call's outputs the body's output types. Function bodies get
    their own name -> type maps: their names are local and may repeat graph names.
    """

    def __init__(self, model: onnx.ModelProto, source: int):
        self.model = model
        self.source = source
        self.local = {(f.domain, f.name): f for f in model.functions}
        self.variants: dict[FunctionKey, dict[tuple[int, ...], dict[str, int]]] = {}
        self._opsets: dict[FunctionKey, int] = {}

    def graph(self, g: onnx.GraphProto, types: dict[str, int], opset: int) -> None:
        _take_value_infos(g.input, types, None)
        _take_value_infos(g.output, types, None)
        _take_value_infos(g.value_info, types, None)
        for t in g.initializer:
            types[t.name] = t.data_type
        self.nodes(g.node, types, opset)

    def function(self, key: FunctionKey, ins: tuple[int, ...]) -> dict[str, int]:
        known = self.variants.setdefault(key, {})
        ft = known.get(ins)
        if ft is not None:
            return ft  # also stops a (forbidden) recursive call
        f = self.local[key]
        ft = known[ins] = {}
        _take_value_infos(getattr(f, "value_info", ()), ft, None)
        for name, t in zip(f.input, ins):
            if t:
                ft[name] = t
        opset = self._opsets.get(key)
        if opset is None:
            opset = self._opsets[key] = opsets.opset_of(f) or self.source
        self.nodes(f.node, ft, opset)
        return ft

    def nodes(self, ns, types: dict[str, int], opset: int) -> None:
        # The hot loop of type propagation: few protobuf field reads per node.
        rules_for: dict[str, tuple | None] = {}
        get = types.get
        local = self.local
        for n in ns:
            op = n.op_type
            rules = rules_for.get(op, _UNSET)
            if rules is _UNSET:
                rules = rules_for[op] = _output_type_rules(op, opset)
            if rules is None or op in CONTROL_FLOW:
                for _, sg in subgraphs(n):
                    self.graph(sg, types, opset)
                if rules is None:
                    if local and (n.domain, op) in local:
                        self._call(n, types)
                    continue
            dom = n.domain
            if dom and dom != "ai.onnx":
                if local and (dom, op) in local:
                    self._call(n, types)
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

    def _call(self, n: onnx.NodeProto, types: dict[str, int]) -> None:
        key = (n.domain, n.op_type)
        f = self.local[key]
        ins = tuple((types.get(n.input[k], 0) if k < len(n.input) and n.input[k] else 0)
                    for k in range(len(f.input)))
        ft = self.function(key, ins)
        for o, fo in zip(n.output, f.output):
            t = ft.get(fo)
            if o and t:
                types[o] = t


def _declared_and_propagated_types(
        model: onnx.ModelProto, source: int
) -> tuple[dict[str, int], dict[FunctionKey, list[Variant]]]:
    """The main graph's (and its subgraphs') types, and each function's typed variants (one
    per distinct tuple of input types its call sites pass; none for a function never called
    from the model)."""
    p = _Propagation(model, source)
    types: dict[str, int] = {}
    p.graph(model.graph, types, source)
    variants = {key: list(v.items()) for key, v in p.variants.items()}
    return types, variants


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
