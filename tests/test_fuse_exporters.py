"""fuse on models shaped like exporters' output (``tests/exporter_models.py`` says which
exporter and version each mimics): what is fused by default, what only with allow_rounding,
what is refused and why -- every fusion checked with the evaluator on special values
(signed zeros included), by ``verify_fuse`` as ``fuse --verify`` runs it, and by onnxruntime
as a second opinion."""

from __future__ import annotations

import exporter_models as em
import ml_dtypes
import numpy as np
import onnx
import pytest
from exporter_models import Form
from onnx import numpy_helper

from opshift import evaluate
from opshift.fuse.driver import fuse_proto, fuse_with_result, verify_fuse
from opshift.verify import compare, make_inputs

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ACTS = ("PRelu", "LeakyRelu", "Selu")

FORMS: dict[str, Form] = {  # name -> what it mimics, what fuse makes of it
    "tf2onnx_prelu_shared_axes": Form(
        "tf2onnx 1.17.0, Keras PReLU(shared_axes=[1, 2]) after Conv2D: "
        "Relu(x) + (-alpha [1,C,1,1]) * Relu(Neg(x))", em.tf2onnx_prelu_shared_axes,
        rounding="PRelu", reason="at x = -0 the pattern gives +0"),
    "tf2onnx_prelu_nhwc": Form(
        "tf2onnx 1.17.0, Keras PReLU() on NHWC (alpha [H,W,C]) after the Conv's Transpose",
        em.tf2onnx_prelu_nhwc, rounding="PRelu", reason="at x = -0"),
    "tf2onnx_prelu_dense": Form(
        "tf2onnx 1.17.0, Keras PReLU() after Dense (alpha [F], one > 1)", em.tf2onnx_prelu_dense,
        rounding="PRelu", reason="at x = -0"),
    "tf2onnx_prelu_one_alpha": Form(
        "tf2onnx 1.17.0, Keras PReLU(shared_axes=[1, 2, 3]): one alpha", em.tf2onnx_prelu_one_alpha,
        rounding="LeakyRelu", reason="at x = -0"),
    "keras2onnx_prelu_ops": Form(
        "keras2onnx 1.7.0 TF-op path, PReLU(shared_axes=[1, 2]): Neg(Identity(alpha))",
        em.keras2onnx_prelu_ops, rounding="PRelu", reason="at x = -0"),
    "keras2onnx_prelu_ops_no_shared_axes": Form(
        "keras2onnx 1.7.0 TF-op path, PReLU(): alpha [H,W,C]",
        em.keras2onnx_prelu_ops_no_shared_axes, rounding="PRelu", reason="at x = -0"),
    "keras2onnx_tf1_leaky_relu": Form(
        "keras2onnx 1.7.0, TF 1.12 tf.nn.leaky_relu(alpha=0.2): Identity(Max(0.2*x, x))",
        em.tf1_leaky_relu_maximum, fused="LeakyRelu"),
    "tf2onnx_tf1_leaky_relu_alpha_1": Form(
        "tf2onnx 1.17.0, TF 1.12 tf.nn.leaky_relu(alpha=1) (its rewriter skips alpha >= 1)",
        lambda: em.tf1_leaky_relu_maximum(1.0, identity=False), fused="LeakyRelu"),
    "tf2onnx_tf1_leaky_relu_alpha_2": Form(
        "tf2onnx 1.17.0, TF 1.12 tf.nn.leaky_relu(alpha=2): Max(2*x, x) is 2x for x > 0",
        lambda: em.tf1_leaky_relu_maximum(2.0, identity=False), reason="slope 2.0 > 1"),
    "tf_maximum_per_channel": Form(
        "tf2onnx/keras2onnx, tf.maximum(x, alpha * x) with alpha [C] in (0, 1]",
        em.tf_maximum_per_channel, fused="PRelu"),
    "tf2onnx_keras22_selu": Form(
        "tf2onnx 1.17.0, standalone Keras 2.2 selu: scale*Where(x > 0, Elu(x), alpha*Elu(x))",
        em.keras_selu_tf2onnx, rounding="Selu", reason="rounds differently from Selu"),
    "torchscript_where": Form(
        "torch 2.x TorchScript, torch.where(x > 0, x, w * x), w [C,1,1] > 0",
        em.torchscript_where, fused="PRelu"),
    "torchscript_where_negative_weight": Form(
        "torch 2.x TorchScript, torch.where(x > 0, x, w * x), a negative w",
        lambda: em.torchscript_where(em.MIXED), rounding="PRelu",
        reason="slope element -0.5 is negative"),
    "torchscript_where_scalar": Form(
        "torch 2.x TorchScript, torch.where(x > 0, x, 0.2 * x)", em.torchscript_where_scalar,
        fused="LeakyRelu"),
    "torchscript_clamps": Form(
        "torch 2.x TorchScript opset 17, clamp(x, min=0) + w * clamp(x, max=0)",
        em.torchscript_clamps, reason="Clip without a max clamps +inf"),
    "torchscript_clamps_opset9": Form(
        "torch 2.x TorchScript opset 9, clamp(x, min=0) + w * clamp(x, max=0): Clip-6",
        lambda: em.torchscript_clamps(9), reason="Clip without a max clamps +inf"),
    "torchscript_clamps_bounded": Form(
        "torch 2.x TorchScript opset 17, clamp(x, 0, inf) + w * clamp(x, -inf, 0)",
        lambda: em.torchscript_clamps(17, bounds=True), rounding="PRelu", reason="at x = -0"),
    "torchscript_relu_sub": Form(
        "torch 2.x TorchScript, F.relu(x) - w * F.relu(-x) (inline's legacy form too)",
        em.torchscript_relu_sub, fused="PRelu", signed_zeros=False),
    "dynamo_prelu_kernel": Form(
        "torch 2.1-2.4 dynamo_export, nn.PReLU(3): where(x > 0, x, view(w) * x)",
        em.dynamo_prelu_kernel, fused="PRelu"),
    "dynamo_prelu_kernel_one_weight": Form(
        "torch 2.1-2.4 dynamo_export, nn.PReLU(): one weight, viewed as [1, 1, 1, 1]",
        lambda: em.dynamo_prelu_kernel(np.float32([0.25])), fused="LeakyRelu"),
    "dynamo_selu": Form(
        "torch 2.5+ export(dynamo=True), F.selu: Elu(x * 1) * scale", em.dynamo_selu,
        rounding="Selu", reason="rounds differently from Selu"),
    "dynamo_selu_optimized": Form(
        "torch 2.5+ export(dynamo=True, optimize=True), F.selu: Elu(x) * scale",
        lambda: em.dynamo_selu(optimized=True), rounding="Selu",
        reason="rounds differently from Selu"),
    "dynamo_clamps": Form(
        "torch 2.5+ export(dynamo=True), clamp(x, min=0) + w * clamp(x, max=0)",
        em.dynamo_clamps, reason="Clip without a max clamps +inf"),
    "paddle2onnx_scale_where": Form(
        "paddle2onnx 2.1.0, paddle.where(x > 0, x, 0.1 * x): Where(.., x, Mul(x, 0.1) + 0)",
        em.paddle2onnx_scale, rounding="LeakyRelu", reason="the pattern adds +0 to s*x"),
    "paddle2onnx_scale_maximum": Form(
        "paddle2onnx 2.1.0, paddle.maximum(x, 0.1 * x): Max(x, Mul(x, 0.1) + 0)",
        lambda: em.paddle2onnx_scale(maximum=True), rounding="LeakyRelu",
        reason="the pattern adds +0 to s*x"),
    "paddle2onnx_prelu": Form(
        "paddle2onnx 2.1.0, nn.PReLU(3): PRelu with a reshaped slope (nothing to fuse)",
        em.paddle2onnx_prelu),
}


