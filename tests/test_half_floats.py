"""float16 and bfloat16 PRelu / LeakyRelu / Selu mean "compute in float32, round once" (as
onnxruntime, PyTorch and oneDNN compute them), in the evaluator and in what inline, convert
and fuse write. Each check runs every one of the 65536 values of the 16-bit type against a
NumPy reference written here: widen to float32, apply the formula with the float32
attribute, round once."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx.defs
import pytest
from conftest import assert_exact, make_model, run_onnxruntime
from onnx import TensorProto, helper, numpy_helper

from opshift.evaluator import evaluate

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
ELEM = {F16: TensorProto.FLOAT16, BF16: TensorProto.BFLOAT16}

#: (op, opset) for every schema version of the three ops, with the 16-bit types it accepts
VERSIONS = [("PRelu", 1), ("PRelu", 6), ("PRelu", 7), ("PRelu", 9), ("PRelu", 16),
            ("LeakyRelu", 1), ("LeakyRelu", 6), ("LeakyRelu", 16),
            ("Selu", 1), ("Selu", 6), ("Selu", 22)]


def every_value(dtype: np.dtype) -> np.ndarray:
    """All 65536 bit patterns of a 16-bit float type (NaNs, infinities, subnormals, -0)."""
    return np.arange(1 << 16, dtype=np.uint16).view(dtype)


def accepts(op: str, opset: int, dtype: np.dtype) -> bool:
    s = onnx.defs.get_schema(op, opset)
    name = "float16" if dtype == F16 else "bfloat16"
    return f"tensor({name})" in {t for c in s.type_constraints for t in c.allowed_type_strs}


def cases(dtypes=(F16, BF16)):
    return [pytest.param(op, opset, dt, id=f"{op}-{opset}-{dt.name}")
            for op, opset in VERSIONS for dt in dtypes if accepts(op, opset, dt)]


def default(op: str, opset: int, name: str) -> float:
    a = onnx.defs.get_schema(op, opset).attributes[name].default_value
    return float(helper.get_attribute_value(a))


def reference(op: str, x: np.ndarray, slope=None, **attrs) -> np.ndarray:
    """Widen to float32, compute with float32 attributes, round once to x's type."""
    xf = x.astype(np.float32)
    with np.errstate(all="ignore"):
        if op == "PRelu":
            y = np.where(xf < 0, slope.astype(np.float32) * xf, xf)
        elif op == "LeakyRelu":
            y = np.where(xf < 0, np.float32(attrs["alpha"]) * xf, xf)
        else:
            a, g = np.float32(attrs["alpha"]), np.float32(attrs["gamma"])
            y = np.where(xf > 0, g * xf, g * (a * np.exp(xf) - a))
        return y.astype(np.float32).astype(x.dtype)


def single_op_model(op: str, opset: int, dtype: np.dtype, slope=None, **attrs):
    """One node ``op`` on a 16-bit x (a PRelu slope as an initializer of x's type)."""
    elem = ELEM[dtype]
    inputs = ["x"] + (["slope"] if op == "PRelu" else [])
    inits = [numpy_helper.from_array(slope, "slope")] if op == "PRelu" else []
    node = helper.make_node(op, inputs, ["y"], name="n0", **attrs)
    return make_model([node], [helper.make_tensor_value_info("x", elem, [None])],
                      [helper.make_tensor_value_info("y", elem, [None])], opset=opset,
                      initializers=inits)


def attribute_sets(op: str, opset: int) -> list[dict]:
    """The version's defaults and values no 16-bit type holds (their float32 value counts)."""
    if op == "LeakyRelu":
        return [{}, {"alpha": 0.1}, {"alpha": -1.3}, {"alpha": 3.7}]
    if op == "Selu":
        return [{}, {"alpha": 1.1, "gamma": 1.3}]
    return [{}]


