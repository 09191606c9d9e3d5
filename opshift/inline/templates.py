"""PRelu, LeakyRelu and Selu as primitive ops valid at a given opset: the patterns ``inline`` emits.

This module is the one description of what ``opshift inline`` writes; the ``fuse`` rules
mirror it. One builder per (op, opset band); every builder returns node *templates* whose
value names are placeholders (``$X``, ``$S`` inputs, ``$Y`` output, ``$<Suffix>`` internal
values), instantiated per node by :func:`instantiate` (:mod:`.decompose` picks the template
of a node). Internal values and nodes are named
``<node>/<Suffix>`` (``<node>`` is the node's name or ``<op>_<index>``), e.g.
``prelu_3/XLessThanZero``, made unique with :class:`opshift.graph.names.Names`.

Bands (``opset`` is the default-domain opset of the node's graph or function):

**function** (opset >= 15, CastLike exists): the schema's function body, node for node
(PRelu-16, LeakyRelu-16, Selu-18 bodies; they are valid from opset 15 on), ``@alpha`` /
``@gamma`` replaced by the node's attribute or the default of the node's op version::

    PRelu:     Zero=Constant(value=float 0); ZeroCast=CastLike(Zero,X)
               XLessThanZero=Less(X,ZeroCast); SlopeMulX=Mul(slope,X)
               Y=Where(XLessThanZero,SlopeMulX,X)
    LeakyRelu: Alpha=Constant(value_float=a); AlphaCast=CastLike(Alpha,X)
               Zero=Constant(value=float 0); ZeroCast=CastLike(Zero,X)
               XLessThanZero=Less(X,ZeroCast); AlphaMulX=Mul(AlphaCast,X)
               Y=Where(XLessThanZero,AlphaMulX,X)
    Selu:      Alpha/AlphaCast, Gamma/GammaCast, Zero/ZeroCast as above
               ExpX=Exp(X); AlphaMulExpX=Mul(AlphaCast,ExpX)
               AlphaMulExpXSubAlpha=Sub(AlphaMulExpX,AlphaCast)
               Neg=Mul(GammaCast,AlphaMulExpXSubAlpha); Pos=Mul(GammaCast,X)
               XLessThanZero=Less(X,ZeroCast); Y=Where(XLessThanZero,Neg,Pos)

**static** (opsets 9..14): the same nodes with every ``Constant`` + ``CastLike(c, X)`` pair
folded into one scalar ``Constant(value=<tensor of X's element type>)`` whose output keeps
the CastLike's name (``ZeroCast``, ``AlphaCast``, ``GammaCast``).

**legacy** (opsets 1..8: no Where; Less is float-only before 9; Mul/Sub/Add take
``broadcast=1`` (and ``axis``) before 7). ``A``/``G``/``S`` are scalar typed Constants named
``Alpha``/``Gamma`` (or the slope, see below); every Mul/Sub/Add with a constant operand
carries ``broadcast=1`` at opset <= 6::

    LeakyRelu, 0 < a <= 1:  AlphaMulX=Mul(X,A); Y=Max(X,AlphaMulX)
    LeakyRelu, a > 1:       AlphaMulX=Mul(X,A); Y=Min(X,AlphaMulX)
    LeakyRelu, a <= 0:      ReluX=Relu(X); NegX=Neg(X); ReluNegX=Relu(NegX)
                            AlphaMulReluNegX=Mul(ReluNegX,A); Y=Sub(ReluX,AlphaMulReluNegX)
    PRelu: as LeakyRelu with the slope S for A (Slope*/SlopeMul* names): Max form when the
           slope is a constant with every element in (0, 1], Min form when every element is
           > 1, else the Sub(Relu(X), Mul(Relu(Neg(X)), S)) form.
    Selu:  NegX=Neg(X); ReluNegX=Relu(NegX); MinX0=Neg(ReluNegX); ExpMinX0=Exp(MinX0)
           AlphaMulExp=Mul(ExpMinX0,A); AlphaMulExpSubAlpha=Sub(AlphaMulExp,A)
           ReluX=Relu(X); Sum=Add(ReluX,AlphaMulExpSubAlpha); Y=Mul(Sum,G)

In the legacy band exp only sees min(x, 0), so large x never overflows, and every result is
computed by the same float operations, in the same order, as the evaluator's Selu.

**float16 and bfloat16** LeakyRelu and Selu compute in float32 with their float32 attributes
and round once (opshift's meaning, the runtimes'; the schema bodies round every step and the
attributes to X's type). Their template is the band's float32 template between Casts
(:func:`in_float32`)::

    XFloat=Cast(X, to=FLOAT); <the float32 template from XFloat to YFloat>; Y=Cast(YFloat, to=T)

PRelu needs no Casts: a product of two 16-bit values is exact in float32, so its template
computed step by step in 16 bits rounds once too.

Sign-of-zero differences (everything else is bit-exact against the evaluator, NaN as NaN)::

    op, band                        input                      op gives   inlined gives
    Selu, function/static           x = -0                     +0         -0 (schema body)
    LeakyRelu a <= 0, legacy        x = -0                     -0         +0
    LeakyRelu a == 0, legacy        x < 0 finite               -0         +0
    PRelu Sub form, legacy          x = -0                     -0         +0
    PRelu Sub form, legacy          x < 0, slope*x == -0       -0         +0
      (slope not constant, or of mixed sign/size; includes slope == 0 and underflow)

Not a sign of zero: a PRelu slope that is *not a constant* at opset <= 8 and holds +-inf or
NaN at run time gives NaN at x >= 0 (the op gives x), since Sub(Relu(x), Mul(Relu(-x), s))
multiplies s by 0 there. Constant slopes and alphas (and Selu's alpha) that are infinite
or NaN in X's type are refused (ConversionError) at opsets 1..8.

The templates are public, for rules that mirror them: :func:`function_template`,
:func:`static_template`, :func:`legacy_leaky_template`, :func:`legacy_selu_template` return
the nodes with placeholder names (``$X``, ``$S``, ``$Y``, ``$<Suffix>``);
:func:`instantiate` binds them for one node.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import onnx
from onnx import helper

from opshift import opsets
from opshift.graph.cast import make_cast
from opshift.graph.edit import constant_node, typed_scalar
from opshift.graph.names import Names
from opshift.io.tensors import tensor_array

FUNCTION, STATIC, LEGACY = "function", "static", "legacy"

#: Ops inline decomposes.
OPS = ("PRelu", "LeakyRelu", "Selu")

#: The doc_string of a ``<node>/Slope`` Constant holding a PRelu's constant slope reshaped
#: for legacy Mul broadcasting (opsets 1..6), followed by the name of the slope value it
#: was made from; ``fuse`` reads that value again where it is an initializer still holding
#: the same values and PRelu places it alike (so an initializer slope comes back).
RESHAPED_SLOPE = "opshift inline: reshaped from "


def band(opset: int) -> str:
    """The decomposition band of a default-domain opset."""
    if opset >= 15:
        return FUNCTION
    if opset >= 9:
        return STATIC
    return LEGACY


class Ref(str):
    """An attribute of a node in a function body that refers to the function's attribute."""


