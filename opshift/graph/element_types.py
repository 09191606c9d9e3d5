"""Element types that follow from the model without shape inference: declarations, and each
node's outputs typed from its schema (a type parameter bound by an input, a fixed type, or
Cast's ``to``), model-local function bodies typed once per tuple of call-site input types."""

from __future__ import annotations

import functools

import onnx
from onnx import TensorProto

from opshift import opsets
from opshift.graph.declared import dims
from opshift.graph.scopes import (
    constant_tensor,
    function_opsets,
    may_hold_subgraphs,
    model_opsets,
    subgraphs,
)

CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic

#: (domain, name) of a model-local function
FunctionKey = tuple[str, str]
#: The element types of one function body for one tuple of call-site input types.
Variant = tuple[tuple[int, ...], dict[str, int]]


def take_value_infos(vis, types: dict[str, int], shapes: dict[str, tuple] | None = None
                     ) -> None:
    """Record the element types (and, given ``shapes``, the shapes) ``vis`` declare."""
    for vi in vis:
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if tt.elem_type:
            types[vi.name] = tt.elem_type
        if shapes is not None and tt.HasField("shape"):
            shapes[vi.name] = dims(tt.shape)


def _elem_type(data: bytes) -> int:
    """The element type of a serialized TypeProto (0: not a tensor, or none given)."""
    tp = onnx.TypeProto.FromString(data)
    return tp.tensor_type.elem_type if tp.HasField("tensor_type") else 0


def _elem_of_type_str(ts: str) -> int | None:
    if ts.startswith("tensor(") and ts.endswith(")"):
        try:
            return TensorProto.DataType.Value(ts[len("tensor("):-1].upper())
        except ValueError:
            return None
    return None


#: the rules of an op whose one output has its first input's type (Conv, Add, Relu, ...):
#: :func:`output_type_rules` returns this very tuple for them
SAME_AS_FIRST = (("input", 0, False),)


@functools.cache
def output_type_rules(op: str, opset: int, domain: str = "") -> tuple | None:
    """How each output of ``op`` at ``opset`` of ``domain`` (default: ai.onnx) gets its
    element type: ``("input", j, variadic)`` (that of input j, or of any present input from j
    on), ``("fixed", elem)``, ``("to",)`` (Cast's attribute) or None (not without
    inference). None for an op the opset does not have."""
    s = opsets.schema(op, opset, domain)
    if s is None:
        return None
    params = {tc.type_param_str: tc.allowed_type_strs for tc in s.type_constraints}
    rules: list[tuple | None] = []
    for k, out in enumerate(s.outputs):
        allowed = params.get(out.type_str)
        if op == "Cast" and k == 0 and not domain:
            rules.append(("to",))
        elif allowed is not None:
            j = next((j for j, p in enumerate(s.inputs) if p.type_str == out.type_str), None)
            elem = _elem_of_type_str(allowed[0]) if len(allowed) == 1 else None
            rules.append(("input", j, s.inputs[j].option == _VARIADIC) if j is not None
                         else None if elem is None else ("fixed", elem))
        else:
            elem = _elem_of_type_str(out.type_str)
            rules.append(None if elem is None else ("fixed", elem))
    return SAME_AS_FIRST if tuple(rules) == SAME_AS_FIRST else tuple(rules)


def cast_to(n: onnx.NodeProto) -> int | None:
    """The element type a Cast node's ``to`` names (an enum, or Cast-1's string)."""
    for a in n.attribute:
        if a.name == "to":
            if a.type == onnx.AttributeProto.STRING:
                try:
                    return TensorProto.DataType.Value(a.s.decode())
                except ValueError:
                    return None
            return a.i or None
    return None


def rule_type(rule: tuple, n: onnx.NodeProto, get) -> int | None:
    """The type ``rule`` (see :func:`output_type_rules`) gives an output of ``n``; ``get``
    looks up a value's known type."""
    kind = rule[0]
    if kind == "input":
        ins = n.input
        j = rule[1]
        if rule[2]:
            for c in ins[j:]:
                t = get(c) if c else None
                if t:
                    return t
            return None
        return get(ins[j]) if j < len(ins) and ins[j] else None
    if kind == "fixed":
        return rule[1]
    return cast_to(n)


