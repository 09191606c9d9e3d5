"""Exact opset conversion: ``convert_proto`` (the in-place core), ``convert`` and
``ConvertOpsetPass``.

PRelu, LeakyRelu and Selu are converted here with the adapters that
:mod:`opshift.passes.activation_table` derives from the schemas; every other default-domain
op is handed to :func:`opshift.passes.other_ops.convert_other_ops` with the activations
shielded. The core edits the ``onnx.ModelProto`` in place and touches only the nodes that
change; shape inference runs only when a PRelu slope needs X's rank, type resolution only
when a target opset drops a type the source allowed.

Types a target version does not allow (decided from ``onnx.defs``):

* bfloat16 (PRelu < 16, LeakyRelu < 16, Selu < 22): computed in float32 between Casts, with
  alpha/gamma rounded to bfloat16 first (the ops' function bodies CastLike them to X's type),
  so PRelu/LeakyRelu give the same bits; Selu is within one bfloat16 ulp of the exact value.
  Cast has no bfloat16 before opset 13: a ConversionError naming the node.
* PRelu int32/int64 at opsets 6..8: ``x + (x < 0) * (slope * x - x)`` in the integer type
  (the sign test through float: int -> float rounding never changes a sign), which wraps
  exactly like PRelu's own product for every value. At opset 6 Mul places the slope with
  its legacy ``broadcast``/``axis`` attributes (refused when they cannot express it).
* PRelu int32/int64 below 6: no op does integer arithmetic there, and float64 cannot
  reproduce integer products exactly (beyond 2**53, and where they wrap): refused with a
  ConversionError naming the node.
* PRelu of unsigned integers (never negative) becomes Identity.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from .. import opsets
from ..broadcast import SlopeClass, SlopeRule, classify, slope_shape_for
from ..errors import ArgumentTypeError, ConversionError, EvaluationError, OpshiftError, where
from ..modelio import ModelLike, from_proto, to_proto
from ._graph import (
    Names,
    Scope,
    iter_scopes,
    lazy_attribute,
    may_hold_subgraphs,
    node_label,
    run_as_ir_pass,
    static_shapes,
    subgraphs,
)
from .activation_table import MEANINGLESS_ATTRIBUTES, Adapter, plan
from .casts import RANGE_LIMITED, exact_compute_type, wrap_in_casts
from .other_ops import convert_other_ops, other_ops_change

ACTIVATIONS = opsets.ACTIVATIONS



@dataclass(slots=True)
class Region:
    """A recorded rewrite, for local verification: the original node, its replacement
    nodes, the opsets before and after, the node's value infos and the constants read."""

    before: list[onnx.NodeProto]
    after: list[onnx.NodeProto]
    source_opsets: dict[str, int]
    target_opsets: dict[str, int]
    before_constants: dict[str, onnx.TensorProto]
    after_constants: dict[str, onnx.TensorProto]
    inputs: list[onnx.ValueInfoProto]
    outputs: list[onnx.ValueInfoProto]


@dataclass(slots=True)
class Change:
    """One rewrite: which node, what was done, why (``region`` only when recorded)."""

    node: str
    op: str
    scope: str
    what: str
    why: str
    region: Region | None = field(default=None, repr=False)

    def region_models(self) -> tuple[onnx.ModelProto, onnx.ModelProto] | None:
        """(before, after) models of just this rewrite, or None if it was not recorded."""
        r = self.region
        if r is None:
            return None
        from ..verify import region_model

        return (region_model(r.before, r.inputs, r.outputs, r.before_constants.values(),
                             r.source_opsets),
                region_model(r.after, r.inputs, r.outputs, r.after_constants.values(),
                             r.target_opsets))

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "op": self.op, "scope": self.scope, "what": self.what,
                "why": self.why}


@dataclass
class ConvertResult:
    """What :func:`convert_proto` did: opsets, IR versions, and one :class:`Change` per
    rewritten or relabelled node (activations and, from other_ops, every other op)."""

    source_opset: int
    target_opset: int
    activation_changes: list[Change] = field(default_factory=list)
    ir_version: tuple[int, int] = (0, 0)
    #: other_ops' own change records, turned into :class:`Change` on first use of .changes
    other_changes: list[Any] = field(default_factory=list, repr=False)
    _changes: list[Change] | None = field(default=None, repr=False)

    @property
    def changes(self) -> list[Change]:
        """Every changed node: other ops (from other_ops) first, then the activations."""
        if self._changes is None:
            self._changes = [Change(node=c.node, op=f"{c.op}-{c.from_version}->{c.to_version}",
                                    scope=c.scope, what=c.action, why=c.reason)
                             for c in self.other_changes] + self.activation_changes
        return self._changes

    @property
    def modified(self) -> bool:
        return (self.source_opset != self.target_opset or bool(self.other_changes)
                or bool(self.activation_changes) or self.ir_version[0] != self.ir_version[1])

    def to_dict(self) -> dict[str, Any]:
        return {"source_opset": self.source_opset, "target_opset": self.target_opset,
                "ir_version": list(self.ir_version),
                "changes": [c.to_dict() for c in self.changes]}


