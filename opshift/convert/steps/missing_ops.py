"""Ops that do not exist at the target opset.

CastLike (from 15) becomes a Cast to its second input's element type. Celu (from 12) is
written as its formula, ``max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))``: the body onnx
builds, ``alpha * Elu(x / alpha)``, rounds x / alpha * alpha where x > 0 and overflows to
inf for x near the largest float when alpha < 1. Any other op is replaced by its own onnx
function body: many newer ops are defined in ``onnx.defs`` by a body of older ops (HardSwish
= HardSigmoid * x, GreaterOrEqual = Greater or Equal, Mish, Gelu, LayerNormalization, ...),
and that body *is* the op's meaning, so writing it in place of the node is exact as far as
the spec goes, but for a variance computed as mean(x^2) - mean(x)^2 (LayerNormalization,
GroupNormalization, MeanVarianceNormalization), which is written in two passes, as runtimes
compute it (:mod:`..variance`). The body's nodes come at the body's own opset; each is
converted on to the target like any other node.
"""

from __future__ import annotations

import onnx
from onnx import helper

from opshift import opsets
from opshift.convert.folding import fold_shape_arithmetic
from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step
from opshift.graph.inferred import Inferred
from opshift.graph.scopes import constant_tensor
from opshift.graph.variance import two_pass_variance
from opshift.verify.region import region_model


@replaces("CastLike")
def castlike_as_cast(st: Step) -> None:
    to = st.elem_type(st.input(1))
    src = st.elem_type(st.input(0))
    if to is None or src is None:
        raise Refuse("the element types of its inputs are unknown")
    cast_v = opsets.since_version("Cast", st.target)
    for param, t in (("T1", src), ("T2", to)):
        ts = opsets.tensor_type(t)
        if ts not in opsets.allowed_types("Cast", cast_v, param=param):
            raise Refuse(f"Cast-{cast_v} does not take {ts}")
    st.add_cast(st.input(0), to, "cast", output=st.w.output[0])
    st.remove(f"CastLike written as Cast(to={onnx.TensorProto.DataType.Name(to)})")


@replaces("Celu")
def celu_formula(st: Step) -> None:
    x, y = st.input(0), st.w.output[0]
    alpha = float(st.attr("alpha", 1.0))
    nodes: list[onnx.NodeProto] = []

    def node(op: str, inputs: list[str], what: str, **attrs) -> str:
        out = y if what == "celu" else st.fresh_value(what)
        nodes.append(helper.make_node(op, inputs, [out], name=st.fresh(f"{st.label}/{what}"),
                                      **attrs))
        return out

    a, one = (node("Constant", [], what, value=helper.make_tensor(what, onnx.TensorProto.FLOAT,
                                                                  [], [v]))
              for what, v in (("alpha", alpha), ("one", 1.0)))
    v = node("Mul", [a, node("Sub", [node("Exp", [node("Div", [x, a], "scaled")], "exp"),
                                     one], "expm1")], "negative_part")
    # min(0, v) as -max(-v, 0): their zeros' signs differ only where max(x, 0) is added to +0
    low = node("Neg", [node("Relu", [node("Neg", [v], "flipped")], "flipped_max")], "at_most_0")
    node("Add", [node("Relu", [x], "at_least_0"), low], "celu")
    _write(st, nodes, 12, "its formula", "max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))")


def write_function_body(st: Step, src: int, depth: int) -> None:
    """Replace the node by its onnx function body, each body node converted to the target
    (``src``: the scope's source opset)."""
    if depth > 4:
        raise Refuse("function bodies nest too deep")
    body, body_opset = _function_body(st)
    nodes, variances = two_pass_variance(_inline_body(st, body),
                                         lambda what: st.fresh(f"{st.label}/{what}"),
                                         set(st.w.output) - {""})
    nodes = fold_shape_arithmetic(st, nodes, body_opset)
    what = "its onnx function body"
    if variances:
        what += (" with its variance in two passes, mean((x - mean(x))^2), where the body "
                 "computes mean(x^2) - mean(x)^2 (which cancels in float32)")
    _write(st, nodes, body_opset, what, f"({', '.join(b.op_type for b in nodes)})", depth)


def _write(st: Step, nodes: list[onnx.NodeProto], body_opset: int, what: str, detail: str,
           depth: int = 0) -> None:
    """Replace the node by ``nodes`` (valid at ``body_opset``), each converted to the target;
    ``what`` they are names them in a refusal, with ``detail`` in the change."""
    from opshift.convert.walk import walk_on

    st.facts.propagate(nodes, body_opset)
    _infer_body(st, nodes, body_opset)
    for b in nodes:
        c = constant_tensor(b)
        if c is not None:
            st.facts.add_constant(st.scope, b.output[0], c)
    out = walk_on(st, nodes, body_opset, f"{what} (opset {body_opset})", depth)
    _check_types(st, out)
    st.state.pre.extend(out)
    st.remove(f"written as {what} {detail} converted to opset {st.target}")


def _input_types(st: Step) -> list[onnx.TypeProto]:
    types = []
    for name in st.w.input:
        tp = onnx.TypeProto()
        if name:
            ts = st.facts.type_str(name)
            if ts is None:
                raise Refuse(f"the type of {name!r} is unknown (the function body depends on "
                             "it)")
            tp = opsets.type_proto(ts)
            _add_shape(st, name, tp)
        types.append(tp)
    return types


