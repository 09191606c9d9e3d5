"""convert writing an op's function body below the op's version: the body's shape arithmetic
folded where it only depends on ranks and constants, its values typed and shaped by onnx's
inference of the body, and the written model computing the op's own values."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def _ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node]


def _rms(shape, axis: int = -1) -> onnx.ModelProto:
    return make_model([helper.make_node("RMSNormalization", ["x", "scale"], ["y"], axis=axis)],
                      [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, shape)], opset=23,
                      initializers=[numpy_helper.from_array(
                          np.linspace(0.5, 2.0, 8, dtype=np.float32), "scale")])


@pytest.mark.parametrize("target", [17, 13, 11, 7])
def test_rms_normalization_with_symbolic_dims_below_18(target):
    """Its body takes ReduceMean's axes from Range(axis, Size(Shape(X)), 1): X's rank (3,
    with batch and sequence dims symbolic) makes them the constant [2], which ReduceMean
    below 18 takes as an attribute. No dim is baked in: two batch sizes run."""
    m = _rms(["batch", "seq", 8])
    c = converted(m, target)
    ops = _ops(c)
    assert "RMSNormalization" not in ops and "Range" not in ops and "Size" not in ops
    reduce_mean = next(n for n in c.graph.node if n.op_type == "ReduceMean")
    assert helper.get_attribute_value(reduce_mean.attribute[0]) == [2]
    rng = np.random.default_rng(target)
    for batch in (1, 3):
        x = rng.standard_normal((batch, 5, 8)).astype(np.float32)
        x[0, 0, :3] = [0.0, -0.0, 1e-30]
        assert_exact(evaluate(m, {"x": x})["y"], evaluate(c, {"x": x})["y"])


def test_rms_normalization_of_unknown_rank_is_refused_below_18():
    m = _rms(None)
    with pytest.raises(ConversionError, match=r"ReduceMean.*axes .* is not a constant"):
        convert_proto(m, 17)


def test_layer_normalization_below_13():
    """Its body's ConstantOfShape is typed by inference (the schema leaves its type open)
    and its Shape output is int64: the body converts down to opset 9, exactly, and the
    shapes it reads stay computed (Shape nodes kept) so another batch size runs. Its
    variance is written in two passes (tests/test_convert_stable_variance.py): the output is
    within 2e-6 of the output's range of float64's, not the body's float32 rounding."""
    shape = ["n", 3, 4]
    m = make_model([helper.make_node("LayerNormalization", ["x", "w", "b"], ["y"], axis=1)],
                   [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, shape)], opset=17,
                   initializers=[numpy_helper.from_array(np.full((3, 4), 1.5, np.float32), "w"),
                                 numpy_helper.from_array(np.full((3, 4), -0.25, np.float32),
                                                         "b")])
    for target in (11, 9):
        c = converted(m, target)
        assert "LayerNormalization" not in _ops(c) and "Shape" in _ops(c)
        rng = np.random.default_rng(target)
        for n in (1, 2):
            x = rng.standard_normal((n, 3, 4)).astype(np.float32)
            x64 = x.astype(np.float64)
            mean = x64.mean(axis=(1, 2), keepdims=True)
            var = ((x64 - mean) ** 2).mean(axis=(1, 2), keepdims=True)
            want = (x64 - mean) / np.sqrt(var + 1e-5) * 1.5 - 0.25
            got = evaluate(c, {"x": x})["y"]
            assert np.abs(got - want).max() < 2e-6 * (want.max() - want.min())


@pytest.mark.parametrize("dtype,elem", [(np.float32, T.FLOAT), (np.float16, T.FLOAT16)])
def test_attention_below_23(dtype, elem):
    """Attention-23's body needs Softmax's input rank (Softmax-11 coerces to 2-D) and its
    CastLikes' types: both from inference of the body. Causal, float32 and float16."""
    q = [vi(n, elem, [2, 2, 3, 4]) for n in ("q", "k", "v")]
    m = make_model([helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)], q,
                   [vi("y", elem, [2, 2, 3, 4])], opset=23)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((2, 2, 3, 4)).astype(dtype) for n in "qkv"}
    for target in (13, 11):
        c = converted(m, target)
        assert "Attention" not in _ops(c) and "Softmax" in _ops(c)
        assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"])


