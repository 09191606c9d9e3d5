"""Convert every default-domain op other than the activations between opsets, in place.

For each node whose schema version differs between the source and the target opset, the
conversion walks the op's schema versions one step at a time (up or down). A step is either

* listed in :data:`opshift.passes.other_ops_table.TABLE` -- its meaning changed in a way the
  schemas do not show (legacy broadcasting, attributes turned into inputs, coerced-2-D
  Softmax, negative axes, ...). The listed adapter rewrites the node exactly or refuses; or
* judged from the two ``onnx.defs`` schemas alone (:func:`_generic_step`): the node is
  unaffected when the schemas differ only in types the node does not use, attributes it
  does not set (or sets to the older default), optional inputs it does not use, and
  input/output counts it respects. Then nothing but the version in force changes.

Listed steps still go through the schema check after their adapter. A node that cannot be
converted exactly raises :class:`~opshift.errors.ConversionError` naming op, node, scope and
versions; nothing is written into the model until every node is planned, so a refusal leaves
the model untouched. The opset imports are left to the caller (call this before changing
them: each scope's source opset is read from its imports, falling back to ``source``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import opsets
from ..errors import ConversionError
from ._graph import Names, Scope, iter_scopes, node_label, splice, subgraphs

ACTIVATIONS = opsets.ACTIVATIONS

__all__ = ["ACTIVATIONS", "Change", "convert_other_ops", "other_ops_change"]


@dataclass
class Change:
    """One converted node: what was done and why."""

    node: str
    op: str
    scope: str
    from_version: int
    to_version: int
    action: str  # "relabel" (node unchanged) or "rewrite"
    reason: str


class Refuse(Exception):
    """Raised by a step that cannot be made exact; the caller adds the location."""


# --------------------------------------------------------------------------------------------
# What the unmodified model says about values: element types, shapes, constants.


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


def _constant_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
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


class _Uniform(dict):
    """Every value of the model has one element type."""

    def __init__(self, elem: int):
        super().__init__()
        self.elem = elem

    def get(self, name, default=None):
        return self.elem


def _uniform_types(model: onnx.ModelProto, source: int) -> _Uniform | None:
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
        if dom not in ("", "ai.onnx") or op in _CONTROL_FLOW or op == "Constant":
            return None
        rules = _output_type_rules(op, source)
        if not rules or any(r is None or r[0] != "input" for r in rules):
            return None
    return _Uniform(elems.pop())


_UNSET = object()
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


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
            if rules is None or op in _CONTROL_FLOW:
                for _, sg in subgraphs(n):
                    graph(sg, opset)
                if rules is None:
                    continue
            dom = n.domain
            if dom and dom != "ai.onnx":
                continue
            if op == "Constant":
                c = _constant_tensor(n)
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
            c = _constant_tensor(n)
            if c is not None:
                types[n.output[0]] = c.data_type
                shapes[n.output[0]] = tuple(c.dims)

    graph(m.graph)
    for f in m.functions:
        _take_value_infos(getattr(f, "value_info", ()), types, shapes)
    return types, shapes


# --------------------------------------------------------------------------------------------
# Per-node step context handed to the adapters.


@dataclass
class Step:
    """One version step of one node. Adapters read ``w`` and write through :meth:`edit`."""

    node: onnx.NodeProto  # the original node, never modified here
    op: str
    lo: int  # the older schema version of this step
    hi: int  # the newer one
    up: bool  # True: lo -> hi, False: hi -> lo
    conv: _Conversion
    scope: Scope
    index: int
    state: _NodeState

    @property
    def w(self) -> onnx.NodeProto:
        """The node as converted so far."""
        return self.state.work or self.node

    @property
    def src(self) -> int:
        return self.lo if self.up else self.hi

    @property
    def dst(self) -> int:
        return self.hi if self.up else self.lo

    def edit(self) -> onnx.NodeProto:
        """A writable copy of the node (made once per node)."""
        if self.state.work is None:
            if any(True for _ in subgraphs(self.node)):
                raise Refuse("a node holding subgraphs cannot be rewritten")
            w = onnx.NodeProto()
            w.CopyFrom(self.node)
            self.state.work = w
        return self.state.work

    def remove(self, why: str) -> None:
        """Replace the node by the nodes added before/after it (none: drop it)."""
        self.state.removed = True
        self.note(why)

    def note(self, what: str) -> None:
        self.state.notes.append(f"{self.op}-{self.src}->{self.dst}: {what}")

    # -- attributes
    def attr(self, name: str, default=None):
        for a in self.w.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def has_attr(self, name: str) -> bool:
        return any(a.name == name for a in self.w.attribute)

    def set_attr(self, name: str, value, attr_type: int | None = None) -> None:
        w = self.edit()
        self.del_attr(name)
        w.attribute.append(helper.make_attribute(name, value, attr_type=attr_type))

    def del_attr(self, name: str) -> None:
        w = self.edit()
        keep = [a for a in w.attribute if a.name != name]
        if len(keep) != len(w.attribute):
            del w.attribute[:]
            w.attribute.extend(keep)

    # -- inputs / outputs
    def input(self, i: int) -> str:
        return self.w.input[i] if i < len(self.w.input) else ""

    def set_inputs(self, inputs: list[str]) -> None:
        while inputs and not inputs[-1]:
            inputs.pop()
        dropped = set(self.w.input) - set(inputs) - {""}
        if dropped:
            self.conv.dropped.setdefault(id(self.scope), (self.scope, set()))[1].update(dropped)
        w = self.edit()
        del w.input[:]
        w.input.extend(inputs)

    def outputs(self) -> list[str]:
        outs = list(self.w.output)
        while outs and not outs[-1]:
            outs.pop()
        return outs

    # -- facts
    def const(self, name: str) -> np.ndarray | None:
        return self.conv.const(self.scope, name)

    def elem_type(self, name: str) -> int | None:
        return self.conv.facts.elem_type(name)

    def shape(self, name: str) -> tuple | None:
        return self.conv.facts.shape(name)

    def rank(self, name: str) -> int | None:
        s = self.shape(name)
        return None if s is None else len(s)

    def need_rank(self, name: str, why: str) -> int:
        r = self.rank(name)
        if r is None:
            raise Refuse(f"the rank of {name!r} is unknown ({why})")
        return r

    def add_const(self, what: str, value: np.ndarray) -> str:
        """A new constant for this node: an initializer in a graph, a Constant node in a
        function. Returns its name."""
        base = f"{node_label(self.node, self.index)}/{what}"
        out = self.conv.names.fresh(base)
        value = np.asarray(value)
        tensor = numpy_helper.from_array(value, out)
        if self.scope.graph is not None:
            self.conv.pending_inits.append((self.scope.graph, tensor,
                                            self.scope.owner is None))
        else:
            self.state.pre.append(helper.make_node(
                "Constant", [], [out], name=self.conv.names.fresh(base + "_const"),
                value=tensor))
        self.conv.scope_consts(self.scope)[out] = value
        self.conv.facts.extra_types[out] = tensor.data_type
        self.conv.facts.extra_shapes[out] = tuple(tensor.dims)
        return out

    def add_node(self, op: str, inputs: list[str], what: str, *, after: bool = False,
                 output: str | None = None, **attrs) -> str:
        """Insert a default-domain node before (or ``after``) this node; returns its output."""
        base = f"{node_label(self.node, self.index)}/{what}"
        out = output or self.conv.names.fresh(base)
        node = helper.make_node(op, inputs, [out], name=self.conv.names.fresh(base), **attrs)
        (self.state.post if after else self.state.pre).append(node)
        t = onnx.TensorProto.INT64 if op == "Shape" else self.elem_type(inputs[0])
        if t:
            self.conv.facts.extra_types[out] = t
        return out

    def fresh_value(self, what: str, like: str | None = None) -> str:
        """A new value name; ``like`` gives it that value's element type."""
        out = self.conv.names.fresh(f"{node_label(self.node, self.index)}/{what}")
        t = self.elem_type(like) if like else None
        if t:
            self.conv.facts.extra_types[out] = t
        return out

    def need_const(self, i: int, what: str) -> np.ndarray:
        name = self.input(i)
        v = self.const(name) if name else None
        if v is None:
            raise Refuse(f"{what} (input {i}, {name!r}) is not a constant")
        return v


