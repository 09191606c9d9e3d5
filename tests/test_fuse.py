"""fuse: onnx's expanded backend models, the Max/Min, comparison, Relu and Elu forms, and
their refusals."""

from __future__ import annotations

import importlib

import numpy as np
import onnx
import pytest
from conftest import make_model, vi
from fuse_helpers import (
    XS,
    attrs,
    const,
    fuses_to,
    init,
    model,
    ops,
    refused,
    same_numbers,
    specials,
)
from onnx import TensorProto as TP
from onnx import helper

from opshift import evaluate
from opshift.fuse.driver import fuse_with_result
from opshift.fuse.rules import rules
from opshift.verify import compare

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


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
                             [vi("y/slope", shape=XS)])
    els = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                            [vi("e", shape=XS)])
    nodes = [helper.make_node("Relu", ["x0"], ["x"]),
             const("s", np.array([0.5, 0.1, 0.25]).reshape(3, 1), np.float64),
             helper.make_node("Cast", ["s"], ["sc"], to=TP.FLOAT, name="twin"),
             helper.make_node("Mul", ["sc", "x"], ["sx"], name="twin"),
             const("z", 0.0), helper.make_node("Less", ["x", "z"], ["c"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"]),
             helper.make_node("If", ["b"], ["i"], then_branch=then, else_branch=els),
             helper.make_node("Add", ["y", "i"], ["out"], name="twin")]
    m = make_model(nodes, [vi("x0", shape=XS), vi("b", TP.BOOL, ())], [vi("out", shape=XS)],
                   opset=17)
    fused, result = fuse_with_result(m)
    onnx.checker.check_model(fused, full_check=True)
    for b in (True, False):
        same_numbers(m, fused, {"x0": specials(np.float32, (2, 3, 4)), "b": np.array(b)})
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
    m.graph.value_info.extend([vi("a", shape=XS), vi("ax", shape=XS)])
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
    gives s*(+-0), so those forms need a finite slope, and one without negative elements for
    the zeros to keep their sign -- else allow_rounding fuses them)."""
    zero_to_slope = form[3]
    fuses_to(_where_model(form, mirrored, [[0.5], [2.0], [0.0]]), "PRelu")
    m = _where_model(form, mirrored, [[0.5], [-2.0], [0.0]])
    if zero_to_slope:
        refused(m, "slope element -2.0 is negative: at x = +0 the pattern gives -2.0*(+0) = -0")
        fuses_to(m, "PRelu", signed_zeros=False, allow_rounding=True)
    else:
        fuses_to(m, "PRelu")
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
    refused(add, "at x = -0 the pattern gives +0")
    fuses_to(add, "PRelu", signed_zeros=False, allow_rounding=True)
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
