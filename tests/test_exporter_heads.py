"""Classifier heads as exporters write them, whose ranks only the ops' own definitions fix
(onnx's shape inference leaves them unknown): conversion across Softmax-13 and an
inline -> fuse round trip of a PRelu on a Gemm output (issue 15)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_outputs_exact, make_model, run_onnxruntime, vi
from fuse_helpers import ops, same_numbers
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opshift.convert import convert
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.fuse.driver import fuse_with_result
from opshift.inline import inline

RNG = np.random.default_rng(7)
C, K = 4, 10  # channels after the Conv, classes


def _c(name: str, value, dtype=np.int64) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.asarray(value, dtype)))


def _view_flat(x: str, opset: int) -> list[onnx.NodeProto]:
    """``x.view(x.size(0), -1)`` as the TorchScript exporter writes it (a computed shape)."""
    unsqueeze = ([_c("14", [0]), helper.make_node("Unsqueeze", ["13", "14"], ["15"])]
                 if opset >= 13 else [helper.make_node("Unsqueeze", ["13"], ["15"], axes=[0])])
    return [helper.make_node("Shape", [x], ["11"]), _c("12", 0),
            helper.make_node("Gather", ["11", "12"], ["13"], axis=0),
            *unsqueeze, _c("16", [-1]),
            helper.make_node("Concat", ["15", "16"], ["17"], axis=0),
            helper.make_node("Reshape", [x, "17"], ["18"])]


def torchscript_head(opset: int, batch, flatten: str, act: str = "Softmax",
                     axis: int = 1) -> onnx.ModelProto:
    """Conv -> Relu -> GlobalAveragePool -> flatten -> Linear -> softmax(dim=1), exported by
    the TorchScript exporter at ``opset`` (7: IR 3, initializers listed as inputs) with the
    batch dim ``batch`` (a name: a dynamic axis); ``flatten``: 'view' or 'flatten'."""
    inits = [numpy_helper.from_array(RNG.standard_normal((C, 3, 3, 3)).astype(np.float32),
                                     "conv.weight"),
             numpy_helper.from_array(RNG.standard_normal((K, C)).astype(np.float32),
                                     "fc.weight"),
             numpy_helper.from_array(RNG.standard_normal(K).astype(np.float32), "fc.bias")]
    nodes = [helper.make_node("Conv", ["input", "conv.weight"], ["8"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("Relu", ["8"], ["9"]),
             helper.make_node("GlobalAveragePool", ["9"], ["10"])]
    nodes += (_view_flat("10", opset) if flatten == "view"
              else [helper.make_node("Flatten", ["10"], ["18"], axis=1)])
    nodes += [helper.make_node("Gemm", ["18", "fc.weight", "fc.bias"], ["19"], alpha=1.0,
                               beta=1.0, transB=1),
              helper.make_node(act, ["19"], ["output"], axis=axis)]
    ir = 3 if opset < 8 else 6
    m = make_model(nodes, [vi("input", shape=[batch, 3, 6, 6])],
                   [vi("output", shape=[batch, K])], opset=opset, initializers=inits,
                   ir_version=ir)
    m.graph.name = "torch_jit"
    if ir < 4:
        m.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                             for t in inits)
    return m


CASES = [(7, 1, "view"), (7, 1, "flatten"), (11, "batch_size", "view"),
         (9, "batch_size", "view")]


@pytest.mark.parametrize("target", [13, 18])
@pytest.mark.parametrize("opset,batch,flatten", CASES)
@pytest.mark.parametrize("act", ["Softmax", "LogSoftmax"])
def test_classifier_head_crosses_softmax_13_exactly(opset, batch, flatten, act, target):
    m = torchscript_head(opset, batch, flatten, act)
    out = convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    (node,) = [n for n in out.graph.node if n.op_type == act]
    assert [a.i for a in node.attribute if a.name == "axis"] == [1]  # 2-D: the last axis
    assert [n.op_type for n in out.graph.node if n.op_type in ("Transpose", "Flatten")] == (
        ["Flatten"] if flatten == "flatten" else [])  # nothing added around the op
    for n in (1, 3) if batch != 1 else (1,):
        feeds = {"input": RNG.standard_normal((n, 3, 6, 6)).astype(np.float32)}
        want = evaluate(m, feeds)
        assert_outputs_exact(want, evaluate(out, feeds), f"batch {n}")
        got = run_onnxruntime(out, feeds)[0]
        np.testing.assert_allclose(got, want["output"], rtol=1e-5, atol=1e-6)


def test_classifier_head_back_down_to_its_opset():
    m = torchscript_head(11, "batch_size", "view")
    up = convert(m, 13)
    down = convert(up, 11)
    feeds = {"input": RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)}
    assert_outputs_exact(evaluate(m, feeds), evaluate(down, feeds))


def test_softmax_after_an_op_of_unknown_rank_is_still_refused():
    """A custom op's output: no rule knows its rank, so the coerced axis=1 cannot be told
    from the single-axis form."""
    nodes = [helper.make_node("Mystery", ["x"], ["h"], domain="vendor"),
             helper.make_node("Softmax", ["h"], ["y"], axis=1, name="sm")]
    m = make_model(nodes, [vi("x", shape=["N", 3, 4])], [vi("y")], opset=11,
                   extra_opsets=[helper.make_opsetid("vendor", 1)])
    with pytest.raises(ConversionError, match=r"'sm'.*Softmax-11.*rank of 'h' is unknown"):
        convert(m, 13)


def test_softmax_after_a_reshape_to_a_shape_of_unknown_length_is_still_refused():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["h"]),
             helper.make_node("Softmax", ["h"], ["y"], axis=1, name="sm")]
    m = make_model(nodes, [vi("x", shape=["N", 12]), vi("shape", TP.INT64, [None])],
                   [vi("y")], opset=11)
    with pytest.raises(ConversionError, match=r"'sm'.*rank of 'h' is unknown"):
        convert(m, 13)


def gemm_prelu(opset: int, view: bool) -> onnx.ModelProto:
    """Linear -> PReLU(num_parameters=K) with a dynamic batch: the [K] slope is per channel
    (the last axis of the 2-D Gemm output)."""
    inits = [numpy_helper.from_array(RNG.standard_normal((K, 12)).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal(K).astype(np.float32), "b"),
             numpy_helper.from_array(np.linspace(-1.5, 1.5, K, dtype=np.float32), "slope")]
    nodes = (_view_flat("input", opset) if view
             else [helper.make_node("Flatten", ["input"], ["18"])])
    nodes += [helper.make_node("Gemm", ["18", "w", "b"], ["19"], transB=1),
              helper.make_node("PRelu", ["19", "slope"], ["output"])]
    m = make_model(nodes, [vi("input", shape=["batch", 3, 4])], [vi("output", shape=["batch", K])],
                   opset=opset,
                   initializers=inits)
    return m


@pytest.mark.parametrize("opset", [9, 11, 13, 17])
@pytest.mark.parametrize("view", [True, False])
def test_inline_then_fuse_gives_prelu_back_on_a_gemm_output(opset, view):
    m = gemm_prelu(opset, view)
    inlined = inline(m)
    assert "PRelu" not in ops(inlined)
    fused, result = fuse_with_result(inlined)
    assert ops(fused) == ops(m), result.lines()
    onnx.checker.check_model(fused, full_check=True)
    x = RNG.standard_normal((3, 3, 4)).astype(np.float32)
    x[0, 0, :2] = [0.0, -0.0]
    same_numbers(m, fused, {"input": x})
