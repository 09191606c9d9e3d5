"""PRelu, LeakyRelu and Selu as primitive ops valid at a given opset: the patterns ``inline`` emits.

This module is the one description of what ``opshift inline`` writes; the ``fuse`` rules
mirror it. One builder per (op, opset band); every builder returns node *templates* whose
value names are placeholders (``$X``, ``$S`` inputs, ``$Y`` output, ``$<Suffix>`` internal
values), instantiated per node by :func:`decompose`. Internal values and nodes are named
``<node>/<Suffix>`` (``<node>`` is the node's name or ``<op>_<index>``), e.g.
``prelu_3/XLessThanZero``, made unique with :class:`opshift.passes._graph.Names`.

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

PRelu slope placement (:mod:`opshift.broadcast`): at opset >= 7 the slope broadcasts as
numpy does and is used as is. At opset <= 6 (legacy per-channel rule) the slope's
placement is resolved from static shapes: a slope of X's shape is used as is; otherwise
the non-1 span of the placed slope becomes the Mul's B with ``broadcast=1`` and ``axis``
(``axis=1`` for a per-channel slope). A slope of another shape is reshaped to the span: a
constant by a new ``<node>/Slope`` Constant; a value that may change at run time (a graph
input, including an IR < 4 initializer that is also an input) by ``<node>/Slope =
Squeeze(slope, axes=<its 1-dims outside the span>)``. A placement legacy Mul cannot express
(1-dim expansion inside the span) raises ConversionError.

Only a slope that cannot change at run time (a Constant node, or an initializer that is not
a graph input) chooses the Max/Min forms by its values.

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
the nodes with placeholder names (``$X``, ``$S``, ``$Y``, ``$<Suffix>``); :func:`decompose`
gives the instantiated nodes for one node.

Element types: every type an op accepts at an opset is accepted there by the primitives
used (bfloat16 exists for the ops only from opset 16/22, integers for PRelu from 9), so no
Casts are needed; a node whose type the primitives do not accept raises ConversionError.
"""

from __future__ import annotations

import functools
import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import opsets, plan_cache
from ..broadcast import SlopeRule, slope_shape_for
from ..errors import ConversionError, EvaluationError, where
from ..external import tensor_array
from ._graph import claimable

FUNCTION, STATIC, LEGACY = "function", "static", "legacy"

#: Ops this module decomposes.
OPS = ("PRelu", "LeakyRelu", "Selu")


def band(opset: int) -> str:
    """The decomposition band of a default-domain opset."""
    if opset >= 15:
        return FUNCTION
    if opset >= 9:
        return STATIC
    return LEGACY


class Ref(str):
    """An attribute of a node in a function body that refers to the function's attribute."""


def attributes(node: onnx.NodeProto, op: str, version: int) -> dict[str, float | Ref]:
    """alpha/gamma of ``node``: its own, else the defaults of ``op`` at schema ``version``.

    (Selu-1's defaults differ from Selu-6's.) Inside a function body an attribute may be a
    reference (``alpha=@a``): it is returned as ``Ref('a')``.
    """
    out: dict[str, float | Ref] = {
        k: float(v) for k, v in opsets.attribute_defaults(op, version).items()
        if k in ("alpha", "gamma")}
    for a in node.attribute:
        if a.name in ("alpha", "gamma"):
            out[a.name] = Ref(a.ref_attr_name) if a.ref_attr_name else float(a.f)
    return out


@dataclass
class Site:
    """One node to decompose and what is statically known about it."""

    node: onnx.NodeProto
    version: int  # schema version of the op in force
    opset: int  # default-domain opset of the node's scope
    elem_type: int  # X's TensorProto element type (0 if unknown)
    x_shape: tuple | None = None
    slope_shape: tuple | None = None
    slope_value: np.ndarray | None = None  # constant slope, if known
    graph: str | None = None

    def where(self) -> str:
        return where(self.node, version=self.version, graph=self.graph)


# -- templates --------------------------------------------------------------------------------

Template = tuple[onnx.NodeProto, ...]


def _n(op: str, inputs: Sequence[str], output: str, **attrs) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), [output], **attrs)


