"""Structural checks that every command runs before it rewrites a model.

onnx's checker is thorough but slow on big models and stops at the first problem with a
multi-line message. These checks are one O(nodes) walk that catches what would make a rewrite
meaningless or unsafe -- a cycle or use before definition, a value defined twice, duplicate
graph outputs, a function defined twice, a domain used without an opset import, an op not at
the declared opset -- and report the first one in one line naming graph, node and value."""

from __future__ import annotations

from collections.abc import Iterable

import onnx
from onnx.external_data_helper import uses_external_data

from opshift.check import functions as function_checks
from opshift.check import wellformed
from opshift.check.activations import activation_spec, judge_slope
from opshift.errors import ModelLoadError, function_label, where
from opshift.graph.declared import Listed
from opshift.graph.element_types import SAME_AS_FIRST, Propagation, Typed, output_type_rules
from opshift.graph.index import IndexScope, ModelIndex, holds_external_data
from opshift.graph.scopes import may_hold_subgraphs
from opshift.io import readable
from opshift.opsets import (
    ACTIVATIONS,
    has_graph_attribute,
    may_hold_tensors,
    normalize_domain,
    schema,
    since_version,
    tensor_type_name,
)

#: Problem kinds, so a caller can tolerate some (``fix`` repairs duplicate names).
CYCLE = "cycle"
DUPLICATE_VALUE = "duplicate-value"
DUPLICATE_OUTPUT = "duplicate-output"
MISSING_OPSET = "missing-opset"
UNKNOWN_OP = "unknown-op"
ATTRIBUTE = "attribute"  # an attribute the op version does not define, or of the wrong type
SLOPE = "slope"  # a PRelu-7+ slope numpy cannot broadcast to X but fix may read per channel
UNFIT_SLOPE = "unfit-slope"  # a PRelu slope no reading fits to X's declared shape
DUPLICATE_FUNCTION = "duplicate-function"  # two model-local functions with one identity
NEGATIVE_DIM = "negative-dim"  # a declared dim < 0: read as unknown, allowed; fix clears it
#: the problems ``fix`` repairs
REPAIRABLE = (DUPLICATE_VALUE, MISSING_OPSET, ATTRIBUTE, SLOPE, DUPLICATE_FUNCTION, NEGATIVE_DIM)
#: not a well-formed model (:mod:`opshift.check.wellformed`): a name that is not UTF-8, an unknown
#: element type, a tensor with a negative dim or data that does not fit its dims, an
#: activation with the wrong inputs or outputs, a function that calls itself; never allowed
MALFORMED = "malformed"
UNSUPPORTED = "unsupported"  # well-formed, but nothing opshift can rewrite (sparse initializers)


