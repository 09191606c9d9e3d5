"""NonMaxSuppression against onnx.reference's kernel (selected indices exactly) on random
boxes: both box formats, corners in either order, boxes of zero area, repeated scores and
boxes, NaN corners, thresholds given or absent, several batches and classes; through the
table of pairs and through the per-box comparison. Also onnx's node tests and the NaN-score
rule.

RoiAlign against onnx.reference's kernel on random RoIs (inside, across and off the map,
smaller than a pixel, reversed), both modes and coordinate rules, fixed and adaptive
sampling, versions 10, 16, 22; onnx's node tests; channel blocks; errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_onnx_node_tests, init, make_model, run_onnxruntime, vi
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate
from opshift.evaluator.ops import detection


def _model(center: int, given: tuple[bool, bool, bool], limit: int, iou: float,
           score: float):
    names = ["boxes", "scores"]
    inits = []
    for name, on, value, dtype in (("max", given[0], limit, np.int64),
                                   ("iou", given[1], iou, np.float32),
                                   ("score", given[2], score, np.float32)):
        names.append(name if on else "")
        if on:
            inits.append(init(name, [value], dtype))
    while names[-1] == "":
        names.pop()
    node = helper.make_node("NonMaxSuppression", names, ["y"], center_point_box=center)
    return make_model([node], [vi("boxes", T.FLOAT, None), vi("scores", T.FLOAT, None)],
                      [vi("y", T.INT64)], opset=11, initializers=inits)


def _boxes(rng, batches, n, center):
    b = rng.random((batches, n, 4)).astype(np.float32)
    if center:
        b[..., 2:] = b[..., 2:] * 0.5
    b[:, 5::7] = b[:, :1]  # repeated boxes
    b[:, 3::11, 2] = b[:, 3::11, 0]  # zero height
    b[:, 2::13, 1] = np.nan  # a NaN corner
    return np.round(b * 64) / 64  # coarse values: exact ties in overlaps and scores


@pytest.mark.parametrize("pairs", [0, 4096])
@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("seed", range(6))
def test_matches_onnx_reference(monkeypatch, pairs, center, seed):
    from opshift.evaluator.ops import detection

    monkeypatch.setattr(detection, "_PAIRS", pairs)
    rng = np.random.default_rng([seed, center])
    batches, classes, n = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(
        rng.integers(1, 60))
    boxes = _boxes(rng, batches, n, center)
    scores = (np.round(rng.random((batches, classes, n)) * 16) / 16).astype(np.float32)
    limit, iou = int(rng.integers(0, n + 2)), float(rng.choice([0.0, 0.25, .5]))
    score = float(rng.choice([0.0, 0.5]))
    feeds = {"boxes": boxes, "scores": scores}
    # onnx.reference's kernel needs every optional input given
    m = _model(center, (True, True, True), limit, iou, score)
    got = evaluate(m, feeds)["y"]
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    assert got.dtype == np.int64 and got.shape[1:] == (3,)
    np.testing.assert_array_equal(got, want.reshape(-1, 3))
    # absent: iou_threshold is 0, score_threshold filters nothing (scores here are > -1)
    absent = evaluate(_model(center, (True, False, False), limit, 0, 0), feeds)["y"]
    np.testing.assert_array_equal(absent, evaluate(
        _model(center, (True, True, True), limit, 0.0, -1.0), feeds)["y"])


def test_onnx_node_tests_give_their_expected_outputs():
    assert_onnx_node_tests("test_nonmaxsuppression", at_least=8)


def test_no_limit_selects_nothing_and_nan_scores_come_last():
    boxes = np.float32([[[0, 0, 1, 1], [2, 2, 3, 3], [4, 4, 5, 5]]])
    scores = np.float32([[[np.nan, 0.5, -np.inf]]])
    none = evaluate(_model(0, (False, False, False), 0, 0, 0),
                    {"boxes": boxes, "scores": scores})["y"]
    assert none.shape == (0, 3)
    got = evaluate(_model(0, (True, False, False), 3, 0, 0),
                   {"boxes": boxes, "scores": scores})["y"]
    # the number first, then NaN and -inf as equals, the lower index first
    assert got.tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 2]]


# -- RoiAlign ---------------------------------------------------------------------------------


def _roi_model(x_shape, n_rois, opset, dtype=np.float32, **attrs):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="ra", **attrs)
    return make_model([node], [vi("x", elem, list(x_shape)), vi("rois", elem, [n_rois, 4]),
                               vi("bi", T.INT64, [n_rois])], [vi("y", elem)], opset=opset)


def _roi_case(seed: int):
    rng = np.random.default_rng([7, seed])
    opset = int(rng.choice([10, 16, 22]))
    attrs = {"mode": str(rng.choice(["avg", "max"])),
             "output_height": int(rng.integers(1, 5)), "output_width": int(rng.integers(1, 5)),
             "sampling_ratio": int(rng.choice([0, 0, 1, 2, 3])),
             "spatial_scale": float(rng.choice([1.0, 0.5, 0.25]))}
    if opset >= 16 and rng.random() < 0.7:
        attrs["coordinate_transformation_mode"] = str(rng.choice(["half_pixel",
                                                                  "output_half_pixel"]))
    dtype = np.float64 if rng.random() < 0.25 else np.float32
    n, c, h, w = 2, int(rng.integers(1, 5)), int(rng.integers(2, 9)), int(rng.integers(2, 9))
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    scale = 1 / attrs["spatial_scale"]
    r = int(rng.integers(1, 7))
    # corners in pixels of X, some off the map, some under a pixel apart, some reversed
    start = rng.uniform(-2, [w + 1, h + 1], (r, 2))
    size = rng.choice([rng.uniform(0.1, 0.9), rng.uniform(1, 6), -rng.uniform(0.5, 2)],
                      (r, 2))
    rois = (np.concatenate([start, start + size], 1) * scale).astype(dtype)
    bi = rng.integers(0, n, r).astype(np.int64)
    return _roi_model(x.shape, r, opset, dtype, **attrs), {"x": x, "rois": rois, "bi": bi}


@pytest.mark.parametrize("seed", range(60))
def test_roi_align_matches_onnx_reference(seed):
    m, feeds = _roi_case(seed)
    got = evaluate(m, feeds)["y"]
    ref = m
    if m.opset_import[0].version == 10:  # onnx.reference's kernel knows the attribute only
        ref = _roi_model(feeds["x"].shape, len(feeds["bi"]), 16, feeds["x"].dtype,
                         coordinate_transformation_mode="output_half_pixel",
                         **{a.name: helper.get_attribute_value(a)
                            for a in m.graph.node[0].attribute})
    want = ReferenceEvaluator(ref).run(None, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    mode = {a.name: a for a in m.graph.node[0].attribute}["mode"].s
    if mode == b"max":  # the same points, weights and products: the same maximum
        np.testing.assert_array_equal(got, want)
    else:  # theirs adds in X's type, opshift's in float64
        np.testing.assert_allclose(got, want, rtol=0,
                                   atol=4 * np.finfo(got.dtype).eps * np.abs(feeds["x"]).max())


@pytest.mark.parametrize("seed", range(12))
def test_roi_align_against_onnxruntime(seed):
    """onnxruntime as a second opinion (it computes in float32: within a few float32 eps of
    the input's scale); skipped where it cannot run the version or types."""
    m, feeds = _roi_case(seed)
    if m.opset_import[0].version == 22:  # RoiAlign-22 only adds types: 16's model, for it
        m = _roi_model(feeds["x"].shape, len(feeds["bi"]), 16, feeds["x"].dtype,
                       **{a.name: helper.get_attribute_value(a)
                          for a in m.graph.node[0].attribute})
    (want,) = run_onnxruntime(m, feeds)
    got = evaluate(m, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=0,
                               atol=8 * np.finfo(np.float32).eps * np.abs(feeds["x"]).max())


def test_roi_align_node_tests_give_their_expected_outputs():
    # their expected values are written to 4 decimals
    assert_onnx_node_tests("test_roialign", at_least=3, atol=1e-4)


def test_roi_align_channels_in_blocks(monkeypatch):
    m, feeds = _roi_case(3)
    whole = evaluate(m, feeds)["y"]
    monkeypatch.setattr(detection, "_TERM", 1)  # one channel at a time
    np.testing.assert_array_equal(evaluate(m, feeds)["y"], whole)


def test_roi_align_of_a_bin_with_no_points_is_0():
    """A reversed RoI under half_pixel has a negative size: an adaptive grid of no points."""
    m = _roi_model((1, 1, 4, 4), 1, 16, output_height=2, output_width=2)
    feeds = {"x": np.ones((1, 1, 4, 4), np.float32), "rois": np.float32([[3, 3, 1, 1]]),
             "bi": np.zeros(1, np.int64)}
    np.testing.assert_array_equal(evaluate(m, feeds)["y"], np.zeros((1, 1, 2, 2)))


def test_roi_align_errors_name_the_node():
    m = _roi_model((1, 1, 4, 4), 1, 16)
    feeds = {"x": np.ones((1, 1, 4, 4), np.float32), "rois": np.float32([[0, 0, 1, 1]]),
             "bi": np.int64([1])}
    with pytest.raises(EvaluationError, match=r"node 'ra' \(RoiAlign-16, graph 'g'\): batch "
                                              r"index 1 is out of range"):
        evaluate(m, feeds)


def test_roi_align_point_on_the_far_edge_reads_the_last_pixel():
    """A point at exactly W (or H) is on the map, read at the last pixel; beyond, off it."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    m = _roi_model(x.shape, 2, 16, sampling_ratio=1,
                   coordinate_transformation_mode="output_half_pixel")
    feeds = {"x": x, "rois": np.float32([[3, 0, 5, 2], [3.5, 0, 5.5, 2]]),
             "bi": np.zeros(2, np.int64)}
    np.testing.assert_array_equal(evaluate(m, feeds)["y"].reshape(-1), [x[0, 0, 1, 3], 0])


@pytest.mark.parametrize("seed", range(6))
def test_roi_align_max_with_nan_as_theirs(seed):
    """A NaN corner term is passed over unless it comes first (Python's and std::max)."""
    m, feeds = _roi_case(seed)
    m = _roi_model(feeds["x"].shape, len(feeds["bi"]), 16, feeds["x"].dtype, mode="max",
                   output_height=2, output_width=2, sampling_ratio=2)
    rng = np.random.default_rng(seed)
    feeds["x"][rng.random(feeds["x"].shape) < 0.2] = np.nan
    got = evaluate(m, feeds)["y"]
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, feeds)[0])