def _scalar(value: float, elem_type: int) -> onnx.TensorProto:
    """A scalar tensor of ``elem_type`` holding float32 ``value`` cast to it: what
    ``numpy_helper.from_array`` writes, without its first-call set-up (~0.2 ms a process)."""
    arr = np.array(np.float32(value)).astype(helper.tensor_dtype_to_np_dtype(elem_type))
    if sys.byteorder == "big":  # pragma: no cover - TensorProto raw data is little-endian
        arr = arr.byteswap()
    t = onnx.TensorProto()
    t.data_type = elem_type
    t.raw_data = arr.tobytes()
    return t


def _scalar_value(t: onnx.TensorProto) -> float:
    """The value of a one-element tensor (a function body's Constant)."""
    return float(tensor_array(t).reshape(()))


@functools.cache
def _schema_body(op: str) -> onnx.FunctionProto:
    """The newest function body the schemas give for ``op``."""
    body = opsets.schema_facts().bodies.get(op)
    if body is None:  # pragma: no cover - the three ops have bodies since onnx 1.14
        raise AssertionError(f"no function body for {op}")
    f = onnx.FunctionProto()
    f.ParseFromString(body)
    return f


@functools.cache
def function_template(op: str, attrs: tuple[tuple[str, float | Ref], ...]) -> Template:
    """The schema's function body with ``@attr`` references bound (band *function*); a
    :class:`Ref` value keeps the reference, renamed to the enclosing function's attribute."""
    body = _schema_body(op)
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
                                   else _scalar_value(a.t))
    out = []
    for n in function_template(op, attrs):
        if n.op_type == "Constant":
            continue
        if n.op_type == "CastLike" and n.input[0] in consts:
            out.append(_n("Constant", [], n.output[0],
                          value=_scalar(consts[n.input[0]], elem_type)))
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
        nodes.append(_n("Constant", [], a, value=_scalar(alpha, elem_type)))
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
        _n("Constant", [], "$Alpha", value=_scalar(alpha, elem_type)),
        _n("Constant", [], "$Gamma", value=_scalar(gamma, elem_type)),
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


def _kind(values: np.ndarray) -> str:
    """'max' when every element is in (0, 1], 'min' when every element is > 1, else 'sub'."""
    if values.size and bool(np.all(values > 0)) and bool(np.all(values <= 1)):
        return "max"
    if values.size and bool(np.all(values > 1)):
        return "min"
    return "sub"


def _typed(value: float, elem_type: int) -> float:
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    return float(np.array(np.float32(value)).astype(dtype).astype(np.float64))


def signed_zero_exact(op: str, band_: str, nodes: Sequence[onnx.NodeProto]) -> bool:
    """False when the emitted ``nodes`` fall under a sign-of-zero row of the table above."""
    if op == "Selu":
        return band_ == LEGACY
    if band_ == LEGACY:
        return not nodes or nodes[-1].op_type != "Sub"
    return True


# -- instantiation ----------------------------------------------------------------------------
#
# inline's hot path: each node to replace is one call of its template's emitter, which
# writes the replacement nodes as wire-format bytes, already framed as repeated NodeProto
# fields of the scope that holds them (mostly one bytes ``%`` formatting, see _emitter). No
# protobuf message is built per node.

#: Wire-format tags of the node lists: GraphProto.node is field 1, FunctionProto.node field 7.
GRAPH_NODE_TAG, FUNCTION_NODE_TAG = b"\x0a", b"\x3a"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def varint(n: int) -> bytes:
    """Protobuf varint encoding of ``n >= 0``."""
    return _ONE_BYTE[n] if n < 0x80 else _varint(n)


_varint_cached = functools.lru_cache(maxsize=1 << 12)(varint)


def read_varint(data: bytes, p: int) -> tuple[int, int]:
    """The varint at ``data[p]``, and the offset after it."""
    n = shift = 0
    while True:
        c = data[p]
        p += 1
        n |= (c & 0x7F) << shift
        if c < 0x80:
            return n, p
        shift += 7