def special_inputs(m: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """``make_inputs`` with every special value of float32 at the front (+-0, +-inf, NaN,
    +-smallest and largest subnormal, +-tiny, +-max, +-1) and more small subnormals, which
    ``s*x`` rounds to a zero of either sign."""
    feeds = make_inputs(m.graph, seed=seed)
    (name, x), = feeds.items()
    fi = ml_dtypes.finfo(np.float32)
    sub = float(fi.smallest_subnormal)
    head = [0.0, -0.0, np.inf, -np.inf, np.nan, sub, -sub, 2 * sub, -2 * sub, 3 * sub,
            -3 * sub, float(fi.tiny), -float(fi.tiny), float(fi.max), -float(fi.max), 1.0, -1.0]
    flat = x.reshape(-1).copy()
    flat[:len(head)] = head
    return {name: flat.reshape(x.shape)}


def activations(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node if n.op_type in ACTS]


def check_numbers(before, after, op: str, *, exact: bool) -> None:
    """The evaluator on special values (several seeds): bit for bit, signed zeros included
    when ``exact``; a Selu fused with allow_rounding within 8 float32 ulp of max(|y|, 1),
    and the same on x >= 0 and on +-inf and NaN."""
    for seed in range(3):
        feeds = special_inputs(before, seed)
        y = before.graph.output[0].name
        a, b = evaluate(before, feeds)[y], evaluate(after, feeds)[y]
        if op != "Selu" or exact:
            c = compare(np.asarray(a), np.asarray(b), ulp=0, signed_zeros=exact)
            assert c.ok, c.reason
            continue
        x = np.broadcast_to(next(iter(feeds.values())), a.shape)
        same = (x >= 0) | ~np.isfinite(x)
        assert compare(a[same], b[same], ulp=0, signed_zeros=False).ok
        err = np.abs(a.astype(np.float64) - b.astype(np.float64))[~same]
        scale = np.maximum(np.abs(a[~same]).astype(np.float64), 1.0)
        assert np.all(err <= 8 * np.finfo(np.float32).eps * scale), float(np.max(err / scale))


def ort_numbers(before, after, op: str) -> None:
    """onnxruntime as a second opinion (signed zeros aside: its Relu keeps -0); a case it
    cannot run is skipped with its reason."""
    try:
        import onnxruntime as ort

        feeds = special_inputs(before)
        runs = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
                .run(None, feeds)[0] for m in (before, after)]
    except Exception as e:  # noqa: BLE001 - any failure of the second opinion skips it
        pytest.skip(f"onnxruntime cannot run this case: {type(e).__name__}: {e}")
    a, b = (np.asarray(r) for r in runs)
    if op == "Selu":
        fin = np.isfinite(a)
        assert compare(a[~fin], b[~fin], ulp=0, signed_zeros=False).ok
        scale = np.maximum(np.abs(a[fin]).astype(np.float64), 1.0)
        assert np.all(np.abs(a[fin].astype(np.float64) - b[fin]) <= 8e-7 * scale)
    else:
        c = compare(a, b, ulp=0, signed_zeros=False)
        assert c.ok, f"onnxruntime: {c.reason}"