def test_roialign_10_keeps_its_output_half_pixel_rule(rng):
    """RoiAlign-10 has no coordinate_transformation_mode: it always computes what
    RoiAlign-16 calls output_half_pixel (RoiAlign-16's default is half_pixel)."""
    feeds = {"x": rng.standard_normal((1, 2, 6, 6)).astype(np.float32),
             "rois": np.float32([[0.3, 0.2, 4.9, 3.1], [1, 1, 2, 5]]),
             "bi": np.array([0, 0], np.int64)}
    outs = {}
    for opset, attrs in ((10, {}), (16, {"coordinate_transformation_mode":
                                         "output_half_pixel"}), (16, {})):
        m = _roi_model((1, 2, 6, 6), 2, opset, **attrs)
        outs[opset, bool(attrs)] = evaluate(m, feeds)["y"]
    np.testing.assert_array_equal(outs[10, False], outs[16, True])
    assert not np.array_equal(outs[10, False], outs[16, False])


# -- MaxRoiPool -------------------------------------------------------------------------------


def _max_roi_definition(x, rois, pooled, scale):
    """Caffe's ROIPooling, written as loops (in float32, as its kernel computes)."""
    f = np.float32
    out = np.zeros((len(rois), x.shape[1], *pooled), x.dtype)
    h, w = x.shape[2:]
    for r, (b, *corners) in enumerate(rois):
        x0, y0, x1, y1 = (int(np.copysign(np.floor(abs(f(v) * f(scale)) + 0.5), v))
                          for v in corners)
        bh, bw = f(max(y1 - y0 + 1, 1)) / f(pooled[0]), f(max(x1 - x0 + 1, 1)) / f(pooled[1])
        for i in range(pooled[0]):
            r0 = min(max(int(np.floor(f(i) * bh)) + y0, 0), h)
            r1 = min(max(int(np.ceil(f(i + 1) * bh)) + y0, 0), h)
            for j in range(pooled[1]):
                c0 = min(max(int(np.floor(f(j) * bw)) + x0, 0), w)
                c1 = min(max(int(np.ceil(f(j + 1) * bw)) + x0, 0), w)
                if r1 > r0 and c1 > c0:
                    for c in range(x.shape[1]):
                        out[r, c, i, j] = max(x[int(b), c, r0:r1, c0:c1].ravel())
    return out


