"""convert: pooling with ceil_mode, exactly, where an exact form exists (issue 15).

* Across 21/22 (a ceil-mode window starting in the end padding is kept before 22, dropped
  from 22): proved absent from the attributes for every input size when
  ``stride + end pad <= dilated kernel extent`` on each axis, so dynamic H/W convert.
* Below 10 (no ceil_mode): with static sizes the same windows are floor-mode windows over
  extra end padding, as PyTorch's TorchScript exporter writes ceil_mode at opset 9.

The models mimic PyTorch's TorchScript exporter (torch 2.x, ``symbolic_opset9/10``) on the
MTCNN P-Net/R-Net stems: Conv -> PRelu (slope ``[C, 1, 1]``) -> MaxPool(ceil_mode=True), with
dynamic axes (``N``, ``H``, ``W``) or static 12x12 / 24x24 inputs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import onnx
import pytest
from conftest import assert_outputs_exact, make_model, run_onnxruntime, vi
from onnx import TensorProto, helper, numpy_helper

from opshift.convert import convert
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

F = TensorProto.FLOAT


def torchscript_stem(*, kernel=2, stride=2, hw=("H", "W"), opset=11, pool="MaxPool",
                     pads=None, ceil_mode=1, **pool_attrs) -> onnx.ModelProto:
    """Conv(3x3) -> PRelu -> pool, as torch.onnx.export writes an MTCNN stem."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
                                "conv1.weight")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "conv1.bias")
    slope = (0.25 + np.arange(4) / 8).astype(np.float32).reshape(4, 1, 1)
    a = numpy_helper.from_array(slope, "prelu1.weight")
    attrs = dict(kernel_shape=[kernel, kernel], strides=[stride, stride], **pool_attrs)
    if ceil_mode is not None:
        attrs["ceil_mode"] = ceil_mode
    if pads is not None:
        attrs["pads"] = pads
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["/conv1/Conv_output_0"],
                         name="/conv1/Conv", kernel_shape=[3, 3], strides=[1, 1],
                         pads=[0, 0, 0, 0], dilations=[1, 1], group=1),
        helper.make_node("PRelu", ["/conv1/Conv_output_0", "prelu1.weight"],
                         ["/prelu1/PRelu_output_0"], name="/prelu1/PRelu"),
        helper.make_node(pool, ["/prelu1/PRelu_output_0"], ["output"], name=f"/pool1/{pool}",
                         **attrs),
    ]
    x_shape = ["N", 3, *hw]
    return make_model(nodes, [vi("input", F, x_shape)], [vi("output", F, 4)], opset=opset,
                      initializers=[w, b, a])


def pool_node(m: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in m.graph.node if n.op_type.endswith("Pool"))


def pool_attrs(m: onnx.ModelProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in pool_node(m).attribute}


def feeds(h: int, w: int) -> dict[str, np.ndarray]:
    x = np.random.default_rng(h * 100 + w).standard_normal((2, 3, h, w)).astype(np.float32)
    x[0, 0, 0, :3] = [np.nan, np.inf, -0.0]
    return {"input": x}


def assert_same_everywhere(before: onnx.ModelProto, after: onnx.ModelProto, feed: dict) -> None:
    """Bit for bit by the evaluator; onnxruntime (second opinion) where it runs both."""
    assert_outputs_exact(evaluate(before, feed), evaluate(after, feed))
    if min(m.opset_import[0].version for m in (before, after)) >= 7:
        want, got = run_onnxruntime(before, feed), run_onnxruntime(after, feed)
        np.testing.assert_array_equal(want[0], got[0])


# ----------------------------------------------------------------------- across 21/22


@pytest.mark.parametrize("kernel,stride", [(2, 2), (3, 2), (3, 3)])  # P-Net, R-Net/O-Net
def test_dynamic_hw_to_22_proved_from_the_attributes(kernel, stride):
    m = torchscript_stem(kernel=kernel, stride=stride)
    out = convert(m, 22)
    assert out.opset_import[0].version == 22 and pool_attrs(out)["ceil_mode"] == 1
    for h, w in [(12, 12), (13, 18), (24, 25)]:
        assert_same_everywhere(m, out, feeds(h, w))
    back = convert(out, 11)  # and down again, by the same proof
    assert pool_attrs(back)["ceil_mode"] == 1


def test_dynamic_hw_refused_where_a_window_can_start_in_the_padding():
    # stride 2 + end pad 1 > window 2: for an even pooled size n the ceil-mode window at n
    # starts in the pad
    m = torchscript_stem(kernel=2, stride=2, pads=[0, 0, 1, 1])
    with pytest.raises(ConversionError, match=r"node '/pool1/MaxPool' \(MaxPool-11 -> 22.*"
                                              r"stride 2 \+ end pad 1 > window 2.*not static"):
        convert(m, 22)
    # static sizes where no window starts there convert; one where it does is refused
    assert pool_attrs(convert(torchscript_stem(kernel=2, stride=2, pads=[0, 0, 1, 1],
                                               hw=(13, 13)), 22))["ceil_mode"] == 1
    with pytest.raises(ConversionError, match=r"axis 0 starts in the padding"):
        convert(torchscript_stem(kernel=2, stride=2, pads=[0, 0, 1, 1], hw=(12, 13)), 22)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_same_auto_pad_never_starts_a_window_in_the_padding(auto_pad):
    m = torchscript_stem(kernel=1, stride=3, ceil_mode=1, auto_pad=auto_pad)
    assert pool_attrs(convert(m, 22))["auto_pad"] == auto_pad.encode()
    # VALID pads nothing: the rule with end pad 0 decides (stride 3 > window 1: refused)
    with pytest.raises(ConversionError, match=r"stride 3 \+ end pad 0 > window 1"):
        convert(torchscript_stem(kernel=1, stride=3, auto_pad="VALID"), 22)


