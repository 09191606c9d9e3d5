"""MatMulInteger and ConvInteger (from 10) below 10: the product of the zero-point-free
integers, from opset 7.

Each 8-bit input less its zero point (per tensor; per row of A and per column of B for
MatMulInteger, per output channel of W for ConvInteger) is an integer within 255 of 0.
MatMulInteger: from 9 a MatMul of them as int32 (MatMul takes int32 from 9), which sums as
MatMulInteger does, wrapping alike. Below 9, and for ConvInteger (Conv takes floats only), the
product of them as floats, cast to int32: exact while every partial sum is exact and within
int32, which the length K of each sum bounds (A's last dim or B's next to last; W's input
channels per group times its kernel), and which must be known: float32 while K * 255 * 255
<= 2**24 (the types every runtime's Conv takes), else float64 while K * 255 * 255 < 2**31.
"""

from __future__ import annotations

import math

from onnx import TensorProto, helper

from ..registry import replaces
from ..step import Refuse, Step

_EIGHT_BIT = frozenset({TensorProto.INT8, TensorProto.UINT8})
#: the longest sums of products of two values within 255 of 0 that float32 holds exactly,
#: and that stay within int32
_LONGEST_FLOAT = 2**24 // (255 * 255)
_LONGEST = (2**31 - 1) // (255 * 255)


@replaces("MatMulInteger")
def matmul_integer(st: Step) -> None:
    a, b = st.input(0), st.input(1)
    shape_a, shape_b = st.shape(a), st.shape(b)
    k = next((s[i] for s, i in ((shape_a, -1), (shape_b, -2))
              if s is not None and len(s) >= -i and isinstance(s[i], int)), None)
    wide = TensorProto.INT32 if st.target >= 9 else _as_floats(st, k)
    if shape_a is not None and len(shape_a) == 2:  # a per-row zero point of A as [M, 1]
        _per_axis_zero_point(st, 2, 2)
    ai = _less_zero_point(st, a, _input(st, 2), wide, "a")
    bi = _less_zero_point(st, b, _input(st, 3), wide, "b")
    _product(st, "MatMul", [ai, bi], wide, {})


@replaces("ConvInteger")
def conv_integer(st: Step) -> None:
    x, w = st.input(0), st.input(1)
    ws = st.shape(w)
    k = None
    if ws is not None and all(isinstance(d, int) for d in ws[1:]):
        k = math.prod(ws[1:])  # (input channels per group times the kernel)
    wide = _as_floats(st, k)
    _per_axis_zero_point(st, 3, st.need_rank(w, "a per-channel zero point of W is read "
                                                "along its first axis"))
    xi = _less_zero_point(st, x, _input(st, 2), wide, "x")
    wi = _less_zero_point(st, w, _input(st, 3), wide, "w")
    _product(st, "Conv", [xi, wi], wide,
             {a.name: helper.get_attribute_value(a) for a in st.w.attribute})


def _as_floats(st: Step, k: int | None) -> int:
    """The float type sums of ``k`` products are exact in (refused past int32)."""
    if st.target < 7:
        raise Refuse("below opset 7 the subtraction of the zero points broadcasts by "
                     "attribute")
    if k is None or k > _LONGEST:
        raise Refuse(("the length of its sums is unknown" if k is None else
                      f"its sums have {k} terms") + ": it is summed in floats and cast to "
                     f"int32, exact for at most {_LONGEST} terms (no int32 wrapping)")
    return TensorProto.FLOAT if k <= _LONGEST_FLOAT else TensorProto.DOUBLE


def _input(st: Step, i: int) -> str:
    """Input ``i`` of the node, '' when absent."""
    return st.input(i) if len(st.w.input) > i else ""


def _per_axis_zero_point(st: Step, i: int, rank: int) -> None:
    """Make input ``i``, a zero point of one value per position of the first of ``rank``
    axes (A's rows, W's output channels), read as ``[n, 1, ..., 1]`` to broadcast
    (:meth:`~..step.Step.read_input_as`: a constant reshaped once); a scalar one stays."""
    zs = st.shape(_input(st, i)) if _input(st, i) else None
    if zs is not None and len(zs) == 1 and zs[0] != 1 and rank > 1:
        st.read_input_as(i, (zs[0],) + (1,) * (rank - 1), "Unsqueeze",
                         list(range(1, rank)), "per_axis")


def _less_zero_point(st: Step, v: str, zp: str, wide: int, what: str) -> str:
    """``v - zp`` in type ``wide``: exact (both 8-bit)."""
    t = st.elem_type(v)
    if t not in _EIGHT_BIT:
        kind = "of unknown type" if t is None else TensorProto.DataType.Name(t)
        raise Refuse(f"{what.upper()} is {kind}: the integer products take int8 and uint8")
    out = st.add_cast(v, wide, f"{what}_wide")
    if not zp:
        return out
    return st.add_node("Sub", [out, st.add_cast(zp, wide, f"{what}_zero_point_wide")],
                       f"{what}_less_zero_point")


def _product(st: Step, op: str, inputs: list[str], wide: int, attrs: dict) -> None:
    y = st.w.output[0]
    if wide == TensorProto.INT32:
        st.add_node(op, inputs, "product", output=y, **attrs)
    else:
        st.add_cast(st.add_node(op, inputs, "product", **attrs), TensorProto.INT32, "int32",
                    output=y)
    st.remove(f"written as {op} of the integers less their zero points, in "
              + TensorProto.DataType.Name(wide).lower(),
              f"{st.op} exists from opset 10")
