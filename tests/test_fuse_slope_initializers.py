"""inline then fuse gives back a PRelu's initializer slope, not a Constant node.

At opsets 1..6 inline reads a constant slope of another shape than the legacy Mul takes
through a reshaped ``<node>/Slope`` Constant whose doc_string names the slope; fuse reads
that initializer again where it still holds the same values and PRelu places it alike, and
drops the Constant. A bfloat16 PRelu converted to 13 runs in float between Casts: in nodes
named as inline names them, fuse reads the Cast of the slope as is instead of folding it.

At opset 1 ``--verify`` checks the whole model only, as before: onnx shape inference gives
the fused region's output no type there, so no region is captured.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from clirun import opshift as run
from conftest import MODELS, init, make_model, vi
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import opshift
from opshift.fuse.driver import fuse_proto, verify_fuse
from opshift.inline.templates import RESHAPED_SLOPE

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CASES = [(name, opset) for name in ("small_cnn", "prelu7", "prelu16", "symbolic_batch")
         for opset in (1, 6)] + [("prelu16_bf16", 13)]


def _attributes(n: onnx.NodeProto, opset: int) -> dict:
    """The node's attributes, those it leaves out at their defaults (fuse writes Selu's
    alpha and gamma even where the node it replaced left them out)."""
    out = {}
    if onnx.defs.has(n.op_type, n.domain):
        schema = onnx.defs.get_schema(n.op_type, opset, n.domain)
        out = {k: helper.get_attribute_value(a.default_value)
               for k, a in schema.attributes.items() if a.default_value.name}
    for a in n.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = _scope(v, opset) if isinstance(v, onnx.GraphProto) else v
    return out


def _graph(m: onnx.ModelProto) -> dict:
    """The graph as compared: nodes (op, name, inputs, outputs, attributes, subgraphs
    alike), initializers by name and bytes, inputs and outputs (not the rule-name tag fuse
    gives its nodes in metadata_props)."""
    return _scope(m.graph, next(o.version for o in m.opset_import
                                if o.domain in ("", "ai.onnx")))


def _scope(g: onnx.GraphProto, opset: int) -> dict:
    return {
        "nodes": [(n.op_type, n.name, list(n.input), list(n.output), _attributes(n, opset))
                  for n in g.node],
        "initializers": {t.name: t.SerializeToString() for t in g.initializer},
        "inputs": [v.SerializeToString() for v in g.input],
        "outputs": [v.SerializeToString() for v in g.output],
    }


def _reshaped(m: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in m.graph.node if n.doc_string.startswith(RESHAPED_SLOPE)]


@pytest.mark.parametrize(("name", "opset"), CASES)
def test_inline_then_fuse_gives_the_graph_back(name, opset):
    src = opshift.convert(onnx.load(MODELS / f"{name}.onnx"), opset)
    flat = opshift.inline(src)
    if opset <= 6:  # the slope is read through a reshaped Constant naming it
        (c,) = _reshaped(flat)
        slope = c.doc_string.removeprefix(RESHAPED_SLOPE)
        assert c.op_type == "Constant" and slope in {t.name for t in flat.graph.initializer}
        assert not any(slope in n.input for n in flat.graph.node)
    fused, result = fuse_proto(flat, capture_regions=True)
    assert _graph(fused) == _graph(src), result.lines()
    report, _ = verify_fuse(flat, fused, result)
    assert report.ok, report.summary()
    if opset > 1:  # (at opset 1 fuse captures no region: see the module docstring)
        assert len(result.regions) == len(result.fused)


def test_cli_fuse_verify_gives_the_initializer_back(tmp_path):
    src, flat, back = tmp_path / "m.onnx", tmp_path / "flat.onnx", tmp_path / "back.onnx"
    onnx.save(opshift.convert(onnx.load(MODELS / "small_cnn.onnx"), 6), src)
    assert run("inline", src, "-o", flat).returncode == 0
    p = run("fuse", flat, "-o", back, "--verify")
    assert p.returncode == 0 and "verify: ok: 3 rewrites" in p.stdout + p.stderr, \
        p.stdout + p.stderr
    assert _graph(onnx.load(back)) == _graph(onnx.load(src))


def _flat_prelu7() -> tuple[onnx.ModelProto, onnx.TensorProto]:
    flat = opshift.inline(opshift.convert(onnx.load(MODELS / "prelu7.onnx"), 6))
    (t,) = [t for t in flat.graph.initializer
            if t.name == _reshaped(flat)[0].doc_string.removeprefix(RESHAPED_SLOPE)]
    return flat, t


def _slope_read(m: onnx.ModelProto) -> str:
    (p,) = [n for n in m.graph.node if n.op_type == "PRelu"]
    return p.input[1]


def test_the_initializer_is_read_only_where_it_computes_the_same():
    """Other values, a shape PRelu-6 places otherwise, an initializer a caller may feed (IR
    7, listed as an input), or none of that name: the Constant stays the slope."""
    flat, t = _flat_prelu7()
    assert _slope_read(opshift.fuse(flat)) == t.name
    values = numpy_helper.to_array(t)
    changes = {
        "values": lambda m, t: t.CopyFrom(numpy_helper.from_array(values * 0.5, t.name)),
        "shape": lambda m, t: t.CopyFrom(numpy_helper.from_array(
            values.reshape(3, 1, 1, 1), t.name)),
        "dtype": lambda m, t: t.CopyFrom(numpy_helper.from_array(
            values.astype(np.float64), t.name)),
        "fed": lambda m, t: setattr(m, "ir_version", 7),
        "gone": lambda m, t: setattr(t, "name", "another"),
    }
    for what, change in changes.items():
        m, t = _flat_prelu7()
        change(m, t)
        fused, result = fuse_proto(m, capture_regions=True)
        assert [e.detail for e in result.fused] == ["PRelu"], (what, result.lines())
        assert _slope_read(fused) == "block.prelu/Slope", what
        assert "block.prelu/Slope" in {o for n in fused.graph.node for o in n.output}, what


def test_a_subgraph_gets_the_main_graph_s_initializer_back():
    """A PRelu in an If branch reading the main graph's slope, at opset 6 (IR 3)."""
    w = init("w", np.array([0.25, 0.5, 2.0], np.float32).reshape(3, 1, 1))
    then = helper.make_graph([helper.make_node("PRelu", ["x", "w"], ["p"], name="prelu")],
                             "then", [], [vi("p", shape=[2, 3, 4, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"], name="neg")], "else",
                              [], [vi("n", shape=[2, 3, 4, 4])])
    src = make_model([helper.make_node("If", ["b"], ["y"], name="if", then_branch=then,
                                       else_branch=other)],
                     [vi("b", TP.BOOL, []), vi("x", shape=[2, 3, 4, 4]), vi("w", shape=[3, 1, 1])],
                     [vi("y", shape=[2, 3, 4, 4])], opset=6, initializers=[w])
    flat = opshift.inline(src)
    (branch,) = [a.g for a in flat.graph.node[0].attribute if a.name == "then_branch"]
    assert [n.doc_string for n in branch.node if n.op_type == "Constant"] == \
        [RESHAPED_SLOPE + "w"]
    fused, result = fuse_proto(flat, capture_regions=True)
    assert _graph(fused) == _graph(src), result.lines()
    assert [n.input[1] for a in fused.graph.node[0].attribute for n in a.g.node
            if n.op_type == "PRelu"] == ["w"]
    report, _ = verify_fuse(flat, fused, result)
    assert report.ok, report.summary()