@dataclass
class _NodeState:
    work: onnx.NodeProto | None = None
    pre: list[onnx.NodeProto] = field(default_factory=list)
    post: list[onnx.NodeProto] = field(default_factory=list)
    removed: bool = False
    notes: list[str] = field(default_factory=list)


class _Conversion:
    def __init__(self, model: onnx.ModelProto, source: int, target: int):
        self.model = model
        self.target = target
        # (graph, initializer, is main graph): written only once every node is planned.
        self.pending_inits: list[tuple[onnx.GraphProto, onnx.TensorProto, bool]] = []
        # Values a rewrite stopped using (folded into attributes): removed if now unused.
        self.dropped: dict[int, tuple[Scope, set[str]]] = {}
        self.facts = ModelFacts(model, source)
        self._names: Names | None = None
        self._consts: dict[int, dict[str, np.ndarray | None]] = {}
        self._main_consts: dict[str, object] | None = None

    @property
    def names(self) -> Names:
        if self._names is None:
            self._names = Names(self.model)
        return self._names

    def scope_consts(self, scope: Scope) -> dict:
        d = self._consts.get(id(scope))
        if d is None:
            d = {}
            if scope.graph is not None:
                for t in scope.graph.initializer:
                    d[t.name] = t
            for n in scope.nodes:
                c = _constant_tensor(n)
                if c is not None:
                    d[n.output[0]] = c
            self._consts[id(scope)] = d
        return d

    def const(self, scope: Scope, name: str) -> np.ndarray | None:
        for d in (self.scope_consts(scope), self._outer_consts(scope)):
            v = d.get(name)
            if v is None:
                continue
            if isinstance(v, onnx.TensorProto):
                if v.data_location == onnx.TensorProto.EXTERNAL:
                    return None  # never load external data for a decision
                v = numpy_helper.to_array(v)
                d[name] = v
            return v
        return None

    def _outer_consts(self, scope: Scope) -> dict:
        # Subgraphs see the main graph's constants (names are unique model-wide in practice).
        if scope.owner is None or scope.function is not None:
            return {}
        if self._main_consts is None:
            self._main_consts = {t.name: t for t in self.model.graph.initializer}
            for n in self.model.graph.node:
                c = _constant_tensor(n)
                if c is not None:
                    self._main_consts[n.output[0]] = c
        return self._main_consts


