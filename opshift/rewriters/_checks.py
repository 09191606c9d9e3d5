"""Exactness checks shared by the rules: each raises :class:`Refuse` with a one-line reason.

Exact here means: the fused op returns the same value as the matched nodes for every input,
infinities and NaN included (NaN compared as NaN), with one documented exception -- the sign
of a zero result may differ (``+0`` vs ``-0``), as it does between ONNX's own function
bodies and op definitions (e.g. Selu's body maps ``-0`` to ``-0``, the op to ``+0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from ..broadcast import numpy_shape, rule_for_version, slope_shape_for
from ..errors import EvaluationError
from ._values import Const, dtype_of, float32_attr, ref_attr, resolve, shape_of, type_allowed

Shape = tuple[int | str | None, ...]


#: Placement "per channel on axis 1" for an X of unknown shape (legacy Mul axis=1).
AXIS1 = ("axis 1",)


class Refuse(Exception):
    """A match that cannot be fused exactly; the message says why."""


@dataclass
class Plan:
    """What a rule's rewrite emits, decided by its check."""

    op: str
    x: ir.Value
    slope: ir.Value | None = None
    slope_array: np.ndarray | None = None  # emit a new Constant with this value
    attrs: dict[str, float] = field(default_factory=dict)
    cleanup: tuple[ir.Node, ...] = ()
    signed_zero_exact: bool = True  # False: the sign of a zero result may differ

    def describe(self) -> str:
        if self.op == "PRelu":
            return "PRelu"

        def fmt(v) -> str:
            return f"{v:.9g}" if isinstance(v, float) else f"@{v.ref_attr_name}"

        return self.op + "(" + ", ".join(f"{k}={fmt(v)}" for k, v in self.attrs.items()) + ")"


def _fmt(shape) -> str:
    return "?" if shape is None else str(list(shape))


def x_dtype(x: ir.Value, *others: Const | ir.Value | None) -> ir.DataType:
    """X's element type: declared, or that of a typed operand combined with X in a binary op."""
    dt = dtype_of(x)
    if dt is not None:
        return dt
    for o in others:
        if isinstance(o, Const):
            if not o.castlike and o.array is not None:
                return ir.DataType.from_numpy(o.array.dtype)
        elif o is not None and dtype_of(o) is not None:
            return dtype_of(o)
    raise Refuse("the element type of X is not known (no type information; run shape "
                 "inference or declare value_info)")


def zero(z: ir.Value | None, x: ir.Value, what: str = "comparison operand") -> Const:
    c = resolve(z)
    if c is None:
        raise Refuse(f"the {what} is not a constant")
    if c.source.dtype.kind not in "fiub" and c.source.dtype.name != "bfloat16":
        raise Refuse(f"the {what} is not numeric")
    src = c.source
    if not (src.item() == 0 if src.size == 1 else bool((src.astype(np.float64) == 0).all())):
        raise Refuse(f"the {what} is not zero (value {c.source.ravel()[:4].tolist()})")
    _no_expand(c.shape, x, what)
    return c


def fits(xs: Shape, shape: Shape) -> Shape | None:
    """``shape`` placed on X as numpy broadcasting does, if it provably broadcasts to X
    without changing X's shape (an unknown dim fits only a 1, a symbolic dim only itself)."""
    if len(shape) > len(xs):
        return None
    for s, d in zip(shape, xs[len(xs) - len(shape):]):
        if s == 1:
            continue
        if s is None or d is None or s != d:
            return None
    return numpy_shape(xs, shape)


def _no_expand(shape: Shape, x: ir.Value, what: str) -> None:
    """``shape`` broadcasts to X without changing X's shape."""
    if len(shape) == 0:
        return
    xs = shape_of(x)
    if xs is None:
        raise Refuse(f"the shape of X is unknown, so a {what} of shape {list(shape)} might "
                     "broadcast X to another shape")
    if fits(xs, shape) is None:
        raise Refuse(f"the {what} of shape {list(shape)} does not broadcast to X of shape "
                     f"{_fmt(xs)} without changing it")


