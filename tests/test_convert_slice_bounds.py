"""Slice below 10 with bounds computed at run time or a step other than 1 on an axis of unknown
size, from opset 7: a Gather of the positions Slice-10 picks, computed from the bounds and the
axis's size (below 9 the positions a Loop's iteration numbers, the clamps in arithmetic).
Checked bit for bit against Slice-13 on the evaluator over negative, clamped and extreme
bounds and every step sign, onnxruntime beside it; below 7 refused, bounds computed from
constants left to the fold (the Slice stays). Constant steps on known axes below 10 are
Gathers of constant positions."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from conftest import assert_exact, converted, make_model, onnxruntime_session, vi
from convert_helpers import F, convert, one
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

BIG, SMALL = 2**63 - 1, -(2**63)
BOUNDS = [0, 1, 2, 4, 5, 9, -1, -2, -5, -9, BIG, SMALL]


def _slice(x_shape, steps: list[int] | None, axes=(1,), index=T.INT64) -> onnx.ModelProto:
    k, dtype = len(axes), helper.tensor_dtype_to_np_dtype(index)
    inits = [numpy_helper.from_array(np.array(axes, dtype), "axes")]
    ins = ["x", "s", "e", "axes"]
    if steps is not None:
        inits.append(numpy_helper.from_array(np.array(steps, dtype), "steps"))
        ins.append("steps")
    return make_model([helper.make_node("Slice", ins, ["y"], name="slice")],
                      [vi("x", T.FLOAT, x_shape), vi("s", index, [k]), vi("e", index, [k])],
                      [vi("y", T.FLOAT, len(x_shape))], opset=13, initializers=inits)


@pytest.mark.parametrize("target", [9, 7])
@pytest.mark.parametrize("step", [1, 2, 3, -1, -2])
@pytest.mark.parametrize("x_shape", [[3, 5], ["n", "m"]], ids=["static", "dynamic"])
def test_computed_bounds_pick_what_slice_10_picks(x_shape, step, target):
    m = _slice(x_shape, None if step == 1 else [step])
    c = converted(m, target)
    assert "Slice" not in {n.op_type for n in c.graph.node}
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    ort_run = onnxruntime_session(c)
    checked = 0
    for b, e in itertools.product(BOUNDS, BOUNDS):
        feeds = {"x": x, "s": np.array([b], np.int64), "e": np.array([e], np.int64)}
        want = evaluate(m, feeds)["y"]
        assert_exact(want, evaluate(c, feeds)["y"], f"[{b}:{e}:{step}]")
        if step > 0:  # (a negative step clamps a start before 0 to 0 where numpy stops)
            assert_exact(x[:, slice(b, e, step)], want, "numpy")
        ort = ort_run if isinstance(ort_run, str) else ort_run(feeds)
        if not isinstance(ort, str):
            assert_exact(want, ort[0], f"onnxruntime [{b}:{e}:{step}]")
        checked += 1
    assert checked == len(BOUNDS) ** 2


@pytest.mark.parametrize("step", [2, -1, -2])
def test_constant_bounds_with_a_step_pick_what_slice_10_picks(step):
    # a known size: the positions are a constant, clamped as Slice states (a start before 0
    # with a negative step is 0, where numpy's slice picks nothing)
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    for b, e in itertools.product(BOUNDS, BOUNDS):
        inits = [numpy_helper.from_array(np.array(v, np.int64), k)
                 for k, v in (("s", [b]), ("e", [e]), ("axes", [1]), ("steps", [step]))]
        m = make_model([helper.make_node("Slice", ["x", "s", "e", "axes", "steps"], ["y"],
                                         name="slice")],
                       [vi("x", T.FLOAT, [3, 5])], [vi("y", T.FLOAT, 2)], opset=13,
                       initializers=inits)
        c = converted(m, 9)
        assert "Slice" not in {n.op_type for n in c.graph.node}
        assert_exact(evaluate(m, {"x": x})["y"], evaluate(c, {"x": x})["y"], f"[{b}:{e}:{step}]")


@pytest.mark.parametrize("target", [9, 8])
def test_two_axes_int32_bounds_and_an_empty_axis(target):
    m = _slice(["a", "b", 4], [1, -1], axes=(2, 0), index=T.INT32)
    c = converted(m, target)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    empty = np.zeros((0, 3, 4), np.float32)
    for xv, s, e in [(x, [1, -1], [4, -3]), (x, [-2, 5], [-1, 0]), (x, [3, 0], [1, 1]),
                     (empty, [0, -1], [4, SMALL >> 32])]:
        feeds = {"x": xv, "s": np.array(s, np.int32), "e": np.array(e, np.int32)}
        want = evaluate(m, feeds)["y"]
        assert_exact(want, evaluate(c, feeds)["y"], f"{s} {e}")


def test_a_step_on_an_axis_of_unknown_size_with_constant_bounds():
    # PyTorch's flip: Slice(x, [-1], [INT64_MIN], [0], [-1]) on a dynamic axis
    inits = [numpy_helper.from_array(np.array([v], np.int64), k)
             for k, v in (("s", -1), ("e", SMALL), ("axes", 0), ("steps", -1))]
    m = make_model([helper.make_node("Slice", ["x", "s", "e", "axes", "steps"], ["y"],
                                     name="flip")],
                   [vi("x", T.FLOAT, ["n", 2])], [vi("y", T.FLOAT, 2)], opset=13,
                   initializers=inits)
    for target in (9, 7):
        c = converted(m, target)
        for n in (0, 1, 4):
            x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
            assert_exact(x[::-1], evaluate(c, {"x": x})["y"], f"n={n} at {target}")
    with pytest.raises(ConversionError, match=r"step -1 on axis 0, whose size is unknown"):
        convert_proto(m, 6)


def test_below_7_computed_bounds_are_refused_and_the_input_untouched():
    m = _slice([3, 5], None)
    before = m.SerializeToString()
    with pytest.raises(ConversionError, match=r"starts \(input 1, 's'\) is not a constant"):
        convert_proto(m, 6)
    assert m.SerializeToString() == before


def test_bounds_computed_from_constants_are_folded_and_the_slice_kept():
    # tf2onnx: starts and ends a Split of one initializer, concatenated (the fold takes the
    # Split once for both)
    init = numpy_helper.from_array(np.array([1, 4], np.int64), "bounds")
    nodes = [helper.make_node("Split", ["bounds"], ["lo", "hi"], name="split", axis=0),
             helper.make_node("Concat", ["lo", "hi"], ["both"], name="cat", axis=0),
             helper.make_node("Slice", ["x", "lo", "hi"], ["y"], name="slice"),
             helper.make_node("Pad", ["y", "both"], ["z"], name="pad")]
    m = make_model(nodes, [vi("x", T.FLOAT, ["n"])], [vi("z", T.FLOAT, 1)], opset=13,
                   initializers=[init])
    c = converted(m, 9)
    assert [n.op_type for n in c.graph.node] == ["Slice", "Pad"]
    x = np.arange(6, dtype=np.float32)
    assert_exact(evaluate(m, {"x": x})["z"], evaluate(c, {"x": x})["z"], "")


def test_computed_axes_are_refused():
    m = make_model([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="slice")],
                   [vi("x", T.FLOAT, [3, 5]), vi("s", T.INT64, [1]), vi("e", T.INT64, [1]),
                    vi("a", T.INT64, [1])], [vi("y", T.FLOAT, 2)], opset=13)
    with pytest.raises(ConversionError, match=r"axes \(input 3, 'a'\) is not a constant"):
        convert_proto(m, 9)


@pytest.mark.parametrize("starts,ends,axes,steps,ops", [
    ([-1], [-2**63], [1], [-1], ["Gather"]),  # reversed
    ([0, 5], [9, 0], [0, 2], [1, -2], ["Gather", "Slice"]),  # step 1 stays in the Slice
    ([1, 0, -1], [3, 5, -8], [0, 1, 2], [1, 2, -3], ["Gather", "Gather", "Slice"]),
    ([3], [0], [2], [-1], ["Gather"]),
    ([0], [9], [2], [5], ["Gather"]),
    ([2], [2], [1], [-1], ["Gather"]),  # empty
])
def test_slice_steps_below_10_are_gathers_of_known_axes(starts, ends, axes, steps, ops):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    consts = [numpy_helper.from_array(np.array(v, np.int64), k)
              for k, v in (("s", starts), ("e", ends), ("a", axes), ("p", steps))]
    want = evaluate(make_model([one("Slice", ["x", "s", "e", "a", "p"], ["y"])],
                               [vi("x", F, [2, 3, 4])], [vi("y", F, None)], opset=13,
                               initializers=consts), {"x": x})["y"]
    m = make_model([one("Slice", ["x", "s", "e", "a", "p"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, list(want.shape))], opset=13, initializers=consts)
    for target in (9, 1):
        c = onnx.ModelProto()
        c.CopyFrom(m)
        convert(c, 13, target)
        assert [n.op_type for n in c.graph.node] == ops
        np.testing.assert_array_equal(evaluate(c, {"x": x})["y"], want)