Template = tuple[onnx.NodeProto, ...]


def _n(op: str, inputs: Sequence[str], output: str, **attrs) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), [output], **attrs)


@functools.cache
def function_template(op: str, attrs: tuple[tuple[str, float | Ref], ...]) -> Template:
    """The newest function body the schemas give for ``op``, with ``@attr`` references bound
    (band *function*); a :class:`Ref` value keeps the reference, renamed to the enclosing
    function's attribute."""
    body = opsets.function_body(op, opsets.MAX_OPSET)
    values = dict(attrs)
    formal = {n: f"${'S' if n == 'slope' else 'X'}" for n in body.input}
    formal.update({n: "$Y" for n in body.output})
    out = []
    for fn in body.node:
        n = onnx.NodeProto()
        n.CopyFrom(fn)
        n.ClearField("name")
        for i, v in enumerate(n.input):
            n.input[i] = formal.get(v, f"${v}")
        for i, v in enumerate(n.output):
            n.output[i] = formal.get(v, f"${v}")
        for a in n.attribute:
            if a.ref_attr_name:
                value = values[a.ref_attr_name]
                if isinstance(value, Ref):  # stays a reference, to the caller's attribute
                    a.ref_attr_name = str(value)
                else:
                    a.ClearField("ref_attr_name")
                    a.f = value
        out.append(n)
    return tuple(out)


@functools.cache
def static_template(op: str, attrs: tuple[tuple[str, float], ...], elem_type: int) -> Template:
    """:func:`function_template` with Constant+CastLike folded to typed Constants (band
    *static*)."""
    consts: dict[str, float] = {}
    for n in function_template(op, attrs):
        if n.op_type == "Constant":
            a = n.attribute[0]
            consts[n.output[0]] = (a.f if a.name == "value_float"
                                   else float(tensor_array(a.t).reshape(())))
    out = []
    for n in function_template(op, attrs):
        if n.op_type == "Constant":
            continue
        if n.op_type == "CastLike" and n.input[0] in consts:
            out.append(constant_node(n.output[0], typed_scalar(consts[n.input[0]], elem_type)))
            continue
        out.append(n)
    return tuple(out)