# --------------------------------------------------------------------------------------------
# The schema-driven rule.


@functools.cache
def _formals(op: str, version: int) -> tuple[tuple, tuple]:
    """(inputs, outputs): per formal parameter (name, option, allowed type strings)."""
    s = opsets.schema(op, version)
    params = {tc.type_param_str: frozenset(tc.allowed_type_strs) for tc in s.type_constraints}

    def conv(ps):
        return tuple((p.name, p.option, params.get(p.type_str, frozenset([p.type_str])))
                     for p in ps)

    return conv(s.inputs), conv(s.outputs)


_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single
_OPTIONAL = onnx.defs.OpSchema.FormalParameterOption.Optional
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic


def _formal_at(formals: tuple, i: int):
    if i < len(formals):
        return formals[i]
    if formals and formals[-1][1] == _VARIADIC:
        return formals[-1]
    return None


def _attr_py(a: onnx.AttributeProto):
    return helper.get_attribute_value(a)


def _same_value(a, b) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return float(np.float32(a)) == float(np.float32(b))
        except (TypeError, ValueError):
            return False
    return a == b


#: Attributes that were hints with no effect on the computed values.
_DROPPABLE = frozenset({"consumed_inputs"})


def _generic_step(st: Step) -> None:
    """Accept the node at ``st.dst`` when the two schemas say it is unaffected."""
    dst_s = opsets.schema(st.op, st.dst)
    if dst_s is None or dst_s.since_version != st.dst:
        raise Refuse(f"no schema {st.op}-{st.dst}")
    if dst_s.deprecated:
        raise Refuse(f"{st.op}-{st.dst} is deprecated")
    dst_attrs = dst_s.attributes
    src_defaults = opsets.attribute_defaults(st.op, st.src)
    dst_defaults = opsets.attribute_defaults(st.op, st.dst)

    # Attributes the node sets.
    for a in list(st.w.attribute):
        spec = dst_attrs.get(a.name)
        if spec is None:
            if a.name in _DROPPABLE:
                st.del_attr(a.name)
                st.note(f"dropped {a.name} (a memory hint without effect on values)")
                continue
            # Absent at the destination: fine only when set to the value meaning "absent".
            meaning = src_defaults.get(a.name)
            if meaning is not None and _same_value(_attr_py(a), meaning):
                st.del_attr(a.name)
                st.note(f"dropped {a.name}={_attr_py(a)!r} (its default, absent at "
                        f"{st.op}-{st.dst})")
                continue
            raise Refuse(f"attribute {a.name}={_attr_py(a)!r} does not exist at "
                         f"{st.op}-{st.dst}")
        if spec.type != a.type:
            raise Refuse(f"attribute {a.name} changes type at {st.op}-{st.dst}")

    # Attributes the node leaves at their defaults.
    set_names = {a.name for a in st.w.attribute}
    for name, spec in dst_attrs.items():
        if name in set_names:
            continue
        sd, dd = src_defaults.get(name), dst_defaults.get(name)
        if sd is not None:
            if dd is None or not _same_value(sd, dd):
                st.set_attr(name, sd, attr_type=spec.type)
                st.note(f"wrote {name}={sd!r} explicitly (the default changes to {dd!r})")
        elif dd is not None and name in opsets.attribute_names(st.op, st.src):
            raise Refuse(f"attribute {name} unset at {st.op}-{st.src} has no default there "
                         f"but defaults to {dd!r} at {st.op}-{st.dst}")
        elif spec.required:
            raise Refuse(f"attribute {name} is required at {st.op}-{st.dst}")

    # Inputs and outputs: counts, positions, element types.
    src_in, src_out = _formals(st.op, st.src)
    dst_in, dst_out = _formals(st.op, st.dst)
    for kind, names, src_f, dst_f, lo_n, hi_n in (
            ("input", list(st.w.input), src_in, dst_in, dst_s.min_input, dst_s.max_input),
            ("output", list(st.w.output), src_out, dst_out, dst_s.min_output,
             dst_s.max_output)):
        while names and not names[-1]:
            names.pop()
        if not lo_n <= len(names) <= hi_n:
            raise Refuse(f"{len(names)} {kind}s, {st.op}-{st.dst} takes {lo_n}..{hi_n}")
        for i, f in enumerate(dst_f):
            if f[1] == _SINGLE and (i >= len(names) or not names[i]) and i < lo_n:
                raise Refuse(f"{kind} {i} ({f[0]}) is required at {st.op}-{st.dst}")
        for i, v in enumerate(names):
            if not v:
                continue
            df = _formal_at(dst_f, i)
            if df is None:
                raise Refuse(f"{kind} {i} does not exist at {st.op}-{st.dst}")
            sf = _formal_at(src_f, i)
            if sf is not None and sf[2] <= df[2]:
                continue
            t = st.elem_type(v)
            if t is None:
                raise Refuse(f"the element type of {kind} {i} ({v!r}) is unknown and "
                             f"{st.op}-{st.dst} allows fewer types")
            ts = f"tensor({opsets.tensor_type_name(t)})"
            if ts not in df[2]:
                raise Refuse(f"{kind} {i} ({v!r}) is {ts}, not allowed at {st.op}-{st.dst}")


