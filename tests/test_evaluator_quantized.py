"""ConvInteger, QLinearConv, MatMulInteger and QLinearMatMul against onnx.reference's
kernels, exactly: random geometry (Conv 1-D to 3-D, groups, strides, dilations, pads;
MatMul with batch broadcasting), uint8 and int8, zero points absent, scalar, per output
channel or column, B given or not; the per-row form onnx.reference cannot run, against its
formula; half-way rounding and clipping; onnx's node tests; errors named."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_onnx_node_tests, init, make_model
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate


def _vi(name, dtype, shape=None):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                         shape)


def _geometry(rng, nd, group):
    spatial = [int(rng.integers(3, 9 if nd < 3 else 5)) for _ in range(nd)]
    kernel = [int(rng.integers(1, 4)) for _ in range(nd)]
    attrs = {"strides": [int(rng.integers(1, 3)) for _ in range(nd)],
             "dilations": [int(rng.integers(1, 3)) for _ in range(nd)],
             "pads": [int(rng.integers(0, k)) for k in kernel * 2]}
    if group > 1:
        attrs["group"] = group
    spatial = [max(i, (k - 1) * d + 1) for i, k, d in zip(spatial, kernel, attrs["dilations"])]
    c, m = group * int(rng.integers(1, 4)), group * int(rng.integers(1, 4))
    return spatial, kernel, c, m, attrs


def _ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


CASES = [(nd, group, dtype) for nd in (1, 2, 3) for group in (1, 2)
         for dtype in (np.uint8, np.int8)]


@pytest.mark.parametrize("nd,group,dtype", CASES)
@pytest.mark.parametrize("seed", range(3))
def test_conv_integer_matches_onnx_reference(nd, group, dtype, seed):
    rng = np.random.default_rng([CASES.index((nd, group, dtype)), seed])
    spatial, kernel, c, m, attrs = _geometry(rng, nd, group)
    x = _ints(rng, dtype, [2, c, *spatial])
    w = _ints(rng, dtype, [m, c // group, *kernel])
    inits = [init("w", w), init("xz", _ints(rng, dtype, []))]
    ins = ["x", "w", "xz"]
    if seed:  # per output channel (onnx.reference reads it as 2-D only), else scalar
        inits.append(init("wz", _ints(rng, dtype, [m]) if nd == 2 else _ints(rng, dtype, [])))
        ins.append("wz")
    m_ = make_model([helper.make_node("ConvInteger", ins, ["y"], **attrs)],
                    [_vi("x", dtype, list(x.shape))], [_vi("y", np.int32)], opset=10,
                    initializers=inits)
    got = evaluate(m_, {"x": x})["y"]
    want = ReferenceEvaluator(m_).run(None, {"x": x})[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("nd,group,dtype", CASES)
@pytest.mark.parametrize("seed", range(3))
def test_qlinear_conv_matches_onnx_reference(nd, group, dtype, seed):
    rng = np.random.default_rng([CASES.index((nd, group, dtype)), seed, 7])
    spatial, kernel, c, m, attrs = _geometry(rng, nd, group)
    x = _ints(rng, dtype, [1, c, *spatial])
    w = _ints(rng, dtype, [m, c // group, *kernel])
    per_channel = seed == 1 and nd == 2
    w_scale = (rng.random(m if per_channel else ()) * 0.02 + 0.001).astype(np.float32)
    w_zp = _ints(rng, dtype, [m] if per_channel else [])
    inits = [init("xs", np.float32(rng.random() * 0.05 + 0.001)),
             init("xz", _ints(rng, dtype, [])), init("w", w), init("ws", w_scale),
             init("wz", w_zp), init("ys", np.float32(rng.random() * 0.5 + 0.01))]
    inits.append(init("yz", _ints(rng, dtype, [])))
    ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if seed != 2:  # B given, else absent
        inits.append(init("b", rng.integers(-5000, 5000, m).astype(np.int32)))
        ins.append("b")
    m_ = make_model([helper.make_node("QLinearConv", ins, ["y"], **attrs)],
                    [_vi("x", dtype, list(x.shape))], [_vi("y", dtype)], opset=10,
                    initializers=inits)
    got = evaluate(m_, {"x": x})["y"]
    want = ReferenceEvaluator(m_).run(None, {"x": x})[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("prefix", ["test_qlinearconv", "test_convinteger"])
def test_onnx_node_tests_give_their_expected_outputs(prefix):
    assert_onnx_node_tests(prefix, at_least=1)


def test_zero_point_that_fits_no_channel_is_named():
    x = np.zeros((1, 2, 3, 3), np.uint8)
    m = make_model([helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], name="ci")],
                   [_vi("x", np.uint8, [1, 2, 3, 3])], [_vi("y", np.int32)], opset=10,
                   initializers=[init("w", np.zeros((4, 2, 1, 1), np.uint8)),
                                 init("xz", np.uint8(0)), init("wz", np.zeros(3, np.uint8))])
    with pytest.raises(EvaluationError, match=r"node 'ci' \(ConvInteger-10.*zero point of "
                                              r"shape \[3\] does not fit \[4, 2, 1, 1\]"):
        evaluate(m, {"x": x})


def test_qlinear_conv_rounds_half_to_even_and_clips():
    """Scaled sums of 0.5, 1.5, 2.5 and 100.5 shifted by a zero point of 200: 200, 202, 202,
    and 300 clipped to 255."""
    x = np.array([1, 3, 5, 201], np.uint8).reshape(1, 1, 4, 1)
    m = make_model([helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys",
                                                     "yz"], ["y"])],
                   [_vi("x", np.uint8, [1, 1, 4, 1])], [_vi("y", np.uint8)], opset=10,
                   initializers=[init("xs", np.float32(0.5)), init("xz", np.uint8(0)),
                                 init("w", np.ones((1, 1, 1, 1), np.uint8)),
                                 init("ws", np.float32(1)), init("wz", np.uint8(0)),
                                 init("ys", np.float32(1)), init("yz", np.uint8(200))])
    assert evaluate(m, {"x": x})["y"].reshape(-1).tolist() == [200, 202, 202, 255]


MM_CASES = [(shapes, dtype) for shapes in (((5, 7), (7, 3)), ((2, 5, 7), (7, 4)),
                                          ((3, 1, 4, 6), (2, 6, 5)))
            for dtype in (np.uint8, np.int8)]


@pytest.mark.parametrize("shapes,dtype", MM_CASES)
@pytest.mark.parametrize("zps", ["none", "scalar", "column"])
def test_matmul_integer_matches_onnx_reference(shapes, dtype, zps):
    rng = np.random.default_rng([MM_CASES.index((shapes, dtype)), len(zps)])
    a, b = _ints(rng, dtype, shapes[0]), _ints(rng, dtype, shapes[1])
    inits, ins = [init("b", b)], ["a", "b"]
    if zps != "none":
        inits += [init("az", _ints(rng, dtype, [])),
                  init("bz", _ints(rng, dtype, [shapes[1][-1]] if zps == "column" else []))]
        ins += ["az", "bz"]
    m = make_model([helper.make_node("MatMulInteger", ins, ["y"])],
                   [_vi("a", dtype, list(a.shape))], [_vi("y", np.int32)], opset=10,
                   initializers=inits)
    got = evaluate(m, {"a": a})["y"]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"a": a})[0])


@pytest.mark.parametrize("shapes,dtype", MM_CASES)
@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_matmul_matches_onnx_reference(shapes, dtype, opset):
    rng = np.random.default_rng([MM_CASES.index((shapes, dtype)), opset])
    a, b = _ints(rng, dtype, shapes[0]), _ints(rng, dtype, shapes[1])
    n = shapes[1][-1]
    inits = [init("as", np.float32(rng.random() * 0.05 + 0.001)),
             init("az", _ints(rng, dtype, [])), init("b", b),
             init("bs", (rng.random(n) * 0.05 + 0.001).astype(np.float32)),
             init("bz", _ints(rng, dtype, [n])), init("ys", np.float32(rng.random() + 0.01)),
             init("yz", _ints(rng, dtype, []))]
    m = make_model([helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys",
                                                       "yz"], ["y"])],
                   [_vi("a", dtype, list(a.shape))], [_vi("y", dtype)], opset=opset,
                   initializers=inits)
    got = evaluate(m, {"a": a})["y"]
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"a": a})[0])


def test_per_row_quantization_of_a_2d_a():
    """ONNX's per-row form of a 2-D A: [M] zero points and scales, one per row (M != K here;
    onnx.reference's kernel broadcasts them along K instead and cannot run it)."""
    rng = np.random.default_rng(3)
    a, b = _ints(rng, np.uint8, [3, 4]), _ints(rng, np.uint8, [4, 2])
    az = np.array([1, 100, 255], np.uint8)
    a_scale = np.array([0.5, 0.25, 2.0], np.float32)
    exact = (a.astype(np.int64) - az[:, None]) @ (b.astype(np.int64) - 7)
    mi = make_model([helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
                    [_vi("a", np.uint8, [3, 4])], [_vi("y", np.int32)], opset=10,
                    initializers=[init("b", b), init("az", az), init("bz", np.uint8(7))])
    np.testing.assert_array_equal(evaluate(mi, {"a": a})["y"], exact)
    mq = make_model([helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys",
                                                        "yz"], ["y"])],
                    [_vi("a", np.uint8, [3, 4])], [_vi("y", np.uint8)], opset=21,
                    initializers=[init("as", a_scale), init("az", az), init("b", b),
                                  init("bs", np.float32(0.5)), init("bz", np.uint8(7)),
                                  init("ys", np.float32(64)), init("yz", np.uint8(128))])
    want = np.clip(np.rint(exact * (a_scale[:, None] * np.float32(0.5) / np.float32(64))
                           .astype(np.float64) + 128), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(evaluate(mq, {"a": a})["y"], want)


@pytest.mark.parametrize("prefix", ["test_qlinearmatmul", "test_matmulinteger"])
def test_onnx_matmul_node_tests_give_their_expected_outputs(prefix):
    test_onnx_node_tests_give_their_expected_outputs(prefix)
