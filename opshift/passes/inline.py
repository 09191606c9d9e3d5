"""``inline``: PRelu, LeakyRelu and Selu to primitive ops, and model-local functions inlined.

:func:`inline_proto` edits an ``onnx.ModelProto`` in place, touching only the replaced nodes,
in every scope (main graph, If/Loop/Scan subgraphs, model-local functions). The primitive
patterns are those of :mod:`opshift.passes.decompose`, chosen by the opset in force in each
scope. Model-local functions are inlined with onnx's own inliner
(``onnx.inliner.inline_selected_functions``: renaming, attribute references, nested calls,
calls inside subgraphs), and inlined functions no longer called anywhere are removed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import onnx
import onnx.defs

from .. import opsets, plan_cache, typerules, validate
from .._gc import no_cyclic_gc
from ..errors import ConversionError, OpshiftError, function_id
from ..external import tensor_array
from ..modelio import ModelLike, from_proto, to_proto
from ..opsets import normalize_domain
from . import decompose as dec
from ._graph import Names, lazy_attribute, node_kinds, run_as_ir_pass, subgraphs
from .decompose import read_varint


@dataclass(slots=True)
class InlinedNode:
    """One replaced activation node."""

    label: str  # name used as prefix of the new names
    op: str
    version: int
    opset: int
    band: str
    scope: str
    before: onnx.NodeProto | None  # a copy, with ``keep_before``
    after_blob: bytes  # the replacement nodes, as repeated node fields of the scope
    opsets: dict[str, int] = field(default_factory=dict)
    function: tuple[str, str] | None = None  # (domain, name) when in a function body

    @property
    def after(self) -> list[onnx.NodeProto]:
        return dec.nodes_of(self.after_blob)

    @property
    def signed_zero_exact(self) -> bool:
        """False for the sign-of-zero cases documented in :mod:`.decompose`."""
        return dec.signed_zero_exact(self.op, self.band, self.after)

    def to_dict(self) -> dict:
        return {"node": self.label, "op": self.op, "version": self.version,
                "opset": self.opset, "band": self.band, "scope": self.scope,
                "replacement": [n.op_type for n in self.after],
                "signed_zero_exact": self.signed_zero_exact}


@dataclass
class InlineResult:
    """What :func:`inline_proto` did."""

    functions_inlined: list[str] = field(default_factory=list)
    functions_removed: list[str] = field(default_factory=list)
    #: one row per replaced node: :class:`InlinedNode`'s fields in order (the objects are
    #: made when ``nodes`` is first read; a quiet run never needs them)
    rows: list[tuple] = field(default_factory=list, repr=False)
    _nodes: list[InlinedNode] | None = field(default=None, init=False, repr=False)

    @property
    def nodes(self) -> list[InlinedNode]:
        """The replaced nodes, in the order they were replaced."""
        if self._nodes is None or len(self._nodes) != len(self.rows):
            self._nodes = [InlinedNode(*r) for r in self.rows]
        return self._nodes

    @property
    def modified(self) -> bool:
        return bool(self.rows or self.functions_inlined)

    def to_dict(self) -> dict:
        return {"nodes": [n.to_dict() for n in self.nodes],
                "functions_inlined": self.functions_inlined,
                "functions_removed": self.functions_removed, "modified": self.modified}

    def summary(self) -> str:
        by_op: dict[str, int] = {}
        for row in self.rows:
            by_op[row[1]] = by_op.get(row[1], 0) + 1
        parts = [f"{k} x{v}" for k, v in sorted(by_op.items())]
        s = f"inlined {len(self.rows)} node(s)" + (f" ({', '.join(parts)})" if parts else "")
        if self.functions_inlined:
            s += f"; inlined function(s) {', '.join(self.functions_inlined)}"
        if self.functions_removed:
            s += f"; removed {', '.join(self.functions_removed)}"
        return s


def _parse_ops(ops: Iterable[str] | str | None) -> frozenset[str]:
    if ops is None:
        return frozenset(dec.OPS)
    if isinstance(ops, str):
        ops = [o for o in ops.split(",") if o.strip()]
    out = set()
    canon = {o.lower(): o for o in dec.OPS}
    for o in ops:
        o = o.strip()
        if o.lower() == "none":
            continue
        if o.lower() not in canon:
            raise OpshiftError(f"--ops: unknown op {o!r} (choose from {', '.join(dec.OPS)})")
        out.add(canon[o.lower()])
    return frozenset(out)


# -- functions --------------------------------------------------------------------------------


def _inline_functions(model: onnx.ModelProto, functions, result: InlineResult) -> None:
    local = {(f.domain, f.name): f for f in model.functions}
    if functions == "all" or functions == ["all"]:
        chosen = list(local)
    else:
        if isinstance(functions, str):
            functions = [s for s in functions.split(",") if s.strip()]
        chosen = []
        for name in functions:
            name = name.strip()
            dom, _, fname = name.rpartition("::")
            hits = [k for k in local if k[1] == fname and (not dom or k[0] == dom)]
            if not hits:
                known = ", ".join(function_id(f) for f in model.functions) or "none"
                raise OpshiftError(f"--functions: no model-local function {name!r} "
                                   f"(the model has: {known})")
            chosen.extend(hits)
    if not chosen:
        return
    called = node_kinds(model)
    chosen = [k for k in chosen if k in called]
    if not chosen:
        return
    model_ops = {normalize_domain(i.domain): i.version for i in model.opset_import}
    for k in chosen:
        f = local[k]
        for imp in f.opset_import:
            d = normalize_domain(imp.domain)
            if d in model_ops and model_ops[d] != imp.version:
                raise ConversionError(
                    f"function {function_id(f)!r}: imports opset {imp.version} of "
                    f"{d or 'ai.onnx'!r} but the model imports {model_ops[d]}; inlining "
                    "would change the version of its nodes")
    before = {(f.domain, f.name) for f in model.functions}
    import onnx.inliner

    new = onnx.inliner.inline_selected_functions(model, chosen)
    model.CopyFrom(new)
    result.functions_inlined.extend(function_id(local[k]) for k in chosen)
    # Remove inlined functions that nothing calls any more (the inliner may keep them).
    still = node_kinds(model)
    keep = [f for f in model.functions
            if (f.domain, f.name) not in chosen or (f.domain, f.name) in still]
    if len(keep) != len(model.functions):
        kept = [onnx.FunctionProto() for _ in keep]
        for dst, src in zip(kept, keep):
            dst.CopyFrom(src)
        del model.functions[:]
        model.functions.extend(kept)
    after = {(f.domain, f.name) for f in model.functions}
    result.functions_removed.extend(
        f"{d}::{n}" if d else n for d, n in sorted(before - after))


# -- static facts -----------------------------------------------------------------------------

_SAME_SHAPE_OPS = frozenset((
    "Abs", "BatchNormalization", "Cast", "Ceil", "Clip", "Dropout", "Elu", "Exp", "Floor",
    "HardSigmoid", "Identity", "InstanceNormalization", "LRN", "LeakyRelu", "Log", "Neg",
    "Reciprocal", "Relu", "Selu", "Sigmoid", "Softplus", "Softsign", "Sqrt", "Tanh",
    "ThresholdedRelu", "PRelu",
))


class _Facts:
    """Element types, shapes and constants, computed only when a site needs them."""

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
        if function is None and self._census_types:
            t = self._census_types.get(name)
            if t:
                return t
        if self._types is None:
            self._types, self._ftypes = self._collect()
        if function is not None:
            return self._ftypes.get((function.domain, function.name), {}).get(name, 0)
        t = self._types.get(name, 0)
        if not t and not self._inferred:
            self._inferred = True
            m = onnx.ModelProto()
            m.CopyFrom(self.model)
            try:
                m = onnx.shape_inference.infer_shapes(m, strict_mode=False)
            except Exception:  # best effort; an unknown type is reported by the caller
                return 0
            more, _ = _Facts(m)._collect()
            self._types.update({k: v for k, v in more.items() if k not in self._types})
            t = self._types.get(name, 0)
        return t

    def shape(self, name: str):
        """Static shape of ``name``: onnx inference, else walking back through ops whose
        first output has their first input's shape (legacy ops such as BatchNormalization-1
        have no shape inference)."""
        if self._shapes is None:
            from ._graph import static_shapes

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


# -- the pass ---------------------------------------------------------------------------------


@dataclass
class _Work:
    """One node list to edit: a graph (field 1 of GraphProto) or a function (field 7)."""

    owner: onnx.GraphProto | onnx.FunctionProto
    tag: bytes  # wire tag of its node list (dec.GRAPH_NODE_TAG / dec.FUNCTION_NODE_TAG)
    label: str
    gname: str
    opsets: dict[str, int]
    function: onnx.FunctionProto | None
    #: the nodes to inline: (index, node, op, name, inputs, outputs)
    sites: list[tuple[int, onnx.NodeProto, str, str, list[str], list[str]]]


_ALL_OPS = frozenset(dec.OPS)


def _work_from_census(census: validate.Census, wanted: frozenset[str]) -> list[_Work]:
    """Every scope of the census (pre-order: a graph before its subgraphs, then functions)
    with its nodes to inline."""
    work = []
    for sc in census.scopes:
        is_graph = isinstance(sc.owner, onnx.GraphProto)
        gname = sc.owner.name if is_graph and not work else sc.label
        sites = sc.sites if wanted >= _ALL_OPS else [t for t in sc.sites if t[2] in wanted]
        work.append(_Work(sc.owner, dec.GRAPH_NODE_TAG if is_graph else dec.FUNCTION_NODE_TAG,
                          sc.label, gname, sc.opsets, sc.function, sites))
    return work


def _scope_constants(w: _Work) -> dict[str, onnx.TensorProto]:
    """Values fixed in the scope: Constant outputs and initializers that are not also graph
    inputs (an initializer that is an input, as IR < 4 requires, is only a default that a
    caller may override, so its value must not choose a decomposition)."""
    out: dict[str, onnx.TensorProto] = {}
    if isinstance(w.owner, onnx.GraphProto):
        inputs = {v.name for v in w.owner.input}
        for t in w.owner.initializer:
            if t.name not in inputs:
                out[t.name] = t
    for n in w.owner.node:
        if n.op_type == "Constant" and normalize_domain(n.domain) == "" and \
                len(n.attribute) == 1 and n.attribute[0].name == "value":
            out[n.output[0]] = n.attribute[0].t
    return out


def _node_offsets(data: bytes, tag: int, count: int) -> list[int] | None:
    """Byte offsets of the first ``count`` fields of ``data`` (a serialized message) when
    they are all length-delimited fields with wire tag ``tag``, plus the end of the last;
    None otherwise. Protobuf writes fields in field-number order, so a GraphProto's nodes
    (field 1) come first."""
    offs = [0] * (count + 1)
    p, end = 0, len(data)
    for k in range(count):
        if p >= end or data[p] != tag:
            return None
        offs[k] = p
        n = data[p + 1]
        if n < 0x80:  # a one-byte length: most nodes, read without a call
            p += 2 + n
        else:
            n, p = read_varint(data, p + 1)
            p += n
    offs[count] = p
    return offs if p <= end else None


def _node_section(w: _Work, sites: list[int], blobs: list[bytes], start: int
                  ) -> list[bytes | memoryview]:
    """The serialized node list of ``w.owner`` from node ``start`` on, with the nodes at
    ``sites`` (ascending, >= start) replaced by the framed ``blobs``: untouched nodes are
    slices of the owner's serialization, so no Python protobuf call is made per node."""
    nodes = w.owner.node
    tag = w.tag
    offs = None
    if tag == dec.GRAPH_NODE_TAG:
        data = w.owner.SerializeToString()
        offs = _node_offsets(data, tag[0], len(nodes))
    parts: list[bytes | memoryview] = []
    prev = start
    if offs is not None:
        for i, blob in zip(sites, blobs):
            if prev < i:
                parts.append(data[offs[prev]:offs[i]])
            parts.append(blob)
            prev = i + 1
        if prev < len(nodes):
            parts.append(data[offs[prev]:offs[-1]])
        return parts
    for i, blob in zip(sites, blobs):
        parts += (dec.frame(nodes[prev:i], tag), blob)
        prev = i + 1
    parts.append(dec.frame(nodes[prev:], tag))
    return parts