@dataclass(frozen=True)
class _FastWalk:
    """What makes a whole walk a plain relabel for a node, decided once per (op, from, to).

    Only built for walks with no listed step and no default that changes. A node passes when
    it sets only attributes that exist with one type and one default all along the walk, has
    input/output counts every version accepts, and (where some version allows fewer types
    than the source) element types every version allows. Anything else takes the step-by-step
    path, which also words the refusal.
    """

    safe_attrs: frozenset[str]
    check_attrs: bool  # some attribute valid at the source is not safe
    check_counts: bool  # some count or required input differs from the source's
    n_in: tuple[int, int]
    n_out: tuple[int, int]
    required_in: tuple[int, ...]
    narrow_in: tuple[tuple[int, frozenset[str]], ...]  # (position, allowed); -1 = variadic tail
    narrow_out: tuple[tuple[int, frozenset[str]], ...]


@functools.cache
def _fast_walk(op: str, v_from: int, v_to: int, table_keys: frozenset) -> _FastWalk | None:
    steps = _versions_between(op, v_from, v_to)
    if any((op, hi) in table_keys for _, hi in steps):
        return None
    walk = [v_from] + [hi if v_from < v_to else lo for lo, hi in steps]
    schemas = [opsets.schema(op, v) for v in walk]
    if any(s is None or s.deprecated for s in schemas[1:]):
        return None
    first = schemas[0].attributes
    safe = set(first)
    for s in schemas[1:]:
        safe &= set(s.attributes)
    for name in list(safe):
        types = {s.attributes[name].type for s in schemas}
        defaults = {repr(opsets.attribute_defaults(op, v).get(name)) for v in walk}
        if len(types) > 1 or len(defaults) > 1:
            safe.discard(name)
    # Attributes not safe must not be needed when unset either.
    for s in schemas[1:]:
        for name, spec in s.attributes.items():
            if name in safe:
                continue
            if spec.required or name in first:
                return None  # a default to write or a required attribute: slow path
    n_in = (max(s.min_input for s in schemas[1:]), min(s.max_input for s in schemas[1:]))
    n_out = (max(s.min_output for s in schemas[1:]), min(s.max_output for s in schemas[1:]))
    required = sorted({i for s in schemas[1:] for i, p in enumerate(s.inputs)
                       if p.option == _SINGLE})

    def narrow(pick):
        src = pick(_formals(op, v_from))
        out = []
        n = max(len(pick(_formals(op, v))) for v in walk)
        for i in range(n):
            sf = _formal_at(src, i)
            if sf is None:
                continue
            allowed = sf[2]
            for v in walk[1:]:
                f = _formal_at(pick(_formals(op, v)), i)
                if f is None:
                    return None
                allowed = allowed & f[2]
            if allowed != sf[2]:
                variadic_tail = i == n - 1 and sf[1] == _VARIADIC
                out.append((-1 if variadic_tail else i, frozenset(allowed)))
        return tuple(out)

    narrow_in = narrow(lambda f: f[0])
    narrow_out = narrow(lambda f: f[1])
    if narrow_in is None or narrow_out is None:
        return None
    # An output typed by the same parameter as a checked input, in every version, has that
    # input's type: no need to look it up.
    always = min(s.min_input for s in schemas)  # inputs every valid node has
    checked_in = {i for i, _ in narrow_in if 0 <= i < always}

    def same_param(k: int) -> bool:
        for s in schemas:
            if k >= len(s.outputs):
                return False
            if not any(j < len(s.inputs) and s.inputs[j].type_str == s.outputs[k].type_str
                       for j in checked_in):
                return False
        return True

    narrow_out = tuple((k, a) for k, a in narrow_out if k < 0 or not same_param(k))
    s0 = schemas[0]
    src_required = tuple(i for i, p in enumerate(s0.inputs) if p.option == _SINGLE)
    check_counts = (n_in != (s0.min_input, s0.max_input)
                    or n_out != (s0.min_output, s0.max_output)
                    or tuple(required) != src_required)
    return _FastWalk(frozenset(safe), not set(first) <= safe, check_counts, n_in, n_out,
                     tuple(required), narrow_in, narrow_out)