@dataclass(frozen=True)
class _Plan:
    """A template reduced to what an emitter writes. Slots hold framed strings (length
    varint + UTF-8): 0..3 are X, Y, S and the empty name, then the internal values in order
    of first appearance, then the last node's name (``<base>/Y``), then the constant pieces
    (the field tags of input/output/name, then each node's constant rest: op_type,
    attributes, domain). A node is the slots it concatenates, in field-number order (input
    1, output 2, name 3, the constant rest) as protobuf writes it."""

    suffixes: tuple[str, ...]  # "/V" of each internal value, then "/Y"
    nodes: tuple[tuple[int, ...], ...]
    consts: tuple[bytes, ...]
    uses_slope: bool


_FIXED = {"$X": 0, "$Y": 1, "$S": 2, "": 3}


def _without_names(data: bytes) -> bytes:
    """A serialized NodeProto without its input, output and name fields (1, 2, 3: protobuf
    writes fields in number order, so they lead): the constant rest of a template node."""
    p = 0
    while p < len(data) and data[p] in (0x0A, 0x12, 0x1A):
        n, p = read_varint(data, p + 1)
        p += n
    return data[p:]


def _plan(template: Template) -> _Plan:
    slot = dict(_FIXED)
    suffixes = []
    for t in template:
        o = t.output[0]
        if o not in slot:
            slot[o] = len(slot)
            suffixes.append("/" + o[1:])
    yname = len(slot)
    suffixes.append("/Y")
    tag_in, tag_out, tag_name = yname + 1, yname + 2, yname + 3
    consts = [b"\x0a", b"\x12", b"\x1a"]
    nodes = []
    for t in template:
        consts.append(_without_names(t.SerializeToString()))
        ins, out = t.input[:], t.output[0]
        o = slot[out]
        nodes.append((*[p for v in ins for p in (tag_in, slot[v])],
                      tag_out, o, tag_name, yname if out == "$Y" else o,
                      yname + len(consts)))
    return _Plan(tuple(suffixes), tuple(nodes), tuple(consts),
                 any(v == "$S" for t in template for v in t.input))


def _framed(b: bytes) -> bytes:
    """A length-delimited string: its varint length, then its bytes."""
    return _varint_cached(len(b)) + b


#: Length combinations an emitter keeps track of (a model's names have a few lengths each);
#: past that, calls with a new combination write directly.
MAX_FORMATS = 4096


