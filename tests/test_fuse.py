"""fuse: onnx's expanded backend models, exporter patterns, comparison forms, refusals, the
rule set inside onnxscript's rewriter, the pass API and the command."""

from __future__ import annotations

import importlib
import json

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import make_model
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opshift import evaluate
from opshift.passes.fuse import FusePass, fuse, fuse_with_result
from opshift.rewriters import rules
from opshift.rewriters._report import USED_OUTSIDE
from opshift.verify import compare

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16,
      TP.BFLOAT16: ml_dtypes.bfloat16, TP.INT32: np.int32}


def specials(dtype, shape) -> np.ndarray:
    """Special values (+-0, +-inf, NaN, subnormals, extremes) then random ones, in ``shape``."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        vals = [0, 1, -1, 7, -7, info.max, info.min, 100, -100]
    else:
        fi = ml_dtypes.finfo(dtype)
        t = float(fi.smallest_subnormal)
        vals = [0.0, -0.0, np.inf, -np.inf, np.nan, t, -t, float(fi.tiny), -float(fi.tiny),
                float(fi.max), -float(fi.max), 1.0, -1.0, 0.5, -0.5, 89.0, -89.0, 1e-3, -1e-3]
    rng = np.random.default_rng(0)
    vals += list(rng.standard_normal(max(n - len(vals), 0)) * 3)
    with np.errstate(over="ignore"):
        return np.array(vals[:n], dtype=np.float64).astype(dtype).reshape(shape)


def ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node if n.op_type != "Constant"]


def attrs(m: onnx.ModelProto, op: str) -> dict:
    (node,) = [n for n in m.graph.node if n.op_type == op]
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def run_ort(m: onnx.ModelProto, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def same_numbers(before, after, feeds, *, signed_zeros=True, ort=True) -> None:
    """The fused model computes what the unfused one does: opshift's evaluator, bit for bit
    (NaN as NaN); onnxruntime, bit for bit too -- except that its Selu kernel rounds
    differently from Selu's function body (cancellation in alpha*exp(x) - alpha near 0-), so
    there the difference may be a few ulp of max(|y|, 1)."""
    e1, e2 = evaluate(before, feeds), evaluate(after, feeds)
    for k in e1:
        c = compare(np.asarray(e1[k]), np.asarray(e2[k]), ulp=0, signed_zeros=signed_zeros)
        assert c.ok, f"evaluator, output {k}: {c.reason}"
    if not ort:
        return
    selu = any(n.op_type == "Selu" for n in after.graph.node)
    for a, b in zip(run_ort(before, feeds), run_ort(after, feeds)):
        a, b = np.asarray(a), np.asarray(b)
        if not selu:
            c = compare(a, b, ulp=0, signed_zeros=False)
            assert c.ok, f"onnxruntime: {c.reason}"
            continue
        assert np.array_equal(np.isnan(a), np.isnan(b))
        fin = np.isfinite(a)
        assert np.array_equal(a[~fin & ~np.isnan(a)], b[~fin & ~np.isnan(a)])
        scale = np.maximum(np.abs(a[fin]).astype(np.float64), 1.0)
        err = np.abs(a[fin].astype(np.float64) - b[fin].astype(np.float64))
        assert np.all(err <= 4 * np.finfo(a.dtype).eps * scale), float(np.max(err / scale))


# -- onnx's own expanded backend models -------------------------------------------------------


def _backend_cases() -> dict:
    import onnx.backend.test.case.node as node_cases

    for mod in ("prelu", "leakyrelu", "selu"):  # importing a module generates its cases
        importlib.import_module(f"onnx.backend.test.case.node.{mod}")
    cases = {c.name: c for c in node_cases._NodeTestCases}
    if "test_selu_expanded_ver18" not in cases:  # generated earlier under an op filter
        cases = {c.name: c for c in node_cases.collect_testcases(None)}
    return cases


EXPANDED = ["test_prelu_example_expanded", "test_prelu_broadcast_expanded",
            "test_leakyrelu_expanded", "test_leakyrelu_example_expanded",
            "test_leakyrelu_default_expanded", "test_selu_expanded_ver18",
            "test_selu_example_expanded_ver18", "test_selu_default_expanded_ver18"]


@pytest.fixture(scope="module")
def backend_cases():
    return _backend_cases()


@pytest.mark.parametrize("name", EXPANDED)
def test_backend_expanded_model_fuses_to_single_op(backend_cases, name):
    case = backend_cases[name]
    plain = backend_cases[name.replace("_expanded", "").replace("_ver18", "")]
    expanded = case.model
    assert len(expanded.graph.node) > 3
    fused, result = fuse_with_result(expanded)
    op = plain.model.graph.node[0].op_type
    assert ops(fused) == [op], result.lines()
    want = {a.name: helper.get_attribute_value(a) for a in plain.model.graph.node[0].attribute}
    got = attrs(fused, op)
    for k, v in want.items():
        assert np.float32(got[k]) == np.float32(v), (k, got[k], v)
    onnx.checker.check_model(fused, full_check=True)
    inputs, expected = case.data_sets[0]
    names = [v.name for v in expanded.graph.input]
    feeds = dict(zip(names, inputs))
    feeds[names[0]] = specials(inputs[0].dtype, inputs[0].shape)
    # Selu's function body maps -0 to -0, the op (and opshift's evaluator) to +0
    same_numbers(expanded, fused, feeds, signed_zeros=op != "Selu")
    # and the fused model reproduces onnx's expected outputs (at the case's tolerance)
    got = evaluate(fused, dict(zip(names, inputs)))
    for k, e in zip(got, expected):
        np.testing.assert_allclose(got[k], e, rtol=case.rtol, atol=case.atol)


def test_backend_models_fuse_with_onnxscript_rewriter_alone_and_with_default_rules(
        backend_cases):
    from onnxscript import rewriter

    m = backend_cases["test_selu_expanded_ver18"].model
    alone = rewriter.rewrite(m, pattern_rewrite_rules=rules())
    assert ops(alone) == ["Selu"]
    defaults = list(getattr(rewriter, "_DEFAULT_REWRITE_RULES", ()))
    assert defaults, "onnxscript no longer exposes its default rules"
    both = rewriter.rewrite(m, pattern_rewrite_rules=[*defaults, *rules()])
    assert ops(both) == ["Selu"]
    # and one after the other (default rules first, which leave the pattern alone)
    seq = rewriter.rewrite(rewriter.rewrite(backend_cases["test_prelu_example_expanded"].model),
                           pattern_rewrite_rules=rules())
    assert ops(seq) == ["PRelu"]


# -- building blocks ---------------------------------------------------------------------------


def vi(name, elem=TP.FLOAT, shape=(2, 3, 4)):
    return helper.make_tensor_value_info(name, elem, list(shape))


def const(name, value, dtype=np.float32):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))


def init(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def model(nodes, *, opset=17, elem=TP.FLOAT, shape=(2, 3, 4), inits=(), extra_inputs=(),
          outputs=("y",)):
    return make_model(nodes, [vi("x", elem, shape), *extra_inputs],
                      [vi(o, elem, shape) for o in outputs], opset=opset, initializers=inits)


def feeds_for(m):
    out = {}
    for v in m.graph.input:
        t = v.type.tensor_type
        shape = tuple(d.dim_value for d in t.shape.dim)
        out[v.name] = specials(NP[t.elem_type], shape)
    return out


def fuses_to(m, op, *, signed_zeros=True, ort=True, **kw):
    fused, result = fuse_with_result(m, **kw)
    assert ops(fused) == [op], (ops(fused), result.lines())
    onnx.checker.check_model(fused, full_check=True)
    same_numbers(m, fused, feeds_for(m), signed_zeros=signed_zeros, ort=ort)
    return fused, result


def refused(m, reason: str, **kw):
    fused, result = fuse_with_result(m, **kw)
    assert not result.modified, result.lines()
    assert ops(fused) == ops(m)
    assert any(reason in e.detail for e in result.refused), result.lines()
    return result


# -- exporter patterns --------------------------------------------------------------------------


@pytest.mark.parametrize("swap_max,swap_mul", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_max_x_ax_is_leakyrelu(swap_max, swap_mul):
    mul = ["a", "x"] if swap_mul else ["x", "a"]
    mx = ["ax", "x"] if swap_max else ["x", "ax"]
    m = model([const("a", 0.2), helper.make_node("Mul", mul, ["ax"]),
               helper.make_node("Max", mx, ["y"])])
    fused, _ = fuses_to(m, "LeakyRelu")
    assert attrs(fused, "LeakyRelu")["alpha"] == np.float32(0.2)


def test_max_with_a_1_and_min_with_a_ge_1_are_leakyrelu():
    m = model([const("a", 1.0), helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Max", ["x", "ax"], ["y"])])
    fuses_to(m, "LeakyRelu")
    m = model([const("a", 2.5), helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Min", ["x", "ax"], ["y"])])
    fused, _ = fuses_to(m, "LeakyRelu")
    assert attrs(fused, "LeakyRelu")["alpha"] == 2.5


def test_max_with_per_channel_initializer_is_prelu():
    m = model([helper.make_node("Mul", ["x", "s"], ["ax"]),
               helper.make_node("Max", ["x", "ax"], ["y"])],
              inits=[init("s", np.array([0.5, 0.25, 1.0]).reshape(3, 1))])
    fuses_to(m, "PRelu")


@pytest.mark.parametrize("a", [1.5, -0.5, 0.0, np.nan])
def test_max_refuses_slope_outside_0_1(a):
    m = model([const("a", a), helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Max", ["x", "ax"], ["y"])])
    refused(m, "slope")


def test_max_with_zero_slope_differs_at_inf_which_is_why_it_is_refused():
    x = np.array([np.inf], np.float32)
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.maximum(x, np.float32(0) * x))[0]  # Max(x, 0*x) at +inf: NaN
    m = model([const("a", 0.0), helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Max", ["x", "ax"], ["y"])])
    refused(m, "NaN at x = +inf")


def test_max_with_runtime_slope_is_refused():
    m = model([helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Max", ["x", "ax"], ["y"])],
              extra_inputs=[vi("a", shape=())])
    refused(m, "not a constant")


def test_where_greater_scalar_constant_is_leakyrelu_and_initializer_is_prelu():
    nodes = [const("z", 0.0), helper.make_node("Greater", ["x", "z"], ["c"]),
             helper.make_node("Mul", ["x", "s"], ["sx"]),
             helper.make_node("Where", ["c", "x", "sx"], ["y"])]
    fused, _ = fuses_to(model([const("s", 0.3), *nodes]), "LeakyRelu")
    assert attrs(fused, "LeakyRelu")["alpha"] == np.float32(0.3)
    fuses_to(model(nodes, inits=[init("s", [[0.1], [0.2], [0.3]])]), "PRelu")
    # an exporter's scalar initializer: LeakyRelu as well (inline never writes this form)
    fused, _ = fuses_to(model(nodes, inits=[init("s", 0.3)]), "LeakyRelu")
    assert attrs(fused, "LeakyRelu")["alpha"] == np.float32(0.3)


def test_where_greater_with_slope_not_float32_representable_is_prelu():
    nodes = [const("z", 0.0, np.float64), helper.make_node("Greater", ["x", "z"], ["c"]),
             const("s", 0.1, np.float64), helper.make_node("Mul", ["x", "s"], ["sx"]),
             helper.make_node("Where", ["c", "x", "sx"], ["y"])]
    fuses_to(model(nodes, elem=TP.DOUBLE), "PRelu")
    nodes[2] = const("s", 0.25, np.float64)  # exactly a float32: LeakyRelu reproduces it
    fuses_to(model(nodes, elem=TP.DOUBLE), "LeakyRelu")


def test_fuse_names_only_what_it_creates():
    """Nodes outside the fused region keep their names -- none, or one shared with another
    node (onnx's checker accepts it, onnxruntime does not; renaming is ``opshift fix``'s job,
    not fuse's); the fused node takes its anchor's name (here none) and output; the new
    constant a Cast slope needs is named after the output, avoiding every value name of the
    model, a subgraph's included."""
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["y/slope"])], "then", [],
                             [vi("y/slope")])
    els = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                            [vi("e")])
    nodes = [helper.make_node("Relu", ["x0"], ["x"]),
             const("s", np.array([0.5, 0.1, 0.25]).reshape(3, 1), np.float64),
             helper.make_node("Cast", ["s"], ["sc"], to=TP.FLOAT, name="twin"),
             helper.make_node("Mul", ["sc", "x"], ["sx"], name="twin"),
             const("z", 0.0), helper.make_node("Less", ["x", "z"], ["c"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"]),
             helper.make_node("If", ["b"], ["i"], then_branch=then, else_branch=els),
             helper.make_node("Add", ["y", "i"], ["out"], name="twin")]
    m = make_model(nodes, [vi("x0"), vi("b", TP.BOOL, ())], [vi("out")], opset=17)
    fused, result = fuse_with_result(m)
    onnx.checker.check_model(fused, full_check=True)
    for b in (True, False):
        same_numbers(m, fused, {"x0": specials(np.float32, (2, 3, 4)), "b": np.array(b)},
                     ort=False)
    names = [(n.op_type, n.name) for n in fused.graph.node if n.op_type != "Constant"]
    assert names == [("Relu", ""), ("PRelu", ""), ("If", ""), ("Add", "twin")]
    (prelu,) = [n for n in fused.graph.node if n.op_type == "PRelu"]
    assert list(prelu.output) == ["y"] and prelu.input[1] == "y/slope_1"
    (slope,) = [n for n in fused.graph.node if n.output[0] == "y/slope_1"]
    assert slope.op_type == "Constant" and slope.name == "y/slope_1"


def test_fuse_changes_nothing_outside_the_fused_region():
    """Nodes, value_info and initializers outside the fused region come out byte for byte
    as they went in: no names given to unnamed nodes, no types written for Constant
    outputs or initializers (onnxscript's rewriter and onnx_ir's serializer would)."""
    nodes = [const("b", 0.5), helper.make_node("Add", ["x", "b"], ["a"]),
             const("alpha", 0.25), helper.make_node("Mul", ["a", "alpha"], ["ax"]),
             helper.make_node("Max", ["a", "ax"], ["y0"], name="max"),
             helper.make_node("Mul", ["y0", "w"], ["y"])]
    m = model(nodes, inits=[init("w", np.full((3, 4), 2.0))])
    m.graph.value_info.extend([vi("a"), vi("ax")])
    fused, result = fuse_with_result(m)
    assert [e.detail for e in result.fused] == ["LeakyRelu(alpha=0.25)"]
    kept = [n.SerializeToString() for n in m.graph.node if n.output[0] not in ("alpha", "ax",
                                                                             "y0")]
    out = [n.SerializeToString() for n in fused.graph.node if n.op_type != "LeakyRelu"]
    assert out == kept
    (leaky,) = [n for n in fused.graph.node if n.op_type == "LeakyRelu"]
    assert (leaky.name, list(leaky.input), list(leaky.output)) == ("max", ["a"], ["y0"])
    for field in ("initializer", "input", "output"):
        assert [v.SerializeToString() for v in getattr(fused.graph, field)] == \
            [v.SerializeToString() for v in getattr(m.graph, field)], field
    # the value_info of "ax", which the fusion removed, goes with it
    assert [v.SerializeToString() for v in fused.graph.value_info] == \
        [m.graph.value_info[0].SerializeToString()]


def test_where_greater_refuses_infinite_or_runtime_slope():
    base = [const("z", 0.0), helper.make_node("Greater", ["x", "z"], ["c"]),
            helper.make_node("Mul", ["x", "s"], ["sx"]),
            helper.make_node("Where", ["c", "x", "sx"], ["y"])]
    refused(model([const("s", np.inf), *base]), "not finite")
    refused(model(base, extra_inputs=[vi("s", shape=())]), "not a constant")


# (op, operands, negated, zero goes to the slope branch) for x < 0 and for x > 0
NEG_FORMS = [("Less", "xz", False, False), ("Greater", "zx", False, False),
             ("GreaterOrEqual", "xz", True, False), ("LessOrEqual", "zx", True, False),
             ("LessOrEqual", "xz", False, True), ("GreaterOrEqual", "zx", False, True),
             ("Greater", "xz", True, True), ("Less", "zx", True, True)]
POS_FORMS = [("Greater", "xz", False, True), ("Less", "zx", False, True),
             ("LessOrEqual", "xz", True, True), ("GreaterOrEqual", "zx", True, True),
             ("GreaterOrEqual", "xz", False, False), ("LessOrEqual", "zx", False, False),
             ("Less", "xz", True, False), ("Greater", "zx", True, False)]


def _where_model(form, mirrored, slope):
    op, order, negated, _ = form
    ins = ["x", "z"] if order == "xz" else ["z", "x"]
    cmp = [helper.make_node(op, ins, ["g" if negated else "c"])]
    if negated:
        cmp.append(helper.make_node("Not", ["g"], ["c"]))
    branches = ["x", "sx"] if mirrored else ["sx", "x"]
    return model([const("z", 0.0), *cmp, helper.make_node("Mul", ["s", "x"], ["sx"]),
                  helper.make_node("Where", ["c", *branches], ["y"])],
                 inits=[init("s", slope)])


@pytest.mark.parametrize("mirrored,form", [(False, f) for f in NEG_FORMS]
                         + [(True, f) for f in POS_FORMS])
def test_every_comparison_form_fuses_with_the_same_numbers(mirrored, form):
    """Each form is PRelu on every input (NaN: both branches NaN; x == 0: the slope branch
    gives s*0, so those forms need a finite slope and may flip the sign of a zero)."""
    zero_to_slope = form[3]
    m = _where_model(form, mirrored, [[0.5], [-2.0], [0.0]])
    fuses_to(m, "PRelu", signed_zeros=not zero_to_slope)
    inf_slope = _where_model(form, mirrored, [[0.5], [np.inf], [1.0]])
    if zero_to_slope:
        refused(inf_slope, "not finite")
    else:
        fuses_to(inf_slope, "PRelu")


def test_not_greater_or_equal_equals_less_on_nan_inside_where():
    """Not(x >= 0) is true at NaN where Less is false -- both branches are NaN there."""
    x = np.array([np.nan, -0.0, 0.0, -1.0, 2.0], np.float32)
    s = np.float32(0.5)
    a = np.where(~(x >= 0), s * x, x)
    b = np.where(x < 0, s * x, x)
    assert compare(a, b, ulp=0).ok


def test_comparison_with_nonzero_constant_is_refused():
    nodes = [const("z", 1.0), helper.make_node("Less", ["x", "z"], ["c"]),
             const("s", 0.5), helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    refused(model(nodes), "not zero")


def test_relu_forms_are_prelu():
    s = init("s", [[0.5], [-0.25], [2.0]])
    add = model([const("z", 0.0), helper.make_node("Relu", ["x"], ["r"]),
                 helper.make_node("Min", ["x", "z"], ["mn"]),
                 helper.make_node("Mul", ["s", "mn"], ["smn"]),
                 helper.make_node("Add", ["r", "smn"], ["y"])], inits=[s])
    fuses_to(add, "PRelu", signed_zeros=False)
    sub = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["nx"]),
                 helper.make_node("Relu", ["nx"], ["rn"]),
                 helper.make_node("Mul", ["s", "rn"], ["srn"]),
                 helper.make_node("Sub", ["r", "srn"], ["y"])], inits=[s])
    fuses_to(sub, "PRelu", signed_zeros=False)


