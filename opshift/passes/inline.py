"""``inline``: PRelu, LeakyRelu and Selu to primitive ops, and model-local functions inlined.

:func:`inline_proto` edits an ``onnx.ModelProto`` in place, touching only the replaced nodes,
in every scope (main graph, If/Loop/Scan subgraphs, model-local functions). The primitive
patterns are those of :mod:`opshift.passes.decompose`, chosen by the opset in force in each
scope. Model-local functions are inlined with onnx's own inliner
(``onnx.inliner.inline_selected_functions``: renaming, attribute references, nested calls,
calls inside subgraphs), and inlined functions no longer called anywhere are removed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import onnx
import onnx.defs
import onnx.numpy_helper
from onnx import TensorProto

from .. import opsets
from ..errors import ConversionError, OpshiftError
from ..modelio import ModelLike, from_proto, to_proto
from ..opsets import has_graph_attribute, normalize_domain
from . import decompose as dec
from ._graph import Names, subgraphs


@dataclass
class InlinedNode:
    """One replaced activation node."""

    label: str  # name used as prefix of the new names
    op: str
    version: int
    opset: int
    band: str
    scope: str
    before: onnx.NodeProto | None  # a copy, with ``keep_before``
    after_bytes: list[bytes]  # the serialized replacement nodes
    opsets: dict[str, int] = field(default_factory=dict)
    function: tuple[str, str] | None = None  # (domain, name) when in a function body

    @property
    def after(self) -> list[onnx.NodeProto]:
        return [onnx.NodeProto.FromString(b) for b in self.after_bytes]

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

    nodes: list[InlinedNode] = field(default_factory=list)
    functions_inlined: list[str] = field(default_factory=list)
    functions_removed: list[str] = field(default_factory=list)

    @property
    def modified(self) -> bool:
        return bool(self.nodes or self.functions_inlined)

    def to_dict(self) -> dict:
        return {"nodes": [n.to_dict() for n in self.nodes],
                "functions_inlined": self.functions_inlined,
                "functions_removed": self.functions_removed, "modified": self.modified}

    def summary(self) -> str:
        by_op: dict[str, int] = {}
        for n in self.nodes:
            by_op[n.op] = by_op.get(n.op, 0) + 1
        parts = [f"{k} x{v}" for k, v in sorted(by_op.items())]
        s = f"inlined {len(self.nodes)} node(s)" + (f" ({', '.join(parts)})" if parts else "")
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


def _fid(f: onnx.FunctionProto) -> str:
    return f"{f.domain}::{f.name}" if f.domain else f.name


# -- functions --------------------------------------------------------------------------------


def _called(model: onnx.ModelProto) -> set[tuple[str, str]]:
    """(domain, name) of every node anywhere in the model (graphs, subgraphs, functions)."""
    seen: set[tuple[str, str]] = set()

    def nodes(ns) -> None:
        for n in ns:
            seen.add((n.domain, n.op_type))
            for _, g in subgraphs(n):
                nodes(g.node)

    nodes(model.graph.node)
    for f in model.functions:
        nodes(f.node)
    return seen


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
                known = ", ".join(_fid(f) for f in model.functions) or "none"
                raise OpshiftError(f"--functions: no model-local function {name!r} "
                                   f"(the model has: {known})")
            chosen.extend(hits)
    if not chosen:
        return
    called = _called(model)
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
                    f"function {_fid(f)!r}: imports opset {imp.version} of "
                    f"{d or 'ai.onnx'!r} but the model imports {model_ops[d]}; inlining "
                    "would change the version of its nodes")
    before = {(f.domain, f.name) for f in model.functions}
    import onnx.inliner

    new = onnx.inliner.inline_selected_functions(model, chosen)
    model.CopyFrom(new)
    result.functions_inlined.extend(_fid(local[k]) for k in chosen)
    # Remove inlined functions that nothing calls any more (the inliner may keep them).
    still = _called(model)
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

_SAME_TYPE_OPS = frozenset((
    "Abs", "Add", "AveragePool", "BatchNormalization", "Ceil", "Clip", "Concat", "Conv",
    "ConvTranspose", "Div", "Dropout", "Elu", "Exp", "Expand", "Flatten", "Floor", "Gather",
    "Gemm", "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "Identity",
    "InstanceNormalization", "LRN", "LeakyRelu", "Log", "LogSoftmax", "MatMul", "Max",
    "MaxPool", "Mean", "Min", "Mul", "Neg", "Pad", "PRelu", "Reciprocal", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceSum", "Relu", "Reshape", "Resize", "Selu", "Sigmoid",
    "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt", "Squeeze", "Sub", "Sum",
    "Tanh", "Tile", "Transpose", "Unsqueeze", "Upsample", "LayerNormalization",
    "Sin", "Cos", "Erf", "Gelu", "HardSwish", "Mish", "ThresholdedRelu", "Celu",
))


_SAME_SHAPE_OPS = frozenset((
    "Abs", "BatchNormalization", "Cast", "Ceil", "Clip", "Dropout", "Elu", "Exp", "Floor",
    "HardSigmoid", "Identity", "InstanceNormalization", "LRN", "LeakyRelu", "Log", "Neg",
    "Reciprocal", "Relu", "Selu", "Sigmoid", "Softplus", "Softsign", "Sqrt", "Tanh",
    "ThresholdedRelu", "PRelu",
))


class _Facts:
    """Element types, shapes and constants, computed only when a site needs them."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self._types: dict[str, int] | None = None
        self._ftypes: dict = {}
        self._inferred = False
        self._shapes: dict | None = None

    def _collect(self) -> tuple[dict[str, int], dict[tuple[str, str], dict[str, int]]]:
        """(value -> elem type for graphs, per-function value -> elem type).

        Function inputs take the types of their call sites when every call of known type agrees.
        """
        local = {(f.domain, f.name): f for f in self.model.functions}
        calls: dict[tuple[str, str], list[list[int]]] = {}
        ftypes: dict[tuple[str, str], dict[str, int]] = {}

        def vis(types, vs) -> None:
            for v in vs:
                if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type:
                    types[v.name] = v.type.tensor_type.elem_type

        def graph(types, g: onnx.GraphProto) -> None:
            vis(types, g.input)
            vis(types, g.value_info)
            vis(types, g.output)
            for t in g.initializer:
                types[t.name] = t.data_type
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
                    if n.op_type == "Constant" and n.attribute:
                        a = n.attribute[0]
                        if a.type == onnx.AttributeProto.TENSOR:
                            types[n.output[0]] = a.t.data_type
                        elif a.type == onnx.AttributeProto.FLOAT:
                            types[n.output[0]] = TensorProto.FLOAT
                        elif a.type == onnx.AttributeProto.INT:
                            types[n.output[0]] = TensorProto.INT64
                    elif n.op_type == "Cast":
                        for a in n.attribute:
                            if a.name == "to" and a.type == onnx.AttributeProto.STRING:
                                types[n.output[0]] = TensorProto.DataType.Value(a.s.decode())
                            elif a.name == "to":
                                types[n.output[0]] = a.i
                    elif n.op_type == "Where" and len(n.input) == 3 and n.input[1] in types:
                        types.setdefault(n.output[0], types[n.input[1]])
                    elif n.op_type in _SAME_TYPE_OPS and n.input and n.input[0] in types:
                        types.setdefault(n.output[0], types[n.input[0]])
                for _, g in subgraphs(n):
                    graph(types, g)

        for _ in range(2 if local else 1):  # a second round for types across calls
            types: dict[str, int] = {}
            calls.clear()
            graph(types, self.model.graph)
            for key, f in local.items():
                ft: dict[str, int] = {}
                vis(ft, getattr(f, "value_info", []))
                sites = calls.get(key, [])
                for i, name in enumerate(f.input):
                    seen = {c[i] for c in sites if i < len(c)} - {0}
                    if len(seen) == 1:  # every call whose type is known agrees
                        ft.setdefault(name, seen.pop())
                nodes(ft, f.node)
                ftypes[key] = ft
        return types, ftypes

    def elem_type(self, name: str, function: onnx.FunctionProto | None = None) -> int:
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
    field: int
    label: str
    gname: str
    opsets: dict[str, int]
    function: onnx.FunctionProto | None
    sites: list[int]


