"""Resize and Upsample: against onnx.reference's kernel on random cases (every mode,
coordinate transformation, nearest rounding, antialias, exclude_outside, scales or sizes,
aspect-ratio policies, axes, element types, versions 11-19), against the operator's formulas
where opshift reads them differently, onnx's node tests exactly, blocks and threads, errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_onnx_node_tests, init, make_model, run_onnxruntime
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate
from opshift.evaluator.kernels import kernels
from opshift.evaluator.ops import resize as resize_module


def _model(x_shape, dtype, opset, *, scales=None, sizes=None, roi=None, name="rs", **attrs):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inits, ins = [], ["x"]
    for key, value, kind in (("roi", roi, np.float32), ("scales", scales, np.float32),
                             ("sizes", sizes, np.int64)):
        if value is None:
            ins.append("")
        else:
            ins.append(key)
            inits.append(init(key, np.asarray(value, kind)))
    while ins[-1] == "":
        ins.pop()
    node = helper.make_node("Resize", ins, ["y"], name=name, **attrs)
    return make_model([node], [helper.make_tensor_value_info("x", elem, list(x_shape))],
                      [helper.make_tensor_value_info("y", elem, None)], opset=opset,
                      initializers=inits)


def _case(seed: int):
    """A random Resize node and input, within what opshift and onnx.reference both define the
    same way (see the module docstring of opshift.evaluator.ops.resize)."""
    rng = np.random.default_rng(seed)
    opset = int(rng.choice([11, 13, 18, 19]))
    mode = str(rng.choice(["nearest", "linear", "cubic"]))
    coords = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
              "tf_crop_and_resize"]
    coord = str(rng.choice(coords))
    if opset >= 19 and rng.random() < 0.4:
        coord = "half_pixel_symmetric"
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if mode == "nearest":
        attrs["nearest_mode"] = str(rng.choice(["round_prefer_floor", "round_prefer_ceil",
                                                "floor", "ceil"]))
    if mode == "cubic":
        attrs["cubic_coeff_a"] = float(rng.choice([-0.75, -0.5]))
    if rng.random() < 0.3:
        attrs["exclude_outside"] = 1
    if opset >= 18 and mode != "nearest" and rng.random() < 0.4:
        attrs["antialias"] = 1
    rank = int(rng.integers(1, 5))
    shape = [int(rng.integers(1, 7)) for _ in range(rank)]
    axes = list(range(rank))
    negative = []
    if opset >= 18 and rank > 1 and rng.random() < 0.4:
        axes = sorted(rng.choice(rank, int(rng.integers(1, rank + 1)), replace=False).tolist())
        attrs["axes"] = axes
        negative = [a - rank if rng.random() < 0.5 else a for a in axes]
    scales = sizes = roi = None
    if rng.random() < 0.5:
        scales = [float(rng.choice([0.5, 0.6, 0.75, 1.0, 1.5, 1.7, 2.0, 3.0])) for _ in axes]
    else:
        sizes = [int(rng.integers(2, 10)) for _ in axes]
        if opset >= 18 and rng.random() < 0.5:
            attrs["keep_aspect_ratio_policy"] = str(rng.choice(["not_larger", "not_smaller"]))
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        # eighths: their differences are exact in float32 (onnx.reference subtracts there)
        starts = rng.integers(-2, 5, len(axes)) / 8
        roi = np.concatenate([starts, starts + rng.integers(2, 10, len(axes)) / 8])
        attrs["extrapolation_value"] = float(rng.choice([0.0, -3.5]))
    dtype = rng.choice([np.float32, np.float64, np.uint8, np.int32, np.float16])
    x = rng.standard_normal(shape) * (60 if np.dtype(dtype).kind in "iu" else 3)
    x = (np.abs(x) if np.dtype(dtype).kind == "u" else x).astype(dtype)
    # onnx.reference's kernel cannot take negative axes: opshift's model names them so
    ours = _model(shape, dtype, opset, scales=scales, sizes=sizes, roi=roi,
                  **{**attrs, **({"axes": negative} if negative else {})})
    return ours, lambda t: _model(shape, t, opset, scales=scales, sizes=sizes, roi=roi,
                                  **attrs), x


@pytest.mark.parametrize("seed", range(160))
def test_matches_onnx_reference(seed):
    m, reference_model, x = _case(seed)
    got = evaluate(m, {"x": x})["y"]
    want = ReferenceEvaluator(reference_model(x.dtype)).run(None, {"x": x})[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in m.graph.node[0].attribute}
    coordinates = attrs["coordinate_transformation_mode"].decode()
    if 1 in want.shape and coordinates == "pytorch_half_pixel" and attrs["mode"] == b"cubic":
        # its formula maps a length-1 output to 0, onnx.reference to -0.5 (where nearest and
        # linear read the same value)
        pytest.skip("an output of length 1, pytorch_half_pixel")
    assert got.dtype == x.dtype and got.shape == want.shape
    # onnx.reference computes cubic weights in float32: cubic_coeff_a reaches them as a numpy
    # float32, which NumPy 2's promotion keeps (onnx's node tests, made with float64 weights,
    # are met exactly: test_onnx_node_tests_exactly); opshift's and its sums also differ in
    # order (axes, terms), so in float64 rounding
    slack = 2e-6 * float(np.abs(x).max()) if attrs["mode"] == b"cubic" else 1e-9
    if attrs["mode"] == b"nearest":
        np.testing.assert_array_equal(got, want)  # the same input positions
    elif x.dtype.kind in "iu":
        # rounded half to even: the same, but where the sum lies within that slack of a
        # half-way point
        exact = evaluate(reference_model(np.float64), {"x": x.astype(np.float64)})["y"]
        tie = np.abs(np.abs(exact - np.floor(exact)) - 0.5) < slack
        np.testing.assert_array_equal(np.where(tie, want, got), want)
        assert np.all(np.abs(got.astype(np.int64) - want) <= 1)
    else:  # within an ulp of X's type, or the slack
        g, w = got.astype(np.float64), want.astype(np.float64)
        ulp = np.spacing(np.abs(want)).astype(np.float64)
        assert np.all(np.abs(g - w) <= np.maximum(ulp, slack)), (g - w, ulp)


def test_onnx_node_tests_exactly():
    assert_onnx_node_tests("test_resize", "test_upsample", at_least=40)


@pytest.mark.parametrize("attrs", [
    {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    {"mode": "nearest"},
    {"mode": "linear"},
    {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
    {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
    {"mode": "cubic", "cubic_coeff_a": -0.5},
    {"mode": "linear", "antialias": 1},
])
def test_exporters_resizes_against_onnxruntime(attrs):
    """What exporters write (upsampling by 2, downsampling antialiased), onnxruntime as a
    second opinion: it computes in float32, so within a few float32 ulps."""
    x = np.random.default_rng(5).standard_normal((1, 8, 24, 20)).astype(np.float32)
    scales = [1, 1, 0.5, 0.5] if attrs.get("antialias") else [1, 1, 2, 2]
    m = _model(x.shape, np.float32, 19, scales=scales, **attrs)
    got = evaluate(m, {"x": x})["y"]
    (want,) = run_onnxruntime(m, {"x": x})
    assert got.shape == want.shape
    if attrs["mode"] == "nearest":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * float(np.abs(x).max()))


def test_nearest_copies_values_exactly():
    """Nearest selects one input position: -0.0, inf and NaN are copied as they are, and a
    neighbour's inf or NaN stays out (onnx.reference weights both neighbours, 1 and 0, so
    -0.0 becomes 0.0 and 0 x inf a NaN)."""
    x = np.float32([[-0.0, np.inf, 1.0, np.nan, -np.inf]])
    for opset, rule, picks in ((13, "round_prefer_floor", [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]),
                               (19, "round_prefer_ceil", [0, 1, 1, 2, 2, 3, 3, 4, 4, 4])):
        m = _model(x.shape, np.float32, opset, scales=[1, 2], mode="nearest",
                   coordinate_transformation_mode="asymmetric", nearest_mode=rule)
        y = evaluate(m, {"x": x})["y"]
        np.testing.assert_array_equal(y, x[:, picks])
        assert np.signbit(y[0, 0])


def test_linear_and_cubic_by_their_formulas():
    x = np.float64([[1.0, 2.0, 4.0, 8.0, 16.0]])
    m = _model(x.shape, np.float64, 13, scales=[1, 2], mode="linear")
    y = evaluate(m, {"x": x})["y"][0]
    src = (np.arange(10) + 0.5) / 2 - 0.5  # half_pixel
    lo = np.clip(np.floor(src), 0, 4).astype(int)
    hi = np.clip(np.floor(src) + 1, 0, 4).astype(int)
    r = src - np.floor(src)
    np.testing.assert_array_equal(y, (1 - r) * x[0, lo] + r * x[0, hi])
    a = -0.5
    m = _model(x.shape, np.float64, 13, scales=[1, 1.6], mode="cubic", cubic_coeff_a=a,
               coordinate_transformation_mode="asymmetric")
    y = evaluate(m, {"x": x})["y"][0]

    def keys(t):
        t = abs(t)
        if t <= 1:
            return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
        return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a if t < 2 else 0.0

    for i, s in enumerate(np.arange(8) / float(np.float32(1.6))):
        base = int(np.floor(s))
        want = sum(keys(s - j) * x[0, min(max(j, 0), 4)] for j in range(base - 1, base + 3))
        assert y[i] == pytest.approx(want, rel=1e-14), i


def test_pytorch_half_pixel_maps_a_length_1_output_to_0():
    x = np.float32([[[3.0, 5.0, 7.0, 11.0]]])
    m = _model(x.shape, np.float32, 13, sizes=[1, 1, 1], mode="cubic",
               coordinate_transformation_mode="pytorch_half_pixel")
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], np.float32([[[3.0]]]))


def test_tf_half_pixel_for_nn_of_resize_11():
    """onnx.reference has no such mode; Resize-11's formula: (x + 0.5) / scale."""
    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    m = _model(x.shape, np.float32, 11, roi=[], scales=[1, 0.5], mode="nearest",
               coordinate_transformation_mode="tf_half_pixel_for_nn")
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], np.float32([[1, 3, 5]]))


