"""Scopes of a model: every node list with the opsets in force for it.

A *scope* is the main graph, a subgraph (If/Loop/Scan bodies, which inherit their parent's
opsets) or a model-local function (its own opset imports, falling back to the model's).
Also what a node holds: its subgraphs, the tensor of a Constant.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, KeysView
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from opshift.errors import function_label
from opshift.opsets import has_graph_attribute, normalize_domain


@dataclass(eq=False)
class Scope:
    """One node list and the opsets in force for it."""

    label: str  # e.g. "graph 'main'", "function 'local::F'", "graph 'main'/node 'if'/then"
    nodes: object  # RepeatedCompositeFieldContainer[onnx.NodeProto]
    opsets: dict[str, int]
    graph: onnx.GraphProto | None = None
    function: onnx.FunctionProto | None = None
    owner: onnx.NodeProto | None = None  # the If/Loop/Scan node of a subgraph
    parent: Scope | None = None  # the scope holding ``owner``
    _counts: Counter[tuple[str, str]] | None = field(default=None, repr=False)

    @property
    def counts(self) -> Counter[tuple[str, str]]:
        """How many of the scope's nodes have each (op_type, domain) (read once: edit the
        list, read it no more)."""
        if self._counts is None:
            self._counts = Counter((n.op_type, n.domain) for n in self.nodes)
        return self._counts

    @property
    def kinds(self) -> KeysView[tuple[str, str]]:
        """(op_type, domain) of the scope's nodes, as a set-like view of :attr:`counts`."""
        return self.counts.keys()

    @property
    def opset(self) -> int | None:
        return self.opsets.get("")

    @property
    def root(self) -> Scope:
        """The main graph or the function this scope is nested in: names are shared within
        a root (a subgraph reads its enclosing graphs' values), never across roots."""
        s = self
        while s.parent is not None:
            s = s.parent
        return s

    def outputs(self) -> list[str]:
        """The names this scope hands out: its graph's outputs or its function's."""
        if self.graph is not None:
            return [o.name for o in self.graph.output]
        return list(self.function.output) if self.function is not None else []


def model_opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {normalize_domain(i.domain): i.version for i in model.opset_import}


def function_opsets(model: onnx.ModelProto, f: onnx.FunctionProto) -> dict[str, int]:
    ops = model_opsets(model)
    ops.update({normalize_domain(i.domain): i.version for i in f.opset_import})
    return ops


def may_hold_subgraphs(domain: str, op: str) -> bool:
    """Whether a node of this kind can have a graph attribute: If/Loop/Scan, or any op off the
    default domain (whose schema opshift does not know)."""
    return domain not in ("", "ai.onnx") or has_graph_attribute(op)


def subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """(attribute label, graph) of each subgraph ``node`` holds, in attribute order (a GRAPHS
    attribute's graphs labelled ``name[i]``)."""
    if not may_hold_subgraphs(node.domain, node.op_type):
        return  # fast path: reading node.attribute of every node is the cost of a walk
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.name, a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            for i, g in enumerate(a.graphs):
                yield f"{a.name}[{i}]", g


def walk_nodes(nodes) -> Iterator[onnx.NodeProto]:
    """Every node of ``nodes`` and, depth first, of the subgraphs they hold."""
    for n in nodes:
        yield n
        for _, g in subgraphs(n):
            yield from walk_nodes(g.node)


def _graph_scopes(graph: onnx.GraphProto, opsets: dict[str, int], label: str,
                  owner: onnx.NodeProto | None = None,
                  parent: Scope | None = None) -> Iterator[Scope]:
    scope = Scope(label, graph.node, opsets, graph=graph, owner=owner, parent=parent)
    yield scope
    yield from _nested(scope, opsets, label)


def _nested(scope: Scope, opsets: dict[str, int], label: str) -> Iterator[Scope]:
    # (after the caller's yield: it may have edited the list) one C-speed pass finds which op
    # types can hold subgraphs; only their nodes are visited
    holders = {o for o, d in scope.kinds if may_hold_subgraphs(d, o)}
    if not holders:
        return
    for node in scope.nodes:
        if node.op_type not in holders:
            continue
        for attr, g in subgraphs(node):
            yield from _graph_scopes(g, opsets, f"{label}/node {node.name!r}/{attr}", node,
                                     scope)