def _walk(model: onnx.ModelProto, wanted: frozenset[str]) -> tuple[list[_Work], set[str]]:
    """Every scope (pre-order: a graph before its subgraphs) with the indices of the nodes to
    inline, and every name in use. One pass over the nodes."""
    used: set[str] = set()
    work: list[_Work] = []

    def graph(g: onnx.GraphProto, ops: dict[str, int], label: str, gname: str,
              function: onnx.FunctionProto | None = None) -> None:
        used.update(v.name for v in g.input)
        used.update(v.name for v in g.output)
        used.update(t.name for t in g.initializer)
        w = _Work(g, 1, label, gname, ops, function, [])
        work.append(w)
        nodes(g.node, w)

    def nodes(ns, w: _Work) -> None:
        add, upd, sites = used.add, used.update, w.sites
        for i, n in enumerate(ns):
            op = n.op_type
            add(n.name)
            upd(n.output)
            dom = n.domain
            if op in wanted and dom in ("", "ai.onnx"):
                sites.append(i)
            if (dom or has_graph_attribute(op)) and n.attribute:
                for attr, sg in subgraphs(n):
                    sub = f"{w.label}/node {n.name!r}/{attr}"
                    graph(sg, w.opsets, sub, sub, w.function)

    ops = {normalize_domain(i.domain): i.version for i in model.opset_import}
    graph(model.graph, ops, f"graph {model.graph.name!r}", model.graph.name)
    for f in model.functions:
        fops = dict(ops)
        fops.update({normalize_domain(i.domain): i.version for i in f.opset_import})
        label = f"function {f.domain + '::' if f.domain else ''}{f.name}"
        used.update(f.input)
        used.update(f.output)
        w = _Work(f, 7, label, label, fops, f, [])
        work.append(w)
        nodes(f.node, w)
    used.discard("")
    return work, used


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