def test_resize_11_without_roi():
    x = np.float32([[1, 2]])
    m = _model(x.shape, np.float32, 11, scales=[1, 2], mode="nearest")
    assert m.graph.node[0].input[1] == ""  # required at 11, left out as models in use do
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], np.float32([[1, 1, 2, 2]]))


def test_only_resize_11_may_leave_a_required_input_out():
    """Resize-11 runs without its roi (and scales, given sizes), as models in use write it;
    another opshift kernel whose schema requires an input left out is refused before it
    runs (Gemm-9's C, which its kernel could take as absent: it is required at 9)."""
    x = np.float32([[1, 2]])
    m = _model(x.shape, np.float32, 11, sizes=[1, 4], mode="nearest")
    assert list(m.graph.node[0].input) == ["x", "", "", "sizes"]
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], np.float32([[1, 1, 2, 2]]))
    node = helper.make_node("Gemm", ["a", "b", ""], ["y"], name="gemm")
    g = make_model([node], [helper.make_tensor_value_info("a", 1, [1, 2]),
                            helper.make_tensor_value_info("b", 1, [2, 2])],
                   [helper.make_tensor_value_info("y", 1, None)], opset=9)
    with pytest.raises(EvaluationError, match=r"node 'gemm' \(Gemm-9.*required input 2 is "
                                              "missing"):
        evaluate(g, {"a": x, "b": np.eye(2, dtype=np.float32)})


