"""Values that depend on constants alone: which they are, and what they hold.

Exporters often compute a shape, pads or axes from constants rather than writing them:
PyTorch writes a Pad's pads as ConstantOfShape, Concat, Reshape, a reversing Slice, Transpose
and Cast of Constant nodes; tf2onnx a Concat of a Split of an initializer. Such a value is
one only through ops whose results do not depend on how a runtime computes them (data
movement, casts, comparisons and logic, Floor/Ceil/Abs/Neg/Sign, and on integers arithmetic,
sums, products and Range): the evaluator then computes what every runtime would. The shape
rules read the small integer ones (:func:`small_ints`); conversion folds them where a step
needs a constant (:mod:`opshift.convert.rescue.fold_first`), and in a function body it writes
(:mod:`opshift.convert.folding`, through :data:`FOLDABLE`).

A value read at run time (a graph input, a Shape of one with a dim not known beforehand), an
other-domain op, a value made on the way of more than :data:`MAX_ELEMENTS` elements or of a
shape not known beforehand, a graph's output, or a value in a model-local function is not
one. The Shape of a main-graph input declared with known dims is that constant: the
declaration is the model's contract, and runtimes refuse inputs of other shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import numpy_helper

from opshift import opsets
from opshift.errors import OpshiftError
from opshift.graph.scopes import Scope
from opshift.io.tensors import tensor_array

if TYPE_CHECKING:
    from opshift.graph.facts import Facts

#: ops whose results from given inputs every runtime computes alike (no reduction order,
#: no library function): folded from constants, they compute what the model computes
FOLDABLE = frozenset({
    "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Concat", "ConstantOfShape", "Div",
    "Equal", "Expand", "Flatten", "Floor", "Gather", "GatherElements", "Greater",
    "GreaterOrEqual", "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg",
    "Not", "Or", "Range", "ReduceProd", "ReduceSum", "Reshape", "Shape", "Sign", "Size",
    "Slice", "Split", "Squeeze", "Sub", "Tile", "Transpose", "Unsqueeze", "Where", "Xor",
})
#: folded on integers only: on floats a runtime may fuse a multiply and an add, divide
#: approximately, order a Range's or a reduction's additions or take a NaN its own way
INTEGER_ONLY = frozenset({"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Range",
                          "ReduceProd", "ReduceSum"})
#: ops whose output's size is read from their inputs' values (a shape, repeats, a Range's
#: bounds), not bounded by their inputs' sizes: a fold that does not know the output's shape
#: beforehand (a written body's) must bound it first
SIZED_BY_VALUES = frozenset({"ConstantOfShape", "Expand", "Range", "Tile"})
#: the most elements a folded value or a constant it reads may have
MAX_ELEMENTS = 1 << 16
#: the most nodes folded into one value
MAX_NODES = 256
_PLAIN = frozenset("bBhHiIlLqQefd?")  # numpy kinds numpy_helper writes as they are


_WORKING = object()  # a value being computed: met again, it is not a constant

#: What runs a model on inputs and gives its outputs by name (opshift's evaluator, which sits
#: above the graph: ``import opshift`` registers it, see :func:`use_evaluator`); None: nothing
#: is computed, only constants are known.
_evaluator: Callable[[onnx.ModelProto, dict], Mapping[str, Any]] | None = None


def use_evaluator(evaluate: Callable[[onnx.ModelProto, dict], Mapping[str, Any]] | None
                  ) -> None:
    """Compute values from constants with ``evaluate(model, inputs)`` (the evaluator's
    signature; None: compute nothing). The graph does not import the evaluator, which reads
    the graph's declarations: the package registers it (:mod:`opshift`)."""
    global _evaluator
    _evaluator = evaluate


#: the element types a small vector is read from (a shape, pads, axes, a scale)
_SMALL_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.INT64,
                    onnx.TensorProto.INT32})


def _plain(t: onnx.TensorProto) -> np.ndarray | None:
    """The value of an in-memory tensor of a type in :data:`_SMALL_TYPES`, else None."""
    if t.data_location != onnx.TensorProto.DEFAULT or t.data_type not in _SMALL_TYPES:
        return None
    return tensor_array(t)


