"""A PRelu slope computed from constants alone is a constant (issue 38, item 3): PyTorch's
TorchScript exports at opset 7 (IR 3) write it as ``Unsqueeze(initializer)``, and MTCNN's
R-Net and O-Net are inlined at 7 as written."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import opshift
from opshift.cli import main
from opshift.errors import ConversionError
from opshift.inline.inliner import inline_proto
from tests.conftest import run_onnxruntime

SLOPE = np.array([0.25, 0.5, 1.5, -0.75], np.float32)


def _torchscript_prelu(slope_nodes, inits, slope: str = "s_u", opset: int = 7
                       ) -> onnx.ModelProto:
    """Conv + PRelu as TorchScript exports it at ``opset`` (IR 3: initializers listed as
    inputs), the slope computed by ``slope_nodes`` from ``inits``."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
             nh.from_array(rng.standard_normal(4).astype(np.float32), "B"), *inits]
    nodes = [h.make_node("Conv", ["x", "W", "B"], ["c"], name="conv1", kernel_shape=[3, 3]),
             *slope_nodes, h.make_node("PRelu", ["c", slope], ["y"], name="prelu1")]
    g = h.make_graph(nodes, "torch-jit-export",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])]
                     + [h.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                        for t in inits],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 6, 6])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=3)
    onnx.checker.check_model(m, full_check=True)
    return m


def _unsqueezed(values=SLOPE) -> onnx.ModelProto:
    return _torchscript_prelu([h.make_node("Unsqueeze", ["s"], ["s_u"], name="unsq",
                                           axes=[1, 2])], [nh.from_array(values, "s")])


def _x() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)


def _inlined_exactly(m: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(m)
    inline_proto(out)
    assert not [n for n in out.graph.node if n.op_type == "PRelu"]
    onnx.checker.check_model(out, full_check=True)
    report = opshift.verify(m, out, {"x": _x()})
    assert report.ok and report.verdict == "ok", report
    np.testing.assert_array_equal(opshift.evaluate(out, {"x": _x()})["y"],
                                  opshift.evaluate(m, {"x": _x()})["y"])
    return out


def test_cli_inline_verify_of_an_unsqueezed_initializer_slope_at_opset_7(tmp_path, capsys):
    src, dst = tmp_path / "rnet7.onnx", tmp_path / "out.onnx"
    onnx.save(_unsqueezed(), src)
    assert main(["inline", str(src), "-o", str(dst), "--verify"]) == 0
    err = capsys.readouterr()
    assert "verify: ok" in err.out + err.err
    out = onnx.load(dst)
    assert out.ir_version == 3 and not [n for n in out.graph.node if n.op_type == "PRelu"]
    assert np.array_equal(opshift.evaluate(out, {"x": _x()})["y"],
                          opshift.evaluate(_unsqueezed(), {"x": _x()})["y"])


def test_inline_of_an_unsqueezed_slope_is_exact_and_onnxruntime_agrees():
    m = _unsqueezed()
    out = _inlined_exactly(m)
    ref = opshift.evaluate(m, {"x": _x()})["y"]
    np.testing.assert_allclose(run_onnxruntime(out, {"x": _x()})[0], ref, rtol=1e-6,
                               atol=1e-6)


def _const(name, array):
    return h.make_node("Constant", [], [name], value=nh.from_array(array, name))


CHAINS = {
    "reshape": ([h.make_node("Reshape", ["s", "shape"], ["s_u"])],
                [nh.from_array(SLOPE, "s"), nh.from_array(np.array([4, 1, 1], np.int64), "shape")]),
    "cast-identity": ([h.make_node("Cast", ["s"], ["s_f"], to=T.FLOAT),
                       h.make_node("Identity", ["s_f"], ["s_i"]),
                       h.make_node("Unsqueeze", ["s_i"], ["s_u"], axes=[1, 2])],
                      [nh.from_array(SLOPE.astype(np.float64), "s")]),
    "constant-squeeze": ([_const("s", SLOPE.reshape(1, 4, 1, 1)),
                          h.make_node("Squeeze", ["s"], ["s_u"], axes=[0])], []),
}


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_slopes_computed_from_constants_are_constants(chain):
    nodes, inits = CHAINS[chain]
    _inlined_exactly(_torchscript_prelu(nodes, inits))


def test_an_expanded_constant_slope_at_opset_8():
    nodes = [h.make_node("Expand", ["s", "shape"], ["s_u"])]
    inits = [nh.from_array(np.float32([0.5]), "s"),
             nh.from_array(np.array([4, 1, 1], np.int64), "shape")]
    _inlined_exactly(_torchscript_prelu(nodes, inits, opset=8))


def test_a_computed_slope_holding_inf_is_refused_as_a_constant_one_is():
    values = SLOPE.copy()
    values[2] = np.inf
    with pytest.raises(ConversionError, match="prelu1"):
        inline_proto(_unsqueezed(values))


def test_a_slope_read_at_run_time_is_still_refused():
    m = _unsqueezed()
    m.graph.input.append(h.make_tensor_value_info("t", T.FLOAT, [4]))
    m.graph.node[1].input[0] = "t"
    with pytest.raises(ConversionError, match="the slope is not a constant"):
        inline_proto(m)