@functools.cache
def _type_string(elem: int) -> str:
    return f"tensor({opsets.tensor_type_name(elem)})"


def _present(names) -> int:
    n = len(names)
    while n and not names[n - 1]:
        n -= 1
    return n


def _fast_ok(fw: _FastWalk, n: onnx.NodeProto, facts: ModelFacts) -> bool:
    if fw.check_attrs:
        attrs = n.attribute
        if attrs:
            safe = fw.safe_attrs
            for a in attrs:
                if a.name not in safe:
                    return False
    if not (fw.check_counts or fw.narrow_in or fw.narrow_out):
        return True
    types = facts.propagated()
    if not fw.check_counts and type(types) is _Uniform:
        ts = _type_string(types.elem)
        return all(ts in allowed for _, allowed in fw.narrow_in + fw.narrow_out)
    ins = n.input
    nin = len(ins)
    if nin and not ins[-1]:
        nin = _present(ins)
    outs = n.output
    nout = len(outs)
    if nout and not outs[-1]:
        nout = _present(outs)
    if fw.check_counts:
        if not (fw.n_in[0] <= nin <= fw.n_in[1] and fw.n_out[0] <= nout <= fw.n_out[1]):
            return False
        for i in fw.required_in:
            if i < nin and not ins[i]:
                return False
    for names, narrow, count in ((ins, fw.narrow_in, nin), (outs, fw.narrow_out, nout)):
        for i, allowed in narrow:
            positions = range(i, i + 1) if i >= 0 else range(len(narrow) - 1, count)
            for j in positions:
                if j >= count:
                    continue
                v = names[j]
                if not v:
                    continue
                t = types.get(v) or facts.elem_type(v)
                if t is None or _type_string(t) not in allowed:
                    return False
    return True


