"""What a differential fuzzer found (issue 38): conversions onnx's full check or onnxruntime
rejected, and conversions refused that have an exact form. Each converted model passes
``onnx.checker.check_model(full_check=True)``, computes the original's numbers on opshift's
evaluator, and loads and runs on onnxruntime with those numbers where onnxruntime runs the
opset (a second opinion)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, attrs, make_model, onnxruntime_outputs, op_types, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import opshift
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

#: onnxruntime's kernels start at opset 7: below, the second opinion is not asked
ORT_OPSET = 7


def _checked(model: onnx.ModelProto, target: int, feeds: dict[str, np.ndarray], *,
             own_rounding: bool = False) -> onnx.ModelProto:
    """``model`` converted to ``target``: it passes onnx's full check and gives the original's
    outputs on the evaluator, and on onnxruntime (from opset 7, where it has a kernel; else
    the test is skipped once all that is asserted). ``own_rounding``: onnxruntime's kernel
    of the op rounds otherwise than the spec's evaluation order, so the converted model's
    outputs there are compared with the original's there."""
    c = opshift.convert(model, target)
    assert c.opset_import[0].version == target
    onnx.checker.check_model(c, full_check=True)
    report = opshift.verify(model, c, feeds)
    assert report.ok, report
    if target < ORT_OPSET:
        pytest.skip(f"onnxruntime is not asked below opset {ORT_OPSET} (converted to {target})")
    want = evaluate(model, feeds)
    if own_rounding:
        original = onnxruntime_outputs(model, feeds)
        assert not isinstance(original, str), original
        want = {o.name: v for o, v in zip(model.graph.output, original)}
    theirs = onnxruntime_outputs(c, feeds)
    if isinstance(theirs, str) and "NOT_IMPLEMENTED" in theirs:
        pytest.skip(theirs)  # (no kernel for the op and type: onnxruntime's own limit)
    assert not isinstance(theirs, str), theirs
    for out, got in zip(c.graph.output, theirs):
        assert_exact(want[out.name], got, f"onnxruntime, output {out.name!r}")
    return c



# -- 4. Clip with min > max ----------------------------------------------------------------

CLIP_X = np.array([np.nan, -3, 0.0, -0.0, 0.5, 2, -np.inf, np.inf, 1, -1, 7, -7], np.float32)


def _clip(lo: float, hi: float, dtype=np.float32) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                      [vi("x", elem, [12])], [vi("y", elem, [12])], opset=13,
                      initializers=[numpy_helper.from_array(np.array(lo, dtype), "lo"),
                                    numpy_helper.from_array(np.array(hi, dtype), "hi")])


@pytest.mark.parametrize("target", [10, 9, 8, 7, 6])
@pytest.mark.parametrize("lo, hi", [(1.0, -1.0), (np.inf, 2.5), (1.0, -0.0), (3.0, 0.0)],
                         ids=["1_-1", "inf_2.5", "1_-0", "3_+0"])
def test_clip_min_above_max(lo, hi, target):
    m = _clip(lo, hi)
    want = evaluate(m, {"x": CLIP_X})["y"]
    # Clip-13's meaning: max wherever x is not NaN (the zero's sign the bound's), x's NaN there
    assert_exact(np.where(np.isnan(CLIP_X), CLIP_X, np.float32(hi)), want, "the original")
    if hi == 0.0 and target < 7:
        with pytest.raises(ConversionError, match=r"below opset 7 Where is not written"):
            opshift.convert(m, target)
        return
    c = _checked(m, target, {"x": CLIP_X})
    for n in c.graph.node:
        if n.op_type == "Clip":
            a = attrs(n)
            assert a["min"] <= a["max"], a


@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=["float16", "float64"])
def test_clip_min_above_max_other_float_types(dtype):
    m = _clip(4.0, -2.0, dtype)
    c = _checked(m, 10, {"x": CLIP_X.astype(dtype)})
    assert op_types(c) == ["Clip"] and attrs(c.graph.node[0]) == {"min": -2.0, "max": -2.0}


# -- 5. MeanVarianceNormalization without axes -----------------------------------------------

def _mvn(opset: int) -> onnx.ModelProto:
    return make_model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])],
                      [vi("x", T.FLOAT, [2, 3, 4, 5])], [vi("y", T.FLOAT, [2, 3, 4, 5])],
                      opset=opset)


