"""Ops that take some element types only from a later version.

* **Equal 11** takes floats; before, integers and bool only. Down, floats are compared as
  ``Not(Less or Greater) and not (IsNaN(A) or IsNaN(B))``: equal values are neither less
  nor greater (+0 and -0, infinities alike), and NaN equals nothing. Below 9 (no IsNaN)
  ``x < inf or x > -inf`` tells a value from NaN (every value but +inf is below +inf, +inf
  is above -inf, NaN compares false), from 7 (comparisons broadcast numpy-style); an input
  that is a constant holding no NaN needs no test.
* **Pow 12** takes an exponent of another type than X (integers included); before, both
  share X's float type. Down, a constant exponent whose values X's type holds exactly is
  written in that type (x ** 2 and x ** 2.0 are the same power); a computed one is refused.
* **Max/Min 12** take integers; before, floats only. Down, integer inputs are compared
  instead: ``Where(Less(a, b), b, a)`` for Max (``Less(b, a)`` for Min), input by input, from
  opset 9 (Less and Where take every integer type, with numpy broadcasting); at 6..8 the
  inputs of 8-, 16- and 32-bit types go through float64 and back (every such value is exact
  in a double, so is their maximum); so do 64-bit ones that are constants within 2**53 or
  positions and sizes an op computes (:func:`.negative_axes.is_position`);
  other 64-bit ones, at 7 and 8, are picked by the 64-bit Less below (an integer
  :meth:`~..step.Step.pick` of the two), and refused at 6.
* **Clip 12** takes integers; before, floats only. Down, integer X is clamped by picks,
  ``Where(Less(x, min), min, x)`` then ``Where(Less(max, y), max, y)`` (Clip-13's order: with
  min > max every output is max), an omitted bound skipped, from opset 9; at 7 and 8 by the
  integer comparison and :meth:`~..step.Step.pick` below (the bounds constants or computed);
  below 7 refused (Less broadcasts by attribute there).
* **Less/Greater 9** take integers; before, floats only. Down, 8-, 16- and 32-bit integers,
  and 64-bit ones compared with a constant below 2**53 in magnitude or with positions or sizes
  an op computes (any value compares with such a one in float64 as it compares exactly), are
  compared as float64; other 64-bit ones as the pair
  (high, low) of their floor division by 2**32, each exact in a double: high first, low
  where the highs are equal, from opset 7.
* **TopK 11** takes integers and ``largest=0`` (the k smallest); before, floats and the k
  largest only. Down, integer X goes through float64 when every value is exact there (8-, 16-
  and 32-bit types; 64-bit positions and sizes), negated for the k smallest (exact in a
  double, and order-reversing; equal values keep the lower index first either way), the values
  negated and cast back; from 6 (Cast-1's type is a string onnx does not infer). Float X with
  ``largest=0`` stays refused: negation would move NaNs from one end of the order to the
  other.
"""

from __future__ import annotations

import numpy as np
import onnx

from opshift.convert.registry import at
from opshift.convert.step import OPSET_1_FLOATS, Refuse, Step, np_dtype
from opshift.convert.steps.negative_axes import is_position
from opshift.opsets import INTEGER_TYPES

_WIDE = frozenset({onnx.TensorProto.INT64, onnx.TensorProto.UINT64})


@at(11, "Equal")
def float_equal(st: Step) -> None:
    if st.up:
        return
    a, b = st.input(0), st.input(1)
    t = st.elem_type(a)
    if t not in OPSET_1_FLOATS:
        return
    kind = onnx.TensorProto.DataType.Name(t)
    if st.target < 7:
        raise Refuse(f"{kind} inputs: below opset 7 Less and Greater broadcast by attribute, "
                     "and Equal's float form needs them to broadcast numpy-style")
    tests = [v for v in (st.not_nan(a, "a"), st.not_nan(b, "b")) if v is not None]
    y = st.w.output[0]
    equal = _neither_less_nor_greater(st, a, b, "ab", output=None if tests else y)
    for k, v in enumerate(tests):
        equal = st.add_node("And", [equal, v], "equal", output=y if k == len(tests) - 1 else None)
    st.remove(f"{kind} Equal written as Not(Less or Greater) and neither a NaN",
              "Equal takes floats from opset 11")


def _neither_less_nor_greater(st: Step, a: str, b: str, what: str, *,
                              made: dict[str, str] | None = None,
                              output: str | None = None) -> str:
    """``not (a < b or a > b)``: equal, for values that are not NaN (Equal takes neither
    floats before 11 nor uint64); ``made``: a comparison of the two already made, by op."""
    made = made or {}
    ordered = [made.get(op) or st.add_node(op, [a, b], f"{what}_{op.lower()}")
               for op in ("Less", "Greater")]
    return st.add_node("Not", [st.add_node("Or", ordered, f"{what}_ordered")],
                       f"{what}_unordered", output=output)


