"""Element types and static shapes of a model's values, computed only when a node to inline
needs them."""

from __future__ import annotations

import os

import onnx

from ... import typerules, validate
from ...graph.facts import static_shapes
from ...graph.scopes import subgraphs
from ...opsets import normalize_domain

_SAME_SHAPE_OPS = frozenset((
    "Abs", "BatchNormalization", "Cast", "Ceil", "Clip", "Dropout", "Elu", "Exp", "Floor",
    "HardSigmoid", "Identity", "InstanceNormalization", "LRN", "LeakyRelu", "Log", "Neg",
    "Reciprocal", "Relu", "Selu", "Sigmoid", "Softplus", "Softsign", "Sqrt", "Tanh",
    "ThresholdedRelu", "PRelu",
))


class Facts:
    """Element types and shapes of ``model``'s values, computed only when a site needs them.
    ``census``: what the structural check saw of ``model`` (its propagated types are used)."""

    def __init__(self, model: onnx.ModelProto, census: validate.Census | None = None,
                 base_dir: str | os.PathLike | None = None):
        self.model = model
        self.base_dir = base_dir  # the model's folder, where its external data is
        self._types: dict[str, int] | None = None
        self._ftypes: dict = {}
        self._inferred = False
        self._shapes: dict | None = None
        # The census's walk already propagated graph types below opset 15 (the same rules,
        # see opshift.typerules); only values it could not type need the full propagation.
        self._census_types = census.types if census is not None else None

    def _collect(self) -> tuple[dict[str, int], dict[tuple[str, str], dict[str, int]]]:
        """(value -> elem type for graphs, per-function value -> elem type).

        Function inputs take the types of their call sites when every call of known type agrees.
        """
        local = {(f.domain, f.name): f for f in self.model.functions}
        calls: dict[tuple[str, str], list[list[int]]] = {}
        ftypes: dict[tuple[str, str], dict[str, int]] = {}

        def graph(types, g: onnx.GraphProto) -> None:
            typerules.declared_types(types, g)
            nodes(types, g.node)

        def nodes(types, ns) -> None:
            for n in ns:
                if (n.domain, n.op_type) in local:
                    key = (n.domain, n.op_type)
                    calls.setdefault(key, []).append([types.get(i, 0) for i in n.input])
                    callee = ftypes.get(key, {})
                    for o, fo in zip(n.output, local[key].output):
                        if fo in callee:
                            types.setdefault(o, callee[fo])
                elif normalize_domain(n.domain) == "" and n.output:
                    typerules.propagate(typerules.rule(n.op_type), n, n.input, n.output[0],
                                        types)
                for _, g in subgraphs(n):
                    graph(types, g)

        for _ in range(2 if local else 1):  # a second round for types across calls
            types: dict[str, int] = {}
            calls.clear()
            graph(types, self.model.graph)
            for key, f in local.items():
                ft: dict[str, int] = {}
                typerules.value_info_types(ft, getattr(f, "value_info", []))
                sites = calls.get(key, [])
                for i, name in enumerate(f.input):
                    seen = {c[i] for c in sites if i < len(c)} - {0}
                    if len(seen) == 1:  # every call whose type is known agrees
                        ft.setdefault(name, seen.pop())
                nodes(ft, f.node)
                ftypes[key] = ft
        return types, ftypes

    def elem_type(self, name: str, function: onnx.FunctionProto | None = None) -> int:
        """The element type of value ``name`` (of a graph, or of ``function``'s body), 0 when
        neither declarations, propagation nor onnx's shape inference give it."""
        if function is None and self._census_types:
            t = self._census_types.get(name)
            if t:
                return t
        if self._types is None:
            self._types, self._ftypes = self._collect()
        key = None if function is None else (function.domain, function.name)
        types = self._types if key is None else self._ftypes.get(key, {})
        t = types.get(name, 0)
        if not t and not self._inferred:
            self._inferred = True
            m = onnx.ModelProto()
            m.CopyFrom(self.model)
            try:
                m = onnx.shape_inference.infer_shapes(m, strict_mode=False)
            except Exception:  # best effort; an unknown type is reported by the caller
                return 0
            more, fmore = Facts(m)._collect()  # (call sites typed by inference type bodies)
            for have, new in ((self._types, more),
                              *((self._ftypes.setdefault(k, {}), v) for k, v in fmore.items())):
                have.update({k: v for k, v in new.items() if k not in have})
            types = self._types if key is None else self._ftypes.get(key, {})
            t = types.get(name, 0)
        return t

    def shape(self, name: str):
        """Static shape of ``name``: onnx inference, else walking back through ops whose
        first output has their first input's shape (legacy ops such as BatchNormalization-1
        have no shape inference)."""
        if self._shapes is None:
            self._shapes = static_shapes(self.model)
            self._producer = {}

            def nodes(ns) -> None:
                for n in ns:
                    if n.output:
                        self._producer[n.output[0]] = n
                    for _, g in subgraphs(n):
                        nodes(g.node)

            nodes(self.model.graph.node)
        seen = 0
        while name not in self._shapes and seen < 1000:
            n = self._producer.get(name)
            if n is None or n.op_type not in _SAME_SHAPE_OPS or not n.input:
                return None
            name = n.input[0]
            seen += 1
        return self._shapes.get(name)