class _Walker:
    def __init__(self, model: onnx.ModelProto, index: ModelIndex | None = None):
        self.model = model
        self.functions = {(normalize_domain(f.domain), f.name) for f in model.functions}
        self.problems: list[tuple[str, str]] = []
        self._headers: dict[int, wellformed.Header] = {}  # what each graph declares
        #: (op, version, X's declared type, slope dims) -> activation_spec.judge_slope's verdict
        self._judged: dict[tuple, tuple[int, str | None, bool]] = {}
        self.index = index
        self.full = index is not None and index.full  # names, scopes, sites, types
        self.naming = index is not None and index.naming
        self._scope: IndexScope | None = None
        self.typing: Propagation | None = None  # types the main graph's values (ModelIndex.types)
        self.slopes = True  # report slope problems
        self.reads: list[str] | None = None  # ModelIndex.reads, while in the main graph's tree

    def add(self, kind: str, msg: str) -> None:
        self.problems.append((kind, msg))

    def text(self, label: str, what: str, values: Iterable) -> None:
        bad = readable.text_problem(values)
        if bad is not None:
            self.add(MALFORMED, f"{label}: {readable.not_text(what, bad)}")

    def graph_header(self, g: onnx.GraphProto, label: str) -> wellformed.Header:
        h = self._headers[id(g)] = wellformed.read_header(g, label)
        for p in h.problems:
            self.add(MALFORMED, p)
        for p in h.negative_dims:
            self.add(NEGATIVE_DIM, p)
        if len(g.sparse_initializer):
            self.add(UNSUPPORTED, f"{label}: sparse initializers are not supported (convert "
                                  "them to dense initializers first)")
        return h

    def graph(self, g: onnx.GraphProto, opsets: dict[str, int], outer: frozenset[str] | set[str],
              label: str) -> wellformed.Header:
        header = self.graph_header(g, label)
        if self.reads is not None:
            self.reads.extend(header.output_names)
        inputs = header.input_names
        defined = set(inputs)
        if len(defined) < len(inputs):  # an input listed twice (IR 3 lists weights too)
            inits, seen = set(header.initializer_names), set()
            for name in inputs:
                if name in seen and name not in inits:
                    self.add(DUPLICATE_VALUE, f"{label}: input {name!r} is declared twice")
                seen.add(name)
        defined.update(header.initializer_names)
        index, parent = self.index, self._scope
        if index is not None and not index.external:
            index.external = any(map(uses_external_data, g.initializer))
        if self.typing is not None:
            self.typing.declare(g, index.types, header.declared())
        if self.full:
            fn = parent.function if parent is not None else None
            self._scope = IndexScope(g, label, opsets, fn)
            index.scopes.append(self._scope)
        if self.naming:
            index.names.update(v.name for v in g.output)
        self.nodes(g.node, opsets, defined, outer, label, g)
        self.text(label, "value name", defined)
        if self.full:
            self._scope = parent
        seen: set[str] = set()
        for vi in g.output:
            if vi.name in seen:
                self.add(DUPLICATE_OUTPUT, f"{label}: graph output {vi.name!r} is listed twice")
            seen.add(vi.name)
            if vi.name not in defined and vi.name not in outer:
                self.add(CYCLE, f"{label}: graph output {vi.name!r} is never computed")
        if self.naming:
            index.add_names(defined)
        return header

    def nodes(self, nodes: Iterable[onnx.NodeProto], opsets: dict[str, int], defined: set[str],
              outer: frozenset[str] | set[str], label: str,
              graph: onnx.GraphProto | None = None) -> None:
        # Hot loop (100k-node models): slices and set operations run in C; the slow,
        # message-building paths run only when something is wrong.
        defined.add("")  # an empty name is an absent optional input/output
        if outer:
            defined.update(outer)
        # flags per op: keyed by op type in the default domain (no tuple to build per node),
        # by (domain, op) elsewhere
        flags_by_op: dict[str, int] = {}
        flags_by_key: dict[tuple[str, str], int] = {}
        specs: dict[str, tuple] = {}
        index, full = self.index, self.full
        sites = self._scope.sites if full else None
        typing, types = self.typing, None
        if typing is not None and graph is not None:  # (function bodies: per call site)
            types = index.types
        types_get = types.get if types is not None else None
        reads = self.reads.extend if self.reads is not None else None
        issuperset, isdisjoint, update = defined.issuperset, defined.isdisjoint, defined.update
        node_name = ""
        node_names = []
        for i, n in enumerate(nodes):
            node_name = n.name
            node_names.append(node_name)
            ins = n.input[:]
            if reads is not None:
                reads(ins)
            if not issuperset(ins):
                for name in ins:
                    if not isinstance(name, str):
                        self.add(MALFORMED, f"{label}: {where(n)}: input "
                                            f"{readable.not_text('name', name)}")
                    elif name not in defined:
                        self.add(CYCLE, f"{label}: {where(n)} uses {name!r} before it is "
                                        "defined (cycle, unsorted graph, or missing input)")
            op, domain = n.op_type, n.domain
            flags = flags_by_op.get(op) if not domain else flags_by_key.get((domain, op))
            if flags is None:
                flags = self.op(n, opsets, label)
                if types is not None:  # how its outputs are typed rides in the same lookup
                    flags |= _type_flag(domain, op, opsets.get("", 0))
                if domain:
                    flags_by_key[(domain, op)] = flags
                else:
                    flags_by_op[op] = flags
            outs = n.output[:]
            if flags == _FIRST:  # most nodes below opset 15: typed like input 0
                if ins and outs:
                    t = types_get(ins[0])
                    if t:
                        types[outs[0]] = t
            elif flags:  # an activation, subgraphs, tensors or a type rule
                if flags & _ACTIVATION:
                    # in a function body only attributes and arity can be wrong
                    spec = specs.get(op)
                    if spec is None:
                        spec = specs[op] = activation_spec(op, opsets.get("", 0))
                    if graph is not None or n.attribute or len(ins) != spec[3] \
                            or len(outs) != 1 or "" in ins or not outs[0]:
                        self.activation(n, ins, outs, spec, label, graph)
                    if sites is not None:
                        sites.append((i, n, op, node_name, ins, outs))
                if flags & _TENSORS:
                    self.attribute_names(n, label)
                    p = wellformed.attribute_tensor_problem(n)
                    if p is not None:
                        self.add(MALFORMED, f"{label}: {where(n)}: {p}")
                    if index is not None and not index.external:
                        index.external = holds_external_data(n)
                if flags & _SUBGRAPHS:
                    if not flags & _TENSORS:
                        self.attribute_names(n, label)
                    self.subgraphs(n, opsets, defined, label)
                if flags & _FIRST:
                    t = types_get(ins[0]) if ins else None
                    if t and outs:
                        types[outs[0]] = t
                elif flags & _TYPED:
                    typing.outputs(n, output_type_rules(op, opsets.get("", 0)), types)
            if not isdisjoint(outs):
                for name in outs:
                    if name and name in defined:
                        self.add(DUPLICATE_VALUE, f"{label}: {where(n)} defines {name!r}, "
                                                  "which is already defined")
            k = len(defined)
            update(outs)
            if len(defined) - k < len(outs):  # an empty name, or one listed twice
                p = wellformed.repeated_output(outs)
                if p is not None:
                    self.add(DUPLICATE_VALUE, f"{label}: {where(n)} {p}")
        if readable.text_problem(node_names) is not None:
            self.text(label, "node name", node_names)
        elif self.naming:
            index.names.update(node_names)
        if index is not None:  # the op tables hold every kind of node met, at no extra cost
            index.kinds.update(("", op) for op in flags_by_op)
            index.kinds.update(flags_by_key)

    def subgraphs(self, n: onnx.NodeProto, opsets: dict[str, int], defined: set[str],
                  label: str) -> None:
        """Walk the graphs ``n`` holds; their reads count for the main graph's tree where
        :func:`~opshift.graph.scopes.iter_scopes` lists them (not in a call of a model-local
        function in the default domain)."""
        reads = self.reads
        if reads is not None and not may_hold_subgraphs(n.domain, n.op_type):
            self.reads = None
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
                list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
            for sg in subs:
                self.graph(sg, opsets, set(defined), f"{label}/node {n.name!r}/{a.name}")
        self.reads = reads

    def activation(self, n: onnx.NodeProto, ins: list[str], outs: list[str], spec: tuple,
                   label: str, graph: onnx.GraphProto | None) -> None:
        """Arity and attributes against the schema in force (``spec``: the op's
        :func:`~opshift.check.activations.activation_spec`); X's declared element type; a
        constant PRelu slope against X's declared shape (no shape inference here)."""
        version, types, rule, arity, numeric = spec
        if n.attribute:
            self.attribute_names(n, label)
        if len(ins) != arity or "" in ins or len(outs) != 1 or not outs[0]:
            self.add(MALFORMED, f"{label}: {where(n, version=version)}: takes {arity} "
                                f"input{'s' if arity > 1 else ''} and 1 output, has inputs "
                                f"{ins} and outputs {outs}")
            return
        for a in n.attribute:
            if types.get(a.name) != a.type:
                self.attribute(n, a, version, label)
        if graph is None:
            return
        header = self._headers[id(graph)]
        x, slope = ins[0], header.initializer(graph, ins[1]) if rule is not None else None
        constant = header.initializer(graph, x)
        declared = header.types.get(x) if constant is None else None
        if declared is None:  # a constant X, or one nothing declares: its type alone
            elem, problem, repairable = 0 if constant is None else constant.data_type, None, False
        else:  # judged once per distinct (declared type, slope dims)
            key = (n.op_type, version, declared, None if slope is None else tuple(slope.dims))
            verdict = self._judged.get(key)
            if verdict is None:
                verdict = self._judged[key] = judge_slope(declared, slope, rule)
            elem, problem, repairable = verdict
        if elem and elem not in numeric and elem in readable.KNOWN_ELEM_TYPES:
            self.add(MALFORMED, f"{label}: {where(n, version=version)}: X {x!r} is "
                                f"{tensor_type_name(elem)}, which no version of "
                                f"{n.op_type} takes")
        if problem is not None and (self.slopes or not repairable):
            self.add(SLOPE if repairable else UNFIT_SLOPE,
                     f"{label}: {where(n, version=version)}: {problem}")

    def attribute_names(self, n: onnx.NodeProto, label: str) -> None:
        """Names of ``n``'s attributes that are not text, read only for the nodes whose
        attributes the walk reads anyway (all would cost more than the walk)."""
        bad = readable.text_problem([a.name for a in n.attribute])
        if bad is not None:
            self.add(MALFORMED, f"{label}: {where(n)}: "
                                f"{readable.not_text('attribute name', bad)}")

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

    def op(self, n: onnx.NodeProto, opsets: dict[str, int], label: str) -> int:
        """Check the op exists once per (domain, op); return what else its nodes need."""
        for what, v in (("op type", n.op_type), ("domain", n.domain)):
            if not isinstance(v, str):
                self.add(MALFORMED, f"{label}: node {n.name!r}: {readable.not_text(what, v)}")
                return 0
        domain = normalize_domain(n.domain)
        if (domain, n.op_type) in self.functions:
            return _SUBGRAPHS
        if domain not in opsets:
            self.add(MISSING_OPSET, f"{label}: {where(n)} uses domain {domain or 'ai.onnx'!r}, "
                                    "which has no opset import")
            return _SUBGRAPHS | _TENSORS
        if domain:
            return _SUBGRAPHS | _TENSORS
        if since_version(n.op_type, opsets[domain]) is None:
            self.add(UNKNOWN_OP, f"{label}: {where(n)}: no op {n.op_type!r} in ai.onnx at "
                                 f"opset {opsets[domain]}")
            return 0
        flags = _SUBGRAPHS if has_graph_attribute(n.op_type) else 0
        flags |= _TENSORS if may_hold_tensors(n.op_type) else 0
        return flags | (_ACTIVATION if n.op_type in ACTIVATIONS else 0)


