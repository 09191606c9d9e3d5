"""NonMaxSuppression against onnx.reference's kernel (selected indices exactly) on random
boxes: both box formats, corners in either order, boxes of zero area, repeated scores and
boxes, NaN corners, thresholds given or absent, several batches and classes; through the
table of pairs and through the per-box comparison. Also onnx's node tests and the NaN-score
rule."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import init, make_model, onnx_node_outputs, vi
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opshift.evaluator import evaluate


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
    outputs = onnx_node_outputs("test_nonmaxsuppression")
    assert len(outputs) >= 8
    for name, got, want in outputs:
        np.testing.assert_array_equal(got, want, err_msg=name)


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
