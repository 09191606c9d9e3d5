"""What a slope pattern (``x < 0 ? s * x : x`` in some form) fuses to: PRelu or LeakyRelu,
where the slope goes on X, and whether the op computes what the pattern does."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from opshift.broadcast import numpy_shape, rule_for_version, slope_shape_for
from opshift.errors import EvaluationError
from opshift.fuse.rules import checks as ck
from opshift.fuse.rules.checks import (
    Plan,
    Refuse,
    Shape,
    const_in,
    fmt_shape,
    is_float,
    producers,
    x_dtype,
)
from opshift.fuse.values import Const, Match, ref_attr, resolve, shape_of, type_allowed
from opshift.tables import number

#: Placement "per channel on axis 1" for an X of unknown shape (legacy Mul axis=1).
AXIS1 = ("axis 1",)


def pattern_placement(match: Match, x: ir.Value, s_shape: Shape, mul: ir.Node, s_index: int,
                      opset: int) -> Shape | None:
    """Where the Mul puts the slope on X (a shape of X's rank), or None for a rank-0 slope
    on an X of unknown shape. Refuses when the product has another shape than X."""
    xs = shape_of(match, x)
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
        p = numpy_shape(xs, s_shape, proven=True)
        if p is None:
            raise Refuse(f"slope of shape {list(s_shape)} does not broadcast to X of shape "
                         f"{fmt_shape(xs)} without changing it")
        return p
    # legacy Mul (opset <= 6): B broadcasts to A only with broadcast=1, placed at axis
    bcast = mul.attributes.get_int("broadcast", 0)
    if list(s_shape) == list(xs) and None not in xs:
        return tuple(s_shape)
    if not bcast or s_index != 1:
        raise Refuse(f"legacy Mul (opset {opset}) without broadcast=1 on the slope: slope "
                     f"{list(s_shape)} and X {fmt_shape(xs)} must have the same shape")
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
                     f"not fit X {fmt_shape(xs)}")
    return (1,) * axis + tuple(s_shape) + (1,) * (rank - axis - len(s_shape))


def prelu_placement_matches(match: Match, x: ir.Value, s_shape: Shape, placed: Shape | None,
                            version: int) -> None:
    """PRelu at schema ``version`` puts the slope where the pattern did."""
    if placed is None:
        return  # rank-0 slope: one value everywhere under every rule
    if placed == AXIS1:
        if version < 7:
            return
        raise Refuse(f"PRelu-{version} broadcasts the slope as numpy does, and the shape of X "
                     "is unknown")
    xs = shape_of(match, x)
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
                     f"{list(target)} on X {fmt_shape(xs)}; the pattern places it as "
                     f"{list(placed)}")


def slope_times_zero(arr: np.ndarray) -> str | None:
    """Sign of zero for a pattern that gives ``s * x`` at x == +-0 where PRelu gives x: the
    same zero exactly when no slope element has its sign bit set."""
    neg = np.signbit(arr.astype(np.float64)).ravel()
    if not neg.any():
        return None
    v = number(arr.ravel()[neg][0])
    return (f"slope element {v} is negative: at x = +0 the pattern gives {v}*(+0) = -0 "
            "(at x = -0, +0) where PRelu gives x")


def slope_plan(match: Match, x: ir.Value, s: ir.Value, mul: ir.Node, opset: int, *,
               zero_to_slope: bool, extra: tuple[ir.Node, ...] = (),
               value_check=None, integers: str | None = None,
               zero_sign: Callable[[np.ndarray], str | None] | None = None,
               negate: bool = False) -> Plan:
    """PRelu or LeakyRelu for ``x < 0 ? s * x : x`` computed by ``mul`` (the Mul of s and x).

    ``zero_to_slope``: the pattern computes ``s * 0`` at x == 0 (or adds ``s * 0`` for
    x > 0), which equals PRelu's 0 only for a finite slope. ``zero_sign(slope values)`` says
    where the pattern's zeros have another sign than the op's (None: nowhere); it defaults to
    :func:`slope_times_zero` when ``zero_to_slope``, else to "nowhere". ``value_check(array)``
    may refuse slope values (e.g. the Max form needs 0 < s <= 1). ``integers``: why the
    pattern is not PRelu for integer X (wrap-around), if it is not. ``negate``: the op's
    slope is ``-s`` (the pattern multiplies ``s`` by ``-x``); ``s`` must then be a constant.

    A one-element constant slope (a Constant node or an initializer, possibly through
    Cast/CastLike/reshapes) gives LeakyRelu, whose alpha attribute every backend supports,
    when a float32 alpha reproduces it exactly in X's type and LeakyRelu accepts that type at
    ``opset``; any other slope gives PRelu, its slope shaped for PRelu's placement rule at
    ``opset`` (see :func:`prelu_slope`).
    """
    if zero_sign is None and zero_to_slope:
        zero_sign = slope_times_zero
    c = resolve(match, s)
    if c is None and not negate:  # a function attribute's Constant is no constant (rarer)
        ref = ref_attr(s)
        if ref is not None:
            return _ref_leaky(match, x, ref, opset, zero_to_slope, value_check, extra)
    s_index = 0 if mul.inputs[0] is s else 1
    arr = None
    if c is None:
        if value_check is not None or negate:
            raise Refuse("the slope is not a constant, so its values cannot be checked")
        if zero_to_slope:
            raise Refuse("the slope is not a constant: the pattern computes slope*0 where "
                         "PRelu returns x, which differs for an infinite or NaN slope")
        s_shape = shape_of(match, s)
        if s_shape is None:
            raise Refuse("the slope is not a constant and its shape is unknown")
        dtype = x_dtype(match, x, s)
    else:
        s_shape = c.shape
        dtype = x_dtype(match, x, c)
        arr = const_in(c, dtype)
        if negate:
            arr = np.negative(arr)
        if value_check is not None:
            value_check(arr)
        if zero_to_slope and not bool(np.all(np.isfinite(arr.astype(np.float64)))):
            raise Refuse("the slope is not finite: the pattern computes slope*0 (NaN) where "
                         "PRelu returns x")
    if integers is not None and not is_float(dtype):
        raise Refuse(f"integer X ({dtype.name.lower()}): {integers}")
    placed = pattern_placement(match, x, s_shape, mul, s_index, opset)
    reason = None  # integers have one zero
    if zero_sign is not None and arr is not None and is_float(dtype):
        reason = zero_sign(arr)
    sign = {"signed_zero_exact": reason is None, "zero_sign": reason or ""}
    cleanup = extra + producers(c)
    if c is not None and c.source.size == 1:
        version, ok = type_allowed("LeakyRelu", opset, dtype)
        if ok:
            try:
                alpha = ck.scalar_attr(c, dtype, "the slope")
            except Refuse:
                alpha = None
            if alpha is not None:
                return Plan("LeakyRelu", x, attrs={"alpha": -alpha if negate else alpha},
                            cleanup=cleanup, **sign)
    version, ok = type_allowed("PRelu", opset, dtype)
    if not ok:
        raise Refuse(f"PRelu-{version} at opset {opset} does not accept element type "
                     f"{dtype.name.lower()}" if version else f"no PRelu at opset {opset}")
    value, array = prelu_slope(match, x, s, c, arr, s_shape, placed, version, negate)
    return Plan("PRelu", x, slope=value, slope_array=array, cleanup=cleanup, **sign)


def prelu_slope(match: Match, x: ir.Value, s: ir.Value, c, arr: np.ndarray | None, s_shape: Shape,
                placed: Shape | None, version: int, negate: bool
                ) -> tuple[ir.Value | None, np.ndarray | None]:
    """PRelu's slope input: ``(value, None)`` to use a value of the graph, ``(None, array)``
    for a new constant. The pattern's own slope value serves when PRelu-``version`` places
    it where the pattern does and it holds the op's values in X's type; else, for a
    constant, a new one -- negated, cast, or reshaped to the placement, which both rules
    (numpy from 7, legacy per-channel before) read the same way at X's rank.

    What ``opshift inline`` wrote gives back what the node it replaced read: the initializer
    a legacy ``<node>/Slope`` Constant was reshaped from (:func:`_reshaped_from`), and, in
    nodes named as inline names them, a Cast/CastLike of a constant as is (inline writes no
    Cast on a slope: the value is the one the PRelu read)."""
    if not negate and c is not None:
        back = _reshaped_from(match, x, s, c, placed, version)
        if back is not None:
            return back, None
    try:
        prelu_placement_matches(match, x, s_shape, placed, version)
        shape = None
    except Refuse:
        if arr is None or placed is None or placed == AXIS1:
            raise
        shape = tuple(placed)
        prelu_placement_matches(match, x, shape, placed, version)
    if shape is None and not negate and (
            c is None or not (c.castlike or any(p.op_type == "Cast" for p in c.producers))
            or match.inlined):
        return s, None
    if shape is None and negate:
        neg = s.producer()
        inner = neg.inputs[0] if neg is not None and neg.op_type == "Neg" else None
        ic = resolve(match, inner)
        if ic is not None and not ic.castlike and ic.shape == c.shape and ic.array is not None \
                and ic.array.dtype == arr.dtype and not any(
                    p.op_type == "Cast" for p in ic.producers):
            return inner, None  # -(-a): the Neg's operand itself
    return None, arr if shape is None else arr.reshape(shape)


def _reshaped_from(match: Match, x: ir.Value, s: ir.Value, c: Const, placed: Shape | None,
                   version: int) -> ir.Value | None:
    """The initializer ``opshift inline`` reshaped into the Constant ``s`` (its doc_string
    names it, :data:`opshift.inline.templates.RESHAPED_SLOPE`) when it is one of
    this graph or, from a subgraph of the main graph, of the main graph; is no input a
    caller may feed; holds the Constant's elements bit for bit in the same element type;
    and PRelu-``version`` places its shape where the pattern placed the Constant on X's
    known shape; else None."""
    node = s.producer()
    if node is None or node.op_type != "Constant" or not node.doc_string \
            or c.producers != (node,) or c.array is None \
            or placed is None or placed == AXIS1:  # (an unknown X shape proves no placement)
        return None
    from opshift.inline.templates import RESHAPED_SLOPE

    if not node.doc_string.startswith(RESHAPED_SLOPE):
        return None
    name = node.doc_string[len(RESHAPED_SLOPE):]
    own = node.graph
    v = own.initializers.get(name) if isinstance(own, ir.Graph) else None
    if v is None and own is not match.main \
            and any(g is own for g in match.main.subgraphs()):  # (not a function's body)
        v = match.main.initializers.get(name)
    if v is None:
        return None
    ic = resolve(match, v)
    if ic is None or ic.producers or ic.array is None or ic.array.dtype != c.array.dtype \
            or ic.array.size != c.array.size or ic.array.tobytes() != c.array.tobytes():
        return None
    try:
        prelu_placement_matches(match, x, ic.shape, placed, version)
    except Refuse:
        return None
    return v


def _ref_leaky(match: Match, x, ref, opset, zero_to_slope, value_check, extra) -> Plan:
    """LeakyRelu with ``alpha=@name`` in a function body whose slope is that attribute."""
    name, nodes = ref
    if value_check is not None:
        raise Refuse(f"the slope is function attribute @{name}: its values cannot be checked")
    if zero_to_slope:
        raise Refuse(f"the slope is function attribute @{name}: cannot prove it finite, and "
                     "the pattern computes slope*0 where LeakyRelu returns x")
    dtype = x_dtype(match, x)
    version, ok = type_allowed("LeakyRelu", opset, dtype)
    if not ok:
        raise Refuse(f"LeakyRelu-{version} at opset {opset} does not accept element type "
                     f"{dtype.name.lower()}")
    alpha = ir.RefAttr("alpha", name, ir.AttributeType.FLOAT)
    return Plan("LeakyRelu", x, attrs={"alpha": alpha}, cleanup=extra + nodes,
                rounding=ck.per_step(dtype, f"rounds alpha (@{name})"))