def test_relu_form_with_infinite_slope_is_refused():
    sub = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["nx"]),
                 helper.make_node("Relu", ["nx"], ["rn"]),
                 helper.make_node("Mul", ["s", "rn"], ["srn"]),
                 helper.make_node("Sub", ["r", "srn"], ["y"])],
                inits=[init("s", [[0.5], [np.inf], [2.0]])])
    refused(sub, "not finite")


def _elu_gamma(gamma):
    return model([helper.make_node("Elu", ["x"], ["e"], alpha=1.6732632),
                  helper.make_node("Mul", ["e", "g"], ["y"])],
                 inits=[init("g", gamma)])


def test_elu_times_gamma_is_refused_by_default_and_fused_with_allow_rounding():
    m = _elu_gamma(1.050701)
    refused(m, "rounds differently")
    fused, _ = fuse_with_result(m, allow_rounding=True)
    assert ops(fused) == ["Selu"]
    # why it is refused by default: the two differ in the last bits for many x < 0
    x = {"x": np.linspace(-3, 0, 24, dtype=np.float32).reshape(2, 3, 4)}
    assert not np.array_equal(evaluate(m, x)["y"], evaluate(fused, x)["y"])
    a = attrs(fused, "Selu")
    assert np.float32(a["alpha"]) == np.float32(1.6732632)
    assert np.float32(a["gamma"]) == np.float32(1.050701)


