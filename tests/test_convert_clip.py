"""Clip's bounds across versions: attributes at 1 and 6 (unset meaning no bound, or
+-FLT_MAX), inputs from 11 (the type's own limits), a bound computed at run time written as
Where below 11."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, attrs, make_model, onnxruntime_outputs, vi
from convert_helpers import F, convert, convert_other_ops, one, roundtrip
from onnx import helper, numpy_helper

from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.verify import compare


def test_unset_attribute_whose_default_changes_is_written():
    # Clip-6's unset bounds are -FLT_MAX/FLT_MAX; Clip-1 has no default: written explicitly.
    m = make_model([one("Clip", ["x"], ["y"], max=2.0)], [vi("x", F, [3])], [vi("y", F, [3])],
                   opset=6)
    convert(m, 6, 1)
    a = attrs(m.graph.node[0])
    assert a["max"] == 2.0 and a["min"] == pytest.approx(-np.finfo(np.float32).max)
    convert(m, 1, 6)  # back up: an explicit value survives
    assert attrs(m.graph.node[0])["min"] == pytest.approx(-np.finfo(np.float32).max)


def test_clip_bounds_between_attributes_and_inputs():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    m = make_model([one("Clip", ["x"], ["y"], min=-1.0)], [vi("x", F, [7])],
                   [vi("y", F, [7])], opset=6)
    roundtrip(m, 6, 13, {"x": x})
    assert len(m.graph.node[0].input) == 3
    roundtrip(m, 13, 6, {"x": x})
    assert attrs(m.graph.node[0])["min"] == -1.0
    lo = numpy_helper.from_array(np.array(0.5, np.float32), "lo")
    m = make_model([one("Clip", ["x", "lo"], ["y"])], [vi("x", F, [7])], [vi("y", F, [7])],
                   opset=13, initializers=[lo])
    roundtrip(m, 13, 1, {"x": x})
    m = make_model([one("Clip", ["x", "lo"], ["y"])], [vi("x", F, [7]), vi("lo", F, [])],
                   [vi("y", F, [7])], opset=13)
    with pytest.raises(ConversionError, match=r"Clip-11 -> Clip-6.*min.*not a constant"):
        convert_other_ops(m, 13, 6)  # (from 7 Where: below)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bounds", [("lo", ""), ("", "hi"), ("lo", "hi")])
@pytest.mark.parametrize("target", [10, 9, 8, 7])
def test_clip_with_a_computed_bound_below_11(dtype, bounds, target):
    """A bound computed at run time has no attribute to go to: from 9 Clip is Where(x < min
    or IsNaN(min), min, x) then the same for max, an omitted bound the type's own limit
    (which clamps infinities), for bounds that are themselves infinite or NaN too; at 7 and 8
    each Where and IsNaN as written below 9. x is kept where it equals a bound (-0.0 at
    +0.0), on onnxruntime too (Max and Min would give either of two equal zeros)."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([one("Clip", ["x", *bounds], ["y"])],
                   [vi("x", t, [7]), *(vi(b, t, []) for b in bounds if b)],
                   [vi("y", t, [7])], opset=13)
    x = np.array([-np.inf, -2.5, -0.0, 0.0, 1.5, np.inf, np.nan], dtype)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert(c, 13, target)
    ops = {n.op_type for n in c.graph.node}
    if target >= 9:
        assert ops <= {"Where", "Less", "Greater", "Or", "IsNaN"}
    else:
        assert not ops & {"Clip", "Where", "IsNaN", "Max", "Min"} and "Gather" in ops
    for lo, hi in [(-1.0, 1.0), (0.0, 0.0), (-0.0, -0.0), (-np.inf, np.inf), (np.nan, 2.0),
                   (3.0, -3.0)]:
        feeds = {"x": x} | {b: np.array(v, dtype) for b, v in (("lo", lo), ("hi", hi))
                            if b in bounds}
        want = evaluate(m, feeds)["y"]
        assert_exact(want, evaluate(c, feeds)["y"], f"{lo}, {hi}")
        theirs = [onnxruntime_outputs(x, feeds) for x in (m, c)]
        if not np.isnan([lo, hi]).any() and np.signbit([lo, hi]).sum() < 2 and \
                not any(isinstance(r, str) for r in theirs):  # a second opinion (NaN bounds:
            # onnxruntime's own Clip ignores one; its Where writes a -0.0 it broadcasts as +0.0)
            assert_exact(theirs[0][0], theirs[1][0], f"onnxruntime, {lo}, {hi}")


def test_clip_1_unset_bounds_upgrade():
    m = make_model([one("Clip", ["x"], ["y"], min=0.0)], [vi("x", F, [3])], [vi("y", F, [3])],
                   opset=1)
    convert(m, 1, 6)
    assert attrs(m.graph.node[0]) == {"min": 0.0, "max": float("inf")}
    x = np.array([-1, 0.5, np.inf], np.float32)  # +inf stays +inf: no upper bound
    (y,) = evaluate(m, {"x": x}).values()
    np.testing.assert_array_equal(y, [0, 0.5, np.inf])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("source, target", [(6, 13), (13, 6), (13, 1), (6, 1), (1, 13)])
def test_clip_unset_bounds_across_versions(dtype, source, target):
    """Unset bounds mean no bound at 1, +-FLT_MAX at 6 (compared in X's type: +-inf in
    float16), the type's own finite limits from 11 (+-65504 in float16): infinities and
    values beyond FLT_MAX tell them apart. Double's limits do not fit Clip-6's attributes."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([one("Clip", ["x"], ["y"])], [vi("x", t, [6])], [vi("y", t, [6])],
                   opset=source)
    big = 1e300 if dtype == np.float64 else 1e4
    x = np.array([-np.inf, -big, -1.5, -0.0, big, np.inf], dtype)
    if dtype == np.float64 and source == 13 and target < 11:
        with pytest.raises(ConversionError, match=r"Clip-11 -> Clip-6.*omitted min is "
                                                  r"double's .*float attribute"):
            convert_other_ops(m, source, target)
        return
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert(m, source, target)
    want, got = evaluate(before, {"x": x})["y"], evaluate(m, {"x": x})["y"]
    c = compare(want, got)
    assert c.ok, c.reason
    assert got.dtype == dtype
    if target >= 7:  # a second opinion where onnxruntime runs the opset
        theirs = onnxruntime_outputs(m, {"x": x})
        if not isinstance(theirs, str):
            np.testing.assert_array_equal(theirs[0], want)
