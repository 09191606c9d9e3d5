"""Where (from 9) below 9, from opset 7, where an exact form exists.

* Both values constants each holding one value (a mask filled with one of two numbers, as
  exporters write attention masks): a Gather of the two values, ``[y, x]``, at
  ``Cast(condition, int64)``: data movement, so exact for every type (NaN payloads and
  signed zeros included); the output takes the condition's shape, so the constants must
  broadcast into it.
* Integers: :meth:`~..step.Step.pick`, ``x * Cast(c) + y * (1 - Cast(c))``, each product
  the value or 0 (no product or sum can overflow); below 14 Mul and Add take 32- and 64-bit
  integers only, so 8- and 16-bit ones go through int32 and back (the result is x or y,
  which fits).
* bool: ``(c and x) or (not c and y)``.

Computed floats are refused: no op below 9 picks per element, and arithmetic would turn an
infinity times 0 into NaN and -0 + 0 into +0. Below 7 the binary ops broadcast by attribute
only: refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from ...graph.shape_rules import fits_into
from ...opsets import INTEGER_TYPES
from ..registry import replaces
from ..step import Refuse, Step

_NATIVE = frozenset({T.INT32, T.INT64, T.UINT32, T.UINT64})


@replaces("Where")
def where_below_9(st: Step) -> None:
    if st.target < 7:
        raise Refuse("below opset 7 the ops it is written with broadcast by attribute")
    c, x, y = st.input(0), st.input(1), st.input(2)
    out = st.w.output[0]
    if _pick_from_two(st, c, x, y, out):
        return
    t = st.elem_type(x)
    if t == T.BOOL:
        st.add_node("Or", [st.add_node("And", [c, x], "then"), st.add_node(
            "And", [st.add_node("Not", [c], "otherwise"), y], "else")], "where", output=out)
        st.remove("bool Where written as (c and x) or (not c and y)", "Where exists from opset 9")
        return
    if t not in INTEGER_TYPES:
        raise Refuse(("its values' type is unknown" if t is None else
                      f"its values are {T.DataType.Name(t)}, not two constants of one value "
                      "each within the condition's shape")
                     + ": below 9 no op picks per element, and arithmetic would make NaN of "
                     "an infinity times 0 and +0 of -0 + 0")
    wide = t if t in _NATIVE else T.INT32
    if wide != t:
        x, y = st.add_cast(x, wide, "x_int32"), st.add_cast(y, wide, "y_int32")
    r = st.pick(c, x, y, "where", output=out if wide == t else None)
    if wide != t:
        st.add_cast(r, t, "back", output=out)
    st.remove(f"{T.DataType.Name(t)} Where written as x * c + y * (1 - c)",
              "Where exists from opset 9")


def _pick_from_two(st: Step, c: str, x: str, y: str, out: str) -> bool:
    """Write the node as a Gather of ``[y, x]`` at ``Cast(c, int64)`` where ``x`` and ``y``
    are constants each holding one value (any number of copies of the same bits) and shaped
    to broadcast into the condition's shape (so the output has it); False when that does
    not apply."""
    vx, vy = st.const(x), st.const(y)
    if vx is None or vy is None or vx.dtype != vy.dtype:
        return False
    cs = st.shape(c)
    if not all(_one_value(v) and fits_into(v.shape, cs) for v in (vx, vy)):
        return False
    table = st.add_const("values", np.concatenate([vy.reshape(-1)[:1], vx.reshape(-1)[:1]]))
    st.add_node("Gather", [table, st.add_cast(c, T.INT64, "position")], "pick", output=out,
                axis=0)
    st.remove("Where of two constant values written as a Gather of them at the condition",
              "Where exists from opset 9")
    return True


def _one_value(v: np.ndarray) -> bool:
    """Whether every element of ``v`` (at least one) has the same bits."""
    if v.size == 0:
        return False
    bits = np.ascontiguousarray(v).reshape(-1).view(np.uint8).reshape(v.size, -1)
    return bool((bits == bits[:1]).all())