def scalar_attr(c: Const, dtype: ir.DataType, what: str) -> float:
    """The float32 attribute value that reproduces constant ``c`` exactly in X's dtype."""
    if c.source.size != 1:
        raise Refuse(f"{what} has {c.source.size} elements; the attribute is one float")
    if c.castlike and c.source.dtype == np.float32:
        a = float(c.source.reshape(()))  # CastLike(a, X) is exactly what the op does
        if not math.isfinite(a):
            raise Refuse(f"{what} is not finite ({a})")
        return a
    arr = c.array if c.array is not None else None
    if arr is None:
        raise Refuse(f"{what}: its value in X's element type is not known")
    a = float32_attr(arr, dtype.numpy())
    if a is None:
        raise Refuse(f"{what} = {arr.ravel()[0]!r} ({arr.dtype}) is not finite or not a "
                     "float32 value, so no float attribute reproduces it exactly")
    return a


def const_in(c: Const, dtype: ir.DataType) -> np.ndarray:
    """The constant's value in X's element type (a CastLike to X rounds as numpy does)."""
    if c.array is not None:
        return c.array
    with np.errstate(all="ignore"):
        return c.source.astype(dtype.numpy())


def pattern_placement(x: ir.Value, s_shape: Shape, mul: ir.Node, s_index: int,
                      opset: int) -> Shape | None:
    """Where the Mul puts the slope on X (a shape of X's rank), or None for a rank-0 slope
    on an X of unknown shape. Refuses when the product has another shape than X."""
    xs = shape_of(x)
    if xs is None:
        if len(s_shape) == 0:
            return None
        if opset < 7 and s_index == 1 and len(s_shape) == 1 \
                and mul.attributes.get_int("broadcast", 0) == 1 \
                and mul.attributes.get_int("axis", -1) == 1:
            # legacy Mul with axis=1 runs only when X's dim 1 equals the slope's length,
            # which is exactly when legacy PRelu applies a 1-D slope per channel
            return AXIS1
        raise Refuse(f"the shape of X is unknown, so a slope of shape {list(s_shape)} "
                     "might broadcast X to another shape")
    rank = len(xs)
    if opset >= 7:
        p = fits(xs, s_shape)
        if p is None:
            raise Refuse(f"slope of shape {list(s_shape)} does not broadcast to X of shape "
                         f"{_fmt(xs)} without changing it")
        return p
    # legacy Mul (opset <= 6): B broadcasts to A only with broadcast=1, placed at axis
    bcast = mul.attributes.get_int("broadcast", 0)
    if list(s_shape) == list(xs) and None not in xs:
        return tuple(s_shape)
    if not bcast or s_index != 1:
        raise Refuse(f"legacy Mul (opset {opset}) without broadcast=1 on the slope: slope "
                     f"{list(s_shape)} and X {_fmt(xs)} must have the same shape")
    size = 1
    for d in s_shape:
        size = size * d if isinstance(d, int) else -1
    if size == 1:
        return (1,) * rank
    axis_attr = mul.attributes.get("axis")
    axis = axis_attr.as_int() if axis_attr is not None else rank - len(s_shape)
    if axis < 0 or axis + len(s_shape) > rank or any(
            s is None or s != d for s, d in zip(s_shape, xs[axis:axis + len(s_shape)])):
        raise Refuse(f"legacy Mul broadcast (axis {axis}) of slope {list(s_shape)} does "
                     f"not fit X {_fmt(xs)}")
    return (1,) * axis + tuple(s_shape) + (1,) * (rank - axis - len(s_shape))


def prelu_placement_matches(x: ir.Value, s_shape: Shape, placed: Shape | None,
                            version: int) -> None:
    """PRelu at schema ``version`` puts the slope where the pattern did."""
    if placed is None:
        return  # rank-0 slope: one value everywhere under every rule
    if placed == AXIS1:
        if version < 7:
            return
        raise Refuse(f"PRelu-{version} broadcasts the slope as numpy does, and the shape of X "
                     "is unknown")
    xs = shape_of(x)
    rule = rule_for_version(version)
    size = 1
    for d in s_shape:
        size = size * d if isinstance(d, int) else -1
    if version < 7 and len(s_shape) == 1 and size != 1 and len(xs) >= 2 \
            and not isinstance(xs[1], int):
        raise Refuse(f"PRelu-{version} reads a 1-D slope per channel when its length equals "
                     f"X's dim 1, which is not static here ({xs[1]!r})")
    try:
        target = slope_shape_for(xs, s_shape, rule)
    except EvaluationError as e:
        raise Refuse(f"PRelu-{version}: {e}") from None
    if tuple(target) != tuple(placed):
        raise Refuse(f"PRelu-{version} would place slope {list(s_shape)} as "
                     f"{list(target)} on X {_fmt(xs)}; the pattern places it as "
                     f"{list(placed)}")


