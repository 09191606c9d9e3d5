"""Attributes that became inputs (or back): the value moves between the two forms, refused
when an input that must become an attribute is not a constant.

Reshape **5** (shape), **14** (allowzero); Unsqueeze/Squeeze/ReduceSum **13** and the other
Reduce ops **18** (axes, noop_with_empty_axes: without axes an Identity down; Squeeze's and
Unsqueeze's axes written sorted); Split **2**, **13**, **18** (split, num_outputs); Clip
**6** (unset bounds), **11** (min/max; min > max as both max); Pad **2** (paddings -> pads),
**11** (pads/value); Slice **10** (below: what Slice-1 cannot take a Gather,
:mod:`.slice_bounds`); TopK **10** (k); DFT **20** (axis, default 1 vs -2).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from opshift import opsets
from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step, norm_axis, np_dtype
from opshift.convert.steps.pad_computed import pad_at_run_time
from opshift.convert.steps.slice_bounds import slice_below_10
from opshift.graph.shape_rules import broadcast

FLT_MAX = float(np.finfo(np.float32).max)


def attr_to_input(st: Step, attr: str, index: int, dtype=np.int64, scalar=False) -> bool:
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


def input_to_attr(st: Step, index: int, attr: str, *, as_int=True, scalar=False) -> bool:
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
        if not attr_to_input(st, "shape", 1):
            raise Refuse("Reshape-1 without a shape attribute")
        return
    input_to_attr(st, 1, "shape")


@at(14, "Reshape")
def reshape_allowzero(st: Step) -> None:
    """allowzero=1 reads a 0 in the shape as a dim of 0, Reshape-13 as X's dim: dropped where
    the shape holds no 0, or (a computed shape) where it holds a -1 for sure, which
    allowzero=1 forbids beside a 0 (an exporter's ``[batch, -1, 1024]``). A computed shape
    that is a Concat of constants without 0 or -1 and of one computed element (the batch
    size an exporter reads from X, ``[batch, 4, 256]``) is read with that element's 0 as -1:
    the dim is then the only one inferred, 0 for an empty X as with allowzero=1."""
    if st.up or st.attr("allowzero", 0) == 0:
        return
    if st.const(st.input(1)) is None:
        pieces = _concat_pieces(st, st.input(1))
        if pieces is not None and any(v is not None and (v == -1).any() for _, v in pieces):
            st.del_attr("allowzero")
            st.note("dropped allowzero=1: the computed shape holds a constant -1, beside "
                    "which allowzero=1 allows no 0")
            return
        length = _length_with_one_unknown(st, pieces) if pieces is not None else None
        if length is not None and st.target >= 6:  # (integer Sub from 6)
            shape = st.input(1)
            zero = st.add_const("zero", np.zeros(length, np.int64))  # (no broadcast below 7)
            st.set_inputs([st.input(0), st.add_node("Sub", [shape, st.add_cast(
                st.add_node("Equal", [shape, zero], "zero_dim"), TensorProto.INT64,
                "is_zero")], "zero_as_inferred")])
            st.del_attr("allowzero")
            st.note("dropped allowzero=1: the shape's one computed element is read as -1 where "
                    "it is 0 (inferred: 0 for an empty X)")
            return
    if st.const(st.input(1)) is None and _computed_zeros_form(st):
        return
    shape = st.need_const(1, "shape (allowzero=1)")
    if (shape == 0).any():
        raise Refuse("allowzero=1 with a 0 in the shape has no equivalent before 14")
    st.del_attr("allowzero")
    st.note("dropped allowzero=1: the shape has no zeros")


def _computed_zeros_form(st: Step) -> bool:
    """allowzero=1 with a computed shape s of known length r, from opset 9: where s holds a
    0, X must be empty (else the original fails) and the output is empty of shape s, which
    Reshape-13 cannot name (its 0 copies X's dim); so X is reshaped to s with its first 0
    read as -1 (0 elements) and its other 0s as 1, then expanded to s with each 0 put back:
    ``Expand(Reshape(X, safe), Where(s == 0, 0, Shape(R)))``. Where s holds no 0, ``safe``
    is s and the Expand a copy to R's own shape: bit for bit the Reshape. Returns whether it
    was written."""
    s = st.input(1)
    shape = st.shape(s)
    if st.target < 9 or shape is None or len(shape) != 1 or not isinstance(shape[0], int):
        return False
    r = shape[0]
    i64 = TensorProto.INT64
    zeros = st.add_const("zeros", np.zeros(r, np.int64))
    is_zero = st.add_node("Equal", [s, zeros], "is_zero")
    # (ArgMax takes no bool; the first of equal maxima is its answer)
    first = st.add_node("ArgMax", [st.add_cast(is_zero, TensorProto.INT32, "is_zero_int")],
                        "first_zero", axis=0, keepdims=1)
    st.facts.extra_types[first] = i64
    at_first = st.add_node("And", [is_zero, st.add_node(
        "Equal", [st.add_const("positions", np.arange(r, dtype=np.int64)), first],
        "at_first_zero")], "first_zero_only")
    others = st.add_node("Where", [is_zero, st.add_const("ones", np.ones(r, np.int64)), s],
                         "zeros_as_ones")
    safe = st.add_node("Where", [at_first, st.add_const("minus_one", np.full(r, -1, np.int64)),
                                 others], "safe_shape")
    x, y = st.input(0), st.w.output[0]
    st.set_inputs([x, safe])
    st.del_attr("allowzero")
    reshaped = st.fresh_value("reshaped", like=x)
    st.edit().output[0] = reshaped
    dims = st.add_node("Shape", [reshaped], "reshaped_shape", after=True)
    st.facts.extra_types[dims] = i64
    target = st.add_node("Where", [is_zero, zeros, dims], "shape_with_zeros", after=True)
    st.add_node("Expand", [reshaped, target], "expanded", after=True, output=y)
    st.note("allowzero=1 of a computed shape written as Reshape(X, the shape with its first 0 "
            "as -1 and the others as 1) expanded to the shape with its 0s put back",
            "where the shape holds a 0, allowzero=1 makes an empty output of that shape, "
            "which Reshape-13 cannot name; where it holds none, the Expand is a copy")
    return True


def _concat_pieces(st: Step, name: str) -> list[tuple[str, np.ndarray | None]] | None:
    """The inputs of ``name``'s producer, a Concat (default domain), each with its value
    (None for a computed one); None when ``name`` is no such Concat's output."""
    found = st.facts.producer(name, st.scope.root.function)
    if found is None or found[0].op_type != "Concat" or opsets.normalize_domain(found[0].domain):
        return None
    return [(i, st.const(i)) for i in found[0].input if i]


def _length_with_one_unknown(st: Step, pieces: list[tuple[str, np.ndarray | None]]
                             ) -> int | None:
    """The number of elements the Concat's inputs (``pieces``, see :func:`_concat_pieces`)
    hold when exactly one of them is not a constant and no constant is 0 (a computed input
    of 1-D shape ``[n]`` counts n), else None."""
    unknown = known = 0
    for name, v in pieces:
        if v is not None:
            if (v == 0).any():
                return None
            known += v.size
            continue
        s = st.shape(name)
        if s is None or len(s) != 1 or not isinstance(s[0], int):
            return None
        unknown += s[0]
    return known + unknown if unknown == 1 else None


@at(13, "Unsqueeze", "Squeeze", "ReduceSum")
@at(18, "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare")
def axes_input(st: Step) -> None:
    reduce = st.op.startswith("Reduce")
    if st.up:
        attr_to_input(st, "axes", 1)
        return
    noop = st.attr("noop_with_empty_axes", 0)
    if reduce and noop and (not st.input(1) or st.need_const(1, "axes").size == 0):
        x, y = st.input(0), st.w.output[0]
        st.set_inputs([x])
        st.add_node("Identity", [x], "same", output=y)
        st.remove("noop_with_empty_axes=1 without axes written as Identity",
                  "it reduces nothing: the output is the input")
        return
    if st.input(1):
        axes = st.need_const(1, "axes")
        if axes.size == 0 and reduce:
            st.set_inputs([st.input(0)])
        else:
            input_to_attr(st, 1, "axes")
            if not reduce:
                sort_axes(st)
    if reduce and st.has_attr("noop_with_empty_axes"):
        st.del_attr("noop_with_empty_axes")


def sort_axes(st: Step) -> None:
    """Write Squeeze's or Unsqueeze's axes attribute in increasing order: the op reads them
    as a set (Unsqueeze's as positions in its output), and onnx's shape inference of
    Squeeze-1 walks them as sorted. Negative axes, where the rank is known, are ordered by
    the axis they name (the rank of X for Squeeze, of Y for Unsqueeze)."""
    axes = st.attr("axes")
    ref = st.input(0) if st.op == "Squeeze" else st.w.output[0]
    rank = st.rank(ref)
    if rank is None:
        rank = 0 if all(a >= 0 for a in axes) or all(a < 0 for a in axes) else None
    if rank is None:
        return  # (mixed signs of unknown rank: Squeeze-11 and up read any order)
    new = sorted(axes, key=lambda a: a + rank if a < 0 else a)
    if new != list(axes):
        st.set_attr("axes", new)
        st.note(f"axes {list(axes)} written sorted, as {new}",
                "onnx's shape inference of Squeeze-1 reads them in order")


@at(2, "Split")
def split_v1(st: Step) -> None:
    if st.up:
        if st.input(1):
            input_to_attr(st, 1, "split")
        if not st.has_attr("axis"):
            st.set_attr("axis", 0)


@at(13, "Split")
def split_input(st: Step) -> None:
    if st.up:
        attr_to_input(st, "split", 1)
    else:
        input_to_attr(st, 1, "split")


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
    dim = None if s is None else s[norm_axis(axis, len(s))]
    if not isinstance(dim, int) and st.target >= 13:
        _computed_split(st, n, axis if s is None else norm_axis(axis, len(s)))
        return
    if not isinstance(dim, int) or dim <= 0:
        raise Refuse("num_outputs needs the size of the split dimension" + (
            "" if isinstance(dim, int) else " (below opset 13 split is an attribute, a constant)"))
    if dim % n:
        size = -(-dim // n)
        sizes = [size] * (n - 1) + [dim - size * (n - 1)]
        c = st.add_const("split", np.array(sizes, np.int64))
        st.set_inputs([st.input(0), c])
        st.note(f"uneven num_outputs written as split={sizes}")


def _computed_split(st: Step, n: int, axis: int) -> None:
    """Split-18's ``num_outputs`` on a dimension of unknown size d, as Split-13's ``split``
    computed from X's shape: n - 1 parts of ceil(d / n), the rest last (a negative axis is
    read by Gather from the back, as from opset 11)."""
    i64 = np.int64
    d = st.size_at_run_time(st.input(0), axis, "size", rank1=True)
    part = st.add_node("Div", [st.add_node("Add", [d, st.add_const("round_up", np.array(
        [n - 1], i64))], "size_up"), st.add_const("parts", np.array([n], i64))], "part")
    rest = st.add_node("Sub", [d, st.add_node("Mul", [part, st.add_const("others", np.array(
        [n - 1], i64))], "others_size")], "last")
    st.set_inputs([st.input(0), st.add_node("Concat", [part] * (n - 1) + [rest], "split",
                                            axis=0)])
    st.note(f"num_outputs={n} written as split = ceil(d / {n}) for all but the last part, "
            "d the split dimension read from X's shape at run time")


@at(6, "Clip")
def clip_unset_bounds(st: Step) -> None:
    if st.up:
        for name, v in (("min", -np.inf), ("max", np.inf)):
            if not st.has_attr(name):
                st.set_attr(name, float(v))
                st.note(f"unset {name} written as {v} (no bound)")


@at(11, "Clip")
def clip_inputs(st: Step) -> None:
    """Clip-6's unset bounds are its float attributes' defaults, +-FLT_MAX, compared in X's
    type (in float16 that is +-inf: no bound); Clip-11's omitted bounds are X's type's own
    lowest/largest finite values (float16 +-65504). Each is written out explicitly."""
    t = st.elem_type(st.input(0))
    if t is None:
        raise Refuse("the element type of the input is unknown (an omitted bound depends "
                     "on it)")
    dtype = np_dtype(t)
    if st.up:
        inputs = [st.input(0), "", ""]
        for i, (name, sign) in enumerate((("min", -1), ("max", 1)), 1):
            v = st.attr(name, sign * FLT_MAX)
            if st.has_attr(name):
                st.del_attr(name)
            with np.errstate(over="ignore"):  # as Clip-6 compares: FLT_MAX in float16 is inf
                inputs[i] = st.add_const(name, np.array(v, dtype))
        st.set_inputs(inputs)
        st.note("min/max attributes moved to inputs")
        return
    if st.target >= 7 and any(st.input(i) and st.const(st.input(i)) is None for i in (1, 2)):
        _clip_as_where(st, dtype)
        return
    bounds: list[float] = []
    for i, (name, sign) in enumerate((("min", -1), ("max", 1)), 1):
        if st.input(i):
            v = st.need_const(i, name)
            if v.size != 1 or float(np.float32(v.reshape(-1)[0])) != float(v.reshape(-1)[0]):
                raise Refuse(f"{name} {v!r} is not one float32 value")
            bounds.append(float(v.reshape(-1)[0]))
            continue
        limit = sign * float(np.finfo(dtype).max)
        with np.errstate(over="ignore"):  # (double's limit is inf in float32)
            fits = float(np.float32(limit)) == limit
        if not fits:
            raise Refuse(f"its omitted {name} is {opsets.tensor_type_name(t)}'s {limit:g}, "
                         "which Clip-6's float attribute cannot hold")
        bounds.append(limit)
    lo, hi = bounds
    if lo > hi:
        _clip_past_max(st, hi)
        return
    st.set_attr("min", lo)
    st.set_attr("max", hi)
    st.set_inputs([st.input(0)])
    st.note("min/max inputs folded into attributes (an omitted one as the type's limit)")


def _clip_past_max(st: Step, hi: float) -> None:
    """Clip-11 with constant bounds min > max gives max wherever x is not NaN (it clamps to
    min, then to max), and x's NaN where it is; Clip-6 gives the same with both bounds max
    (onnxruntime refuses a Clip-6 whose min is above its max). Such a Clip keeps an x equal
    to the bound, though, a zero of the other sign at a bound of zero: there, from 7,
    ``Where(IsNaN(x), x, max)`` (no arithmetic: ``z + 0``, which would give a zero the
    bound's sign, is what onnxruntime's optimizer drops as a no-op)."""
    x, y, t = st.input(0), st.w.output[0], st.elem_type(st.input(0))
    why = "Clip-6 with min > max is refused by onnxruntime"
    if hi != 0.0:
        st.set_attr("min", hi)
        st.set_attr("max", hi)
        st.set_inputs([x])
        st.note(f"min above max: written as min = max = {hi:g} (max wherever x is not NaN)",
                why)
        return
    if st.target < 7:
        raise Refuse(f"min above a max of {hi!r}: Clip-6 would keep x's zeros of the other "
                     "sign, and below opset 7 Where is not written")
    bound = st.add_const("max", np.array(hi, np_dtype(t)))
    nan = (st.add_node("IsNaN", [x], "nan") if st.target >= 9 else
           st.add_node("Not", [st.not_nan(x, "x")], "nan"))
    st.facts.extra_shapes[nan] = st.shape(x)
    if st.target >= 9:
        st.add_node("Where", [nan, x, bound], "past_max", output=y)
    else:
        st.written_at(9, "Where", [nan, x, bound], "past_max", t, output=y)
    st.set_inputs([x])
    st.remove(f"min above a max of {hi!r}: written as Where(IsNaN(x), x, {hi!r})", why)


def _clip_as_where(st: Step, dtype: np.dtype) -> None:
    """A bound computed at run time has no attribute to go to: Clip-11 is then, bound by
    bound (min first, as it clamps), ``Where(x < min or IsNaN(min), min, x)`` (``>`` for
    max), an omitted bound the type's own limit; at 7 and 8 each Where and IsNaN as written
    below 9 (a Gather of both values; ``not (min < inf or min > -inf)``). Clip keeps x where
    it equals the bound (-0.0 at a bound of +0.0 too), which the Where says; Max and Min give
    either of two equal values, depending on the runtime and even the type."""
    info, y = np.finfo(dtype), st.input(0)
    out, t = st.w.output[0], st.elem_type(y)
    for i, test, name, limit in ((1, "Less", "min", info.min), (2, "Greater", "max", info.max)):
        bound = st.input(i) or st.add_const(name, np.array(limit, dtype))
        past = st.add_node(test, [y, bound], f"past_{name}")
        value = st.const(bound)
        if value is None or np.isnan(value).any():
            nan = (st.add_node("IsNaN", [bound], f"{name}_nan") if st.target >= 9 else
                   st.add_node("Not", [st.not_nan(bound, name)], f"{name}_nan"))
            past = st.add_node("Or", [past, nan], f"past_or_nan_{name}")
        st.facts.extra_shapes[past] = broadcast([st.shape(y), st.shape(bound)])
        last = out if i == 2 else None
        y = (st.add_node("Where", [past, bound, y], f"{name}_bound", output=last)
             if st.target >= 9 else
             st.written_at(9, "Where", [past, bound, y], f"{name}_bound", t, output=last))
        st.facts.extra_shapes[y] = st.facts.extra_shapes[past]
    st.remove("Clip with a bound computed at run time written as Where(x < min, min, x), then "
              "Where(x > max, max, x) (an omitted bound: the type's limit)")


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
        if not attr_to_input(st, "pads", 1):
            raise Refuse("Pad-2 without pads")
        value = st.attr("value", 0.0)
        if st.has_attr("value"):
            st.del_attr("value")
        if value != 0.0:
            t = st.elem_type(st.input(0))
            if t is None:
                raise Refuse("the element type of the input is unknown")
            c = st.add_const("constant_value", np.array(value, np_dtype(t)))
            st.set_inputs([st.input(0), st.input(1), c])
        return
    if st.const(st.input(1)) is None and pad_at_run_time(st):
        return
    input_to_attr(st, 1, "pads")
    if st.input(2):
        v = st.need_const(2, "constant_value")
        x = float(v.reshape(-1)[0])
        if float(np.float32(x)) != x and not np.isnan(x):  # (NaN is a float32 too)
            raise Refuse(f"constant_value {x} is not a float32")
        st.set_attr("value", x)
        st.set_inputs([st.input(0)])


@at(18, "Pad")
def pad_axes(st: Step) -> None:
    """Pad-18's axes name the axes ``pads`` covers; before, pads covers every axis. Down,
    constant axes spread the pads over all axes, the others padded by 0: a constant pads is
    rewritten, a computed one read through a Gather of constant positions (0 from a zero
    appended to it)."""
    if st.up or not st.input(3):
        return
    axes = st.need_const(3, "axes").reshape(-1)
    rank = st.need_rank(st.input(0), "pads then covers every axis")
    if any(not -rank <= int(a) < rank for a in axes):
        raise Refuse(f"axes {axes.tolist()} do not fit rank {rank}")
    where = {int(a) % rank: i for i, a in enumerate(axes)}
    if len(where) != len(axes):
        raise Refuse(f"axes {axes.tolist()} repeat an axis")
    k = len(axes)
    pos = [where[d] + half * k if d in where else 2 * k for half in (0, 1)
           for d in range(rank)]
    pads = st.const(st.input(1))
    if pads is not None:
        full = np.append(pads.reshape(-1).astype(np.int64), 0)[pos]
        new = st.add_const("pads", full)
    else:
        zero = st.add_const("zero", np.zeros(1, np.int64))
        padded = st.add_node("Concat", [st.input(1), zero], "pads_and_zero", axis=0)
        new = st.add_node("Gather", [padded, st.add_const("positions", np.array(pos))],
                          "pads", axis=0)
    st.set_inputs([st.input(0), new, st.input(2)])
    st.note(f"pads of axes {axes.tolist()} spread over all {rank} axes")


@at(10, "Slice")
def slice_inputs(st: Step) -> None:
    if st.up:
        for i, name in enumerate(("starts", "ends", "axes"), 1):
            attr_to_input(st, name, i)
        return
    if slice_below_10(st):
        return
    for i, name in ((3, "axes"), (2, "ends"), (1, "starts")):
        input_to_attr(st, i, name)


@at(10, "TopK")
def topk_k(st: Step) -> None:
    if st.up:
        attr_to_input(st, "k", 1)
    else:
        input_to_attr(st, 1, "k", scalar=True)


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