def _splice(w: _Work, sites: list[int], blobs: list[bytes]) -> None:
    """Replace the nodes at ``sites`` by ``blobs`` in place: the tail from the first site is
    rebuilt as bytes and parsed back in C."""
    parts = _node_section(w, sites, blobs, sites[0])
    del w.owner.node[sites[0]:]
    w.owner.MergeFromString(b"".join(parts))


def _field_span(data: bytes, number: int) -> tuple[int, int, int] | None:
    """(start of key, start of payload, end) of the length-delimited field ``number`` in a
    serialized message, or None."""
    p, end = 0, len(data)
    while p < end:
        start = p
        key, p = read_varint(data, p)
        wire = key & 7
        if wire == 0:
            _, p = read_varint(data, p)
        elif wire == 1:
            p += 8
        elif wire == 5:
            p += 4
        elif wire == 2:
            n, q = read_varint(data, p)
            if key >> 3 == number:
                return start, q, q + n
            p = q + n
        else:  # groups: not used by ONNX
            return None
    return None


def _serialize_with_nodes(model: onnx.ModelProto, section: list[bytes | memoryview]
                          ) -> list[bytes | memoryview]:
    """``model`` serialized with ``section`` as its main graph's node list, as parts whose
    concatenation is byte for byte what ``SerializeToString`` gives after merging it in
    (protobuf writes fields in number order, GraphProto.node, field 1, first). Leaves the
    main graph without nodes."""
    del model.graph.node[:]
    data = model.SerializeToString()
    span = _field_span(data, 7)  # ModelProto.graph
    if span is None:  # pragma: no cover - a model always has its graph field
        raise AssertionError("no graph field in the serialized model")
    start, payload, end = span
    size = sum(map(len, section)) + end - payload
    view = memoryview(data)
    return [view[:start], b"\x3a", dec.varint(size), *section, view[payload:]]


