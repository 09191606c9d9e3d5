"""MatMulInteger and ConvInteger (from 10) below 10: the product of the zero-point-free
integers, from opset 7.

Each 8-bit input less its zero point (per tensor; per row of A and per column of B for
MatMulInteger, per output channel of W for ConvInteger) is an integer within 255 of 0.
MatMulInteger: from 9 a MatMul of them as int32 (MatMul takes int32 from 9), which sums as
MatMulInteger does, wrapping alike. Below 9, and for ConvInteger (Conv takes floats only), the
product of them as floats, cast to int32: exact while every partial sum is exact and within
int32, which the length K of each sum bounds (A's last dim or B's next to last; W's input
channels per group times its kernel), and which must be known. Sums of at most
2**24 // (255 * 255) = 258 terms are exact in float32, the type every runtime's Conv and
MatMul take; a longer sum is cut into parts of at most that many terms (input channels of
x and W for ConvInteger, whole channels, so the kernel's terms stay in one part; slices of
K for MatMulInteger), each part's product in float32 cast to int32 and the parts added as
int32 (Add takes int32 from 6). Only where a part cannot be that short (a kernel of more than
258 elements) or the ranks are unknown are the sums in float64 (exact while K * 255 * 255 <
2**31), which onnxruntime's Conv does not take: the change says so.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step

_EIGHT_BIT = frozenset({TensorProto.INT8, TensorProto.UINT8})
#: the longest sums of products of two values within 255 of 0 that float32 holds exactly,
#: and that stay within int32
_LONGEST_FLOAT = 2**24 // (255 * 255)
_LONGEST = (2**31 - 1) // (255 * 255)
#: what runs the float64 forms, as measured (onnxruntime 1.32's CPU kernels)
_NO_DOUBLE = {"Conv": "onnxruntime has no float64 Conv kernel: it cannot run this model"}


@replaces("MatMulInteger")
def matmul_integer(st: Step) -> None:
    a, b = st.input(0), st.input(1)
    shape_a, shape_b = st.shape(a), st.shape(b)
    k = next((s[i] for s, i in ((shape_a, -1), (shape_b, -2))
              if s is not None and len(s) >= -i and isinstance(s[i], int)), None)
    parts = None
    if st.target >= 9:
        wide = TensorProto.INT32
    else:
        _check_length(st, k)
        ra, rb = st.rank(a), st.rank(b)
        if k > _LONGEST_FLOAT and ra is not None and rb is not None:
            axis_a, axis_b = ra - 1, max(rb - 2, 0)
            parts = [(r, axis_a, r, axis_b) for r in _ranges(k, _LONGEST_FLOAT)]
        wide = _float_type(k, parts)
    if shape_a is not None and len(shape_a) == 2:  # a per-row zero point of A as [M, 1]
        _per_axis_zero_point(st, 2, 2)
    ai = _less_zero_point(st, a, _input(st, 2), wide, "a")
    bi = _less_zero_point(st, b, _input(st, 3), wide, "b")
    _product(st, "MatMul", [ai, bi], wide, {}, parts, k)


@replaces("ConvInteger")
def conv_integer(st: Step) -> None:
    x, w = st.input(0), st.input(1)
    ws = st.shape(w)
    k = None
    if ws is not None and all(isinstance(d, int) for d in ws[1:]):
        k = math.prod(ws[1:])  # (input channels per group times the kernel)
    _check_length(st, k)
    parts = None
    per_part = _LONGEST_FLOAT // math.prod(ws[2:])  # (whole input channels)
    if k > _LONGEST_FLOAT and per_part:
        group = int(st.attr("group", 1))
        channels = ws[1]  # per group: x has group times as many, group g's after g's before
        parts = [(np.array([g * channels + c for g in range(group) for c in r], np.int64), 1,
                  r, 1) for r in _ranges(channels, per_part)]
    wide = _float_type(k, parts)
    _per_axis_zero_point(st, 3, st.need_rank(w, "a per-channel zero point of W is read "
                                                "along its first axis"))
    xi = _less_zero_point(st, x, _input(st, 2), wide, "x")
    wi = _less_zero_point(st, w, _input(st, 3), wide, "w")
    _product(st, "Conv", [xi, wi], wide,
             {a.name: helper.get_attribute_value(a) for a in st.w.attribute}, parts, k)


def _check_length(st: Step, k: int | None) -> None:
    """Refuse where sums of ``k`` products cannot be made exact (no int32 wrapping)."""
    if st.target < 7:
        raise Refuse("below opset 7 the subtraction of the zero points broadcasts by "
                     "attribute")
    if k is None or k > _LONGEST:
        raise Refuse(("the length of its sums is unknown" if k is None else
                      f"its sums have {k} terms") + ": it is summed in floats and cast to "
                     f"int32, exact for at most {_LONGEST} terms (no int32 wrapping)")


def _float_type(k: int, parts: list | None) -> int:
    """The float type the sums are exact in: float32 when they (or their parts) are short."""
    return TensorProto.FLOAT if k <= _LONGEST_FLOAT or parts else TensorProto.DOUBLE


def _ranges(n: int, size: int) -> list[np.ndarray]:
    """0..n-1 cut into consecutive ranges of at most ``size``, as close to equal as can be."""
    return [np.asarray(r, np.int64) for r in np.array_split(np.arange(n), -(-n // size))]


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


def _product(st: Step, op: str, inputs: list[str], wide: int, attrs: dict,
             parts: list | None, k: int) -> None:
    """``op`` of ``inputs`` into the node's output as int32: in one piece, or summed from
    ``parts`` (positions of the first input along an axis, of the second along an axis)."""
    y = st.w.output[0]
    type_name = TensorProto.DataType.Name(wide).lower()
    if wide == TensorProto.INT32:
        st.add_node(op, inputs, "product", output=y, **attrs)
    elif not parts:
        st.add_cast(st.add_node(op, inputs, "product", **attrs), TensorProto.INT32, "int32",
                    output=y)
    else:
        total = None
        for j, (pos_a, axis_a, pos_b, axis_b) in enumerate(parts):
            read = [st.add_node("Gather", [v, st.add_const(f"part{j}_{what}", pos)],
                                f"part{j}_{what}", axis=axis)
                    for v, pos, axis, what in ((inputs[0], pos_a, axis_a, "a"),
                                               (inputs[1], pos_b, axis_b, "b"))]
            last = j == len(parts) - 1
            part = st.add_cast(st.add_node(op, read, f"part{j}", **attrs), TensorProto.INT32,
                               f"part{j}_int32", output=y if last and total is None else None)
            if total is not None:
                total = st.add_node("Add", [total, part], f"sum{j}", output=y if last else None)
            else:
                total = part
        type_name = (f"float32 in {len(parts)} parts of at most {max(len(p[2]) for p in parts)}"
                     f" of the {'input channels' if op == 'Conv' else 'terms'} (sums exact in "
                     "float32), added as int32")
    extra = ""
    if wide == TensorProto.DOUBLE:
        extra = f" ({k} terms; {_NO_DOUBLE[op]})" if op in _NO_DOUBLE else f" ({k} terms)"
    st.remove(f"written as {op} of the integers less their zero points, in {type_name}"
              + extra, f"{st.op} exists from opset 10")