@at(12, "Pow")
def pow_exponent_type(st: Step) -> None:
    if st.up:
        return
    x, e = st.input(0), st.input(1)
    t, te = st.elem_type(x), st.elem_type(e)
    if t is None or te is None or t == te or t not in OPSET_1_FLOATS:
        return  # (integer X: the schema check refuses it)
    kind = onnx.TensorProto.DataType.Name(te)
    value = st.const(e)
    if value is None:
        raise Refuse(f"its exponent {e!r} is {kind} and computed: before 12 it has X's type "
                     f"({onnx.TensorProto.DataType.Name(t)})")
    same = value.astype(np_dtype(t))
    if not np.array_equal(same.astype(value.dtype), value, equal_nan=value.dtype.kind == "f"):
        raise Refuse(f"its {kind} exponent {value.reshape(-1)[:4].tolist()} is not exact in "
                     f"{onnx.TensorProto.DataType.Name(t)}, the type it has before 12")
    st.set_inputs([x, st.add_const("exponent", same)])
    st.note(f"{kind} exponent written as {onnx.TensorProto.DataType.Name(t)}",
            "the exponent has X's type before 12")


@at(12, "Max", "Min")
def integer_max_min(st: Step) -> None:
    if st.up:
        return
    names = [n for n in st.w.input if n]
    t = st.elem_type(names[0]) if names else None
    if t not in INTEGER_TYPES:
        return
    kind = onnx.TensorProto.DataType.Name(t)
    y = st.w.output[0]
    wide = t in _WIDE and not all(_exact_in_double(st, n) for n in names)
    if st.target >= 9 or (wide and st.target >= 7):
        acc = names[0]
        for k, b in enumerate(names[1:], 1):
            last = k == len(names) - 1
            pair = [acc, b] if st.op == "Max" else [b, acc]
            acc = st.pick(st.compare("Less", *pair, f"less{k}"), b, acc, f"pick{k}",
                          output=y if last else None)
        if len(names) == 1:
            st.add_node("Identity", [acc], "same", output=y)
        st.remove(f"{kind} {st.op} written as a pick by Less of its inputs in turn",
                  f"{st.op} takes integers from opset 12")
        return
    if wide:
        raise Refuse(f"{kind} inputs: below opset 7 only a round trip through float64 could "
                     "compare them, which rounds values past 2**53")
    double = onnx.TensorProto.DOUBLE
    inputs = []
    for name in st.w.input:
        if not name:
            inputs.append(name)
            continue
        c = st.add_cast(name, double, "as_double")
        st.state.shapes[c] = st.shape(name)
        inputs.append(c)
    st.set_inputs(inputs)
    wide = st.fresh_value("double")
    st.facts.extra_types[wide] = double
    st.edit().output[0] = wide
    st.add_cast(wide, t, "back", after=True, output=y)
    st.note(f"{kind} inputs compared in float64 (exact for them) and cast back",
            f"{st.op} takes integers from opset 12")


def _compares_exactly(st: Step, name: str) -> bool:
    """Whether any integer compares with ``name`` in float64 as it compares exactly: a
    constant every value of which is below 2**53 in magnitude (its neighbours are exact too,
    so no value rounds onto it from the other side), or positions and sizes an op computes."""
    value = st.const(name)
    if value is not None:
        return bool(((value < 2**53) & (value > -(2**53))).all())
    return is_position(st, name)


def _exact_in_double(st: Step, name: str) -> bool:
    """Whether every value of 64-bit integer ``name`` is exact in a double: a constant within
    2**53, or positions or sizes an op computes."""
    value = st.const(name)
    if value is not None:
        return bool(((value <= 2**53) & (value >= -(2**53))).all())  # (in the integer type)
    return is_position(st, name)


@at(12, "Clip")
def integer_clip(st: Step) -> None:
    if st.up:
        return
    x = st.input(0)
    t = st.elem_type(x)
    if t not in INTEGER_TYPES:
        return
    kind = onnx.TensorProto.DataType.Name(t)
    if st.target < 7:
        raise Refuse(f"{kind} X: Clip takes integers from 12, and below opset 7 Less "
                     "broadcasts by attribute (no pick of a scalar bound is written)")
    y = st.w.output[0]
    bounds = [(b, name) for b, name in ((st.input(1), "min"), (st.input(2), "max")) if b]
    acc = x
    for k, (b, name) in enumerate(bounds):
        b = _scalar_bound(st, b, name)
        last = k == len(bounds) - 1
        pair = [acc, b] if name == "min" else [b, acc]
        acc = st.pick(st.compare("Less", *pair, f"past_{name}"), b, acc, f"clipped_{name}",
                      output=y if last else None)
    if not bounds:
        st.add_node("Identity", [x], "same", output=y)
    st.remove(f"{kind} Clip written as picks by Less: Where(x < min, min, x), then "
              "Where(max < y, max, y)" if bounds else f"{kind} Clip without bounds: Identity",
              "Clip takes integers from opset 12")