def _roi_pool_model(x, rois, opset, **attrs):
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], name="mrp", **attrs)
    return make_model([node], [vi("x", T.FLOAT, list(x.shape)),
                               vi("rois", T.FLOAT, list(rois.shape))], [vi("y", T.FLOAT)],
                      opset=opset)


@pytest.mark.parametrize("seed", range(12))
def test_max_roi_pool_matches_its_definition(seed):
    rng = np.random.default_rng([50, seed])
    x = rng.standard_normal((2, 3, int(rng.integers(3, 12)), int(rng.integers(3, 12))))
    x = x.astype(np.float32)
    n = int(rng.integers(1, 8))
    corners = rng.uniform(-6, 30, (n, 4))
    corners[:, 2:] = np.maximum(corners[:, 2:], corners[:, :2])
    rois = np.concatenate([rng.integers(0, 2, (n, 1)), corners], 1).astype(np.float32)
    pooled = [int(rng.integers(1, 5)), int(rng.integers(1, 5))]
    scale = float(rng.choice([1.0, 0.5, 0.25]))
    m = _roi_pool_model(x, rois, int(rng.choice([13, 22])), pooled_shape=pooled,
                        spatial_scale=scale)
    got = evaluate(m, {"x": x, "rois": rois})["y"]
    np.testing.assert_array_equal(got, _max_roi_definition(x, rois, pooled, scale))


