"""Exactness checks shared by the rules: each raises :class:`Refuse` with a one-line reason.

Exact here means: the fused op returns the same value as the matched nodes for every input,
infinities and NaN included (NaN compared as NaN), signed zeros included. A plan records when
the sign of a zero result may differ (``+0`` vs ``-0``, e.g. Selu's function body maps ``-0``
to ``-0``, the op to ``+0``); :class:`opshift.fuse.rules.base.Rule` decides whether such a
plan is fused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from opshift.broadcast import numpy_shape
from opshift.fuse.values import Const, Match, dtype_of, float32_attr, resolve, shape_of
from opshift.tables import number

Shape = tuple[int | str | None, ...]


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
    signed_zero_exact: bool = True  # False: the sign of a zero result may differ ...
    zero_sign: str = ""  # ... and where
    rounding: str = ""  # why the pattern rounds otherwise than the op ("": it does not)

    def describe(self) -> str:
        if self.op == "PRelu":
            return "PRelu"

        def fmt(v) -> str:
            return number(v) if isinstance(v, float) else f"@{v.ref_attr_name}"

        return self.op + "(" + ", ".join(f"{k}={fmt(v)}" for k, v in self.attrs.items()) + ")"


#: The element types the ops compute in float32 and round once (opshift's meaning, the
#: runtimes'), where a pattern of 16-bit nodes rounds after every step.
NARROW = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


def per_step(dtype: ir.DataType, what: str) -> str:
    """Why a pattern computing ``what`` in 16-bit ``dtype`` rounds otherwise than the op
    ("" for a wider type)."""
    if dtype not in NARROW:
        return ""
    t = dtype.name.lower()
    return f"X is {t}: the pattern {what} in {t}, the op computes in float32 and rounds once"


def fmt_shape(shape) -> str:
    return "?" if shape is None else str(list(shape))


def x_dtype(match: Match, x: ir.Value, *others: Const | ir.Value | None) -> ir.DataType:
    """X's element type: declared, or that of a typed operand combined with X in a binary op."""
    dt = dtype_of(match, x)
    if dt is not None:
        return dt
    for o in others:
        if isinstance(o, Const):
            if not o.castlike and o.array is not None:
                return ir.DataType.from_numpy(o.array.dtype)
        elif o is not None and dtype_of(match, o) is not None:
            return dtype_of(match, o)
    raise Refuse("the element type of X is not known (no type information; run shape "
                 "inference or declare value_info)")


def zero(match: Match, z: ir.Value | None, x: ir.Value, what: str = "comparison operand"
         ) -> Const:
    c = resolve(match, z)
    if c is None:
        raise Refuse(f"the {what} is not a constant")
    if c.source.dtype.kind not in "fiub" and c.source.dtype.name != "bfloat16":
        raise Refuse(f"the {what} is not numeric")
    src = c.source
    if not (src.item() == 0 if src.size == 1 else bool((src.astype(np.float64) == 0).all())):
        raise Refuse(f"the {what} is not zero (value {c.source.ravel()[:4].tolist()})")
    no_expand(match, c.shape, x, what)
    return c


def no_expand(match: Match, shape: Shape, x: ir.Value, what: str) -> None:
    """``shape`` broadcasts to X without changing X's shape."""
    if len(shape) == 0:
        return
    xs = shape_of(match, x)
    if xs is None:
        raise Refuse(f"the shape of X is unknown, so a {what} of shape {list(shape)} might "
                     "broadcast X to another shape")
    if numpy_shape(xs, shape, proven=True) is None:
        raise Refuse(f"the {what} of shape {list(shape)} does not broadcast to X of shape "
                     f"{fmt_shape(xs)} without changing it")


def scalar_attr(c: Const, dtype: ir.DataType, what: str) -> float:
    """The float32 attribute value that reproduces constant ``c`` exactly in X's dtype."""
    if c.source.size != 1:
        raise Refuse(f"{what} has {c.source.size} elements; the attribute is one float")
    if c.castlike and c.source.dtype == np.float32 and dtype not in NARROW:
        a = float(c.source.reshape(()))  # CastLike(a, X) is exactly what the op does
        if not math.isfinite(a):
            raise Refuse(f"{what} is not finite ({a})")
        return a
    # (a 16-bit CastLike(a, X) rounds a, the op would not: the attribute is the rounded value)
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


def is_float(dtype: ir.DataType) -> bool:
    return dtype.is_floating_point()


def producers(*consts: Const | None) -> tuple[ir.Node, ...]:
    out: list[ir.Node] = []
    for c in consts:
        if c is not None:
            out.extend(c.producers)
    return tuple(out)