def test_integers_round_half_to_even_and_clip():
    x = np.uint8([[0, 1, 2, 3, 255, 0]])
    m = _model(x.shape, np.uint8, 13, scales=[1, 2], mode="linear",
               coordinate_transformation_mode="align_corners")
    y = evaluate(m, {"x": x})["y"]
    src = np.arange(12) * 5 / 11
    lo = np.floor(src).astype(int)
    r = src - lo
    exact = (1 - r) * x[0, lo] + r * x[0, np.minimum(lo + 1, 5)]
    np.testing.assert_array_equal(y[0], np.rint(exact).astype(np.uint8))
    x = np.uint8([[0, 255, 255, 0]])  # cubic overshoots past 255 and below 0: clipped
    m = _model(x.shape, np.uint8, 13, scales=[1, 3], mode="cubic")
    y = evaluate(m, {"x": x})["y"]
    assert y.max() == 255 and y.min() == 0


def test_blocks_and_threads_give_the_same_values(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 37, 29)).astype(np.float32)
    models = [_model(x.shape, np.float32, 19, scales=[1, 1, 1.7, 2.3], mode=mode)
              for mode in ("linear", "cubic")]
    whole = [evaluate(m, {"x": x})["y"] for m in models]
    monkeypatch.setattr(resize_module, "_BLOCK", 40)  # rows, then columns, in blocks
    monkeypatch.setattr(resize_module, "_TAP", 1 << 20)  # and shared among threads
    for m, want in zip(models, whole):
        np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], want)