def test_max_roi_pool_against_onnxruntime():
    rng = np.random.default_rng(51)
    x = rng.standard_normal((2, 16, 20, 24)).astype(np.float32)
    rois = np.concatenate([rng.integers(0, 2, (40, 1)), rng.uniform(-5, 30, (40, 4))], 1)
    rois[:, 3:] = np.maximum(rois[:, 3:], rois[:, 1:3])
    rois = rois.astype(np.float32)
    m = _roi_pool_model(x, rois, 13, pooled_shape=[3, 4], spatial_scale=0.5)
    (want,) = run_onnxruntime(m, {"x": x, "rois": rois})
    np.testing.assert_array_equal(evaluate(m, {"x": x, "rois": rois})["y"], want)


def test_max_roi_pool_errors():
    x = np.zeros((1, 1, 4, 4), np.float32)
    m = _roi_pool_model(x, np.zeros((1, 5), np.float32), 22, pooled_shape=[2, 2])
    with pytest.raises(EvaluationError, match=r"node 'mrp' \(MaxRoiPool-22, graph 'g'\): RoI 0: "
                                              r"batch index 1.0 is out of range"):
        evaluate(m, {"x": x, "rois": np.float32([[1, 0, 0, 2, 2]])})


def test_max_roi_pool_rounds_corners_half_away_from_zero():
    x = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
    rois = np.float32([[0, 2.5, 0.5, 2.5, 0.5]])  # x 2.5 -> 3, y 0.5 -> 1: one pixel, (1, 3)
    m = _roi_pool_model(x, rois, 22, pooled_shape=[1, 1])
    assert evaluate(m, {"x": x, "rois": rois})["y"].item() == x[0, 0, 1, 3]
