"""ArgMax/ArgMin select_last_index=1 below 12 with NaN in a row (issue 38, item 9); the
form itself (a reversing Slice, below 10 a Gather) on ties and infinities too.

Decision: the form n - 1 - ArgMax(x reversed) is kept. NaN's order is unspecified in ONNX;
runtimes that take NaN as the extreme (opshift's evaluator, onnx.reference, OpenVINO) give
the original's index, onnxruntime (whose scan start decides) may not, and no other form keeps
every runtime's answer: the change's note says so. Rows with NaN first, last, alone, repeated.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, make_model, onnxruntime_outputs, vi
from convert_helpers import F, convert, one
from onnx import TensorProto
from onnx import TensorProto as T
from onnx import helper as h

import opshift
from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

NAN = np.nan
ROWS = np.array([[NAN, 1, 2, 2], [1, 2, 2, NAN], [1, NAN, 3, 3], [NAN, NAN, 0, 0],
                 [3, 3, NAN, 1], [NAN, 5, NAN, 5], [NAN, NAN, NAN, NAN], [4, 4, 4, 4]],
                np.float32)


def _model(op: str) -> onnx.ModelProto:
    return make_model([h.make_node(op, ["x"], ["y"], name="arg", axis=1, keepdims=0,
                                   select_last_index=1)],
                      [h.make_tensor_value_info("x", T.FLOAT, list(ROWS.shape))],
                      [h.make_tensor_value_info("y", T.INT64, [ROWS.shape[0]])], opset=13)


@pytest.mark.parametrize("target", [11, 9])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_nan_rows_give_the_originals_index_and_the_note_names_the_caveat(op, target):
    m = _model(op)
    out = onnx.ModelProto()
    out.CopyFrom(m)
    result = convert_proto(out, target)
    onnx.checker.check_model(out, full_check=True)
    report = opshift.verify(m, out, {"x": ROWS})
    assert report.ok and report.verdict == "ok", report
    want = opshift.evaluate(m, {"x": ROWS})["y"]
    np.testing.assert_array_equal(opshift.evaluate(out, {"x": ROWS})["y"], want)
    # NaN is the extreme, the last one picked: as numpy's argmax reads a row reversed
    np.testing.assert_array_equal(want, [0, 3, 1, 1, 2, 2, 3, 3])
    (change,) = [c for c in result.changes if c.node == "arg"]
    assert "n - 1 - the first index of the input reversed" in change.what
    assert "NaN's order is unspecified in ONNX" in change.why
    assert "onnxruntime" in change.why


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_onnx_reference_agrees_on_the_nan_rows(op):
    """A second opinion: onnx.reference takes NaN as the extreme, as opshift does."""
    from onnx.reference import ReferenceEvaluator

    m = _model(op)
    out = onnx.ModelProto()
    out.CopyFrom(m)
    convert_proto(out, 11)
    before = ReferenceEvaluator(m).run(None, {"x": ROWS})[0]
    after = ReferenceEvaluator(out).run(None, {"x": ROWS})[0]
    np.testing.assert_array_equal(after, before)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dims", [[3, 4], ["n", 4]])
def test_arg_select_last_index_below_12(op, dims):
    """select_last_index=1 written as n - 1 - the first index of the input reversed (a
    Slice of step -1; below 10 a Gather of the positions backwards, where n is known): ties,
    infinities and NaN give the same indices; n from the static dim or read from the shape;
    below 10 with n unknown, and below 7 (n - 1 - index broadcasts), refused."""
    x = np.array([[1, 3, 3, -1], [np.nan, 2, np.nan, 2], [np.inf, -np.inf, np.inf, 0]],
                 np.float32)
    for axis, keep in ((1, 0), (-2, 1)):
        m = make_model([one(op, ["x"], ["y"], axis=axis, keepdims=keep, select_last_index=1)],
                       [vi("x", F, dims)], [vi("y", TensorProto.INT64, 1 + keep)],
                       opset=13)
        want = evaluate(m, {"x": x})["y"]
        for target in (11, 10):
            c = onnx.ModelProto()
            c.CopyFrom(m)
            convert(c, 13, target)
            assert "Slice" in [n.op_type for n in c.graph.node]
            assert_exact(want, evaluate(c, {"x": x})["y"])
        c = onnx.ModelProto()
        c.CopyFrom(m)
        convert(c, 13, 11)
        # (onnxruntime's NaN ranks differ between its two modes: its opinion on the rest)
        finite = {"x": np.nan_to_num(x, nan=2.0)}
        before, after = onnxruntime_outputs(m, finite), onnxruntime_outputs(c, finite)
        if not isinstance(before, str) and not isinstance(after, str):
            np.testing.assert_array_equal(after[0], before[0])
        for target in (9, 7):
            c = onnx.ModelProto()
            c.CopyFrom(m)
            if not isinstance(dims[axis], int):  # the reversed axis's size is unknown
                with pytest.raises(ConversionError, match="by a Gather, which needs the axis"):
                    convert(c, 13, target)
                continue
            convert(c, 13, target)
            assert "Gather" in [n.op_type for n in c.graph.node]
            assert_exact(want, evaluate(c, {"x": x})["y"])
        with pytest.raises(ConversionError, match="needs numpy broadcasting"):
            convert(m, 13, 6)