@pytest.mark.parametrize("target", [13, 18, 21])
def test_mvn_default_axes_written_up(target):
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 5)).astype(np.float32)
    c = _checked(_mvn(9), target, {"x": x}, own_rounding=True)
    assert attrs(c.graph.node[0]) == {"axes": [0, 2, 3]}


@pytest.mark.parametrize("target", [12, 9])
def test_mvn_13_without_axes_down(target):
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 5)).astype(np.float32)
    c = _checked(_mvn(13), target, {"x": x}, own_rounding=True)
    assert op_types(c) == ["MeanVarianceNormalization"]


# -- 6. Squeeze/Unsqueeze axes folded unsorted -----------------------------------------------

@pytest.mark.parametrize("target", [12, 11, 10, 7])
@pytest.mark.parametrize("axes, written", [([3, 0], {12: [0, 3], 10: [0, 3]}),
                                           ([-1, 0], {12: [0, -1], 10: [0, 3]}),
                                           ([3, -4], {12: [-4, 3], 10: [0, 3]})],
                         ids=["3_0", "-1_0", "3_-4"])
@pytest.mark.parametrize("op", ["Squeeze", "Unsqueeze"])
def test_squeeze_axes_written_sorted(op, axes, written, target):
    small, big = [3, 4], [1, 3, 4, 1]
    shape_in, shape_out = (big, small) if op == "Squeeze" else (small, big)
    m = make_model([helper.make_node(op, ["x", "axes"], ["y"])],
                   [vi("x", T.FLOAT, shape_in)], [vi("y", T.FLOAT, shape_out)], opset=13,
                   initializers=[numpy_helper.from_array(np.array(axes, np.int64), "axes")])
    x = np.arange(12, dtype=np.float32).reshape(shape_in)
    c = opshift.convert(m, target)
    assert attrs(c.graph.node[0])["axes"] == written[12 if target >= 11 else 10]
    _checked(m, target, {"x": x})


def test_squeeze_1_unsorted_axes_sorted_down():
    m = make_model([helper.make_node("Squeeze", ["x"], ["y"], axes=[3, 0])],
                   [vi("x", T.FLOAT, [1, 3, 4, 1])], [vi("y", T.FLOAT, [3, 4])], opset=11)
    c = _checked(m, 10, {"x": np.arange(12, dtype=np.float32).reshape(1, 3, 4, 1)})
    assert attrs(c.graph.node[0])["axes"] == [0, 3]


# -- 7. Resize's unread optional inputs ------------------------------------------------------

RESIZE_X = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)


def _resize(*, sizes: bool, mode: str = "half_pixel", roi=(), sampling: str = "linear"
            ) -> onnx.ModelProto:
    """Resize-11 at IR 6 whose roi and scales are initializers also listed as graph inputs
    (defaults a caller may feed), empty but for the scales without sizes and ``roi``."""
    scales = [] if sizes else [1.0, 1.0, 2.0, 2.0]
    inits = [numpy_helper.from_array(np.array(roi, np.float32), "roi"),
             numpy_helper.from_array(np.array(scales, np.float32), "scales")]
    inputs = ["x", "roi", "scales"]
    if sizes:
        inits.append(numpy_helper.from_array(np.array([1, 1, 4, 6], np.int64), "sizes"))
        inputs.append("sizes")
    return make_model([helper.make_node("Resize", inputs, ["y"], mode=sampling,
                                        coordinate_transformation_mode=mode)],
                      [vi("x", T.FLOAT, [1, 1, 2, 3]), vi("roi", T.FLOAT, [len(roi)]),
                       vi("scales", T.FLOAT, [len(scales)])],
                      [vi("y", T.FLOAT, [1, 1, 4, 6])], opset=11, initializers=inits,
                      ir_version=6)


@pytest.mark.parametrize("target", [13, 18, 19])
def test_resize_empty_scales_beside_sizes_written_absent(target):
    c = _checked(_resize(sizes=True), target, {"x": RESIZE_X})
    assert list(c.graph.node[0].input) == ["x", "", "", "sizes"]
    assert [i.name for i in c.graph.input] == ["x", "roi", "scales"]  # (the interface stays)


def test_resize_roi_written_absent_where_unread():
    c = _checked(_resize(sizes=False), 13, {"x": RESIZE_X})
    assert list(c.graph.node[0].input) == ["x", "", "scales"]


def test_resize_roi_kept_for_tf_crop_and_resize():
    # (nearest: onnxruntime's linear weights round otherwise than the spec's in a crop)
    m = _resize(sizes=True, mode="tf_crop_and_resize", roi=[0, 0, 0.25, 0, 1, 1, 1, 0.75],
                sampling="nearest")
    c = _checked(m, 13, {"x": RESIZE_X})
    assert list(c.graph.node[0].input) == ["x", "roi", "", "sizes"]


