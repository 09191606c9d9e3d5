"""One rule for IR versions (issue 38, item 1): convert, inspect and fix agree. Going down,
annotations the written IR does not define are dropped; only an IR version below what the
model holds needs is a defect; an IR above its opset's era is not."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from exporter_models import dynamo_ir10_metadata
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import opshift
from opshift.cli import main
from opshift.fix.fixer import fix_proto
from opshift.graph import ir_versions
from tests.conftest import if_with_marked_branch, make_model

vi = h.make_tensor_value_info


def _node_metadata(m: onnx.ModelProto) -> int:
    return ir_versions.annotations(m).get("node metadata", 0)


def _ir_defects(m: onnx.ModelProto) -> list[dict]:
    return [d for d in opshift.inspect(m).defects["changes"] if d["kind"] == "ir_version"]


def test_dynamo_export_to_opset_9_is_written_at_ir_4_without_node_metadata():
    m = dynamo_ir10_metadata()
    out = opshift.convert(m, 9)
    assert out.ir_version == 4 and opshift.opsets.opset_of(out) == 9
    assert ir_versions.annotations(out) == {}
    onnx.checker.check_model(out, full_check=True)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    report = opshift.verify(m, out, {"x": x})
    assert report.ok, report
    assert _ir_defects(out) == []
    fixed = onnx.ModelProto()
    fixed.CopyFrom(out)
    assert not fix_proto(fixed).modified and fixed.ir_version == 4


def test_convert_says_what_it_dropped():
    from opshift.convert.engine import convert_proto

    m = dynamo_ir10_metadata()
    result = convert_proto(m, 9)
    assert result.ir_version == (10, 4)
    (note,) = result.notes
    assert "node metadata (6)" in note and "value metadata (1)" in note
    assert "IR 4 (onnx 1.4.1) does not define them" in note and "IR 10" in note
    assert result.to_dict()["notes"] == [note]


def test_convert_down_to_an_era_that_defines_annotations_keeps_them():
    out = opshift.convert(dynamo_ir10_metadata(), 21)  # IR 10's era
    assert out.ir_version == 10 and _node_metadata(out) == 6


def test_convert_up_keeps_annotations_and_the_ir_version():
    m = dynamo_ir10_metadata()
    for n in m.graph.node:
        if n.op_type == "ReduceMean":
            n.input.pop()
            n.attribute.append(h.make_attribute("axes", [1]))
    m.opset_import[0].version = 17
    out = opshift.convert(m, 18)
    assert out.ir_version == 10 and _node_metadata(out) == 6


def test_cli_convert_then_inspect_reports_no_ir_defect(tmp_path, capsys):
    src, dst = tmp_path / "dynamo.onnx", tmp_path / "out.onnx"
    onnx.save(dynamo_ir10_metadata(), src)
    assert main(["convert", str(src), "--opset", "9", "-o", str(dst)]) == 0
    out = onnx.load(dst)
    assert out.ir_version == 4 and _node_metadata(out) == 0
    onnx.checker.check_model(out, full_check=True)
    capsys.readouterr()
    assert main(["inspect", str(dst), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert not [d for d in report["details"]["defects"]["changes"] if d["kind"] == "ir_version"]
    assert main(["fix", str(dst), "--dry-run"]) == 0


def _relu(opset: int, ir: int, extra=()) -> onnx.ModelProto:
    return make_model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [3])],
                      [vi("y", T.FLOAT, [3])], opset=opset, ir_version=ir,
                      extra_opsets=[h.make_opsetid(d, v) for d, v in extra])


@pytest.mark.parametrize("opset,ir,extra", [
    (17, 10, ()),  # a dynamo-era file
    (12, 8, ()),  # onnx 1.12's make_model at opset 12
    (9, 4, ()),  # tf2onnx at opset 9
    (9, 4, (("ai.onnx.ml", 2),)),  # ... importing ai.onnx.ml 2, as tf2onnx does
    (13, 14, ()),
    (9, 10, ()),  # above its opset's era: every runtime reading IR 10 runs opset 9
    (13, 3, ()),  # below: runtimes of opset 13's era read IR 3
])
def test_ordinary_pairings_are_no_defect_and_fix_leaves_them(opset, ir, extra):
    m = _relu(opset, ir, extra)
    assert _ir_defects(m) == []
    res = fix_proto(m)
    assert not res.modified and m.ir_version == ir


def test_fix_drops_node_metadata_an_ir_4_model_holds_rather_than_raising_it():
    """What an older convert wrote: IR 4 at opset 9 with IR 10's node metadata."""
    m = _relu(9, 4)
    m.graph.node[0].metadata_props.add(key="k", value="v")
    (d,) = _ir_defects(m)
    assert d["what"] == "dropped node metadata (1)" and "IR 4 (onnx 1.4.1)" in d["why"]
    res = fix_proto(m)
    assert res.modified and m.ir_version == 4 and _node_metadata(m) == 0
    onnx.checker.check_model(m, full_check=True)


def test_fix_raises_what_the_content_needs_naming_the_era():
    m = make_model([h.make_node("Add", ["x", "c"], ["y"])], [vi("x", T.FLOAT, [3])],
                   [vi("y", T.FLOAT, [3])], opset=7,
                   initializers=[nh.from_array(np.ones(3, np.float32), "c")])
    assert m.ir_version == 3
    (d,) = _ir_defects(m)
    assert d["what"] == "IR version 3 -> 4"
    assert "initializers that are not graph inputs need IR 4 (onnx 1.4.1)" in d["why"]
    fix_proto(m)
    assert m.ir_version == 4
    onnx.checker.check_model(m, full_check=True)


def test_overloads_in_a_subgraph_need_ir_10_and_metadata_there_is_dropped_below_it():
    def overload(n):
        n.overload = "o"

    def metadata(n):
        n.metadata_props.add(key="k", value="v")

    model = if_with_marked_branch
    m = model(overload, 9)
    assert ir_versions.content_need(m) == (10, "node overloads")
    fix_proto(m)
    assert m.ir_version == 10
    m = model(metadata, 9)
    fix_proto(m)
    assert m.ir_version == 9 and ir_versions.annotations(m) == {}
    m = model(metadata, 10)
    assert not fix_proto(m).modified and _node_metadata(m) == 1


def test_era_names_come_from_onnx_version_table():
    assert ir_versions.named(4) == "IR 4 (onnx 1.4.1)"
    assert ir_versions.named(10) == "IR 10 (onnx 1.16.0)"
    assert ir_versions.imports_ir(_relu(9, 4, (("ai.onnx.ml", 2),))) == 6
    assert ir_versions.imports_ir(_relu(17, 10)) == 8
