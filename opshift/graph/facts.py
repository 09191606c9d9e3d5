"""What a model says about its values, computed lazily and at most once per model.

One :class:`Facts` object answers, for the model as it was given (rewrites plan against it
before anything is written):

* element types: declared, then propagated through each node's schema (model-local
  functions once per tuple of call-site input types; a body value's type is the one every
  typed call agrees on); onnx shape inference as the last resort (for call sites too, and
  for the whole types of sequences and optionals);
* shapes and ranks (symbolic dims kept): declared shapes, constants and onnx shape
  inference (run at most once, on a copy, only when a shape is asked for that the main graph
  does not declare in full), completed by each op's own rules (:mod:`.shape_rules`: Gemm's
  output is 2-D whatever onnx can infer), worked out backwards from each value asked for;
* constants per scope (initializers that cannot be fed, Constant nodes), also as nested
  subgraphs see them; use counts per root (the main graph with its subgraphs, or a
  function); the element types any value could have; fresh names.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

import onnx

from opshift import opsets
from opshift.graph.declared import Declared, Listed
from opshift.graph.element_types import (
    ALL_TYPES,
    Typed,
    Uniform,
    Variant,
    declared_and_propagated,
    output_type_rules,
    possible_types,
    rule_type,
    take_value_infos,
    uniform_types,
    untyped_body,
)
from opshift.graph.inferred import Inferred
from opshift.graph.names import Names
from opshift.graph.scopes import Scope, constant_tensor, held_tensor, iter_scopes
from opshift.graph.shape_rules import ALL_OUTPUTS, rules
from opshift.graph.shape_walk import ShapeWalk

if TYPE_CHECKING:
    from opshift.graph.index import ModelIndex

_EMPTY: dict = {}


@dataclass(slots=True)
class Constant:
    """A constant value: its tensor, the scope that holds it, and whether an edit may change
    the tensor itself (an initializer or a Constant node's ``value``, not a tensor made from
    ``value_floats``). Read-only (not frozen: a model has one per initializer, and a frozen
    dataclass is several times slower to make)."""

    tensor: onnx.TensorProto
    scope: Scope
    editable: bool


def _agreed(variants) -> dict[str, int]:
    """Value -> the element type every variant that types it agrees on."""
    found: dict[str, int] = {}
    clash: set[str] = set()
    for _, types in variants:
        for v, t in types.items():
            if t and found.setdefault(v, t) != t:
                clash.add(v)
    for v in clash:
        del found[v]
    return found


class Facts:
    """Lazily computed facts about ``model`` (see the module docstring).

    While a model-local function is planned, :meth:`enter_function` makes type and shape
    lookups answer for that function's body (its names are its own). ``inferred``: the
    model as onnx shape inference annotated it, when the caller already ran it. ``types``:
    the element types the structural check's walk propagated (by default the index's
    ``types`` when they are a :class:`~.element_types.Typed`), so that none is walked
    again. ``base_dir``: the model's folder. ``index``: the
    :class:`~opshift.graph.index.ModelIndex` of the structural check's walk of this model
    (or of a model it is an unedited copy of), which Facts reads rather than walk the model
    again: its node kinds (:meth:`kinds`) and the kinds of problem it found (:meth:`found`);
    with ``facts``, the main graph's declarations, reads (:meth:`main_reads`) and uses; with
    names, every name in use. A Facts describes the model as it was given: whoever edits
    the model makes a new one for what comes after (planning writes last).
    """

    def __init__(self, model: onnx.ModelProto, source: int | None = None,
                 inferred: onnx.ModelProto | None = None, types: dict[str, int] | None = None,
                 base_dir: str | os.PathLike | None = None, index: ModelIndex | None = None):
        self.model = model
        #: the structural check's walk of the model (a ModelIndex), or None
        self.index = index
        self._index = index if index is not None and index.facts else None
        #: every name the structural check met, when its index kept them
        self._used = index.names if index is not None and index.naming else None
        self._listed: Listed | None = None if self._index is None else self._index.declared
        #: the model's folder, where its external data is
        self.base_dir = base_dir
        self.source = source if source is not None else (opsets.opset_of(model) or 0)
        self._scopes: list[Scope] | None = None
        self._kinds: set[tuple[str, str]] | None = None
        self._types: dict[str, int] | None = None
        self._variants: dict = {}
        if types is None and index is not None:
            types = index.types
        if isinstance(types, Typed):  # (an untyped index holds a plain, empty dict)
            self._types, self._variants = types, types.variants
        self._body_types: dict[tuple[str, str], dict[str, int]] = {}
        self._body_inferred: set[tuple[str, str]] = set()
        self._inferred_variants: dict | None = None
        self._annotated = inferred
        self._inferred: Inferred | None = None
        self._declared: Declared | None = None
        #: rule shapes per root: None for the main graph, else the function's id
        self._walks: dict[int | None, ShapeWalk] = {}
        self._function: onnx.FunctionProto | None = None
        self._possible: frozenset[str] | None = None
        self._names: Names | None = None
        self._consts: dict[int, dict[str, Constant | int]] = {}
        self._inputs: dict[int, Collection[str]] = {}
        self._uses: dict[int, Counter] = {}
        self._producers: dict[int, dict[str, tuple[onnx.NodeProto, Scope]]] = {}
        #: values computed from constants (:mod:`.constant_values`)
        self.computed: dict[tuple, object] = {}
        self.local: dict[str, int] | None = None  # types of the function body planned
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

    def kinds(self) -> set[tuple[str, str]]:
        """(domain, op_type) of every node anywhere in the model (graphs, subgraphs,
        functions): the index's when the walk made one, else read from :meth:`scopes`. The
        set is shared: nobody may change it."""
        if self._kinds is None:
            self._kinds = self.index.kinds if self.index is not None else {
                (d, o) for sc in self.scopes() for o, d in sc.kinds}
        return self._kinds

    def scope_of(self, owner: onnx.GraphProto | onnx.FunctionProto) -> Scope | None:
        """The scope whose node list is ``owner``'s (this very graph or function object),
        None when it is none of the model's scopes."""
        return next((s for s in self.scopes()
                     if (s.graph if s.graph is not None else s.function) is owner), None)

    @property
    def names(self) -> Names:
        if self._names is None:  # (names from the index are added to its set)
            self._names = Names(self.model) if self._used is None else Names.from_used(
                self._used)
        return self._names

    # -- what the structural check found and read
    def found(self) -> set[str] | None:
        """The kinds of problem the structural check's walk found (a defect of a kind the
        check looks for and did not find is not in the model); None when no walk made the
        index."""
        return self.index.found if self.index is not None else None

    def main_reads(self) -> Collection[str]:
        """Every name the main graph's nodes read, the nodes and outputs of their subgraphs
        included: the index's reads when the walk kept them (they count the main graph's
        outputs too), else read from the nodes. Shared: nobody may change it."""
        if self._index is not None:
            if self._index.reads is not None:
                return set(self._index.reads)
            uses = self._index.uses()  # (the reads, counted already)
            if uses is not None:
                return uses.keys()
        from opshift.graph.edit import used_names

        return used_names(self.model.graph.node)

    # -- element types
    def elem_type(self, name: str, function: onnx.FunctionProto | None = None) -> int | None:
        """Element type of ``name``: declared or propagated, else from shape inference.
        With ``function``: of the value ``name`` of that function's body, the type all its
        typed variants agree on (see :meth:`body_elem_type`)."""
        if not name:
            return None
        if function is not None:
            return self.body_elem_type(function, name)
        if t := self.extra_types.get(name):
            return t
        if self.local is not None:
            return self.local.get(name) or None
        if t := self.propagated().get(name):
            return t
        return self._infer().elem_type(name)

    def type_str(self, name: str) -> str | None:
        """``name``'s type as schemas spell it: ``tensor(float)`` from its element type, else
        (``seq(tensor(float))``, ``optional(...)``) as declared or inferred; None: unknown."""
        if t := self.elem_type(name):
            return opsets.tensor_type(t)
        return None if self.local is not None or not name else self._infer().type_str(name)

    def propagated(self) -> dict[str, int]:
        """The declared and propagated element types (no shape inference)."""
        if self._types is None:
            self._types = uniform_types(self.model, self.source, self.scopes()[0].kinds)
            if self._types is None:
                self._types = typed = declared_and_propagated(self.model, self.source)
                self._variants = typed.variants
        return self._types

    def function_variants(self, f: onnx.FunctionProto) -> list[Variant]:
        """(call-site input types, body types) for each distinct tuple of input types the
        calls of ``f`` pass (in the main graph, subgraphs, and functions called from them)."""
        self.propagated()
        return self._variants.get((f.domain, f.name), [])

    def body_elem_type(self, f: onnx.FunctionProto, name: str) -> int | None:
        """The element type of ``name`` in ``f``'s body that every typed variant giving it
        a type agrees on (None when they disagree or none types it); a function never called
        is typed from its own declarations and constants."""
        key = (f.domain, f.name)
        found = self._body_types.get(key)
        if found is None:
            variants = self.function_variants(f)
            if not variants:
                variants = [((), untyped_body(self.model, self.source, f))]
            found = self._body_types[key] = _agreed(variants)
        t = found.get(name)
        if t is None and key not in self._body_inferred:
            # call sites only onnx's inference types: their variants fill what is missing
            self._body_inferred.add(key)
            if self._inferred_variants is None:
                self._inferred_variants = declared_and_propagated(
                    self.model, self.source, self._infer().elem_types()).variants
            more = _agreed(self._inferred_variants.get(key, []))
            found.update((v, t) for v, t in more.items() if v not in found)
            t = found.get(name)
        return t

    def enter_function(self, f: onnx.FunctionProto | None, types: dict[str, int] | None
                       ) -> None:
        """Answer for the body of ``f`` with ``types`` (None, None: for the model again)."""
        self.local = types
        self.local_shapes = {}
        self._function = f
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
                self._possible = frozenset({opsets.tensor_type(types.elem)})
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
            return self._walk(self._function).shape(name)
        return self._walk(None).shape(name)

    def declared(self, g: onnx.GraphProto) -> Declared:
        """What graph ``g`` declares (the main graph's index kept: shapes are asked of it)."""
        if g is not self.model.graph:
            return Declared(g)
        if self._declared is None:
            self._declared = Declared(g, self._listed)
        return self._declared

    def _infer(self) -> Inferred:
        if self._inferred is None:
            self._inferred = Inferred(self.model, self._annotated)
        return self._inferred

    def _walk(self, f: onnx.FunctionProto | None) -> ShapeWalk:
        """The shape rules for the main graph (with its subgraphs) or ``f``'s body."""
        key = None if f is None else id(f)
        walk = self._walks.get(key)
        if walk is not None:
            return walk

        def producer(name: str):
            found = self.producer(name, f)
            if found is None or found[0].op_type not in rules():
                return None
            n, sc = found
            k = 0 if n.output[0] == name else list(n.output).index(name)
            if k and n.op_type not in ALL_OUTPUTS:
                return None
            source = self.source if f is None else (sc.opset or 0)
            version = (opsets.since_version(n.op_type, source)
                       if opsets.normalize_domain(n.domain) == "" else None)
            if version is None:
                return None
            # (imported here, as the rules are: a model whose shapes are declared or
            # inferred asks neither)
            from opshift.graph.constant_values import small_ints

            return n, version, lambda v: small_ints(self, sc, v), k

        if f is None:
            static = self.declared(self.model.graph).static_shape

            def base(name: str) -> tuple | None:
                s = static(name)
                return s if s is not None else self._infer().shape(name)
        else:
            def base(name: str) -> tuple | None:
                return self.local_shapes.get(name)
        walk = self._walks[key] = ShapeWalk(base, producer)
        return walk

    def producer(self, name: str, function: onnx.FunctionProto | None = None
                 ) -> tuple[onnx.NodeProto, Scope] | None:
        """The node computing ``name`` in the main graph with its subgraphs (in ``function``'s
        body when given) and the scope holding it; None for an input or an initializer."""
        index = self._producers.get(id(function))
        if index is None:
            index = self._producers[id(function)] = {
                o: (n, sc) for sc in self.scopes() if sc.root.function is function
                for n in sc.nodes for o in n.output if o}
        return index.get(name)

    # -- constants
    def constant(self, scope: Scope, name: str) -> Constant | None:
        """The constant ``name`` as ``scope`` sees it (its own, else an enclosing graph's),
        or None when it is computed or fed at run time."""
        if not name:
            return None
        found = self._consts.get(id(scope), _EMPTY).get(name)
        if type(found) is Constant:  # read before: most lookups
            return found
        s: Scope | None = scope
        while s is not None:
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
                d.update(self.declared(scope.graph).initializer_positions())
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

    def _graph_inputs(self, scope: Scope) -> Collection[str]:
        d = self._inputs.get(id(scope))
        if d is None:
            g = scope.graph
            d = self._inputs[id(scope)] = (
                frozenset() if g is None else self.declared(g).input_names()
                if g is self.model.graph else frozenset(v.name for v in g.input))
        return d

    # -- uses
    def uses(self, scope: Scope, name: str) -> int:
        """How many node inputs and graph (or function) outputs read ``name`` in the root of
        ``scope`` (the main graph with all its subgraphs, or a function)."""
        root = scope.root
        counts = self._uses.get(id(root))
        if counts is None:
            counts = (self._index.uses() if self._index is not None
                      and root is self.scopes()[0] else None)  # (shared: read-only)
            if counts is None:
                counts = Counter()
                for s in self.scopes():
                    if s.root is root:
                        counts.update(chain.from_iterable(n.input for n in s.nodes))
                        counts.update(s.outputs())
            self._uses[id(root)] = counts
        return counts.get(name, 0)
