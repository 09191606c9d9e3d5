"""Graph edits, planned first and written in one go.

A rewrite plans its edits into a :class:`Pending` (new initializers, constants reshaped,
node replacements); :meth:`Edits.commit` accepts them and :meth:`Edits.write` writes every
accepted edit into the model at once, so a refusal before that leaves the model untouched.
Shared helpers make the nodes every rewrite needs: Unsqueeze/Squeeze valid at any opset,
Constant nodes and typed scalars, and reshaped constants (each tensor rewritten once, copied
when shared).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from opshift import opsets
from opshift.graph.declared import Declared
from opshift.graph.facts import Constant, Facts
from opshift.graph.scopes import Scope, may_hold_subgraphs, splice, subgraphs


@dataclass(slots=True)
class Pending:
    """The edits one rewrite plans, kept apart until :meth:`Edits.commit` accepts them."""

    initializers: list[tuple[Scope, onnx.TensorProto]] = field(default_factory=list)
    dims: list[tuple[Constant, tuple[int, ...]]] = field(default_factory=list)
    copies: dict[tuple, str] = field(default_factory=dict)
    consumed: dict[tuple[int, str], int] = field(default_factory=dict)
    unused: list[tuple[Scope, str]] = field(default_factory=list)

    def absorb(self, other: Pending) -> None:
        """Take ``other``'s edits too (a rewrite made of inner rewrites)."""
        self.initializers.extend(other.initializers)
        self.dims.extend(other.dims)
        self.copies.update(other.copies)
        for k, n in other.consumed.items():
            self.consumed[k] = self.consumed.get(k, 0) + n
        self.unused.extend(other.unused)