# ---------------------------------------------------------------------------------------------
# model-wide facts, computed lazily and at most once
# ---------------------------------------------------------------------------------------------
class _Facts:
    """Shapes, element types, producers and use counts of values, each computed on demand."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self._shapes: dict[str, tuple] | None = None
        self._types: dict[str, int] | None = None
        self._inferred_types = False
        self._forwarded = False
        self._possible: frozenset[str] | None = None
        #: (scope, constant, new shape) -> name of the reshaped copy already made
        self.reshaped: dict[tuple, str] = {}
        self._uses: dict[str, int] | None = None
        self._names: Names | None = None

    @property
    def names(self) -> Names:
        if self._names is None:
            self._names = Names(self.model)
        return self._names

    def shape(self, name: str) -> tuple | None:
        if self._shapes is None:
            self._shapes = static_shapes(self.model)
        return self._shapes.get(name)

    def _declared_types(self) -> dict[str, int]:
        types: dict[str, int] = {}

        def take(vis) -> None:
            for vi in vis:
                if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                    types[vi.name] = vi.type.tensor_type.elem_type

        def graph(g: onnx.GraphProto) -> None:
            take(g.input)
            take(g.output)
            take(g.value_info)
            for t in g.initializer:
                types[t.name] = t.data_type
            for n in g.node:
                if n.op_type == "Constant" and n.attribute and n.attribute[0].type == 4:
                    types[n.output[0]] = n.attribute[0].t.data_type
                for _, sg in subgraphs(n):
                    graph(sg)

        graph(self.model.graph)
        for f in self.model.functions:
            take(getattr(f, "value_info", ()))
        return types

    def elem_type(self, name: str) -> int | None:
        """Element type of ``name``: declared, else propagated through the producing nodes'
        schema type parameters, else from onnx type inference."""
        if self._types is None:
            self._types = self._declared_types()
        t = self._types.get(name)
        if t is None and not self._forwarded:
            self._forwarded = True
            self._forward()
            t = self._types.get(name)
        if t is None and not self._inferred_types:
            self._inferred_types = True
            m = onnx.ModelProto()
            m.CopyFrom(self.model)
            try:
                m = onnx.shape_inference.infer_shapes(m, strict_mode=False)
            except Exception:  # best effort: unknown stays unknown
                return None
            for vi in list(m.graph.value_info) + list(m.graph.output):
                if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                    self._types.setdefault(vi.name, vi.type.tensor_type.elem_type)
            t = self._types.get(name)
        return t

    def possible_types(self) -> frozenset[str]:
        """Every element type (as 'tensor(...)') any value of the model could have: declared
        ones, constants, Cast targets, and all allowed types of outputs whose type no input
        binds. One pass over each node list (subgraphs found from that pass)."""
        if self._possible is None:
            elems: set[int] = set()
            found: set[str] = set()
            seen: set[tuple[str, str, int]] = set()

            def scan(nodes, ops: dict[str, int], graph: onnx.GraphProto | None) -> None:
                if graph is not None:
                    for vi in (*graph.input, *graph.output, *graph.value_info):
                        if vi.type.HasField("tensor_type"):
                            elems.add(vi.type.tensor_type.elem_type)
                    elems.update(t.data_type for t in graph.initializer)
                keys = {(n.domain, n.op_type) for n in nodes}
                default_ops = {o for d, o in keys if d in ("", "ai.onnx")}
                special = default_ops & {"Cast", "Constant"}
                holders = {o for d, o in keys if may_hold_subgraphs(d, o)}
                if special or holders:
                    for n in nodes:
                        op = n.op_type
                        if op in holders:
                            for _, sg in subgraphs(n):
                                scan(sg.node, ops, sg)
                        if op not in special or n.domain not in ("", "ai.onnx"):
                            continue
                        if op == "Cast":
                            elems.add(_output_type_from_schema(n, ops, 0, lambda _n: None)
                                      or 0)
                        elif n.attribute and n.attribute[0].type == 4:
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

            from ._graph import function_opsets, model_opsets

            scan(self.model.graph.node, model_opsets(self.model), self.model.graph)
            for f in self.model.functions:
                scan(f.node, function_opsets(self.model, f), None)
            found |= {f"tensor({opsets.tensor_type_name(t)})" for t in elems if t}
            self._possible = frozenset(found)
        return self._possible

    def _forward(self) -> None:
        """One pass over every scope in order (nodes are topologically sorted), typing each
        output from its node's schema: the output's type parameter is bound by an input."""
        types = self._types
        assert types is not None
        local = {(f.domain, f.name): f for f in self.model.functions}
        for _ in range(1 + len(local)):  # calls of functions typed by their bodies: repeat
            before = len(types)
            for sc in iter_scopes(self.model):
                if sc.function is not None and sc.owner is None:
                    for name in sc.function.input:
                        if name not in types:
                            t = self._from_call_sites(sc.function, name)
                            if t is not None:
                                types[name] = t
                for n in sc.nodes:
                    f = local.get((n.domain, n.op_type))
                    for k, o in enumerate(n.output):
                        if not o or o in types:
                            continue
                        if f is not None:
                            t = types.get(f.output[k]) if k < len(f.output) else None
                        else:
                            t = _output_type_from_schema(n, sc.opsets, k, types.get)
                        if t is not None:
                            types[o] = t
            if len(types) == before or not local:
                break

    def _from_call_sites(self, f: onnx.FunctionProto, name: str) -> int | None:
        """A function input's type: the one type every call of the function passes in."""
        assert self._types is not None
        k = list(f.input).index(name)
        found: set[int | None] = set()
        for sc in iter_scopes(self.model):
            for n in sc.nodes:
                if (n.op_type == f.name and n.domain == f.domain and len(n.input) > k
                        and n.input[k]):
                    found.add(self._types.get(n.input[k]))
        return found.pop() if len(found) == 1 else None

    def uses(self, name: str) -> int:
        """How many node inputs (anywhere in the model) and graph outputs read ``name``."""
        if self._uses is None:
            uses: dict[str, int] = {}

            def graph(g: onnx.GraphProto) -> None:
                for o in g.output:
                    uses[o.name] = uses.get(o.name, 0) + 1
                nodes(g.node)

            def nodes(ns) -> None:
                for n in ns:
                    for i in n.input:
                        uses[i] = uses.get(i, 0) + 1
                    for _, sg in subgraphs(n):
                        graph(sg)

            graph(self.model.graph)
            for f in self.model.functions:
                for o in f.output:
                    uses[o] = uses.get(o, 0) + 1
                nodes(f.node)
            self._uses = uses
        return self._uses.get(name, 0)

    def add_use(self, name: str, n: int) -> None:
        if self._uses is not None:
            self._uses[name] = self._uses.get(name, 0) + n


@functools.cache
def _free_output_types(domain: str, op: str, opset: int) -> frozenset[str]:
    """Types an op can output that none of its inputs determines (Shape -> int64, Cast-like
    ops, ...); everything if the op is unknown (a local function, another domain)."""
    s = opsets.schema(op, opset, domain) if opset else None
    if s is None:
        return _ALL_TYPES
    allowed = {tc.type_param_str: frozenset(tc.allowed_type_strs) for tc in s.type_constraints}
    bound = {p.type_str for p in s.inputs}
    out: set[str] = set()
    for p in s.outputs:
        if p.type_str.startswith("tensor("):
            out.add(p.type_str)
        elif p.type_str not in bound:
            out |= allowed.get(p.type_str, _ALL_TYPES)
    return frozenset(out)


