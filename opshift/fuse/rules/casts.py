"""A float32 PRelu / LeakyRelu / Selu between Casts from and back to a 16-bit type -> the op
on the 16-bit type.

On float16 and bfloat16 the ops compute in float32 and round once (opshift's meaning, the
runtimes'), with their float attributes as the float32 values they are: exactly what
``Cast(op(Cast(x, to=FLOAT)), to=T)`` computes, so the fused op is exact, zeros and NaN
included. This is the form ``inline`` writes for 16-bit LeakyRelu and Selu (whose float32
body the other rules fuse first, in the same pass: the outer Cast comes after it) and
``convert`` writes below the version that added bfloat16. A PRelu's slope must be Cast from
X's type too (PRelu takes one type for both).
"""

from __future__ import annotations

import onnx_ir as ir

from opshift import opsets
from opshift.fuse.rules import checks as ck
from opshift.fuse.rules.base import Rule
from opshift.fuse.values import Match, dtype_of, type_allowed


def _cast_to(node: ir.Node | None) -> int | None:
    """The element type a Cast node casts to (Cast-1's string form too), None otherwise."""
    if node is None or node.op_type != "Cast" or node.domain not in ("", "ai.onnx"):
        return None
    a = node.attributes.get("to")
    if a is None:
        return None
    v = a.value
    return int(ir.DataType[v]) if isinstance(v, str) else int(v)


def _from_float(v: ir.Value, what: str) -> tuple[ir.Value, ir.Node]:
    """(the 16-bit value ``v`` is cast to float from, that Cast)."""
    cast = v.producer()
    if _cast_to(cast) != int(ir.DataType.FLOAT) or not cast.inputs or cast.inputs[0] is None:
        raise ck.Refuse(f"{what} is not cast to float from another value")
    return cast.inputs[0], cast


def _plan(match: Match, op: str, xf: ir.Value, yf: ir.Value, sf: ir.Value | None = None
          ) -> ck.Plan:
    """The 16-bit op for ``Cast(op(xf[, sf]) -> yf)``. The Casts to float are not part of
    the pattern (the float32 body fused before this, in the same pass, leaves CastLike nodes
    reading X's Cast until its clean-up): they are the plan's clean-up, removed when no
    other node reads them."""
    x, xcast = _from_float(xf, "X")
    dtype = dtype_of(match, x)
    if dtype is None:
        raise ck.Refuse("the element type of X is not known")
    if dtype not in ck.NARROW:
        raise ck.Refuse(f"X is {dtype.name.lower()}, not float16 or bfloat16: computing in "
                        "float32 between Casts is not the op on it")
    if _cast_to(match.context.root) != int(dtype):
        raise ck.Refuse(f"the result is not cast back to X's type {dtype.name.lower()}")
    cleanup: tuple[ir.Node, ...] = (xcast,)
    slope = None
    if sf is not None:
        slope, scast = _from_float(sf, "the slope")
        if dtype_of(match, slope) != dtype:
            raise ck.Refuse("the slope is not cast from X's type")
        cleanup += (scast,)
    opset = match.opset
    version, ok = type_allowed(op, opset, dtype)
    if not ok:
        raise ck.Refuse(f"{op}-{version} at opset {opset} does not accept element type "
                        f"{dtype.name.lower()}" if version else f"no {op} at opset {opset}")
    if op == "PRelu":
        return ck.Plan("PRelu", x, slope=slope, cleanup=cleanup)
    defaults = opsets.attribute_defaults(op, version)
    attrs = {k: float(defaults[k]) for k in ("alpha", "gamma") if k in defaults}
    for name, a in yf.producer().attributes.items():
        if name in attrs:
            attrs[name] = a if a.is_ref() else float(a.value)
    return ck.Plan(op, x, attrs=attrs, cleanup=cleanup)


class CastLeakyRelu(Rule):
    """``Cast(LeakyRelu(Cast(x, to=FLOAT)), to=T)``, T float16/bfloat16 -> LeakyRelu(x)."""

    def pattern(self, op, xf):
        return op.Cast(op.LeakyRelu(xf, _outputs=["yf"]))

    def plan(self, match, xf, yf, **_):
        return _plan(match, "LeakyRelu", xf, yf)


class CastSelu(Rule):
    """``Cast(Selu(Cast(x, to=FLOAT)), to=T)``, T float16/bfloat16 -> Selu(x)."""

    def pattern(self, op, xf):
        return op.Cast(op.Selu(xf, _outputs=["yf"]))

    def plan(self, match, xf, yf, **_):
        return _plan(match, "Selu", xf, yf)


class CastPRelu(Rule):
    """``Cast(PRelu(Cast(x, to=FLOAT), Cast(s, to=FLOAT)), to=T)``, T float16/bfloat16 ->
    PRelu(x, s)."""

    def pattern(self, op, xf, sf):
        return op.Cast(op.PRelu(xf, sf, _outputs=["yf"]))

    def plan(self, match, xf, sf, yf, **_):
        return _plan(match, "PRelu", xf, yf, sf)


CAST_RULES = (CastLeakyRelu, CastSelu, CastPRelu)
