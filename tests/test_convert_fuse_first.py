"""convert below the opset an op of a function body needs (Where below 9): onnx's own
``_expanded`` PRelu / LeakyRelu / Selu models are fused back into the op first -- only the
regions holding refused nodes, only when that is the only way -- then converted; what fuse
cannot do is still refused."""

from __future__ import annotations

import importlib
import json

import numpy as np
import onnx
import pytest
from clirun import opshift
from conftest import assert_outputs_exact, make_model, vi
from fuse_helpers import ops, specials
from onnx import TensorProto as TP
from onnx import helper

from opshift import evaluate
from opshift.convert import convert
from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.verify import compare

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

EXPANDED = {"test_prelu_example_expanded": "PRelu", "test_prelu_broadcast_expanded": "PRelu",
            "test_leakyrelu_expanded": "LeakyRelu",
            "test_leakyrelu_example_expanded": "LeakyRelu",
            "test_leakyrelu_default_expanded": "LeakyRelu",
            "test_selu_expanded_ver18": "Selu", "test_selu_example_expanded_ver18": "Selu",
            "test_selu_default_expanded_ver18": "Selu"}


@pytest.fixture(scope="module")
def cases() -> dict:
    import onnx.backend.test.case.node as node_cases

    for mod in ("prelu", "leakyrelu", "selu"):  # importing a module generates its cases
        importlib.import_module(f"onnx.backend.test.case.node.{mod}")
    found = {c.name: c for c in node_cases._NodeTestCases}
    if not set(EXPANDED) <= set(found):  # generated earlier under an op filter
        found = {c.name: c for c in node_cases.collect_testcases(None)}
    return found


def _feeds(model: onnx.ModelProto, inputs) -> dict:
    return dict(zip([v.name for v in model.graph.input], inputs))


@pytest.mark.parametrize("name", sorted(EXPANDED))
def test_expanded_model_converts_to_every_opset_below_9_exactly(cases, name):
    case = cases[name]
    op = EXPANDED[name]
    expanded = case.model
    before = expanded.SerializeToString()
    assert "Where" in ops(expanded) and op not in ops(expanded)
    inputs, expected = case.data_sets[0]
    feeds = [_feeds(expanded, inputs)]
    x = inputs[0]
    feeds.append({**feeds[0], expanded.graph.input[0].name: specials(x.dtype, x.shape)})
    want = [evaluate(expanded, f) for f in feeds]
    for target in range(1, 9):
        m = convert(expanded, target)
        # below 7 the body's Where has no form, so its region is fused; at 7 and 8 the Where
        # is written as a Gather and nothing is fused
        assert (ops(m) == [op]) == (target < 7), (target, ops(m))
        assert m.opset_import[0].version == target
        onnx.checker.check_model(m, full_check=True)
        for f, w in zip(feeds, want):
            # Selu's function body gives -0 at x = -0 where the op gives +0 (fuse's policy)
            assert_outputs_exact(w, evaluate(m, f), f"{name} at opset {target}",
                                 signed_zeros=op != "Selu")
        # and onnx's own expected outputs (the case's output .pb data): bit for bit; Selu's
        # at the case's tolerance, as onnx's runner compares: onnx computes them with
        # numpy's formula, whose cancellation in alpha*exp(x) - alpha near 0- rounds apart
        # from the function body's (which the original and the converted model both give)
        got = evaluate(m, feeds[0])
        for out, e in zip(m.graph.output, expected):
            if op == "Selu":
                np.testing.assert_allclose(got[out.name], e, rtol=case.rtol, atol=case.atol)
                continue
            c = compare(np.asarray(e), got[out.name], ulp=0)
            assert c.ok, (name, target, c.reason)
    assert expanded.SerializeToString() == before


@pytest.mark.parametrize("shape", [[1, 4, 5], [3, 1, 5], [3, 4, 1], [4, 1]])
def test_fusing_also_takes_away_a_body_node_refused_for_another_reason(cases, shape):
    # below 7 the body's Mul(x, slope) needs legacy broadcasting, which reads most of these
    # slopes only widened to x's shape; fusing the Where's region takes that Mul away
    from opshift.verify import verify

    m = onnx.ModelProto()
    m.CopyFrom(cases["test_prelu_broadcast_expanded"].model)
    s = m.graph.input[1].type.tensor_type.shape
    s.Clear()
    for d in shape:
        s.dim.add().dim_value = d
    rng = np.random.default_rng(0)
    feeds = {"x": specials(np.float32, [3, 4, 5]),
             "slope": rng.standard_normal(shape).astype(np.float32)}
    for target in (1, 5, 6):
        out = convert(m, target)
        assert ops(out)[-1] == "PRelu" and "Where" not in ops(out) and "Mul" not in ops(out)
        report = verify(m, out)
        assert report.ok, [r.reason for r in report.rows]
        assert_outputs_exact(evaluate(m, feeds), evaluate(out, feeds), f"opset {target}")


