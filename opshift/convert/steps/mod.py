"""Mod (from 10) below 10, from opset 7, for integers.

``fmod=1`` is C's remainder, ``a - b * (a / b)`` with the division truncating toward zero, as
integer Div computes it; where b is -1 the remainder is 0, and the division is by 1 there
(INT_MIN / -1 overflows, and a runtime's integer division traps on it). ``fmod=0``
takes the divisor's sign: that remainder plus b where it is not 0 and its sign differs from
b's; unsigned values have no sign to differ. The picks are :meth:`~..step.Step.pick` (Where
from 9, integer arithmetic below), the signs :meth:`~..step.Step.compare` (Less takes
integers from 9). Arithmetic below 10 takes
32- and 64-bit integers; 8- and 16-bit ones go through int32 and back (their remainders fit).
Floats are refused: ``a - b * trunc(a / b)`` rounds where fmod is exact.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step, np_dtype

_NATIVE = frozenset({T.INT32, T.INT64, T.UINT32, T.UINT64})
_NARROW = frozenset({T.INT8, T.INT16, T.UINT8, T.UINT16})


@replaces("Mod")
def integer_mod(st: Step) -> None:
    t = st.elem_type(st.input(0))
    if t not in _NATIVE | _NARROW:
        raise Refuse(("its type is unknown" if t is None else f"its inputs are "
                      f"{T.DataType.Name(t)}") + ": below 10 it is written for integers only "
                     "(a - b * trunc(a / b) rounds in floats)")
    if st.target < 7:
        raise Refuse("below opset 7 the ops it is written with broadcast by attribute")
    a, b, y = st.input(0), st.input(1), st.w.output[0]
    wide = T.INT32 if t in _NARROW else t
    if wide != t:
        a, b = st.add_cast(a, wide, "a_int32"), st.add_cast(b, wide, "b_int32")
    signed = np_dtype(t).kind == "i"
    floored = not st.attr("fmod", 0) and signed
    out = y if wide == t and not floored else None
    d = b
    if signed:  # divided by 1 where b is -1 (the remainder is 0 either way): INT_MIN / -1
        # overflows, and a runtime's division traps on it (onnxruntime's process dies)
        one, minus = (st.add_const(w, np.array(v, np_dtype(wide))) for w, v in
                      (("one", 1), ("minus_one", -1)))
        d = st.pick(st.add_node("Equal", [b, minus], "b_minus_one"), one, b, "divisor")
    r = st.add_node("Sub", [a, st.add_node("Mul", [st.add_node("Div", [a, d], "quotient"), d],
                                           "multiple")], "remainder", output=out)
    if floored:
        zero = st.add_const("zero", np.zeros((), np_dtype(wide)))
        signs = st.add_node("Xor", [st.compare("Less", r, zero, "r_negative"),
                                    st.compare("Less", b, zero, "b_negative")], "signs")
        shift = st.add_node("And", [st.add_node("Not", [st.add_node("Equal", [r, zero],
                                                                    "r_zero")], "r_nonzero"),
                                    signs], "shift")
        r = st.pick(shift, st.add_node("Add", [r, b], "shifted"), r, "floored",
                    output=y if wide == t else None)
    if wide != t:
        st.add_cast(r, t, "back", output=y)
    st.remove("Mod written as a - b * (a / b)" + (", plus b where its sign differs from b's"
                                                  if floored else ""))
