"""Folding before converting, where that is the only way.

A step that needs an input as a constant (Pad's pads below opset 11, Slice's starts and ends
below 10, Reshape's shape below 5, ...) refuses one a node computes. Exporters often compute
such a value from constants alone: PyTorch writes a Pad's pads as ConstantOfShape, Concat,
Reshape, a reversing Slice, Transpose and Cast of Constant nodes; tf2onnx a Concat of a Split
of an initializer. Such a value is folded: the evaluator computes it from those constants and
it becomes an initializer of its graph, and the nodes that computed it go where nothing else
reads them (with the Constant nodes and initializers only they read). Then the model is
planned again.

Only values a refused step needs are folded, and only through ops whose results do not
depend on how a runtime computes them (data movement, casts, comparisons and logic,
Floor/Ceil/Abs/Neg/Sign, and on integers arithmetic and Range): the folded model computes
the same as the input, bit for bit. A value read at run time (a graph input, a Shape of one
with a dim not known beforehand), an other-domain op, a value made on the way of more than
:data:`MAX_ELEMENTS` elements or of a shape not known beforehand, a graph's output, or a
value in a model-local function stays refused. The Shape of a main-graph input declared with
known dims is that constant: the declaration is the model's contract, and runtimes refuse
inputs of other shapes.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import chain

import numpy as np
import onnx
from onnx import numpy_helper

from .. import opsets
from ..errors import ConstantNeededError, OpshiftError
from ..graph.edit import remove_unused_constants, used_names
from ..graph.facts import Facts
from ..graph.scopes import Scope, iter_scopes, may_hold_subgraphs, splice, subgraphs
from .result import Change

#: ops whose results from given inputs every runtime computes alike (no reduction order,
#: no library function): folded from constants, they compute what the model computes
FOLDABLE = frozenset({
    "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Concat", "ConstantOfShape", "Div",
    "Equal", "Expand", "Flatten", "Floor", "Gather", "GatherElements", "Greater",
    "GreaterOrEqual", "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg",
    "Not", "Or", "Range", "Reshape", "Shape", "Sign", "Size", "Slice", "Split", "Squeeze",
    "Sub", "Tile", "Transpose", "Unsqueeze", "Where", "Xor",
})
#: folded on integers only: on floats a runtime may fuse a multiply and an add, divide
#: approximately, order a Range's additions or take a NaN its own way
_INTEGER_ONLY = frozenset({"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Range"})
#: the most elements a folded value or a constant it reads may have
MAX_ELEMENTS = 1 << 16
#: the most nodes folded into one value
MAX_NODES = 256
_PLAIN = frozenset("bBhHiIlLqQefd?")  # numpy kinds numpy_helper writes as they are


def foldable(facts: Facts, scope: Scope, value: str) -> bool:
    """Whether :func:`fold` folds ``value`` (read by a node of ``scope``) when a step refuses
    it as not a constant: a step with another exact form for a computed value leaves a
    foldable one to the fold, whose result is simpler."""
    home = _home(facts, scope, value)
    return home is not None and _chain(facts, home, value) is not None


def fold(model: onnx.ModelProto, source: int, refused: list, planned: list
         ) -> tuple[onnx.ModelProto, list[Change]] | None:
    """A copy of ``model`` with each value a :class:`ConstantNeededError` of ``refused``
    ((node, name, scope label, version, error) tuples, as the planner collects them) names
    folded into an initializer where it is computed from constants alone; the folds as
    changes. None when none can be folded. ``planned``: the scopes of ``model`` the planner
    saw, which the errors name (its facts may hold constants of edits it did not make)."""
    facts = Facts(model, source)
    scopes_now = facts.scopes()
    at_planned = {id(s): k for k, s in enumerate(planned)}
    where = {id(s): k for k, s in enumerate(scopes_now)}
    positions: dict[int, dict[str, int]] = {}  # per scope: value -> its node's position
    plans: dict[tuple[int, str], tuple] = {}
    for _node, name, _label, _version, err in refused:
        if not isinstance(err, ConstantNeededError) or id(err.scope) not in at_planned:
            continue
        home = _home(facts, scopes_now[at_planned[id(err.scope)]], err.value)
        key = (where[id(home)], err.value) if home is not None else None
        if key is None or key in plans:
            continue
        found = _chain(facts, home, err.value)
        if found is None:
            continue
        index = positions.get(id(home))
        if index is None:
            index = positions[id(home)] = {o: i for i, n in enumerate(home.nodes)
                                           for o in n.output if o}
        at = sorted(index[next(o for o in n.output if o)] for n in found[0])
        value = _evaluate(home, err.value, at, found[1])
        if value is not None:
            plans[key] = (home, at, value, name, err)
    if not plans:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    scopes = list(iter_scopes(out))
    by_scope: dict[int, list] = {}
    for (k, v), plan in plans.items():
        by_scope.setdefault(k, []).append((v, plan[1], plan[2]))
    gone = {k: _replace(scopes[k], folds, positions[id(scopes_now[k])])
            for k, folds in by_scope.items()}
    changes = []
    for (k, v), (home, at, _, refused_name, err) in plans.items():
        made = home.nodes[positions[id(home)][v]]
        ops = ", ".join(dict.fromkeys(home.nodes[i].op_type for i in at))
        left = sum(i not in gone[k] for i in at)
        changes.append(Change(
            made.name or f"<{made.op_type}>", made.op_type, home.label,
            opsets.since_version(made.op_type, home.opset or source) or 0, None, "fold",
            f"folded {v!r}, computed from constants by {len(at)} node(s) ({ops}), into an "
            "initializer first" + (f" ({left} of them kept: other nodes read them)"
                                   if left else ""),
            f"node {refused_name!r}: {err.reason}; the value depends on constants only, "
            "through ops every runtime computes alike"))
    return out, changes


def _home(facts: Facts, scope: Scope, value: str) -> Scope | None:
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


def _chain(facts: Facts, home: Scope, value: str
           ) -> tuple[list[onnx.NodeProto], dict[str, onnx.TensorProto]] | None:
    """(the nodes computing ``value``; the constants they read) when only constants and
    :data:`FOLDABLE` ops of ``home`` go into it, else None."""
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
                or len(nodes) >= MAX_NODES or not _small(facts, n) \
                or (n.op_type in _INTEGER_ONLY
                    and facts.elem_type(n.output[0]) not in opsets.INTEGER_TYPES):
            return None
        nodes[next(o for o in n.output if o)] = n
        dims = _static_input_shape(facts, home, n)
        if dims is not None:  # its output is a constant; the input's values are not read
            leaves[n.output[0]] = numpy_helper.from_array(dims, n.output[0])
            continue
        todo.extend(n.input)
    return list(nodes.values()), leaves


def _static_input_shape(facts: Facts, home: Scope, n: onnx.NodeProto) -> np.ndarray | None:
    """What Shape node ``n`` gives when it reads an input of the main graph declared with
    known dims (the model's contract: runtimes refuse inputs of other shapes), else None."""
    if n.op_type != "Shape" or home.parent is not None or not n.input:
        return None
    x = n.input[0]
    declared = facts.declared(home.graph)
    shape = declared.shape(x)
    if x not in declared.input_names() or facts.constant(home, x) is not None \
            or shape is None or not all(isinstance(d, int) for d in shape):
        return None
    attrs = {a.name: a.i for a in n.attribute}
    return np.array(shape[attrs.get("start", 0):attrs.get("end", len(shape))], np.int64)


def _small(facts: Facts, n: onnx.NodeProto) -> bool:
    """Whether every output of ``n`` has a known shape of at most :data:`MAX_ELEMENTS`
    values: what a fold computes stays small whatever the model says (a ConstantOfShape of
    2**40 values is not made to read two of them)."""
    for o in n.output:
        s = facts.shape(o) if o else ()
        if s is None or not all(isinstance(d, int) for d in s) or math.prod(s) > MAX_ELEMENTS:
            return False
    return True


def _evaluate(scope: Scope, value: str, at: list[int], leaves: dict[str, onnx.TensorProto]
              ) -> onnx.TensorProto | None:
    """``value`` computed by the evaluator from the nodes at ``at`` and ``leaves``, as a
    tensor named ``value``; None when it cannot be run or is too large."""
    from ..evaluator import evaluate

    g = onnx.GraphProto(name="fold", node=[scope.nodes[i] for i in at  # (but Shapes of
                                           if scope.nodes[i].output[0] not in leaves],  # inputs)
                        output=[onnx.ValueInfoProto(name=value)])
    for name, t in leaves.items():  # (a Constant node's tensor is not named as its output)
        g.initializer.add().CopyFrom(t)
        g.initializer[-1].name = name
    m = onnx.ModelProto(graph=g, ir_version=onnx.IR_VERSION, opset_import=[
        onnx.OperatorSetIdProto(domain=d, version=v) for d, v in scope.opsets.items()])
    try:
        with np.errstate(all="ignore"):
            result = evaluate(m, {})[value]
    except (OpshiftError, ValueError, TypeError):
        return None
    if not isinstance(result, np.ndarray) or result.size > MAX_ELEMENTS \
            or result.dtype.char not in _PLAIN:
        return None
    return numpy_helper.from_array(result, value)


def _replace(scope: Scope, folds: list[tuple[str, list[int], onnx.TensorProto]],
             index: dict[str, int]) -> set[int]:
    """Each folded value an initializer of ``scope``'s graph, its node's output renamed; the
    nodes that computed them and that nothing reads any more removed, with the constants
    only they read and their value_info. Returns the positions of the nodes removed."""
    g, nodes = scope.graph, scope.nodes
    taken = set(index) | {t.name for t in g.initializer} | {v.name for v in g.input}
    for value, _, tensor in folds:
        made = nodes[index[value]]
        fresh, k = f"{value}/folded", 1
        while fresh in taken:
            fresh, k = f"{value}/folded_{k}", k + 1
        taken.add(fresh)
        made.output[list(made.output).index(value)] = fresh
        g.initializer.append(tensor)
    reads = Counter(chain.from_iterable(n.input for n in nodes))
    reads.update(o.name for o in g.output)
    for n in nodes:  # what subgraphs read of this graph's values (once each: enough)
        if may_hold_subgraphs(n.domain, n.op_type):
            for _, sg in subgraphs(n):
                reads.update(used_names(sg.node) | {o.name for o in sg.output})
    gone: dict[int, list] = {}
    for i in sorted(set(chain.from_iterable(at for _, at, _ in folds)), reverse=True):
        n = nodes[i]
        if all(not o or not reads[o] for o in n.output):
            gone[i] = []
            reads.subtract(n.input)
    dead = {o for i in gone for o in nodes[i].output}
    leaves = {x for i in gone for x in nodes[i].input} - dead
    splice(nodes, gone)
    keep = [vi for vi in g.value_info if vi.name not in dead]
    if len(keep) != len(g.value_info):
        del g.value_info[:]
        g.value_info.extend(keep)
    remove_unused_constants(scope, leaves)
    return set(gone)