def inline_proto(model: onnx.ModelProto, ops: Iterable[str] | str | None = None,
                 functions: Iterable[str] | str | None = None, *,
                 keep_before: bool = False, census: validate.Census | None = None,
                 base_dir: str | os.PathLike | None = None) -> InlineResult:
    """Inline ``ops`` (default: PRelu, LeakyRelu, Selu) and the model-local ``functions``
    (``"all"``, names, or None for none) in ``model``, in place.

    ``keep_before``: keep a copy of every replaced node in the result (for ``--verify``).
    ``census``: what :func:`opshift.validate.check` saw of this very ``model`` object, which
    saves inline running that walk again (ignored once functions are inlined, which rebuilds
    the model). ``base_dir``: the model's folder, for a PRelu slope in external data that
    the decomposition at opsets 1..8 depends on (without it such a slope is refused).
    Raises ConversionError (naming node, op, version) when a node cannot be inlined exactly;
    the model is then partly edited, so callers that need atomicity work on a copy.
    """
    return _inline(model, ops, functions, keep_before, census, serialize=False,
                   base_dir=base_dir)[0]


def inline_serialized(model: onnx.ModelProto, ops: Iterable[str] | str | None = None,
                      functions: Iterable[str] | str | None = None, *,
                      census: validate.Census | None = None) -> tuple[bytes, InlineResult]:
    """:func:`inline_proto`, returning the inlined model serialized. The main graph's new
    node list goes straight into the bytes instead of being parsed into ``model`` and
    serialized again (most of what saving a big model costs); ``model`` is consumed: do not
    use it afterwards."""
    parts, result = inline_parts(model, ops, functions, census=census)
    return b"".join(parts), result