def slopes(dtype: np.dtype, n: int) -> list[np.ndarray]:
    """A shared slope, a per-element one drawn over a wide range, with 0, negatives, > 1."""
    rng = np.random.default_rng(7)
    per_element = (rng.standard_normal(n) * 4).astype(np.float32).astype(dtype)
    return [np.array([0.1], np.float32).astype(dtype), per_element]


def with_defaults(op: str, opset: int, attrs: dict) -> dict:
    out = dict(attrs)
    for name in ("alpha", "gamma"):
        if name not in out and name in onnx.defs.get_schema(op, opset).attributes:
            out[name] = default(op, opset, name)
    return out


@pytest.mark.parametrize("op,opset,dtype", cases())
def test_evaluator_is_float32_rounded_once_on_every_value(op, opset, dtype):
    x = every_value(dtype)
    for attrs in attribute_sets(op, opset):
        for s in slopes(dtype, x.size) if op == "PRelu" else [None]:
            if op == "PRelu" and opset < 7 and s.size != 1:
                continue  # legacy per-channel placement: the shared slope covers it
            m = single_op_model(op, opset, dtype, s, **attrs)
            want = reference(op, x, s, **with_defaults(op, opset, attrs))
            assert_exact(want, evaluate(m, {"x": x})["y"], f"{op}-{opset} {attrs}")


def test_selu_near_zero_keeps_its_digits():
    """The case of issue 15: per-step bfloat16 gives 0 at x = -0.00195, float32 -0.00343."""
    x = np.array([-0.001953125], BF16)
    y = evaluate(single_op_model("Selu", 22, BF16), {"x": x})["y"]
    assert float(y[0]) == pytest.approx(-0.00343, rel=0.01)


@pytest.mark.parametrize("op,opset", [("PRelu", 16), ("LeakyRelu", 16), ("Selu", 22),
                                      ("Selu", 6)])
def test_onnxruntime_second_opinion_float16(op, opset):
    """onnxruntime (where it runs the op on float16) agrees to float16 precision on N(0, 2)
    inputs; its float32 exp is its own, so only closeness is asked."""
    x = (np.random.default_rng(0).standard_normal(1000) * 2).astype(F16)
    s = np.array([0.1], F16) if op == "PRelu" else None
    m = single_op_model(op, opset, F16, s)
    got = run_onnxruntime(m, {"x": x})[0]
    np.testing.assert_allclose(got.astype(np.float32),
                               evaluate(m, {"x": x})["y"].astype(np.float32),
                               rtol=2 ** -10, atol=2 ** -24)


# -- inline -----------------------------------------------------------------------------------

def opsets_to_inline_at(op: str, opset: int, dtype: np.dtype) -> list[int]:
    """The op's own opset and, for float16, one opset of every inline band it is in force at
    (legacy 1..8, static 9..14, function 15..)."""
    from opshift import opsets

    out = {opset}
    if dtype == F16:
        for o in (opset, 8, 14, 15, 22):
            if o >= opset and opsets.since_version(op, o) == opsets.since_version(op, opset):
                out.add(o)
    return sorted(out)


@pytest.mark.parametrize("op,opset,dtype", cases())
def test_inline_computes_what_the_op_computes_on_every_value(op, opset, dtype):
    """LeakyRelu and Selu: the float32 template between Casts; PRelu: no Casts (a product of
    two 16-bit values is exact in float32). Either way bit for bit the op."""
    from opshift.inline import inline
    from opshift.inline.templates import band, signed_zero_exact

    x = every_value(dtype)
    for at in opsets_to_inline_at(op, opset, dtype):
        for attrs in attribute_sets(op, opset):
            s = np.array([0.1], np.float32).astype(dtype) if op == "PRelu" else None
            m = single_op_model(op, at, dtype, s, **attrs)
            out = inline(m)
            ops = [n.op_type for n in out.graph.node]
            assert op not in ops
            casts = ["Cast"] if op != "PRelu" else []
            assert [o for o in ops if o == "Cast"] == casts * 2, ops
            want = evaluate(m, {"x": x})["y"]
            got = evaluate(out, {"x": x})["y"]
            # the sign-of-zero rows of inline's documented table, as for 32/64 bits
            zeros = signed_zero_exact(op, band(at), out.graph.node)
            assert_exact(want, got, f"{op} at opset {at} {attrs}", signed_zeros=zeros)