def test_folding_keeps_what_it_cannot_know():
    """A dim (not a rank) is never folded: LayerNormalization with static dims keeps its
    Shape nodes; folded values are only small integer constants."""
    m = make_model([helper.make_node("LayerNormalization", ["x", "w"], ["y"], axis=-1)],
                   [vi("x", T.FLOAT, [2, 4])], [vi("y", T.FLOAT, [2, 4])], opset=17,
                   initializers=[numpy_helper.from_array(np.ones(4, np.float32), "w")])
    c = converted(m, 11)
    assert "Shape" in _ops(c)
    for n in c.graph.node:
        if n.op_type == "Constant":
            t = n.attribute[0].t
            assert t.data_type != T.INT64 or len(t.dims) <= 1


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rank", [4, 3])
def test_rotary_embedding_below_23(interleaved, rank):
    """onnx builds RotaryEmbedding's body from X's rank (given without its dims, which may be
    placeholders); the body splits X's last axis by num_outputs, which below 18 is a split
    computed from X's shape. Batch and sequence symbolic: two sequence lengths run. Below
    13, where split is an attribute (a constant), refused."""
    heads, size = 2, 8
    shape = ["batch", heads, "seq", size] if rank == 4 else ["batch", "seq", heads * size]
    attrs = {"interleaved": interleaved} | ({"num_heads": heads} if rank == 3 else {})
    m = make_model([helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                                     **attrs)],
                   [vi("x", T.FLOAT, shape), vi("cos", T.FLOAT, [16, size // 2]),
                    vi("sin", T.FLOAT, [16, size // 2]), vi("pos", T.INT64, ["batch", "seq"])],
                   [vi("y", T.FLOAT, shape)], opset=23)
    rng = np.random.default_rng(rank + interleaved)
    angles = rng.uniform(0, np.pi, (16, size // 2))
    for target in (17, 13):
        c = converted(m, target)
        assert "RotaryEmbedding" not in _ops(c)
        for seq in (3, 5):
            dims = (2, heads, seq, size) if rank == 4 else (2, seq, heads * size)
            feeds = {"x": rng.standard_normal(dims).astype(np.float32),
                     "cos": np.cos(angles).astype(np.float32),
                     "sin": np.sin(angles).astype(np.float32),
                     "pos": rng.integers(0, 16, (2, seq)).astype(np.int64)}
            assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"])
    with pytest.raises(ConversionError, match=r"split .* is not a constant"):
        converted(m, 11)


@pytest.mark.parametrize("alpha", [0.7, 2.0, 1e-3])
@pytest.mark.parametrize("target", [11, 9, 6, 1])
def test_celu_below_12_is_its_formula(alpha, target):
    """Celu goes below 12 as max(x, 0) + min(0, alpha * (exp(x / alpha) - 1)), not as onnx's
    body alpha * Elu(x / alpha), which rounds positive x and overflows near the largest
    float for alpha < 1: bit for bit at the extremes, signed zeros and NaN included."""
    m = make_model([helper.make_node("Celu", ["x"], ["y"], alpha=alpha)],
                   [vi("x", T.FLOAT, [64])], [vi("y", T.FLOAT, [64])], opset=12)
    c = converted(m, target)
    assert "Celu" not in _ops(c) and "Elu" not in _ops(c)
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32) * 5
    x[:12] = [3.4028235e38, -3.4028235e38, 0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45,
              1e-30, 88.0, -88.0]
    assert_exact(evaluate(m, {"x": x})["y"], evaluate(c, {"x": x})["y"])