def inline_parts(model: onnx.ModelProto, ops: Iterable[str] | str | None = None,
                 functions: Iterable[str] | str | None = None, *,
                 census: validate.Census | None = None
                 ) -> tuple[list[bytes | memoryview], InlineResult]:
    """:func:`inline_serialized` with the bytes left in parts, for
    :func:`opshift.modelio.save_parts` to write in chunks: joining them first would copy the
    whole output into a new buffer of its size, a page fault for every 4 KiB of it on a
    fresh heap (the CLI's case)."""
    result, parts = _inline(model, ops, functions, False, census, serialize=True)
    return ([model.SerializeToString()] if parts is None else parts), result


def _inline(model: onnx.ModelProto, ops, functions, keep_before: bool,
            census: validate.Census | None, serialize: bool, base_dir=None
            ) -> tuple[InlineResult, list[bytes | memoryview] | None]:
    with no_cyclic_gc():
        return _inline_gc_paused(model, ops, functions, keep_before, census, serialize,
                                 base_dir)


def _inline_gc_paused(model: onnx.ModelProto, ops, functions, keep_before: bool,
                      census: validate.Census | None, serialize: bool, base_dir
                      ) -> tuple[InlineResult, list[bytes | memoryview] | None]:
    wanted = _parse_ops(ops)
    result = InlineResult()
    if functions:
        _inline_functions(model, functions, result)
        if result.functions_inlined:
            census = None
    if not wanted:
        return result, None
    if census is None:  # the structural check's walk gathers what inline needs
        census = validate.Census()
        validate.problems(model, census)  # (whether the model passes is the caller's business)
    work, used = _work_from_census(census, wanted), census.names
    if not any(w.sites for w in work):
        return result, None
    names = Names.from_used(used)
    facts = _Facts(model, census, base_dir)
    # Deepest scopes first: editing a graph re-creates its nodes, so a subgraph is edited
    # before the graph that holds it; the main graph (work[0]) comes last.
    emitters: dict[tuple, Callable[..., bytes]] = {}
    data = None
    for w in reversed(work):
        opset = w.opsets.get("")
        if not w.sites or opset is None:
            continue
        sites, blobs = _inline_scope(w, opset, names, facts, emitters, result, keep_before)
        if not sites:
            continue
        if serialize and w is work[0]:
            data = _serialize_with_nodes(model, _node_section(w, sites, blobs, 0))
        else:
            _splice(w, sites, blobs)
    plan_cache.flush()  # the plans this run made, for the next process
    return result, data