def _splice_bytes(w: _Work, reps: dict[int, list[bytes]]) -> None:
    """Replace nodes by serialized nodes: the tail from the first replaced index is rebuilt
    as one serialized blob and parsed back in C (no per-field Python protobuf calls)."""
    nodes = w.owner.node
    first = min(reps)
    tag = dec._varint(w.field << 3 | 2)
    varint = dec._varint
    parts: list[bytes] = []
    for i in range(first, len(nodes)):
        r = reps.get(i)
        if r is None:
            b = nodes[i].SerializeToString()
            parts += (tag, varint(len(b)), b)
        else:
            for b in r:
                parts += (tag, varint(len(b)), b)
    del nodes[first:]
    w.owner.MergeFromString(b"".join(parts))


def inline_proto(model: onnx.ModelProto, ops: Iterable[str] | str | None = None,
                 functions: Iterable[str] | str | None = None, *,
                 keep_before: bool = False) -> InlineResult:
    """Inline ``ops`` (default: PRelu, LeakyRelu, Selu) and the model-local ``functions``
    (``"all"``, names, or None for none) in ``model``, in place.

    ``keep_before``: keep a copy of every replaced node in the result (for ``--verify``).
    Raises ConversionError (naming node, op, version) when a node cannot be inlined exactly;
    the model is then partly edited, so callers that need atomicity work on a copy.
    """
    wanted = _parse_ops(ops)
    result = InlineResult()
    if functions:
        _inline_functions(model, functions, result)
    if not wanted:
        return result
    work, used = _walk(model, wanted)
    if not any(w.sites for w in work):
        return result
    names = Names.from_used(used)
    facts = _Facts(model)
    # Deepest scopes first: editing a graph re-creates its nodes, so a subgraph is edited
    # before the graph that holds it.
    for w in reversed(work):
        opset = w.opsets.get("")
        if not w.sites or opset is None:
            continue
        b = dec.band(opset)
        reps: dict[int, list[bytes]] = {}
        consts: dict[str, onnx.TensorProto] | None = None
        nodes = w.owner.node
        for i in w.sites:
            node = nodes[i]
            version = opsets.since_version(node.op_type, opset)
            if version is None:
                continue
            site = dec.Site(node, version, opset, 0, graph=w.gname)
            if b != dec.FUNCTION:
                site.elem_type = facts.elem_type(node.input[0], w.function)
            if b == dec.LEGACY and node.op_type == "PRelu":
                if consts is None:
                    consts = _scope_constants(w)
                t = consts.get(node.input[1])
                if t is not None:
                    site.slope_value = onnx.numpy_helper.to_array(t)
                    site.slope_shape = tuple(site.slope_value.shape)
                if opset <= 6:
                    site.x_shape = facts.shape(node.input[0])
                    if site.slope_shape is None:
                        site.slope_shape = facts.shape(node.input[1])
            base = node.name or f"{node.op_type.lower()}_{i}"
            new = dec.decompose_bytes(site, base, names)
            reps[i] = new
            before = None
            if keep_before:
                before = onnx.NodeProto()
                before.CopyFrom(node)
            fkey = None if w.function is None else (w.function.domain, w.function.name)
            result.nodes.append(InlinedNode(base, node.op_type, version, opset, b, w.label,
                                            before, new, w.opsets, fkey))
        if reps:
            _splice_bytes(w, reps)
    return result


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
    proto, kind, _ = to_proto(model)
    if kind == "proto":
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        proto = copy
    inline_proto(proto, ops, functions)
    return from_proto(proto, kind)


try:
    import onnx_ir as ir
    from onnx_ir import passes as _ir_passes

    class InlinePass(_ir_passes.InPlacePass):
        """``onnx_ir`` adapter over :func:`inline_proto`; ``modified`` is True only if
        something was inlined. The last :class:`InlineResult` is in :attr:`last_result`."""

        def __init__(self, ops: Iterable[str] | str | None = None,
                     functions: Iterable[str] | str | None = None):
            super().__init__()
            self.ops = ops
            self.functions = functions
            self.last_result: InlineResult | None = None

        def call(self, model: ir.Model) -> _ir_passes.PassResult:
            proto = ir.serde.serialize_model(model)
            result = inline_proto(proto, self.ops, self.functions)
            self.last_result = result
            if not result.modified:
                return _ir_passes.PassResult(model, modified=False)
            new = ir.serde.deserialize_model(proto)
            _replace_ir_model(model, new)
            return _ir_passes.PassResult(model, modified=True)

    def _replace_ir_model(model: ir.Model, new: ir.Model) -> None:
        for cls in type(model).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if slot != "__weakref__" and hasattr(new, slot):
                    setattr(model, slot, getattr(new, slot))
        if hasattr(new, "__dict__"):
            model.__dict__.update(new.__dict__)
except ImportError:  # pragma: no cover - onnx_ir is a dependency
    pass

__all__ = ["inline", "inline_proto", "verify_inline", "InlineResult", "InlinedNode",
           "InlinePass"]