class Uniform(dict):
    """Every value of the model has one element type."""

    def __init__(self, elem: int):
        super().__init__()
        self.elem = elem

    def get(self, name, default=None):
        return self.elem


def uniform_types(model: onnx.ModelProto, source: int,
                  kinds: set[tuple[str, str]] | None = None) -> Uniform | None:
    """A shortcut for models whose declared values all have one element type and whose ops
    all give their outputs their inputs' type (a chain of Conv/Add/activations): then every
    value has that type, with no per-node propagation. ``kinds``: the main graph's
    (op_type, domain) when known."""
    g = model.graph
    if model.functions:
        return None
    elems: set[int] = {t.data_type for t in g.initializer}
    for vis in (g.input, g.output, g.value_info):
        # (a value that is not a tensor reads element type 0 here, as an untyped one does)
        elems.update([vi.type.tensor_type.elem_type for vi in vis])
    if len(elems) != 1 or 0 in elems:
        return None
    for op, dom in kinds if kinds is not None else {(n.op_type, n.domain) for n in g.node}:
        if dom not in ("", "ai.onnx") or op in CONTROL_FLOW or op == "Constant" \
                or op in _type_attribute_ops():  # (an attribute may give another type)
            return None
        rules = output_type_rules(op, source)
        if not rules or any(r is None or r[0] != "input" for r in rules):
            return None
    return Uniform(elems.pop())


_UNSET = object()


class Typed(dict):
    """Value -> element type of the main graph (and its subgraphs), declared then
    propagated; ``variants``: each model-local function's typed variants (one per distinct
    tuple of input types its call sites pass; none for a function never called)."""

    def __init__(self):
        super().__init__()
        self.variants: dict[FunctionKey, list[Variant]] = {}


class Propagation:
    """Declared types, then each node's outputs typed from its schema, in node order.

    A call of a model-local function types the function's inputs from the call site's
    values and propagates them through its body (once per distinct tuple of input types;
    0 = unknown), then gives the call's outputs the body's output types. Function bodies get
    their own name -> type maps: their names are local and may repeat graph names.
    :func:`declared_and_propagated` walks a model with it; the structural check
    (:mod:`opshift.check.structure`) feeds it the nodes of the walk it makes anyway.
    """

    def __init__(self, model: onnx.ModelProto, source: int):
        self.model = model
        self.source = source
        self.local = {(f.domain, f.name): f for f in model.functions}
        self.variants: dict[FunctionKey, dict[tuple[int, ...], dict[str, int]]] = {}
        self._opsets: dict[FunctionKey, int] = {}
        #: the model's other domains onnx.defs has schemas for (ai.onnx.ml, ...), by opset
        self._domains = {d: i.version for i in model.opset_import
                         if (d := opsets.normalize_domain(i.domain))}

    def declare(self, g: onnx.GraphProto, types: dict[str, int], declared=None) -> None:
        """Record the element types ``g`` declares (initializers last). ``declared``: the
        (names, serialized types) of its inputs, outputs and value_info entries when already
        read (:meth:`opshift.check.wellformed.Header.declared`): each distinct type is then
        decoded once instead of every entry read again."""
        if declared is None:
            take_value_infos(g.input, types)
            take_value_infos(g.output, types)
            take_value_infos(g.value_info, types)
        else:
            elems: dict[bytes, int] = {}
            for names, datas in declared:
                for name, data in zip(names, datas):
                    elem = elems.get(data)
                    if elem is None:
                        elem = elems[data] = _elem_type(data)
                    if elem:
                        types[name] = elem
        for t in g.initializer:
            types[t.name] = t.data_type

    def graph(self, g: onnx.GraphProto, types: dict[str, int], opset: int) -> None:
        self.declare(g, types)
        self.nodes(g.node, types, opset)

    def function(self, key: FunctionKey, ins: tuple[int, ...]) -> dict[str, int]:
        known = self.variants.setdefault(key, {})
        ft = known.get(ins)
        if ft is not None:
            return ft  # also stops a (forbidden) recursive call
        f = self.local[key]
        ft = known[ins] = {}
        take_value_infos(getattr(f, "value_info", ()), ft)
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
        for n in ns:
            op = n.op_type
            rules = rules_for.get(op, _UNSET)
            if rules is _UNSET:
                rules = rules_for[op] = output_type_rules(op, opset)
            if rules is SAME_AS_FIRST and not n.domain:  # the common case, inline
                ins, outs = n.input, n.output
                if ins and outs:
                    t = get(ins[0])
                    if t:
                        types[outs[0]] = t
                continue
            if rules is None or op in CONTROL_FLOW:
                for _, sg in subgraphs(n):
                    self.graph(sg, types, opset)
            self.outputs(n, rules, types)

    def outputs(self, n: onnx.NodeProto, rules: tuple | None, types: dict[str, int]
                ) -> None:
        """Type the outputs of ``n`` by ``rules`` (:func:`output_type_rules` of its op),
        its subgraphs already walked."""
        op, dom = n.op_type, n.domain
        if dom and dom != "ai.onnx":
            if self.local and (dom, op) in self.local:
                self._call(n, types)
                return
            version = self._domains.get(dom)  # (a schema of ai.onnx.ml types its outputs)
            rules = None if version is None else output_type_rules(op, version, dom)
        if rules is None:
            return
        if op == "Constant":
            c = constant_tensor(n)
            if c is not None:
                types[n.output[0]] = c.data_type
            return
        get = types.get
        outs = n.output
        for i, r in enumerate(rules):
            if i >= len(outs):
                break
            if r is not None:
                t = rule_type(r, n, get)
                if t:
                    types[outs[i]] = t

    def variant_lists(self) -> dict[FunctionKey, list[Variant]]:
        """Each function's typed variants found so far (see :class:`Typed`)."""
        return {key: list(v.items()) for key, v in self.variants.items()}

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