def test_elu_times_non_scalar_gamma_is_refused():
    refused(_elu_gamma([[1.0], [2.0], [1.05]]), "not a scalar", allow_rounding=True)


# -- broadcasting, opsets, types ------------------------------------------------------------


def test_slope_that_would_broadcast_x_to_another_shape_is_refused():
    nodes = [const("z", 0.0), helper.make_node("Less", ["x", "z"], ["c"]),
             helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    m = make_model(nodes, [vi("x", shape=(1, 3))], [vi("y", shape=(2, 3))], opset=17,
                   initializers=[init("s", np.full((2, 3), 0.5))])
    refused(m, "does not broadcast")


def test_legacy_prelu_placement_must_match_the_pattern():
    """Opset 6: a 1-D slope the pattern's Mul puts on the last axis, whose length is also
    X's channel count: PRelu-6 would apply it per channel (axis 1) -- refused."""
    def m(axis):
        kw = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
        return model([helper.make_node("Mul", ["x", "s"], ["sx"], **kw),
                      helper.make_node("Max", ["x", "sx"], ["y"])], opset=6, shape=(2, 3, 4, 3),
                     inits=[init("s", [0.5, 0.25, 1.0])])
    refused(m(None), "would place slope")
    fused, _ = fuse_with_result(m(1))  # Mul puts it on axis 1, as PRelu-6 does
    assert ops(fused) == ["PRelu"]
    same_numbers(m(1), fused, feeds_for(m(1)), ort=False)  # onnxruntime runs opset >= 7 only


def test_value_used_outside_the_pattern_blocks_fusion():
    nodes = [const("z", 0.0), helper.make_node("Less", ["x", "z"], ["c"]),
             const("s", 0.5), helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    m = model(nodes, outputs=("y", "sx"))
    refused(m, USED_OUTSIDE)
    # the comparison also feeds another node
    m = model([*nodes, helper.make_node("Cast", ["c"], ["y2"], to=TP.FLOAT)],
              outputs=("y", "y2"))
    refused(m, USED_OUTSIDE)


def test_element_type_the_target_op_does_not_accept_is_refused():
    # bfloat16 at opset 15: PRelu-9 and LeakyRelu-6 do not accept it (they do from 16)
    nodes = [const("z", 0.0, ml_dtypes.bfloat16), helper.make_node("Less", ["x", "z"], ["c"]),
             const("s", 0.5, ml_dtypes.bfloat16), helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    refused(model(nodes, opset=15, elem=TP.BFLOAT16), "does not accept element type bfloat16")
    fused, _ = fuse_with_result(model(nodes, opset=16, elem=TP.BFLOAT16))
    assert ops(fused) == ["LeakyRelu"]


def test_integer_pattern_fuses_to_prelu():
    nodes = [const("z", 0, np.int32), helper.make_node("Less", ["x", "z"], ["c"]),
             const("s", 3, np.int32), helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    # onnxruntime has no int32 PRelu kernel: the evaluator checks the numbers
    fuses_to(model(nodes, opset=13, elem=TP.INT32), "PRelu", ort=False)


def test_integer_min_and_relu_sub_forms_are_refused():
    x = np.array([np.iinfo(np.int32).max], np.int32)
    with np.errstate(over="ignore"):
        assert np.minimum(x, x * np.int32(2))[0] != x[0]  # 2*x wraps, Min picks it
    m = model([const("a", 2, np.int32), helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Min", ["x", "ax"], ["y"])], opset=14, elem=TP.INT32)
    refused(m, "wraps around")
    sub = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["nx"]),
                 helper.make_node("Relu", ["nx"], ["rn"]),
                 helper.make_node("Mul", ["s", "rn"], ["srn"]),
                 helper.make_node("Sub", ["r", "srn"], ["y"])], opset=14, elem=TP.INT32,
                inits=[init("s", [[2], [3], [1]], np.int32)])
    refused(sub, "most negative")


def test_selu_body_with_different_alphas_is_refused():
    nodes = [const("z", 0.0), const("a1", 1.5), const("a2", 1.25), const("g", 1.05),
             helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Mul", ["a1", "e"], ["ae"]),
             helper.make_node("Sub", ["ae", "a2"], ["aea"]),
             helper.make_node("Mul", ["g", "aea"], ["neg"]),
             helper.make_node("Mul", ["g", "x"], ["pos"]),
             helper.make_node("Less", ["x", "z"], ["c"]),
             helper.make_node("Where", ["c", "neg", "pos"], ["y"])]
    refused(model(nodes, opset=13), "differ")
    nodes[2] = const("a2", 1.5)
    fused, _ = fuses_to(model(nodes, opset=13), "Selu", signed_zeros=False)
    assert attrs(fused, "Selu") == {"alpha": 1.5, "gamma": pytest.approx(1.05)}


def test_subgraph_patterns_are_fused():
    body = [const("s", 0.25), helper.make_node("Mul", ["x", "s"], ["sx"]),
            helper.make_node("Max", ["x", "sx"], ["then_y"])]
    then = helper.make_graph(body, "then", [], [vi("then_y")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["else_y"])], "else", [],
                              [vi("else_y")])
    m = make_model([helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
                   [vi("x"), helper.make_tensor_value_info("cond", TP.BOOL, [])], [vi("y")],
                   opset=17)
    fused, result = fuse_with_result(m)
    (g,) = [a.g for a in fused.graph.node[0].attribute if a.name == "then_branch"]
    assert [n.op_type for n in g.node] == ["LeakyRelu"], result.lines()
    feeds = {"x": specials(np.float32, (2, 3, 4)), "cond": np.array(True)}
    same_numbers(m, fused, feeds)


def _max_form(x: str, y: str, tag: str, a: float = 0.25) -> list:
    return [const(f"{tag}_a", a), helper.make_node("Mul", [x, f"{tag}_a"], [f"{tag}_ax"]),
            helper.make_node("Max", [x, f"{tag}_ax"], [y], name=f"{tag}_max")]


def test_fusions_in_main_graph_nested_subgraphs_and_functions_are_written_back():
    """Each scope's node list is edited where it fused -- main graph, an If inside an If,
    a function body -- and nowhere else."""
    inner_then = helper.make_graph(_max_form("x", "it_y", "it"), "inner_then", [],
                                   [vi("it_y")])
    inner_else = helper.make_graph([helper.make_node("Neg", ["x"], ["ie_y"])], "inner_else",
                                   [], [vi("ie_y")])
    outer_then = helper.make_graph(
        [helper.make_node("If", ["cond"], ["inner"], then_branch=inner_then,
                          else_branch=inner_else, name="inner_if"),
         *_max_form("inner", "ot_y", "ot", 0.5)], "outer_then", [], [vi("ot_y")])
    outer_else = helper.make_graph([helper.make_node("Identity", ["x"], ["oe_y"])],
                                   "outer_else", [], [vi("oe_y")])
    f = helper.make_function("local", "F", ["fx"], ["fy"], _max_form("fx", "fy", "f", 0.125),
                             [helper.make_opsetid("", 17)])
    nodes = [*_max_form("x", "m", "main"),
             helper.make_node("If", ["cond"], ["i"], then_branch=outer_then,
                              else_branch=outer_else, name="outer_if"),
             helper.make_node("F", ["i"], ["fo"], domain="local", name="call"),
             helper.make_node("Add", ["m", "fo"], ["y"], name="add")]
    m = make_model(nodes, [vi("x"), helper.make_tensor_value_info("cond", TP.BOOL, [])],
                   [vi("y")], opset=17, functions=[f],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    before = m.SerializeToString()
    fused, result = fuse_with_result(m)
    assert m.SerializeToString() == before
    assert sorted(e.node for e in result.fused) == ["f_max", "it_max", "main_max", "ot_max"]
    onnx.checker.check_model(fused, full_check=True)

    def listing(nodes):
        return [(n.op_type, n.name) for n in nodes if n.op_type != "Constant"]

    assert listing(fused.graph.node) == [("LeakyRelu", "main_max"), ("If", "outer_if"),
                                         ("F", "call"), ("Add", "add")]
    outer = {a.name: a.g for a in fused.graph.node[1].attribute}
    assert listing(outer["then_branch"].node) == [
        ("If", "inner_if"), ("LeakyRelu", "ot_max")]
    assert outer["else_branch"].SerializeToString() == outer_else.SerializeToString()
    inner = {a.name: a.g for a in outer["then_branch"].node[0].attribute}
    assert listing(inner["then_branch"].node) == [("LeakyRelu", "it_max")]
    assert inner["else_branch"].SerializeToString() == inner_else.SerializeToString()
    assert listing(fused.functions[0].node) == [("LeakyRelu", "f_max")]
    for cond in (True, False):
        same_numbers(m, fused, {"x": specials(np.float32, (2, 3, 4)), "cond": np.array(cond)},
                     ort=False)


# -- API -----------------------------------------------------------------------------------


def _leaky_model():
    return model([const("a", 0.2), helper.make_node("Mul", ["x", "a"], ["ax"]),
                  helper.make_node("Max", ["x", "ax"], ["y"])])


def test_fuse_does_not_mutate_and_returns_the_same_kind(tmp_path):
    m = _leaky_model()
    before = m.SerializeToString()
    out = fuse(m)
    assert m.SerializeToString() == before
    assert isinstance(out, onnx.ModelProto) and ops(out) == ["LeakyRelu"]
    irm = ir.serde.deserialize_model(m)
    n_before = len(list(irm.graph))
    out_ir = fuse(irm)
    assert isinstance(out_ir, ir.Model) and len(list(irm.graph)) == n_before
    assert [n.op_type for n in out_ir.graph] == ["LeakyRelu"]
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    assert ops(fuse(p)) == ["LeakyRelu"]
    # no value_info added by the shape inference fuse runs on its copy
    assert not out.graph.value_info


def test_fuse_pass_modified_is_truthful():
    p = FusePass()
    irm = ir.serde.deserialize_model(_leaky_model())
    assert p(irm).modified
    assert [n.op_type for n in irm.graph] == ["LeakyRelu"]
    assert not FusePass()(irm).modified
    bad = ir.serde.deserialize_model(model([const("a", 1.5),
                                            helper.make_node("Mul", ["x", "a"], ["ax"]),
                                            helper.make_node("Max", ["x", "ax"], ["y"])]))
    p = FusePass()
    assert not p(bad).modified
    assert any("> 1" in e.detail for e in p.last_result.refused)


def test_fuse_pass_fuses_inside_functions_typed_from_call_sites():
    from conftest import MODELS

    from opshift.passes.inline import inline

    m = onnx.load(MODELS / "local_function.onnx")
    inlined = inline(m)  # functions kept; the activations inside them decomposed
    irm = ir.serde.deserialize_model(inlined)
    p = FusePass()
    assert p(irm).modified
    body = [n.op_type for n in next(iter(irm.functions.values()))]
    assert sorted(body) == ["Add", "LeakyRelu", "PRelu", "Selu"], p.last_result.lines()
    leaky = [n for n in next(iter(irm.functions.values())) if n.op_type == "LeakyRelu"][0]
    assert leaky.attributes["alpha"].is_ref()  # LeakyRelu <alpha = @alpha>, as before
    out = ir.serde.serialize_model(irm)
    plain = ir.serde.serialize_model(ir.serde.deserialize_model(inlined))
    # no inferred type written into the model: value_info as onnx_ir writes it anyway
    assert {v.name for v in out.graph.value_info} <= {v.name for v in plain.graph.value_info}
    same_numbers(m, out, {"x": specials(np.float32, (3, 6))}, ort=False)


@pytest.mark.parametrize("gamma_ref", [True, False])
def test_selu_body_with_function_attributes_fuses_to_selu_with_the_references(gamma_ref):
    """A function's ``Selu<alpha=@alpha, gamma=@gamma or a literal>``, inlined, comes back
    with the same references: the body's constants are then attribute references, not
    constants, and the check falls back to reading them as such."""
    from opshift.passes.inline import inline

    selu = helper.make_node("Selu", ["x"], ["y"])
    selu.attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    if gamma_ref:
        selu.attribute.append(helper.make_attribute_ref("gamma", onnx.AttributeProto.FLOAT))
    else:
        selu.attribute.append(helper.make_attribute("gamma", 1.25))
    f = helper.make_function("local", "F", ["x"], ["y"], [selu], [helper.make_opsetid("", 18)],
                             attributes=["alpha", "gamma"] if gamma_ref else ["alpha"])
    call = helper.make_node("F", ["x"], ["y"], domain="local", alpha=0.5,
                            **({"gamma": 2.0} if gamma_ref else {}))
    g = helper.make_graph([call], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [3, 6])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [3, 6])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18),
                                            helper.make_opsetid("local", 1)], functions=[f])
    inlined = inline(m)  # the function kept, its Selu decomposed
    assert "Selu" not in [n.op_type for n in inlined.functions[0].node]
    out, result = fuse_with_result(inlined)
    (node,) = out.functions[0].node
    got = {a.name: a.ref_attr_name or a.f for a in node.attribute}
    assert (node.op_type, got) == ("Selu", {"alpha": "alpha",
                                            "gamma": "gamma" if gamma_ref else 1.25})
    same_numbers(m, out, {"x": specials(np.float32, (3, 6))}, ort=False)