def iter_scopes(model: onnx.ModelProto, *, functions: bool = True) -> Iterator[Scope]:
    """Main graph, its subgraphs (depth first), then every model-local function's body (and
    its subgraphs). A subgraph comes after the scope holding it."""
    yield from _graph_scopes(model.graph, model_opsets(model), f"graph {model.graph.name!r}")
    if functions:
        for f in model.functions:
            fops = function_opsets(model, f)
            label = function_label(f)
            scope = Scope(label, f.node, fops, function=f)
            yield scope
            yield from _nested(scope, fops, label)


def node_kinds(model: onnx.ModelProto) -> set[tuple[str, str]]:
    """(domain, op_type) of every node anywhere in the model: graphs, subgraphs, functions."""
    return {(d, o) for scope in iter_scopes(model) for o, d in scope.kinds}


def node_label(node: onnx.NodeProto, index: int) -> str:
    """A base for names derived from ``node``: its name, or ``<op>_<index>``."""
    return node.name or f"{node.op_type.lower()}_{index}"


def arrange(nodes, order: list[onnx.NodeProto], start: int = 0) -> None:
    """Make the node list ``nodes`` hold ``order`` after its first ``start`` nodes, in place.

    Nodes of the list named in ``order`` (the wrappers it handed out, e.g. ``list(nodes)``
    or ``nodes.add()``, kept alive by the caller) are moved into place by one (stable) sort
    of the list, which moves messages and copies none; other nodes are copied in; nodes
    after ``start`` that ``order`` leaves out are deleted. Rebuilding the list instead
    (``del`` and ``extend``) copies every node it keeps into the model's arena, whose
    memory is held until the model is freed.
    """
    held = nodes[start:]  # alive through the sort, so the list hands out these same objects
    key: dict[int, int] = dict.fromkeys(map(id, held), -2)  # -2: not listed (deleted)
    for k, node in enumerate(order):
        if key.get(id(node)) == -2:
            key[id(node)] = k
        else:  # a node from elsewhere, or one listed twice: a copy
            nodes.append(node)
            held.append(nodes[-1])
            key[id(held[-1])] = k
    gone = sum(1 for k in key.values() if k == -2)
    last, get = len(order), key.get
    nodes.sort(key=lambda n: last if (k := get(id(n), -1)) == -2 else k)
    if gone:
        del nodes[len(nodes) - gone:]


def splice(nodes, replacements: dict[int, list[onnx.NodeProto]]) -> None:
    """Replace ``nodes[i]`` by ``replacements[i]`` (possibly several nodes, or none) in place
    (:func:`arrange`, from the first replaced node on)."""
    if not replacements:
        return
    first = min(replacements)
    order: list[onnx.NodeProto] = []
    for i in range(first, len(nodes)):
        r = replacements.get(i)
        if r is None:
            order.append(nodes[i])
        else:
            order.extend(r)
    arrange(nodes, order, first)


_CONSTANT_VALUE_ATTRS = ("value_float", "value_floats", "value_int", "value_ints")


def constant_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor a default-domain Constant node makes (``value``, or a new tensor for
    ``value_float(s)``/``value_int(s)``); None for other nodes and other Constants."""
    if node.op_type != "Constant" or normalize_domain(node.domain) != "":
        return None
    for a in node.attribute:
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            return a.t
        if a.name in _CONSTANT_VALUE_ATTRS:
            v = helper.get_attribute_value(a)
            dtype = np.float32 if "float" in a.name else np.int64
            return numpy_helper.from_array(np.array(v, dtype=dtype))
    return None


def held_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor a Constant node holds as its one ``value`` attribute (which an edit may
    change in place); None otherwise."""
    if (node.op_type == "Constant" and normalize_domain(node.domain) == ""
            and len(node.output) == 1 and len(node.attribute) == 1
            and node.attribute[0].name == "value"
            and node.attribute[0].type == onnx.AttributeProto.TENSOR):
        return node.attribute[0].t
    return None
