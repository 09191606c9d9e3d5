"""What a model says about its values, computed lazily and at most once per model.

One :class:`Facts` object answers, for the model as it was given (rewrites plan against it
before anything is written):

* element types: declared, then propagated through each node's schema (model-local
  functions once per tuple of call-site input types); onnx shape inference as the last
  resort;
* shapes and ranks (symbolic dims kept): declared shapes whose every dim is a number,
  constants, then onnx shape inference -- run at most once, on a copy, only when a shape
  the model does not fully declare is asked for;
* constants per scope (initializers that cannot be fed, Constant nodes), seen from nested
  subgraphs too;
* use counts per root (the main graph with its subgraphs, or a function);
* the element types any value could have, and fresh names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

import onnx

from .. import opsets
from .element_types import (
    ALL_TYPES,
    Uniform,
    Variant,
    declared_and_propagated,
    output_type_rules,
    possible_types,
    rule_type,
    take_value_infos,
    uniform_types,
)
from .names import Names
from .scopes import (
    Scope,
    constant_tensor,
    held_tensor,
    iter_scopes,
    may_hold_subgraphs,
    subgraphs,
)


@dataclass(slots=True)
class Constant:
    """A constant value: its tensor, the scope that holds it, and whether an edit may change
    the tensor itself (an initializer or a Constant node's ``value``, not a tensor made from
    ``value_floats``). Read-only (not frozen: a model has one per initializer, and a frozen
    dataclass is several times slower to make)."""

    tensor: onnx.TensorProto
    scope: Scope
    editable: bool


def _dims(tt) -> tuple:
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in tt.shape.dim)


class Declared:
    """Element types and shapes (ints, symbolic names, or None) as the model's graphs,
    subgraphs and function value_info declare them, and of constants; indexed once (the
    last declaration of a name wins), each answer read from the protobuf when asked for.

    The index holds a position per name, not the declaration: a big model has a value_info
    per node, and a Python object for each would cost more memory than the index."""

    _BITS = 24  # position = index << _BITS | box (a tuple past 2**_BITS boxes)

    def __init__(self, model: onnx.ModelProto):
        self._model = model  # the index points into it
        #: repeated fields of ValueInfoProto or TensorProto
        self._boxes: list = []
        #: name -> the position of the ValueInfoProto or TensorProto that says it (the last
        #: one wins), or a Constant node's tensor
        self._src: dict[str, object] = {}
        self._graph(model.graph)
        for f in model.functions:
            self._box(getattr(f, "value_info", ()))

    def _box(self, box) -> None:
        b = len(self._boxes)
        self._boxes.append(box)
        if b >> self._BITS:
            self._src.update({x.name: (box, i) for i, x in enumerate(box)})
        else:
            self._src.update({x.name: i << self._BITS | b for i, x in enumerate(box)})

    def _graph(self, g: onnx.GraphProto) -> None:
        for box in (g.input, g.output, g.value_info, g.initializer):
            self._box(box)
        kinds = {(n.op_type, n.domain) for n in g.node}
        if not any(op == "Constant" or may_hold_subgraphs(dom, op) for op, dom in kinds):
            return
        for n in g.node:
            for _, sg in subgraphs(n):
                self._graph(sg)
            if n.op_type == "Constant":
                c = constant_tensor(n)
                if c is not None:
                    self._src[n.output[0]] = c

    def _decl(self, name: str):
        """The ValueInfoProto or TensorProto that declares ``name``, or None (also once an
        edit moved it: the index answers for the model as it was given)."""
        at = self._src.get(name)
        if type(at) is int:
            box, i = self._boxes[at & ((1 << self._BITS) - 1)], at >> self._BITS
        elif type(at) is tuple:
            box, i = at
        else:
            return at
        x = box[i] if i < len(box) else None
        return x if x is not None and x.name == name else None

    def elem_type(self, name: str) -> int | None:
        src = self._decl(name)
        if isinstance(src, onnx.TensorProto):
            return src.data_type or None
        if src is None or not src.type.HasField("tensor_type"):
            return None
        return src.type.tensor_type.elem_type or None

    def shape(self, name: str) -> tuple | None:
        src = self._decl(name)
        if isinstance(src, onnx.TensorProto):
            return tuple(src.dims)
        if src is None or not src.type.HasField("tensor_type"):
            return None
        tt = src.type.tensor_type
        return _dims(tt) if tt.HasField("shape") else None

    def known_shape(self, name: str) -> tuple[int, ...] | None:
        """The shape of ``name`` when every dim is a number; onnx shape inference cannot
        change it (it keeps a declared dim value, or fails on a different one)."""
        src = self._decl(name)
        if src is None:
            return None
        if type(src) is onnx.TensorProto:
            return tuple(src.dims)
        tt = src.type.tensor_type  # empty when the value is not a tensor
        if not tt.HasField("shape"):
            return None
        out = []
        for d in tt.shape.dim:
            if not d.HasField("dim_value"):
                return None
            out.append(d.dim_value)
        return tuple(out)

    def shapes(self) -> dict[str, tuple]:
        out = {}
        for name in self._src:
            s = self.shape(name)
            if s is not None:
                out[name] = s
        return out


class Inferred(Declared):
    """:class:`Declared` of a copy of the model after one run of onnx shape inference: what
    inference cannot say is absent."""

    def __init__(self, model: onnx.ModelProto):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        try:
            m = onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
        except Exception:  # best effort: what inference cannot say stays unknown
            m = model
        super().__init__(m)


def static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int | str | None, ...]]:
    """Value name -> shape (ints, symbolic names, or None) from onnx shape inference."""
    return Inferred(model).shapes()


class Facts:
    """Lazily computed facts about ``model`` (see the module docstring).

    While a model-local function is planned, :meth:`enter_function` makes type and shape
    lookups answer for that function's body (its names are its own).
    """

    def __init__(self, model: onnx.ModelProto, source: int | None = None):
        self.model = model
        self.source = source if source is not None else (opsets.opset_of(model) or 0)
        self._scopes: list[Scope] | None = None
        self._types: dict[str, int] | None = None
        self._variants: dict = {}
        self._declared: Declared | None = None
        self._inferred: Inferred | None = None
        self._possible: frozenset[str] | None = None
        self._names: Names | None = None
        self._consts: dict[int, dict[str, Constant | int]] = {}
        self._inputs: dict[int, frozenset[str]] = {}
        self._uses: dict[int, Counter] = {}
        #: the types (and declared shapes) of the function body being planned, else None
        self.local: dict[str, int] | None = None
        self.local_shapes: dict[str, tuple] = {}
        #: types and shapes of values a rewrite made
        self.extra_types: dict[str, int] = {}
        self.extra_shapes: dict[str, tuple] = {}

    # -- scopes and names
    def scopes(self) -> list[Scope]:
        """Every scope of the model (see :func:`~opshift.graph.scopes.iter_scopes`)."""
        if self._scopes is None:
            self._scopes = list(iter_scopes(self.model))
        return self._scopes

    @property
    def names(self) -> Names:
        if self._names is None:
            self._names = Names(self.model)
        return self._names

    # -- element types
    def elem_type(self, name: str) -> int | None:
        """Element type of ``name``: declared or propagated, else from shape inference."""
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
        return self._infer().elem_type(name)

    def propagated(self) -> dict[str, int]:
        """The declared and propagated element types (no shape inference)."""
        if self._types is None:
            self._types = uniform_types(self.model, self.source, self.scopes()[0].kinds)
            if self._types is None:
                self._types, self._variants = declared_and_propagated(self.model,
                                                                      self.source)
        return self._types

    def function_variants(self, f: onnx.FunctionProto) -> list[Variant]:
        """(call-site input types, body types) for each distinct tuple of input types the
        calls of ``f`` pass (in the main graph, subgraphs, and functions called from them)."""
        self.propagated()
        return self._variants.get((f.domain, f.name), [])

    def enter_function(self, f: onnx.FunctionProto | None, types: dict[str, int] | None
                       ) -> None:
        """Answer for the body of ``f`` with ``types`` (None, None: for the model again)."""
        self.local = types
        self.local_shapes = {}
        if f is not None:
            take_value_infos(getattr(f, "value_info", ()), {}, self.local_shapes)

    def propagate(self, nodes: Iterable[onnx.NodeProto], opset: int) -> None:
        """Element types of the outputs of new ``nodes`` (valid at ``opset``), in order."""
        for n in nodes:
            c = constant_tensor(n)
            if c is not None:
                self.extra_types[n.output[0]] = c.data_type
                continue
            for k, r in enumerate(output_type_rules(n.op_type, opset) or ()):
                if k < len(n.output) and n.output[k] and r is not None:
                    t = rule_type(r, n, self.elem_type)
                    if t:
                        self.extra_types[n.output[k]] = t

    def possible_types(self) -> frozenset[str]:
        """Every element type (as 'tensor(...)') any value of the model could have (all of
        them when a function's inputs are untyped: never called, or called with values of
        unknown type)."""
        if self._possible is None:
            types = self.propagated()
            if type(types) is Uniform:
                self._possible = frozenset({f"tensor({opsets.tensor_type_name(types.elem)})"})
            elif any(not self.function_variants(f) or any(
                    0 in ins for ins, _ in self.function_variants(f))
                    for f in self.model.functions if f.input):
                self._possible = ALL_TYPES
            else:
                self._possible = possible_types(self.model)
        return self._possible

    # -- shapes
    def shape(self, name: str) -> tuple | None:
        """Shape of ``name`` (ints, symbolic names, None for unknown dims), None if its rank
        is unknown."""
        if not name:
            return None
        s = self.extra_shapes.get(name)
        if s is not None:
            return s
        if self.local is not None:
            return self.local_shapes.get(name)
        if self._declared is None:
            self._declared = Declared(self.model)
        s = self._declared.known_shape(name)
        return s if s is not None else self._infer().shape(name)

    def _infer(self) -> Inferred:
        if self._inferred is None:
            self._inferred = Inferred(self.model)
        return self._inferred

    # -- constants
    def constant(self, scope: Scope, name: str) -> Constant | None:
        """The constant ``name`` as ``scope`` sees it (its own, else an enclosing graph's),
        or None when it is computed or fed at run time."""
        s: Scope | None = scope
        while s is not None and name:
            consts = self._scope_constants(s)
            found = consts.get(name)
            if type(found) is int:  # an initializer's position: made a Constant when read
                found = consts[name] = Constant(s.graph.initializer[found], s, True)
            if found is not None:
                return found
            if name in self._graph_inputs(s):
                return None
            s = s.parent
        return None

    def add_constant(self, scope: Scope, name: str, tensor: onnx.TensorProto) -> None:
        """Make a constant a rewrite adds visible to later lookups in ``scope``."""
        self._scope_constants(scope)[name] = Constant(tensor, scope, False)

    def _scope_constants(self, scope: Scope) -> dict[str, Constant | int]:
        """Name -> Constant, or the position of an initializer (a model has thousands, and
        a rewrite reads few of them)."""
        d = self._consts.get(id(scope))
        if d is None:
            d = self._consts[id(scope)] = {}
            if scope.graph is not None:
                d.update({t.name: i for i, t in enumerate(scope.graph.initializer)})
                if self.model.ir_version >= 4:
                    # from IR 4 an initializer that is also a graph input can be fed
                    for name in self._graph_inputs(scope):
                        d.pop(name, None)
            for n in scope.nodes if any(op == "Constant" for op, _ in scope.kinds) else ():
                if n.op_type != "Constant":
                    continue
                held = held_tensor(n)
                c = held if held is not None else constant_tensor(n)
                if c is not None:
                    d[n.output[0]] = Constant(c, scope, held is not None)
        return d

    def _graph_inputs(self, scope: Scope) -> frozenset[str]:
        d = self._inputs.get(id(scope))
        if d is None:
            d = self._inputs[id(scope)] = frozenset(
                v.name for v in scope.graph.input) if scope.graph is not None else frozenset()
        return d

    # -- uses
    def uses(self, scope: Scope, name: str) -> int:
        """How many node inputs and graph (or function) outputs read ``name`` in the root of
        ``scope`` (the main graph with all its subgraphs, or a function)."""
        root = scope.root
        counts = self._uses.get(id(root))
        if counts is None:
            counts = Counter()
            for s in self.scopes():
                if s.root is root:
                    counts.update(chain.from_iterable(n.input for n in s.nodes))
                    counts.update(s.outputs())
            self._uses[id(root)] = counts
        return counts.get(name, 0)
