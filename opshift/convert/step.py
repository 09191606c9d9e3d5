"""One version step of one node: what a step function reads and the edits it plans.

A step function receives a :class:`Step` and either plans a rewrite through it (the node is
never modified: :meth:`Step.edit` makes a working copy) or raises :class:`Refuse`. Every edit
goes into the node's :class:`NodeState` until the engine accepts the whole model's plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from opshift.convert.computed import Computed
from opshift.graph.cast import make_cast
from opshift.graph.edit import Edits, Pending, axes_nodes, constant_node
from opshift.graph.facts import Constant, Facts
from opshift.graph.scopes import Scope, node_label
from opshift.io.tensors import tensor_array

#: the float types of opset 1's schemas: all a Constant node takes before opset 9
OPSET_1_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                            onnx.TensorProto.FLOAT16})


class Refuse(Exception):
    """Raised by a step that cannot be made exact; the engine adds the location."""


class NotConstant(Refuse):
    """A refusal because input ``value`` is computed where the step needs a constant (which
    the engine may fold, :mod:`.fold_first`)."""

    def __init__(self, message: str, value: str) -> None:
        super().__init__(message)
        self.value = value


@dataclass
class Context:
    """One conversion: the model's facts, the accepted edits, the target opset."""

    model: onnx.ModelProto
    target: int
    facts: Facts
    edits: Edits


@dataclass(slots=True)
class NodeState:
    """One node's plan: its working copy, nodes before and after it, notes, and the graph
    edits (new constants, reshapes) waiting for the engine to accept them."""

    work: onnx.NodeProto | None = None
    pre: list[onnx.NodeProto] = field(default_factory=list)
    post: list[onnx.NodeProto] = field(default_factory=list)
    removed: bool = False
    notes: list[tuple[str, str]] = field(default_factory=list)
    pending: Pending = field(default_factory=Pending)
    #: shapes of values this plan made or reshaped
    shapes: dict[str, tuple] = field(default_factory=dict)
    #: run on the node as walked to the target, replacing it (set by :meth:`Step.finish`)
    finisher: Callable[[Step], None] | None = None