def test_inline_refuses_a_16_bit_type_cast_cannot_convert():
    """A bfloat16 LeakyRelu where Cast has no bfloat16 (opset 12) cannot compute in float32:
    refused with one line naming the node."""
    from opshift.errors import ConversionError
    from opshift.graph.names import Names
    from opshift.inline import decompose as dec

    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="act")
    site = dec.Site(node, 6, 12, TensorProto.BFLOAT16)
    with pytest.raises(ConversionError) as e:
        dec.decompose(site, "act", Names.from_used(set()))
    msg = str(e.value)
    assert "\n" not in msg and "node 'act'" in msg and "Cast there cannot convert" in msg


def test_inline_refuses_selu_whose_type_is_not_known_in_a_function():
    """A model-local function called with float16 and with float32: its X has no one type,
    so a Selu body could be wrong for the float16 call; a LeakyRelu whose alpha every 16-bit
    type holds (0.5) is exact for any type and is inlined."""
    from opshift.errors import ConversionError
    from opshift.inline import inline

    def model(op, **attrs):
        f = helper.make_function("dom", "F", ["fx"], ["fy"],
                                 [helper.make_node(op, ["fx"], ["fy"], name="inner", **attrs)],
                                 [helper.make_opsetid("", 18)])
        nodes = [helper.make_node("F", ["a"], ["ya"], domain="dom", name="c16"),
                 helper.make_node("F", ["b"], ["yb"], domain="dom", name="c32")]
        vi = helper.make_tensor_value_info
        return make_model(nodes, [vi("a", TensorProto.FLOAT16, [3]),
                                  vi("b", TensorProto.FLOAT, [3])],
                          [vi("ya", TensorProto.FLOAT16, [3]), vi("yb", TensorProto.FLOAT, [3])],
                          opset=18, functions=[f], extra_opsets=[helper.make_opsetid("dom", 1)])

    with pytest.raises(ConversionError, match=r"node 'inner' .*element type of X is not known"):
        inline(model("Selu"))
    with pytest.raises(ConversionError, match=r"node 'inner' .*element type of X is not known"):
        inline(model("LeakyRelu", alpha=0.1))
    m = model("LeakyRelu", alpha=0.5)
    feeds = {"a": every_value(F16)[:3] * 0 + np.array([-3, 0, 2], F16),
             "b": np.array([-3, 0, 2], np.float32)}
    out = inline(m)
    assert not any(n.op_type == "LeakyRelu" for n in out.functions[0].node)
    for k, v in evaluate(m, feeds).items():
        assert_exact(v, evaluate(out, feeds)[k], k)


# -- fuse -------------------------------------------------------------------------------------

def raw_body_model(op: str, opset: int, dtype: np.dtype, **attrs):
    """The op's decomposition computed step by step in the 16-bit type (no Casts): the
    schema body (opset >= 15), its typed-constant form (9..14) or the legacy form (1..8)."""
    from opshift.graph.names import Names
    from opshift.inline import templates as t
    from opshift.inline.decompose import attributes

    version = opsets_version(op, opset)
    node = helper.make_node(op, ["x"], ["y"], name="n0", **attrs)
    a = attributes(node, op, version)
    elem = ELEM[dtype]
    b = t.band(opset)
    if b == t.FUNCTION:
        tpl = t.function_template(op, tuple(sorted(a.items())))
    elif b == t.STATIC:
        tpl = t.static_template(op, tuple(sorted(a.items())), elem)
    elif op == "Selu":
        tpl = t.legacy_selu_template(a["alpha"], a["gamma"], elem, opset)
    else:
        tpl = t.legacy_leaky_template("max", a["alpha"], elem, opset)
    nodes = t.instantiate(tpl, "x", "y", "n0", Names.from_used({"x", "y"}))
    return make_model(nodes, [helper.make_tensor_value_info("x", elem, [None])],
                      [helper.make_tensor_value_info("y", elem, [None])], opset=opset)