# --------------------------------------------------------------------------------------------
# Driver.


@functools.cache
def _versions_between(op: str, v_from: int, v_to: int) -> tuple[tuple[int, int], ...]:
    """Steps (lo, hi) between neighbouring schema versions, in walking order."""
    vs = opsets.versions(op)
    lo, hi = min(v_from, v_to), max(v_from, v_to)
    chain = [v for v in vs if lo <= v <= hi]
    steps = tuple(zip(chain, chain[1:]))
    return steps if v_from < v_to else tuple(reversed(steps))


_RELABEL = "the schemas differ only in what this node does not use"


def _scope_source(scope: Scope, source: int, model_opset: int | None) -> int:
    """``source`` for the model's own scopes; a function's own import (also inside its
    subgraphs) where it differs from the model's."""
    v = scope.opsets.get("")
    return v if v is not None and v != model_opset else source


def _skip_set(skip: Iterable[str]) -> frozenset[str]:
    return frozenset(skip)


def other_ops_change(model: onnx.ModelProto, source: int, target: int,
                     skip: Iterable[str] = ACTIVATIONS) -> bool:
    """True when some default-domain node not in ``skip`` changes schema version."""
    skip = _skip_set(skip)
    model_opset = opsets.opset_of(model)
    for sc in iter_scopes(model):
        src = _scope_source(sc, source, model_opset)
        if src == target:
            continue
        seen: set[str] = set()
        for n in sc.nodes:
            op = n.op_type
            if op in seen or op in skip or opsets.normalize_domain(n.domain) != "":
                continue
            seen.add(op)
            if opsets.since_version(op, src) != opsets.since_version(op, target):
                return True
    return False