def _bc(opset: int, axis: int | None = None) -> dict:
    if opset >= 7:
        return {}
    return {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}


@functools.cache
def legacy_leaky_template(kind: str, alpha: float | None, elem_type: int, opset: int,
                          axis: int | None = None, broadcast: bool = True,
                          prefix: str = "Alpha") -> Template:
    """LeakyRelu/PRelu for opsets 1..8; ``kind`` is 'max', 'min' or 'sub'. ``alpha`` None:
    the slope is the input ``$S`` (PRelu)."""
    a = "$S" if alpha is None else f"${prefix}"
    nodes = []
    if alpha is not None:
        nodes.append(constant_node(a, typed_scalar(alpha, elem_type)))
    bc = _bc(opset, axis) if broadcast else {}
    if kind in ("max", "min"):
        nodes.append(_n("Mul", ["$X", a], f"${prefix}MulX", **bc))
        nodes.append(_n("Max" if kind == "max" else "Min", ["$X", f"${prefix}MulX"], "$Y"))
    else:
        nodes += [
            _n("Relu", ["$X"], "$ReluX"),
            _n("Neg", ["$X"], "$NegX"),
            _n("Relu", ["$NegX"], "$ReluNegX"),
            _n("Mul", ["$ReluNegX", a], f"${prefix}MulReluNegX", **bc),
            _n("Sub", ["$ReluX", f"${prefix}MulReluNegX"], "$Y"),
        ]
    return tuple(nodes)


@functools.cache
def legacy_selu_template(alpha: float, gamma: float, elem_type: int, opset: int) -> Template:
    """Selu for opsets 1..8: gamma * (Relu(x) + (alpha * exp(min(x, 0)) - alpha))."""
    bc = _bc(opset)
    return (
        constant_node("$Alpha", typed_scalar(alpha, elem_type)),
        constant_node("$Gamma", typed_scalar(gamma, elem_type)),
        _n("Neg", ["$X"], "$NegX"),
        _n("Relu", ["$NegX"], "$ReluNegX"),
        _n("Neg", ["$ReluNegX"], "$MinX0"),
        _n("Exp", ["$MinX0"], "$ExpMinX0"),
        _n("Mul", ["$ExpMinX0", "$Alpha"], "$AlphaMulExp", **bc),
        _n("Sub", ["$AlphaMulExp", "$Alpha"], "$AlphaMulExpSubAlpha", **bc),
        _n("Relu", ["$X"], "$ReluX"),
        _n("Add", ["$ReluX", "$AlphaMulExpSubAlpha"], "$Sum"),
        _n("Mul", ["$Sum", "$Gamma"], "$Y", **bc),
    )


#: The element types LeakyRelu and Selu compute in float32 (see the module docstring).
NARROW = frozenset({onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})

_WRAPPED: dict[tuple[int, int, int], tuple[Template, Template]] = {}


def in_float32(template: Template, elem_type: int, opset: int) -> Template:
    """``template`` (a float32 one, made by the cached builders above) run between Casts:
    ``$X`` cast to float32 as ``$XFloat``, the result ``$YFloat`` cast back to
    ``elem_type`` as ``$Y``; made once per (template, type, opset). The caller checks that
    Cast at ``opset`` converts both ways."""
    key = (id(template), elem_type, opset)
    hit = _WRAPPED.get(key)
    if hit is None or hit[0] is not template:
        # the entry keeps the template alive, so its id is not reused while it is here
        rename = {"$X": "$XFloat", "$Y": "$YFloat"}
        nodes = [make_cast("$X", "$XFloat", onnx.TensorProto.FLOAT, opset, "")]
        for t in template:
            n = onnx.NodeProto()
            n.CopyFrom(t)
            n.input[:] = [rename.get(v, v) for v in n.input]
            n.output[:] = [rename.get(v, v) for v in n.output]
            nodes.append(n)
        nodes.append(make_cast("$YFloat", "$Y", elem_type, opset, ""))
        hit = _WRAPPED[key] = (template, tuple(nodes))
    return hit[1]


def signed_zero_exact(op: str, band_: str, nodes: Sequence[onnx.NodeProto]) -> bool:
    """False when the emitted ``nodes`` fall under a sign-of-zero row of the table above."""
    if op == "Selu":
        return band_ == LEGACY
    if band_ == LEGACY:  # (a Cast back to 16 bits keeps the sign of zero)
        last = next((n for n in reversed(nodes) if n.op_type != "Cast"), None)
        return last is None or last.op_type != "Sub"
    return True