def opsets_version(op: str, opset: int) -> int:
    from opshift import opsets

    return opsets.since_version(op, opset)


@pytest.mark.parametrize("opset,dtype", [(22, BF16), (22, F16), (12, F16), (8, F16)])
def test_fuse_raw_16_bit_selu_body_only_with_allow_rounding(opset, dtype):
    """A Selu body rounding every step to 16 bits is not Selu (float32, rounded once):
    refused by default with the reason, fused with allow_rounding."""
    from opshift.fuse.driver import fuse_with_result

    m = raw_body_model("Selu", opset, dtype)
    x = every_value(dtype)
    raw = evaluate(m, {"x": x})["y"]
    out, result = fuse_with_result(m)
    assert "Selu" not in [n.op_type for n in out.graph.node]
    assert not result.fused
    why = " ".join(e.detail for e in result.refused)
    assert f"X is {dtype.name}: the pattern rounds" in why and "allow_rounding" in why
    out, result = fuse_with_result(m, allow_rounding=True)
    assert [n.op_type for n in out.graph.node] == ["Selu"]
    fused = evaluate(out, {"x": x})["y"]
    # the reason it needs allow_rounding: the numbers differ
    assert np.sum(raw.view(np.uint16) != fused.view(np.uint16)) > 100


@pytest.mark.parametrize("opset,dtype", [(22, BF16), (16, F16), (12, F16), (8, F16)])
def test_fuse_raw_16_bit_leaky_relu_body_is_exact(opset, dtype):
    """A LeakyRelu body in 16 bits multiplies by alpha rounded to 16 bits: that product is
    exact in float32, so LeakyRelu with the rounded alpha is the body bit for bit."""
    from opshift.fuse.driver import fuse_with_result

    m = raw_body_model("LeakyRelu", opset, dtype, alpha=0.1)
    out, result = fuse_with_result(m)
    assert [n.op_type for n in out.graph.node] == ["LeakyRelu"], result.refused
    alpha = out.graph.node[0].attribute[0].f
    assert alpha == float(np.float32(0.1).astype(dtype))
    x = every_value(dtype)
    assert_exact(evaluate(m, {"x": x})["y"], evaluate(out, {"x": x})["y"])


@pytest.mark.parametrize("op,opset,dtype", cases())
def test_fuse_gives_back_the_16_bit_op_inline_wrote(op, opset, dtype):
    """fuse(inline(m)) is m's op on m's type, with m's attributes: the float32 body between
    Casts fuses exactly (no allow_rounding), checked on every 16-bit value."""
    from opshift.fuse.driver import fuse_with_result
    from opshift.inline import inline

    x = every_value(dtype)
    for attrs in attribute_sets(op, opset):
        s = np.array([0.1], np.float32).astype(dtype) if op == "PRelu" else None
        m = single_op_model(op, opset, dtype, s, **attrs)
        out, result = fuse_with_result(inline(m))
        want_op = "LeakyRelu" if op == "PRelu" else op  # a one-element slope: LeakyRelu
        assert [n.op_type for n in out.graph.node] == [want_op], result.refused
        assert out.graph.node[0].input[0] == "x"
        assert len(result.fused) == 1  # body and Casts: one pattern, one node
        if op != "PRelu":
            got = {a.name: a.f for a in out.graph.node[0].attribute}
            want = with_defaults(op, opset, attrs)
            assert got == {k: float(np.float32(v)) for k, v in want.items()}
        assert_exact(evaluate(m, {"x": x})["y"], evaluate(out, {"x": x})["y"], str(attrs))