def fused_ok(m: onnx.ModelProto, op: str, *, allow_rounding: bool,
             exact: bool) -> onnx.ModelProto:
    fused, result = fuse_proto(m, allow_rounding=allow_rounding, capture_regions=True)
    assert activations(fused) == [op], result.lines()
    assert len(fused.graph.node) < len(m.graph.node)
    onnx.checker.check_model(fused, full_check=True)
    check_numbers(m, fused, op, exact=exact)
    report, notes = verify_fuse(m, fused, result)
    assert report.ok, report.summary()
    assert len(report.rows) == 2, notes  # the region and the whole model
    return fused


@pytest.mark.parametrize("name", sorted(FORMS))
def test_exporter_form(name):
    form = FORMS[name]
    m = form.build()
    onnx.checker.check_model(m, full_check=True)
    if form.fused:
        fused = fused_ok(m, form.fused, allow_rounding=False, exact=form.signed_zeros)
        ort_numbers(m, fused, form.fused)
        return
    fused, result = fuse_with_result(m)
    assert fused == m and not result.modified
    if form.reason:
        assert any(form.reason in e.detail for e in result.refused), result.lines()
    else:
        assert not result.refused, result.lines()
    if form.rounding:
        fused = fused_ok(m, form.rounding, allow_rounding=True, exact=False)
        ort_numbers(m, fused, form.rounding)
    else:
        again, result = fuse_with_result(m, allow_rounding=True)
        assert again == m, result.lines()


def _slope_of(m: onnx.ModelProto) -> np.ndarray:
    """The PRelu's slope: an initializer, a Constant, or either through Identity/Reshape."""
    (prelu,) = [n for n in m.graph.node if n.op_type == "PRelu"]
    values = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant":
            values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        elif n.op_type == "Identity" and n.input[0] in values:
            values[n.output[0]] = values[n.input[0]]
        elif n.op_type == "Reshape" and n.input[0] in values:
            values[n.output[0]] = values[n.input[0]].reshape(values[n.input[1]])
    return values[prelu.input[1]]


def test_keras_prelu_slope_is_alpha_and_what_only_the_pattern_read_is_gone():
    """tf2onnx's folded -alpha becomes a new slope constant holding alpha, and the folded
    initializer, which nothing reads any more, is removed; keras2onnx's Neg(alpha) gives
    alpha's own value (here through its Identity) to PRelu."""
    fused, _ = fuse_with_result(em.tf2onnx_prelu_shared_axes(), allow_rounding=True)
    assert [n.op_type for n in fused.graph.node] == ["Constant", "PRelu"]
    assert not fused.graph.initializer
    np.testing.assert_array_equal(_slope_of(fused), em.CHANNELS.reshape(1, em.C, 1, 1))
    fused, _ = fuse_with_result(em.keras2onnx_prelu_ops(), allow_rounding=True)
    assert [n.op_type for n in fused.graph.node] == ["Identity", "PRelu"]
    assert [t.name for t in fused.graph.initializer] == ["p_re_lu/alpha:0"]
    np.testing.assert_array_equal(_slope_of(fused), em.CHANNELS.reshape(1, 1, em.C))


