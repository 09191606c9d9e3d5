"""A change's label says what became of the node: its op's versions (``PRelu-6->16``), or
what replaced it when it is no longer that op (``Resize-11 -> Upsample-9``), never None."""

from __future__ import annotations

import json

import numpy as np
import onnx
from clirun import opshift
from conftest import make_model, vi
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _range(path):
    onnx.save(make_model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="Range_1")],
                         [vi(n, F, []) for n in "sld"], [vi("y", F, [None])], opset=11), path)
    return path


def _resize(path):
    consts = [numpy_helper.from_array(np.array([], np.float32), "roi"),
              numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    onnx.save(make_model([helper.make_node(
        "Resize", ["x", "roi", "scales"], ["y"], name="Resize_165", mode="nearest",
        coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
        [vi("x", F, [1, 1, 2, 2])], [vi("y", F, [1, 1, 4, 4])], opset=11,
        initializers=consts), path)
    return path


def _convert(src, out, *flags):
    p = opshift("convert", src, "--opset", "9", "-o", out, *flags)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_an_op_replaced_by_another_names_it(tmp_path):
    src = _resize(tmp_path / "resize.onnx")
    text = _convert(src, tmp_path / "o.onnx", "-v")
    assert "Resize_165 (Resize-11 -> Upsample-9): Resize-11->10: " in text
    assert "; Resize-10: written as Upsample-9 -- " in text
    (change,) = json.loads(_convert(src, tmp_path / "o.onnx", "--json", "--force"))["changes"]
    assert change["op"] == "Resize-11 -> Upsample-9"
    assert [n.op_type for n in onnx.load(tmp_path / "o.onnx").graph.node] == ["Upsample"]


def test_an_op_written_as_several_names_the_one_computing_its_output(tmp_path):
    src = _range(tmp_path / "range.onnx")
    out = tmp_path / "o.onnx"
    text = _convert(src, out, "-v")
    nodes = onnx.load(out).graph.node
    assert nodes[-1].op_type == "Loop" and nodes[-1].output[-1] == "y"
    label = f"Range-11 -> Loop-1 + {len(nodes) - 1} nodes"
    assert f"Range_1 ({label}): Range-11: Range written as its count and a Loop" in text
    assert "None" not in text and "Range-11->11" not in text
    (change,) = json.loads(_convert(src, out, "--json", "--force"))["changes"]
    assert change["op"] == label and change["what"].startswith("Range-11: Range written as")


def test_a_refusal_names_the_target_opset_not_none(tmp_path):
    src = tmp_path / "resize.onnx"
    onnx.save(make_model([helper.make_node("Resize", ["x", "roi", "scales"], ["y"],
                                           name="Resize_165", mode="linear")],
                         [vi("x", F, [1, 1, 2, 2])], [vi("y", F, [1, 1, 4, 4])], opset=11,
                         initializers=[numpy_helper.from_array(np.array([], np.float32), "roi"),
                                       numpy_helper.from_array(
                                           np.array([1, 1, 2, 2], np.float32), "scales")]),
              src)
    p = opshift("convert", src, "--opset", "9", "-o", tmp_path / "o.onnx")
    assert p.returncode == 2 and "None" not in p.stderr
    assert "node 'Resize_165' (Resize-11 -> opset 9, graph 'g'): step Resize-11 -> " \
        "Resize-10: no exact adapter" in p.stderr


def test_an_if_replaced_by_the_branch_it_takes_says_so(tmp_path):
    from test_convert_if_shapes import _squeeze_if_last_is_1

    src = tmp_path / "in.onnx"
    onnx.save(_squeeze_if_last_is_1(("N", "T")), src)
    d = json.loads(_convert(src, tmp_path / "o.onnx", "--input-shape", "x:2,1", "--json"))
    labels = {c["kind"]: c["op"] for c in d["changes"] if "kind" in c}
    assert labels["take_branch"] == "If-13 -> its then branch"
    assert "None" not in json.dumps(d["changes"])
