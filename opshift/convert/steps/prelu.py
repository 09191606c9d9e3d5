"""PRelu: the slope broadcasting rule at 6/7 and the integer types added at 9.

* **7** (:data:`opshift.broadcast.NUMPY_SINCE`) -- legacy (<= 6) PRelu applies a 1-D slope
  ``[C]`` per channel on axis 1 when C is X's dim 1, numpy (>= 7) broadcasts it from the last
  axis (:mod:`opshift.broadcast` states both rules). Up: a per-channel ``[C]`` becomes
  ``[C, 1, ..., 1]``; down: the slope keeps its form wherever the legacy rule reads it as
  numpy broadcasting does (``[C, 1, ..., 1]`` is per channel under both readings, and loads
  in runtimes that broadcast numpy-style at every version); only a 1-D slope that numpy
  applies on the last axis becomes ``[1, C]``. Constants are reshaped (once per tensor,
  copied when shared), dynamic slopes get an Unsqueeze/Squeeze valid at the target.
* **9** -- int32/int64/uint32/uint64 exist only from 9. Down: unsigned X is never negative,
  so PRelu is an Identity; int32/int64 become ``x + (x < 0) * (slope * x - x)`` in the
  integer type (the sign test through float: int -> float rounding never changes a sign),
  which wraps exactly like PRelu's own product; at opset 6 the Mul places the slope with its
  legacy ``broadcast``/``axis`` attributes (the slope read without its outer 1s there).
  Below opset 6 no op does integer arithmetic and float64 cannot reproduce integer products
  (beyond 2**53, and where they wrap): refused.
"""

from __future__ import annotations

import math

from onnx import TensorProto, helper

from opshift import opsets
from opshift.broadcast import NUMPY_SINCE, SlopeRule, legacy_placement, slope_shape_for
from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step
from opshift.convert.steps.bfloat16 import dropped_types_possible, x_type_going_down
from opshift.errors import EvaluationError
from opshift.graph.edit import constant_node
from opshift.graph.facts import Constant

_UNSIGNED = (TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64)


def _known_int(d) -> bool:
    return isinstance(d, int) and not isinstance(d, bool)


def _slope(st: Step) -> tuple[str, tuple | None, Constant | None]:
    """(the slope's name, its shape or None, the constant holding it when this node's scope
    holds it: a slope from an enclosing graph is read through an Unsqueeze/Squeeze, the
    edits of a subgraph stay in it)."""
    name = st.input(1)
    const = st.constant(name)
    if const is not None and const.scope is not st.scope:
        const = None
    planned = st.state.shapes.get(name)
    if planned is not None:
        return name, planned, const
    if const is not None:
        return name, tuple(const.tensor.dims), const
    return name, st.shape(name), None


def _read_slope_as(st: Step, slope: str, const: Constant | None, shape: tuple, op: str,
                   axes: list[int], suffix: str, why: str) -> None:
    """Make the node read its slope (``slope``, held in ``const`` as :func:`_slope` found)
    in ``shape`` (see :meth:`Step.read_input_as`)."""
    st.note(f"slope {slope!r} {st.read_input_as(1, shape, op, axes, suffix, const)}", why)


@at(NUMPY_SINCE, "PRelu")
def slope_rule(st: Step) -> None:
    if st.up:
        _to_numpy(st)
    else:
        _to_legacy(st)


