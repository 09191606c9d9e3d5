"""Shared plumbing for the ModelProto passes: scopes, fresh names, constants, shapes, splicing.

Passes edit ``onnx.ModelProto`` in place and touch only the nodes that change. A *scope* is a
node list with the opsets in force for it: the main graph, every subgraph (If/Loop/Scan
bodies, which inherit their parent's opsets) and every model-local function (its own opset
imports, falling back to the model's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ..errors import function_label
from ..opsets import has_graph_attribute, normalize_domain
from ..wellformed import to_array


@dataclass
class Scope:
    """One node list and the opsets in force for it."""

    label: str  # e.g. "graph 'main'", "function 'local::F'", "graph 'main'/node 'if'/then"
    nodes: object  # RepeatedCompositeFieldContainer[onnx.NodeProto]
    opsets: dict[str, int]
    graph: onnx.GraphProto | None = None
    function: onnx.FunctionProto | None = None
    owner: onnx.NodeProto | None = None  # the If/Loop/Scan node of a subgraph

    @property
    def opset(self) -> int | None:
        return self.opsets.get("")


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


def _graph_scopes(graph: onnx.GraphProto, opsets: dict[str, int], label: str,
                  owner: onnx.NodeProto | None = None) -> Iterator[Scope]:
    yield Scope(label, graph.node, opsets, graph=graph, owner=owner)
    # (after the yield: the caller may have edited the list) one C-speed pass finds which op
    # types can hold subgraphs; only their nodes are visited
    holders = {o for d, o in {(n.domain, n.op_type) for n in graph.node}
               if may_hold_subgraphs(d, o)}
    if not holders:
        return
    for node in graph.node:
        if node.op_type not in holders:
            continue
        for attr, g in subgraphs(node):
            yield from _graph_scopes(g, opsets, f"{label}/node {node.name!r}/{attr}", node)


def iter_scopes(model: onnx.ModelProto, *, functions: bool = True) -> Iterator[Scope]:
    """Main graph, its subgraphs (depth first), then every model-local function's body."""
    yield from _graph_scopes(model.graph, model_opsets(model), f"graph {model.graph.name!r}")
    if functions:
        for f in model.functions:
            fops = function_opsets(model, f)
            label = function_label(f)
            yield Scope(label, f.node, fops, function=f)
            for node in f.node:
                for attr, g in subgraphs(node):
                    yield from _graph_scopes(g, fops, f"{label}/node {node.name!r}/{attr}", node)


def node_kinds(model: onnx.ModelProto) -> set[tuple[str, str]]:
    """(domain, op_type) of every node anywhere in the model: graphs, subgraphs, functions."""
    return {(n.domain, n.op_type) for scope in iter_scopes(model) for n in scope.nodes}


def all_names(model: onnx.ModelProto) -> set[str]:
    """Every node name and value name used anywhere in the model."""
    names: set[str] = set()

    def graph(g: onnx.GraphProto) -> None:
        names.update(v.name for v in g.input)
        names.update(v.name for v in g.output)
        names.update(t.name for t in g.initializer)
        nodes(g.node)

    def nodes(ns: Iterable[onnx.NodeProto]) -> None:
        for n in ns:
            names.add(n.name)
            names.update(n.output)
            for _, g in subgraphs(n):
                graph(g)

    graph(model.graph)
    for f in model.functions:
        names.update(f.input)
        names.update(f.output)
        nodes(f.node)
    names.discard("")
    return names


