"""Attributes that became inputs, or back (conversion/steps/attribute_inputs.py): Reshape's
shape, axes of Squeeze/Unsqueeze/Reduce*, Pad, Slice, TopK, Split and DFT; an input that must
become an attribute is refused unless it is a constant."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import attrs, make_model, vi
from convert_helpers import I64, X234, F, convert, convert_other_ops, node, one, roundtrip
from onnx import numpy_helper

from opshift.errors import ConversionError


def test_reshape_shape_attribute_and_input():
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    m = make_model([one("Reshape", ["x", "shape"], ["y"], allowzero=0)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 12])], opset=14,
                   initializers=[shape])
    roundtrip(m, 14, 4, {"x": X234})
    assert attrs(m.graph.node[0]) == {"shape": [0, -1]} and len(m.graph.node[0].input) == 1
    assert not m.graph.initializer  # the folded shape is not left behind
    roundtrip(m, 4, 14, {"x": X234})
    assert len(m.graph.node[0].input) == 2
    m = make_model([one("Reshape", ["x", "s"], ["y"])], [vi("x", F, [2, 3, 4]),
                                                          vi("s", I64, [2])],
                   [vi("y", F, None)], opset=13)
    with pytest.raises(ConversionError, match=r"node 'n_reshape' \(Reshape-13 -> 1.*"
                                              r"Reshape-5 -> Reshape-1.*'s'.*not a constant"):
        convert_other_ops(m, 13, 4)


@pytest.mark.parametrize("ir", [3, 8])
def test_an_initializer_that_can_be_fed_is_not_a_constant(ir):
    """From IR 4 an initializer listed among the graph inputs is a default a caller may
    replace: its value cannot be folded into an attribute. Before IR 4 every initializer
    is listed there and is a constant."""
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    m = make_model([one("Reshape", ["x", "shape"], ["y"])],
                   [vi("x", F, [2, 3]), vi("shape", I64, [2])], [vi("y", F, [2, 3])],
                   opset=13, initializers=[shape])
    m.ir_version = ir
    if ir >= 4:
        with pytest.raises(ConversionError, match=r"n_reshape.*shape.*not a constant"):
            convert_other_ops(m, 13, 4)
    else:
        convert_other_ops(m, 13, 4)
        assert attrs(m.graph.node[0]) == {"shape": [0, -1]}


@pytest.mark.parametrize("op,version", [("Unsqueeze", 13), ("Squeeze", 13),
                                        ("ReduceSum", 13), ("ReduceMean", 18),
                                        ("ReduceMax", 18)])
def test_axes_attribute_and_input(op, version):
    x = np.random.default_rng(2).standard_normal((2, 1, 4)).astype(np.float32)
    axes = numpy_helper.from_array(np.array([-2], np.int64), "axes")
    m = make_model([one(op, ["x", "axes"], ["y"])], [vi("x", F, [2, 1, 4])],
                   [vi("y", F, {"Unsqueeze": 4, "Squeeze": 2}.get(op, 3))], opset=version,
                   initializers=[axes])
    roundtrip(m, version, 9, {"x": x})
    n = m.graph.node[0]
    # The negative axis is normalized below 11 (Unsqueeze's axes count in the output's rank).
    assert len(n.input) == 1 and attrs(n)["axes"] == ([2] if op == "Unsqueeze" else [1])
    roundtrip(m, 9, version, {"x": x})
    assert len(m.graph.node[0].input) == 2


def test_reduce_without_axes_and_noop():
    m = make_model([one("ReduceMean", ["x"], ["y"], keepdims=0)], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [])], opset=18)
    roundtrip(m, 18, 13, {"x": X234})
    assert attrs(m.graph.node[0]) == {"keepdims": 0}
    m = make_model([one("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], opset=18)
    roundtrip(m, 18, 13, {"x": X234})  # (it reduces nothing: an Identity)
    assert [n.op_type for n in m.graph.node] == ["Identity"]


def test_pad_slice_topk_between_attributes_and_inputs():
    x = X234
    pads = numpy_helper.from_array(np.array([0, 1, 0, 0, 2, 1], np.int64), "p")
    cv = numpy_helper.from_array(np.array(1.5, np.float32), "cv")
    m = make_model([one("Pad", ["x", "p", "cv"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, 3)], opset=13, initializers=[pads, cv])
    roundtrip(m, 13, 1, {"x": x})
    assert attrs(m.graph.node[0]) == {"paddings": [0, 1, 0, 0, 2, 1], "value": 1.5}
    roundtrip(m, 1, 13, {"x": x})
    m = make_model([one("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, -1], axes=[1, 2])],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, 3)], opset=9)
    roundtrip(m, 9, 13, {"x": x})
    roundtrip(m, 13, 1, {"x": x})
    m = make_model([one("TopK", ["x"], ["v", "i"], k=2)], [vi("x", F, [2, 3, 4])],
                   [vi("v", F, 3), vi("i", I64, 3)], opset=7)  # TopK-1 is in force at 7
    roundtrip(m, 7, 13, {"x": x})
    roundtrip(m, 13, 9, {"x": x})
    steps = numpy_helper.from_array(np.array([2], np.int64), "st")
    sl = [numpy_helper.from_array(np.array([v], np.int64), k) for k, v in (("s", 0), ("e", 4))]
    m = make_model([one("Slice", ["x", "s", "e", "", "st"], ["y"])], [vi("x", F, ["N", 3, 4])],
                   [vi("y", F, ["N", 3, 4])], opset=13, initializers=[*sl, steps])
    below7 = onnx.ModelProto()
    below7.CopyFrom(m)
    with pytest.raises(ConversionError, match=r"Slice-10 -> Slice-1.*step 2 on axis 0, whose "
                                              r"size is unknown: .* from opset 7"):
        convert_other_ops(below7, 13, 6)
    roundtrip(m, 13, 9, {"x": x})  # from 7 the positions are computed from the size
    assert "Slice" not in [n.op_type for n in m.graph.node]
    # steps of 1, given (paddle2onnx writes them): dropped
    ones = numpy_helper.from_array(np.array([1], np.int64), "st")
    ax = numpy_helper.from_array(np.array([2], np.int64), "ax")
    m = make_model([one("Slice", ["x", "s", "e", "ax", "st"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=13, initializers=[*sl, ax, ones])
    roundtrip(m, 13, 9, {"x": x})
    assert list(m.graph.node[0].input) == ["x"]
    assert attrs(m.graph.node[0]) == {"starts": [0], "ends": [4], "axes": [2]}


@pytest.mark.parametrize("n,width", [(2, 6), (2, 5), (3, 5)])
def test_split_num_outputs(n, width):
    x = np.arange(2 * width, dtype=np.float32).reshape(2, width)
    outs = [f"y{i}" for i in range(n)]
    m = make_model([one("Split", ["x"], outs, axis=1, num_outputs=n)],
                   [vi("x", F, [2, width])],
                   [vi(o, F, 2) for o in outs], opset=18)
    roundtrip(m, 18, 11, {"x": x})
    roundtrip(m, 11, 18, {"x": x})
    assert attrs(m.graph.node[0]).get("num_outputs") == n or len(m.graph.node[0].input) == 2


@pytest.mark.parametrize("n,width", [(2, 6), (2, 5), (3, 7), (4, 8)])
@pytest.mark.parametrize("target", [17, 13])
def test_split_num_outputs_of_an_unknown_size(n, width, target):
    """num_outputs on a dimension of unknown size becomes Split-13's split computed from X's
    shape (ceil(d / n) for all but the last part): exact for any size, even or not; below
    13 split is an attribute, a constant, and the conversion is refused."""
    x = np.arange(2 * width, dtype=np.float32).reshape(2, width)
    outs = [f"y{i}" for i in range(n)]
    m = make_model([one("Split", ["x"], outs, axis=-1, num_outputs=n)],
                   [vi("x", F, [2, "w"])], [vi(o, F, 2) for o in outs], opset=18)
    refused = onnx.ModelProto()
    refused.CopyFrom(m)
    roundtrip(m, 18, target, {"x": x})
    split = node(m, "Split")
    assert "num_outputs" not in attrs(split) and len(split.input) == 2
    assert node(m, "Shape").input[0] == "x"
    with pytest.raises(ConversionError, match=r"num_outputs needs the size of the split "
                                              r"dimension \(below opset 13 split is an"):
        convert_other_ops(refused, 18, 11)


def test_split_1_input_to_attribute():
    sp = numpy_helper.from_array(np.array([1, 3], np.int64), "sp")
    m = make_model([one("Split", ["x", "sp"], ["a", "b"])], [vi("x", F, [4])],
                   [vi("a", F, [1]), vi("b", F, [3])], opset=1, initializers=[sp])
    convert(m, 1, 2)
    assert attrs(m.graph.node[0]) == {"split": [1, 3], "axis": 0}
    assert list(m.graph.node[0].input) == ["x"]


def test_dft_axis_attribute_and_input():
    x = np.random.default_rng(7).standard_normal((1, 4, 3, 1)).astype(np.float32)
    m = make_model([one("DFT", ["x"], ["y"])], [vi("x", F, [1, 4, 3, 1])],
                   [vi("y", F, [1, 4, 3, 2])], opset=17)
    roundtrip(m, 17, 20, {"x": x})  # DFT-17's default axis 1 written as DFT-20's input
    roundtrip(m, 20, 17, {"x": x})
    assert attrs(m.graph.node[0]) == {"axis": 1}
    m = make_model([one("DFT", ["x"], ["y"])], [vi("x", F, 4)], [vi("y", F, 4)], opset=20)
    convert(m, 20, 17)  # DFT-20's default axis -2 is the second last
    assert attrs(m.graph.node[0]) == {"axis": 2}
    m = make_model([one("DFT", ["x"], ["y"])], [vi("x", F, None)], [vi("y", F, None)],
                   opset=20)
    with pytest.raises(ConversionError, match=r"DFT-20 -> DFT-17.*rank"):
        convert_other_ops(m, 20, 17)


@pytest.mark.parametrize("const_pads", [True, False])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("target", [13, 11, 2])
def test_pad_axes_spread_over_every_axis_below_18(const_pads, mode, target):
    """Pad-18's constant axes [-1, 0]: below 18 pads covers every axis, axis 1 padded by 0;
    a computed pads read through a Gather (so not below 11, where pads is an attribute)."""
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(np.array([-1, 0], np.int64), "ax")]
    inputs = [vi("x", F, [2, 3, 4])]
    if const_pads:
        inits.append(numpy_helper.from_array(np.array([1, 2, 0, 1], np.int64), "p"))
    else:
        inputs.append(vi("p", I64, [4]))
    m = make_model([one("Pad", ["x", "p", "", "ax"], ["y"], mode=mode)], inputs,
                   [vi("y", F, [5, 3, 5])], opset=18, initializers=inits)
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    if not const_pads:
        feeds["p"] = np.array([1, 2, 0, 1], np.int64)
        if target < 11:
            with pytest.raises(ConversionError, match=r"Pad-11 -> Pad-2.*not a constant"):
                convert_other_ops(m, 18, target)
            return
    roundtrip(m, 18, target, feeds)
    assert [n.op_type for n in m.graph.node][-1] == "Pad"