def test_fusion_is_a_change_saying_which_nodes_and_why(cases):
    m = onnx.ModelProto()
    m.CopyFrom(cases["test_leakyrelu_example_expanded"].model)
    log: list[str] = []
    result = convert_proto(m, 6, verbose_log=log.append)
    fused, *rest = result.changes
    assert fused.action == "fuse" and fused.label == "Where-16 -> LeakyRelu-6"
    assert fused.what.startswith("fused ") and "into LeakyRelu(alpha=0.1" in fused.what
    assert {"Where", "Less", "Mul"} <= set(fused.what.split(" into ")[0][6:].split(", "))
    assert fused.why.startswith("Where does not exist at opset 6")
    assert "exactly LeakyRelu by opshift fuse's checks" in fused.why
    assert fused.to_dict()["kind"] == "fuse"
    assert rest == [] and result.relabelled == 1  # the fused LeakyRelu-16 -> 6
    assert any("fused Where" in line and "Where does not exist" in line for line in log)


def test_selu_fusion_says_how_the_sign_of_zero_differs(cases):
    m = onnx.ModelProto()
    m.CopyFrom(cases["test_selu_expanded_ver18"].model)
    (fused,) = [c for c in convert_proto(m, 6).changes if c.action == "fuse"]
    assert "sign of zero" in fused.why and "Selu gives +0" in fused.why


def test_nothing_is_fused_where_the_ops_exist(cases):
    for target in (9, 12, 15):
        m = convert(cases["test_leakyrelu_expanded"].model, target)
        assert "Where" in ops(m) and "LeakyRelu" not in ops(m), target


def _leaky_where(x: str, y: str, alpha_name: str) -> list[onnx.NodeProto]:
    """LeakyRelu-16's function body over ``x`` (Constant, CastLike, Less, Mul, Where)."""
    a, z = f"{alpha_name}", f"{alpha_name}_zero"
    return [
        helper.make_node("Constant", [], [a], value=onnx.numpy_helper.from_array(
            np.array(0.25, np.float32))),
        helper.make_node("Constant", [], [z], value=onnx.numpy_helper.from_array(
            np.array(0.0, np.float32))),
        helper.make_node("Less", [x, z], [f"{y}_neg"]),
        helper.make_node("Mul", [a, x], [f"{y}_ax"]),
        helper.make_node("Where", [f"{y}_neg", f"{y}_ax", x], [y], name=f"where_{y}"),
    ]


def _max_form(x: str, y: str) -> list[onnx.NodeProto]:
    """``Max(x, 0.5 * x)``, a LeakyRelu form fuse fuses -- but nothing refuses it."""
    return [helper.make_node("Constant", [], [f"{y}_s"], value=onnx.numpy_helper.from_array(
                np.array(0.5, np.float32))),
            helper.make_node("Mul", [x, f"{y}_s"], [f"{y}_m"]),
            helper.make_node("Max", [x, f"{y}_m"], [y], name=f"max_{y}")]


def _model(nodes, outputs=("y",)) -> onnx.ModelProto:
    return make_model(nodes, [vi("x", TP.FLOAT, [2, 3]), vi("c", TP.BOOL, [2, 3])],
                      [vi(o, TP.FLOAT, [2, 3]) for o in outputs], opset=16)


def test_only_the_regions_holding_refused_nodes_are_fused():
    m = _model([*_max_form("x", "h"), *_leaky_where("h", "y", "alpha")])
    out = convert(m, 6)
    assert ops(out) == ["Mul", "Max", "LeakyRelu"]
    fused = [c for c in convert_proto(m, 6).changes if c.action == "fuse"]
    assert [c.node for c in fused] == ["where_y"]
    x = {"x": specials(np.float32, [2, 3]), "c": np.ones([2, 3], bool)}
    assert_outputs_exact(evaluate(m, x), evaluate(out, x))


def test_a_missing_op_fuse_cannot_fuse_is_refused_naming_node_op_and_version():
    m = _model([*_leaky_where("x", "h", "alpha"),
                helper.make_node("Where", ["c", "h", "x"], ["y"], name="select")])
    before = m.SerializeToString()
    with pytest.raises(ConversionError) as e:
        convert_proto(m, 6)
    msg = str(e.value)
    assert msg.startswith("node 'select' (Where-16 -> opset 6, graph 'g'): Where does not exist "
                          "at opset 6"), msg
    assert m.SerializeToString() == before  # the fusable region is not fused either


def test_a_refusal_after_fusing_names_its_node_and_the_fusion():
    m = make_model([*_leaky_where("x", "h", "alpha"),
                    helper.make_node("Div", ["t", "h"], ["y"], name="scale")],
                   # (C symbolic: a t of [N, 1] is not tiled to [N, C] by a known size)
                   [vi("x", TP.FLOAT, ["N", "C"]), vi("t", TP.FLOAT, ["N", 1])],
                   [vi("y", TP.FLOAT, ["N", "C"])], opset=16)
    before = m.SerializeToString()
    with pytest.raises(ConversionError) as e:
        convert_proto(m, 6)
    msg = str(e.value)
    assert msg.startswith("node 'scale' (Div-14 -> 6, graph 'g'): step Div-7 -> Div-6"), msg
    assert msg.endswith("(after fusing 1 region(s) into single ops first, because Where does "
                        "not exist at opset 6)")
    assert m.SerializeToString() == before