# -- instantiation ----------------------------------------------------------------------------

#: Placeholders every template may use, by slot: X, Y, the slope, and the empty name of an
#: omitted optional input. Slots from 4 on are the template's internal values.
_BOUND = {"$X": 0, "$Y": 1, "$S": 2, "": 3}


@dataclass(frozen=True)
class Form:
    """A template ready to bind, many times: the suffix (``/<Suffix>``) of each internal
    value in order of first appearance, then ``/Y`` (the last node's name), and per node the
    node without its input, output and name (its op, attributes, domain), a getter of its
    inputs' slots, and the slots of its output and of its name (see ``_BOUND``)."""

    suffixes: tuple[str, ...]
    nodes: tuple[tuple[onnx.NodeProto, Callable[[list], tuple], int, int], ...]
    #: node index -> key of the zero Constants (``Zero``, or ``ZeroCast`` folded to X's
    #: type), which one node of a scope can give every site there
    zeros: dict[int, bytes] = field(default_factory=dict)

    def bind(self, add: Callable[[], onnx.NodeProto], x: str, y: str, slope: str | None,
             base: str, names: Names, shared: dict[bytes, onnx.NodeProto] | None = None
             ) -> tuple[onnx.NodeProto, ...]:
        """Add the template's nodes, each made by ``add()`` (a node list's ``add``):
        ``$X``/``$S``/``$Y`` bound to the node's values, each internal value to a fresh
        ``<base>/<Suffix>``, every node named as its output but the last, named
        ``<base>/Y``. With ``shared`` (one dict per node list), a zero Constant an earlier
        site of the list added is read instead of added again; those read are returned."""
        values = [x, y, slope, "", *names.fresh_all(base, self.suffixes)]
        borrowed = []
        for k, (rest, inputs, output, name) in enumerate(self.nodes):
            key = self.zeros.get(k) if shared is not None else None
            if key is not None:
                hit = shared.get(key)
                if hit is not None:
                    values[output] = hit.output[0]
                    borrowed.append(hit)
                    continue
            n = add()
            n.CopyFrom(rest)
            n.input.extend(inputs(values))
            n.output.append(values[output])
            n.name = values[name]
            if key is not None:
                shared[key] = n
        return tuple(borrowed)


def _getter(slots: tuple[int, ...]) -> Callable[[list], tuple]:
    """The values at ``slots`` of a list, as a tuple (one C call per node bound)."""
    if not slots:
        return lambda values: ()
    if len(slots) == 1:
        i = slots[0]
        return lambda values: (values[i],)
    return operator.itemgetter(*slots)


def _form(template: Template) -> Form:
    slot = dict(_BOUND)
    suffixes = []
    nodes = []
    for t in template:
        o = t.output[0]
        if o not in slot:
            slot[o] = len(slot)
            suffixes.append("/" + o[1:])
        rest = onnx.NodeProto()
        rest.CopyFrom(t)
        for name in ("input", "output", "name"):
            rest.ClearField(name)
        nodes.append((rest, tuple(slot[v] for v in t.input), slot[o]))
    last = len(slot)  # the slot of ``/Y``, the last node's name
    zeros = {k: rest.SerializeToString() for k, (rest, ins, _) in enumerate(nodes)
             if rest.op_type == "Constant" and not ins
             and template[k].output[0] in ("$Zero", "$ZeroCast")}
    return Form((*suffixes, "/Y"), tuple((rest, _getter(ins), out, last if out == 1 else out)
                                         for rest, ins, out in nodes), zeros)


_FORMS: dict[int, tuple[Template, Form]] = {}


def form(template: Template) -> Form:
    """The :class:`Form` of ``template``, made once per template."""
    hit = _FORMS.get(id(template))
    if hit is None or hit[0] is not template:
        # the entry keeps the template alive, so its id is not reused while it is here
        hit = _FORMS[id(template)] = (template, _form(template))
    return hit[1]


def instantiate(template: Template, x: str, y: str, base: str, names: Names,
                slope: str | None = None) -> list[onnx.NodeProto]:
    """The nodes of ``template`` for one node whose input is ``x`` (and ``slope``) and
    output ``y``: internal values named ``<base>/<Suffix>`` (``_k`` appended when taken),
    the last node ``<base>/Y``."""
    nodes = onnx.GraphProto().node
    form(template).bind(nodes.add, x, y, slope, base, names)
    return list(nodes)
