"""Version steps whose meaning changed in ways the ``onnx.defs`` schemas do not show.

:data:`TABLE` maps ``(op, v)`` -- the step between ``v`` and the op's previous schema
version -- to adapters. Each adapter receives a :class:`~opshift.passes.other_ops_step.Step`
(``st.up`` tells the direction) and either rewrites the node so that it computes exactly
the same at the step's destination, or raises :class:`~opshift.passes.other_ops_step.Refuse`
with the reason. The schema check (``other_ops_schema.generic_step``) runs after the
adapters, so they only deal with what the schemas cannot tell.

Listed steps (v = the newer version of the step):

===================================  =======================================================
Add/Sub/Mul/Div/Pow/And/Or/Xor/       legacy ``broadcast``/``axis`` (<= 6) vs numpy
Equal/Greater/Less 7                  broadcasting: down needs equal shapes or ``broadcast=1``
                                      with B a suffix of A; up reshapes B for ``axis``
Sum/Max/Min/Mean 8                    inputs had to share one shape before 8
Gemm 7, 11                            ``broadcast`` of C (<= 6); C optional from 11
Softmax/LogSoftmax/Hardmax 13         coerced 2-D vs one axis: exact when the axis is the last
                                      (or only size-1 dims follow); otherwise Flatten/Reshape
                                      (up) or Transpose (down) around the op
negative axes/indices 11              many ops accept negative axes only from 11: normalized
                                      with the known rank going down, else refused
BatchNormalization 6, 7, 14           consumed_inputs required at 1; is_test=0 means training
                                      at <= 6; training outputs / training_mode
Dropout 7, 12                         is_test at <= 6; ratio/training_mode inputs from 12
Reshape 5, 14                         shape attribute vs input; allowzero
Unsqueeze/Squeeze/ReduceSum 13,       axes attribute vs input; noop_with_empty_axes
other Reduce* 18
Split 2, 13, 18                       split input/attribute; num_outputs
Clip 6, 11                            unset bounds; min/max attributes vs inputs
Pad 2, 11, 19                         paddings -> pads; pads/value attributes vs inputs; wrap
Slice 10, TopK 10                     attributes vs inputs
Concat 4                              axis defaulted to 1 before 4, required from 4
Cast 6                                ``to`` as a string before 6
Constant 11, 12                       sparse_value, value_* attributes
LpPool/GlobalLpPool 2                 p float vs int
MaxPool 10, AveragePool 19,           dilations of all ones are the default
LpPool 18
MaxPool/AveragePool/LpPool 22         with ceil_mode, windows starting in the padding are
                                      dropped only from 22
Shape 15                              start/end written as a Slice below 15
GridSample 20                         mode names bilinear/bicubic -> linear/cubic
GRU 3                                 default direction spelled 'foward' at 1
RoiAlign 16                           old behaviour is coordinate mode 'output_half_pixel'
DFT 20                                axis attribute (default 1) vs input (default -2)
Upsample 7, 9                         height/width_scale -> scales -> scales input
Resize 11, 13, 19                     Resize-10 is asymmetric sampling with floor rounding;
                                      roi/scales optional from 13; half_pixel_symmetric
                                      from 19
QuantizeLinear/DequantizeLinear 13    per-axis scales only from 13
OneHot 11                             negative indices count from the back from 11
ScatterND/ScatterElements 18          reduction min/max only from 18
Scan 9, GroupNormalization 21         refused (different inputs / scale shape)
===================================  =======================================================

:data:`DECOMPOSE` maps ops that do not exist at the target opset to exact replacements
(CastLike -> Cast with the like-input's element type).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from .. import opsets
from .other_ops_step import Refuse, Step

Adapter = Callable[[Step], None]
TABLE: dict[tuple[str, int], list[Adapter]] = {}
#: op -> adapter replacing a node (at the op's first version) by nodes valid at the target,
#: for ops that do not exist at the target opset.
DECOMPOSE: dict[str, Adapter] = {}

FLT_MAX = float(np.finfo(np.float32).max)


def at(version: int, *ops: str) -> Callable[[Adapter], Adapter]:
    """Register an adapter for the step into ``version`` of each op."""

    def deco(fn: Adapter) -> Adapter:
        for op in ops:
            TABLE.setdefault((op, version), []).append(fn)
        return fn

    return deco


def _np_dtype(elem: int) -> np.dtype:
    return onnx.helper.tensor_dtype_to_np_dtype(elem)


def _known(shape: tuple | None) -> bool:
    return shape is not None and all(d is not None for d in shape)


def _is_suffix(small: tuple, big: tuple) -> bool:
    return len(small) <= len(big) and (not small or tuple(big[-len(small):]) == tuple(small))


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# ------------------------------------------------------------------ binary legacy broadcasting

BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")
COMMUTATIVE = frozenset({"Add", "Mul", "And", "Or", "Xor", "Equal"})


@at(7, *BINARY)
def legacy_broadcast(st: Step) -> None:
    a, b = st.input(0), st.input(1)
    if st.up:
        bc = st.attr("broadcast", 0)
        axis = st.attr("axis")
        for name in ("broadcast", "axis"):
            if st.has_attr(name):
                st.del_attr(name)
        if not bc:
            st.note("dropped broadcast=0: the inputs had equal shapes")
            return
        if axis is None:
            st.note("legacy broadcast of a trailing B equals numpy broadcasting")
            return
        ra = st.need_rank(a, "legacy broadcast with axis")
        rb = st.need_rank(b, "legacy broadcast with axis")
        trailing = ra - _norm_axis(axis, ra) - rb
        if trailing < 0:
            raise Refuse(f"axis={axis} does not fit ranks {ra} and {rb}")
        if trailing == 0 or rb == 0:
            st.note(f"axis={axis} aligns B with A's last dims: numpy broadcasting is the same")
            return
        cb = st.const(b)
        if cb is not None:
            nb = st.add_const("B_aligned", cb.reshape(cb.shape + (1,) * trailing))
        else:
            shape = st.add_const("B_shape", np.array([0] * rb + [1] * trailing, np.int64))
            nb = st.add_node("Reshape", [b, shape], "B_aligned")
        st.set_inputs([a, nb])
        st.note(f"B reshaped with {trailing} trailing 1s for legacy axis={axis}")
        return
    sa, sb = st.shape(a), st.shape(b)
    if sa is None or sb is None:
        raise Refuse("input shapes unknown: legacy broadcasting (opset < 7) needs them")
    if sa == sb and _known(sa):
        return
    if _known(sb) and _is_suffix(sb, sa):
        st.set_attr("broadcast", 1)
        st.note(f"broadcast=1: B {sb} is a suffix of A {sa}")
        return
    if st.op in COMMUTATIVE and _known(sa) and _is_suffix(sa, sb):
        st.set_inputs([b, a])
        st.set_attr("broadcast", 1)
        st.note(f"inputs swapped and broadcast=1: A {sa} is a suffix of B {sb}")
        return
    raise Refuse(f"shapes {sa} and {sb}: legacy broadcasting (opset < 7) cannot express "
                 "this numpy broadcast")


@at(8, "Sum", "Max", "Min", "Mean")
def variadic_same_shape(st: Step) -> None:
    if st.up:
        return
    names = [n for n in st.w.input if n]
    if len(names) < 2:
        return
    shapes = [st.shape(n) for n in names]
    if all(_known(s) for s in shapes) and len(set(shapes)) == 1:
        return
    raise Refuse(f"input shapes {shapes}: before opset 8 all inputs must have one shape")


# ------------------------------------------------------------------ Gemm


@at(7, "Gemm")
def gemm_broadcast(st: Step) -> None:
    if st.up:
        if st.has_attr("broadcast"):
            st.del_attr("broadcast")
            st.note("dropped broadcast: unidirectional broadcasting of C covers it")
        return
    c, y = st.input(2), st.w.output[0]
    sc, sy = st.shape(c), st.shape(y)
    if sc is not None and sy is not None and sc == sy and _known(sc):
        return
    if _known(sc) and sy is not None and _is_suffix(sc, sy):
        st.set_attr("broadcast", 1)
        st.note(f"broadcast=1 for C of shape {sc}")
        return
    raise Refuse(f"C of shape {sc} vs Y of shape {sy}: Gemm-6 broadcasts only trailing shapes")


@at(11, "Gemm")
def gemm_optional_c(st: Step) -> None:
    if st.up or st.input(2):
        return
    t = st.elem_type(st.input(0))
    if t is None:
        raise Refuse("C is absent and the element type of A is unknown")
    c = st.add_const("C_zero", np.zeros((), _np_dtype(t)))
    st.set_inputs([st.input(0), st.input(1), c])
    st.note("C made explicit as a scalar zero")


# ------------------------------------------------------------------ Softmax family


def _trailing_ones(shape: tuple | None, axis: int) -> bool:
    return shape is not None and all(d == 1 for d in shape[axis + 1:])


@at(13, "Softmax", "LogSoftmax", "Hardmax")
def softmax_axis(st: Step) -> None:
    x, y = st.input(0), st.w.output[0]
    r = st.need_rank(x, "coerced 2-D vs single-axis semantics")
    if st.up:
        axis = _norm_axis(st.attr("axis", 1), r)
        if axis == r - 1 or _trailing_ones(st.shape(x), axis):
            st.set_attr("axis", axis)
            st.note(f"axis={axis}: the coerced 2-D and single-axis forms agree here")
            return
        flat = st.add_node("Flatten", [x], "flat", axis=axis)
        inner = st.fresh_value("2d", like=x)
        shape = st.add_node("Shape", [x], "shape")
        w = st.edit()
        w.input[0] = flat
        w.output[0] = inner
        st.set_attr("axis", 1)
        st.add_node("Reshape", [inner, shape], "unflatten", after=True, output=y)
        st.note(f"coerced axis={axis} kept exact with Flatten + Reshape")
        return
    axis = _norm_axis(st.attr("axis", -1), r)
    if axis == r - 1 or _trailing_ones(st.shape(x), axis):
        st.set_attr("axis", axis)
        st.note(f"axis={axis}: the single-axis and coerced 2-D forms agree here")
        return
    perm = [i for i in range(r) if i != axis] + [axis]
    inv = [perm.index(i) for i in range(r)]
    xt = st.add_node("Transpose", [x], "to_last", perm=perm)
    inner = st.fresh_value("last", like=x)
    w = st.edit()
    w.input[0] = xt
    w.output[0] = inner
    st.set_attr("axis", r - 1)
    st.add_node("Transpose", [inner, ], "from_last", after=True, output=y, perm=inv)
    st.note(f"axis={axis} moved last with Transpose for the coerced 2-D form")


# ------------------------------------------------------------------ negative axes (opset 11)

#: op -> (attribute, which value's rank the axes refer to: 'in' input 0, 'out' output 0).
NEG_AXES = {
    "ArgMax": ("axis", "in"), "ArgMin": ("axis", "in"), "Compress": ("axis", "in"),
    "Concat": ("axis", "in"), "Flatten": ("axis", "in"), "Gather": ("axis", "in"),
    "Hardmax": ("axis", "in"), "LogSoftmax": ("axis", "in"), "Softmax": ("axis", "in"),
    "Split": ("axis", "in"), "Squeeze": ("axes", "in"), "Unsqueeze": ("axes", "out"),
    "TopK": ("axis", "in"), "OneHot": ("axis", "out"),
    **{op: ("axes", "in") for op in (
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
        "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")},
}


@at(11, *NEG_AXES, "Slice", "Scan")
def negative_axes(st: Step) -> None:
    if st.up:
        return
    if st.op == "Scan":
        for name in ("scan_input_axes", "scan_output_axes"):
            if any(v < 0 for v in st.attr(name, [])):
                raise Refuse(f"negative {name} exist only from Scan-11")
        return
    if st.op == "Slice":
        if not st.input(3):
            return
        axes = st.need_const(3, "axes")
        if (axes >= 0).all():
            return
        r = st.need_rank(st.input(0), "negative axes before opset 11")
        new = st.add_const("axes", np.where(axes < 0, axes + r, axes).astype(axes.dtype))
        st.set_inputs([*st.w.input[:3], new, *st.w.input[4:]])
        st.note("negative axes normalized")
        return
    name, which = NEG_AXES[st.op]
    value = st.attr(name)
    if value is None:
        return
    vals = value if isinstance(value, list) else [value]
    if all(v >= 0 for v in vals):
        return
    ref = st.input(0) if which == "in" else st.w.output[0]
    r = st.rank(ref)
    if r is None and st.op == "OneHot":
        ri = st.rank(st.input(0))
        r = None if ri is None else ri + 1
    if r is None:
        raise Refuse(f"negative {name}={value} needs the rank of {ref!r}, which is unknown")
    new = [v + r if v < 0 else v for v in vals]
    st.set_attr(name, new if isinstance(value, list) else new[0])
    st.note(f"{name}={value} normalized to {new if isinstance(value, list) else new[0]}")


@at(11, "Gather")
def gather_negative_indices(st: Step) -> None:
    if st.up:
        return
    idx = st.const(st.input(1))
    if idx is None:
        raise Refuse("Gather below opset 11 needs non-negative indices; the indices are "
                     "not constant")
    if (idx >= 0).all():
        return
    s = st.shape(st.input(0))
    axis = st.attr("axis", 0)
    if s is None or s[_norm_axis(axis, len(s))] is None or isinstance(
            s[_norm_axis(axis, len(s))], str):
        raise Refuse("negative indices need the size of the gathered dimension")
    dim = s[_norm_axis(axis, len(s))]
    new = st.add_const("indices", np.where(idx < 0, idx + dim, idx).astype(idx.dtype))
    st.set_inputs([st.input(0), new])
    st.note("negative indices normalized")


@at(11, "OneHot")
def onehot_negative_indices(st: Step) -> None:
    idx = st.const(st.input(0))
    if idx is None or (idx < 0).any():
        raise Refuse("OneHot-11 counts negative indices from the back, OneHot-9 maps them "
                     "to off_value; the indices are not constant and non-negative")


# ------------------------------------------------------------------ BatchNormalization


@at(6, "BatchNormalization")
def bn_consumed_inputs(st: Step) -> None:
    if not st.up and not st.has_attr("consumed_inputs"):
        st.set_attr("consumed_inputs", [0] * len(st.w.input))
        st.note("consumed_inputs (required at 1) written as all zeros: nothing updated "
                "in place")


def _single_output(st: Step, why: str) -> None:
    if len(st.outputs()) > 1:
        raise Refuse(f"outputs beyond Y are training outputs ({why})")


@at(7, "BatchNormalization", "Dropout")
def is_test(st: Step) -> None:
    if st.up:
        if st.attr("is_test", 0) != 1:
            raise Refuse("is_test=0 is training mode before opset 7; later versions are "
                         "inference only")
        st.del_attr("is_test")
        st.note("dropped is_test=1 (inference is the only mode from 7)")
        return
    if st.op == "BatchNormalization":
        _single_output(st, "inference only")
    st.set_attr("is_test", 1)
    st.note("is_test=1 written (the default 0 meant training mode)")


@at(14, "BatchNormalization")
def bn_training_mode(st: Step) -> None:
    if st.up:
        _single_output(st, "BatchNormalization-14 has them only with training_mode=1")
        return
    if st.attr("training_mode", 0) != 0:
        raise Refuse("training_mode=1 has no inference equivalent before 14")
    _single_output(st, "inference only")


# ------------------------------------------------------------------ Dropout


@at(12, "Dropout")
def dropout_inputs(st: Step) -> None:
    if st.up:
        ratio = st.attr("ratio")
        if ratio is not None:
            st.del_attr("ratio")
            r = st.add_const("ratio", np.array(ratio, np.float32))
            st.set_inputs([st.input(0), r])
            st.note("ratio attribute moved to the ratio input")
        return
    if st.input(2):
        tm = st.need_const(2, "training_mode")
        if bool(tm):
            raise Refuse("training_mode=True has no equivalent before 12")
    if st.input(1):
        ratio = st.need_const(1, "ratio")
        st.set_attr("ratio", float(ratio))
    st.set_inputs([st.input(0)])
    st.note("ratio/training_mode inputs folded into attributes")


# ------------------------------------------------------------------ attributes <-> inputs


def _attr_to_input(st: Step, attr: str, index: int, dtype=np.int64, scalar=False) -> bool:
    value = st.attr(attr)
    if value is None:
        return False
    st.del_attr(attr)
    arr = np.array(value, dtype)
    if not scalar:
        arr = arr.reshape(-1)
    c = st.add_const(attr, arr)
    inputs = list(st.w.input) + [""] * max(0, index + 1 - len(st.w.input))
    inputs[index] = c
    st.set_inputs(inputs)
    st.note(f"{attr} attribute moved to input {index}")
    return True


def _input_to_attr(st: Step, index: int, attr: str, *, as_int=True, scalar=False) -> bool:
    if not st.input(index):
        return False
    v = st.need_const(index, attr)
    if scalar:
        val = int(v.reshape(-1)[0]) if as_int else float(v.reshape(-1)[0])
        if v.size != 1:
            raise Refuse(f"{attr} has {v.size} values")
    else:
        val = [int(x) for x in v.reshape(-1)] if as_int else [float(x) for x in v.reshape(-1)]
    st.set_attr(attr, val)
    inputs = list(st.w.input)
    inputs[index] = ""
    st.set_inputs(inputs)
    st.note(f"input {index} folded into the {attr} attribute")
    return True


@at(5, "Reshape")
def reshape_shape(st: Step) -> None:
    if st.up:
        if not _attr_to_input(st, "shape", 1):
            raise Refuse("Reshape-1 without a shape attribute")
        return
    _input_to_attr(st, 1, "shape")


@at(14, "Reshape")
def reshape_allowzero(st: Step) -> None:
    if st.up or st.attr("allowzero", 0) == 0:
        return
    shape = st.need_const(1, "shape (allowzero=1)")
    if (shape == 0).any():
        raise Refuse("allowzero=1 with a 0 in the shape has no equivalent before 14")
    st.del_attr("allowzero")
    st.note("dropped allowzero=1: the shape has no zeros")


@at(13, "Unsqueeze", "Squeeze", "ReduceSum")
@at(18, "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare")
def axes_input(st: Step) -> None:
    reduce = st.op.startswith("Reduce")
    if st.up:
        _attr_to_input(st, "axes", 1)
        return
    noop = st.attr("noop_with_empty_axes", 0)
    if st.input(1):
        axes = st.need_const(1, "axes")
        if axes.size == 0 and reduce:
            st.set_inputs([st.input(0)])
        else:
            _input_to_attr(st, 1, "axes")
    elif noop and reduce:
        raise Refuse("noop_with_empty_axes=1 without axes (an identity) has no equivalent")
    if reduce and st.has_attr("noop_with_empty_axes"):
        if noop and not st.has_attr("axes"):
            raise Refuse("noop_with_empty_axes=1 with empty axes has no equivalent")
        st.del_attr("noop_with_empty_axes")


@at(2, "Split")
def split_v1(st: Step) -> None:
    if st.up:
        if st.input(1):
            _input_to_attr(st, 1, "split")
        if not st.has_attr("axis"):
            st.set_attr("axis", 0)


@at(13, "Split")
def split_input(st: Step) -> None:
    if st.up:
        _attr_to_input(st, "split", 1)
    else:
        _input_to_attr(st, 1, "split")


@at(18, "Split")
def split_num_outputs(st: Step) -> None:
    n = len(st.w.output)
    if st.up:
        if not st.input(1):
            st.set_attr("num_outputs", n)
            st.note(f"num_outputs={n} written (required without split from 18)")
        return
    if not st.has_attr("num_outputs"):
        return
    st.del_attr("num_outputs")
    if st.input(1):
        return
    s = st.shape(st.input(0))
    axis = st.attr("axis", 0)
    dim = None if s is None else s[_norm_axis(axis, len(s))]
    if not isinstance(dim, int) or dim <= 0:
        raise Refuse("num_outputs needs the size of the split dimension")
    if dim % n:
        size = -(-dim // n)
        sizes = [size] * (n - 1) + [dim - size * (n - 1)]
        c = st.add_const("split", np.array(sizes, np.int64))
        st.set_inputs([st.input(0), c])
        st.note(f"uneven num_outputs written as split={sizes}")


@at(6, "Clip")
def clip_unset_bounds(st: Step) -> None:
    if st.up:
        for name, v in (("min", -np.inf), ("max", np.inf)):
            if not st.has_attr(name):
                st.set_attr(name, float(v))
                st.note(f"unset {name} written as {v} (no bound)")


@at(11, "Clip")
def clip_inputs(st: Step) -> None:
    if st.up:
        t = st.elem_type(st.input(0))
        if t is None:
            raise Refuse("the element type of the input is unknown")
        inputs = [st.input(0), "", ""]
        for i, (name, d) in enumerate((("min", -FLT_MAX), ("max", FLT_MAX)), 1):
            if not st.has_attr(name) and t == onnx.TensorProto.FLOAT16:
                continue  # +-FLT_MAX is +-inf in float16: no bound
            v = st.attr(name, d)
            if st.has_attr(name):
                st.del_attr(name)
            inputs[i] = st.add_const(name, np.array(v, _np_dtype(t)))
        st.set_inputs(inputs)
        st.note("min/max attributes moved to inputs")
        return
    for i, (name, d) in enumerate((("min", -np.inf), ("max", np.inf)), 1):
        if st.input(i):
            v = st.need_const(i, name)
            if v.size != 1 or float(np.float32(v.reshape(-1)[0])) != float(v.reshape(-1)[0]):
                raise Refuse(f"{name} {v!r} is not one float32 value")
            st.set_attr(name, float(v.reshape(-1)[0]))
        else:
            st.set_attr(name, float(d))
    st.set_inputs([st.input(0)])
    st.note("min/max inputs folded into attributes")


@at(2, "Pad")
def pad_paddings(st: Step) -> None:
    old, new = ("paddings", "pads") if st.up else ("pads", "paddings")
    v = st.attr(old)
    if v is not None:
        st.del_attr(old)
        st.set_attr(new, v)
        st.note(f"{old} renamed {new}")


@at(11, "Pad")
def pad_inputs(st: Step) -> None:
    if st.up:
        if not _attr_to_input(st, "pads", 1):
            raise Refuse("Pad-2 without pads")
        value = st.attr("value", 0.0)
        if st.has_attr("value"):
            st.del_attr("value")
        if value != 0.0:
            t = st.elem_type(st.input(0))
            if t is None:
                raise Refuse("the element type of the input is unknown")
            c = st.add_const("constant_value", np.array(value, _np_dtype(t)))
            st.set_inputs([st.input(0), st.input(1), c])
        return
    _input_to_attr(st, 1, "pads")
    if st.input(2):
        v = st.need_const(2, "constant_value")
        x = float(v.reshape(-1)[0])
        if float(np.float32(x)) != x:
            raise Refuse(f"constant_value {x} is not a float32")
        st.set_attr("value", x)
        st.set_inputs([st.input(0)])


@at(19, "Pad")
def pad_wrap(st: Step) -> None:
    if not st.up and st.attr("mode", b"constant") in (b"wrap", "wrap"):
        raise Refuse("mode 'wrap' exists only from Pad-19")


@at(10, "Slice")
def slice_inputs(st: Step) -> None:
    if st.up:
        for i, name in enumerate(("starts", "ends", "axes"), 1):
            _attr_to_input(st, name, i)
        return
    if st.input(4):
        steps = st.need_const(4, "steps")
        if (steps != 1).any():
            raise Refuse(f"steps {steps.tolist()} exist only from Slice-10")
    for i, name in ((3, "axes"), (2, "ends"), (1, "starts")):
        _input_to_attr(st, i, name)


@at(10, "TopK")
def topk_k(st: Step) -> None:
    if st.up:
        _attr_to_input(st, "k", 1)
    else:
        _input_to_attr(st, 1, "k", scalar=True)


@at(4, "Concat")
def concat_axis(st: Step) -> None:
    if st.up and not st.has_attr("axis"):
        st.set_attr("axis", 1)
        st.note("axis=1 (Concat-1's documented default) written; required from 4")


@at(6, "Cast")
def cast_to(st: Step) -> None:
    to = st.attr("to")
    if st.up and isinstance(to, bytes | str):
        name = to.decode() if isinstance(to, bytes) else to
        try:
            st.set_attr("to", onnx.TensorProto.DataType.Value(name.upper()))
        except ValueError:
            raise Refuse(f"unknown Cast-1 type {name!r}") from None
    elif not st.up and isinstance(to, int):
        st.set_attr("to", onnx.TensorProto.DataType.Name(to))
    st.note("to converted between type name and enum")


@at(12, "Constant")
def constant_value_attrs(st: Step) -> None:
    if st.up:
        return
    for a in st.w.attribute:
        if a.name.startswith("value_"):
            v = onnx.helper.get_attribute_value(a)
            if a.name in ("value_string", "value_strings"):
                arr = np.array(v, dtype=object)
            else:
                arr = np.array(v, np.float32 if "float" in a.name else np.int64)
            name = a.name
            st.del_attr(name)
            st.set_attr("value", onnx.numpy_helper.from_array(arr))
            st.note(f"{name} written as a value tensor")
            return


@at(9, "Constant")
def constant_as_initializer(st: Step) -> None:
    if st.up or st.scope.graph is None:
        return
    t = st.w.attribute[0].t if st.w.attribute and st.w.attribute[0].name == "value" else None
    if t is None or t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                    onnx.TensorProto.FLOAT16):
        return
    tensor = onnx.TensorProto()
    tensor.CopyFrom(t)
    tensor.name = st.w.output[0]
    st.conv.pending_inits.append((st.scope.graph, tensor, st.scope.owner is None))
    st.remove(f"{onnx.TensorProto.DataType.Name(t.data_type)} Constant (float types only "
              "before 9) turned into an initializer")


@at(11, "Constant")
def constant_sparse(st: Step) -> None:
    if not st.up and st.has_attr("sparse_value"):
        raise Refuse("sparse_value exists only from Constant-11")


@at(2, "LpPool", "GlobalLpPool")
def lp_p(st: Step) -> None:
    p = st.attr("p")
    if p is None:
        return
    if st.up:
        if float(p) != int(p):
            raise Refuse(f"p={p} is not an integer")
        st.set_attr("p", int(p))
    else:
        st.set_attr("p", float(p))


@at(7, "AveragePool")
def avgpool_count_include_pad(st: Step) -> None:
    if st.up or not st.attr("count_include_pad", 0):
        return
    pads = st.attr("pads", [])
    auto_pad = st.attr("auto_pad", b"NOTSET")
    if any(pads) or auto_pad not in (b"NOTSET", b"VALID", "NOTSET", "VALID"):
        raise Refuse("count_include_pad=1 with padding exists only from AveragePool-7")
    st.del_attr("count_include_pad")
    st.note("dropped count_include_pad=1: there is no padding")


@at(10, "MaxPool")
@at(19, "AveragePool")
@at(18, "LpPool")
def pool_dilations(st: Step) -> None:
    if st.up or not st.has_attr("dilations"):
        return
    d = st.attr("dilations")
    if any(v != 1 for v in d):
        raise Refuse(f"dilations={d} exist only from {st.op}-{st.hi}")
    st.del_attr("dilations")
    st.note("dropped dilations of all ones (the default)")


@at(22, "MaxPool", "AveragePool", "LpPool")
def pool_ceil_windows(st: Step) -> None:
    # From 22, with ceil_mode a last window that would start in the right padding is dropped;
    # before 22 the output size formula kept it. Exact when no window starts there.
    if not st.attr("ceil_mode", 0):
        return
    if _s(st.attr("auto_pad", b"NOTSET")) != "NOTSET":
        raise Refuse("ceil_mode=1 with auto_pad")
    shape = st.shape(st.input(0))
    k = st.attr("kernel_shape")
    if shape is None or k is None or not all(isinstance(d, int) for d in shape[2:]):
        raise Refuse("ceil_mode=1 needs static spatial dims to tell whether a window starts "
                     "in the padding (dropped only from 22)")
    n = len(k)
    strides = st.attr("strides", [1] * n)
    dil = st.attr("dilations", [1] * n)
    pads = st.attr("pads", [0] * (2 * n))
    for i, size in enumerate(shape[2:]):
        span = dil[i] * (k[i] - 1) + 1
        out = -(-(size + pads[i] + pads[i + n] - span) // strides[i]) + 1
        if (out - 1) * strides[i] >= size + pads[i]:
            raise Refuse(f"with ceil_mode=1 the last window along spatial axis {i} starts in "
                         "the padding: kept before 22, dropped from 22")


@at(15, "Shape")
def shape_start_end(st: Step) -> None:
    if st.up:
        return
    start, end = st.attr("start", 0), st.attr("end")
    if start == 0 and end is None:
        return
    for name in ("start", "end"):
        if st.has_attr(name):
            st.del_attr(name)
    full = st.fresh_value("full")
    y = st.w.output[0]
    st.edit().output[0] = full
    st.conv.facts.extra_types[full] = onnx.TensorProto.INT64
    ends = [2**63 - 1 if end is None else end]
    if st.conv.target >= 10:
        starts_c = st.add_const("starts", np.array([start], np.int64))
        ends_c = st.add_const("ends", np.array(ends, np.int64))
        st.add_node("Slice", [full, starts_c, ends_c], "slice", after=True, output=y)
    else:
        st.add_node("Slice", [full], "slice", after=True, output=y, starts=[start], ends=ends)
    st.note(f"start={start}, end={end} written as a Slice of the whole shape")


@at(20, "GridSample")
def gridsample_mode(st: Step) -> None:
    names = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}
    if not st.up:
        names = {v: k for k, v in names.items()}
    mode = st.attr("mode", b"bilinear" if st.up else b"linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    st.set_attr("mode", names[mode])
    if not st.up and st.rank(st.input(0)) not in (None, 4):
        raise Refuse("GridSample-16 takes only 4-D inputs")


@at(3, "GRU")
def gru_direction(st: Step) -> None:
    if st.up and st.attr("direction", b"foward") in (b"foward", "foward"):
        st.set_attr("direction", "forward")


@at(16, "RoiAlign")
def roialign_mode(st: Step) -> None:
    if st.up:
        st.set_attr("coordinate_transformation_mode", "output_half_pixel")
        st.note("coordinate_transformation_mode='output_half_pixel' (RoiAlign-10's behaviour)")
        return
    mode = st.attr("coordinate_transformation_mode", b"half_pixel")
    if mode not in (b"output_half_pixel", "output_half_pixel"):
        raise Refuse(f"coordinate_transformation_mode={mode!r} does not exist at RoiAlign-10")
    st.del_attr("coordinate_transformation_mode")


@at(20, "DFT")
def dft_axis(st: Step) -> None:
    if st.up:
        axis = st.attr("axis", 1)
        if st.has_attr("axis"):
            st.del_attr("axis")
        c = st.add_const("axis", np.array(axis, np.int64))
        st.set_inputs([st.input(0), st.input(1), c])
        return
    axis = int(st.need_const(2, "axis").reshape(-1)[0]) if st.input(2) else -2
    if axis < 0:
        axis += st.need_rank(st.input(0), "negative DFT axis")
    st.set_attr("axis", axis)
    st.set_inputs([st.input(0), st.input(1)])


def _s(v) -> str | None:
    return v.decode() if isinstance(v, bytes) else v


@at(11, "Resize")
def resize_10_11(st: Step) -> None:
    # Resize-10 samples asymmetrically (x_in = x_out / scale) and rounds nearest down.
    mode = _s(st.attr("mode", b"nearest"))
    if mode == "nearest":
        # Resize-10 does not say how nearest rounds when shrinking (onnxruntime takes ceil).
        scales = st.need_const(1 if st.up else 2, "scales of a nearest Resize")
        if (scales < 1).any():
            raise Refuse(f"nearest downsampling (scales {scales.tolist()}) rounds by no "
                         "rule Resize-10 states")
    if st.up:
        st.set_attr("coordinate_transformation_mode", "asymmetric")
        if mode == "nearest":
            st.set_attr("nearest_mode", "floor")
        roi = st.add_const("roi", np.zeros((0,), np.float32))
        st.set_inputs([st.input(0), roi, st.input(1)])
        st.note("Resize-10's asymmetric sampling (and floor rounding) written explicitly")
        return
    ctm = _s(st.attr("coordinate_transformation_mode", b"half_pixel"))
    nm = _s(st.attr("nearest_mode", b"round_prefer_floor"))
    if ctm != "asymmetric" or mode not in ("nearest", "linear") or (
            mode == "nearest" and nm != "floor"):
        raise Refuse(f"mode={mode!r}, coordinate_transformation_mode={ctm!r}, "
                     f"nearest_mode={nm!r}: Resize-10 samples only asymmetrically with "
                     "floor rounding")
    if st.input(3):
        raise Refuse("sizes exist only from Resize-11")
    scales = st.need_const(2, "scales")
    if scales.size == 0:
        raise Refuse("empty scales")
    for name in ("coordinate_transformation_mode", "nearest_mode"):
        if st.has_attr(name):
            st.del_attr(name)
    st.set_inputs([st.input(0), st.input(2)])
    st.note("asymmetric sampling is Resize-10's own")


@at(13, "Resize")
def resize_optional_inputs(st: Step) -> None:
    if st.up:
        mode = st.attr("coordinate_transformation_mode", b"half_pixel")
        if mode in (b"tf_half_pixel_for_nn", "tf_half_pixel_for_nn"):
            raise Refuse("tf_half_pixel_for_nn does not exist from Resize-13")
        return
    inputs = [st.input(i) for i in range(4)]
    if not inputs[1]:
        inputs[1] = st.add_const("roi", np.zeros((0,), np.float32))
    if not inputs[2]:
        inputs[2] = st.add_const("scales", np.zeros((0,), np.float32))
    st.set_inputs(inputs)


@at(19, "Resize")
def resize_symmetric(st: Step) -> None:
    mode = st.attr("coordinate_transformation_mode", b"half_pixel")
    if not st.up and mode in (b"half_pixel_symmetric", "half_pixel_symmetric"):
        raise Refuse("half_pixel_symmetric exists only from Resize-19")


@at(13, "QuantizeLinear", "DequantizeLinear")
def quant_per_axis(st: Step) -> None:
    if st.up:
        return
    s = st.shape(st.input(1))
    if s is None or len(s) != 0 and not (len(s) == 1 and s[0] == 1):
        raise Refuse(f"scale of shape {s}: per-axis scales exist only from 13")


@at(18, "ScatterND", "ScatterElements")
def scatter_min_max(st: Step) -> None:
    red = st.attr("reduction", b"none")
    if not st.up and red in (b"min", b"max", "min", "max"):
        raise Refuse(f"reduction={red!r} exists only from {st.op}-18")


@at(7, "Upsample")
def upsample_height_width(st: Step) -> None:
    if st.up:
        h, w = st.attr("height_scale"), st.attr("width_scale")
        if h is None or w is None:
            raise Refuse("Upsample-1 without height_scale/width_scale")
        st.del_attr("height_scale")
        st.del_attr("width_scale")
        st.set_attr("scales", [1.0, 1.0, float(h), float(w)])
        st.note("height_scale/width_scale written as scales (NCHW)")
        return
    scales = st.attr("scales")
    if scales is None or len(scales) != 4 or scales[0] != 1 or scales[1] != 1:
        raise Refuse(f"scales={scales}: Upsample-1 scales only H and W of NCHW inputs")
    st.del_attr("scales")
    st.set_attr("height_scale", float(scales[2]))
    st.set_attr("width_scale", float(scales[3]))


@at(9, "Upsample")
def upsample_scales_input(st: Step) -> None:
    if st.up:
        _attr_to_input(st, "scales", 1, dtype=np.float32)
    else:
        _input_to_attr(st, 1, "scales", as_int=False)


@at(9, "Scan")
def scan_8_9(st: Step) -> None:
    raise Refuse("Scan-8 and Scan-9 take different inputs (batch axis, sequence_lens)")


@at(21, "GroupNormalization")
def groupnorm_scale(st: Step) -> None:
    raise Refuse("scale and bias are per group at 18 and per channel at 21")


# ------------------------------------------------------------------ ops missing at the target


def _decomposes(op: str) -> Callable[[Adapter], Adapter]:
    def deco(fn: Adapter) -> Adapter:
        DECOMPOSE[op] = fn
        return fn
    return deco


@_decomposes("CastLike")
def castlike_as_cast(st: Step) -> None:
    to = st.elem_type(st.input(1))
    src = st.elem_type(st.input(0))
    if to is None or src is None:
        raise Refuse("the element types of its inputs are unknown")
    target = st.conv.target
    cast_v = opsets.since_version("Cast", target)
    for param, t in (("T1", src), ("T2", to)):
        ts = f"tensor({opsets.tensor_type_name(t)})"
        if ts not in opsets.allowed_types("Cast", cast_v, param=param):
            raise Refuse(f"Cast-{cast_v} does not take {ts}")
    st.add_node("Cast", [st.input(0)], "cast", output=st.w.output[0],
                to=to if target >= 6 else onnx.TensorProto.DataType.Name(to))
    st.remove(f"CastLike written as Cast(to={onnx.TensorProto.DataType.Name(to)})")
