"""Structural checks that every command runs before it rewrites a model.

onnx's checker is thorough but slow on big models and stops at the first problem with a
multi-line message. These checks are one O(nodes) walk that catches what would make a rewrite
meaningless or unsafe -- a cycle or use before definition, a value defined twice, duplicate
graph outputs, a domain used without an opset import, an op that does not exist at the
declared opset -- and report the first one in one line naming graph, node and value.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import onnx

from .broadcast import SlopeRule, rule_for_version, slope_shape_for
from .errors import EvaluationError, ModelLoadError, where
from .opsets import ACTIVATIONS, has_graph_attribute, normalize_domain, schema

#: Problem kinds, so a caller can tolerate some (``fix`` repairs duplicate names).
CYCLE = "cycle"
DUPLICATE_VALUE = "duplicate-value"
DUPLICATE_OUTPUT = "duplicate-output"
MISSING_OPSET = "missing-opset"
UNKNOWN_OP = "unknown-op"
ATTRIBUTE = "attribute"  # an attribute the op version does not define, or of the wrong type
SLOPE = "slope"  # a PRelu slope that cannot broadcast to X's declared shape


class _Walker:
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.functions = {(normalize_domain(f.domain), f.name) for f in model.functions}
        self.problems: list[tuple[str, str]] = []
        self._shapes: dict[int, tuple[dict[str, tuple], dict[str, tuple]]] = {}

    def add(self, kind: str, msg: str) -> None:
        self.problems.append((kind, msg))

    def graph(self, g: onnx.GraphProto, opsets: dict[str, int], outer: frozenset[str] | set[str],
              label: str) -> None:
        defined: set[str] = set()
        for name in [v.name for v in g.input] + [t.name for t in g.initializer]:
            if name in defined and name not in {t.name for t in g.initializer}:
                self.add(DUPLICATE_VALUE, f"{label}: input {name!r} is declared twice")
            defined.add(name)
        self.nodes(g.node, opsets, defined, outer, label, g)
        seen: set[str] = set()
        for vi in g.output:
            if vi.name in seen:
                self.add(DUPLICATE_OUTPUT, f"{label}: graph output {vi.name!r} is listed twice")
            seen.add(vi.name)
            if vi.name not in defined and vi.name not in outer:
                self.add(CYCLE, f"{label}: graph output {vi.name!r} is never computed")

    def nodes(self, nodes: Iterable[onnx.NodeProto], opsets: dict[str, int], defined: set[str],
              outer: frozenset[str] | set[str], label: str,
              graph: onnx.GraphProto | None = None) -> None:
        # Hot loop (100k-node models): slices and set operations run in C; the slow,
        # message-building paths run only when something is wrong.
        defined.add("")  # an empty name is an absent optional input/output
        if outer:
            defined.update(outer)
        flags_by_op: dict[tuple[str, str], int] = {}
        for n in nodes:
            ins = n.input[:]
            if not defined.issuperset(ins):
                for name in ins:
                    if name not in defined:
                        self.add(CYCLE, f"{label}: {where(n)} uses {name!r} before it is "
                                        "defined (cycle, unsorted graph, or missing input)")
            key = (n.domain, n.op_type)
            flags = flags_by_op.get(key)
            if flags is None:
                flags = flags_by_op[key] = self.op(n, opsets, label)
            if flags:
                if flags & _ACTIVATION:
                    self.activation(n, ins, opsets.get("", 0), label, graph)
                if flags & _SUBGRAPHS:
                    for a in n.attribute:
                        subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
                            list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
                        for sg in subs:
                            self.graph(sg, opsets, set(defined), f"{label}/{where(n)}/{a.name}")
            outs = n.output[:]
            if not defined.isdisjoint(outs):
                for name in outs:
                    if name and name in defined:
                        self.add(DUPLICATE_VALUE, f"{label}: {where(n)} defines {name!r}, "
                                                  "which is already defined")
            defined.update(outs)

    def activation(self, n: onnx.NodeProto, ins: list[str], opset: int, label: str,
                   graph: onnx.GraphProto | None) -> None:
        """Attributes against the schema in force; a constant PRelu slope against X's
        declared shape (graph input, output or value_info: no shape inference here)."""
        version, types, rule = _activation_spec(n.op_type, opset)
        for a in n.attribute:
            if types.get(a.name) != a.type:
                self.attribute(n, a, version, label)
        if rule is None or graph is None or len(ins) < 2:
            return
        declared, inits = self._declared(graph)
        x_shape = declared.get(ins[0])
        slope_shape = inits.get(ins[1])
        if x_shape is None or slope_shape is None:
            return
        try:
            slope_shape_for(x_shape, slope_shape, rule)
        except EvaluationError as e:
            self.add(SLOPE, f"{label}: {where(n, version=version)}: {e}")

    def attribute(self, n: onnx.NodeProto, a: onnx.AttributeProto, version: int,
                  label: str) -> None:
        spec = schema(n.op_type, version, "").attributes.get(a.name)
        if spec is None:
            if a.name != "consumed_inputs":  # stale consumed_inputs is fix's job
                self.add(ATTRIBUTE, f"{label}: {where(n, version=version)}: attribute "
                                    f"{a.name!r} is not defined for this version")
        else:
            got = onnx.AttributeProto.AttributeType.Name(a.type)
            self.add(ATTRIBUTE, f"{label}: {where(n, version=version)}: attribute {a.name!r} "
                                f"is {got}, the schema wants {spec.type.name}")

    def _declared(self, graph: onnx.GraphProto) -> tuple[dict[str, tuple], dict[str, tuple]]:
        """(declared value shapes, initializer shapes) of ``graph``, built once."""
        cached = self._shapes.get(id(graph))
        if cached is None:
            shapes: dict[str, tuple] = {}
            for vi in (*graph.input, *graph.output, *graph.value_info):
                tt = vi.type.tensor_type
                if vi.type.HasField("tensor_type") and tt.HasField("shape"):
                    shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value")
                                            else (d.dim_param or None) for d in tt.shape.dim)
            cached = shapes, {t.name: tuple(t.dims) for t in graph.initializer}
            self._shapes[id(graph)] = cached
        return cached

    def op(self, n: onnx.NodeProto, opsets: dict[str, int], label: str) -> int:
        """Check the op exists once per (domain, op); return what else its nodes need."""
        domain = normalize_domain(n.domain)
        if (domain, n.op_type) in self.functions:
            return _SUBGRAPHS
        if domain not in opsets:
            self.add(MISSING_OPSET, f"{label}: {where(n)} uses domain {domain or 'ai.onnx'!r}, "
                                    "which has no opset import")
            return _SUBGRAPHS
        if domain:
            return _SUBGRAPHS
        if schema(n.op_type, opsets[domain], "") is None:
            self.add(UNKNOWN_OP, f"{label}: {where(n)}: no op {n.op_type!r} in ai.onnx at "
                                 f"opset {opsets[domain]}")
            return 0
        flags = _SUBGRAPHS if has_graph_attribute(n.op_type) else 0
        return flags | (_ACTIVATION if n.op_type in ACTIVATIONS else 0)


_ACTIVATION, _SUBGRAPHS = 1, 2


@functools.cache
def _activation_spec(op: str, opset: int) -> tuple[int, dict[str, int], SlopeRule | None]:
    """(version in force, attribute name -> AttributeProto type, PRelu slope rule or None).

    ``consumed_inputs`` maps to its type even where the version no longer defines it, so a
    stale one is left for ``fix`` (it is not bad input for the rewrites)."""
    s = schema(op, opset, "")
    types = {name: a.type.value for name, a in s.attributes.items()}
    types.setdefault("consumed_inputs", onnx.AttributeProto.INTS)
    rule = rule_for_version(s.since_version) if op == "PRelu" else None
    return s.since_version, types, rule


def problems(model: onnx.ModelProto) -> list[tuple[str, str]]:
    """All structural problems as (kind, one-line message), in graph order."""
    w = _Walker(model)
    ops = {normalize_domain(i.domain): i.version for i in model.opset_import}
    w.graph(model.graph, ops, frozenset(), f"graph {model.graph.name!r}")
    for f in model.functions:
        fops = dict(ops)
        fops.update({normalize_domain(i.domain): i.version for i in f.opset_import})
        w.nodes(f.node, fops, set(f.input), frozenset(), f"function {f.name!r}")
    return w.problems


def check(model: onnx.ModelProto, origin: str = "<model>", *,
          allow: Iterable[str] = ()) -> None:
    """Raise :class:`ModelLoadError` for the first problem whose kind is not in ``allow``."""
    allowed = set(allow)
    for kind, msg in problems(model):
        if kind not in allowed:
            raise ModelLoadError(f"{origin}: {msg}")