_ALL_TYPES = frozenset(f"tensor({opsets.tensor_type_name(t)})"
                       for t in onnx.TensorProto.DataType.values() if t)


def _output_type_from_schema(node: onnx.NodeProto, ops: dict[str, int], index: int,
                             type_of: Callable[[str], int | None]) -> int | None:
    domain = opsets.normalize_domain(node.domain)
    if domain == "" and node.op_type == "Cast":
        for a in node.attribute:
            if a.name == "to":
                if a.type == onnx.AttributeProto.INT:
                    return a.i
                return TensorProto.DataType.Value(a.s.decode())
        return None
    opset = ops.get(domain)
    s = opsets.schema(node.op_type, opset, domain) if opset is not None else None
    if s is None or not s.outputs:
        return None
    out = s.outputs[min(index, len(s.outputs) - 1)]
    ts = out.type_str
    if ts.startswith("tensor("):
        try:
            return TensorProto.DataType.Value(ts[7:-1].upper())
        except ValueError:
            return None
    for i, p in enumerate(s.inputs):
        if p.type_str == ts:
            # variadic: any present input of that parameter
            cands = node.input[i:] if p.option == onnx.defs.OpSchema.FormalParameterOption.\
                Variadic else node.input[i:i + 1]
            for c in cands:
                if c:
                    t = type_of(c)
                    if t is not None:
                        return t
    return None


# ---------------------------------------------------------------------------------------------
# one activation node
# ---------------------------------------------------------------------------------------------
@dataclass
class _Ctx:
    model: onnx.ModelProto
    facts: _Facts
    scope: Scope
    target: int
    base_dir: Any = None
    _consts: dict[str, onnx.TensorProto] | None = None

    def constant(self, name: str) -> onnx.TensorProto | None:
        """The constant tensor (initializer or Constant node of this scope) named ``name``,
        from an index built once per scope."""
        if self._consts is None:
            self._consts = _scope_constants(self.scope, self.model.ir_version)
        return self._consts.get(name)

    def add_constant(self, name: str, tensor: onnx.TensorProto) -> None:
        if self._consts is not None:
            self._consts[name] = tensor


def _label(node: onnx.NodeProto, op: str, version: int, scope: Scope) -> str:
    return f"{where(node, op=op, version=version)} in {scope.label}"