def _inline_scope(w: _Work, opset: int, names: Names, facts: _Facts,
                  emitters: dict[tuple, Callable[..., bytes]], result: InlineResult,
                  keep_before: bool) -> tuple[list[int], list[bytes]]:
    """The replacements for the sites of one scope: (indices, framed node blobs). In the
    function and static bands a node's template depends only on (op, version, attributes,
    X's element type): its emitter (:func:`decompose.band_emitter`) is looked up once per
    such key and every node is one call of it (the hot path)."""
    b = dec.band(opset)
    function_band = b == dec.FUNCTION
    sites: list[int] = []
    blobs: list[bytes] = []
    consts: dict[str, onnx.TensorProto] | None = None
    versions: dict[str, int] = {}  # 0: the op does not exist at this opset
    fkey = None if w.function is None else (w.function.domain, w.function.name)
    tag, append, label, scope_opsets = w.tag, result.rows.append, w.label, w.opsets
    add_site, add_blob = sites.append, blobs.append
    for i, node, op, name, ins, outs in w.sites:
        version = versions.get(op)
        if version is None:
            version = versions[op] = opsets.since_version(op, opset) or 0
        if not version:
            continue
        base = name or f"{op.lower()}_{i}"
        et = 0 if function_band else facts.elem_type(ins[0], w.function)
        if b != dec.LEGACY:
            attrs = node.attribute
            key = (b, op, version, et, *[(a.name, a.f, a.ref_attr_name) for a in attrs]) \
                if attrs else (b, op, version, et)
            emit = emitters.get(key)
            if emit is None:
                emit = emitters[key] = dec.band_emitter(key, functools.partial(
                    dec.Site, node, version, opset, et, graph=w.gname))
            blob = emit(ins[0], outs[0], ins[1] if op == "PRelu" else None, base, names, tag)
        else:
            if consts is None and op == "PRelu":
                consts = _scope_constants(w)
            blob = _legacy_blob(w, node, op, version, opset, et, base, names, facts, consts)
        add_site(i)
        add_blob(blob)
        before = None
        if keep_before:
            before = onnx.NodeProto()
            before.CopyFrom(node)
        append((base, op, version, opset, b, label, before, blob, scope_opsets, fkey))
    return sites, blobs