def test_fuse_pass_removes_the_initializers_it_left_unused_from_the_ir():
    import onnx_ir as ir

    from opshift.plugins.onnx_ir import FusePass

    model = ir.serde.deserialize_model(em.tf2onnx_prelu_shared_axes())
    result = FusePass(allow_rounding=True)(model)
    assert result.modified
    assert [n.op_type for n in model.graph] == ["Constant", "PRelu"]
    assert not model.graph.initializers


def test_an_initializer_another_node_reads_stays():
    m = em.tf2onnx_prelu_shared_axes()
    neg_alpha = m.graph.initializer[0].name
    m.graph.node.append(onnx.helper.make_node("Add", ["y", neg_alpha], ["z"]))
    m.graph.output[0].name = "z"
    fused, result = fuse_with_result(m, allow_rounding=True)
    assert [n.op_type for n in fused.graph.node] == ["Constant", "PRelu", "Add"], result.lines()
    assert [t.name for t in fused.graph.initializer] == [neg_alpha]


def test_two_prelus_sharing_one_folded_alpha_both_fuse_and_free_it():
    g = em.Graph("")
    c = g.init("neg_alpha", -em.CHANNELS.reshape(1, em.C, 1, 1))
    for x, y in (("x", "y1"), ("y1", "y")):
        pos = g.node("Relu", [x], f"{y}/Relu")
        rn = g.node("Relu", [g.node("Neg", [x], f"{y}/Neg")], f"{y}/Relu_1")
        g.node("Add", [pos, g.node("Mul", [c, rn], f"{y}/mul")], f"{y}/add", output=y)
    m = g.model((1, em.C, em.H, em.W), 15)
    fused, result = fuse_with_result(m, allow_rounding=True)
    assert [n.op_type for n in fused.graph.node] == ["Constant", "PRelu"] * 2, result.lines()
    assert not fused.graph.initializer
    check_numbers(m, fused, "PRelu", exact=False)


@pytest.mark.parametrize("axis,shape", [(1, [em.C]), (None, [1, 1, 1, em.C])])
def test_keras_prelu_at_opset_6_gets_a_slope_placed_as_prelu_6_reads_it(axis, shape):
    """Opset 6, legacy Mul broadcasting: -alpha [3] on axis 1 stays [3] (PRelu-6 reads a
    1-D slope per channel); on the last axis (no ``axis``; X [1, 3, 4, 3]) PRelu-6 would
    read it per channel too, so the new slope is [1, 1, 1, 3]."""
    g = em.Graph("")
    c = g.init("neg_alpha", -em.CHANNELS)
    kw = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    pos = g.node("Relu", ["x"], "Relu")
    rn = g.node("Relu", [g.node("Neg", ["x"], "Neg")], "Relu_1")
    mul = g.node("Mul", [rn, c], "mul", **kw)
    g.node("Add", [pos, mul], "add", output="y")
    m = g.model((1, em.C, 4, em.C), 6)
    fused = fused_ok(m, "PRelu", allow_rounding=True, exact=False)
    assert list(_slope_of(fused).shape) == shape
    np.testing.assert_array_equal(_slope_of(fused).ravel(), em.CHANNELS)


def test_scalar_initializer_slope_is_leakyrelu_not_prelu():
    """``Max(x, 0.2 * x)`` with 0.2 an initializer: LeakyRelu(alpha=0.2), an attribute
    every backend supports, not PRelu with a scalar slope."""
    fused = fused_ok(em.tf1_leaky_relu_maximum(0.2, identity=False), "LeakyRelu",
                     allow_rounding=False, exact=True)
    (leaky,) = fused.graph.node
    assert onnx.helper.get_attribute_value(leaky.attribute[0]) == np.float32(0.2)
    assert not fused.graph.initializer
    ort_numbers(em.tf1_leaky_relu_maximum(0.2, identity=False), fused, "LeakyRelu")


def test_negative_and_non_finite_folded_alphas():
    """-alpha with a NaN or an infinity: the pattern adds c*0 = NaN for x > 0, PRelu gives
    x -- refused even with allow_rounding. A negative alpha (c > 0) is fused with
    allow_rounding, as any alpha."""
    for bad in (np.nan, np.inf, -np.inf):
        m = em.tf2onnx_prelu_shared_axes(np.float32([0.25, bad, 0.5]))
        fused, result = fuse_with_result(m, allow_rounding=True)
        assert fused == m
        assert any("not finite" in e.detail for e in result.refused), result.lines()
    fused_ok(em.tf2onnx_prelu_shared_axes(em.MIXED), "PRelu", allow_rounding=True, exact=False)