def declared_and_propagated(model: onnx.ModelProto, source: int,
                            seed: dict[str, int] | None = None) -> Typed:
    """The main graph's (and its subgraphs') types with each function's typed variants.
    ``seed``: types known before (onnx's inference), which declarations and propagation
    override."""
    p = Propagation(model, source)
    types = Typed()
    types.update(seed or {})
    p.graph(model.graph, types, source)
    types.variants = p.variant_lists()
    return types


def untyped_body(model: onnx.ModelProto, source: int, f: onnx.FunctionProto
                 ) -> dict[str, int]:
    """The types of ``f``'s body with its inputs untyped: from its value_info, constants
    and the nodes they feed."""
    return Propagation(model, source).function((f.domain, f.name), (0,) * len(f.input))


@functools.cache
def _free_output_types(domain: str, op: str, opset: int) -> frozenset[str]:
    """Types an op can output that none of its inputs determines (Shape -> int64, Cast-like
    ops, ...); everything if the op is unknown (a local function, another domain)."""
    s = opsets.schema(op, opset, domain) if opset else None
    if s is None:
        return ALL_TYPES
    allowed = {tc.type_param_str: frozenset(tc.allowed_type_strs) for tc in s.type_constraints}
    bound = {p.type_str for p in s.inputs}
    out: set[str] = set()
    for p in s.outputs:
        if p.type_str.startswith("tensor("):
            out.add(p.type_str)
        elif p.type_str not in bound:
            out |= allowed.get(p.type_str, ALL_TYPES)
    return frozenset(out)


ALL_TYPES = frozenset(opsets.tensor_type(t)
                      for t in TensorProto.DataType.values() if t)


#: attributes whose value is the element type of a node's first output
TYPE_ATTRIBUTES = ("to", "dtype", "output_dtype")


@functools.cache
def _type_attribute_ops() -> frozenset[str]:
    """Default-domain ops with a :data:`TYPE_ATTRIBUTES` attribute at some version."""
    return frozenset(s.name for s in onnx.defs.get_all_schemas_with_history()
                     if s.domain == "" and any(a in s.attributes for a in TYPE_ATTRIBUTES))