def _scalar_bound(st: Step, b: str, name: str) -> str:
    """The bound ``b`` as a scalar: Clip reads a one-element bound of any rank whole, a pick
    would broadcast it (a constant rewritten, anything else Reshape to [])."""
    if st.rank(b) == 0:
        return b
    value = st.const(b)
    if value is not None:
        if value.size != 1:
            raise Refuse(f"{name} {b!r} has {value.size} values (a bound is a scalar)")
        return st.add_const(name, value.reshape(()))
    return st.add_node("Reshape", [b, st.add_const(f"{name}_scalar", np.zeros(0, np.int64))],
                       f"{name}_scalar")


@at(11, "TopK")
def integer_or_smallest(st: Step) -> None:
    if st.up:
        return
    x = st.input(0)
    t = st.elem_type(x)
    if t not in INTEGER_TYPES:
        return  # (floats with largest=0: the schema step refuses them)
    smallest = st.attr("largest", 1) == 0
    kind = onnx.TensorProto.DataType.Name(t)
    if st.target < 6:
        raise Refuse(f"{kind} X: TopK takes integers from 11, and below opset 6 Cast names "
                     "its type by a string, which onnx's type inference does not read")
    if t in _WIDE and not _exact_in_double(st, x):
        raise Refuse(f"{kind} X: TopK takes integers from 11; before, only a round trip "
                     "through float64, which rounds values past 2**53 (X is not positions or "
                     "sizes an op computes)")
    double = onnx.TensorProto.DOUBLE
    xd = st.add_cast(x, double, "as_double")
    if smallest:
        xd = st.add_node("Neg", [xd], "negated")
        st.del_attr("largest")
    st.state.shapes[xd] = st.shape(x)
    st.set_inputs([xd, *st.w.input[1:]])
    values = st.w.output[0]
    wide = st.fresh_value("double_values")
    st.facts.extra_types[wide] = double
    st.edit().output[0] = wide
    if smallest:
        wide = st.add_node("Neg", [wide], "values", after=True)
    if values:
        st.add_cast(wide, t, "back", after=True, output=values)
    st.note(f"{kind} X ranked as float64 (exact for it)" + (", negated for the k smallest"
                                                             if smallest else ""),
            "TopK takes integers and largest=0 from 11")


_TWO_32 = 1 << 32


@at(9, "Less", "Greater")
def integer_comparison(st: Step) -> None:
    if st.up:
        return
    a, b = st.input(0), st.input(1)
    t = st.elem_type(a)
    if t not in INTEGER_TYPES:
        return
    kind = onnx.TensorProto.DataType.Name(t)
    if st.target < 7:
        raise Refuse(f"{kind} inputs: below opset 7 {st.op} broadcasts by attribute")
    double = onnx.TensorProto.DOUBLE
    if t not in _WIDE or any(_compares_exactly(st, v) for v in (a, b)):
        st.set_inputs([st.add_cast(v, double, f"{w}_double") for v, w in ((a, "a"), (b, "b"))])
        st.note(f"{kind} inputs compared as float64 (exact for them)",
                f"{st.op} takes integers from 9")
        return
    (ha, la), (hb, lb) = (_high_low(st, v, t, w) for v, w in ((a, "a"), (b, "b")))
    dha, dhb = (st.add_cast(h, double, f"{w}_high_double") for h, w in ((ha, "a"), (hb, "b")))
    high = st.add_node(st.op, [dha, dhb], "by_high")
    low = st.add_node(st.op, [st.add_cast(la, double, "a_low_double"),
                              st.add_cast(lb, double, "b_low_double")], "by_low")
    same = _neither_less_nor_greater(st, dha, dhb, "high", made={st.op: high})
    tie = st.add_node("And", [same, low], "tie_by_low")
    st.add_node("Or", [high, tie], "compared", output=st.w.output[0])
    st.remove(f"{kind} {st.op} written as a comparison of (high, low) 32-bit halves in float64",
              f"{st.op} takes integers from 9; a 64-bit value may not be exact in a double")


def _high_low(st: Step, v: str, t: int, what: str) -> tuple[str, str]:
    """(v // 2**32, v mod 2**32) of 64-bit ``v`` (floor division: the low part in
    0..2**32-1, so that the pair orders as v does), in ``v``'s type."""
    dtype = np_dtype(t)
    unit = st.add_const(f"{what}_2_32", np.array(_TWO_32, dtype))
    high = st.add_node("Div", [v, unit], f"{what}_high_trunc")
    low = st.add_node("Sub", [v, st.add_node("Mul", [high, unit], f"{what}_high_part")],
                      f"{what}_low_trunc")
    if t == onnx.TensorProto.UINT64:
        return high, low  # (no sign: truncation is floor)
    # a negative remainder: one less high, 2**32 more low (Div truncates toward zero)
    negative = st.add_cast(st.add_node("Less", [st.add_cast(low, onnx.TensorProto.DOUBLE,
                                                            f"{what}_low_sign"),
                                                st.add_const(f"{what}_zero",
                                                             np.array(0.0))],
                                       f"{what}_low_negative"), t, f"{what}_borrow")
    return (st.add_node("Sub", [high, negative], f"{what}_high"),
            st.add_node("Add", [low, st.add_node("Mul", [negative, unit], f"{what}_carry")],
                        f"{what}_low"))