def test_fuse_refusing_the_region_says_why():
    nodes = _leaky_where("x", "y", "alpha")
    m = _model(nodes, outputs=("y", "y_ax"))  # the Mul's value is also a graph output
    with pytest.raises(ConversionError) as e:
        convert(m, 6)
    msg = str(e.value)
    assert msg.startswith("node 'where_y' (Where-16 -> opset 6, graph 'g'): Where does not exist")
    assert "fuse refused the pattern ending at node 'where_y' (Where)" in msg
    assert "used outside it" in msg


def test_regions_in_subgraphs_and_functions_are_fused(cases):
    body = cases["test_leakyrelu_expanded"].model.graph
    f = helper.make_function("local", "LR", ["x"], ["y"], list(body.node),
                             [helper.make_opsetid("", 16)])
    then = helper.make_graph([helper.make_node("LR", ["x"], ["t"], domain="local")], "then",
                             [], [vi("t", TP.FLOAT, [3, 4, 5])])
    other = helper.make_graph(list(body.node), "else", [], [vi("y", TP.FLOAT, [3, 4, 5])])
    m = make_model([helper.make_node("If", ["c"], ["out"], then_branch=then,
                                     else_branch=other, name="if")],
                   [vi("x", TP.FLOAT, [3, 4, 5]), vi("c", TP.BOOL, [])],
                   [vi("out", TP.FLOAT, [3, 4, 5])], opset=16, functions=[f],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    result = convert_proto(out := onnx.ModelProto.FromString(m.SerializeToString()), 6)
    scopes = sorted(c.scope for c in result.changes if c.action == "fuse")
    assert scopes == ["function local::LR", "graph 'g'/node 'if'/else_branch"]
    assert [n.op_type for n in out.functions[0].node] == ["LeakyRelu"]
    x = specials(np.float32, [3, 4, 5])
    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        assert_outputs_exact(evaluate(m, feeds), evaluate(out, feeds))


# -- the command line ------------------------------------------------------------------------


@pytest.fixture
def expanded_file(tmp_path, cases):
    def save(name: str):
        p = tmp_path / f"{name}.onnx"
        onnx.save(cases[name].model, p)
        return p

    return save


def test_cli_says_it_fused_first_and_why(tmp_path, expanded_file):
    src = expanded_file("test_prelu_broadcast_expanded")
    before = src.read_bytes()
    out = tmp_path / "o.onnx"
    p = opshift("convert", src, "--opset", 6, "-o", out)
    assert p.returncode == 0, p.stderr
    assert ("note: fused 1 region into a single op before converting, the only way: Where "
            "does not exist at opset 6") in p.stdout
    assert "<Where #4> (Where-16 -> PRelu-6): fused " in p.stdout
    assert ops(onnx.load(out)) == ["PRelu"] and src.read_bytes() == before
    p = opshift("convert", src, "--opset", 6, "-o", out, "-v", "--force")
    assert "Where does not exist at opset 6 and no exact decomposition applies" in p.stdout
    assert "exactly PRelu by opshift fuse's checks [WhereSlope]" in p.stdout


def test_cli_json_lists_the_fusion(tmp_path, expanded_file):
    p = opshift("convert", expanded_file("test_leakyrelu_default_expanded"), "--opset", 5,
                "-o", tmp_path / "o.onnx", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    (fused,) = [c for c in d["changes"] if c.get("kind") == "fuse"]
    assert fused["op"] == "Where-16 -> LeakyRelu-1" and "into LeakyRelu" in fused["what"]
    assert fused["why"].startswith("Where does not exist at opset 5")
    assert d["details"]["fused"] == 1 and d["ops_after"] == {"LeakyRelu": 1}
    assert any("the only way" in n for n in d["notes"])


def test_cli_verify_checks_the_fusion_and_notes_the_sign_of_zero(tmp_path, expanded_file):
    p = opshift("convert", expanded_file("test_selu_default_expanded_ver18"), "--opset", 6,
                "-o", tmp_path / "o.onnx", "--verify", "--json")
    assert p.returncode == 0, p.stderr
    v = json.loads(p.stdout)["verify"]
    assert v["ok"] and v["checks"]["whole_model"]
    assert [r["label"] for r in v["rows"]][0] == "fused Where -> Selu"
    assert any("signs of zeros not compared" in n for n in v["notes"])


def test_cli_refuses_what_fuse_cannot_fuse(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(_model([helper.make_node("Where", ["c", "x", "x"], ["y"], name="select")]), src)
    out = tmp_path / "o.onnx"
    p = opshift("convert", src, "--opset", 6, "-o", out, "--json")
    assert p.returncode == 2 and not out.exists()
    err = json.loads(p.stdout)["error"]
    assert err["node"] == "select" and err["op"] == "Where-16"
    assert "Where does not exist at opset 6" in err["message"]