def _emitter(plan: _Plan, formats: dict[tuple, bytes | None] | None = None):
    """``emit(x, y, s, base, names, tag) -> bytes`` for ``plan``, keeping its formats
    in ``formats`` (which may hold some already: :mod:`opshift.plan_cache`).

    The common case is one bytes ``%`` formatting. Every length in a node's wire form (of its
    strings, of the node) is fixed by the byte lengths of x, y, s and base and by the
    constants, and each name is ``base + suffix``. So per combination of those lengths (and
    tag) the emitter builds, once, a format holding everything but the raw bytes of x, y, s
    and base (``%b``, in the order they appear); a call encodes the four strings and fills
    the format in C. A combination is given a format when met a second time; the first call
    writes the nodes directly (a format costs about three such writes), so a model whose
    name lengths seldom repeat pays for no format it does not reuse. The names are claimed
    together (:meth:`~opshift.passes._graph.Names.claim`); a base whose names cannot be is
    written name by name.
    """
    suffixes, uses_slope = plan.suffixes, plan.uses_slope
    n_var = len(_FIXED) + len(suffixes)  # slots below this are strings; the rest constants
    # the raw piece each string slot shows: 0 x, 1 y, 2 s, 3 base (a name); None: the empty
    # name, a constant
    raw = [0, 1, 2, None] + [3] * len(suffixes)
    order = [raw[i] for node in plan.nodes for i in node if i < n_var and raw[i] is not None]
    pick = operator.itemgetter(*order) if len(order) > 1 else (lambda v: (v[order[0]],))
    if formats is None:
        formats = {}  # (lx, ly, ls, lb, tag) -> format; None: met once
    getters = [operator.itemgetter(*node) for node in plan.nodes]
    consts = list(plan.consts)
    # what a format needs that no length changes: per name its suffix (length, escaped
    # bytes); per node the total length of its constants, and its string slots
    raw_sfx = [(len(e), e) for e in (x.encode() for x in suffixes)]
    sfx = [(n, e.replace(b"%", b"%%")) for n, e in raw_sfx]
    const_esc = [c.replace(b"%", b"%%") for c in plan.consts]
    per_node = [(sum(len(plan.consts[i - n_var]) for i in node if i >= n_var),
                 [i for i in node if i < n_var], node) for node in plan.nodes]

    def build(lx: int, ly: int, ls: int, lb: int, tag: bytes) -> bytes:
        lens = [lx, ly, ls, 0, *[lb + k for k, _ in sfx]]
        pre = [_varint_cached(n) for n in lens]  # slot 3, the empty name: b"\x00"
        real = [len(p) + n for p, n in zip(pre, lens)]
        esc = [p.replace(b"%", b"%%") + b"%b" for p in pre[:3]]
        esc.append(b"\x00")
        esc += [p.replace(b"%", b"%%") + b"%b" + e for p, (_, e) in zip(pre[4:], sfx)]
        esc += const_esc
        out = []
        for const, slots, node in per_node:
            size = const + sum([real[i] for i in slots])
            out += (tag, _varint_cached(size).replace(b"%", b"%%"), *[esc[i] for i in node])
        return b"".join(out)

    def write(strings: list[bytes], tag: bytes) -> bytes:
        """The nodes from the framed strings of slots 0.. (then the constants)."""
        vals = strings + consts
        out = []
        for get in getters:
            b = b"".join(get(vals))
            out += (tag, _varint_cached(len(b)), b)
        return b"".join(out)

    def direct(xb: bytes, yb: bytes, sb: bytes, bb: bytes, tag: bytes) -> bytes:
        k = len(bb)
        return write([_framed(xb), _framed(yb), _framed(sb), b"\x00",
                      *[_varint_cached(k + n) + bb + e for n, e in raw_sfx]], tag)

    def taken(x: str, y: str, s: str | None, base: str, names, tag: bytes) -> bytes:
        """A base whose names cannot be claimed together: each ``base + suffix`` is taken in
        turn (``_k`` when in use)."""
        fresh = names.fresh
        return write([_framed(x.encode()), _framed(y.encode()),
                      _framed(s.encode()) if uses_slope else b"", b"\x00",
                      *[_framed(fresh(base + suffix).encode()) for suffix in suffixes]], tag)

    grouped = claimable(suffixes)

    def emit(x, y, s, base, names, tag):
        # (Names.claim, written out: this is the hot path)
        claims = names._claims
        if not grouped or base in claims or \
                not names._used.isdisjoint([base + suffix for suffix in suffixes]):
            return taken(x, y, s, base, names, tag)
        claims[base] = suffixes
        xb, yb, bb = x.encode(), y.encode(), base.encode()
        sb = s.encode() if uses_slope else b""
        key = (len(xb), len(yb), len(sb), len(bb), tag)
        fmt = formats.get(key, b"")
        if not fmt:
            if fmt is None:  # met before: worth a format
                fmt = formats[key] = build(*key)
            else:
                if len(formats) < MAX_FORMATS:
                    formats[key] = None
                return direct(xb, yb, sb, bb, tag)
        return fmt % pick((xb, yb, sb, bb))

    return emit


_EMITTERS: dict[int, tuple[Template, Callable[..., bytes]]] = {}


def emitter(template: Template) -> Callable[..., bytes]:
    """``emit(x, y, slope, base, names, tag) -> bytes``: :func:`instantiate` for
    ``template``, for inline's hot loop. Cached per template; see :func:`_emitter` for how
    it writes."""
    hit = _EMITTERS.get(id(template))
    if hit is None or hit[0] is not template:
        # the entry keeps the template alive, so its id is not reused while cached
        hit = _EMITTERS[id(template)] = (template, _emitter(_plan(template)))
    return hit[1]


_KEYED_EMITTERS: dict[tuple, Callable[..., bytes]] = {}
MAX_KEYED_EMITTERS = 4096  # (keys hold attribute values: bounded for a long-lived process)