class Names:
    """Fresh, readable, unique names: ``fresh('prelu_3/neg_mask')``.

    A name in use is either in the set ``_used`` or *claimed*: inline's emitters take all
    the names of a replacement, ``base + suffix`` for each of its suffixes, by recording
    ``_claims[base] = suffixes`` (see :meth:`claim`). Each suffix is "/" and a text without
    "/", so a claimed name's base is its part before the last "/". A 1,000-node inline makes
    some 2,000 names: adding them to ``_used`` grew it to a 256 KiB table and kept 130 KiB of
    strings, several times what the rest of the pass allocates (on a fresh heap every new
    4 KiB costs a page fault).
    """

    def __init__(self, model: onnx.ModelProto):
        self._used = all_names(model)
        self._claims: dict[str, tuple[str, ...]] = {}

    @classmethod
    def from_used(cls, used: set[str]) -> Names:
        """Names avoiding ``used`` (a set a pass already collected; it is extended)."""
        names = cls.__new__(cls)
        names._used = used
        names._claims = {}
        return names

    def __contains__(self, name: str) -> bool:
        if name in self._used:
            return True
        if self._claims:
            base, sep, tail = name.rpartition("/")
            return bool(sep) and "/" + tail in self._claims.get(base, ())
        return False

    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self:
            name = f"{base}_{i}"
            i += 1
        self._used.add(name)
        return name

    def reserve(self, name: str) -> None:
        self._used.add(name)

    def claim(self, base: str, suffixes: tuple[str, ...]) -> bool:
        """Take every ``base + suffix`` at once if all are free and ``base`` has claimed
        nothing yet; False (nothing taken) otherwise. Each suffix must be "/" and a text
        without "/" (:func:`claimable`)."""
        if base in self._claims or not self._used.isdisjoint([base + s for s in suffixes]):
            return False
        self._claims[base] = suffixes
        return True


def claimable(suffixes: Iterable[str]) -> bool:
    """Suffixes :meth:`Names.claim` can take: each "/" and a text without "/"."""
    return all(s[:1] == "/" and "/" not in s[1:] for s in suffixes)


def node_label(node: onnx.NodeProto, index: int) -> str:
    """A base for names derived from ``node``: its name, or ``<op>_<index>``."""
    return node.name or f"{node.op_type.lower()}_{index}"


def constants(scope: Scope, model: onnx.ModelProto | None = None) -> dict[str, onnx.TensorProto]:
    """Value name -> TensorProto, for initializers and Constant(value=...) outputs in scope."""
    out: dict[str, onnx.TensorProto] = {}
    if scope.graph is not None:
        for t in scope.graph.initializer:
            out[t.name] = t
    for n in scope.nodes:
        if n.op_type == "Constant" and normalize_domain(n.domain) == "" and len(n.attribute) == 1:
            a = n.attribute[0]
            if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                out[n.output[0]] = a.t
    return out


#: TensorProto data_type -> (little-endian numpy dtype, typed field), for the plain types whose
#: decoding is a straight copy.
_PLAIN_TENSOR_TYPES = {
    onnx.TensorProto.FLOAT: (np.dtype("<f4"), "float_data"),
    onnx.TensorProto.DOUBLE: (np.dtype("<f8"), "double_data"),
    onnx.TensorProto.INT64: (np.dtype("<i8"), "int64_data"),
    onnx.TensorProto.INT32: (np.dtype("<i4"), "int32_data"),
}


def plain_array(t: onnx.TensorProto) -> np.ndarray | None:
    """The value of an in-memory tensor of a plain type (float, double, int64, int32),
    decoded directly; None for other tensors. The constants the passes and fusion checks
    read are mostly such small tensors, and numpy_helper's general decoding (and its set-up
    on first use, ~0.2 ms a process) costs more than the rest of reading them."""
    if t.data_location != onnx.TensorProto.DEFAULT:
        return None
    plain = _PLAIN_TENSOR_TYPES.get(t.data_type)
    if plain is None:
        return None
    dtype, field_name = plain
    if t.HasField("raw_data"):
        arr = np.frombuffer(t.raw_data, dtype=dtype)
    else:
        arr = np.array(list(getattr(t, field_name)), dtype=dtype)
    dims = tuple(t.dims) if len(t.dims) else ()  # (tuple() of an empty field costs ~2 us)
    return arr.reshape(dims) if arr.size == math.prod(dims) else None