def _legacy_blob(w: _Work, node: onnx.NodeProto, op: str, version: int, opset: int, et: int,
                 base: str, names: Names, facts: _Facts,
                 consts: dict[str, onnx.TensorProto] | None) -> bytes:
    """A node's replacement in the legacy band (opsets 1..8), where a PRelu's decomposition
    also depends on its slope's value and shape and on X's shape."""
    site = dec.Site(node, version, opset, et, graph=w.gname)
    if op == "PRelu":
        t = consts.get(node.input[1])
        if t is not None:
            site.slope_value = tensor_array(t, facts.base_dir)
            site.slope_shape = tuple(site.slope_value.shape)
        if opset <= 6:
            site.x_shape = facts.shape(node.input[0])
            if site.slope_shape is None:
                site.slope_shape = facts.shape(node.input[1])
    return dec.decompose_bytes(site, base, names, w.tag)


def _all_constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    out: dict[str, onnx.TensorProto] = {}

    def graph(g: onnx.GraphProto) -> None:
        for t in g.initializer:
            out[t.name] = t
        nodes(g.node)

    def nodes(ns) -> None:
        for n in ns:
            if n.op_type == "Constant" and normalize_domain(n.domain) == "" and \
                    len(n.attribute) == 1 and n.attribute[0].name == "value":
                out[n.output[0]] = n.attribute[0].t
            for _, g in subgraphs(n):
                graph(g)

    graph(model.graph)
    for f in model.functions:
        nodes(f.node)
    return out


def _vi(name: str, elem_type: int, shape) -> onnx.ValueInfoProto:
    if shape is not None:
        shape = [d if isinstance(d, int) else f"d{i}" if d is None else d
                 for i, d in enumerate(shape)]
    return onnx.helper.make_tensor_value_info(name, elem_type, shape)