class Edits:
    """Accepted edits of one model, written by :meth:`write`."""

    def __init__(self, facts: Facts):
        self.facts = facts
        self._accepted = Pending()
        self._replace: dict[int, tuple[Scope, dict[int, list[onnx.NodeProto]]]] = {}
        self._rewired: dict[int, list[tuple[int, dict[int, str]]]] = {}
        self._made = onnx.GraphProto()

    @property
    def names(self):
        return self.facts.names

    def new_node(self) -> onnx.NodeProto:
        """An empty node for a replacement, held with the other new nodes in one message:
        a standalone ``NodeProto`` has an arena of its own, about 3x the memory (a fix of
        every slope of a million-node model makes a million new nodes)."""
        return self._made.node.add()

    # -- planning
    def commit(self, p: Pending) -> None:
        if p.initializers or p.dims or p.copies or p.consumed or p.unused:
            self._accepted.absorb(p)

    def replace(self, scope: Scope, index: int, nodes: list[onnx.NodeProto],
                inputs: dict[int, str] | None = None) -> None:
        """Replace node ``index`` of ``scope`` by ``nodes`` (written by :meth:`write`). The
        node itself may be one of them (moved, not copied), its inputs renamed by
        ``inputs`` (position -> name) when written."""
        self._replace.setdefault(id(scope), (scope, {}))[1][index] = nodes
        if inputs:
            self._rewired.setdefault(id(scope), []).append((index, inputs))

    def add_initializer(self, p: Pending, scope: Scope, tensor: onnx.TensorProto) -> None:
        p.initializers.append((scope, tensor))
        self.facts.add_constant(scope, tensor.name, tensor)

    def reshaped_constant(self, p: Pending, scope: Scope, name: str, const: Constant,
                          shape: tuple[int, ...], prefix: list[onnx.NodeProto]
                          ) -> tuple[str, str]:
        """Constant ``name`` with the same data in ``shape``, for one reader in ``scope``: the
        tensor itself when that reader is its last one, else a copy made once per scope and
        shape (an initializer, or a Constant node appended to ``prefix`` in a function).
        Returns (the name to read, what was done: "reshaped in place ...", "copied to ...",
        "read as ...")."""
        shape = tuple(map(int, shape))
        ukey = (id(scope.root), name)
        left = self.facts.uses(scope, name) - self._accepted.consumed.get(ukey, 0)
        if const.editable and left == 1:
            p.dims.append((const, shape))
            return name, f"reshaped in place to {list(shape)}"
        self.release(p, scope, name, const)
        key = (id(scope), id(const.tensor), shape)
        copy = p.copies.get(key) or self._accepted.copies.get(key)
        if copy is not None:
            return copy, f"read as {copy!r} with shape {list(shape)}"
        new = TensorProto()
        new.CopyFrom(const.tensor)
        new_name = self.names.fresh(f"{name}_{'x'.join(map(str, shape)) or 'scalar'}")
        new.name = new_name
        del new.dims[:]
        new.dims.extend(shape)
        if scope.graph is not None:
            self.add_initializer(p, scope, new)
        else:
            prefix.append(constant_node(new_name, new, self.names.fresh(f"{new_name}/const")))
        p.copies[key] = new_name
        return new_name, (f"copied to {new_name!r} with shape {list(shape)} ({name!r} has "
                          "other readers)")

    def release(self, p: Pending, scope: Scope, name: str, const: Constant) -> None:
        """One reader in ``scope`` stops reading constant ``name``: dropped when none is left."""
        ukey = (id(scope.root), name)
        p.consumed[ukey] = p.consumed.get(ukey, 0) + 1
        p.unused.append((const.scope, name))

    # -- writing
    def write(self) -> None:
        """Write every accepted edit into the model. Subgraphs come after the scope holding
        them; writing them first keeps their edits when a parent's node list is rebuilt."""
        done = self._accepted
        dims: dict[int, list] = {}
        for const, shape in done.dims:
            dims.setdefault(id(const.scope), []).append((const, shape))
        inits: dict[int, list] = {}
        for scope, tensor in done.initializers:
            inits.setdefault(id(scope), []).append(tensor)
        unused: dict[int, set[str]] = {}
        for scope, name in done.unused:
            unused.setdefault(id(scope), set()).add(name)
        for scope in reversed(self.facts.scopes()):
            key = id(scope)
            if key in dims:
                _set_dims(None if scope.graph is None else self.facts.declared(scope.graph),
                          dims[key])
            if key in inits:
                scope.graph.initializer.extend(inits[key])
            repl = self._replace.get(key)
            if repl is not None:
                for index, inputs in self._rewired.get(key, ()):
                    node = scope.nodes[index]
                    for k, name in inputs.items():
                        node.input[k] = name
                for index, nodes in repl[1].items():
                    _keep_subgraphs(scope.nodes[index], nodes)
                splice(scope.nodes, repl[1])
            if key in unused:
                # read by as many nodes as before but for the reads rewrites took away
                left = {n for n in unused[key] if self.facts.uses(scope, n)
                        <= done.consumed.get((id(scope.root), n), 0)}
                remove_unused_constants(scope, left)


def _set_dims(declared: Declared | None,
              reshaped: list[tuple[Constant, tuple[int, ...]]]) -> None:
    """Give each constant of ``reshaped`` its new shape, in its tensor and in the entries of
    its graph (``declared``) that declare it (IR < 4: also a graph input), found through
    the graph's index of names: a model reshapes thousands of slopes, and has as many
    value infos."""
    new = {}
    for const, shape in reshaped:
        t = const.tensor
        del t.dims[:]
        t.dims.extend(shape)
        new[t.name] = shape
    if declared is None:
        return
    protos: dict[tuple[int, ...], onnx.TensorShapeProto] = {}  # one per distinct shape
    for vi in declared.entries(new):
        if vi.type.HasField("tensor_type"):
            shape = new[vi.name]
            proto = protos.get(shape)
            if proto is None:
                proto = protos[shape] = onnx.TensorShapeProto()
                for d in shape:
                    proto.dim.add().dim_value = d
            vi.type.tensor_type.shape.CopyFrom(proto)


def used_names(nodes) -> set[str]:
    """The names ``nodes`` read, their subgraphs' nodes and outputs included."""
    used = set(chain.from_iterable(n.input for n in nodes))
    holders = {o for o, d in {(n.op_type, n.domain) for n in nodes} if may_hold_subgraphs(d, o)}
    for n in nodes if holders else ():
        if n.op_type in holders:
            for _, g in subgraphs(n):
                used.update(used_names(g.node))
                used.update(o.name for o in g.output)
    return used