def test_rules_is_a_rewrite_rule_set():
    from onnxscript.rewriter import RewriteRuleSet

    rs = rules()
    assert isinstance(rs, RewriteRuleSet)
    assert all(r.name for r in rs)


# -- command -------------------------------------------------------------------------------


def test_cli_fuse_verify_verbose_json(tmp_path, capsys):
    from opshift.cli import main

    src = tmp_path / "in.onnx"
    onnx.save(model([const("a", 0.2), helper.make_node("Mul", ["x", "a"], ["ax"]),
                     helper.make_node("Max", ["x", "ax"], ["y"]),
                     const("b", 1.5), helper.make_node("Mul", ["y", "b"], ["yb"]),
                     helper.make_node("Max", ["y", "yb"], ["y2"])], outputs=("y2",)), src)
    out = tmp_path / "out.onnx"
    assert main(["fuse", str(src), "-o", str(out), "--verify", "-v"]) == 0
    text = capsys.readouterr().out
    assert "fused" in text and "-> LeakyRelu" in text
    assert "refused" in text and "> 1" in text
    assert "verify: ok" in text
    assert ops(onnx.load(out)) == ["LeakyRelu", "Mul", "Max"]
    assert main(["fuse", str(src), "-o", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (change,) = data["changes"]
    assert change["what"].startswith("fused into LeakyRelu")
    assert "> 1" in data["details"]["refused"][0]["reason"]


def test_cli_verify_catches_a_wrong_fusion_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from opshift.cli import main
    from opshift.rewriters import _checks

    real = _checks.scalar_attr
    monkeypatch.setattr(_checks, "scalar_attr", lambda *a, **k: real(*a, **k) * 1.5)
    src = tmp_path / "in.onnx"
    onnx.save(_leaky_model(), src)
    out = tmp_path / "out.onnx"
    assert main(["fuse", str(src), "-o", str(out), "--verify"]) == 1
    assert not out.exists()
    text, err = capsys.readouterr()
    assert "FAIL" in text and "nothing written" in err


def _pattern_text(pattern) -> str:
    """``str(pattern)`` with anonymous values numbered by first appearance, not by id."""
    import re

    ids: dict[str, str] = {}
    return re.sub(r":(\d+)", lambda m: ":" + ids.setdefault(m.group(1), str(len(ids))),
                  str(pattern))


def test_rules_commute_lazily_and_their_filters_hold_for_every_operand_order():
    """A rule's op set and its root's input-op multiset come from the pattern as written;
    every commuted variant has the same. Variants are listed only when first needed, and
    each is built only when a node first fits it -- the same patterns, in the same order, as
    onnxscript's ``GraphPattern.commute`` builds all at once."""
    from opshift.rewriters._report import skeleton, skeleton_ops

    for rule in [*rules().rules, *rules(allow_rounding=True).rules]:
        assert rule._commuted is None, rule.name
        ops = skeleton_ops(rule)
        variants = rule._variants
        assert len(variants) >= 2, rule.name  # Add/Mul/Max/Min operands commuted
        assert all(built is None for _, _, built in variants), rule.name
        reference = rule._target_pattern.commute()
        assert len(variants) == len(reference), rule.name
        for entry, want in zip(variants, reference):
            skel = entry[0]
            assert skel == skeleton(want.output_node), rule.name
            assert _pattern_text(rule._variant_rule(entry)._target_pattern) == \
                _pattern_text(want), rule.name
            todo, seen = [skel], set()
            while todo:
                op, children = todo.pop()
                seen.add(op)
                todo.extend(child for _, child in children)
            assert seen == ops, rule.name
            assert sorted(child[0] for _, child in skel[1]) == rule._needs, rule.name
        assert rule._variants is variants  # listed once
        assert rule._variant_rule(variants[-1]) is variants[-1][2]  # built once