def verify_inline(original: onnx.ModelProto, inlined: onnx.ModelProto, result: InlineResult,
                  *, seed: int = 0):
    """Check each inlined node against its replacement with the evaluator (a small region
    model each, real constants, generated inputs with special values), then the whole model
    when the evaluator runs all of it. Signed zeros are compared except for the replacements
    the decompose table documents. Returns ``(VerifyReport, notes)``; notes say what could
    not be checked and why. ``result`` must come from ``inline_proto(..., keep_before=True)``.
    """
    from ..verify import VerifyReport, evaluator_supports, region_model, verify, verify_rewrites

    report = VerifyReport(seed=seed)
    notes: list[str] = []
    facts, facts2 = _Facts(original), _Facts(inlined)
    consts = _all_constants(inlined)
    checked = 0
    for n in result.nodes:
        if n.before is None:
            raise OpshiftError("verify_inline needs inline_proto(..., keep_before=True)")
        x, y = n.before.input[0], n.before.output[0]
        if any(a.ref_attr_name for a in n.before.attribute):
            notes.append(f"{n.label}: not verified locally: its attributes refer to the "
                         "enclosing function's (only the whole model can check it)")
            continue
        fn = None
        if n.function is not None:
            fn = next((f for f in original.functions
                       if (f.domain, f.name) == n.function), None)
        et = facts.elem_type(x, fn) or facts2.elem_type(x, fn)
        if not et:
            notes.append(f"{n.label}: not verified locally: the element type of X is unknown")
            continue
        pre: list[onnx.NodeProto] = []
        ins = []
        xs = facts.shape(x) or facts2.shape(x)
        if n.op == "PRelu":
            s = n.before.input[1]
            t = consts.get(s)
            if t is not None:
                pre.append(onnx.helper.make_node("Constant", [], [s], value=t))
                if xs is None:
                    xs = tuple(t.dims)
            else:
                ss = facts.shape(s) or facts2.shape(s)
                if ss is None:
                    notes.append(f"{n.label}: not verified locally: slope shape unknown")
                    continue
                ins.append(_vi(s, facts.elem_type(s) or et, ss))
                if xs is None:
                    xs = ss
        elif xs is None:
            xs = (8,)
        ins.insert(0, _vi(x, et, xs))
        outs = [_vi(y, et, None)]
        imports = {"": n.opset}
        before = region_model(pre + [n.before], ins, outs, opset_imports=imports)
        after = region_model(pre + n.after, ins, outs, opset_imports=imports)
        try:
            part = verify_rewrites([(n.label, before, after)], seed=seed,
                                   signed_zeros=n.signed_zero_exact)
        except OpshiftError as e:
            notes.append(f"{n.label}: not verified locally: {e}")
            continue
        report.merge(part)
        checked += 1
    if checked < len(result.nodes):
        notes.append(f"{checked} of {len(result.nodes)} replacements verified locally")
    why = evaluator_supports(original) or evaluator_supports(inlined)
    if why is not None:
        notes.append(f"whole model: not verified: {why}")
    else:
        exact = all(n.signed_zero_exact for n in result.nodes)
        try:
            report.merge(verify(original, inlined, seed=seed, signed_zeros=exact))
        except OpshiftError as e:
            notes.append(f"whole model: not verified: {e}")
    return report, notes


def inline(model: ModelLike, ops: Iterable[str] | str | None = None,
           functions: Iterable[str] | str | None = None):
    """Inline PRelu/LeakyRelu/Selu (``ops``) and model-local ``functions`` ("all" or names).

    Accepts an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path; returns the same kind
    (a ModelProto for a path). The input is not modified.
    """
    proto, kind, base_dir = to_proto(model)
    if kind == "proto":
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        proto = copy
    inline_proto(proto, ops, functions, base_dir=base_dir)
    return from_proto(proto, kind)


def _make_inline_pass() -> type:
    # onnx_ir (which imports sympy, ~0.3 s) is loaded only when the pass is asked for, so the
    # command line and inline() never pay for it
    import onnx_ir as ir
    from onnx_ir import passes as ir_passes

    class InlinePass(ir_passes.InPlacePass):
        """``onnx_ir`` adapter over :func:`inline_proto`; ``modified`` is True only if
        something was inlined. The last :class:`InlineResult` is in :attr:`last_result`."""

        def __init__(self, ops: Iterable[str] | str | None = None,
                     functions: Iterable[str] | str | None = None):
            super().__init__()
            self.ops = ops
            self.functions = functions
            self.last_result: InlineResult | None = None

        def call(self, model: ir.Model) -> ir_passes.PassResult:
            self.last_result, out = run_as_ir_pass(
                model, lambda proto: inline_proto(proto, self.ops, self.functions))
            return out

    InlinePass.__module__ = __name__
    return InlinePass


__getattr__ = lazy_attribute(globals(), "InlinePass", _make_inline_pass)


__all__ = ["inline", "inline_proto", "verify_inline", "InlineResult", "InlinedNode"]