def _is_float(dtype: ir.DataType) -> bool:
    return dtype.is_floating_point()


def producers(*consts: Const | None) -> tuple[ir.Node, ...]:
    out: list[ir.Node] = []
    for c in consts:
        if c is not None:
            out.extend(c.producers)
    return tuple(out)


def slope_plan(x: ir.Value, s: ir.Value, mul: ir.Node, opset: int, *,
               zero_to_slope: bool, extra: tuple[ir.Node, ...] = (),
               value_check=None, integers: str | None = None,
               scalar_is_leaky: bool = False) -> Plan:
    """PRelu or LeakyRelu for ``x < 0 ? s * x : x`` computed by ``mul`` (the Mul of s and x).

    ``zero_to_slope``: the pattern computes ``s * 0`` at x == 0 (or adds ``s * 0`` for
    x > 0), which equals PRelu's 0 only for a finite slope. ``value_check(array)`` may
    refuse slope values (e.g. the Max form needs 0 < s <= 1). ``integers``: why the pattern
    is not PRelu for integer X (wrap-around), if it is not. ``scalar_is_leaky``: a
    one-element initializer slope gives LeakyRelu too (for forms ``inline`` never writes,
    so that no PRelu of a model comes back as LeakyRelu).
    """
    c = resolve(s)
    if c is None:  # a function attribute's Constant is no constant; checked second, as rarer
        ref = ref_attr(s)
        if ref is not None:
            return _ref_leaky(x, ref, opset, zero_to_slope, value_check, extra)
    s_index = 0 if mul.inputs[0] is s else 1
    if c is None:
        if value_check is not None:
            raise Refuse("the slope is not a constant, so its values cannot be checked")
        if zero_to_slope:
            raise Refuse("the slope is not a constant: the pattern computes slope*0 where "
                         "PRelu returns x, which differs for an infinite or NaN slope")
        s_shape = shape_of(s)
        if s_shape is None:
            raise Refuse("the slope is not a constant and its shape is unknown")
        dtype = x_dtype(x, s)
    else:
        s_shape = c.shape
        dtype = x_dtype(x, c)
        arr = const_in(c, dtype)
        if value_check is not None:
            value_check(arr)
        if zero_to_slope and not bool(np.all(np.isfinite(arr.astype(np.float64)))):
            raise Refuse("the slope is not finite: the pattern computes slope*0 (NaN) where "
                         "PRelu returns x")
    if integers is not None and not _is_float(dtype):
        raise Refuse(f"integer X ({dtype.name.lower()}): {integers}")
    placed = pattern_placement(x, s_shape, mul, s_index, opset)
    cleanup = extra + producers(c)
    if c is not None and (c.origin == "constant" or scalar_is_leaky) and c.source.size == 1:
        version, ok = type_allowed("LeakyRelu", opset, dtype)
        if ok:
            try:
                alpha = scalar_attr(c, dtype, "the slope")
            except Refuse:
                alpha = None
            if alpha is not None:
                return Plan("LeakyRelu", x, attrs={"alpha": alpha}, cleanup=cleanup,
                            signed_zero_exact=not zero_to_slope)
    version, ok = type_allowed("PRelu", opset, dtype)
    if not ok:
        raise Refuse(f"PRelu-{version} at opset {opset} does not accept element type "
                     f"{dtype.name.lower()}" if version else f"no PRelu at opset {opset}")
    prelu_placement_matches(x, s_shape, placed, version)
    if c is None or not (c.castlike or any(p.op_type == "Cast" for p in c.producers)):
        return Plan("PRelu", x, slope=s, cleanup=cleanup, signed_zero_exact=not zero_to_slope)
    return Plan("PRelu", x, slope_array=const_in(c, dtype), cleanup=cleanup,
                signed_zero_exact=not zero_to_slope)