@pytest.mark.parametrize("maximum", [False, True])
def test_adding_minus_zero_changes_nothing_and_another_bias_is_no_slope(maximum):
    """``s*x + (-0)`` is ``s*x`` bit for bit, so it fuses by default; a bias of 0.5 is
    another function."""
    fused = fused_ok(em.paddle2onnx_scale(maximum, bias=-0.0), "LeakyRelu",
                     allow_rounding=False, exact=True)
    ort_numbers(em.paddle2onnx_scale(maximum, bias=-0.0), fused, "LeakyRelu")
    m = em.paddle2onnx_scale(maximum, bias=0.5)
    fused, result = fuse_with_result(m, allow_rounding=True)
    assert fused == m
    assert any("added constant is not zero" in e.detail for e in result.refused), result.lines()


def _float16_model(build, slopes: np.ndarray) -> onnx.ModelProto:
    """``build(g, x, s)`` on float16 X [8, 65536], s [8, 1]: every row meets every value."""
    g = em.Graph("")
    s = g.init("s", slopes.reshape(8, 1), np.float16)
    build(g, "x", s)
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT16, [8, 65536])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT16, [8, 65536])
    return em.make_model(g.nodes, [x], [y], opset=17, initializers=g.inits)


def _neg_relu(g, x, s):
    c = g.node("Neg", [s], "neg_s")  # the folded -alpha, as a Neg of alpha here
    rn = g.node("Relu", [g.node("Neg", [x], "Neg")], "Relu_1")
    g.node("Add", [g.node("Relu", [x], "Relu"), g.node("Mul", [c, rn], "mul")], "add",
           output="y")


def _where_gt(g, x, s):
    zero = g.const("zero", 0.0, np.float16)
    g.node("Where", [g.node("Greater", [x, zero], "gt"), x, g.node("Mul", [s, x], "mul")],
           "where", output="y")


def _max_bias(bias):
    def build(g, x, s):
        b = g.const("b", bias, np.float16)
        g.node("Max", [x, g.node("Add", [g.node("Mul", [x, s], "mul"), b], "add")], "max",
               output="y")
    return build


def _clamps(g, x, s):
    zero, inf, ninf = (g.const(n, v, np.float16) for n, v in
                       (("zero", 0.0), ("inf", np.inf), ("ninf", -np.inf)))
    lo = g.node("Clip", [x, zero, inf], "clip")
    hi = g.node("Clip", [x, ninf, zero], "clip_1")
    g.node("Add", [lo, g.node("Mul", [s, hi], "mul")], "add", output="y")


ANY = np.float16([0.25, 0.5, 0.75, 1.0, 2.0, 1e-4, 0.0, -0.5])
UNIT = np.float16([0.25, 0.5, 0.75, 1.0, 0.125, 1e-4, 0.3, 0.9])
NON_NEGATIVE = np.float16([0.25, 0.5, 0.75, 1.0, 2.0, 1e-4, 0.0, 65504])


@pytest.mark.parametrize("build,slopes,exact", [
    (_neg_relu, ANY, False), (_where_gt, NON_NEGATIVE, True), (_where_gt, ANY, False),
    (_max_bias(-0.0), UNIT, True), (_max_bias(0.0), UNIT, False), (_clamps, ANY, False)],
    ids=["neg_relu", "where_gt_non_negative", "where_gt_any", "max_bias_-0", "max_bias_+0",
         "clamps"])
def test_every_float16_value(build, slopes, exact):
    """The fused op against the pattern on all 65,536 float16 values and eight slopes each
    (underflow to zeros of either sign, subnormals, infinities, NaN): bit for bit, and
    with the sign of every zero where the form is fused by default."""
    m = _float16_model(build, slopes)
    fused, result = fuse_with_result(m, allow_rounding=not exact)
    assert activations(fused) == ["PRelu"], result.lines()
    x = np.tile(np.arange(65536, dtype=np.uint16).view(np.float16), (8, 1))
    a, b = evaluate(m, {"x": x})["y"], evaluate(fused, {"x": x})["y"]
    c = compare(np.asarray(a), np.asarray(b), ulp=0, signed_zeros=exact)
    assert c.ok, c.reason
    if exact:
        assert fuse_with_result(m)[1].modified
    else:
        assert not fuse_with_result(m)[1].modified
        assert not compare(np.asarray(a), np.asarray(b), ulp=0).ok  # the zeros that differ