@dataclass(slots=True)
class Step(Computed):
    """One version step of one node. Step functions read ``w`` and write through
    :meth:`edit` and the other methods (values computed at run time: :class:`Computed`)."""

    node: onnx.NodeProto  # the original node, never modified here
    op: str
    lo: int  # the older schema version of this step
    hi: int  # the newer one
    up: bool  # True: lo -> hi, False: hi -> lo
    ctx: Context
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

    @property
    def target(self) -> int:
        """The opset the conversion ends at (new nodes must be valid there)."""
        return self.ctx.target

    @property
    def facts(self) -> Facts:
        return self.ctx.facts

    @property
    def label(self) -> str:
        """A base for names derived from the node."""
        return node_label(self.node, self.index)

    def fresh(self, base: str) -> str:
        return self.ctx.edits.names.fresh(base)

    def edit(self) -> onnx.NodeProto:
        """A writable copy of the node (made once per node). A node holding subgraphs gets
        them back from the original when written (:meth:`~opshift.graph.edit.Edits.write`),
        with the edits planned inside them: a step edits its inputs, outputs and other
        attributes only."""
        if self.state.work is None:
            w = onnx.NodeProto()
            w.CopyFrom(self.node)
            self.state.work = w
        return self.state.work

    def remove(self, what: str, why: str = "") -> None:
        """Replace the node by the nodes added before/after it (none: drop it)."""
        self.state.removed = True
        self.note(what, why)

    def note(self, what: str, why: str = "") -> None:
        # a step that keeps the version (the node written as other ops) is not 'X-11->11'
        at = (f"{self.op}-{self.src}" if self.src == self.dst
              else f"{self.op}-{self.src}->{self.dst}")
        self.state.notes.append((f"{at}: {what}", why))

    def finish(self, fn: Callable[[Step], None]) -> None:
        """Run ``fn`` once the node is walked to the target; it handles the node's element
        types (the schema check leaves them to it) and writes the node's final form."""
        self.state.finisher = fn

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
        ins = (self.state.work or self.node).input
        return ins[i] if i < len(ins) else ""

    def set_inputs(self, inputs: list[str]) -> None:
        while inputs and not inputs[-1]:
            inputs.pop()
        pending = self.state.pending
        old = list(self.w.input)
        for name in set(old) - set(inputs) - {""}:
            pending.unused.append((self.scope, name))
            key = (id(self.scope.root), name)
            pending.consumed[key] = pending.consumed.get(key, 0) + old.count(name)
        w = self.edit()
        del w.input[:]
        w.input.extend(inputs)

    def outputs(self) -> list[str]:
        outs = list(self.w.output)
        while outs and not outs[-1]:
            outs.pop()
        return outs

    # -- facts
    def constant(self, name: str) -> Constant | None:
        """The constant ``name`` as this node's scope sees it."""
        return self.ctx.facts.constant(self.scope, name) if name else None

    def const(self, name: str) -> np.ndarray | None:
        """The value of constant ``name`` (None for external data: never loaded for a
        decision)."""
        c = self.constant(name)
        if c is None or c.tensor.data_location == onnx.TensorProto.EXTERNAL:
            return None
        return tensor_array(c.tensor)

    def elem_type(self, name: str) -> int | None:
        return self.ctx.facts.elem_type(name)

    def shape(self, name: str) -> tuple | None:
        s = self.state.shapes.get(name)
        return s if s is not None else self.ctx.facts.shape(name)

    def rank(self, name: str) -> int | None:
        s = self.shape(name)
        return None if s is None else len(s)

    def need_rank(self, name: str, why: str) -> int:
        r = self.rank(name)
        if r is None:
            raise Refuse(f"the rank of {name!r} is unknown ({why})")
        return r

    def need_const(self, i: int, what: str) -> np.ndarray:
        name = self.input(i)
        v = self.const(name) if name else None
        if v is None:
            raise NotConstant(f"{what} (input {i}, {name!r}) is not a constant", name)
        return v

    # -- new values
    def add_const(self, what: str, value: np.ndarray) -> str:
        """A new constant for this node: an initializer in a graph, a Constant node in a
        function. Returns its name."""
        base = f"{self.label}/{what}"
        out = self.fresh(base)
        tensor = numpy_helper.from_array(np.asarray(value), out)
        if self.scope.graph is not None:
            self.ctx.edits.add_initializer(self.state.pending, self.scope, tensor)
        else:
            if self.target < 9 and tensor.data_type not in OPSET_1_FLOATS:
                raise Refuse(f"it needs a {onnx.TensorProto.DataType.Name(tensor.data_type)} "
                             f"constant ({what}): in a function a Constant node, which takes "
                             "float types only before opset 9")
            self.state.pre.append(constant_node(out, tensor, self.fresh(base + "_const")))
            self.ctx.facts.add_constant(self.scope, out, tensor)
        self.ctx.facts.extra_types[out] = tensor.data_type
        self.ctx.facts.extra_shapes[out] = self.state.shapes[out] = tuple(tensor.dims)
        return out

    def add_node(self, op: str, inputs: list[str], what: str, *, after: bool = False,
                 output: str | None = None, **attrs) -> str:
        """Insert a default-domain node before (or ``after``) this node; returns its output,
        typed as the op's schema at the target says (bool for a comparison, int64 for Shape,
        its input's type for arithmetic)."""
        base = f"{self.label}/{what}"
        out = output or self.fresh(base)
        node = helper.make_node(op, inputs, [out], name=self.fresh(base), **attrs)
        (self.state.post if after else self.state.pre).append(node)
        self.ctx.facts.propagate([node], self.target)
        return out

    def add_cast(self, inp: str, to: int, what: str, *, after: bool = False,
                 output: str | None = None) -> str:
        """Insert a Cast of ``inp`` to element type ``to`` valid at the target (Cast-1 takes
        the type's name) before (or ``after``) this node; returns its output, of type ``to``."""
        base = f"{self.label}/{what}"
        out = output or self.fresh(base)
        (self.state.post if after else self.state.pre).append(
            make_cast(inp, out, to, self.target, self.fresh(base)))
        self.ctx.facts.extra_types[out] = to
        return out

    def fresh_value(self, what: str, like: str | None = None) -> str:
        """A new value name; ``like`` gives it that value's element type."""
        out = self.fresh(f"{self.label}/{what}")
        t = self.elem_type(like) if like else None
        if t:
            self.ctx.facts.extra_types[out] = t
        return out

    def reshape_constant_input(self, i: int, const: Constant, shape: tuple[int, ...],
                               name: str | None = None) -> str:
        """Make input ``i`` (named ``name`` when the caller read it; the constant ``const``)
        read the same data in ``shape``; returns what was done (see
        :meth:`opshift.graph.edit.Edits.reshaped_constant`)."""
        if name is None:
            name = self.input(i)
        shape = tuple(shape)
        new, how = self.ctx.edits.reshaped_constant(self.state.pending, self.scope, name,
                                                    const, shape, self.state.pre)
        self.state.shapes[new] = shape
        if new != name:
            # (a copy, the tensor being shared: its type, which the facts do not know yet)
            self.ctx.facts.extra_types[new] = const.tensor.data_type
            self.edit().input[i] = new
        return how

    def broadcast_constant_input(self, i: int, shape: tuple[int, ...]) -> str | None:
        """Make input ``i``, a constant of this node's scope, read as a new constant of its
        data broadcast to ``shape`` (the old one dropped when nothing else reads it); None
        when input ``i`` is no such constant."""
        name = self.input(i)
        const = self.constant(name)
        value = self.const(name)
        if const is None or value is None or const.scope is not self.scope:
            return None
        new = self.add_const(f"{name}_broadcast", np.broadcast_to(value, shape).copy())
        self.ctx.edits.release(self.state.pending, self.scope, name, const)
        self.edit().input[i] = new
        return f"written broadcast to {list(shape)} as {new!r}"

    def read_input_as(self, i: int, shape: tuple, op: str, axes: list[int], suffix: str,
                      const: Constant | None = None) -> str:
        """Make input ``i`` read the same data in ``shape``: a constant of this node's scope
        reshaped (once per tensor, copied when shared); anything else (a computed value, a
        constant of an enclosing graph, whose edits stay there) through ``op``
        (Unsqueeze/Squeeze) of ``axes``, valid at the target. ``const``: input ``i``'s
        constant when the caller read it (None: looked up here). Returns what was done."""
        name = self.input(i)
        if const is None:
            const = self.constant(name)
        if const is not None and const.scope is self.scope:
            return self.reshape_constant_input(i, const, shape, name)
        out = self.add_axes_node(op, name, axes, suffix)
        self.state.shapes[out] = tuple(shape)
        self.edit().input[i] = out
        return f"read through {op} of axes {axes} as {list(shape)}"

    def add_axes_node(self, op: str, x: str, axes: list[int], what: str) -> str:
        """An Unsqueeze or Squeeze (``op``) of ``x``'s ``axes`` valid at the target (the axes
        an attribute before 13, an input from 13), inserted before this node; its output,
        typed as ``x``."""
        out = self.fresh(f"{x}_{what}")
        edits = self.ctx.edits
        self.state.pre.extend(axes_nodes(op, x, out, axes, self.target, edits.names,
                                         edits.new_node))
        t = self.elem_type(x)
        if t:
            self.ctx.facts.extra_types[out] = t
        return out


# -- small facts about shapes and attribute values, shared by the step functions
def np_dtype(elem: int) -> np.dtype:
    return helper.tensor_dtype_to_np_dtype(elem)


def known_shape(shape: tuple | None) -> bool:
    return shape is not None and all(d is not None for d in shape)


def is_suffix(small: tuple, big: tuple) -> bool:
    return len(small) <= len(big) and (not small or tuple(big[-len(small):]) == tuple(small))


def norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def text(v) -> str | None:
    """A string attribute's value as str (onnx gives bytes)."""
    return v.decode() if isinstance(v, bytes) else v