def _add_shape(st: Step, name: str, tp: onnx.TypeProto) -> None:
    """The rank of ``name`` into its type ``tp`` (RotaryEmbedding's body depends on X's), with
    the dims of a constant; other dims stay unknown, as a body built on a declared dim (one
    that may be a placeholder) would compute for that size only."""
    const = st.constant(name)
    shape = tuple(const.tensor.dims) if const is not None else st.shape(name)
    if shape is None or not tp.HasField("tensor_type"):
        return
    dims = tp.tensor_type.shape
    dims.SetInParent()
    for d in shape:
        dim = dims.dim.add()
        if const is not None:
            dim.dim_value = d


def _function_body(st: Step) -> tuple[onnx.FunctionProto, int]:
    """The body of ``st.op`` at schema version ``st.lo`` for this node, the one closest to
    the target, and its opset."""
    if opsets.schema(st.op, st.lo) is None:
        raise Refuse(f"no schema {st.op}-{st.lo}")
    v = opsets.function_body_version(st.op, st.lo, near=st.target)
    if v is None:
        raise Refuse(f"{st.op}-{st.lo} has no function body in onnx.defs")
    body = opsets.function_body(st.op, st.lo, "", st.w, lambda: _input_types(st), st.target)
    if body is None:
        raise Refuse(f"onnx builds no function body for this {st.op} node")
    opset = next((i.version for i in body.opset_import if i.domain in ("", "ai.onnx")), v)
    return body, opset


def _inline_body(st: Step, body: onnx.FunctionProto) -> list[onnx.NodeProto]:
    """The body's nodes, wired to the node's inputs and outputs, with fresh inner names and
    attribute references resolved (node attribute, else the schema's default)."""
    if any(opsets.normalize_domain(n.domain) != "" for n in body.node):
        raise Refuse("the function body uses ops outside the default domain")
    rename = {"": ""}
    for i, formal in enumerate(body.input):
        rename[formal] = st.input(i)
    outs = list(st.w.output)
    for i, formal in enumerate(body.output):
        rename[formal] = outs[i] if i < len(outs) and outs[i] else st.fresh_value(formal)
    given = {a.name: a for a in st.w.attribute}
    defaults = opsets.attribute_defaults(st.op, st.lo)
    schema_attrs = opsets.schema(st.op, st.lo).attributes
    base = st.node.name or st.op.lower()
    nodes = []
    for k, n in enumerate(body.node):
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in n.attribute):
            raise Refuse("the function body holds subgraphs")
        new = onnx.NodeProto()
        new.CopyFrom(n)
        for j, v in enumerate(new.input):
            new.input[j] = rename.get(v) if v in rename else rename.setdefault(
                v, st.fresh_value(v))
        for j, v in enumerate(new.output):
            if v not in rename:
                rename[v] = st.fresh_value(v)
            new.output[j] = rename[v]
        new.name = st.fresh(f"{base}/{n.op_type.lower()}_{k}")
        attrs = []
        for a in new.attribute:
            if not a.ref_attr_name:
                attrs.append(a)
                continue
            ref = a.ref_attr_name
            if ref in given:
                v = onnx.AttributeProto()
                v.CopyFrom(given[ref])
            elif ref in defaults:
                v = helper.make_attribute(a.name, defaults[ref],
                                          attr_type=schema_attrs[ref].type)
            else:
                continue  # unset and no default: the body node's own default applies
            v.name = a.name
            attrs.append(v)
        del new.attribute[:]
        new.attribute.extend(attrs)
        nodes.append(new)
    return nodes


def _infer_body(st: Step, nodes: list[onnx.NodeProto], opset: int) -> None:
    """What onnx's shape inference says of the body's own values (element types the schema
    rules leave open, such as ConstantOfShape's; shapes, whose ranks steps such as Softmax's
    need), from the types and shapes known of the values it reads: kept as the values'
    facts. Best effort: what inference cannot say stays unknown."""
    m = _body_model(st, nodes, opset, [
        helper.make_tensor_value_info(name, st.elem_type(name) or 0, st.shape(name))
        for name in _read(nodes)])
    try:  # (a model of its own: nothing to copy first)
        inferred = Inferred(m, onnx.shape_inference.infer_shapes(m, strict_mode=False))
    except Exception:  # inference's failures: the body's values stay as they were
        return
    facts = st.facts
    for name in {o for n in nodes for o in n.output if o}:
        t = inferred.elem_type(name)
        if t and not facts.extra_types.get(name):
            facts.extra_types[name] = t
        shape = inferred.shape(name)
        if shape is not None:
            facts.extra_shapes[name] = shape


def _read(nodes: list[onnx.NodeProto]) -> list[str]:
    """The values ``nodes`` read that none of them makes, in order."""
    made = {o for n in nodes for o in n.output}
    return list(dict.fromkeys(i for n in nodes for i in n.input if i and i not in made))


def _body_model(st: Step, nodes: list[onnx.NodeProto], opset: int,
                inputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    """``nodes`` (a body written for ``st``'s node) as a model of its own at ``opset``."""
    return region_model(nodes, inputs, [helper.make_tensor_value_info(o, 0, None)
                                        for o in st.w.output if o], opset_imports={"": opset})


def _check_types(st: Step, nodes: list[onnx.NodeProto]) -> None:
    """Type-check the written body on its own (onnx builds some bodies, e.g. float16
    Attention's, that mix element types)."""
    inputs = []
    for name in _read(nodes):
        t = st.elem_type(name)
        if t is None:
            raise Refuse(f"the element type of {name!r} is unknown")
        inputs.append(helper.make_tensor_value_info(name, t, None))
    m = _body_model(st, nodes, st.target, inputs)
    try:
        onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    except Exception as e:  # onnx's message, first line
        first = str(e).splitlines()[0][:200]
        raise Refuse(f"the function body does not type-check: {first}") from None