def band_emitter(key: tuple, site: Callable[[], Site]) -> Callable[..., bytes]:
    """:func:`emitter` for the band template of the sites that ``key`` stands for: (band,
    op, version, X's element type (0 in the function band), then per attribute its name,
    float value and reference name, everything :func:`band_template` reads of a site). The
    plan comes from the on-disk cache (:mod:`opshift.plan_cache`) when it is there, else
    from ``site()``'s template (which raises ConversionError when such a site cannot be
    inlined; only plans that could be made are stored)."""
    emit = _KEYED_EMITTERS.get(key)
    if emit is None:
        got = plan_cache.get(key)
        if got is not None:
            plan, formats = _Plan(*got[0]), dict(got[1])
        else:
            plan, formats = _plan(band_template(site())), {}
            plan_cache.put(key, (plan.suffixes, plan.nodes, plan.consts, plan.uses_slope))
        plan_cache.track(key, formats)  # the formats the emitter builds, for the next process
        emit = _emitter(plan, formats)
        if len(_KEYED_EMITTERS) < MAX_KEYED_EMITTERS:
            _KEYED_EMITTERS[key] = emit
    return emit


def instantiate(template: Template, x: str, y: str, base: str, names,
                slope: str | None = None, tag: bytes = GRAPH_NODE_TAG) -> bytes:
    """The nodes of ``template`` with placeholders bound (``$X``/``$S``/``$Y`` to the node's
    values, internal ``$V`` to fresh ``<base>/V``, the last node named ``<base>/Y``),
    serialized as repeated node fields with wire tag ``tag`` (see ``GRAPH_NODE_TAG``)."""
    return emitter(template)(x, y, slope, base, names, tag)


def nodes_of(blob: bytes) -> list[onnx.NodeProto]:
    """The NodeProtos of a blob :func:`instantiate` built (with either tag)."""
    if blob[:1] == FUNCTION_NODE_TAG:  # framed as FunctionProto.node (field 7)
        return list(onnx.FunctionProto.FromString(blob).node)
    return list(onnx.GraphProto.FromString(blob).node)


def frame(nodes: Sequence[onnx.NodeProto], tag: bytes = GRAPH_NODE_TAG) -> bytes:
    """``nodes`` serialized as repeated node fields with wire tag ``tag``."""
    parts = []
    for n in nodes:
        b = n.SerializeToString()
        parts += (tag, varint(len(b)), b)
    return b"".join(parts)


def _legacy_slope(site: Site, base: str, names
                  ) -> tuple[list[onnx.NodeProto], str, int | None, bool]:
    """Resolve a PRelu slope for opset <= 6: (extra nodes, slope value name, axis, broadcast)."""
    node = site.node
    x_shape, s_shape = site.x_shape, site.slope_shape
    if s_shape is not None and x_shape is not None and tuple(s_shape) == tuple(x_shape):
        return [], node.input[1], None, False
    if s_shape is not None and all(isinstance(d, int) for d in s_shape) \
            and int(np.prod(s_shape, dtype=np.int64)) == 1:
        return [], node.input[1], None, True
    if x_shape is None or s_shape is None:
        raise ConversionError(
            f"{site.where()}: cannot inline legacy PRelu: the shapes of X and slope are not "
            "statically known, so the per-channel placement of the slope cannot be resolved")
    try:
        placed = slope_shape_for(x_shape, s_shape, SlopeRule.LEGACY)
    except EvaluationError as e:
        raise ConversionError(f"{site.where()}: cannot inline: {e}") from None
    non1 = [i for i, d in enumerate(placed) if d != 1]
    lo, hi = non1[0], non1[-1] + 1
    span = tuple(placed[lo:hi])
    if span != tuple(x_shape[lo:hi]):
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: slope shape "
            f"{list(s_shape)} placed as {list(placed)} on X {list(x_shape)} needs a 1-dim "
            "expansion, which legacy Mul broadcasting cannot express")
    axis = lo if hi != len(x_shape) else None
    if tuple(s_shape) == span:
        return [], node.input[1], axis, True
    if site.slope_value is None:  # at run time: Squeeze-1 drops the 1-dims outside the span
        pad = len(x_shape) - len(s_shape)
        axes = [i for i in range(len(s_shape)) if not lo <= i + pad < hi]
        name = names.fresh(f"{base}/Slope")
        squeeze = helper.make_node("Squeeze", [node.input[1]], [name], name=name, axes=axes)
        return [squeeze], name, axis, True
    value = np.asarray(site.slope_value).reshape(span)
    name = names.fresh(f"{base}/Slope")
    const = helper.make_node("Constant", [], [name], name=name,
                             value=numpy_helper.from_array(value))
    return [const], name, axis, True


