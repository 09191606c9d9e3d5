"""Node metadata kept in the model's ``metadata_props`` where convert writes an IR version
below 10 (issue 38): ``opshift.convert(..., keep_node_metadata=True)`` and ``opshift convert
--node-metadata-to-model`` move each entry to ``node:<node name>:<key>`` (a node of a function
prefixed by ``<domain>:<name>/``, an unnamed node named ``<OpType #i>``); a key the model holds
already is never overwritten (``#2``, ``#3``, ... appended); the other annotations are still
dropped, and the notes say where each went."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from exporter_models import dynamo_ir10_metadata
from onnx import TensorProto as T
from onnx import helper as h

import opshift
from opshift.cli import main
from opshift.convert.engine import convert_proto
from opshift.graph import ir_versions
from tests.conftest import make_model

vi = h.make_tensor_value_info


def dynamo_like() -> onnx.ModelProto:
    """exporter_models.dynamo_ir10_metadata with a metadata entry of the model's own."""
    m = dynamo_ir10_metadata()
    m.metadata_props.add(key="producer.note", value="kept")
    return m


def _expected() -> dict[str, str]:
    out = {"producer.note": "kept"}
    for i, op in enumerate(("MatMul", "Relu", "ReduceMean")):
        out[f"node:node_{op}_{i}:pkg.torch.onnx.stack_trace"] = f"line {i}"
        out[f"node:node_{op}_{i}:namespace"] = f": __main__.M/{op}"
    return out


def _model_metadata(m: onnx.ModelProto) -> dict[str, str]:
    return {e.key: e.value for e in m.metadata_props}


@pytest.mark.parametrize("target", [9, 6])
def test_dynamo_export_keeps_node_metadata_in_the_model(target):
    m = dynamo_like()
    out = opshift.convert(m, target, keep_node_metadata=True)
    assert out.ir_version == {9: 4, 6: 3}[target]
    assert ir_versions.annotations(out) == {}  # no node (nor value) metadata left
    assert _model_metadata(out) == _expected()
    onnx.checker.check_model(out, full_check=True)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    report = opshift.verify(m, out, {"x": x})
    assert report.ok, report
    assert _model_metadata(m) == {"producer.note": "kept"}  # the input stays as it was


def test_the_notes_say_where_node_metadata_went_and_what_was_dropped():
    m = dynamo_like()
    result = convert_proto(m, 9, keep_node_metadata=True)
    moved, dropped = result.notes
    assert moved.startswith("moved node metadata (6) to the model's metadata_props as "
                            "'node:<node>:<key>': IR 4 (onnx 1.4.1) does not define node")
    assert dropped.startswith("dropped value metadata (1): ") and "node" not in dropped


def test_a_key_the_model_holds_is_never_overwritten():
    m = dynamo_like()
    m.metadata_props.add(key="node:node_Relu_1:namespace", value="the model's own")
    # two unnamed nodes of one op, one of them with the same key twice
    extra = [h.make_node("Relu", ["y"], ["y2"]), h.make_node("Relu", ["y2"], ["y3"])]
    extra[0].metadata_props.add(key="k", value="a")
    extra[1].metadata_props.add(key="k", value="b")
    extra[1].metadata_props.add(key="k", value="c")
    m.graph.node.extend(extra)
    m.graph.output[0].name = "y3"
    result = convert_proto(m, 9, keep_node_metadata=True)
    onnx.checker.check_model(m, full_check=True)
    got = _model_metadata(m)
    assert got["node:node_Relu_1:namespace"] == "the model's own"
    assert got["node:node_Relu_1:namespace#2"] == ": __main__.M/Relu"
    assert got["node:<Relu #3>:k"] == "a"
    assert got["node:<Relu #4>:k"] == "b" and got["node:<Relu #4>:k#2"] == "c"
    assert "moved node metadata (9)" in result.notes[0]
    assert "2 under a key the model held already, with '#k' appended" in result.notes[0]


def test_nodes_of_functions_and_subgraphs_are_named_by_where_they_are():
    body = h.make_node("Relu", ["a"], ["b"], name="inner")
    body.metadata_props.add(key="k", value="in the function")
    f = h.make_function("local", "F", ["a"], ["b"], [body], [h.make_opsetid("", 18)])
    then_node = h.make_node("Neg", ["x"], ["t"], name="neg")
    then_node.metadata_props.add(key="k", value="in the branch")
    branch = h.make_graph([then_node], "then", [], [vi("t", T.FLOAT, [3])])
    other = h.make_graph([h.make_node("Identity", ["x"], ["e"])], "else", [],
                         [vi("e", T.FLOAT, [3])])
    nodes = [h.make_node("F", ["x"], ["f"], domain="local", name="call"),
             h.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)]
    m = make_model(nodes, [vi("x", T.FLOAT, [3]), vi("c", T.BOOL, [])],
                   [vi("y", T.FLOAT, [3]), vi("f", T.FLOAT, [3])], opset=18, functions=[f],
                   extra_opsets=[h.make_opsetid("local", 1)], ir_version=10)
    out = opshift.convert(m, 13, keep_node_metadata=True)  # functions: IR 8
    assert out.ir_version == 8
    onnx.checker.check_model(out, full_check=True)
    assert _model_metadata(out) == {"node:local:F/inner:k": "in the function",
                                    "node:neg:k": "in the branch"}
    assert ir_versions.annotations(out) == {}


def test_an_era_that_defines_node_metadata_keeps_it_on_the_nodes():
    out = opshift.convert(dynamo_like(), 21, keep_node_metadata=True)  # IR 10's era
    assert out.ir_version == 10
    assert ir_versions.annotations(out)["node metadata"] == 6
    assert _model_metadata(out) == {"producer.note": "kept"}


def test_without_the_option_node_metadata_is_dropped():
    out = opshift.convert(dynamo_like(), 9)
    assert _model_metadata(out) == {"producer.note": "kept"}
    assert ir_versions.annotations(out) == {}


def test_cli_node_metadata_to_model(tmp_path, capsys):
    src, dst = tmp_path / "dynamo.onnx", tmp_path / "out.onnx"
    onnx.save(dynamo_like(), src)
    assert main(["convert", str(src), "--opset", "9", "-o", str(dst),
                 "--node-metadata-to-model", "--verify"]) == 0
    shown = capsys.readouterr()
    assert "moved node metadata (6) to the model's metadata_props" in shown.out + shown.err
    out = onnx.load(dst)
    assert out.ir_version == 4 and _model_metadata(out) == _expected()
    assert ir_versions.annotations(out) == {}
    onnx.checker.check_model(out, full_check=True)