def _attr(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    for a in node.attribute:
        if a.name == name:
            return a
    return None


def _drop_attributes(node, op, vs, vt, ctx, notes) -> None:
    for name in sorted(opsets.attribute_names(op, vs) - opsets.attribute_names(op, vt)):
        a = _attr(node, name)
        if a is None:
            continue
        if name not in MEANINGLESS_ATTRIBUTES:
            raise ConversionError(f"{_label(node, op, vs, ctx.scope)}: attribute {name!r} "
                                  f"does not exist in {op}-{vt} and cannot be dropped exactly")
        node.attribute.remove(a)
        notes.append((f"dropped {name}", f"{op}-{vt} does not define {name!r} (a legacy hint "
                                         "without effect on the numbers)"))


def _materialize_defaults(node, op, vs, vt, ctx, notes) -> None:
    ds, dt = opsets.attribute_defaults(op, vs), opsets.attribute_defaults(op, vt)
    for name in sorted(opsets.attribute_names(op, vs) & opsets.attribute_names(op, vt)):
        if _attr(node, name) is not None or name not in ds:
            continue
        v, w = ds[name], dt.get(name)
        if w is not None and np.float32(v) == np.float32(w):
            continue
        node.attribute.append(helper.make_attribute(name, v))
        notes.append((f"{name}={v!r} written explicitly",
                      f"the default of {name} is {v!r} in {op}-{vs} but {w!r} in {op}-{vt}"))


def _slope_info(node, ctx) -> tuple[tuple | None, onnx.TensorProto | None]:
    """(shape of the slope or None, its constant TensorProto or None)."""
    name = node.input[1]
    const = ctx.constant(name)
    if const is not None:
        return tuple(const.dims), const
    return ctx.facts.shape(name), None


def _scope_constants(scope: Scope, ir_version: int) -> dict[str, onnx.TensorProto]:
    """Initializers (not overridable ones: from IR 4 an initializer that is also a graph
    input can be fed) and Constant(value=...) outputs of ``scope``."""
    out: dict[str, onnx.TensorProto] = {}
    if scope.graph is not None:
        fed = {i.name for i in scope.graph.input} if ir_version >= 4 else set()
        for t in scope.graph.initializer:
            if t.name not in fed:
                out[t.name] = t
    for n in scope.nodes:
        if (n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output
                and len(n.attribute) == 1 and n.attribute[0].name == "value"):
            out[n.output[0]] = n.attribute[0].t
    return out


def _is_graph_io(scope: Scope, name: str) -> bool:
    if scope.graph is not None:
        return any(o.name == name for o in scope.graph.output)
    if scope.function is not None:
        return name in scope.function.output
    return False


def _reshape_constant(node, ctx, tensor: onnx.TensorProto, new_shape: tuple[int, ...],
                      prefix: list[onnx.NodeProto]) -> str:
    """Make input 1 of ``node`` a constant of ``new_shape`` with the same data: edit the
    tensor's dims when ``node`` is its only reader, else add a copy."""
    name = node.input[1]
    if ctx.facts.uses(name) == 1 and not _is_graph_io(ctx.scope, name):
        del tensor.dims[:]
        tensor.dims.extend(new_shape)
        if ctx.scope.graph is not None:  # (IR < 4: also a graph input), value_info
            for vi in (*ctx.scope.graph.input, *ctx.scope.graph.value_info):
                if vi.name == name and vi.type.HasField("tensor_type"):
                    vi.type.tensor_type.ClearField("shape")
                    vi.type.tensor_type.shape.SetInParent()
                    for d in new_shape:
                        vi.type.tensor_type.shape.dim.add().dim_value = d
        return f"slope {name!r} reshaped in place to {list(new_shape)}"
    key = (id(ctx.scope.nodes), name, tuple(new_shape))
    reused = ctx.facts.reshaped.get(key)
    if reused is not None:  # another reader already got this reshaped copy
        node.input[1] = reused
        ctx.facts.add_use(name, -1)
        return f"slope {name!r} read as {reused!r} with shape {list(new_shape)}"
    new = TensorProto()
    new.CopyFrom(tensor)
    new_name = ctx.facts.names.fresh(f"{name}_{'x'.join(map(str, new_shape)) or 'scalar'}")
    new.name = new_name
    del new.dims[:]
    new.dims.extend(new_shape)
    ctx.add_constant(new_name, new)
    if ctx.scope.graph is not None:
        ctx.scope.graph.initializer.append(new)
        if ctx.model.ir_version < 4 or ctx.target < 9:
            ctx.scope.graph.input.append(helper.make_tensor_value_info(
                new_name, new.data_type, list(new_shape)))
    else:
        prefix.append(helper.make_node("Constant", [], [new_name],
                                       name=ctx.facts.names.fresh(f"{new_name}/const"),
                                       value=new))
    node.input[1] = new_name
    ctx.facts.add_use(name, -1)
    ctx.facts.reshaped[key] = new_name
    return (f"slope {name!r} copied to {new_name!r} with shape {list(new_shape)} "
            f"({name!r} has other readers)")


def _axes_node(op: str, inp: str, out: str, axes: list[int], opset: int,
               ctx) -> list[onnx.NodeProto]:
    """Unsqueeze/Squeeze of ``axes`` valid at ``opset`` (axes attribute before 13, input
    from 13 on)."""
    v = opsets.since_version(op, opset)
    name = ctx.facts.names.fresh(f"{out}/{op.lower()}")
    if v is not None and v >= 13:
        axes_name = ctx.facts.names.fresh(f"{out}/axes")
        c = helper.make_node("Constant", [], [axes_name], name=ctx.facts.names.fresh(
            f"{out}/axes_const"), value=helper.make_tensor(axes_name, TensorProto.INT64,
                                                           [len(axes)], axes))
        return [c, helper.make_node(op, [inp, axes_name], [out], name=name)]
    return [helper.make_node(op, [inp], [out], name=name, axes=axes)]


def _unsqueeze(inp: str, out: str, axes: list[int], opset: int, ctx) -> list[onnx.NodeProto]:
    return _axes_node("Unsqueeze", inp, out, axes, opset, ctx)


def _squeeze(inp: str, out: str, axes: list[int], opset: int, ctx) -> list[onnx.NodeProto]:
    return _axes_node("Squeeze", inp, out, axes, opset, ctx)


def _known_int(d) -> bool:
    return isinstance(d, int) and not isinstance(d, bool)


def _slope_to_numpy(node, op, vs, vt, ctx, notes, prefix) -> None:
    """Legacy (<= 6) -> numpy (>= 7): a per-channel [C] slope becomes [C, 1, ..., 1]."""
    label = _label(node, op, vs, ctx.scope)
    s_shape, const = _slope_info(node, ctx)
    if s_shape is None:
        raise ConversionError(f"{label}: the shape of slope {node.input[1]!r} is unknown, so "
                              f"its legacy per-channel broadcasting cannot be carried to "
                              f"PRelu-{vt}")
    size = int(np.prod(s_shape)) if all(_known_int(d) for d in s_shape) else None
    if size == 1 and len(s_shape) <= 1:
        return  # shared slope: same under both rules
    x_shape = ctx.facts.shape(node.input[0])
    if size == 1:
        if x_shape is not None and len(x_shape) >= len(s_shape):
            return
        if const is not None:
            notes.append((_reshape_constant(node, ctx, const, (), prefix),
                          "a size-1 slope is shared; numpy broadcasting needs rank <= X's"))
            return
        raise ConversionError(f"{label}: the rank of X is unknown; cannot tell whether the "
                              f"size-1 slope of rank {len(s_shape)} broadcasts at PRelu-{vt}")
    if len(s_shape) != 1:
        return  # legacy PRelu reads multi-dimensional slopes numpy-style already
    if x_shape is None:
        raise ConversionError(f"{label}: the rank of X {node.input[0]!r} is unknown, so "
                              f"whether slope {node.input[1]!r} is per-channel cannot be "
                              f"decided; give the model input shapes or run shape inference")
    r = len(x_shape)
    c = s_shape[0]
    if r < 3:
        return  # rank <= 2: axis 1 is the last axis (or numpy rules apply): no change
    x1, xl = x_shape[1], x_shape[-1]
    if _known_int(c) and _known_int(x1):
        per_channel = c == x1
    elif _known_int(c) and _known_int(xl) and xl != c:
        per_channel = True  # numpy broadcasting cannot apply, so legacy reads it per channel
    elif not _known_int(c) and c is not None and c == x1:
        per_channel = True
    else:
        raise ConversionError(f"{label}: cannot decide whether slope {node.input[1]!r} of "
                              f"shape {list(s_shape)} is per-channel for X of shape "
                              f"{list(x_shape)} (dims unknown)")
    if not per_channel:
        return  # legacy falls back to numpy broadcasting: same at PRelu-{vt}
    new_shape = (c,) + (1,) * (r - 2)
    why = (f"PRelu-{vs} applies a [C] slope per channel on axis 1; PRelu-{vt} broadcasts "
           "from the last axis")
    if const is not None:
        notes.append((_reshape_constant(node, ctx, const, new_shape, prefix), why))
        return
    out = ctx.facts.names.fresh(f"{node.input[1]}_per_channel")
    prefix.extend(_unsqueeze(node.input[1], out, list(range(1, r - 1)), ctx.target, ctx))
    notes.append((f"slope {node.input[1]!r} unsqueezed to [C{', 1' * (r - 2)}]", why))
    node.input[1] = out


def _slope_to_legacy(node, op, vs, vt, ctx, notes, prefix) -> None:
    """numpy (>= 7) -> legacy (<= 6): make legacy's per-channel rule read the slope the same
    way numpy broadcasting does; [C,1,...,1] becomes the canonical legacy [C]."""
    label = _label(node, op, vs, ctx.scope)
    s_shape, const = _slope_info(node, ctx)
    if s_shape is None:
        raise ConversionError(f"{label}: the shape of slope {node.input[1]!r} is unknown; "
                              f"legacy PRelu-{vt} per-channel broadcasting could misread it")
    known = all(_known_int(d) for d in s_shape)
    if known and int(np.prod(s_shape)) == 1:
        return  # shared: legacy and numpy agree
    x_shape = ctx.facts.shape(node.input[0])
    if x_shape is None:
        if len(s_shape) >= 2:
            return  # legacy reads multi-dimensional slopes numpy-style
        raise ConversionError(f"{label}: the rank of X {node.input[0]!r} is unknown, so "
                              f"whether legacy PRelu-{vt} would read slope "
                              f"{node.input[1]!r} per channel cannot be decided")
    r = len(x_shape)
    try:
        np_shape = slope_shape_for(x_shape, s_shape, SlopeRule.NUMPY)
    except EvaluationError as e:
        raise ConversionError(f"{label}: {e}") from None
    why = f"PRelu-{vt} reads a [C] slope per channel on axis 1 when C equals X's dim 1"
    try:
        legacy_shape = slope_shape_for(x_shape, s_shape, SlopeRule.LEGACY)
    except EvaluationError:
        legacy_shape = None
    if len(s_shape) >= 2 and r >= 3 and classify(x_shape, s_shape, SlopeRule.NUMPY) is \
            SlopeClass.CHANNEL_AXIS1 and len(s_shape) >= r - 1:
        # canonical legacy form [C] (legacy PRelu also accepts [C,1,..,1] numpy-style, but
        # runtimes written for opset <= 6 expect the per-channel vector)
        c = np_shape[1]
        if _known_int(c) and _known_int(x_shape[1]) and c == x_shape[1]:
            if const is not None:
                notes.append((_reshape_constant(node, ctx, const, (c,), prefix),
                              f"PRelu-{vt}'s per-channel form of a [C,1,...,1] slope is [C]"))
                return
            axes = [i for i in range(len(s_shape)) if i != len(s_shape) - (r - 1)]
            out = ctx.facts.names.fresh(f"{node.input[1]}_per_channel")
            prefix.extend(_squeeze(node.input[1], out, axes, ctx.target, ctx))
            notes.append((f"slope {node.input[1]!r} squeezed to [C]",
                          f"PRelu-{vt}'s per-channel form of a [C,1,...,1] slope is [C]"))
            node.input[1] = out
            return
    if legacy_shape is not None and tuple(legacy_shape) == tuple(np_shape) and \
            not (len(s_shape) == 1 and r >= 3 and not _known_int(x_shape[1])):
        return
    if len(s_shape) == 1 and r >= 2:
        # [C] on the last axis: as [1, C] legacy PRelu broadcasts it numpy-style
        if const is not None:
            notes.append((_reshape_constant(node, ctx, const, (1,) + tuple(s_shape), prefix),
                          why + "; as [1, C] it broadcasts from the last axis"))
            return
        out = ctx.facts.names.fresh(f"{node.input[1]}_last_axis")
        prefix.extend(_unsqueeze(node.input[1], out, [0], ctx.target, ctx))
        notes.append((f"slope {node.input[1]!r} unsqueezed to [1, C]",
                      why + "; as [1, C] it broadcasts from the last axis"))
        node.input[1] = out
        return
    raise ConversionError(f"{label}: slope of shape {list(s_shape)} for X of shape "
                          f"{list(x_shape)} cannot be expressed by PRelu-{vt}")


def _round_attrs_to(node, op, vt, elem_type: int, notes) -> None:
    """LeakyRelu/Selu cast alpha/gamma to X's type (CastLike in their function bodies);
    computing in a wider type must use the same rounded values."""
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    defaults = opsets.attribute_defaults(op, vt)
    for name in sorted(opsets.attribute_names(op, vt)):
        a = _attr(node, name)
        if a is not None and a.type != onnx.AttributeProto.FLOAT:
            continue
        v = a.f if a is not None else defaults.get(name)
        if not isinstance(v, float):
            continue
        r = float(np.asarray(np.float32(v)).astype(dtype).astype(np.float32))
        if a is None:
            node.attribute.append(helper.make_attribute(name, r))
        elif np.float32(r) != np.float32(a.f):
            a.f = r
        else:
            continue
        notes.append((f"{name} rounded to {opsets.tensor_type_name(elem_type)} ({r!r})",
                      f"{op} casts {name} to X's type; the wider compute type must use the "
                      "same value"))


def _types_may_drop(op: str, vs: int, vt: int, facts: _Facts) -> bool:
    """Some value of the model could have a type ``op``-``vs`` allows and ``op``-``vt`` not."""
    dropped = opsets.allowed_types(op, vs) - opsets.allowed_types(op, vt)
    return bool(dropped & facts.possible_types())


def _cast_types(node, op, vs, vt, ctx, notes, prefix, index) -> list[onnx.NodeProto] | None:
    allowed = opsets.allowed_types(op, vt)
    if not _types_may_drop(op, vs, vt, ctx.facts):
        return None  # no value in the model can have a type the target drops
    label = _label(node, op, vs, ctx.scope)
    elem = ctx.facts.elem_type(node.input[0])
    if elem is None:
        raise ConversionError(f"{label}: the element type of X {node.input[0]!r} is unknown, "
                              f"and {op}-{vt} allows fewer types than {op}-{vs}")
    tname = opsets.tensor_type_name(elem)
    if f"tensor({tname})" in allowed:
        return None
    if op == "PRelu" and elem in (TensorProto.UINT32, TensorProto.UINT64, TensorProto.UINT8,
                                  TensorProto.UINT16):
        # unsigned X is never negative: PRelu is the identity
        ident = helper.make_node("Identity", [node.input[0]], list(node.output),
                                 name=node.name or ctx.facts.names.fresh(
                                     f"{node_label(node, index)}/identity"))
        notes.append(("replaced by Identity", f"{op}-{vt} does not allow {tname}; unsigned "
                                              "X is never negative, so PRelu returns X"))
        return [ident]
    if op == "PRelu" and elem in (TensorProto.INT32, TensorProto.INT64):
        if ctx.target < 6:
            raise ConversionError(
                f"{label}: {op}-{vt} does not allow {tname}, and opset {ctx.target} has no "
                f"integer arithmetic (Mul/Add take integers from opset 6); float64 cannot "
                f"reproduce {tname} products exactly (beyond 2**53, and where they wrap), so "
                "the node is not converted")
        nodes = _prelu_integer(node, ctx, elem, index, label)
        notes.append(("decomposed into integer Mul/Sub/Add with a sign mask",
                      f"{op}-{vt} does not allow {tname}; x + (x < 0) * (slope * x - x) in "
                      f"{tname} wraps exactly like PRelu's own product, for every value"))
        return nodes
    compute = exact_compute_type(elem, allowed, ctx.target)
    if compute is None:
        raise ConversionError(f"{label}: {op}-{vt} does not allow {tname}, and opset "
                              f"{ctx.target} has no exact wider type it can Cast to and back "
                              f"(bfloat16 Cast needs opset >= 13)")
    if elem in RANGE_LIMITED:
        raise ConversionError(f"{label}: {op}-{vt} does not allow {tname}; float64 holds "
                              f"{tname} values exactly only up to 2**53 in magnitude, which "
                              f"cannot be proven for this node, so it is not converted")
    if op in ("LeakyRelu", "Selu"):
        _round_attrs_to(node, op, vt, elem, notes)
    base = node.name or node_label(node, index)
    nodes = wrap_in_casts(node, compute, ctx.facts.names, base, elem_type=elem,
                          opset=ctx.target)
    notes.append((f"computed in {opsets.tensor_type_name(compute)} between Casts",
                  f"{op}-{vt} does not allow {tname}; {opsets.tensor_type_name(compute)} holds "
                  "every value exactly"))
    return nodes


def _legacy_mul_attrs(node, ctx, label: str) -> dict[str, int]:
    """``broadcast``/``axis`` for an opset-6 ``Mul(x, slope)`` that places the slope as
    legacy PRelu does; ConversionError when legacy Mul cannot express that placement."""
    s_shape, _ = _slope_info(node, ctx)
    x_shape = ctx.facts.shape(node.input[0])
    if s_shape is None or x_shape is None:
        raise ConversionError(f"{label}: shapes of X and slope are needed to express the "
                              "slope broadcast with opset-6 Mul, and they are unknown")
    if all(_known_int(d) for d in s_shape) and int(np.prod(s_shape)) == 1:
        return {"broadcast": 1}
    if tuple(s_shape) == tuple(x_shape):
        return {}
    try:
        placed = slope_shape_for(x_shape, s_shape, SlopeRule.LEGACY)
    except EvaluationError as e:
        raise ConversionError(f"{label}: {e}") from None
    r, k = len(x_shape), len(s_shape)
    axis = 1 if (k == 1 and r >= 2 and placed[1] == s_shape[0] and s_shape[0] != 1) else r - k
    if tuple(x_shape[axis:axis + k]) == tuple(s_shape):
        return {"broadcast": 1, "axis": axis}
    raise ConversionError(f"{label}: slope of shape {list(s_shape)} for X of shape "
                          f"{list(x_shape)} cannot be placed by opset-6 Mul broadcasting")


def _prelu_integer(node, ctx, elem: int, index: int, label: str) -> list[onnx.NodeProto]:
    """``y = x + Cast(Less(Cast(x, float), 0), T) * (slope * x - x)``, valid at opsets 6..8.

    Only the sign of x goes through float (int -> float rounding never changes a sign); the
    arithmetic stays in the integer type, so the result is PRelu's own integer product. At
    opset 6 the binary ops broadcast by their ``broadcast``/``axis`` attributes.
    """
    legacy = ctx.target < 7
    mul_attrs = _legacy_mul_attrs(node, ctx, label) if legacy else {}
    less_attrs = {"broadcast": 1} if legacy else {}
    names = ctx.facts.names
    base = node.name or node_label(node, index)
    x, slope = node.input[0], node.input[1]
    y = node.output[0]

    def v(s: str) -> str:
        return names.fresh(f"{base}/{s}")

    xf, zero, neg, mask, sx, d, md = (v("x_float"), v("zero"), v("is_negative"), v("mask"),
                                      v("slope_x"), v("slope_x_minus_x"), v("masked"))
    return [
        helper.make_node("Cast", [x], [xf], name=v("cast_sign"), to=TensorProto.FLOAT),
        helper.make_node("Constant", [], [zero], name=v("zero_const"),
                         value=helper.make_tensor(zero, TensorProto.FLOAT, [], [0.0])),
        helper.make_node("Less", [xf, zero], [neg], name=v("less"), **less_attrs),
        helper.make_node("Cast", [neg], [mask], name=v("cast_mask"), to=elem),
        helper.make_node("Mul", [x, slope], [sx], name=v("mul_slope"), **mul_attrs),
        helper.make_node("Sub", [sx, x], [d], name=v("sub")),
        helper.make_node("Mul", [mask, d], [md], name=v("mul_mask")),
        helper.make_node("Add", [x, md], [y], name=node.name or v("add")),
    ]


def _may_change(op: str, vs: int | None, vt: int | None, facts: _Facts) -> bool:
    """Whether some ``op`` node could need a rewrite going from version vs to vt (decided
    per op and scope, so unchanged nodes are not even looked at)."""
    if vs == vt:
        return False
    if vs is None or vt is None:
        return True  # _convert_node reports it
    adapters = plan(op, vs, vt)
    if adapters == (Adapter.CAST_TYPES,):
        return _types_may_drop(op, vs, vt, facts)
    return bool(adapters)


def _convert_node(node: onnx.NodeProto, index: int, ctx: _Ctx, source_opset: int
                  ) -> tuple[list[onnx.NodeProto] | None, list[tuple[str, str]]]:
    """Replacement nodes for ``node`` (None: unchanged or edited in place) and notes."""
    op = node.op_type
    vs = opsets.since_version(op, source_opset)
    vt = opsets.since_version(op, ctx.target)
    if vs is None:
        raise ConversionError(f"{where(node)} in {ctx.scope.label}: {op} does not exist at "
                              f"opset {source_opset}")
    if vt is None:
        raise ConversionError(f"{where(node, op=op, version=vs)} in {ctx.scope.label}: "
                              f"{op} does not exist at opset {ctx.target}")
    notes: list[tuple[str, str]] = []
    prefix: list[onnx.NodeProto] = []
    replaced: list[onnx.NodeProto] | None = None
    for adapter in plan(op, vs, vt):
        if adapter is Adapter.DROP_ATTRIBUTES:
            _drop_attributes(node, op, vs, vt, ctx, notes)
        elif adapter is Adapter.MATERIALIZE_DEFAULTS:
            _materialize_defaults(node, op, vs, vt, ctx, notes)
        elif adapter is Adapter.SLOPE_TO_NUMPY:
            _slope_to_numpy(node, op, vs, vt, ctx, notes, prefix)
        elif adapter is Adapter.SLOPE_TO_LEGACY:
            _slope_to_legacy(node, op, vs, vt, ctx, notes, prefix)
        elif adapter is Adapter.CAST_TYPES:
            replaced = _cast_types(node, op, vs, vt, ctx, notes, prefix, index)
    if prefix or replaced is not None:
        return prefix + (replaced if replaced is not None else [node]), notes
    return None, notes


# ---------------------------------------------------------------------------------------------
# the core
# ---------------------------------------------------------------------------------------------
def _check_target(target: int) -> None:
    if not isinstance(target, int) or isinstance(target, bool):
        raise ArgumentTypeError(f"opset must be an int, got {type(target).__name__} "
                                f"{target!r}")
    if not 1 <= target <= opsets.MAX_OPSET:
        raise OpshiftError(f"target opset {target!r} is outside 1..{opsets.MAX_OPSET} "
                           f"(the installed onnx {onnx.__version__})")


def _needed_ir(model: onnx.ModelProto, target: int) -> int:
    """The lowest IR version the converted model can declare."""
    others = [i for i in model.opset_import if opsets.normalize_domain(i.domain) != ""]
    ir = opsets.ir_version_for_opset(target)
    if others:
        ir = max(ir, helper.find_min_ir_version_for(others, ignore_unknown=True))
    if model.functions:
        ir = max(ir, 8)  # model-local functions exist since IR 8
    return ir


def _region_constants(ctx: _Ctx, nodes) -> dict[str, onnx.TensorProto]:
    out = {}
    local = {}
    for n in nodes:  # Constant nodes inside the region are part of it
        if n.op_type == "Constant" and n.output:
            local[n.output[0]] = True
    for n in nodes:
        for i in n.input:
            t = ctx.constant(i) if i and i not in local else None
            if t is None:
                continue
            if t.external_data:
                t = _loaded(t, ctx.base_dir)
                if t is None:
                    continue
            out[i] = copy.deepcopy(t)
    return out


_REGION_EXTERNAL_LIMIT = 64 << 20


def _loaded(t: onnx.TensorProto, base_dir) -> onnx.TensorProto | None:
    """A copy of external tensor ``t`` with its data read (from inside ``base_dir`` only),
    for a verification region; None when there is no folder or it is over 64 MiB."""
    from onnx import numpy_helper
    from onnx.external_data_helper import ExternalDataInfo

    from ..external import resolve_location

    info = ExternalDataInfo(t)
    if base_dir is None or (info.length or 0) > _REGION_EXTERNAL_LIMIT:
        return None
    from pathlib import Path

    resolve_location(Path(base_dir), info.location, "<model>", t.name)  # refuses escapes
    arr = numpy_helper.to_array(t, str(base_dir))
    if arr.nbytes > _REGION_EXTERNAL_LIMIT:
        return None
    return numpy_helper.from_array(arr, t.name)


def convert_proto(model: onnx.ModelProto, target: int, *, verbose_log=None,
                  record: bool = False, base_dir=None) -> ConvertResult:
    """Convert ``model`` to default-domain opset ``target`` in place.

    ``verbose_log(msg)`` (optional) is called with one line per decision. ``record`` keeps
    copies of each rewritten node and its replacement on the changes (for ``--verify``).
    Raises :class:`ConversionError` naming the node when a rewrite cannot be exact; the
    model is then partly converted, so callers that must not see that work on a copy.
    """
    _check_target(target)
    source = opsets.opset_of(model)
    if source is None:
        raise ConversionError("the model does not import the default (ai.onnx) domain; "
                              "nothing to convert")
    ir_before = model.ir_version
    result = ConvertResult(source, target, ir_version=(ir_before, ir_before))
    log = verbose_log or (lambda _msg: None)
    scopes_sources = {id(f): opsets.opset_of(f) for f in model.functions}
    if source == target and all(v in (None, target) for v in scopes_sources.values()):
        log(f"model is already at opset {target}: nothing to do")
        return result

    facts = _Facts(model)
    # Activation nodes, found before other ops are converted (their opsets are the sources).
    crosses_7 = any((v < 7) != (target < 7) for v in (source, *scopes_sources.values())
                    if v is not None)
    for sc in iter_scopes(model) if crosses_7 else ():
        src = sc.opsets.get("", source)
        if (src < 7) == (target < 7):
            continue
        if any(n.op_type == "PRelu" and opsets.normalize_domain(n.domain) == ""
               for n in sc.nodes):
            facts.shape("")  # slope rule changes: infer shapes on the unconverted model
            break

    if record:
        facts.shape("")  # the region models need the unconverted model's shapes
    if other_ops_change(model, source, target, skip=ACTIVATIONS):
        result.other_changes = convert_other_ops(model, source, target, skip=ACTIVATIONS)
        if verbose_log is not None:
            for c in result.other_changes:
                log(f"{c.scope}: {c.node} ({c.op}-{c.from_version}->{c.to_version}): "
                    f"{c.action} -- {c.reason}")

    sources = {source, *(v for v in scopes_sources.values() if v is not None)}
    any_change = any(_may_change(op, opsets.since_version(op, s),
                                 opsets.since_version(op, target), facts)
                     for s in sources for op in ACTIVATIONS)
    for sc in iter_scopes(model) if any_change else ():
        src = sc.opsets.get("", source)
        if src == target:
            continue
        changing = frozenset(op for op in ACTIVATIONS
                             if _may_change(op, opsets.since_version(op, src),
                                            opsets.since_version(op, target), facts))
        if not changing:
            continue
        replacements: dict[int, list[onnx.NodeProto]] = {}
        ctx = _Ctx(model, facts, sc, target, base_dir)
        for i, n in enumerate(sc.nodes):
            if n.op_type not in changing or n.domain not in ("", "ai.onnx"):
                continue
            before = copy.deepcopy(n) if record else None
            consts = _region_constants(ctx, [n]) if record else {}
            vis = _value_infos(facts, n, consts) if record else ([], [])
            new, notes = _convert_node(n, i, ctx, src)
            if new is not None:
                replacements[i] = new
            if not notes:
                continue
            vs = opsets.since_version(n.op_type, src)
            vt = opsets.since_version(n.op_type, target)
            ch = Change(node=n.name or f"<{n.op_type} #{i}>", op=f"{n.op_type}-{vs}->{vt}",
                        scope=sc.label, what="; ".join(w for w, _ in notes),
                        why="; ".join(y for _, y in notes))
            if record:
                after = new if new is not None else [n]
                ch.region = Region([before], [copy.deepcopy(x) for x in after],
                                   dict(sc.opsets), {**sc.opsets, "": target}, consts,
                                   _region_constants(ctx, after), *vis)
            result.activation_changes.append(ch)
            log(f"{ch.scope}: {ch.node} ({ch.op}): {ch.what} -- {ch.why}")
        _splice(sc.nodes, replacements)

    _set_opsets(model, target)
    ir = _needed_ir(model, target)
    if target < source:
        model.ir_version = ir
    else:
        model.ir_version = max(model.ir_version, ir)
    if model.ir_version < 4:
        _initializers_as_inputs(model)
    result.ir_version = (ir_before, model.ir_version)
    if ir_before != model.ir_version:
        log(f"IR version {ir_before} -> {model.ir_version}")
    return result


def _value_infos(facts: _Facts, node: onnx.NodeProto, consts
                 ) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    """Declared types and shapes of a node's non-constant inputs and its outputs."""

    def vi(name: str) -> onnx.ValueInfoProto:
        elem = facts.elem_type(name) or TensorProto.FLOAT
        shape = facts.shape(name)
        return helper.make_tensor_value_info(
            name, elem, None if shape is None else [d if d is not None else "?"
                                                    for d in shape])

    ins = [vi(i) for i in dict.fromkeys(node.input) if i and i not in consts]
    return ins, [vi(o) for o in node.output if o]


def _initializers_as_inputs(model: onnx.ModelProto) -> None:
    """IR < 4 requires every initializer to be listed among the graph inputs."""

    def graph(g: onnx.GraphProto) -> None:
        have = {i.name for i in g.input}
        for t in g.initializer:
            if t.name not in have:
                g.input.append(helper.make_tensor_value_info(t.name, t.data_type,
                                                             list(t.dims)))
        for n in g.node:
            for _, sg in subgraphs(n):
                graph(sg)

    graph(model.graph)


def _splice(nodes, replacements: dict[int, list[onnx.NodeProto]]) -> None:
    from ._graph import splice

    if replacements:
        # copies: the replacement lists hold the original node objects, which the
        # container rebuild would otherwise alias while deleting them
        splice(nodes, {i: [copy.deepcopy(x) for x in r] for i, r in replacements.items()})


def _set_opsets(model: onnx.ModelProto, target: int) -> None:
    for imp in model.opset_import:
        if opsets.normalize_domain(imp.domain) == "":
            imp.version = target
    for f in model.functions:
        for imp in f.opset_import:
            if opsets.normalize_domain(imp.domain) == "":
                imp.version = target


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def convert(model: ModelLike, opset: int, *, verbose_log=None) -> Any:
    """Convert ``model`` (ModelProto, onnx_ir.Model or path) to default-domain ``opset``.

    Returns the converted model of the same kind (a ModelProto for a path); the object
    passed in is not modified. Raises :class:`ConversionError` naming the node when some
    rewrite cannot be exact.
    """
    proto, kind, base_dir = to_proto(model)
    if kind == "proto":
        work = onnx.ModelProto()
        work.CopyFrom(proto)
    else:
        work = proto  # already a fresh proto (serialized or loaded)
    convert_proto(work, opset, verbose_log=verbose_log, base_dir=base_dir)
    return from_proto(work, "proto" if kind == "path" else kind)


def _make_pass_class():
    # onnx_ir (which imports sympy, ~1 s) is loaded only when the pass is asked for, so the
    # command line and convert() never pay for it
    from onnx_ir.passes import InPlacePass

    class ConvertOpsetPass(InPlacePass):
        """``onnx_ir`` pass converting a model to default-domain ``opset``: a thin adapter
        over :func:`convert_proto` (serialize once, convert, move the result into the given
        model object)."""

        def __init__(self, opset: int):
            super().__init__()
            _check_target(opset)
            self.opset = opset
            self.last_result: ConvertResult | None = None

        def call(self, model):
            self.last_result, out = run_as_ir_pass(
                model, lambda proto: convert_proto(proto, self.opset), _replace_model_contents)
            return out

    ConvertOpsetPass.__module__ = __name__
    ConvertOpsetPass.__qualname__ = "ConvertOpsetPass"
    return ConvertOpsetPass


__getattr__ = lazy_attribute(globals(), "ConvertOpsetPass", _make_pass_class)


def _replace_model_contents(model, new) -> None:
    """Make ``model`` (an onnx_ir.Model) hold ``new``'s graph, functions and versions, so
    the pass stays in place for the caller's object."""
    for slot in ("_functions", "graph", "ir_version", "doc_string", "domain", "model_version",
                 "producer_name", "producer_version", "_metadata_props"):
        setattr(model, slot, getattr(new, slot))
