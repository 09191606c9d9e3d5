"""Running a model: graphs, subgraphs with outer scope, model-local functions."""

from __future__ import annotations

import functools
from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from opshift import opsets
from opshift.errors import EvaluationError, LimitError, UnsupportedError, where
from opshift.evaluator import kernels, registry
from opshift.evaluator.lifetimes import last_reads
from opshift.evaluator.values import Value
from opshift.io.tensors import tensor_array


@dataclass
class NodeContext:
    """What an op implementation sees besides its inputs."""

    node: onnx.NodeProto
    op: str
    domain: str
    version: int
    attrs: dict[str, Any]
    runtime: Runtime
    scope: Mapping[str, Value]
    opsets: Mapping[str, int]
    graph_name: str = ""
    fattrs: Mapping[str, onnx.AttributeProto] | None = None  # the calling function's

    def where(self) -> str:
        return where(self.node, op=self.op, version=self.version, domain=self.domain,
                     graph=self.graph_name or None)

    def error(self, msg: str) -> EvaluationError:
        return EvaluationError(f"{self.where()}: {msg}")

    def unsupported(self, msg: str) -> UnsupportedError:
        return UnsupportedError(f"{self.where()}: {msg}")

    def run_subgraph(self, graph: onnx.GraphProto, inputs: Sequence[Value]) -> list[Value]:
        """Run ``graph`` with positional ``inputs``; it sees this node's scope."""
        return self.runtime.run_graph(graph, self.opsets, positional=inputs, outer=self.scope)


@dataclass
class _Sig:
    """Per (op, version): which inputs/outputs share which type parameter."""

    inputs: list[tuple[str, bool]]  # (type_str or param, variadic)
    outputs: list[str]
    allowed: dict[str, frozenset[str]]
    attr_types: dict[str, int] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    required_inputs: tuple[int, ...] = ()  # positions of the inputs that are not optional


@functools.cache
def _signature(op: str, version: int, domain: str) -> _Sig:
    s = opsets.schema(op, version, domain)
    assert s is not None
    allowed = {tc.type_param_str: frozenset(tc.allowed_type_strs) for tc in s.type_constraints}
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    # A heterogeneous variadic (Loop's, Scan's V) binds each value to its own type: marked
    # with an empty type_str so no binding is shared across its values.
    ins = [("" if p.option == variadic and not p.is_homogeneous else p.type_str,
            p.option == variadic) for p in s.inputs]
    outs = [p.type_str for p in s.outputs]
    attr_types = {n: a.type.value for n, a in s.attributes.items()}
    # consumed_inputs (required by a few version-1 schemas) is an ignored hint: not enforced
    required = frozenset(n for n, a in s.attributes.items()
                         if a.required and n != "consumed_inputs")
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    kept = registry.absent_ok(domain, op, version)  # inputs opshift's kernel runs without
    required_inputs = tuple(  # (an input that may be an optional may be an empty one: None)
        i for i, p in enumerate(s.inputs) if p.option == single and i not in kept
        and not any(t.startswith("optional(") for t in allowed.get(p.type_str, ())))
    return _Sig(ins, outs, allowed, attr_types, required, required_inputs)


_A = onnx.AttributeProto
#: how a kernel sees each kind of attribute (the rest as onnx.helper reads them)
_READ: dict[int, Any] = {
    _A.FLOAT: lambda a: a.f, _A.INT: lambda a: a.i,
    _A.INTS: lambda a: list(a.ints), _A.FLOATS: lambda a: list(a.floats),
    _A.STRING: lambda a: a.s.decode("utf-8"),
    _A.STRINGS: lambda a: [s.decode("utf-8") for s in a.strings],
    _A.TENSOR: lambda a: tensor_array(a.t),
    _A.GRAPH: lambda a: a.g,
}


def _attr_value(a: onnx.AttributeProto) -> Any:
    read = _READ.get(a.type)
    if read is not None:
        return read(a)
    if a.type == _A.SPARSE_TENSOR:
        raise UnsupportedError(f"attribute {a.name!r}: sparse tensors are not supported")
    return onnx.helper.get_attribute_value(a)


@functools.cache
def _defaults(op: str, version: int, domain: str) -> dict[str, Any]:
    s = opsets.schema(op, version, domain)
    out: dict[str, Any] = {}
    for name, a in s.attributes.items():
        d = a.default_value
        if d is not None and d.name:
            out[name] = _attr_value(d)
    return out


