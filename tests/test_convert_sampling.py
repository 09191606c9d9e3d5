"""Resampling ops across versions (conversion/steps/sampling.py): Resize 10/11/13/18/19,
Upsample 1/7/9, GridSample's mode names, RoiAlign's coordinate mode."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, attrs, make_model, onnxruntime_outputs, vi
from convert_helpers import I64, F, convert, convert_other_ops, node, one, roundtrip, run_ort
from onnx import numpy_helper

from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def test_resize_steps():
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    m = make_model([one("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
                   [vi("x", F, [1, 1, 2, 2])], [vi("y", F, [1, 1, 4, 4])], opset=13,
                   initializers=[scales])
    roundtrip(m, 13, 11, {"x": x})
    assert m.graph.node[0].input[1]  # Resize-11 requires roi
    with pytest.raises(ConversionError, match=r"Resize-11 -> Resize-10.*asymmetric"):
        convert_other_ops(m, 11, 10)  # half_pixel sampling with round_prefer_floor
    m = make_model([one("Resize", ["x", "", "sc"], ["y"],
                        coordinate_transformation_mode="half_pixel_symmetric")],
                   [vi("x", F, [1, 1, 2, 2])], [vi("y", F, [1, 1, 4, 4])], opset=19,
                   initializers=[scales])
    with pytest.raises(ConversionError, match="half_pixel_symmetric"):
        convert_other_ops(m, 19, 18)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scale", [2.0, 1.5, 0.6])
def test_resize_10_and_11(mode, scale):
    x = np.random.default_rng(8).standard_normal((1, 2, 5, 4)).astype(np.float32)
    sc = numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "sc")
    m = make_model([one("Resize", ["x", "sc"], ["y"], mode=mode)], [vi("x", F, [1, 2, 5, 4])],
                   [vi("y", F, 4)], opset=10, initializers=[sc])
    if mode == "nearest" and scale < 1:
        with pytest.raises(ConversionError, match=r"Resize-10 -> 13.*nearest downsampling"):
            convert_other_ops(m, 10, 13)
        return
    roundtrip(m, 10, 13, {"x": x})
    a = attrs(m.graph.node[0])
    assert a["coordinate_transformation_mode"] == b"asymmetric"
    roundtrip(m, 13, 10, {"x": x})
    assert list(m.graph.node[0].input) == ["x", "sc"]


@pytest.mark.parametrize("case", ["scales", "scales_reversed", "sizes", "negative", "crop"])
def test_resize_axes_below_18_nearest(case):
    """Resize-18's axes written out for nearest mode: scale 1 (or the dim itself) and roi
    [0, 1] on the other axes select every element where it is: the same values, inf and NaN
    included; linear is refused."""
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    x[0, 0, 0, :2] = [np.inf, np.nan]
    kw = {"mode": "nearest"}
    roi, scales, sizes = "", "", ""
    inits = []
    if case in ("scales", "scales_reversed", "negative", "crop"):
        axes = {"scales": [2, 3], "scales_reversed": [3, 2], "negative": [-1],
                "crop": [2, 3]}[case]
        vals = {2: 2.0, 3: 1.5, -1: 3.0}
        inits.append(numpy_helper.from_array(np.array([vals[a] for a in axes], np.float32),
                                             "scales"))
        scales = "scales"
    else:
        axes = [3, 2]
        inits.append(numpy_helper.from_array(np.array([7, 6], np.int64), "sizes"))
        sizes = "sizes"
    if case == "crop":
        kw["coordinate_transformation_mode"] = "tf_crop_and_resize"
        inits.append(numpy_helper.from_array(np.array([0.2, 0.1, 0.9, 0.8], np.float32),
                                             "roi"))
        roi = "roi"
    m = make_model([one("Resize", ["x", roi, scales, sizes], ["y"], axes=axes, **kw)],
                   [vi("x", F, [2, 3, 4, 5])], [vi("y", F, 4)], opset=18, initializers=inits)
    want = evaluate(m, {"x": x})["y"]
    for target in (13, 11):
        c = onnx.ModelProto()
        c.CopyFrom(m)
        convert(c, 18, target)
        assert "axes" not in attrs(node(c, "Resize"))
        assert_exact(want, evaluate(c, {"x": x})["y"])
    before, after = onnxruntime_outputs(m, {"x": x}), onnxruntime_outputs(c, {"x": x})
    if not isinstance(before, str) and not isinstance(after, str):
        np.testing.assert_array_equal(after[0], before[0])
    linear = make_model([one("Resize", ["x", "", "scales"], ["y"], axes=[2, 3], mode="linear")],
                        [vi("x", F, [2, 3, 4, 5])], [vi("y", F, 4)], opset=18,
                        initializers=[numpy_helper.from_array(np.array([2.0, 2.0], np.float32),
                                                              "scales")])
    with pytest.raises(ConversionError, match="axes=.* mode='linear'"):
        convert(linear, 18, 13)


@pytest.mark.parametrize("old,new", [(None, "linear"), ("bicubic", "cubic"),
                                     ("nearest", "nearest")])
def test_gridsample_mode_names(old, new):
    rng = np.random.default_rng(6)
    feeds = {"x": rng.standard_normal((1, 1, 4, 4)).astype(np.float32),
             "g": rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)}
    kw = {} if old is None else {"mode": old}
    m = make_model([one("GridSample", ["x", "g"], ["y"], **kw)],
                   [vi("x", F, [1, 1, 4, 4]), vi("g", F, [1, 3, 3, 2])],
                   [vi("y", F, [1, 1, 3, 3])], opset=16)
    roundtrip(m, 16, 20, feeds)
    assert attrs(m.graph.node[0])["mode"] == new.encode()
    roundtrip(m, 20, 16, feeds)
    assert attrs(m.graph.node[0])["mode"] == (old or "bilinear").encode()


def test_roialign_coordinate_mode():
    m = make_model([one("RoiAlign", ["x", "rois", "bi"], ["y"])],
                   [vi("x", F, [1, 1, 4, 4]), vi("rois", F, [1, 4]),
                    vi("bi", I64, [1])], [vi("y", F, 4)], opset=10)
    feeds = {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4),
             "rois": np.array([[0.3, 0.2, 2.9, 3.1]], np.float32), "bi": np.array([0])}
    roundtrip(m, 10, 16, feeds)
    assert attrs(m.graph.node[0])["coordinate_transformation_mode"] == b"output_half_pixel"
    roundtrip(m, 16, 10, feeds)
    m = make_model([one("RoiAlign", ["x", "rois", "bi"], ["y"])],
                   [vi("x", F, [1, 1, 4, 4]), vi("rois", F, [1, 4]),
                    vi("bi", I64, [1])], [vi("y", F, 4)], opset=16)
    with pytest.raises(ConversionError, match=r"RoiAlign-16 -> RoiAlign-10.*half_pixel"):
        convert_other_ops(m, 16, 10)


def test_upsample_scales_forms():
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    sc = numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "sc")
    m = make_model([one("Upsample", ["x", "sc"], ["y"])], [vi("x", F, [1, 1, 2, 2])],
                   [vi("y", F, [1, 1, 4, 6])], opset=9, initializers=[sc])
    roundtrip(m, 9, 7, {"x": x})
    assert attrs(m.graph.node[0])["scales"] == [1.0, 1.0, 2.0, 3.0]
    convert(m, 7, 1)
    assert attrs(m.graph.node[0]) == {"height_scale": 2.0, "width_scale": 3.0}
    convert(m, 1, 9)
    np.testing.assert_array_equal(run_ort(m, {"x": x})[0],
                                  np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))
    convert_other_ops(m, 9, 10)  # deprecated at 10: Resize-10, the same op renamed
    assert [n.op_type for n in m.graph.node] == ["Resize"]


def test_upsample_1_bilinear_is_7s_linear():
    """Upsample-1 names linear sampling 'bilinear', which Upsample-7 does not accept."""
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    m = make_model([one("Upsample", ["x"], ["y"], mode="bilinear", height_scale=2.0,
                        width_scale=1.5)], [vi("x", F, [1, 1, 2, 3])], [vi("y", F, [1, 1, 4, 4])],
                   opset=5)
    roundtrip(m, 1, 7, {"x": x})
    assert attrs(m.graph.node[0]) == {"mode": b"linear", "scales": [1.0, 1.0, 2.0, 1.5]}
    convert(m, 7, 1)
    assert attrs(m.graph.node[0]) == {"mode": b"bilinear", "height_scale": 2.0,
                                      "width_scale": 1.5}
