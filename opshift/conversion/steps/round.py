"""Round (from 11) below 11, from opset 7: float and double, rounding half to even; float16
through float (both casts exact, and every result fits: float16's integers up to its largest).

For ``a = |x|`` below ``M = 2**(p - 1)`` (p the type's significand bits: ``2**23`` for float)
``r = (a + M) - M`` is ``a`` rounded to an integer, ties to even: the sum lies in ``[M, 2M)``,
where the type's spacing is 1, and the addition rounds to nearest even as IEEE arithmetic
does. From ``M`` on every value of the type is an integer already, and ``r`` is within a
rounding of ``a``: the result is ``r + (a - r) * [a >= M]``, whose difference is exact (r and
a within a factor 2 of each other) and whose sum is then ``a`` exactly. The difference is
taken between both clipped to a bound C of at least ``2**(p + 1)``, from which on ``r`` is
``a`` itself (a Clip with attributes, as Min takes no scalar below 8): an infinite ``a``
(with ``r`` infinite too) gives 0 rather than NaN; NaN comes through ``r``. x's sign comes
back as a product by +-1, negative where ``x < 0`` or ``1 / x < 0`` (-0.0 and the x in
(-0.5, 0) that round to -0.0, as Round does).

Every op used exists at 7 with numpy broadcasting of the scalar constants; below 7 they
broadcast by attribute only: refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from ..registry import replaces
from ..step import Refuse, Step, np_dtype

#: type -> significand bits (the implicit one included): ``a + M`` cannot overflow (at the
#: largest value M is less than half a step; float16's is not, hence float)
_BITS = {T.FLOAT: 24, T.DOUBLE: 53}
#: the Clip bound C (a float32 attribute)
_BOUND = float(np.finfo(np.float32).max)


@replaces("Round")
def round_half_to_even(st: Step) -> None:
    x, y = st.input(0), st.w.output[0]
    t = st.elem_type(x)
    if t not in (*_BITS, T.FLOAT16):
        raise Refuse(("its type is unknown" if t is None else
                      f"its input is {T.DataType.Name(t)}") + ": below 11 it is written for "
                     "float16, float and double")
    if st.target < 7:
        raise Refuse("below opset 7 the ops it is written with broadcast by attribute")
    half = t == T.FLOAT16
    if half:
        x, y, t = st.add_cast(x, T.FLOAT, "float"), st.fresh_value("rounded_float"), T.FLOAT
    dt = np_dtype(t)

    def const(what: str, v) -> str:
        return st.add_const(what, np.array(v, dt))

    m = const("two_to_p_minus_1", 2.0 ** (_BITS[t] - 1))
    zero, one, two = const("zero", 0), const("one", 1), const("two", 2)
    a = st.add_node("Abs", [x], "magnitude")
    r = st.add_node("Sub", [st.add_node("Add", [a, m], "shifted"), m], "rounded")
    whole = st.add_cast(st.add_node("Not", [st.add_node("Less", [a, m], "small")],
                                    "integer_already"), t, "whole")
    gap = st.add_node("Sub", [st.add_node("Clip", [v], f"{v_what}_finite", max=_BOUND)
                              for v, v_what in ((a, "a"), (r, "r"))], "gap")
    magnitude = st.add_node("Add", [r, st.add_node("Mul", [gap, whole], "kept")], "result")
    negative = st.add_node("Or", [st.add_node("Less", [x, zero], "below_zero"), st.add_node(
        "Less", [st.add_node("Div", [one, x], "reciprocal"), zero], "negative_zero")],
        "negative")
    sign = st.add_node("Sub", [one, st.add_node("Mul", [st.add_cast(negative, t, "minus"), two],
                                                "twice")], "sign")
    st.add_node("Mul", [magnitude, sign], "signed", output=y)
    if half:
        st.add_cast(y, T.FLOAT16, "back", output=st.w.output[0])
    st.remove("Round written as (|x| + 2**(p-1)) - 2**(p-1) below 2**(p-1), |x| from there, "
              "with x's sign", "Round exists from opset 11")
