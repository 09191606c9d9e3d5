"""Sign (from 9) below 9, from opset 7: ``(x > 0) - (x < 0)`` in x's type.

Floats compare as they are; NaN, which neither comparison holds for, is added back: a Gather
of ``[-0.0, NaN]`` at whether x is NaN (:meth:`~..step.Step.not_nan`: no IsNaN before 9),
and adding -0.0 changes no value (Sign gives +0.0 for -0.0, as the two comparisons do).
Integers compare by :meth:`~..step.Step.compare` (Less and Greater take them from 9; below,
as float64, which is exact against 0); the difference is taken in int32 or int64 (the types
Sub takes below 14; 8- and 16-bit values go through int32 and back), unsigned values have no
negative part.
Below 7 the comparisons broadcast by attribute only: refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step, np_dtype
from opshift.opsets import INTEGER_TYPES

_FLOATS = frozenset({T.FLOAT16, T.FLOAT, T.DOUBLE})
_NATIVE = frozenset({T.INT32, T.INT64, T.UINT32, T.UINT64})


@replaces("Sign")
def sign_as_comparisons(st: Step) -> None:
    x, y = st.input(0), st.w.output[0]
    t = st.elem_type(x)
    if t not in _FLOATS | INTEGER_TYPES:
        raise Refuse("its type is unknown" if t is None else
                     f"its input is {T.DataType.Name(t)}")
    if st.target < 7:
        raise Refuse("below opset 7 the comparisons it is written with broadcast by attribute")
    zero = st.add_const("zero", np.array(0, np_dtype(t)))
    wide = t if t in _FLOATS | _NATIVE else T.INT32

    def test(op: str, what: str) -> str:
        return (st.add_node(op, [x, zero], what) if t in _FLOATS
                else st.compare(op, x, zero, what))

    def count(op: str, what: str) -> str:
        return st.add_cast(test(op, what), wide, f"{what}_count")

    signed = t in _FLOATS or np_dtype(t).kind == "i"
    done = wide == t and t not in _FLOATS
    out = y if done else None
    s = (st.add_node("Sub", [count("Greater", "positive"), count("Less", "negative")], "sign",
                     output=out) if signed else
         st.add_cast(test("Greater", "positive"), t, "sign", output=y))
    if t in _FLOATS:
        number = st.not_nan(x, "x")
        nan = st.add_node("Not", [number], "nan") if number is not None else None
        if nan is None:  # (a constant X without NaN)
            st.add_node("Identity", [s], "same", output=y)
        else:
            extra = st.add_node("Gather", [st.add_const("nan_or_not", np.array(
                [-0.0, np.nan], np_dtype(t))), st.add_cast(nan, T.INT64, "is_nan")],
                "nan_back", axis=0)
            st.add_node("Add", [s, extra], "with_nan", output=y)
    elif signed and not done:
        st.add_cast(s, t, "back", output=y)
    st.remove("Sign written as (x > 0) - (x < 0)" + (", NaN added back" if t in _FLOATS
                                                      else ""), "Sign exists from opset 9")
