"""The per-node context a conversion step (listed adapter or schema rule) works with."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..external import tensor_array
from ._graph import Names, Scope, node_label, subgraphs
from .other_ops_facts import ModelFacts, constant_tensor


class Refuse(Exception):
    """Raised by a step that cannot be made exact; the caller adds the location."""


@dataclass
class Step:
    """One version step of one node. Adapters read ``w`` and write through :meth:`edit`."""

    node: onnx.NodeProto  # the original node, never modified here
    op: str
    lo: int  # the older schema version of this step
    hi: int  # the newer one
    up: bool  # True: lo -> hi, False: hi -> lo
    conv: Conversion
    scope: Scope
    index: int
    state: NodeState

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
class NodeState:
    work: onnx.NodeProto | None = None
    pre: list[onnx.NodeProto] = field(default_factory=list)
    post: list[onnx.NodeProto] = field(default_factory=list)
    removed: bool = False
    notes: list[str] = field(default_factory=list)


class Conversion:
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
                c = constant_tensor(n)
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
                v = tensor_array(v)
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
                c = constant_tensor(n)
                if c is not None:
                    self._main_consts[n.output[0]] = c
        return self._main_consts