class _Where:
    """A node's location in error messages (``node 'n' (PRelu-6, graph 'g')``), formatted
    only when a message is: most nodes never need it."""

    __slots__ = ("node", "version", "domain", "graph")

    def __init__(self, node: onnx.NodeProto, version: int, domain: str, graph: str) -> None:
        self.node, self.version, self.domain, self.graph = node, version, domain, graph

    def __str__(self) -> str:
        return where(self.node, version=self.version, domain=self.domain, graph=self.graph or None)


class Runtime:
    """Evaluates one model. Initializer arrays are converted once and cached."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.opsets = {opsets.normalize_domain(i.domain): i.version for i in model.opset_import}
        self.functions = {(opsets.normalize_domain(f.domain), f.name,
                           getattr(f, "overload", "")): f for f in model.functions}
        # Caches keyed by id(): protobuf makes a message's object on access and frees it
        # after, and a later one may get the same id: each entry keeps its object alive.
        self._inits: dict[int, tuple[onnx.GraphProto, dict[str, np.ndarray]]] = {}
        self._prepared: dict[tuple[int, int | None], tuple] = {}
        #: (domain, op, opset) -> (impl, source, version, signature): the schema and kernel
        #: lookups, made once per kind of node rather than once per node
        self._kernels: dict[tuple[str, str, int], tuple] = {}
        #: (domain, op, version) -> the attributes of a node that sets none
        self._plain_attrs: dict[tuple[str, str, int], dict[str, Any]] = {}
        #: (signature, input dtypes) -> the type binding they passed the schema's check with
        self._bindings: dict[tuple, dict[str, np.dtype]] = {}
        #: id(node) -> (node, onnx.reference op instance), built on the node's first run
        self.reference_ops: dict[int, tuple[onnx.NodeProto, Any]] = {}

    # -- graphs -----------------------------------------------------------------------------
    def _initializers(self, graph: onnx.GraphProto) -> dict[str, np.ndarray]:
        hit = self._inits.get(id(graph))
        if hit is not None:
            return hit[1]
        arrays = {t.name: tensor_array(t) for t in graph.initializer}
        if len(graph.sparse_initializer):
            raise UnsupportedError(f"graph {graph.name!r}: sparse initializers are not "
                                   "supported")
        self._inits[id(graph)] = (graph, arrays)
        return arrays

    def run_graph(self, graph: onnx.GraphProto, graph_opsets: Mapping[str, int], *,
                  feeds: Mapping[str, Value] | None = None,
                  positional: Sequence[Value] | None = None,
                  outer: Mapping[str, Value] | None = None,
                  fattrs: Mapping[str, onnx.AttributeProto] | None = None,
                  once: bool = False, kept: dict[str, Value] | None = None) -> list[Value]:
        """The outputs of ``graph``. ``once``: it runs once (the model's main graph): no
        lookup is kept for another run, and each value is dropped after its last read.
        ``kept``: its keys name values to keep, filled in as they are computed."""
        local: dict[str, Value] = dict(self._initializers(graph))
        if positional is not None:
            if len(positional) != len(graph.input):
                raise EvaluationError(f"graph {graph.name!r} takes {len(graph.input)} inputs, "
                                      f"got {len(positional)}")
            for vi, v in zip(graph.input, positional):
                local[vi.name] = v
        if feeds:
            local.update(feeds)
        env: Mapping[str, Value] | dict[str, Value]
        env = ChainMap(local, outer) if outer is not None else local
        names, done = last_reads(graph) if once else ([None] * len(graph.node), {})
        if kept is not None:
            kept.update((k, env[k]) for k in kept if k in env)
        for i, (node, ins) in enumerate(zip(graph.node, names)):
            self.run_node(node, env, graph_opsets, graph.name, fattrs, not once, ins)
            if kept is not None:
                kept.update((o, env[o]) for o in node.output if o in kept and o in env)
            for name in done.get(i, ()):  # dropped after the node that reads it last
                local.pop(name, None)
        out = []
        for vi in graph.output:
            if vi.name not in env:
                raise EvaluationError(f"graph {graph.name!r}: output {vi.name!r} is never "
                                      "computed")
            out.append(env[vi.name])
        return out

    def run_function(self, f: onnx.FunctionProto, node: onnx.NodeProto, inputs: list[Value],
                     caller_opsets: Mapping[str, int],
                     caller_fattrs: Mapping[str, onnx.AttributeProto] | None) -> list[Value]:
        fopsets = dict(caller_opsets)
        fopsets.update({opsets.normalize_domain(i.domain): i.version for i in f.opset_import})
        attrs: dict[str, onnx.AttributeProto] = {}
        for a in getattr(f, "attribute_proto", []):
            attrs[a.name] = a
        for a in node.attribute:
            if a.ref_attr_name:
                if caller_fattrs and a.ref_attr_name in caller_fattrs:
                    b = onnx.AttributeProto()
                    b.CopyFrom(caller_fattrs[a.ref_attr_name])
                    b.name = a.name
                    attrs[a.name] = b
            else:
                attrs[a.name] = a
        env: dict[str, Value] = {}
        for i, name in enumerate(f.input):
            env[name] = inputs[i] if i < len(inputs) else None
        for n in f.node:
            self.run_node(n, env, fopsets, f"function {f.name}", attrs)
        missing = [o for o in f.output if o not in env]
        if missing:
            raise EvaluationError(f"function {f.name!r}: output {missing[0]!r} is never computed")
        return [env[o] for o in f.output]

    # -- nodes ------------------------------------------------------------------------------
    def run_node(self, node: onnx.NodeProto, env: Mapping[str, Value] | dict[str, Value],
                 graph_opsets: Mapping[str, int], graph_name: str,
                 fattrs: Mapping[str, onnx.AttributeProto] | None, keep: bool = True,
                 names: list[str] | None = None) -> None:
        inputs: list[Value] = []
        for name in node.input if names is None else names:
            if not name:
                inputs.append(None)
                continue
            try:
                inputs.append(env[name])
            except KeyError:
                raise EvaluationError(
                    f"{where(node, graph=graph_name or None)}: input {name!r} is not defined "
                    "before this node (unsorted graph, cycle, or missing input)") from None
        domain = node.domain
        if domain == "ai.onnx":
            domain = ""
        f = self.functions.get((domain, node.op_type, getattr(node, "overload", ""))) \
            if self.functions else None
        if f is not None:
            results = self.run_function(f, node, inputs, graph_opsets, fattrs)
        else:  # (a list)
            results = self._run_op(node, domain, inputs, env, graph_opsets, graph_name, fattrs,
                                   keep)
        for name, value in zip(node.output, results):
            if name:
                env[name] = value  # type: ignore[index]

    def _prepare(self, node, domain, graph_opsets, graph_name, fattrs, keep) -> tuple:
        """(impl, source, version, signature, attributes, location) of ``node``: looked up
        once per node and opset, unless its attributes refer to the calling function's; kept
        for the node's next run only with ``keep``."""
        opset = graph_opsets.get(domain)
        key = (id(node), opset)
        hit = self._prepared.get(key) if keep else None
        if hit is not None:
            return hit[1]
        impl, source, version, sig = self._kernel(node, domain, opset, graph_name)
        loc = _Where(node, version, domain, graph_name)
        attributes = node.attribute
        if attributes:
            attrs = self._attributes(node, version, domain, sig, loc, fattrs)
        else:  # the schema's defaults, the same dict for every such node (kernels only read)
            kind = (domain, node.op_type, version)
            attrs = self._plain_attrs.get(kind)
            if attrs is None:
                attrs = self._plain_attrs[kind] = self._attributes(node, version, domain, sig,
                                                                   loc, fattrs)
        prepared = (impl, source, version, sig, attrs, loc)
        if keep and (not attributes or not any(a.ref_attr_name for a in attributes)):
            # the entry keeps ``node`` alive: its id cannot then name another node
            self._prepared[key] = (node, prepared)
        return prepared

    def _kernel(self, node, domain: str, opset: int | None, graph_name: str) -> tuple:
        """(impl, source, version, signature) of ``node``'s op at ``opset``."""
        op_type = node.op_type
        hit = self._kernels.get((domain, op_type, opset))  # type: ignore[arg-type]
        if hit is not None:
            return hit
        if opset is None:
            raise UnsupportedError(f"{where(node, graph=graph_name or None)}: no opset import "
                                   f"for domain {domain or 'ai.onnx'!r}")
        s = opsets.schema(op_type, opset, domain)
        if s is None:
            raise UnsupportedError(f"{where(node, graph=graph_name or None)}: no such op "
                                   f"{op_type!r} in domain {domain or 'ai.onnx'!r} at "
                                   f"opset {opset}")
        version = s.since_version
        impl, source, why = kernels.choose(domain, op_type, version)
        if impl is None:
            loc = _Where(node, version, domain, graph_name)
            raise UnsupportedError(f"{loc}: {why} (see 'opshift ops')")
        hit = self._kernels[(domain, op_type, opset)] = (
            impl, source, version, _signature(op_type, version, domain))
        return hit

    def _run_op(self, node, domain, inputs, env, graph_opsets, graph_name, fattrs, keep):
        impl, source, version, sig, attrs, loc = self._prepare(node, domain, graph_opsets,
                                                               graph_name, fattrs, keep)
        # opshift's kernels count on the inputs their schema requires, but those they declare
        # they run without (registry.op's absent); onnx.reference's report their own failures
        for i in sig.required_inputs if source == "opshift" else ():
            if i >= len(inputs) or inputs[i] is None:
                raise EvaluationError(f"{loc}: required input {i} is missing")
        # most nodes repeat a few (op, dtypes) pairs: each pair is checked once per run
        types = (id(sig), *[v.dtype if isinstance(v, np.ndarray) else type(v) for v in inputs])
        binding = self._bindings.get(types)
        if binding is None:
            binding = self._bindings[types] = self._check_types(sig, inputs, loc)
        ctx = NodeContext(node, node.op_type, domain, version, attrs, self, env, graph_opsets,
                          graph_name, fattrs)
        try:
            results = impl(ctx, *inputs)
        except (EvaluationError, UnsupportedError):
            raise
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError,
                MemoryError) as e:  # (a hostile size: numpy's own message; memory: a limit)
            kind = LimitError if isinstance(e, MemoryError) else EvaluationError
            raise kind(f"{loc}: {e}") from e
        results = results if isinstance(results, (list, tuple)) else [results]
        # values are C-contiguous arrays, not numpy scalars or views: numpy orders a float
        # reduction by the memory layout, and equal values must give equal sums
        results = [np.asarray(r) if isinstance(r, np.generic) else r.copy() if isinstance(
            r, np.ndarray) and not r.flags.c_contiguous else r for r in results]
        if binding:
            for i, (r, t) in enumerate(zip(results, sig.outputs)):
                want = binding.get(t)
                if want is not None and isinstance(r, np.ndarray) and r.dtype != want:
                    raise EvaluationError(f"{loc}: {source}'s kernel gives output {i} dtype "
                                          f"{r.dtype}, ONNX says {want}")
        return results

    @staticmethod
    def _attributes(node, version: int, domain: str, sig: _Sig, loc: _Where,
                    fattrs) -> dict[str, Any]:
        attrs = dict(_defaults(node.op_type, version, domain))
        for a in node.attribute:
            ref = a.ref_attr_name
            if ref:
                if not fattrs or ref not in fattrs:
                    continue
                a2 = onnx.AttributeProto()
                a2.CopyFrom(fattrs[ref])
                a2.name = a.name
                a = a2
            name, kind = a.name, a.type
            want = sig.attr_types.get(name)
            if kind != want or kind == _A.SPARSE_TENSOR:
                if want is None:
                    raise UnsupportedError(f"{loc}: attribute {name!r} is not defined for this "
                                           "op version")
                if kind == want:
                    raise UnsupportedError(f"{loc}: attribute {name!r}: sparse tensors are "
                                           "not supported by the evaluator")
                raise UnsupportedError(
                    f"{loc}: attribute {name!r} has type "
                    f"{_A.AttributeType.Name(kind)}, the schema wants "
                    f"{_A.AttributeType.Name(want)}")
            attrs[name] = _attr_value(a)
        missing = sorted(sig.required - attrs.keys())
        if missing:
            raise EvaluationError(f"{loc}: required attribute {missing[0]!r} is missing")
        return attrs

    @staticmethod
    def _check_types(sig: _Sig, inputs: list[Value], loc: _Where) -> dict[str, np.dtype]:
        binding: dict[str, np.dtype] = {}
        formal = sig.inputs
        for i, v in enumerate(inputs):
            if v is None or not isinstance(v, np.ndarray):
                continue
            if not formal:
                break
            t, variadic = formal[min(i, len(formal) - 1)]
            if i >= len(formal) and not variadic:
                raise EvaluationError(f"{loc}: too many inputs ({len(inputs)})")
            if not t:
                continue
            allowed = sig.allowed.get(t)
            ts = opsets.type_str(v.dtype)
            if allowed is not None:
                if ts not in allowed and f"optional({ts})" not in allowed:
                    raise UnsupportedError(f"{loc}: input {i} has type {ts}, not allowed "
                                           f"for {t} at this version")
                prev = binding.setdefault(t, v.dtype)
                if prev != v.dtype:
                    raise EvaluationError(f"{loc}: inputs bound to {t} have different types "
                                          f"({prev} and {v.dtype})")
            elif t.startswith("tensor(") and ts != t:
                raise UnsupportedError(f"{loc}: input {i} has type {ts}, the schema wants {t}")
        return binding