def _last_window_start_in_pad(size, k, s, d, pb, pe) -> bool:
    """The MaxPool-21 schema's ceil-mode output count has a window that MaxPool-22's drops."""
    span = d * (k - 1) + 1
    if size + pb + pe < span:
        return False
    out = math.ceil((size + pb + pe - span) / s + 1)
    return (out - 1) * s >= size + pb


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_the_dynamic_rule_is_exactly_the_schemas(op):
    # Accepted with a dynamic size exactly when no input size has a window that 21 keeps
    # and 22 drops (sizes up to 60 cover every residue of the strides).
    seen = set()
    for k, s, d, pb, pe in itertools.product([1, 2, 3], [1, 2, 3, 4], [1, 2], [0, 1], [0, 1, 2]):
        if pb >= k or pe >= k:
            continue
        attrs = dict(kernel_shape=[k], strides=[s], dilations=[d], pads=[pb, pe], ceil_mode=1)
        m = make_model([helper.make_node(op, ["x"], ["y"], name="p", **attrs)],
                       [vi("x", F, [1, 1, "L"])], [vi("y", F, 3)], opset=21)
        differs = any(_last_window_start_in_pad(n, k, s, d, pb, pe) for n in range(1, 61))
        try:
            convert(m, 22)
            accepted = True
        except ConversionError:
            accepted = False
        assert accepted != differs, (attrs, accepted)
        seen.add(accepted)
    assert seen == {True, False}


# ----------------------------------------------------------------------- below 10


def test_r_net_ceil_mode_to_9_as_end_padding_like_torch_opset9():
    # R-Net: 24x24 -> Conv 3x3 -> 22x22 -> MaxPool(3, 2, ceil_mode=True) -> 11x11
    m = torchscript_stem(kernel=3, stride=2, hw=(24, 24), opset=10)
    out = convert(m, 9)
    a = pool_attrs(out)
    assert "ceil_mode" not in a and a["pads"] == [0, 0, 1, 1]
    assert_same_everywhere(m, out, feeds(24, 24))
    # torch.onnx.export(opset_version=9) writes pads [0, 0, 2, 2] for this pool: the same
    torch9 = torchscript_stem(kernel=3, stride=2, hw=(24, 24), opset=9, ceil_mode=None,
                              pads=[0, 0, 2, 2])
    assert_outputs_exact(evaluate(torch9, feeds(24, 24)), evaluate(out, feeds(24, 24)))
    assert_same_everywhere(m, convert(out, 10), feeds(24, 24))  # and back up


def test_ceil_mode_below_10_without_extra_padding_is_dropped():
    # P-Net: 12x12 -> 10x10 -> MaxPool(2, 2, ceil) -> 5x5, same as floor
    m = torchscript_stem(kernel=2, stride=2, hw=(12, 12), opset=10)
    out = convert(m, 1)
    assert "ceil_mode" not in pool_attrs(out) and "pads" not in pool_attrs(out)
    assert_same_everywhere(m, out, feeds(12, 12))
    # stride 1: ceil and floor agree for every size, dynamic H/W included
    m = torchscript_stem(kernel=3, stride=1, opset=10)
    out = convert(m, 9)
    assert "ceil_mode" not in pool_attrs(out)
    assert_same_everywhere(m, out, feeds(13, 17))


def test_average_pool_ceil_mode_below_10():
    m = torchscript_stem(kernel=3, stride=2, hw=(24, 24), opset=10, pool="AveragePool")
    out = convert(m, 7)
    assert pool_attrs(out)["pads"] == [0, 0, 1, 1] and "ceil_mode" not in pool_attrs(out)
    assert_same_everywhere(m, out, feeds(24, 24))
    # count_include_pad=1 counts explicit pads but not the ceil overhang: refused
    m = torchscript_stem(kernel=3, stride=2, hw=(24, 24), opset=10, pool="AveragePool",
                         count_include_pad=1)
    with pytest.raises(ConversionError, match=r"node '/pool1/AveragePool' \(AveragePool-10 "
                                              r"-> 7.*count_include_pad=1"):
        convert(m, 7)


def test_ceil_mode_below_10_refusals():
    with pytest.raises(ConversionError, match=r"'/pool1/MaxPool'.*MaxPool-10 -> MaxPool-8.*"
                                              r"static spatial dims"):
        convert(torchscript_stem(kernel=2, stride=2, opset=10), 9)
    # 7x7 -> 5x5: MaxPool(1, 3, ceil) has a window at 6 >= 5, past the input
    with pytest.raises(ConversionError, match=r"starts in the end padding"):
        convert(torchscript_stem(kernel=1, stride=3, hw=(7, 7), opset=10), 9)
    # VALID: the schema's formula gives floor's windows, runtimes ceil's; 21 -> 19 differ
    with pytest.raises(ConversionError, match=r"auto_pad=VALID"):
        convert(torchscript_stem(kernel=2, stride=2, hw=(23, 23), opset=10,
                                 auto_pad="VALID"), 9)
