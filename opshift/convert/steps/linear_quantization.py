"""DequantizeLinear and QuantizeLinear where they cannot stay themselves: per-axis scales
below 13, and below 10 (where they do not exist), written from opset 7 as their formulas.

DequantizeLinear is ``(Cast(x, float) - Cast(zero_point, float)) * scale`` in float32: an
int8/uint8 value and zero point are exactly floats and so is their difference, so the one
rounding is the product's, as in DequantizeLinear; an int32 value (its zero point 0) rounds
once to float as DequantizeLinear converts it.

QuantizeLinear (float x) is ``Cast(Clip(Round(x / scale) + zero_point, lo, hi))`` with NaN
made ``lo`` first (the evaluator's and onnxruntime's reading; a Cast of NaN is undefined):
the quotient rounds once in float32 as QuantizeLinear divides, Round is exact (its own
replacement below 11, :mod:`.round`), adding an integer-valued zero point to an integer
quotient is exact below 2**24 and past that the sum saturates alike, and the Clip bounds are
the output type's. Round and the Clip (attributes below 11) are written at 11 and 6 and
converted on to the target, the NaN pick as a Where-9 likewise (:mod:`.where`).

A per-axis scale (and zero point) is read as ``[C, 1, ..., 1]`` to broadcast along ``axis``
(:meth:`~..step.Step.read_input_as`: a constant reshaped once per tensor), which needs X's
rank.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from opshift.convert.registry import at, replaces
from opshift.convert.step import Refuse, Step, norm_axis, np_dtype

_SOURCE_TYPES = frozenset({TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32})


@at(13, "DequantizeLinear", "QuantizeLinear")
def per_axis(st: Step) -> None:
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
    (_dequantize if st.op == "DequantizeLinear" else _quantize)(st, per_axis=True)


@replaces("DequantizeLinear")
def dequantize_below_10(st: Step) -> None:
    _dequantize(st, per_axis=False)


@replaces("QuantizeLinear")
def quantize_below_10(st: Step) -> None:
    _quantize(st, per_axis=False)


def _scale_and_zero_point(st: Step, per_axis: bool, types: frozenset[int], what: str
                          ) -> tuple[str, str, str]:
    """X, the scale and the zero point ('' when absent) as the formula reads them (a per-axis
    pair broadcast along ``axis``), once X's type is one of ``types``."""
    if st.target < 7:
        raise Refuse("its formula is written from opset 7 (numpy broadcasting of the scale)")
    x = st.input(0)
    t = st.elem_type(x)
    if t not in types:
        raise Refuse(f"X of type {'unknown' if t is None else TensorProto.DataType.Name(t)}: "
                     f"the formula is written for {what}")
    if per_axis:
        rank = st.need_rank(x, "a per-axis scale broadcasts along its axis")
        axis = norm_axis(st.attr("axis", 1), rank)
        ones = list(range(1, rank - axis))  # [C] read as [C, 1, ..., 1]
        for i in (1, 2) if ones else ():
            if st.input(i):
                c = st.shape(st.input(i))
                st.read_input_as(i, (c[0] if c else None,) + (1,) * len(ones), "Unsqueeze",
                                 ones, "per_axis")
    return x, st.input(1), st.input(2)


def _dequantize(st: Step, per_axis: bool) -> None:
    x, scale, zp = _scale_and_zero_point(st, per_axis, _SOURCE_TYPES, "int8, uint8 and int32")
    y = st.add_cast(x, TensorProto.FLOAT, "x_float")
    if zp:
        y = st.add_node("Sub", [y, st.add_cast(zp, TensorProto.FLOAT, "zero_point_float")],
                        "shifted")
    st.add_node("Mul", [y, scale], "dequantized", output=st.w.output[0])
    st.remove("written as (Cast(x) - Cast(zero_point)) * scale in float32",
              "per-axis scales exist only from DequantizeLinear-13" if per_axis
              else "DequantizeLinear exists only from opset 10")


#: QuantizeLinear's output types below 19
_OUTPUTS = frozenset({TensorProto.UINT8, TensorProto.INT8})


def _quantize(st: Step, per_axis: bool) -> None:
    x, scale, zp = _scale_and_zero_point(st, per_axis, frozenset({TensorProto.FLOAT}),
                                         "float (an int32 X divides in float64)")
    out = st.elem_type(zp) if zp else TensorProto.UINT8
    if out not in _OUTPUTS:
        raise Refuse(f"its output type {out} has no range the formula knows")
    info = np.iinfo(np_dtype(out))
    lo, hi = int(info.min), int(info.max)
    f, xs = TensorProto.FLOAT, st.shape(x)

    def like_x(v: str) -> str:
        """``v``, computed element by element from X: of X's shape (for the steps the
        nodes written at other opsets go through)."""
        if xs is not None:
            st.facts.extra_shapes[v] = tuple(xs)
        return v

    q = like_x(st.add_node("Div", [x, scale], "quotient"))
    q = like_x(st.written_at(11, "Round", [q], "rounded", f))
    if zp:
        q = like_x(st.add_node("Add", [q, st.add_cast(zp, f, "zero_point_float")], "shifted"))
    q = like_x(st.written_at(6, "Clip", [q], "saturated", f, min=float(lo), max=float(hi)))
    q = st.written_at(9, "Where", [like_x(st.not_nan(q, "quantized")), q, st.add_const(
        "lowest", np.array(lo, np.float32))], "number_or_lowest", f)
    st.add_cast(q, out, "quantized", output=st.w.output[0])
    st.remove("written as Cast(Clip(Round(x / scale) + zero_point)), NaN as the lowest value",
              "per-axis scales exist only from QuantizeLinear-13" if per_axis
              else "QuantizeLinear exists only from opset 10")