def small_ints(facts: Facts, scope: Scope, name: str) -> np.ndarray | None:
    """The value of ``name`` as ``scope`` reads it when it is a small vector (a shape, pads,
    axes): a constant's, or an integer one computed from constants alone (evaluated once)."""
    c = facts.constant(scope, name)
    if c is not None:
        if len(c.tensor.dims) > 1 or sum(c.tensor.dims) > 64:
            return None
        return _plain(c.tensor)
    if facts.elem_type(name) not in opsets.INTEGER_TYPES:
        return None
    place = home(facts, scope, name)
    key = (id(place), name)
    found = facts.computed.get(key)
    if found is None:
        facts.computed[key] = _WORKING
        t = evaluated(facts, place, name) if place is not None else None
        found = None if t is None or len(t.dims) > 1 or sum(t.dims) > 64 else _plain(t)
        facts.computed[key] = found if found is not None else _WORKING
    return None if found is _WORKING else found


def tensor_of(facts: Facts, scope: Scope, name: str) -> onnx.TensorProto | None:
    """The tensor ``name`` holds as ``scope`` reads it whatever the inputs: a constant's, or
    one computed from constants alone through :data:`FOLDABLE` ops (a PyTorch PReLU slope
    written as ``Unsqueeze(initializer)``), evaluated once; None otherwise."""
    c = facts.constant(scope, name)
    if c is not None:
        return c.tensor
    place = home(facts, scope, name) if name else None
    if place is None:
        return None
    key = (id(place), name, "tensor")  # (small_ints keeps arrays under (id, name))
    found = facts.computed.get(key)
    if found is None:
        facts.computed[key] = _WORKING
        found = evaluated(facts, place, name)
        facts.computed[key] = found if found is not None else _WORKING
    return None if found is _WORKING else found


def home(facts: Facts, scope: Scope, value: str) -> Scope | None:
    """The scope whose node computes ``value`` (read in ``scope``: it or one enclosing it)
    when a fold may make it an initializer there: a graph's, not its output."""
    if scope.root.function is not None:
        return None
    found = facts.producer(value)
    if found is None:
        return None
    home = found[1]
    if home.graph is None or value in home.outputs():
        return None
    return home


def evaluated(facts: Facts, home: Scope, value: str, *, shapes: bool = False
              ) -> onnx.TensorProto | None:
    """``value``, computed in ``home`` (see :func:`home`) from constants alone (and, with
    ``shapes``, dims known beforehand: :func:`chain`), evaluated; None when it is not such a
    value or cannot be run."""
    found = chain(facts, home, value, shapes=shapes)
    return None if found is None else evaluate(home.opsets, value, *found)


def chain(facts: Facts, home: Scope, value: str, *, shapes: bool = False
          ) -> tuple[list[onnx.NodeProto], dict[str, onnx.TensorProto]] | None:
    """(the nodes computing ``value``; the constants they read) when only constants and
    :data:`FOLDABLE` ops of ``home`` go into it, else None. ``shapes``: a Shape of any value
    whose dims are all known is a constant too (see :func:`_shape_of`)."""
    nodes: dict[str, onnx.NodeProto] = {}  # by its first output: a Split's outputs share it
    leaves = {}
    todo, seen = [value], set()
    while todo:
        x = todo.pop()
        if not x or x in seen:
            continue
        seen.add(x)
        c = facts.constant(home, x)
        if c is not None:
            t = c.tensor
            if t.data_location == onnx.TensorProto.EXTERNAL or np.prod(t.dims) > MAX_ELEMENTS:
                return None
            leaves[x] = t
            continue
        found = facts.producer(x)
        if found is None or found[1] is not home:  # read at run time, or computed elsewhere
            return None
        n = found[0]
        if opsets.normalize_domain(n.domain) or n.op_type not in FOLDABLE \
                or len(nodes) >= MAX_NODES \
                or (n.op_type in INTEGER_ONLY
                    and facts.elem_type(n.output[0]) not in opsets.INTEGER_TYPES) \
                or not _small(facts, n):
            return None
        nodes[next(o for o in n.output if o)] = n
        dims = _known_dims(facts, home, n, shapes)
        if dims is not None:  # its output is a constant; the input's values are not read
            leaves[n.output[0]] = numpy_helper.from_array(dims, n.output[0])
            if n.op_type == "Gather":  # (the Shape it picks from: folded away with it)
                shape = facts.producer(n.input[0])[0]
                nodes[shape.output[0]] = shape
            continue
        todo.extend(n.input)
    return list(nodes.values()), leaves


def _needed(nodes: list[onnx.NodeProto], value: str, leaves: dict) -> list[onnx.NodeProto]:
    """The nodes of ``nodes`` (one value's, a few) that ``value`` needs given ``leaves``, each
    after the nodes whose outputs it reads."""
    made = {o: n for n in nodes for o in n.output if o}
    out, done = [], set()

    def visit(x: str) -> None:
        n = made.get(x)
        if x in leaves or n is None or id(n) in done:
            return
        done.add(id(n))
        for i in n.input:
            visit(i)
        out.append(n)

    visit(value)
    return out