def decompose(site: Site, base: str, names) -> list[onnx.NodeProto]:
    """The primitive nodes replacing ``site.node`` at ``site.opset`` (see module docstring)."""
    return nodes_of(decompose_bytes(site, base, names))


def band_template(site: Site) -> Template:
    """The template for ``site`` in the *function* and *static* bands (it depends only on the
    op, its version, its alpha/gamma and, for *static*, X's element type); ConversionError
    when the site cannot be inlined there."""
    op = site.node.op_type
    attrs = attributes(site.node, op, site.version)
    b = band(site.opset)
    if b == FUNCTION:
        return function_template(op, tuple(sorted(attrs.items())))
    if b == STATIC:
        _typed_band_checks(site, attrs)
        return static_template(op, tuple(sorted(attrs.items())), site.elem_type)
    raise AssertionError(f"band_template: opset {site.opset} is in the legacy band")


def _typed_band_checks(site: Site, attrs: dict[str, float | Ref]) -> None:
    """Refusals shared by the bands without CastLike."""
    if not site.elem_type:
        raise ConversionError(f"{site.where()}: cannot inline at opset {site.opset}: the "
                              "element type of X is not known")
    refs = [f"{k}=@{v}" for k, v in attrs.items() if isinstance(v, Ref)]
    if refs:
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: attribute reference "
            f"{', '.join(refs)} needs CastLike (opset >= 15); inline the function first "
            "(--functions)")


def decompose_bytes(site: Site, base: str, names, tag: bytes = GRAPH_NODE_TAG) -> bytes:
    """:func:`decompose` serialized as repeated node fields with wire tag ``tag`` (the form
    inline splices in)."""
    node = site.node
    op = node.op_type
    x, y = node.input[0], node.output[0]
    slope = node.input[1] if op == "PRelu" else None
    if band(site.opset) != LEGACY:
        return instantiate(band_template(site), x, y, base, names, slope, tag)
    attrs = attributes(node, op, site.version)
    _typed_band_checks(site, attrs)
    if site.elem_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                              onnx.TensorProto.DOUBLE):
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: element type "
            f"{opsets.tensor_type_name(site.elem_type)} is not accepted by Relu/Max/Mul there")
    def refuse_non_finite(what: str) -> None:
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: {what} is infinite or NaN "
            f"in {opsets.tensor_type_name(site.elem_type)}, and without Where the legacy "
            "forms would turn x >= 0 into NaN")

    if op == "Selu":
        if not np.isfinite(_typed(attrs["alpha"], site.elem_type)):
            refuse_non_finite("alpha")
        tpl = legacy_selu_template(attrs["alpha"], attrs["gamma"], site.elem_type, site.opset)
        return instantiate(tpl, x, y, base, names, None, tag)
    if op == "LeakyRelu":
        a = _typed(attrs["alpha"], site.elem_type)
        if not np.isfinite(a):
            refuse_non_finite("alpha")
        kind = _kind(np.array([a]))
        tpl = legacy_leaky_template(kind, attrs["alpha"], site.elem_type, site.opset)
        return instantiate(tpl, x, y, base, names, None, tag)
    # PRelu
    extra: list[onnx.NodeProto] = []
    axis, broadcast = None, True
    if site.opset <= 6:
        extra, slope, axis, broadcast = _legacy_slope(site, base, names)
    kind = "sub"
    if site.slope_value is not None:
        with np.errstate(over="ignore"):
            values = np.asarray(site.slope_value).astype(
                helper.tensor_dtype_to_np_dtype(site.elem_type))
        if not np.all(np.isfinite(values)):
            refuse_non_finite("a slope element")
        kind = _kind(values)
    tpl = legacy_leaky_template(kind, None, site.elem_type, site.opset, axis, broadcast,
                                "Slope")
    return frame(extra, tag) + instantiate(tpl, x, y, base, names, slope, tag)