def _to_numpy(st: Step) -> None:
    """Legacy (<= 6) -> numpy (>= 7): a per-channel [C] slope becomes [C, 1, ..., 1]."""
    slope, s_shape, const = _slope(st)
    x = st.input(0)
    if s_shape is None:
        raise Refuse(f"the shape of slope {slope!r} is unknown, so its legacy per-channel "
                     f"broadcasting cannot be carried to PRelu-{st.dst}")
    size = math.prod(s_shape) if all(_known_int(d) for d in s_shape) else None
    if size == 1 and len(s_shape) <= 1:
        return  # shared slope: same under both rules
    x_shape = st.shape(x)
    if size == 1:
        if x_shape is not None and len(x_shape) >= len(s_shape):
            return
        if const is not None:
            st.note(f"slope {slope!r} {st.reshape_constant_input(1, const, (), slope)}",
                    "a size-1 slope is shared; numpy broadcasting needs rank <= X's")
            return
        raise Refuse(f"the rank of X is unknown; cannot tell whether the size-1 slope of "
                     f"rank {len(s_shape)} broadcasts at PRelu-{st.dst}")
    if len(s_shape) != 1:
        return  # legacy PRelu reads multi-dimensional slopes numpy-style already
    if x_shape is None:
        raise Refuse(f"the rank of X {x!r} is unknown, so whether slope {slope!r} is "
                     "per-channel cannot be decided; give the model input shapes or run "
                     "shape inference")
    r = len(x_shape)
    c = s_shape[0]
    if r < 3:
        return  # rank <= 2: axis 1 is the last axis (or numpy rules apply): no change
    x1, xl = x_shape[1], x_shape[-1]
    if _known_int(c) and _known_int(x1):
        per_channel = c == x1
    elif _known_int(c) and _known_int(xl) and xl != c:
        per_channel = True  # numpy broadcasting cannot apply, so legacy reads it per channel
    elif not _known_int(c) and c is not None and c == x1:
        per_channel = True
    else:
        raise Refuse(f"cannot decide whether slope {slope!r} of shape {list(s_shape)} is "
                     f"per-channel for X of shape {list(x_shape)} (dims unknown)")
    if not per_channel:
        return  # legacy falls back to numpy broadcasting: same at PRelu-7
    _read_slope_as(st, slope, const, (c,) + (1,) * (r - 2), "Unsqueeze", list(range(1, r - 1)),
                   "per_channel", f"PRelu-{st.src} applies a [C] slope per channel on axis 1; "
                   f"PRelu-{st.dst} broadcasts from the last axis")


def _to_legacy(st: Step) -> None:
    """numpy (>= 7) -> legacy (<= 6): keep the slope wherever legacy PRelu reads it as numpy
    broadcasting does (a [C, 1, ..., 1] slope is per channel under both readings, and
    runtimes that broadcast numpy-style at every version load it); only a 1-D slope that
    numpy applies on the last axis is read as [1, C]."""
    slope, s_shape, const = _slope(st)
    x, vt = st.input(0), st.dst
    if s_shape is None:
        raise Refuse(f"the shape of slope {slope!r} is unknown; legacy PRelu-{vt} "
                     "per-channel broadcasting could misread it")
    if all(_known_int(d) for d in s_shape) and math.prod(s_shape) == 1:
        return  # shared: legacy and numpy agree
    x_shape = st.shape(x)
    if x_shape is None:
        if len(s_shape) >= 2:
            return  # legacy reads multi-dimensional slopes numpy-style
        raise Refuse(f"the rank of X {x!r} is unknown, so whether legacy PRelu-{vt} would "
                     f"read slope {slope!r} per channel cannot be decided")
    r = len(x_shape)
    try:
        np_shape = slope_shape_for(x_shape, s_shape, SlopeRule.NUMPY)
    except EvaluationError as e:
        raise Refuse(str(e)) from None
    try:
        legacy_shape = slope_shape_for(x_shape, s_shape, SlopeRule.LEGACY)
    except EvaluationError:
        legacy_shape = None
    if legacy_shape is not None and tuple(legacy_shape) == tuple(np_shape) and \
            not (len(s_shape) == 1 and r >= 3 and not _known_int(x_shape[1])):
        return
    if len(s_shape) == 1 and r >= 2:
        # [C] on the last axis: as [1, C] legacy PRelu broadcasts it numpy-style
        _read_slope_as(st, slope, const, (1,) + tuple(s_shape), "Unsqueeze", [0], "last_axis",
                       f"PRelu-{vt} reads a [C] slope per channel on axis 1 when C equals "
                       "X's dim 1; as [1, C] it broadcasts from the last axis")
        return
    raise Refuse(f"slope of shape {list(s_shape)} for X of shape {list(x_shape)} cannot be "
                 f"expressed by PRelu-{vt}")