def _known_dims(facts: Facts, home: Scope, n: onnx.NodeProto, shapes: bool
                ) -> np.ndarray | None:
    """What node ``n`` gives when it is a Shape of a value whose dims are known
    (:func:`_shape_of`), or a Gather of constant positions from such a Shape whose picked dims
    are (PyTorch's ``x.shape[-1]`` of an ``[N, C, T]`` value); else None."""
    if n.op_type == "Shape":
        dims = _shape_of(facts, home, n, shapes)
        picked: list | None = dims
        at = None
    elif n.op_type == "Gather" and len(n.input) == 2 and not any(
            a.name == "axis" and a.i != 0 for a in n.attribute):
        found, at = facts.producer(n.input[0]), small_ints(facts, home, n.input[1])
        if found is None or found[1] is not home or found[0].op_type != "Shape" or at is None:
            return None
        dims = _shape_of(facts, home, found[0], shapes)
        if dims is None or not all(-len(dims) <= i < len(dims) for i in at.ravel()):
            return None
        picked = [dims[i] for i in at.ravel()]
    else:
        return None
    if picked is None or not all(isinstance(d, int) for d in picked):
        return None
    out = np.array(picked, np.int64)
    return out if at is None else out.reshape(at.shape)


def _shape_of(facts: Facts, home: Scope, n: onnx.NodeProto, shapes: bool) -> list | None:
    """The dims Shape node ``n`` gives, each an int where known, when it reads an input of
    the main graph (its declared dims: the model's contract, runtimes refuse inputs of other
    shapes); with ``shapes``, also for a value of the main graph or an If's branch (not a
    loop body, whose values may change shape from one iteration to the next) as the
    declarations and the shape rules give it. Else None."""
    if not n.input:
        return None
    x = n.input[0]
    shape = None
    if home.parent is None:
        declared = facts.declared(home.graph)
        if x in declared.input_names() and facts.constant(home, x) is None:
            shape = declared.shape(x)
    if shape is None and shapes and not _in_loop(home):
        shape = facts.shape(x)
    if shape is None:
        return None
    attrs = {a.name: a.i for a in n.attribute}
    return list(shape[attrs.get("start", 0):attrs.get("end", len(shape))])


def _in_loop(scope: Scope) -> bool:
    while scope.parent is not None:
        if scope.owner is not None and scope.owner.op_type in ("Loop", "Scan"):
            return True
        scope = scope.parent
    return False


def _small(facts: Facts, n: onnx.NodeProto) -> bool:
    """Whether every output of ``n`` has a known shape of at most :data:`MAX_ELEMENTS`
    values: what a fold computes stays small whatever the model says (a ConstantOfShape of
    2**40 values is not made to read two of them)."""
    for o in n.output:
        s = facts.shape(o) if o else ()
        if s is None or not all(isinstance(d, int) for d in s) or math.prod(s) > MAX_ELEMENTS:
            return False
    return True


def evaluate(opset_imports: Mapping[str, int], value: str, nodes: list[onnx.NodeProto],
             leaves: dict[str, onnx.TensorProto]) -> onnx.TensorProto | None:
    """``value`` computed by the evaluator from ``nodes`` (as :func:`chain` finds them, in
    any order) and ``leaves``, at ``opset_imports`` (``{domain: version}``, a scope's
    ``opsets``), as a tensor named ``value``; None when it cannot be run or is too large (or no
    evaluator is registered: :func:`use_evaluator`). The one evaluator of constants:
    :mod:`opshift.convert.folding` runs a body's nodes here too."""
    evaluate = _evaluator
    if evaluate is None:
        return None
    g = onnx.GraphProto(name="fold", node=_needed(nodes, value, leaves),
                        output=[onnx.ValueInfoProto(name=value)])
    for name, t in leaves.items():  # (a Constant node's tensor is not named as its output)
        g.initializer.add().CopyFrom(t)
        g.initializer[-1].name = name
    m = onnx.ModelProto(graph=g, ir_version=onnx.IR_VERSION, opset_import=[
        onnx.OperatorSetIdProto(domain=d, version=v) for d, v in opset_imports.items()])
    try:
        with np.errstate(all="ignore"):
            result = evaluate(m, {})[value]
    except (OpshiftError, ValueError, TypeError):
        return None
    if not isinstance(result, np.ndarray) or result.size > MAX_ELEMENTS \
            or result.dtype.char not in _PLAIN:
        return None
    return numpy_helper.from_array(result, value)