def tensor_array(t: onnx.TensorProto, base_dir: str | None = None) -> np.ndarray:
    """The value of ``t`` (external data read from ``base_dir``)."""
    arr = plain_array(t)
    return arr if arr is not None else to_array(t, base_dir or "")


def splice(nodes, replacements: dict[int, list[onnx.NodeProto]]) -> None:
    """Replace ``nodes[i]`` by ``replacements[i]`` (possibly several nodes) in one pass.

    Only the tail from the first replaced index is rebuilt.
    """
    if not replacements:
        return
    first = min(replacements)
    new: list[onnx.NodeProto] = []
    for i in range(first, len(nodes)):
        r = replacements.get(i)
        if r is None:
            new.append(nodes[i])
        else:
            new.extend(r)
    del nodes[first:]
    nodes.extend(new)


def static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int | str | None, ...]]:
    """Value name -> shape (ints, symbolic names, or None) from onnx shape inference.

    Covers the main graph, subgraphs and functions as far as onnx infers them; a value with
    no known rank is absent. Runs on a copy without external data loaded.
    """
    m = onnx.ModelProto()
    m.CopyFrom(model)
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    except Exception:  # inference is a best effort; callers treat missing shapes as unknown
        m = model
    shapes: dict[str, tuple[int | str | None, ...]] = {}

    def take(vis: Iterable[onnx.ValueInfoProto]) -> None:
        for vi in vis:
            if not vi.type.HasField("tensor_type"):
                continue
            tt = vi.type.tensor_type
            if not tt.HasField("shape"):
                continue
            shapes[vi.name] = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tt.shape.dim)

    def graph(g: onnx.GraphProto) -> None:
        take(g.input)
        take(g.output)
        take(g.value_info)
        for t in g.initializer:
            shapes[t.name] = tuple(t.dims)
        for n in g.node:
            for _, sg in subgraphs(n):
                graph(sg)
            if n.op_type == "Constant" and n.attribute and n.attribute[0].type == 4:
                shapes[n.output[0]] = tuple(n.attribute[0].t.dims)

    graph(m.graph)
    for f in m.functions:
        take(getattr(f, "value_info", []))
    return shapes


def replace_ir_model(model, new) -> None:
    """Make ``model`` (the ``onnx_ir.Model`` a pass manager holds) become ``new`` in place:
    the ``onnx_ir`` passes convert a serialized copy and must hand back the same object."""
    for cls in type(model).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot != "__weakref__" and hasattr(new, slot):
                setattr(model, slot, getattr(new, slot))
    if hasattr(new, "__dict__"):
        model.__dict__.update(new.__dict__)


def lazy_attribute(namespace: dict[str, Any], name: str, make: Callable[[], Any]
                   ) -> Callable[[str], Any]:
    """A module ``__getattr__`` that makes ``name`` with ``make()`` on first use and keeps it
    in ``namespace`` (the module's globals). The pass adapters are built this way so that
    importing a pass module (the CLI does) does not import onnx_ir, which imports sympy."""

    def __getattr__(attr: str) -> Any:
        if attr != name:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {attr!r}")
        value = namespace[name] = make()
        return value

    return __getattr__


def run_as_ir_pass(model, run: Callable[[onnx.ModelProto], Any],
                   replace: Callable[[Any, Any], None] = replace_ir_model) -> tuple[Any, Any]:
    """The body of opshift's ``onnx_ir`` pass adapters: serialize ``model``, ``run`` the
    ModelProto core on the copy, and when its result says it modified it, make ``model``
    hold the result (``replace``). Returns (the core's result, the ``PassResult``)."""
    import onnx_ir as ir
    from onnx_ir.passes import PassResult

    proto = ir.serde.serialize_model(model)
    result = run(proto)
    if result.modified:
        replace(model, ir.serde.deserialize_model(proto))
    return result, PassResult(model, modified=bool(result.modified))