def convert_other_ops(model: onnx.ModelProto, source: int, target: int, *,
                      skip: Iterable[str] = ACTIVATIONS) -> list[Change]:
    """Convert every default-domain node whose op is not in ``skip`` from ``source`` to ``target``.

    Edits ``model`` in place (main graph, subgraphs, model-local functions, each with its own
    source opset) and returns what changed. Leaves the opset imports alone. Raises
    :class:`ConversionError` naming op, node, scope and versions when a node cannot be
    converted exactly; the model is then unchanged.
    """
    from .other_ops_table import TABLE  # the adapters import Step/Refuse from here

    skip = _skip_set(skip)
    table_keys = frozenset(TABLE)
    conv = _Conversion(model, source, target)
    changes: list[Change] = []
    plans: list[tuple[Scope, dict[int, list[onnx.NodeProto]]]] = []
    model_opset = opsets.opset_of(model)
    for sc in iter_scopes(model):
        src = _scope_source(sc, source, model_opset)
        if src == target:
            continue
        repl: dict[int, list[onnx.NodeProto]] = {}
        per_op: dict[str, tuple] = {}  # op -> (v_from, v_to, fast walk or None)
        for i, n in enumerate(sc.nodes):
            op = n.op_type
            known = per_op.get(op)
            if known is None:
                v_from = opsets.since_version(op, src)
                v_to = opsets.since_version(op, target)
                fw = (_fast_walk(op, v_from, v_to, table_keys)
                      if v_from is not None and v_to is not None and v_from != v_to else None)
                known = per_op[op] = (v_from, v_to, fw, op in skip)
            v_from, v_to, fw, skipped = known
            if skipped or v_from == v_to:
                continue
            dom = n.domain
            if dom and dom != "ai.onnx":
                continue
            name = n.name or f"<{op} #{i}>"
            if fw is not None and _fast_ok(fw, n, conv.facts):
                changes.append(Change(name, op, sc.label, v_from, v_to, "relabel", _RELABEL))
                continue
            loc = f"node {name!r} ({op}-{v_from} -> {v_to}, {sc.label})"
            if v_from is None:
                raise ConversionError(f"{loc}: {op} does not exist at opset {src}")
            if v_to is None:
                raise ConversionError(f"{loc}: {op} does not exist at opset {target}")
            state = _NodeState()
            for lo, hi in _versions_between(op, v_from, v_to):
                if state.removed:
                    break
                st = Step(n, op, lo, hi, v_from < v_to, conv, sc, i, state)
                try:
                    for adapter in TABLE.get((op, hi), ()):
                        adapter(st)
                    if not state.removed:
                        _generic_step(st)
                except Refuse as e:
                    raise ConversionError(
                        f"{loc}: step {op}-{st.src} -> {op}-{st.dst}: no exact adapter: {e}"
                    ) from None
            if state.removed:
                repl[i] = [*state.pre, *state.post]
            elif state.work is not None or state.pre or state.post:
                repl[i] = [*state.pre, state.work or n, *state.post]
            changes.append(Change(
                node=name, op=op, scope=sc.label, from_version=v_from, to_version=v_to,
                action="rewrite" if state.work is not None or state.pre or state.removed
                else "relabel",
                reason="; ".join(state.notes) or _RELABEL))
        plans.append((sc, repl))
    # Nothing is written before every node is planned. Subgraphs come after their parents in
    # iter_scopes; splicing them first keeps their edits when a parent list is rebuilt.
    for sc, repl in reversed(plans):
        splice(sc.nodes, repl)
    for sc, names in conv.dropped.values():
        _remove_unused_constants(sc, names)
    # New initializers are not listed as graph inputs: the caller picks an IR version >= 4
    # (or lists every initializer) when it declares the target's IR version.
    for graph, tensor, _main in conv.pending_inits:
        graph.initializer.append(tensor)
    return changes


def _used_names(nodes) -> set[str]:
    used: set[str] = set()
    for n in nodes:
        used.update(n.input)
        for _, g in subgraphs(n):
            used.update(_used_names(g.node))
            used.update(o.name for o in g.output)
    return used


def _remove_unused_constants(scope: Scope, names: set[str]) -> None:
    """Drop the Constant nodes and initializers of ``names`` that nothing uses any more."""
    used = _used_names(scope.nodes)
    if scope.graph is not None:
        used.update(o.name for o in scope.graph.output)
    if scope.function is not None:
        used.update(scope.function.output)
    dead = names - used
    if not dead:
        return
    gone = {i: [] for i, n in enumerate(scope.nodes)
            if n.op_type == "Constant" and len(n.output) == 1 and n.output[0] in dead}
    splice(scope.nodes, gone)
    g = scope.graph
    if g is not None and any(t.name in dead for t in g.initializer):
        inputs = {v.name for v in g.input}
        for i in reversed(range(len(g.initializer))):
            if g.initializer[i].name in dead and g.initializer[i].name not in inputs:
                del g.initializer[i]