def remove_unused_constants(scope: Scope, names: set[str]) -> None:
    """Drop the Constant nodes and initializers (not graph inputs) of ``names`` that nothing
    in ``scope`` uses any more."""
    if not names:
        return
    used = used_names(scope.nodes)
    used.update(scope.outputs())
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


def _keep_subgraphs(original: onnx.NodeProto, nodes: list[onnx.NodeProto]) -> None:
    """A rewritten node holding subgraphs was copied when planned; the edits planned inside
    its subgraphs were written into the original's since (subgraphs are written first): its
    rewritten form (the node of ``nodes`` of its op) takes them."""
    if not may_hold_subgraphs(original.domain, original.op_type):
        return
    graphs = {a.name: a for a in original.attribute
              if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)}
    for n in nodes if graphs else ():
        if n is not original and n.op_type == original.op_type and n.domain == original.domain:
            for a in n.attribute:
                g = graphs.get(a.name)
                if g is not None and a.type == g.type:
                    a.CopyFrom(g)


def axes_nodes(op: str, inp: str, out: str, axes: list[int], opset: int, names,
               add: Callable[[], onnx.NodeProto] = onnx.NodeProto) -> list[onnx.NodeProto]:
    """Unsqueeze or Squeeze (``op``) of ``axes`` valid at ``opset``: the axes an attribute
    before version 13, a Constant input from 13 on. Each node is made by ``add()``
    (:meth:`Edits.new_node`: in one arena with the rewrite's other new nodes)."""
    v = opsets.since_version(op, opset)
    node = add()
    node.op_type, node.name = op, names.fresh(f"{out}/{op.lower()}")
    node.input.append(inp)
    node.output.append(out)
    if v is None or v < 13:
        node.attribute.add(name="axes", type=onnx.AttributeProto.INTS, ints=axes)
        return [node]
    axes_name = names.fresh(f"{out}/axes")
    node.input.append(axes_name)
    c = add()
    c.CopyFrom(constant_node(axes_name, helper.make_tensor(axes_name, TensorProto.INT64,
                                                           [len(axes)], axes),
                             names.fresh(f"{out}/axes_const")))
    return [c, node]


def iteration_numbers(count: str, out: str, names, base: str) -> onnx.NodeProto:
    """A Loop of ``count`` trips (an int64 scalar) whose scan output ``out`` is its iteration
    numbers, 0..count-1 as an int64 ``[count]``: valid from opset 1 (before 11 a Loop
    carries at least one value: the count, unchanged). Its body's names are fresh, so none
    is a name of the graphs around it."""
    i, more, go_on, kept, same, number = (names.fresh(f"{base}/{w}") for w in (
        "iteration", "more", "go_on", "kept", "same", "number"))
    vi, i64 = helper.make_tensor_value_info, TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Identity", [a], [b]) for a, b in ((more, go_on), (kept, same),
                                                             (i, number))],
        names.fresh(f"{base}/body"),
        [vi(i, i64, []), vi(more, TensorProto.BOOL, []), vi(kept, i64, [])],
        [vi(go_on, TensorProto.BOOL, []), vi(same, i64, []), vi(number, i64, [])])
    return helper.make_node("Loop", [count, "", count], [names.fresh(f"{base}/count"), out],
                            name=names.fresh(f"{base}/loop"), body=body)


def constant_node(output: str, value: onnx.TensorProto | np.ndarray,
                  name: str | None = None) -> onnx.NodeProto:
    """A default-domain Constant node giving ``output`` the tensor ``value`` (an array is
    made into one), named ``name`` (None: unnamed, e.g. a template's node, named when
    bound)."""
    tensor = value if isinstance(value, onnx.TensorProto) else numpy_helper.from_array(
        np.asarray(value))
    return helper.make_node("Constant", [], [output], name=name, value=tensor)


def typed_scalar(value: float, elem_type: int) -> onnx.TensorProto:
    """A scalar tensor of ``elem_type`` holding float ``value`` as a float attribute holds it
    (float32), cast to that type: an op's alpha as the op computes with it."""
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    return numpy_helper.from_array(np.array(np.float32(value)).astype(dtype))