# -- 8a. Reduce with noop_with_empty_axes=1 and no axes: an Identity --------------------------

REDUCE_X = np.array([[1.5, -0.0, np.nan], [np.inf, 2.0, -7.25]], np.float32)


@pytest.mark.parametrize("target", [12, 11, 7, 6])
@pytest.mark.parametrize("op, opset", [("ReduceSum", 13), ("ReduceMean", 18),
                                       ("ReduceMax", 18)])
@pytest.mark.parametrize("axes", [None, []], ids=["omitted", "empty"])
def test_reduce_noop_without_axes_is_identity(op, opset, axes, target):
    inputs = ["x"] if axes is None else ["x", "axes"]
    inits = [] if axes is None else [numpy_helper.from_array(np.array(axes, np.int64), "axes")]
    m = make_model([helper.make_node(op, inputs, ["y"], noop_with_empty_axes=1)],
                   [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])], opset=opset,
                   initializers=inits)
    assert_exact(REDUCE_X, evaluate(m, {"x": REDUCE_X})["y"], "the original")
    c = opshift.convert(m, target)
    assert op_types(c) == ["Identity"] and not c.graph.initializer
    _checked(m, target, {"x": REDUCE_X})


@pytest.mark.parametrize("target", [17, 12])
def test_reduce_noop_with_axes_still_reduces(target):
    m = make_model([helper.make_node("ReduceMean", ["x", "axes"], ["y"], noop_with_empty_axes=1)],
                   [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 1])], opset=18,
                   initializers=[numpy_helper.from_array(np.array([1], np.int64), "axes")])
    c = _checked(m, target, {"x": np.array([[1.5, -0.0, 3], [1, 2.0, -7.25]], np.float32)})
    assert op_types(c) == ["ReduceMean"] and attrs(c.graph.node[0]) == {"axes": [1]}


# -- 8b. Pad with a NaN constant_value ---------------------------------------------------------

@pytest.mark.parametrize("target", [10, 7, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64],
                         ids=["float32", "float16", "float64"])
def test_pad_nan_value_down(dtype, target):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([helper.make_node("Pad", ["x", "pads", "value"], ["y"])],
                   [vi("x", elem, [2, 3])], [vi("y", elem, [3, 5])], opset=18,
                   initializers=[numpy_helper.from_array(np.array([0, 1, 1, 1], np.int64),
                                                         "pads"),
                                 numpy_helper.from_array(np.array(np.nan, dtype), "value")])
    x = np.array([[1.5, -0.0, 3], [np.inf, 2.0, -7.25]], dtype)
    want = evaluate(m, {"x": x})["y"]
    assert np.isnan(want[:, 0]).all() and np.isnan(want[2]).all()
    c = _checked(m, target, {"x": x})
    assert op_types(c) == ["Pad"] and np.isnan(attrs(c.graph.node[0])["value"])


# -- 8c. per-axis QuantizeLinear whose zero point is shared --------------------------------

@pytest.mark.parametrize("target", [12, 10, 7])
@pytest.mark.parametrize("zero_point", [np.array([0, 128, 255], np.uint8),
                                        np.array([-128, 0, 127], np.int8)],
                         ids=["uint8", "int8"])
def test_per_axis_quantize_with_a_shared_zero_point(zero_point, target):
    """Two per-axis QuantizeLinear read one zero point: the zero point is reshaped for each as
    a copy, whose type gives the output's."""
    elem = helper.np_dtype_to_tensor_dtype(zero_point.dtype)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], [y], axis=1)
             for y in ("y", "y2")]
    m = make_model(nodes, [vi("x", T.FLOAT, [2, 3, 2])],
                   [vi("y", elem, [2, 3, 2]), vi("y2", elem, [2, 3, 2])], opset=13,
                   initializers=[numpy_helper.from_array(np.array([0.5, 2, 0.25], np.float32),
                                                         "s"),
                                 numpy_helper.from_array(zero_point, "z")])
    x = np.array([[[0.25, -1.5], [3.0, 1000.0], [-1000.0, np.nan]],
                  [[2.5, -2.5], [-0.0, 255.0], [31.875, -32.125]]], np.float32)
    c = _checked(m, target, {"x": x})
    assert "QuantizeLinear" not in op_types(c)