@pytest.mark.parametrize("kwargs,opset,message", [
    ({"scales": [1, 2], "sizes": [1, 4]}, 13, "exactly one of scales and sizes"),
    ({}, 13, "exactly one of scales and sizes"),
    ({"scales": [2]}, 13, r"scales \[2.0\] must have one entry per axis resized \(2\)"),
    ({"scales": [1, -2]}, 13, "must be positive"),
    ({"sizes": [1, -4]}, 13, "cannot resize"),
    ({"scales": [1, 2], "axes": [1, -1]}, 18, "repeat an axis"),
    ({"scales": [1, 2], "coordinate_transformation_mode": "tf_crop_and_resize"}, 13,
     "tf_crop_and_resize needs roi of 4 values"),
    ({"scales": [1, 2], "coordinate_transformation_mode": "half_pixel_symmetric"}, 18,
     "'half_pixel_symmetric' is not Resize-18's"),
    ({"scales": [1, 2], "coordinate_transformation_mode": "tf_half_pixel_for_nn"}, 13,
     "'tf_half_pixel_for_nn' is not Resize-13's"),
    ({"scales": [1, 2], "mode": "area"}, 13, "unknown mode 'area'"),
])
def test_errors_name_the_node(kwargs, opset, message):
    x = np.zeros((1, 2), np.float32)
    m = _model(x.shape, np.float32, opset, **kwargs)
    with pytest.raises(EvaluationError, match=r"node 'rs' \(Resize-\d+, graph 'g'\): .*"
                                              + message):
        evaluate(m, {"x": x})


# -- Upsample-7/9 and Resize-10: Resize-11 with asymmetric coordinates ---------------------


def _scaled(op, opset, x, scales, mode):
    ins, attrs, inits = ["x"], {"mode": mode}, []
    if opset == 7:
        attrs["scales"] = [float(s) for s in scales]
    else:
        ins.append("scales")
        inits.append(init("scales", np.float32(scales)))
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    m = make_model([helper.make_node(op, ins, ["y"], **attrs)],
                   [helper.make_tensor_value_info("x", elem, list(x.shape))],
                   [helper.make_tensor_value_info("y", elem, None)], opset=opset,
                   initializers=inits)
    assert kernels(m).sources[f"{op}-{opset}"] == "opshift"
    return evaluate(m, {"x": x})["y"]


@pytest.mark.parametrize("op,opset", [("Upsample", 7), ("Upsample", 9), ("Resize", 10)])
def test_upsample_by_the_asymmetric_rule(op, opset):
    x = np.float32([[[[1, 2, 3, 4]]]])
    np.testing.assert_array_equal(_scaled(op, opset, x, [1, 1, 1, 2], "linear"),
                                  np.float32([[[[1, 1.5, 2, 2.5, 3, 3.5, 4, 4]]]]))
    np.testing.assert_array_equal(_scaled(op, opset, x, [1, 1, 1, 1.5], "nearest"),
                                  np.float32([[[[1, 1, 2, 3, 3, 4]]]]))
    y = _scaled(op, opset, np.arange(6, dtype=np.int64).reshape(1, 1, 2, 3), [1, 1, 2, 2],
                "nearest")
    assert y.dtype == np.int64 and y.shape == (1, 1, 4, 6)
    np.testing.assert_array_equal(y[0, 0], np.repeat(np.repeat([[0, 1, 2], [3, 4, 5]], 2, 0),
                                                     2, 1))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_upsample_1_is_upsample_7_of_height_and_width(mode):
    x = np.random.default_rng(9).standard_normal((2, 3, 4, 5)).astype(np.float32)
    m = make_model([helper.make_node("Upsample", ["x"], ["y"], mode=mode, height_scale=1.5,
                                     width_scale=2.0)],
                   [helper.make_tensor_value_info("x", 1, list(x.shape))],
                   [helper.make_tensor_value_info("y", 1, None)], opset=5)
    assert kernels(m).sources["Upsample-1"] == "opshift"
    want = _scaled("Upsample", 7, x, [1, 1, 1.5, 2.0], "linear" if mode == "bilinear" else mode)
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], want)


@pytest.mark.parametrize("mode,extra", [("linear", {}), ("nearest", {"nearest_mode": "floor"})])
def test_resize_10_is_resize_11_with_asymmetric_coordinates(mode, extra, rng):
    x = rng.standard_normal((1, 2, 5, 7)).astype(np.float32)
    scales = np.float32([1, 1, 1.7, 0.6])
    old = _scaled("Resize", 10, x, scales, mode)
    m = _model(x.shape, np.float32, 11, roi=[], scales=scales, mode=mode,
               coordinate_transformation_mode="asymmetric", **extra)
    new = evaluate(m, {"x": x})["y"]
    assert old.shape == new.shape == (1, 2, 8, 4)
    np.testing.assert_array_equal(old, new)