def _ref_leaky(x, ref, opset, zero_to_slope, value_check, extra) -> Plan:
    """LeakyRelu with ``alpha=@name`` in a function body whose slope is that attribute."""
    name, nodes = ref
    if value_check is not None:
        raise Refuse(f"the slope is function attribute @{name}: its values cannot be checked")
    if zero_to_slope:
        raise Refuse(f"the slope is function attribute @{name}: cannot prove it finite, and "
                     "the pattern computes slope*0 where LeakyRelu returns x")
    dtype = x_dtype(x)
    version, ok = type_allowed("LeakyRelu", opset, dtype)
    if not ok:
        raise Refuse(f"LeakyRelu-{version} at opset {opset} does not accept element type "
                     f"{dtype.name.lower()}")
    alpha = ir.RefAttr("alpha", name, ir.AttributeType.FLOAT)
    return Plan("LeakyRelu", x, attrs={"alpha": alpha}, cleanup=extra + nodes)


def _ref_attrs(values: list[ir.Value], what: str) -> tuple[ir.RefAttr, tuple] | None:
    refs = [ref_attr(v) for v in values]
    if all(r is None for r in refs):
        return None
    if any(r is None for r in refs) or len({r[0] for r in refs}) != 1:
        raise Refuse(f"the {what} operands are not all the same function attribute")
    nodes = tuple(n for r in refs for n in r[1])
    return ir.RefAttr(what, refs[0][0], ir.AttributeType.FLOAT), nodes


def _ref_selu(x, opset, alphas, gammas, ra, rg, extra) -> Plan:
    """Selu whose alpha and/or gamma is a function attribute (values resolved per call)."""
    vals: dict = {}
    nodes: tuple = ()
    for name, r, vs in (("alpha", ra, alphas), ("gamma", rg, gammas)):
        if r is not None:
            vals[name], more = r
            nodes += more
        else:
            cs = [resolve(v) for v in vs]
            if any(c is None for c in cs):
                raise Refuse(f"{name} is not a constant")
            got = {scalar_attr(c, x_dtype(x, c), name) for c in cs}
            if len(got) != 1:
                raise Refuse(f"the {name} operands differ")
            vals[name] = got.pop()
            nodes += producers(*cs)
    dtype = x_dtype(x)
    version, ok = type_allowed("Selu", opset, dtype)
    if not ok:
        raise Refuse(f"Selu-{version} at opset {opset} does not accept element type "
                     f"{dtype.name.lower()}")
    return Plan("Selu", x, attrs=vals, cleanup=extra + nodes)


def selu_plan(x: ir.Value, opset: int, alphas: list[ir.Value], gammas: list[ir.Value],
              extra: tuple[ir.Node, ...] = ()) -> Plan:
    """Selu for a pattern whose alpha (gamma) operands are ``alphas`` (``gammas``)."""
    seen: dict[int, Const | None] = {}  # the body uses AlphaCast / GammaCast twice each

    def once(v: ir.Value) -> Const | None:
        if id(v) not in seen:
            seen[id(v)] = resolve(v)
        return seen[id(v)]

    ac = [once(a) for a in alphas]
    gc = [once(g) for g in gammas]
    if any(c is None for c in ac + gc):
        # in a function body: Constant(value_float=@attr), no constant (a constant is no
        # attribute reference, so this is looked for only when some operand is not one)
        ra, rg = _ref_attrs(alphas, "alpha"), _ref_attrs(gammas, "gamma")
        if ra is not None or rg is not None:
            return _ref_selu(x, opset, alphas, gammas, ra, rg, extra)
    if any(c is None for c in ac):
        raise Refuse("alpha is not a constant")
    if any(c is None for c in gc):
        raise Refuse("gamma is not a constant")
    dtype = x_dtype(x, *ac, *gc)
    vals = {}
    for name, cs in (("alpha", ac), ("gamma", gc)):
        cs = list({id(c): c for c in cs}.values())
        attrs = [scalar_attr(c, dtype, name) for c in cs]
        for c in cs:
            _no_expand(c.shape, x, name)
        if len({a for a in attrs}) != 1:
            raise Refuse(f"the {name} operands differ ({', '.join(map(str, attrs))})")
        vals[name] = attrs[0]
    version, ok = type_allowed("Selu", opset, dtype)
    if not ok:
        raise Refuse(f"Selu-{version} at opset {opset} does not accept element type "
                     f"{dtype.name.lower()}")
    return Plan("Selu", x, attrs=vals, cleanup=extra + producers(*ac, *gc))