def test_fuse_cli_verifies_the_cast_form(tmp_path):
    """``opshift fuse --verify`` on inline's bfloat16 Selu: fused, and its check passes."""
    import onnx

    from opshift.cli import main
    from opshift.fuse.driver import fuse_proto
    from opshift.inline import inline

    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    inlined = inline(single_op_model("Selu", 22, BF16))
    onnx.save(inlined, src)
    assert main(["fuse", str(src), "-o", str(dst), "--verify", "-q"]) == 0
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["Selu"]
    # the one region --verify checks is the whole inlined form, from x
    _, result = fuse_proto(inlined, capture_regions=True)
    (region,) = result.regions
    assert sorted(n.op_type for n in region.before.graph.node) == \
        sorted(n.op_type for n in inlined.graph.node)
    assert [v.name for v in region.before.graph.input] == ["x"]
    assert [(e.rule, e.detail.split("(")[0]) for e in result.fused] == \
        [("WhereSelu+CastSelu", "Selu")]


def test_fuse_leaves_a_cast_form_the_opset_cannot_hold():
    """convert's bfloat16 Selu-22 at opset 13 (float32 Selu-6 between Casts) stays: Selu-6
    has no bfloat16; the refusal says so."""
    from opshift.convert import convert
    from opshift.fuse.driver import fuse_with_result

    m = convert(single_op_model("Selu", 22, BF16), 13)
    out, result = fuse_with_result(m)
    assert [n.op_type for n in out.graph.node] == ["Cast", "Selu", "Cast"]
    assert any("Selu-6 at opset 13 does not accept element type bfloat16" in e.detail
               for e in result.refused)


# -- convert ----------------------------------------------------------------------------------

@pytest.mark.parametrize("op,opset", [("PRelu", 16), ("LeakyRelu", 16), ("Selu", 22)])
def test_convert_bfloat16_down_is_exact_on_every_value(op, opset):
    """Below the version that added bfloat16, the float32 op between Casts: bit for bit the
    bfloat16 op at every target Cast can express (13..), every bfloat16 value."""
    from opshift.convert import convert

    x = every_value(BF16)
    for attrs in attribute_sets(op, opset):
        s = np.array([0.1], np.float32).astype(BF16) if op == "PRelu" else None
        m = single_op_model(op, opset, BF16, s, **attrs)
        want = evaluate(m, {"x": x})["y"]
        for target in range(13, opset):
            out = convert(m, target)
            assert "Cast" in [n.op_type for n in out.graph.node]
            assert_exact(want, evaluate(out, {"x": x})["y"], f"{op} {attrs} to {target}")


def test_fuse_16_bit_leaky_relu_body_with_an_attribute_alpha_only_with_allow_rounding():
    """In a function, a LeakyRelu body whose alpha is the function's attribute ``@a`` rounds
    it to X's type when X is 16-bit; LeakyRelu(alpha=@a) would not: rounding."""
    from opshift.fuse.driver import fuse_with_result
    from opshift.graph.names import Names
    from opshift.inline import templates as t

    body = t.instantiate(t.function_template("LeakyRelu", (("alpha", t.Ref("a")),)),
                         "fx", "fy", "n0", Names.from_used({"fx", "fy"}))
    f = helper.make_function("dom", "F", ["fx"], ["fy"], body, [helper.make_opsetid("", 18)],
                             attributes=["a"])
    vi = helper.make_tensor_value_info
    call = helper.make_node("F", ["x"], ["y"], domain="dom", name="call", a=0.1)
    m = make_model([call], [vi("x", TensorProto.FLOAT16, [4])],
                   [vi("y", TensorProto.FLOAT16, [4])], opset=18, functions=[f],
                   extra_opsets=[helper.make_opsetid("dom", 1)])
    out, result = fuse_with_result(m)
    assert not result.fused
    assert any("X is float16: the pattern rounds alpha (@a)" in e.detail for e in result.refused)
    out, result = fuse_with_result(m, allow_rounding=True)
    assert [n.op_type for n in out.functions[0].node] == ["LeakyRelu"]