_ACTIVATION, _SUBGRAPHS, _TENSORS = 1, 2, 4
#: a node whose one output is typed like its first input (inline), or one Propagation types
_FIRST, _TYPED = 8, 16


def _type_flag(domain: str, op: str, opset: int) -> int:
    """How the walk types a node's outputs: inline, or by :meth:`Propagation.outputs`."""
    if not isinstance(op, str) or not isinstance(domain, str):
        return 0  # not text: reported as malformed
    if not domain and output_type_rules(op, opset) is SAME_AS_FIRST:
        return _FIRST
    return _TYPED


def problems(model: onnx.ModelProto, index: ModelIndex | None = None, *,
             skip: Iterable[str] = ()) -> list[tuple[str, str]]:
    """All structural problems as (kind, one-line message), in graph order, but for slope
    problems when ``skip`` holds SLOPE (one per PRelu of a model ``fix`` repairs); fills
    ``index`` when given."""
    w = _Walker(model, index)
    w.slopes = SLOPE not in skip
    ops = {normalize_domain(i.domain): i.version for i in model.opset_import}
    if w.full and ops.get("", 0) < 15:  # inline needs X's type below opset 15 only
        w.typing = Propagation(model, ops.get("", 0))
        index.types = Typed()
    if index is not None and index.facts:
        w.reads = index.reads = []
    main = w.graph(model.graph, ops, frozenset(), f"graph {model.graph.name!r}")
    if index is not None and index.facts:
        index.declared = Listed(main.input_names, main.output_names, main.value_info_names,
                                 main.initializer_names)
    w.reads = None
    identities: set[tuple[str, str, str]] = set()
    for f in model.functions:
        p, named = function_checks.function_problem(f)
        if p is not None:
            w.add(MALFORMED, p)
            if not named:
                continue
        fops = dict(ops)
        fops.update({normalize_domain(i.domain): i.version for i in f.opset_import})
        defined = set(f.input)
        label = function_label(f)
        identity = (f.domain, f.name, f.overload)
        if identity in identities:
            w.add(DUPLICATE_FUNCTION, f"{function_label(f, overload=True)}: defined twice; "
                                      "a call could mean either body")
        identities.add(identity)
        if w.full:
            w._scope = IndexScope(f, label, fops, f)
            index.scopes.append(w._scope)
        if w.naming:
            index.names.update(f.output)
        w.nodes(f.node, fops, defined, frozenset(), label)
        if w.naming:
            index.add_names(defined)
    p = function_checks.recursion_problem(model)
    if p is not None:
        w.add(MALFORMED, p)
    if w.naming:
        index.names.discard("")
    if w.typing is not None:
        index.types.variants = w.typing.variant_lists()
    if index is not None:
        index.found.update(kind for kind, _ in w.problems)
    return w.problems


def check(model: onnx.ModelProto, origin: str = "<model>", *,
          allow: Iterable[str] = (), index: ModelIndex | None = None) -> None:
    """Raise :class:`ModelLoadError` for the first problem whose kind is not in ``allow``
    (never :data:`NEGATIVE_DIM`); fill ``index`` (see :class:`ModelIndex`) when given."""
    allowed = {NEGATIVE_DIM, *allow}
    for kind, msg in problems(model, index, skip=allowed):
        if kind not in allowed:
            raise ModelLoadError(f"{origin}: {msg}")