@at(9, "PRelu", when=dropped_types_possible)
def integer_types(st: Step) -> None:
    elem = x_type_going_down(st)
    if elem is None:
        return
    tname = opsets.tensor_type_name(elem)
    if elem in _UNSIGNED:
        name = st.node.name or st.fresh(f"{st.label}/identity")
        st.state.pre.append(helper.make_node("Identity", [st.input(0)], list(st.w.output),
                                             name=name))
        st.remove("replaced by Identity", f"PRelu-{st.dst} does not allow {tname}; unsigned "
                  "X is never negative, so PRelu returns X")
    elif elem in (TensorProto.INT32, TensorProto.INT64):
        if st.target < 6:
            raise Refuse(f"PRelu-{st.dst} does not allow {tname}, and opset {st.target} has "
                         "no integer arithmetic (Mul/Add take integers from opset 6); "
                         f"float64 cannot reproduce {tname} products exactly (beyond 2**53, "
                         "and where they wrap), so the node is not converted")
        st.finish(lambda s: _integer_form(s, elem, tname))


def _integer_form(st: Step, elem: int, tname: str) -> None:
    """``y = x + Cast(Less(Cast(x, float), 0), T) * (slope * x - x)``, valid at opsets 6..8.

    Only the sign of x goes through float (int -> float rounding never changes a sign); the
    arithmetic stays in the integer type, so the result is PRelu's own integer product. At
    opset 6 the binary ops broadcast by their ``broadcast``/``axis`` attributes.
    """
    legacy = st.target < 7
    mul_attrs = _legacy_mul_attrs(st) if legacy else {}
    less_attrs = {"broadcast": 1} if legacy else {}
    base = st.node.name or st.label
    x, slope = st.input(0), st.input(1)
    y = st.w.output[0]

    def v(s: str) -> str:
        return st.fresh(f"{base}/{s}")

    xf, zero, neg, mask, sx, d, md = (v("x_float"), v("zero"), v("is_negative"), v("mask"),
                                      v("slope_x"), v("slope_x_minus_x"), v("masked"))
    st.state.pre.extend([
        helper.make_node("Cast", [x], [xf], name=v("cast_sign"), to=TensorProto.FLOAT),
        constant_node(zero, helper.make_tensor(zero, TensorProto.FLOAT, [], [0.0]),
                      v("zero_const")),
        helper.make_node("Less", [xf, zero], [neg], name=v("less"), **less_attrs),
        helper.make_node("Cast", [neg], [mask], name=v("cast_mask"), to=elem),
        helper.make_node("Mul", [x, slope], [sx], name=v("mul_slope"), **mul_attrs),
        helper.make_node("Sub", [sx, x], [d], name=v("sub")),
        helper.make_node("Mul", [mask, d], [md], name=v("mul_mask")),
        helper.make_node("Add", [x, md], [y], name=st.node.name or v("add")),
    ])
    st.remove("decomposed into integer Mul/Sub/Add with a sign mask",
              f"PRelu-{st.dst} does not allow {tname}; x + (x < 0) * (slope * x - x) in "
              f"{tname} wraps exactly like PRelu's own product, for every value")


def _legacy_mul_attrs(st: Step) -> dict[str, int]:
    """``broadcast``/``axis`` for an opset-6 ``Mul(x, slope)`` that places the slope as
    legacy PRelu does (the slope read without its outer 1s where legacy Mul needs that);
    refused when legacy Mul cannot express that placement."""
    slope, s_shape, const = _slope(st)
    x_shape = st.shape(st.input(0))
    if s_shape is None or x_shape is None:
        raise Refuse("shapes of X and slope are needed to express the slope broadcast with "
                     "opset-6 Mul, and they are unknown")
    if all(_known_int(d) for d in s_shape) and math.prod(s_shape) == 1:
        return {"broadcast": 1}
    if tuple(s_shape) == tuple(x_shape):
        return {}
    try:
        placed = slope_shape_for(x_shape, s_shape, SlopeRule.LEGACY)
    except EvaluationError as e:
        raise Refuse(str(e)) from None
    if len(s_shape) == 1 and len(x_shape) >= 2 and placed[1] == s_shape[0] != 1:
        return {"broadcast": 1, "axis": 1}  # legacy PRelu's per-channel [C]
    p = legacy_placement(x_shape, s_shape)
    if isinstance(p, str):
        raise Refuse(f"slope of shape {list(s_shape)} for X of shape {list(x_shape)} cannot "
                     f"be placed by opset-6 Mul broadcasting ({p})")
    if p.drop:
        st.note(f"slope {slope!r} "
                f"{st.read_input_as(1, p.shape, 'Squeeze', list(p.drop), 'legacy', const)}",
                "opset-6 Mul reads B without its outer 1s")
    return {"broadcast": 1} if p.axis is None else {"broadcast": 1, "axis": p.axis}
