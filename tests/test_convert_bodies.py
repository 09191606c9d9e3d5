"""convert writing an op's function body below the op's version: the body's shape arithmetic
folded where it only depends on ranks and constants, its values typed and shaped by onnx's
inference of the body, and the written model computing the op's own values; CastLike below
15 as a Cast; a body that cannot reach the target or does not type-check refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, attrs, converted, make_model, op_types, vi
from convert_helpers import F, convert, convert_other_ops, one, roundtrip
from onnx import TensorProto, helper, numpy_helper
from onnx import TensorProto as T

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.opsets import ir_version_for_opset
from opshift.verify import compare


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
    ops = op_types(c)
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
        assert "LayerNormalization" not in op_types(c) and "Shape" in op_types(c)
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
        assert "Attention" not in op_types(c) and "Softmax" in op_types(c)
        assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"])


def test_folding_keeps_what_it_cannot_know():
    """A dim (not a rank) is never folded: LayerNormalization with static dims keeps its
    Shape nodes; folded values are only small integer constants."""
    m = make_model([helper.make_node("LayerNormalization", ["x", "w"], ["y"], axis=-1)],
                   [vi("x", T.FLOAT, [2, 4])], [vi("y", T.FLOAT, [2, 4])], opset=17,
                   initializers=[numpy_helper.from_array(np.ones(4, np.float32), "w")])
    c = converted(m, 11)
    assert "Shape" in op_types(c)
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
        assert "RotaryEmbedding" not in op_types(c)
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
    assert "Celu" not in op_types(c) and "Elu" not in op_types(c)
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32) * 5
    x[:12] = [3.4028235e38, -3.4028235e38, 0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45,
              1e-30, 88.0, -88.0]
    assert_exact(evaluate(m, {"x": x})["y"], evaluate(c, {"x": x})["y"])


def test_castlike_below_15_becomes_cast():
    like = numpy_helper.from_array(np.zeros((1,), np.float64), "like")
    m = make_model([one("CastLike", ["x", "like"], ["y"])], [vi("x", F, [3])],
                   [vi("y", TensorProto.DOUBLE, [3])], opset=19, initializers=[like])
    changes = roundtrip(m, 19, 13, {"x": np.array([1.5, -2, 3e-8], np.float32)})
    assert [(c.op, c.to_version) for c in changes] == [("CastLike", None)]
    assert [(n.op_type, attrs(n)) for n in m.graph.node] == [("Cast",
                                                             {"to": TensorProto.DOUBLE})]
    m = make_model([one("CastLike", ["x", "like"], ["y"])],
                   [vi("x", F, [3]), vi("like", TensorProto.BFLOAT16, [1])],
                   [vi("y", TensorProto.BFLOAT16, [3])], opset=19)
    with pytest.raises(ConversionError, match=r"CastLike does not exist at opset 9.*"
                                              r"Cast-9 does not take tensor\(bfloat16\)"):
        convert_other_ops(m, 19, 9)


@pytest.mark.parametrize("op,src,target,kw", [
    ("HardSwish", 14, 13, {}), ("HardSwish", 14, 7, {}), ("Mish", 18, 13, {}),
    ("GreaterOrEqual", 16, 11, {}), ("LessOrEqual", 12, 11, {}),
    ("Gelu", 20, 17, {}), ("Gelu", 20, 13, {"approximate": "tanh"}),
    ("LayerNormalization", 17, 13, {"axis": -1}),
    ("Swish", 24, 13, {"alpha": 0.5}),
])
def test_missing_op_written_as_its_function_body(op, src, target, kw):
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(2, 3, 4)
    two = op in ("GreaterOrEqual", "LessOrEqual")
    inputs = [vi("x", F, [2, 3, 4])] + ([vi("z", F, [2, 3, 4])] if two else [])
    inits = []
    names = ["x", "z"] if two else ["x"]
    if op == "LayerNormalization":
        inits = [numpy_helper.from_array(np.linspace(0.5, 2, 4, dtype=np.float32), "g"),
                 numpy_helper.from_array(np.linspace(-1, 1, 4, dtype=np.float32), "b")]
        names = ["x", "g", "b"]
    out = TensorProto.BOOL if two else F
    m = make_model([one(op, names, ["y"], **kw)], inputs, [vi("y", out, [2, 3, 4])],
                   opset=src, initializers=inits)
    feeds = {"x": x, "z": np.round(x)} if two else {"x": x}
    # (LayerNormalization's body is written with its variance in two passes, not bit for bit
    # the body: tests/test_convert_stable_variance.py)
    changes = roundtrip(m, src, target, feeds)
    assert [(c.op, c.to_version, c.action) for c in changes] == [(op, None, "rewrite")]
    assert op not in {n.op_type for n in m.graph.node}
    assert all(n.name.startswith("n_") for n in m.graph.node)  # readable, derived names


def test_function_body_that_cannot_reach_the_target_is_refused():
    m = make_model([one("GreaterOrEqual", ["x", "z"], ["y"])],
                   [vi("x", F, [3]), vi("z", F, [3])], [vi("y", TensorProto.BOOL, [3])],
                   opset=12)
    # Its body's Equal takes floats only from opset 11, and is written out from 7 only.
    with pytest.raises(ConversionError, match=r"GreaterOrEqual does not exist at opset 6.*"
                                              r"function body.*Equal.*below opset 7 Less"):
        convert_other_ops(m, 12, 6)


def test_float16_attention_body_below_23():
    """onnx builds float16 Attention's body with a float32 ConstantOfShape bias cast back, and
    CastLikes whose element types only shape inference of the body tells: written out at
    opset 13 it type-checks and computes the same bits."""
    q = [vi(n, TensorProto.FLOAT16, [1, 2, 3, 4]) for n in ("q", "k", "v")]
    m = make_model([one("Attention", ["q", "k", "v"], ["y"], is_causal=1)], q,
                   [vi("y", TensorProto.FLOAT16, [1, 2, 3, 4])], opset=23)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((1, 2, 3, 4)).astype(np.float16) for n in "qkv"}
    want = evaluate(m, feeds)["y"]
    convert_other_ops(m, 23, 13)
    m.opset_import[0].version = 13
    m.ir_version = ir_version_for_opset(13)
    onnx.checker.check_model(m, full_check=True)
    assert "Attention" not in {n.op_type for n in m.graph.node}
    assert_exact(want, evaluate(m, feeds)["y"])


def test_function_body_that_does_not_type_check_is_refused(monkeypatch):
    """A written body is type-checked on its own at the target: one that mixes element
    types (here a body adding a float to an int64) is refused, never written."""
    from opshift.convert.steps import missing_ops

    body = helper.make_function("", "Mish", ["X"], ["Y"], [
        helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.INT64,
                                                                         [], [1])),
        helper.make_node("Add", ["X", "k"], ["Y"])], [helper.make_opsetid("", 18)])
    monkeypatch.setattr(missing_ops, "_function_body", lambda st: (body, 18))
    m = make_model([one("Mish", ["x"], ["y"])], [vi("x", TensorProto.FLOAT, [2])],
                   [vi("y", TensorProto.FLOAT, [2])], opset=18)
    with pytest.raises(ConversionError, match=r"Mish does not exist at opset 13.*"
                                              r"does not type-check"):
        convert_other_ops(m, 18, 13)


def test_reduce_log_sum_exp_means_its_function_body_at_every_version():
    """ReduceLogSumExp-18's body (Exp, ReduceSum, Log in float64) defines every version: the
    conversion across 18 keeps the values, infinities and overflow included."""
    x = np.array([[100, 100], [3.4e38, 0], [-np.inf, 1], [800, 0]], np.float32)
    m = make_model([one("ReduceLogSumExp", ["x"], ["y"], axes=[1])], [vi("x", F, [4, 2])],
                   [vi("y", F, [4, 1])], opset=13)
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert(m, 13, 18)
    with np.errstate(over="ignore"):  # exp(3.4e38) is inf by design
        want = np.log(np.sum(np.exp(x.astype(np.float64)), axis=1, keepdims=True)).astype(
            np.float32)
    for model in (before, m):
        got = evaluate(model, {"x": x})["y"]
        assert compare(want, got, ulp=0).ok, got
    assert np.isinf(want[1, 0]) and want[0, 0] == np.float32(100 + np.log(2))


def test_other_domain_body_that_needs_newer_ai_onnx_is_refused_going_down():
    """ai.onnx.preview::FlexAttention is defined by a function body in ai.onnx ops that does
    not import ai.onnx: it runs at the model's ai.onnx opset, where (below 15) its Shape has
    no 'start'. convert keeps the node but refuses an opset its body does not fit."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    from opshift.convert import convert as convert_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = next((c for c in collect_testcases(None) if c.name == "test_flexattention"),
                    None)
    if case is None:
        pytest.skip("this onnx has no FlexAttention node test")
    with pytest.raises(ConversionError, match=r"ai.onnx.preview::FlexAttention-1.*its function "
                                              r"body uses Shape's 'start', which Shape-13"):
        convert_model(case.model, 13)
    m = convert_model(case.model, 20)
    assert [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] == [20]
    inputs, expected = case.data_sets[0]
    got = evaluate(m, {v.name: np.asarray(t) for v, t in zip(m.graph.input, inputs)})
    np.testing.assert_allclose(got[m.graph.output[0].name], np.asarray(expected[0]),
                               rtol=1e-5, atol=1e-6)