def attribute_output_type(node: onnx.NodeProto) -> str | None:
    """The type a type-giving attribute of ``node`` (``to``, ``dtype``, ``output_dtype``)
    gives its first output, as schemas spell it (``tensor(float6e2m3)``; a SequenceEmpty's
    ``seq(tensor(...))``); None when none does."""
    for a in node.attribute:
        if a.name in TYPE_ATTRIBUTES and a.type == onnx.AttributeProto.INT and a.i:
            if a.i not in TensorProto.DataType.values():
                return None
            t = opsets.tensor_type(a.i)
            return f"seq({t})" if node.op_type == "SequenceEmpty" else t
    return None


def nested_type_strings(tp: onnx.TypeProto) -> list[str]:
    """A non-tensor type as schemas spell it and each type it holds, outermost first
    (``optional(seq(tensor(bfloat16)))``, ``seq(tensor(bfloat16))``, ``tensor(bfloat16)``);
    empty for a tensor or an unknown type."""
    out = []
    while True:
        kind = tp.WhichOneof("value")
        if kind not in ("sequence_type", "optional_type"):
            break
        s = opsets.type_string(tp)
        if s is None:
            break
        out.append(s)
        tp = getattr(tp, kind).elem_type
        if tp.WhichOneof("value") == "tensor_type":
            out.append(opsets.type_string(tp))
            break
    return out


def possible_types(model: onnx.ModelProto) -> frozenset[str]:
    """Every type (as 'tensor(...)', and 'seq(...)' or 'optional(...)' with the types they
    hold for declared sequences and optionals) any value of the model could have: declared
    ones, constants, Cast targets and other type-giving attributes (``dtype``,
    ``output_dtype``), and all allowed types of outputs whose type no input binds. One pass
    over each node list (subgraphs found from that pass)."""
    elems: set[int] = set()
    found: set[str] = set()
    seen: set[tuple[str, str, int]] = set()
    typed_ops = _type_attribute_ops()

    def scan(nodes, ops: dict[str, int], graph: onnx.GraphProto | None) -> None:
        if graph is not None:
            for vi in (*graph.input, *graph.output, *graph.value_info):
                if vi.type.HasField("tensor_type"):
                    elems.add(vi.type.tensor_type.elem_type)
                else:
                    found.update(nested_type_strings(vi.type))
            elems.update(t.data_type for t in graph.initializer)
        keys = {(n.domain, n.op_type) for n in nodes}
        default_ops = {o for d, o in keys if d in ("", "ai.onnx")}
        special = default_ops & {"Cast", "Constant"}
        typed = default_ops & typed_ops - special
        holders = {o for d, o in keys if may_hold_subgraphs(d, o)}
        if special or holders or typed:
            for n in nodes:
                op = n.op_type
                if op in holders:
                    for _, sg in subgraphs(n):
                        scan(sg.node, ops, sg)
                if op in typed and n.domain in ("", "ai.onnx"):
                    t = attribute_output_type(n)
                    if t is not None:
                        found.add(t)
                        if t.startswith("seq("):
                            found.add(t[4:-1])
                    continue
                if op not in special or n.domain not in ("", "ai.onnx"):
                    continue
                if op == "Cast":
                    elems.add(cast_to(n) or 0)
                elif n.attribute and n.attribute[0].type == onnx.AttributeProto.TENSOR:
                    elems.add(n.attribute[0].t.data_type)
                else:  # value_float/value_ints/...: any type Constant makes
                    found.update(_free_output_types("", "Constant", ops.get("", 0)))
        for d, op in keys:
            dom = opsets.normalize_domain(d)
            if dom == "" and op in special:
                continue
            key = (dom, op, ops.get(dom, 0))
            if key not in seen:
                seen.add(key)
                found.update(_free_output_types(*key))

    scan(model.graph.node, model_opsets(model), model.graph)
    for f in model.functions:
        scan(f.node, function_opsets(model, f), None)
    found |= {opsets.tensor_type(t) for t in elems if t}
    return frozenset(found)
