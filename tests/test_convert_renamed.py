"""Ops onnx deprecated for another op of the same meaning (conversion/steps/renamed.py):
Upsample <-> Resize-10 and Scatter <-> ScatterElements-11, both ways, each node then
converted on to the target; refused where the other op cannot take the node (Upsample's
scales are >= 1, Scatter's indices >= 0)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, make_model, onnxruntime_outputs, op_types
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import opshift
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.verify import compare

X = np.random.default_rng(3).standard_normal((1, 2, 5, 7)).astype(np.float32)
LATEST = onnx.defs.onnx_opset_version()


def _resampler(op: str, opset: int, mode: str, scales, *, constant: bool = True
               ) -> onnx.ModelProto:
    s = numpy_helper.from_array(np.array(scales, np.float32), "s")
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, list(X.shape))]
    if not constant:
        inputs.append(helper.make_tensor_value_info("s", T.FLOAT, [4]))
    return make_model([helper.make_node(op, ["x", "s"], ["y"], mode=mode)], inputs,
                      [helper.make_tensor_value_info("y", T.FLOAT, None)], opset=opset,
                      initializers=[s] if constant else [])



def _same(a: onnx.ModelProto, b: onnx.ModelProto, feeds) -> None:
    c = compare(evaluate(a, feeds)["y"], evaluate(b, feeds)["y"])
    assert c.ok, c.reason


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 1.5, 2.5], [1, 1, 3, 1.3]])
def test_upsample_goes_up_as_resize_and_comes_back(mode, scales):
    up9 = _resampler("Upsample", 9, mode, scales)
    for target in (10, 11, 13, 18, LATEST):
        m = opshift.convert(up9, target)
        assert op_types(m) == ["Resize"], target
        _same(up9, m, {"x": X})
        ours, theirs = onnxruntime_outputs(up9, {"x": X}), onnxruntime_outputs(m, {"x": X})
        if not isinstance(ours, str) and not isinstance(theirs, str):  # where it runs both
            np.testing.assert_array_equal(ours[0], theirs[0])
    r13 = opshift.convert(up9, 13)
    for target in (9, 8, 7, 1):
        m = opshift.convert(r13, target)
        assert op_types(m) == ["Upsample"], target
        _same(up9, m, {"x": X})


def test_upsample_7_goes_up_through_9():
    m7 = make_model([helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0])],
                    [helper.make_tensor_value_info("x", T.FLOAT, list(X.shape))],
                    [helper.make_tensor_value_info("y", T.FLOAT, None)], opset=7)
    m = opshift.convert(m7, 13)
    assert op_types(m) == ["Resize"]
    _same(m7, m, {"x": X})


def test_resize_that_samples_down_or_has_dynamic_scales_stays_above_10():
    with pytest.raises(ConversionError, match="scale 0.5 samples down: Upsample takes "
                                              "scales >= 1 only"):
        opshift.convert(_resampler("Resize", 10, "nearest", [1, 1, 0.5, 2]), 9)
    with pytest.raises(ConversionError, match="its scales are not a constant"):
        opshift.convert(_resampler("Resize", 10, "nearest", [1, 1, 2, 2], constant=False), 9)


def _scatter(op: str, opset: int, indices: np.ndarray | None, *, axis: int = 0,
             dims=(3, 3), itype=np.int64) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("d", T.FLOAT, list(dims)),
              helper.make_tensor_value_info("u", T.FLOAT, [2, 3])]
    inits = []
    if indices is None:
        inputs.append(helper.make_tensor_value_info(
            "i", helper.np_dtype_to_tensor_dtype(np.dtype(itype)), [2, 3]))
    else:
        inits.append(numpy_helper.from_array(indices, "i"))
    return make_model([helper.make_node(op, ["d", "i", "u"], ["y"], axis=axis)], inputs,
                      [helper.make_tensor_value_info("y", T.FLOAT, None)], opset=opset,
                      initializers=inits)


FEEDS = {"d": np.arange(9, dtype=np.float32).reshape(3, 3),
         "u": -np.arange(1, 7, dtype=np.float32).reshape(2, 3)}


def test_scatter_goes_up_as_scatter_elements_and_comes_back():
    s9 = _scatter("Scatter", 9, np.array([[1, 0, 2], [0, 2, 1]], np.int64))
    for target in (10, 11, 13, 16, LATEST):
        m = opshift.convert(s9, target)
        assert op_types(m) == (["Scatter"] if target < 11 else ["ScatterElements"]), target
        _same(s9, m, FEEDS)
    m = opshift.convert(opshift.convert(s9, 13), 9)
    assert op_types(m) == ["Scatter"]
    _same(s9, m, FEEDS)


@pytest.mark.parametrize("itype", [np.int64, np.int32], ids=lambda t: t.__name__)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_with_negative_or_computed_indices_counts_them_from_the_front(
        axis, itype):
    """Indices that may be negative become ``i + n * (i < 0)`` (n read at run time when the
    data's shape does not give it), then a Scatter-9; below 9 refused."""
    idx = np.array([[1, 0, -1], [-3, 2, -2]], itype)
    feeds = {**FEEDS, "i": idx}
    want = FEEDS["d"].copy()  # the meaning: each update at its index, counted from the end
    for (r, c), i in np.ndenumerate(idx):
        want[(i % 3, c) if axis == 0 else (r, i % 3)] = FEEDS["u"][r, c]
    for constant, dims in ((False, [3, 3]), (False, ["a", "b"]), (True, [3, 3])):
        m = _scatter("ScatterElements", 13, idx if constant else None, axis=axis, dims=dims,
                     itype=itype)
        for target in (9, 10):
            c = opshift.convert(m, target)
            assert op_types(c)[-1] == "Scatter" and "ScatterElements" not in op_types(c)
            assert_conversion_exact(m, c, {k: v for k, v in feeds.items()
                                           if not (constant and k == "i")}, want, output="y")
    with pytest.raises(ConversionError, match="index -3 is negative: a negative index counts"):
        opshift.convert(_scatter("ScatterElements", 13, idx), 8)
    with pytest.raises(ConversionError, match="its indices are not a constant: a negative"):
        opshift.convert(_scatter("ScatterElements", 13, None), 8)


def test_the_ops_table_says_replaced_not_refused(capsys):
    from opshift.cli import main

    assert main(["ops", "Upsample", "Scatter", "--all"]) == 0
    out = capsys.readouterr().out
    assert "replaced" in out and "as_successor" in out and "deprecated" not in out