def test_folding_asks_the_one_table_of_foldable_ops():
    """The body fold and the graph's values computed from constants share one table
    (graph.constant_values.FOLDABLE): sums and products on integers only; an op whose
    output's size is read from values (ConstantOfShape, Expand, Tile; Range's length the body
    fold bounds first) is left to run in a body, as nothing bounds its size before it does."""
    from opshift.graph.constant_values import FOLDABLE, INTEGER_ONLY, SIZED_BY_VALUES

    assert {"ReduceProd", "ReduceSum"} <= FOLDABLE & INTEGER_ONLY
    assert "Transpose" in FOLDABLE and "ReduceMean" not in FOLDABLE
    assert {"ConstantOfShape", "Expand", "Range", "Tile"} == SIZED_BY_VALUES


def test_integer_product_of_known_dims_is_a_constant():
    """A Reshape's shape computed as the integer ReduceProd of known dims (``x.numel()``)
    is computed from constants: the shape rules know the Reshape's output."""
    from opshift.graph.facts import Facts

    m = make_model([helper.make_node("Shape", ["x"], ["s"]),
                    helper.make_node("ReduceProd", ["s"], ["p"], keepdims=1),
                    helper.make_node("Reshape", ["x", "p"], ["y"])],
                   [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, None)], opset=13)
    assert Facts(m, 13).shape("y") == (24,)
