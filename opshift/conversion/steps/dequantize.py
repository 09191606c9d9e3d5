"""DequantizeLinear where it cannot stay itself: per-axis scales below 13, and below 10 (where
it does not exist), written from opset 7 as its own formula

    y = (Cast(x, float) - Cast(zero_point, float)) * scale

in float32: an int8/uint8 value and zero point are exactly floats and so is their difference,
so the one rounding is the product's, as in DequantizeLinear; an int32 value (its zero point
0) rounds once to float as DequantizeLinear converts it. A per-axis scale (and zero point)
is read as ``[C, 1, ..., 1]`` to broadcast along ``axis`` (:meth:`~..step.Step.read_input_as`:
a constant reshaped once per tensor), which needs X's rank.
"""

from __future__ import annotations

from onnx import TensorProto

from ..registry import at, replaces
from ..step import Refuse, Step, norm_axis

_SOURCE_TYPES = frozenset({TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32})


@at(13, "DequantizeLinear")
def dequantize_per_axis(st: Step) -> None:
    if st.up:
        return
    s = st.shape(st.input(1))
    if s is not None and (len(s) == 0 or tuple(s) == (1,)):
        if st.has_attr("axis"):
            st.del_attr("axis")  # (a per-tensor scale: the axis says nothing)
        return
    if s is None or len(s) != 1:
        raise Refuse(f"scale of shape {s}: per-axis scales exist only from 13 and are "
                     "written out only when 1-D")
    _formula(st, per_axis=True)


@replaces("DequantizeLinear")
def dequantize_below_10(st: Step) -> None:
    _formula(st, per_axis=False)


def _formula(st: Step, per_axis: bool) -> None:
    if st.target < 7:
        raise Refuse("its formula is written from opset 7 (numpy broadcasting of the scale)")
    x = st.input(0)
    t = st.elem_type(x)
    if t not in _SOURCE_TYPES:
        raise Refuse(f"X of type {'unknown' if t is None else TensorProto.DataType.Name(t)}: "
                     "the formula is written for int8, uint8 and int32")
    scale, zp = st.input(1), st.input(2)
    if per_axis:
        rank = st.need_rank(x, "a per-axis scale broadcasts along its axis")
        axis = norm_axis(st.attr("axis", 1), rank)
        ones = list(range(1, rank - axis))  # [C] read as [C, 1, ..., 1]
        for i in (1, 2) if ones else ():
            if st.input(i):
                c = st.shape(st.input(i))
                st.read_input_as(i, (c[0] if c else None,) + (1,) * len(ones), "Unsqueeze",
                                 ones, "per_axis")
        scale, zp = st.input(1), st.input(2)
    y = st.add_cast(x, TensorProto.FLOAT, "x_float")
    if zp:
        y = st.add_node("Sub", [y, st.add_cast(zp, TensorProto.FLOAT, "zero_point_float")],
                        "shifted")
    st.add_node("Mul", [y, scale], "dequantized", output=st.w.output[0])
    st.remove("written as (Cast(x) - Cast(zero_point)) * scale in float32",
              "per-axis scales exist only from DequantizeLinear-13" if per_axis
              else "DequantizeLinear exists only from opset 10")
